// aot_manifest.cpp — reading manifest.json, picking a kernel, planning the grid, packing arguments.
#include "aot_manifest.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "base/errors.h"
#include "kernel_fields.h"

namespace kvf {
namespace {

using json = nlohmann::json;

// Typed access to one JSON object with errors that name the manifest and the JSON pointer.
class Reader {
 public:
  Reader(const json& v, std::string path, const std::string& origin) : v_(v), path_(std::move(path)), origin_(origin) {
    if (!v_.is_object()) fail("", "expected an object");
  }
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const {
    throw InputError(origin_, key.empty() ? path_ : path_ + "/" + key, msg);
  }
  const json& at(const std::string& key) const {
    auto it = v_.find(key);
    if (it == v_.end()) fail(key, "missing");
    return *it;
  }
  std::string str(const std::string& key) const {
    const json& x = at(key);
    if (!x.is_string()) fail(key, "expected a string");
    return x.get<std::string>();
  }
  int64_t integer(const std::string& key, int64_t lo, int64_t hi) const {
    const json& x = at(key);
    if (!x.is_number_integer() || x.get<int64_t>() < lo || x.get<int64_t>() > hi)
      fail(key, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return x.get<int64_t>();
  }
  const json& array(const std::string& key) const {
    const json& x = at(key);
    if (!x.is_array()) fail(key, "expected an array");
    return x;
  }
  std::string child(const std::string& key) const { return path_ + "/" + key; }

 private:
  const json& v_;
  std::string path_;
  const std::string& origin_;
};

// The manifest's name list must number the enum exactly as kvf does (index i = value i).
template <typename E, size_t N>
void check_numbering(const Reader& r, const std::string& key, const std::array<E, N>& values) {
  const json& names = r.array(key);
  std::string want;
  for (E e : values) want += (want.empty() ? "" : ", ") + std::string(to_string(e));
  bool same = names.size() == N;
  for (size_t i = 0; same && i < N; ++i)
    same = names[i].is_string() && names[i].get<std::string>() == to_string(values[i]);
  if (!same) r.fail(key, "expected [" + want + "] (kvf's numbering; rebuild the kernels with this kvfuzz)");
}

ParamType param_type(const Reader& r, const std::string& type) {
  if (type == "i32") return ParamType::i32;
  if (type == "i64") return ParamType::i64;
  if (type == "scratch") return ParamType::scratch;
  if (!type.empty() && type[0] == '*') return ParamType::pointer;
  r.fail("type", "expected \"*<element>\", \"i32\", \"i64\" or \"scratch\", got \"" + type + "\"");
}

enum class KernelKind : uint8_t { append, producer, format };

// A kv_append kernel (its dtypes), the slot-mapping producer (its rows per program) or a quantised
// format's kernel (its input dtype and format).
AotKernel parse_kernel(const json& v, const std::string& path, const std::string& origin, KernelKind kind = KernelKind::append) {
  const bool producer = kind == KernelKind::producer;
  const Reader r(v, path, origin);
  AotKernel k;
  k.name = r.str("name");
  k.function = r.str("function");
  auto dtype = [&](const std::string& key) {
    const std::optional<DType> t = dtype_from_string(r.str(key));
    if (!t) r.fail(key, "expected one of " + quoted_names<DType>());
    return *t;
  };
  if (producer) {
    k.rows_per_program = r.integer("rows_per_program", 1, 1024);
  } else {
    k.input_dtype = dtype("input_dtype");
    if (kind == KernelKind::format) {
      const std::optional<QuantFormat> f = quant_format_from_string(r.str("quant_format"));
      if (!f || *f == QuantFormat::none) r.fail("quant_format", "expected one of " + quoted_quant_formats() + " but none");
      k.quant_format = *f;
      k.cache_dtype = format_code_dtype(*f);
    } else {
      k.cache_dtype = dtype("cache_dtype");
    }
    const std::optional<IndexType> slot = index_type_from_string(r.str("slot_type"));
    if (!slot) r.fail("slot_type", "expected one of " + quoted_names<IndexType>());
    k.slot_type = *slot;
  }
  k.num_warps = static_cast<int>(r.integer("num_warps", 1, 32));
  k.shared_bytes = static_cast<int>(r.integer("shared_bytes", 0, 1 << 20));
  const json& cluster = r.array("cluster_dims");
  if (cluster.size() != 3) r.fail("cluster_dims", "expected 3 integers");
  for (size_t i = 0; i < 3; ++i) {
    if (!cluster[i].is_number_integer() || cluster[i].get<int64_t>() < 1 || cluster[i].get<int64_t>() > 16)
      r.fail("cluster_dims/" + std::to_string(i), "expected an integer in [1, 16]");
    k.cluster_dims[i] = cluster[i].get<int>();
  }
  k.arch = r.str("arch");
  const json& params = r.array("params");
  for (size_t i = 0; i < params.size(); ++i) {
    const Reader pr(params[i], r.child("params/" + std::to_string(i)), origin);
    k.params.push_back({pr.str("name"), param_type(pr, pr.str("type"))});
  }
  k.cubin = r.str("cubin");
  k.cubin_bytes = r.integer("cubin_bytes", 1, std::numeric_limits<int32_t>::max());
  return k;
}

// A launch argument as the loader knows it: a device address or an integer.
struct ArgValue {
  bool is_pointer = false;
  int64_t value = 0;
};

ArgValue pointer(const void* p) { return {true, static_cast<int64_t>(reinterpret_cast<uintptr_t>(p))}; }
ArgValue integer(int64_t v) { return {false, v}; }

// The value of a per-field parameter (k_stride_block, ..., v_stride_dim1) of field f, or nullopt.
std::optional<ArgValue> field_argument(const std::string& suffix, const KernelField& f) {
  if (suffix == "stride_block") return integer(f.stride_block);
  if (suffix == "stride_pos") return integer(f.stride_pos);
  if (suffix == "stride_head") return integer(f.stride_head);
  if (suffix == "dim_x") return integer(f.x);
  if (suffix == "stride_dim0") return integer(f.stride_dim0);
  if (suffix == "stride_dim1") return integer(f.stride_dim1);
  return std::nullopt;
}

// The value of kv_append_kernel's parameter `name` (kernels/triton/kvfuzz_triton/kv_append.py);
// fields[0] is K's addressing, fields[1] V's.
std::optional<ArgValue> argument(const std::string& name, const KvAppendParams& p, const AotLaunchPlan& plan,
                                 const KernelField (&fields)[2]) {
  const bool dynamic = p.scale_kind == ScaleKind::per_token_head;
  if (name == "key_ptr") return pointer(p.key);
  if (name == "value_ptr") return pointer(p.value);
  if (name == "slot_ptr") return pointer(p.slot_mapping);
  if (name == "k_cache_ptr") return pointer(p.k_cache);
  if (name == "v_cache_ptr") return pointer(p.v_cache);
  if (name == "k_scale_ptr") return pointer(dynamic ? static_cast<const void*>(p.k_scale_cache) : p.k_scale);
  if (name == "v_scale_ptr") return pointer(dynamic ? static_cast<const void*>(p.v_scale_cache) : p.v_scale);
  if (name == "invalid_slots_ptr") return pointer(p.invalid_slots);
  if (name == "num_heads") return integer(p.num_heads);
  if (name == "head_dim") return integer(p.head_dim);
  if (name == "key_stride_token") return integer(p.key_stride_token);
  if (name == "key_stride_head") return integer(p.key_stride_head);
  if (name == "value_stride_token") return integer(p.value_stride_token);
  if (name == "value_stride_head") return integer(p.value_stride_head);
  if (name == "num_blocks") return integer(p.cache.num_blocks);
  if (name == "block_size") return integer(p.cache.block_size);
  if (name.rfind("k_", 0) == 0)
    if (std::optional<ArgValue> v = field_argument(name.substr(2), fields[0])) return v;
  if (name.rfind("v_", 0) == 0)
    if (std::optional<ArgValue> v = field_argument(name.substr(2), fields[1])) return v;
  if (name == "scale_stride_block") return integer(p.scale_cache.stride_block);
  if (name == "scale_stride_pos") return integer(p.scale_cache.stride_pos);
  if (name == "scale_stride_head") return integer(p.scale_cache.stride_head);
  if (name == "scale_kind") return integer(static_cast<int64_t>(p.scale_kind));
  if (name == "has_counter") return integer(p.invalid_slots != nullptr ? 1 : 0);
  if (name == "heads_per_program") return integer(plan.heads_per_program);
  if (name == "value_head_dim") return integer(value_dim(p));
  if (name == "has_value") return integer(p.has_value ? 1 : 0);
  if (name == "rope_ptr") return pointer(p.rope);
  if (name == "rope_stride_token") return integer(p.rope_stride_token);
  if (name == "rope_stride_head") return integer(p.rope_stride_head);
  if (name == "rope_dim") return integer(p.rope_dim);
  if (name == "csr") return integer(p.csr_batch_indices != nullptr ? 1 : 0);
  if (name == "csr_batch_ptr") return pointer(p.csr_batch_indices);
  if (name == "csr_pos_ptr") return pointer(p.csr_positions);
  if (name == "csr_indices_ptr") return pointer(p.csr_kv_indices);
  if (name == "csr_indptr_ptr") return pointer(p.csr_kv_indptr);
  if (name == "window") return integer(p.window_positions != nullptr ? 1 : 0);
  if (name == "window_size") return integer(p.window_size);
  if (name == "window_sinks") return integer(p.window_sinks);
  if (name == "window_pos_ptr") return pointer(p.window_positions);
  if (name == "window_len_ptr") return pointer(p.window_seq_lens);
  if (name == "cp") return integer(p.cp_positions != nullptr ? 1 : 0);
  if (name == "cp_rank") return integer(p.cp_rank);
  if (name == "cp_world_size") return integer(p.cp_world_size);
  if (name == "cp_interleave") return integer(p.cp_interleave);
  if (name == "cp_pos_ptr") return pointer(p.cp_positions);
  return std::nullopt;
}

// The value of a format field's parameter (kc_offset, ..., rp_dim1) of field f, or nullopt.
std::optional<ArgValue> format_field_argument(const std::string& suffix, const FormatKernelField& f) {
  if (suffix == "offset") return integer(f.offset);
  if (suffix == "block") return integer(f.block);
  if (suffix == "pos_x") return integer(f.pos_x);
  if (suffix == "pos0") return integer(f.pos0);
  if (suffix == "pos1") return integer(f.pos1);
  if (suffix == "head") return integer(f.head);
  if (suffix == "dim_x") return integer(f.dim_x);
  if (suffix == "dim0") return integer(f.dim0);
  if (suffix == "dim1") return integer(f.dim1);
  return std::nullopt;
}

// The value of kv_append_format_kernel's parameter `name` (kernels/triton/kvfuzz_triton/kv_append_format.py);
// fields: kc, vc, ks, vs, kz, vz, rp.
std::optional<ArgValue> format_argument(const std::string& name, const KvAppendParams& p,
                                        const std::map<std::string, FormatKernelField>& fields) {
  const bool ds_mla = p.quant_format == QuantFormat::ds_mla;
  const bool has_value = p.has_value && !ds_mla && p.quant_format != QuantFormat::indexer_k;
  const bool nvfp4 = p.quant_format == QuantFormat::nvfp4;
  const FormatRules& r = p.format_rules;
  if (name == "key_ptr") return pointer(p.key);
  if (name == "value_ptr") return pointer(has_value ? p.value : nullptr);
  if (name == "rope_ptr") return pointer(ds_mla ? p.rope : nullptr);
  if (name == "slot_ptr") return pointer(p.slot_mapping);
  if (name == "cache_ptr") return pointer(p.format_cache);
  if (name == "scales_ptr") return pointer(p.format_scales);
  if (name == "k_global_ptr") return pointer(nvfp4 ? p.k_scale : nullptr);
  if (name == "v_global_ptr") return pointer(nvfp4 ? p.v_scale : nullptr);
  if (name == "invalid_slots_ptr") return pointer(p.invalid_slots);
  if (name == "num_heads") return integer(p.num_heads);
  if (name == "head_dim") return integer(p.head_dim);
  if (name == "latent_dim") return integer(ds_mla ? p.latent_dim : p.head_dim);
  if (name == "rope_dim") return integer(ds_mla ? p.rope_dim : 0);
  if (name == "key_stride_token") return integer(p.key_stride_token);
  if (name == "key_stride_head") return integer(p.key_stride_head);
  if (name == "value_stride_token") return integer(p.value_stride_token);
  if (name == "value_stride_head") return integer(p.value_stride_head);
  if (name == "rope_stride_token") return integer(p.rope_stride_token);
  if (name == "rope_stride_head") return integer(p.rope_stride_head);
  if (name == "num_blocks") return integer(p.cache.num_blocks);
  if (name == "block_size") return integer(p.cache.block_size);
  if (name == "has_value") return integer(has_value ? 1 : 0);
  if (name == "has_counter") return integer(p.invalid_slots != nullptr ? 1 : 0);
  if (name == "nvfp4_rule") return integer(r.nvfp4);
  if (name == "mx_rule") return integer(r.mx);
  if (name == "ds_mla_rule") return integer(r.ds_mla);
  if (name == "indexer_rule") return integer(r.indexer);
  if (name == "asym_arith") return integer(r.asym_arith);
  if (name == "asym_lanes") return integer(r.asym_lanes);
  if (name == "int4_pairing") return integer(r.int4_pairing);
  if (name.size() > 3 && name[2] == '_')
    if (const auto it = fields.find(name.substr(0, 2)); it != fields.end())
      if (std::optional<ArgValue> v = format_field_argument(name.substr(3), it->second)) return v;
  // Row addressing: kv_append_kernel's arguments of the same names.
  static const char* const kShared[] = {"csr", "csr_batch_ptr", "csr_pos_ptr", "csr_indices_ptr", "csr_indptr_ptr",
                                        "window", "window_size", "window_sinks", "window_pos_ptr", "window_len_ptr",
                                        "cp", "cp_rank", "cp_world_size", "cp_interleave", "cp_pos_ptr"};
  for (const char* shared : kShared)
    if (name == shared) {
      const KernelField none[2];
      return argument(name, p, AotLaunchPlan{}, none);
    }
  return std::nullopt;
}

// The value of cp_slot_mapping_kernel's parameter `name` (kernels/triton/kvfuzz_triton/cp_slot_mapping.py).
std::optional<ArgValue> cp_argument(const std::string& name, const CpSlotMappingParams& p) {
  if (name == "positions_ptr") return pointer(p.positions);
  if (name == "requests_ptr") return pointer(p.requests);
  if (name == "block_tables_ptr") return pointer(p.block_tables);
  if (name == "slot_mapping_ptr") return pointer(p.slot_mapping);
  if (name == "table_width") return integer(p.table_width);
  if (name == "num_rows") return integer(p.num_rows);
  if (name == "block_size") return integer(p.block_size);
  if (name == "rank") return integer(p.rank);
  if (name == "world_size") return integer(p.world_size);
  if (name == "interleave") return integer(p.interleave);
  return std::nullopt;
}

// Packs k's parameters in order, each from `value(name)`: "" or why not.
template <typename Lookup>
std::string pack(const AotKernel& k, const Lookup& value, PackedArgs& out) {
  out.cells.assign(k.params.size(), {});
  out.pointers.assign(k.params.size(), nullptr);
  for (size_t i = 0; i < k.params.size(); ++i) {
    const KernelParam& param = k.params[i];
    std::array<std::byte, 8>& cell = out.cells[i];
    out.pointers[i] = cell.data();
    if (param.type == ParamType::scratch) continue;  // null
    const std::optional<ArgValue> v = value(param.name);
    if (!v) return "kernel " + k.name + " takes a parameter \"" + param.name + "\" this loader does not know";
    if (v->is_pointer != (param.type == ParamType::pointer))
      return "kernel " + k.name + ": parameter \"" + param.name + "\" is declared " +
             (param.type == ParamType::pointer ? "a pointer" : "an integer") + " but the loader has " +
             (v->is_pointer ? "a pointer" : "an integer") + " for it";
    if (param.type == ParamType::i32) {
      if (v->value < std::numeric_limits<int32_t>::min() || v->value > std::numeric_limits<int32_t>::max())
        return "kernel " + k.name + ": " + param.name + " = " + std::to_string(v->value) + " does not fit its i32 parameter";
      const int32_t narrow = static_cast<int32_t>(v->value);
      std::memcpy(cell.data(), &narrow, sizeof narrow);
    } else {
      std::memcpy(cell.data(), &v->value, sizeof v->value);
    }
  }
  return "";
}

}  // namespace

AotManifest parse_aot_manifest(const std::string& text, const std::string& origin) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw InputError(origin, "", std::string("not valid JSON: ") + e.what());
  }
  const Reader r(doc, "", origin);
  if (r.str("schema") != "kvfuzz-triton-aot/3")
    r.fail("schema", "expected \"kvfuzz-triton-aot/3\" (rebuild the kernels with this kvfuzz's kernels/triton/aot_compile.py)");
  AotManifest m;
  m.origin = origin;
  m.triton_version = r.str("triton_version");
  const Reader target(r.at("target"), "/target", origin);
  if (target.str("backend") != "cuda") target.fail("backend", "expected \"cuda\"");
  m.compute_capability = static_cast<int>(target.integer("compute_capability", 10, 1000));
  m.warp_size = static_cast<int>(target.integer("warp_size", 32, 32));
  const json& tile = r.array("tile");
  if (tile.size() != 2 || !tile[0].is_number_integer() || !tile[1].is_number_integer() || tile[0].get<int64_t>() < 1 ||
      tile[0].get<int64_t>() > 4096 || tile[1].get<int64_t>() < 1 || tile[1].get<int64_t>() > 4096)
    r.fail("tile", "expected [BLOCK_H, BLOCK_D], each in [1, 4096]");
  m.block_h = tile[0].get<int>();
  m.block_d = tile[1].get<int>();
  check_numbering(r, "dtypes", std::array{DType::f16, DType::bf16, DType::f32, DType::fp8_e4m3, DType::fp8_e5m2, DType::int8});
  check_numbering(r, "scale_kinds", std::array{ScaleKind::none, ScaleKind::per_tensor, ScaleKind::per_head,
                                               ScaleKind::per_block, ScaleKind::per_token_head});
  const json& kernels = r.array("kernels");
  for (size_t i = 0; i < kernels.size(); ++i) {
    const std::string path = "/kernels/" + std::to_string(i);
    AotKernel k = parse_kernel(kernels[i], path, origin);
    if (find_kernel(m, k.input_dtype, k.cache_dtype, k.slot_type) != nullptr)
      throw InputError(origin, path, "a second kernel for " + std::string(to_string(k.input_dtype)) + " -> " +
                                         std::string(to_string(k.cache_dtype)) + " with " +
                                         std::string(to_string(k.slot_type)) + " slots");
    m.kernels.push_back(std::move(k));
  }
  m.cp_slot_mapping = parse_kernel(r.at("cp_slot_mapping"), "/cp_slot_mapping", origin, KernelKind::producer);
  check_numbering(r, "formats", std::array{QuantFormat::none, QuantFormat::nvfp4, QuantFormat::mxfp8_e4m3,
                                           QuantFormat::mxfp8_e5m2, QuantFormat::mxfp4, QuantFormat::ds_mla,
                                           QuantFormat::indexer_k, QuantFormat::fp8_inline, QuantFormat::int8_inline,
                                           QuantFormat::asym_int8, QuantFormat::asym_int4});
  m.format_block = static_cast<int>(r.integer("format_block", 1, 4096));
  const json& formats = r.array("format_kernels");
  for (size_t i = 0; i < formats.size(); ++i) {
    const std::string path = "/format_kernels/" + std::to_string(i);
    AotKernel k = parse_kernel(formats[i], path, origin, KernelKind::format);
    if (find_format_kernel(m, k.input_dtype, k.quant_format, k.slot_type) != nullptr)
      throw InputError(origin, path, "a second kernel for " + std::string(to_string(k.input_dtype)) + " -> " +
                                         std::string(to_string(k.quant_format)) + " with " +
                                         std::string(to_string(k.slot_type)) + " slots");
    m.format_kernels.push_back(std::move(k));
  }
  return m;
}

namespace {

// Checks that kernel k's cubin is there with the size the manifest says (`path`: its manifest entry).
void check_cubin(const AotKernelSet& set, const AotKernel& k, const std::string& path) {
  const auto it = set.cubins.find(k.cubin);
  if (it == set.cubins.end()) throw InputError(set.manifest.origin, path + "/cubin", "cubin " + k.cubin + " is missing");
  if (static_cast<int64_t>(it->second.size()) != k.cubin_bytes)
    throw InputError(set.manifest.origin, path + "/cubin", "cubin " + k.cubin + " has " + std::to_string(it->second.size()) +
                                                               " bytes, the manifest says " + std::to_string(k.cubin_bytes));
}

void check_cubins(const AotKernelSet& set) {
  for (size_t i = 0; i < set.manifest.kernels.size(); ++i) check_cubin(set, set.manifest.kernels[i], "/kernels/" + std::to_string(i));
  for (size_t i = 0; i < set.manifest.format_kernels.size(); ++i)
    check_cubin(set, set.manifest.format_kernels[i], "/format_kernels/" + std::to_string(i));
  check_cubin(set, set.manifest.cp_slot_mapping, "/cp_slot_mapping");
}

}  // namespace

AotKernelSet kernel_set_from_files(const std::vector<EmbeddedFile>& files, const std::string& origin) {
  AotKernelSet set;
  const EmbeddedFile* manifest = nullptr;
  for (const EmbeddedFile& f : files) {
    if (std::string(f.name) == "manifest.json") manifest = &f;
    else set.cubins[f.name] = std::string(reinterpret_cast<const char*>(f.data), f.size);
  }
  if (manifest == nullptr) throw InputError(origin, "", "no manifest.json among the embedded Triton kernel files");
  set.manifest = parse_aot_manifest(std::string(reinterpret_cast<const char*>(manifest->data), manifest->size), origin);
  check_cubins(set);
  return set;
}

AotKernelSet kernel_set_from_directory(const std::string& dir) {
  const auto read = [&](const std::string& name, std::string& out) {
    std::ifstream in(dir + "/" + name, std::ios::binary);
    if (!in) return false;
    std::ostringstream ss;
    ss << in.rdbuf();
    out = ss.str();
    return true;
  };
  const std::string origin = dir + "/manifest.json";
  std::string text;
  if (!read("manifest.json", text))
    throw InputError(origin, "", "cannot read it (expected the --out-dir of kernels/triton/aot_compile.py)");
  AotKernelSet set;
  set.manifest = parse_aot_manifest(text, origin);
  std::vector<const AotKernel*> all;
  for (const AotKernel& k : set.manifest.kernels) all.push_back(&k);
  for (const AotKernel& k : set.manifest.format_kernels) all.push_back(&k);
  all.push_back(&set.manifest.cp_slot_mapping);
  for (const AotKernel* k : all) {
    std::string bytes;
    if (read(k->cubin, bytes)) set.cubins[k->cubin] = std::move(bytes);
  }
  check_cubins(set);
  return set;
}

const AotKernel* find_kernel(const AotManifest& m, DType input, DType cache, IndexType slot) {
  for (const AotKernel& k : m.kernels)
    if (k.input_dtype == input && k.cache_dtype == cache && k.slot_type == slot) return &k;
  return nullptr;
}

const AotKernel* find_format_kernel(const AotManifest& m, DType input, QuantFormat format, IndexType slot) {
  for (const AotKernel& k : m.format_kernels)
    if (k.input_dtype == input && k.quant_format == format && k.slot_type == slot) return &k;
  return nullptr;
}

std::string plan_format_launch(const KvAppendParams& p, AotLaunchPlan& plan) {
  plan = AotLaunchPlan{};
  if (p.num_slots > std::numeric_limits<int32_t>::max())
    return std::to_string(p.num_slots) + " slot entries exceed the grid's x limit (2^31 - 1)";
  if (p.num_heads > 65535) return std::to_string(p.num_heads) + " heads exceed the grid's y limit (65535)";
  plan.heads_per_program = 1;
  const bool empty = p.num_slots <= 0 || p.num_heads <= 0 || p.head_dim <= 0;
  plan.grid = {empty ? 0u : static_cast<uint32_t>(p.num_slots), static_cast<uint32_t>(p.num_heads < 1 ? 1 : p.num_heads), 1};
  return "";
}

std::string plan_launch(const AotManifest& m, const KvAppendParams& p, AotLaunchPlan& plan) {
  plan = AotLaunchPlan{};
  // As kvfuzz_triton.api.pick_variant: head-major where one head's consecutive slots are nearer
  // than one slot's heads (HND-like caches).
  const auto magnitude = [](int64_t v) { return v < 0 ? -v : v; };
  plan.head_major = magnitude(p.cache.stride_pos) < magnitude(p.cache.stride_head);
  const int64_t heads = p.num_heads < 1 ? 1 : p.num_heads;
  plan.heads_per_program = plan.head_major ? m.block_h : static_cast<int32_t>(heads);
  const int64_t head_programs = (heads + plan.heads_per_program - 1) / plan.heads_per_program;
  if (p.num_slots > std::numeric_limits<int32_t>::max())
    return std::to_string(p.num_slots) + " slot entries exceed the grid's x limit (2^31 - 1)";
  if (head_programs > 65535)
    return std::to_string(head_programs) + " head programs exceed the grid's y limit (65535)";
  plan.grid = {static_cast<uint32_t>(p.num_slots), static_cast<uint32_t>(head_programs), 1};
  return "";
}

std::string plan_cp_slot_mapping(const AotKernel& k, const CpSlotMappingParams& p, AotLaunchPlan& plan) {
  plan = AotLaunchPlan{};
  if (k.rows_per_program < 1) return "kernel " + k.name + " has no rows_per_program";
  const int64_t programs = (p.num_rows + k.rows_per_program - 1) / k.rows_per_program;
  if (programs > std::numeric_limits<int32_t>::max())
    return std::to_string(p.num_rows) + " slot_mapping rows exceed the producer's grid x limit";
  plan.grid = {static_cast<uint32_t>(programs < 0 ? 0 : programs), 1, 1};
  return "";
}

std::string pack_arguments(const AotKernel& k, const KvAppendParams& p, const AotLaunchPlan& plan, PackedArgs& out) {
  KernelField fields[2];
  for (int v = 0; v < 2; ++v)
    if (std::string why = kernel_field(append_field_layout(p, v == 1), fields[v]); !why.empty())
      return std::string("kernel ") + k.name + " cannot address the " + (v == 1 ? "V" : "K") + " cache: " + why;
  return pack(k, [&](const std::string& name) { return argument(name, p, plan, fields); }, out);
}

std::string pack_format_arguments(const AotKernel& k, const KvAppendParams& p, PackedArgs& out) {
  std::map<std::string, FormatKernelField> fields;
  const std::pair<const char*, const FieldLayout*> layouts[] = {
      {"kc", &p.code_layout[0]}, {"vc", &p.code_layout[1]},   {"ks", &p.scale_layout[0]}, {"vs", &p.scale_layout[1]},
      {"kz", &p.zero_layout[0]}, {"vz", &p.zero_layout[1]}, {"rp", &p.rope_layout}};
  for (const auto& [name, layout] : layouts)
    if (std::string why = format_kernel_field(*layout, fields[name]); !why.empty())
      return std::string("kernel ") + k.name + " cannot address field " + name + ": " + why;
  return pack(k, [&](const std::string& name) { return format_argument(name, p, fields); }, out);
}

std::string pack_cp_arguments(const AotKernel& k, const CpSlotMappingParams& p, PackedArgs& out) {
  return pack(k, [&](const std::string& name) { return cp_argument(name, p); }, out);
}

}  // namespace kvf
