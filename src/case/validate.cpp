// validate.cpp — semantic checks of a Case (validate.h), each problem with its JSON path.
//
// Hostile values are expected: every product and sum of declared sizes is computed in saturating
// 128-bit arithmetic, nothing is allocated in proportion to a declared size (only to arrays the case
// already holds), and the work is O(T + block-table entries + requests), never a loop over cells.
// Checks that depend on earlier ones (slot_mapping against the block tables, cell overlap against
// positive extents) run only when those earlier ones passed, so one mistake gives one problem.
#include "validate.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "placement.h"
#include "context_parallel.h"
#include "window.h"

namespace kvf {
namespace {

__extension__ typedef __int128 i128;  // __extension__: -Wpedantic accepts the GCC/Clang type

// Saturating arithmetic on non-negative values: results are clamped to kCap (2^120), far above any
// limit, so comparisons against limits stay correct and nothing overflows.
constexpr i128 kCap = i128{1} << 120;

i128 sat_add(i128 a, i128 b) { return std::min(a + b, kCap); }  // a, b in [0, kCap]
i128 sat_mul(i128 a, i128 b) {                                     // a, b in [0, kCap]
  if (a == 0 || b == 0) return 0;
  if (a > kCap / b) return kCap;
  return std::min(a * b, kCap);
}

std::string str(i128 v) {
  if (v >= kCap) return "more than 2^120";
  if (v == 0) return "0";
  const bool negative = v < 0;
  std::string digits;
  while (v != 0) {
    const int d = static_cast<int>(v % 10);
    digits.push_back(static_cast<char>('0' + (negative ? -d : d)));
    v /= 10;
  }
  if (negative) digits.push_back('-');
  std::reverse(digits.begin(), digits.end());
  return digits;
}

// "1 GiB", "1.5 MiB", "2 PiB", "17 B".
std::string format_bytes(i128 bytes) {
  if (bytes >= kCap) return "more than 2^120 bytes";
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  if (bytes < 1024) return str(bytes) + " B";
  double v = static_cast<double>(bytes);
  size_t unit = 0;
  while (v >= 1024.0 && unit + 1 < std::size(kUnits)) {
    v /= 1024.0;
    ++unit;
  }
  char buf[64];
  if (v >= 100.0 || v == static_cast<double>(static_cast<int64_t>(v))) {
    std::snprintf(buf, sizeof buf, "%.0f %s", v, kUnits[unit]);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[unit]);
  }
  return buf;
}

// One dimension of a strided tensor: `extent` indices, `stride` elements apart.
struct Dim {
  const char* name;  // used in messages ("stride_head")
  std::string path;  // JSON path blamed when this dimension's stride is too small
  int64_t stride;    // >= 0
  int64_t extent;    // >= 1
};

struct NestResult {
  const Dim* bad = nullptr;  // first dimension whose stride does not nest (points into the input), or nullptr
  i128 required = 0;         // its minimum stride: 1 + span of the smaller-stride dimensions
  std::string smaller;       // names of those dimensions, for the message
  i128 span = 0;             // largest offset: sum of (extent - 1) * stride over all dimensions
};

// The nested-strides condition (validate.h): sorted by stride, each dimension's stride exceeds the
// largest offset reachable with all smaller-stride dimensions. It implies distinct index tuples
// have distinct offsets. Dimensions of extent 1 take no part. Ties sort in the given order, so of
// two equal strides the later-listed dimension is blamed.
NestResult check_nested(const std::vector<Dim>& dims) {
  std::vector<const Dim*> order;
  for (const Dim& d : dims) {
    if (d.extent > 1) order.push_back(&d);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const Dim* a, const Dim* b) { return a->stride < b->stride; });
  NestResult r;
  for (const Dim* d : order) {
    if (r.bad == nullptr && i128{d->stride} < r.span + 1) {
      r.bad = d;
      r.required = r.span + 1;
    }
    if (r.bad == nullptr) r.smaller += (r.smaller.empty() ? "" : ", ") + std::string(d->name);
    r.span = sat_add(r.span, sat_mul(d->extent - 1, d->stride));
  }
  return r;
}

std::string nest_message(const std::string& what, const NestResult& r) {
  return what + " cells overlap: " + r.bad->name + " = " + std::to_string(r.bad->stride) +
         " must be >= " + str(r.required) + ", 1 + the span of the dimensions with smaller strides (" +
         (r.smaller.empty() ? std::string("none") : r.smaller) +
         "); strides must nest so that no two cells share an address";
}

std::string index_path(const std::string& base, size_t i) { return base + "/" + std::to_string(i); }

constexpr size_t kMaxProblems = 100;  // a hostile case cannot make validate() build a huge report

class Checker {
 public:
  explicit Checker(const Limits& limits) : limits_(limits) {}

  void add(std::string path, std::string message) {
    if (problems_.size() < kMaxProblems) {
      problems_.push_back({std::move(path), std::move(message)});
    } else if (problems_.size() == kMaxProblems) {
      problems_.push_back({"", "too many problems; stopped after " + std::to_string(kMaxProblems)});
    }
  }

  // Each returns whether the value passed.
  bool at_least(const std::string& path, int64_t v, int64_t min) {
    if (v >= min) return true;
    add(path, "expected an integer >= " + std::to_string(min) + ", got " + std::to_string(v));
    return false;
  }
  bool in_range(const std::string& path, int64_t v, int64_t min, int64_t max) {
    if (v >= min && v <= max) return true;
    add(path, "expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " +
                  std::to_string(v));
    return false;
  }
  bool buffer_fits(const std::string& path, const char* what, i128 bytes) {
    if (bytes <= limits_.max_buffer_bytes) return true;
    add(path, std::string(what) + " needs " + format_bytes(bytes) + "; the limit is " +
                  format_bytes(limits_.max_buffer_bytes) + " (--max-case-mib)");
    return false;
  }
  template <typename E>
  bool known(const std::string& path, E value, const char* what) {
    if (to_string(value) != "?") return true;
    add(path, std::string("not a valid ") + what + " (enum value " +
                  std::to_string(static_cast<int>(value)) + ")");
    return false;
  }

  // Inputs are f16, bf16 or f32; the quantised dtypes exist only in caches (docs/contract.md).
  bool float_input(const std::string& path, DType t) {
    if (t == DType::f16 || t == DType::bf16 || t == DType::f32) return true;
    add(path, std::string("expected \"f16\", \"bf16\" or \"f32\", got \"") + std::string(to_string(t)) +
                  "\"; quantised dtypes are cache-only (key and value are never quantised)");
    return false;
  }
  // Scale kind `none` exactly for float caches; scale_dist matters only for static scales, so it is
  // `unit` for none and per_token_head (one canonical form per batch, one hash). `base` is "/quant"
  // or "/genotype"; the kind's key is base + kind_key.
  void scale_choice(const std::string& base, const char* kind_key, const char* dist_key, DType cache_dtype,
                    ScaleKind kind, ScaleDist dist) {
    const bool kind_ok = known(base + "/" + kind_key, kind, "scale kind");
    const bool dist_ok = known(base + "/" + dist_key, dist, "scale distribution");
    if (!kind_ok || to_string(cache_dtype) == "?") return;
    const std::string dtype = "\"" + std::string(to_string(cache_dtype)) + "\"";
    if (is_quantized(cache_dtype) && kind == ScaleKind::none) {
      add(base + "/" + kind_key, "cache_dtype " + dtype + " is quantised and needs scales: expected scale_kind "
                                 "\"per_tensor\", \"per_head\", \"per_block\" or \"per_token_head\", got \"none\"");
      return;
    }
    if (!is_quantized(cache_dtype) && kind != ScaleKind::none) {
      add(base + "/" + kind_key, "cache_dtype " + dtype + " is not quantised: expected scale_kind \"none\", got \"" +
                                 std::string(to_string(kind)) + "\" (scales apply to fp8_e4m3, fp8_e5m2 and int8 caches)");
      return;
    }
    if (dist_ok && dist != ScaleDist::unit && (kind == ScaleKind::none || kind == ScaleKind::per_token_head)) {
      add(base + "/" + dist_key, "scale_kind \"" + std::string(to_string(kind)) +
                                 "\" has no static scales: expected scale_dist \"unit\", got \"" +
                                 std::string(to_string(dist)) + "\"");
    }
  }

  const Limits& limits() const { return limits_; }
  std::vector<ValidationProblem> take() { return std::move(problems_); }

 private:
  const Limits& limits_;
  std::vector<ValidationProblem> problems_;
};

// ---------------------------------------------------------------------------------------------

// Returns whether the shape is usable by later checks (heads and head_dim positive and in limits).
bool check_shape(const Case& c, Checker& ck) {
  bool ok = ck.in_range("/shape/num_heads", c.num_heads, 1, ck.limits().max_heads);
  ok &= ck.in_range("/shape/head_dim", c.head_dim, 1, ck.limits().max_head_dim);
  ck.at_least("/shape/num_q_heads", c.num_q_heads, 0);
  if (ck.known("/shape/input_dtype", c.input_dtype, "dtype")) {
    ok &= ck.float_input("/shape/input_dtype", c.input_dtype);
  } else {
    ok = false;
  }
  ok &= ck.known("/shape/cache_dtype", c.cache_dtype, "dtype");
  ok &= ck.known("/shape/slot_dtype", c.slot_dtype, "index type");
  if (ok && !c.has_format() && !is_classic_cache_dtype(c.cache_dtype)) {
    ck.add("/shape/cache_dtype", "\"" + std::string(to_string(c.cache_dtype)) + "\" holds a quantised format's codes or scales; a case without "
                                 "quant.format takes \"f16\", \"bf16\", \"f32\", \"fp8_e4m3\", \"fp8_e5m2\" or \"int8\"");
    ok = false;
  }
  if (ok && c.has_format() && to_string(c.quant_format) != "?" && c.cache_dtype != format_code_dtype(c.quant_format)) {
    ck.add("/shape/cache_dtype", "format " + std::string(to_string(c.quant_format)) + " stores " +
                                     std::string(to_string(format_code_dtype(c.quant_format))) + " codes: expected \"" +
                                     std::string(to_string(format_code_dtype(c.quant_format))) + "\", got \"" +
                                     std::string(to_string(c.cache_dtype)) + "\"");
    ok = false;
  }
  return ok;
}

// The format family against the shape, layout and scale kind (docs/formats.md, "Families"); returns
// whether the family's own fields are usable by later checks.
bool check_format(const Case& c, bool shape_ok, Checker& ck) {
  if (!ck.known("/format/family", c.family, "format family")) return false;
  const std::string family = std::string(to_string(c.family));
  bool ok = true;
  const bool plain_layout = c.layout == Layout::paged_nhd || c.layout == Layout::paged_hnd ||
                            c.layout == Layout::contiguous_bshd || c.layout == Layout::contiguous_bhsd;
  if (c.family != Family::kv && to_string(c.layout) != "?" && !plain_layout) {
    ck.add("/cache/layout", "family " + family + " takes the layouts paged_nhd, paged_hnd, contiguous_bshd and contiguous_bhsd; got " +
                                std::string(to_string(c.layout)) + " (a layout that pairs K with V)");
    ok = false;
  }
  if (c.family == Family::kv_split) {
    ok &= ck.in_range("/format/value_head_dim", c.value_head_dim, 1, ck.limits().max_head_dim);
    if (!c.value_cache) {
      ck.add("/format/value_cache", "family kv_split needs V's strides (value_cache)");
      ok = false;
    } else if (c.value_cache->num_blocks != c.cache.num_blocks || c.value_cache->block_size != c.cache.block_size) {
      ck.add("/format/value_cache", "an in-memory case whose V geometry has other blocks than K's; expected num_blocks " +
                                        std::to_string(c.cache.num_blocks) + " and block_size " + std::to_string(c.cache.block_size));
      ok = false;
    }
  } else {
    if (c.value_head_dim != 0) {
      ck.add("/format/value_head_dim", "family " + family + " has no value_head_dim (V's head dim is K's, or there is no V)");
      ok = false;
    }
    if (c.value_cache) {
      ck.add("/format/value_cache", "family " + family + " has no value_cache (V's strides are K's, or there is no V)");
      ok = false;
    }
  }
  if (c.family == Family::mla) {
    if (shape_ok && c.num_heads != 1) {
      ck.add("/shape/num_heads", "an MLA latent cache has one head; got " + std::to_string(c.num_heads));
      ok = false;
    }
    if (shape_ok && !ck.in_range("/format/rope_dim", c.rope_dim, 1, std::max<int64_t>(1, c.head_dim - 1))) ok = false;
    if (c.scale_kind != ScaleKind::none && c.scale_kind != ScaleKind::per_tensor && to_string(c.scale_kind) != "?") {
      ck.add("/quant/scale_kind", "an MLA latent cache takes scale_kind \"none\" or \"per_tensor\" (one scale for the whole entry); got \"" +
                                      std::string(to_string(c.scale_kind)) + "\"");
      ok = false;
    }
  } else if (c.rope_dim != 0) {
    ck.add("/format/rope_dim", "family " + family + " has no rope_dim: only an MLA entry concatenates kv_c and k_pe");
    ok = false;
  }
  if (!c.has_value()) {  // nothing may describe the V the family does not have
    const std::pair<const char*, int64_t> zero[] = {{"/cache/v_offset", c.cache_v_offset},
                                                    {"/input/value/offset", c.value.offset},
                                                    {"/input/value/stride_token", c.value.stride_token},
                                                    {"/input/value/stride_head", c.value.stride_head}};
    for (const auto& [path, v] : zero) {
      if (v == 0) continue;
      ck.add(path, "expected 0, got " + std::to_string(v) + ": family " + family + " has no V");
      ok = false;
    }
  }
  return ok;
}

// The cache of a family other than kv: K (or the latent entry) nested in itself, V (kv_split) nested
// in its own strides and entirely after K's last element, both inside the buffer.
bool check_field_caches(const Case& c, Checker& ck) {
  const CacheGeometry& g = c.cache;
  // One field's dims [dim, head, pos, block], innermost first, with their JSON paths.
  auto field_dims = [&](const char* dim_path, const std::string& strides, const CacheGeometry& f, int64_t dims) {
    return std::vector<Dim>{{"dim", dim_path, 1, dims},
                            {"stride_head", strides + "/stride_head", f.stride_head, c.num_heads},
                            {"stride_pos", strides + "/stride_pos", f.stride_pos, g.block_size},
                            {"stride_block", strides + "/stride_block", f.stride_block, g.num_blocks}};
  };
  const std::vector<Dim> k_dims = field_dims("/shape/head_dim", "/cache", g, c.head_dim);
  const NestResult k = check_nested(k_dims);
  if (k.bad != nullptr) {
    ck.add(k.bad->path, nest_message(c.family == Family::mla ? "latent cache" : "K cache", k));
    return false;
  }
  i128 end = sat_add(c.cache_k_offset, sat_add(k.span, 1));
  if (c.family == Family::kv_split && c.value_cache) {
    const CacheGeometry& vg = *c.value_cache;
    bool ok = ck.at_least("/format/value_cache/stride_block", vg.stride_block, 0);
    ok &= ck.at_least("/format/value_cache/stride_pos", vg.stride_pos, 0);
    ok &= ck.at_least("/format/value_cache/stride_head", vg.stride_head, 0);
    if (!ok || c.value_head_dim < 1) return false;
    const std::vector<Dim> v_dims = field_dims("/format/value_head_dim", "/format/value_cache", vg, c.value_head_dim);
    const NestResult v = check_nested(v_dims);
    if (v.bad != nullptr) {
      ck.add(v.bad->path, nest_message("V cache", v));
      return false;
    }
    if (c.cache_v_offset < end) {
      ck.add("/cache/v_offset", "V must start after K's last element (kv_split caches are not interleaved): K ends at element " +
                                    str(end - 1) + ", v_offset is " + std::to_string(c.cache_v_offset));
      return false;
    }
    end = sat_add(c.cache_v_offset, sat_add(v.span, 1));
  }
  if (end > c.cache_buffer_elems) {
    ck.add("/cache/buffer_elems", std::string(c.has_value() ? "K and V need " : "the cache needs ") + str(end) +
                                      " elements of the cache buffer, which has " + std::to_string(c.cache_buffer_elems));
    return false;
  }
  return true;
}

// A quantised format's fields (quant_fields.cpp): the format's own requirements on the shape,
// family, layout and strides, then every element of every field inside its buffer and no two
// elements on one nibble, counted element by element (a case of a format is at most 256 MiB a
// buffer). Returns whether the fields are sound.
bool check_format_fields(const Case& c, Checker& ck) {
  const QuantFormat fmt = c.quant_format;
  const std::string name = "format " + std::string(to_string(fmt));
  const int64_t D = c.head_dim, H = c.num_heads;
  const CacheGeometry& g = c.cache;
  bool ok = true;
  const Family want = fmt == QuantFormat::ds_mla ? Family::mla : fmt == QuantFormat::indexer_k ? Family::k_only : Family::kv;
  if (c.family != want) {
    ck.add("/format/family", name + " stores family " + std::string(to_string(want)) + "; got " + std::string(to_string(c.family)));
    return false;
  }
  if (c.layout == Layout::vllm_legacy) {
    ck.add("/cache/layout", name + " lays its fields out from the cache geometry: vllm_legacy has none");
    return false;
  }
  const int64_t latent = D - c.rope_dim, group = format_group(fmt, latent);
  if (latent % group != 0) {
    ck.add("/shape/head_dim", name + " keeps one scale per " + std::to_string(group) + " dims: expected " +
                                  (fmt == QuantFormat::ds_mla ? "head_dim - rope_dim" : "head_dim") + " a multiple of " +
                                  std::to_string(group) + ", got " + std::to_string(latent));
    ok = false;
  }
  if (fmt == QuantFormat::asym_int4 && D % 2 != 0) {
    ck.add("/shape/head_dim", name + " packs two codes per byte: expected an even head_dim, got " + std::to_string(D));
    ok = false;
  }
  if ((fmt == QuantFormat::ds_mla || fmt == QuantFormat::indexer_k) && H != 1) {
    ck.add("/shape/num_heads", name + " has one head; got " + std::to_string(H));
    ok = false;
  }
  if (fmt == QuantFormat::ds_mla && c.input_dtype == DType::f32) {
    ck.add("/shape/input_dtype", name + " stores its rope dims in the input dtype: expected \"f16\" or \"bf16\", got \"f32\"");
    ok = false;
  }
  if (fmt == QuantFormat::indexer_k && g.stride_pos != D) {
    ck.add("/cache/stride_pos", name + " keeps a block's rows of codes dense, then its scales: expected stride_pos = head_dim = " +
                                    std::to_string(D) + ", got " + std::to_string(g.stride_pos));
    ok = false;
  }
  if (fmt == QuantFormat::nvfp4 && c.quant_rules.scale_layout != ScaleLayout::linear && (g.block_size % 4 != 0 || (D / 16) % 4 != 0)) {
    ck.add("/quant/rules/scale_layout", "the swizzled NVFP4 scale layout transposes 4 x 4 tiles of 4 tokens by 4 scales: expected "
                                        "block_size and head_dim / 16 multiples of 4, got " +
                                            std::to_string(g.block_size) + " and " + std::to_string(D / 16));
    ok = false;
  }
  // fp32 scales (and a record's 16-bit rope) inside the byte cache: their byte offsets aligned.
  if (format_scales_in_cache(fmt)) {
    const std::pair<const char*, int64_t> aligned[] = {{"/cache/k_offset", c.cache_k_offset}, {"/cache/v_offset", c.cache_v_offset},
                                                       {"/cache/stride_block", g.stride_block}, {"/cache/stride_pos", g.stride_pos},
                                                       {"/cache/stride_head", g.stride_head}, {"/shape/head_dim", D}};
    for (const auto& [path, v] : aligned)
      if (v % 4 != 0) {
        ck.add(path, name + " keeps fp32 scales among its codes: expected a multiple of 4 bytes, got " + std::to_string(v));
        ok = false;
      }
  }
  if (!ok) return false;

  // Every element inside its buffer, no nibble held twice.
  const int64_t bytes[2] = {c.cache_buffer_elems, c.uses_scale_cache() ? c.scale_cache_elems * c.scale_cache_elem_size() : 0};
  const char* buffer_path[2] = {"/cache/buffer_elems", "/quant/scale_cache_elems"};
  constexpr int64_t kMaxBytes = int64_t{1} << 28;
  for (int b = 0; b < 2; ++b)
    if (bytes[b] > kMaxBytes) {
      ck.add(buffer_path[b], name + ": a buffer of " + std::to_string(bytes[b]) + " bytes; quantised formats are checked up to " +
                                 std::to_string(kMaxBytes) + " bytes a buffer");
      return false;
    }
  std::vector<int8_t> owner[2] = {std::vector<int8_t>(static_cast<size_t>(2 * bytes[0]), -1),
                                  std::vector<int8_t>(static_cast<size_t>(2 * bytes[1]), -1)};
  const CacheFields fields = c.fields();
  for (int i = 0; i < fields.count; ++i) {
    const CacheField& f = fields.field[i];
    const int b = f.buffer == FieldBuffer::cache ? 0 : 1;
    const int bits = dtype_bits(f.dtype);
    const int64_t nibbles = bits / 4;  // nibbles an element spans
    for (int64_t blk = 0; blk < g.num_blocks; ++blk)
      for (int64_t p = 0; p < g.block_size; ++p)
        for (int64_t h = 0; h < f.num_heads; ++h)
          for (int64_t d = 0; d < f.head_dim; ++d) {
            const int64_t e = field_offset(f.layout, blk, p, h, d);
            const int64_t first = e * nibbles;  // the element's first nibble
            const auto cell = [&]() {  // only for a message
              return std::string(f.name) + " (block " + std::to_string(blk) + ", pos " + std::to_string(p) + ", head " + std::to_string(h) +
                     (f.role == FieldRole::data ? ", dim " : ", group ") + std::to_string(d) + ")";
            };
            if (e < 0 || first + nibbles > 2 * bytes[b]) {
              ck.add(buffer_path[b], name + ": " + cell() + " lies at byte " + std::to_string(first / 2) + ", outside the " +
                                         (b == 0 ? "cache" : "scale cache") + " buffer of " + std::to_string(bytes[b]) + " bytes");
              return false;
            }
            for (int64_t n = first; n < first + nibbles; ++n) {
              int8_t& o = owner[b][static_cast<size_t>(n)];
              if (o >= 0) {
                ck.add(b == 0 ? "/cache" : "/quant/scale_cache", name + ": " + cell() + " overlaps a cell of " + fields.field[o].name +
                                                                     " at byte " + std::to_string(n / 2) +
                                                                     "; the strides and offsets must keep every field's cells apart");
                return false;
              }
              o = static_cast<int8_t>(i);
            }
          }
  }
  return true;
}

// A quantised format's quantisation fields: the scale kind its global scales need (nvfp4:
// per_tensor; the others none), and a scale cache exactly when its scales live there, with the
// cache's blocks. The scale fields themselves are checked with the codes (check_format_fields).
void check_format_quant(const Case& c, Checker& ck) {
  const std::string name = "format " + std::string(to_string(c.quant_format));
  ck.known("/quant/scale_dist", c.scale_dist, "scale distribution");
  const ScaleKind want = c.quant_format == QuantFormat::nvfp4 ? ScaleKind::per_tensor : ScaleKind::none;
  if (c.scale_kind != want)
    ck.add("/quant/scale_kind", name + (want == ScaleKind::per_tensor ? " reads one fp32 global scale per tensor: expected \"per_tensor\""
                                                                     : " computes every scale it stores: expected \"none\"") +
                                    ", got \"" + std::string(to_string(c.scale_kind)) + "\"");
  const CacheGeometry& g = c.scale_cache;
  if (!c.uses_scale_cache()) {
    const std::pair<const char*, int64_t> zero[] = {{"/quant/scale_cache/stride_block", g.stride_block}, {"/quant/scale_cache/stride_pos", g.stride_pos},
                                                    {"/quant/scale_cache/stride_head", g.stride_head}, {"/quant/scale_k_offset", c.scale_k_offset},
                                                    {"/quant/scale_v_offset", c.scale_v_offset}, {"/quant/scale_cache_elems", c.scale_cache_elems}};
    for (const auto& [path, v] : zero)
      if (v != 0) ck.add(path, "expected 0, got " + std::to_string(v) + ": " + name + " keeps its scales in the cache buffer");
    return;
  }
  if (g.num_blocks != c.cache.num_blocks || g.block_size != c.cache.block_size)
    ck.add("/quant/scale_cache", "an in-memory case whose scale cache has num_blocks " + std::to_string(g.num_blocks) + " and block_size " +
                                     std::to_string(g.block_size) + "; expected the cache's");
  ck.at_least("/quant/scale_cache/stride_block", g.stride_block, 0);
  ck.at_least("/quant/scale_cache/stride_pos", g.stride_pos, 0);
  ck.at_least("/quant/scale_cache/stride_head", g.stride_head, 0);
  ck.at_least("/quant/scale_k_offset", c.scale_k_offset, 0);
  ck.at_least("/quant/scale_v_offset", c.scale_v_offset, 0);
  ck.at_least("/quant/scale_cache_elems", c.scale_cache_elems, 0);
}

// Returns whether the cache geometry is sound (cells distinct, K and V inside the buffer, capacity
// representable), i.e. whether capacity() and block arithmetic are safe to use.
bool check_cache(const Case& c, bool shape_ok, Checker& ck) {
  const CacheGeometry& g = c.cache;
  ck.known("/cache/layout", c.layout, "layout");
  bool ok = ck.at_least("/cache/num_blocks", g.num_blocks, 0);
  ok &= ck.at_least("/cache/block_size", g.block_size, 1);
  ok &= ck.at_least("/cache/stride_block", g.stride_block, 0);
  ok &= ck.at_least("/cache/stride_pos", g.stride_pos, 0);
  ok &= ck.at_least("/cache/stride_head", g.stride_head, 0);
  ok &= ck.at_least("/cache/k_offset", c.cache_k_offset, 0);
  ok &= ck.at_least("/cache/buffer_elems", c.cache_buffer_elems, 0);
  if (c.has_value() && c.cache_v_offset <= c.cache_k_offset) {
    ck.add("/cache/v_offset", "expected v_offset > k_offset (V after K in the cache buffer), got v_offset " +
                                  std::to_string(c.cache_v_offset) + " and k_offset " +
                                  std::to_string(c.cache_k_offset));
    ok = false;
  }
  if (c.cache_buffer_elems >= 0 && to_string(c.cache_dtype) != "?" &&
      !ck.buffer_fits("/cache/buffer_elems", "cache buffer", sat_mul(c.cache_buffer_elems, dtype_size(c.cache_dtype)))) {
    return false;
  }
  if (!ok || !shape_ok) return false;
  const bool legacy = c.layout == Layout::vllm_legacy;
  if (legacy && to_string(c.cache_dtype) != "?") {  // K [nb, H, D/x, bs, x], V [nb, H, D, bs]
    const int64_t x = c.xpack();
    if (c.head_dim % x != 0) {
      ck.add("/shape/head_dim", "vllm_legacy packs K in groups of x = " + std::to_string(x) + " " +
                                    std::string(to_string(c.cache_dtype)) + " elements (16 bytes): expected a multiple of " +
                                    std::to_string(x) + ", got " + std::to_string(c.head_dim));
      return false;
    }
    if (g.stride_pos != x) {
      ck.add("/cache/stride_pos", "vllm_legacy: expected stride_pos = x = " + std::to_string(x) +
                                      " (K's slot stride; V's is 1), got " + std::to_string(g.stride_pos));
      return false;
    }
  }
  if (g.num_blocks == 0) return true;  // an empty cache: no cells, nothing to overlap
  if (c.has_format()) return check_format_fields(c, ck);
  if (c.family != Family::kv) return check_field_caches(c, ck);

  // vllm_legacy: within a head, K's [D/x, bs, x] and V's [D, bs] are dense, D*bs elements each.
  const std::vector<Dim> dims =
      legacy ? std::vector<Dim>{{"one head's dims and slots", "/cache/block_size", 1, c.head_dim * g.block_size},
                                {"stride_head", "/cache/stride_head", g.stride_head, c.num_heads},
                                {"stride_block", "/cache/stride_block", g.stride_block, g.num_blocks},
                                {"v_offset - k_offset", "/cache/v_offset", c.cache_v_offset - c.cache_k_offset, 2}}
             : std::vector<Dim>{
                   {"dim", "/shape/head_dim", 1, c.head_dim},
                   {"stride_head", "/cache/stride_head", g.stride_head, c.num_heads},
                   {"stride_pos", "/cache/stride_pos", g.stride_pos, g.block_size},
                   {"stride_block", "/cache/stride_block", g.stride_block, g.num_blocks},
                   {"v_offset - k_offset", "/cache/v_offset", c.cache_v_offset - c.cache_k_offset, 2},
               };
  const NestResult nest = check_nested(dims);
  if (nest.bad != nullptr) {
    ck.add(nest.bad->path, nest_message("K/V cache", nest));
    return false;
  }
  // nest.span already includes V's offset from K (the fifth dimension).
  const i128 end = sat_add(c.cache_k_offset, sat_add(nest.span, 1));
  if (end > c.cache_buffer_elems) {
    ck.add("/cache/buffer_elems", "K and V need " + str(end) + " elements of the cache buffer, which has " +
                                      std::to_string(c.cache_buffer_elems));
    return false;
  }
  return true;
}

// Scale kind against cache dtype; the static scales' size; the per_token_head scale cache geometry
// (nested like the K/V cache, without the dim dimension) inside scale_cache_elems, or, for every
// other kind, an all-zero scale cache.
void check_quant(const Case& c, bool shape_ok, Checker& ck) {
  if (c.has_format()) return check_format_quant(c, ck);
  ck.scale_choice("/quant", "scale_kind", "scale_dist", c.cache_dtype, c.scale_kind, c.scale_dist);
  const CacheGeometry& cache = c.cache;
  const CacheGeometry& g = c.scale_cache;
  const bool geometry_ok = shape_ok && cache.num_blocks >= 0 && cache.block_size >= 1;
  const bool dynamic = c.scale_kind == ScaleKind::per_token_head;

  if (!dynamic) {
    if (g.num_blocks != 0 || g.block_size != 0) {
      ck.add("/quant/scale_cache", "an in-memory case with num_blocks " + std::to_string(g.num_blocks) +
                                       " and block_size " + std::to_string(g.block_size) +
                                       " in its scale cache; expected 0 and 0 (no scale cache without per_token_head)");
    }
    const std::pair<const char*, int64_t> fields[] = {
        {"/quant/scale_cache/stride_block", g.stride_block}, {"/quant/scale_cache/stride_pos", g.stride_pos},
        {"/quant/scale_cache/stride_head", g.stride_head},   {"/quant/scale_k_offset", c.scale_k_offset},
        {"/quant/scale_v_offset", c.scale_v_offset},         {"/quant/scale_cache_elems", c.scale_cache_elems}};
    for (const auto& [path, v] : fields) {
      if (v == 0) continue;
      ck.add(path, "expected 0, got " + std::to_string(v) + ": only scale_kind \"per_token_head\" has a scale cache (" +
                       "scale_kind is \"" + std::string(to_string(c.scale_kind)) + "\")");
    }
    if (geometry_ok && to_string(c.scale_kind) != "?") {
      // K and V each hold static_scale_count() fp32 values: 1, H or num_blocks * H (the last can be huge).
      i128 count = 0;
      if (c.scale_kind == ScaleKind::per_tensor) count = 1;
      if (c.scale_kind == ScaleKind::per_head) count = c.num_heads;
      if (c.scale_kind == ScaleKind::per_block) count = sat_mul(cache.num_blocks, c.num_heads);
      ck.buffer_fits("/quant/scale_kind", "the static scale buffer (K and V)", sat_mul(count, c.num_fields() * 4));
    }
    return;
  }

  if (g.num_blocks != cache.num_blocks || g.block_size != cache.block_size) {
    ck.add("/quant/scale_cache", "an in-memory case whose scale cache has num_blocks " + std::to_string(g.num_blocks) +
                                     " and block_size " + std::to_string(g.block_size) + "; expected the cache's (" +
                                     std::to_string(cache.num_blocks) + " and " + std::to_string(cache.block_size) + ")");
    return;
  }
  bool ok = ck.at_least("/quant/scale_cache/stride_block", g.stride_block, 0);
  ok &= ck.at_least("/quant/scale_cache/stride_pos", g.stride_pos, 0);
  ok &= ck.at_least("/quant/scale_cache/stride_head", g.stride_head, 0);
  ok &= ck.at_least("/quant/scale_k_offset", c.scale_k_offset, 0);
  ok &= ck.at_least("/quant/scale_cache_elems", c.scale_cache_elems, 0);
  if (!c.has_value() && c.scale_v_offset != 0) {
    ck.add("/quant/scale_v_offset", "expected 0, got " + std::to_string(c.scale_v_offset) + ": family " +
                                        std::string(to_string(c.family)) + " has no V scale cache");
    ok = false;
  }
  if (c.has_value() && c.scale_v_offset <= c.scale_k_offset) {
    ck.add("/quant/scale_v_offset", "expected scale_v_offset > scale_k_offset (V's scales after K's in the scale "
                                    "cache buffer), got scale_v_offset " + std::to_string(c.scale_v_offset) +
                                        " and scale_k_offset " + std::to_string(c.scale_k_offset));
    ok = false;
  }
  if (c.scale_cache_elems >= 0 &&
      !ck.buffer_fits("/quant/scale_cache_elems", "scale cache buffer", sat_mul(c.scale_cache_elems, 4))) {
    return;
  }
  if (!ok || !geometry_ok) return;
  if (g.num_blocks == 0) return;  // an empty cache: no scale cells

  std::vector<Dim> dims = {
      {"stride_head", "/quant/scale_cache/stride_head", g.stride_head, c.num_heads},
      {"stride_pos", "/quant/scale_cache/stride_pos", g.stride_pos, g.block_size},
      {"stride_block", "/quant/scale_cache/stride_block", g.stride_block, g.num_blocks},
  };
  if (c.has_value()) dims.push_back({"scale_v_offset - scale_k_offset", "/quant/scale_v_offset", c.scale_v_offset - c.scale_k_offset, 2});
  const NestResult nest = check_nested(dims);
  if (nest.bad != nullptr) {
    ck.add(nest.bad->path, nest_message("K/V scale cache", nest));
    return;
  }
  const i128 end = sat_add(c.scale_k_offset, sat_add(nest.span, 1));
  if (end > c.scale_cache_elems) {
    ck.add("/quant/scale_cache_elems", "the K and V scale caches need " + str(end) +
                                           " elements of the scale cache buffer, which has " +
                                           std::to_string(c.scale_cache_elems));
  }
}

// The input views a case's fields read (case.h fields()): key and value, or key alone (k_only), or
// kv_c as `key` and k_pe as `rope` (mla), each [T_in, H, width].
struct ViewUse {
  const InputView* view;
  const char* name;   // "key", "value", "rope"
  std::string path;   // "/input/key", "/format/rope"
  int64_t width;
  const char* width_path;
};

std::vector<ViewUse> used_views(const Case& c) {
  std::vector<ViewUse> out;
  out.push_back({&c.key, "key", "/input/key", c.head_dim - c.rope_dim, "/shape/head_dim"});
  if (c.has_value()) out.push_back({&c.value, "value", "/input/value", c.value_dim(), c.family == Family::kv_split ? "/format/value_head_dim" : "/shape/head_dim"});
  if (c.family == Family::mla) out.push_back({&c.rope, "rope", "/format/rope", c.rope_dim, "/format/rope_dim"});
  return out;
}

void check_input(const Case& c, bool shape_ok, Checker& ck) {
  bool ok = ck.at_least("/input/num_rows", c.num_input_rows, 0);
  if (ok && c.num_input_rows < c.num_slots()) {
    ck.add("/input/num_rows", "expected num_rows >= " + std::to_string(c.num_slots()) +
                                  " (the number of slot_mapping entries), got " +
                                  std::to_string(c.num_input_rows));
  }
  ok &= ck.at_least("/input/buffer_elems", c.input_buffer_elems, 0);
  const std::vector<ViewUse> views = used_views(c);
  for (const ViewUse& u : views) {
    ok &= ck.at_least(u.path + "/offset", u.view->offset, 0);
    ok &= ck.at_least(u.path + "/stride_token", u.view->stride_token, 0);
    ok &= ck.at_least(u.path + "/stride_head", u.view->stride_head, 0);
  }
  if (c.input_buffer_elems >= 0 && to_string(c.input_dtype) != "?" &&
      !ck.buffer_fits("/input/buffer_elems", "input buffer", sat_mul(c.input_buffer_elems, dtype_size(c.input_dtype)))) {
    return;
  }
  if (!ok || !shape_ok) return;
  if (c.num_input_rows == 0) return;  // no rows: the views address nothing

  auto view_dims = [&](const ViewUse& u) {
    return std::vector<Dim>{
        {"dim", u.width_path, 1, u.width},
        {"stride_head", u.path + "/stride_head", u.view->stride_head, c.num_heads},
        {"stride_token", u.path + "/stride_token", u.view->stride_token, c.num_input_rows},
    };
  };
  std::vector<i128> span(views.size(), 0);
  bool views_ok = true;
  for (size_t i = 0; i < views.size(); ++i) {
    const ViewUse& u = views[i];
    const std::vector<Dim> dims = view_dims(u);  // outlives nest, which points into it
    const NestResult nest = check_nested(dims);
    if (nest.bad != nullptr) {
      ck.add(nest.bad->path, nest_message(std::string(u.name) + " view", nest));
      views_ok = false;
      continue;
    }
    span[i] = nest.span;
    const i128 end = sat_add(u.view->offset, sat_add(nest.span, 1));
    if (end > c.input_buffer_elems) {
      ck.add(u.path + "/offset", std::string("the ") + u.name + " view needs " + str(end) +
                                   " elements of the input buffer (through row " + std::to_string(c.num_input_rows - 1) +
                                   ", its last head and dim), which has " + std::to_string(c.input_buffer_elems));
      views_ok = false;
    }
  }
  if (!views_ok) return;

  // The views' cells must be disjoint, pairwise. Accepted: (a) the views' element ranges
  // [offset, offset + span] do not intersect; or (b) they share the token stride and are slices of
  // one row (b1) or interleave per head (b2), below. Anything else that intersects is refused as
  // overlapping, even where a finer argument could prove it disjoint.
  for (size_t i = 0; i < views.size(); ++i) {
    for (size_t j = i + 1; j < views.size(); ++j) {
      const ViewUse& a = views[i];
      const ViewUse& b = views[j];
      const i128 a_lo = a.view->offset, a_hi = sat_add(a.view->offset, span[i]);
      const i128 b_lo = b.view->offset, b_hi = sat_add(b.view->offset, span[j]);
      if (a_hi < b_lo || b_hi < a_lo) continue;
      const std::string pair = std::string(a.name) + " and " + b.name;
      if (a.view->stride_token == b.view->stride_token) {
        const bool a_first = a.view->offset <= b.view->offset;
        const ViewUse& lo = a_first ? a : b;
        const ViewUse& hi = a_first ? b : a;
        const int64_t delta = hi.view->offset - lo.view->offset;
        // (b1) Row slices: each view's elements within a row, [offset, offset + (H-1)*stride_head +
        // width), one after the other inside one token stride (a fused QKV row of any head dims,
        // kv_c and k_pe as slices of one projection).
        const int64_t lo_row = (c.num_heads - 1) * lo.view->stride_head + lo.width;
        const int64_t hi_row = (c.num_heads - 1) * hi.view->stride_head + hi.width;
        if (delta >= lo_row && delta + hi_row <= lo.view->stride_token) continue;
        // (b2) Equal strides and widths whose offset distance nests as one more dimension of extent 2
        // (K and V interleaved per head).
        if (lo.view->stride_head == hi.view->stride_head && lo.width == hi.width) {
          std::vector<Dim> dims = view_dims(lo);
          dims.push_back({"offset distance", hi.path + "/offset", delta, 2});
          const NestResult nest = check_nested(dims);
          if (nest.bad != nullptr) ck.add(nest.bad->path, nest_message(pair, nest));
          continue;
        }
      }
      ck.add(b.path, pair + " views overlap in the input buffer (" + a.name + " spans elements [" + str(a_lo) + ", " + str(a_hi) +
                         "], " + b.name + " [" + str(b_lo) + ", " + str(b_hi) +
                         "]); overlapping views are accepted only as slices of one row (equal token strides, e.g. "
                         "a fused QKV row) or with equal strides whose offsets interleave per head");
    }
  }
}

// One entry of a block table, for ownership checks and slot lookup.
struct BlockRef {
  int64_t block;    // physical block
  size_t request;   // owning request
  size_t logical;   // index in its block table
};

struct RequestsResult {
  bool ok = false;               // every request and block table valid; lookup below usable
  std::vector<BlockRef> by_block;  // block-table entries sorted by physical block
};

// Explicit positions of request q (base: its JSON path), lengths already valid: one per new token,
// each an unwritten position of its own block table (>= context_len, < blocks * block_size), each
// once. Returns whether they passed.
bool check_positions(const Request& q, const std::string& base, int64_t block_size, Checker& ck) {
  const std::string path = base + "/positions";
  if (static_cast<int64_t>(q.positions.size()) != q.new_len) {
    ck.add(path, "expected " + std::to_string(q.new_len) + " positions (new_len), one per new token, got " +
                     std::to_string(q.positions.size()));
    return false;
  }
  const i128 table = i128{static_cast<int64_t>(q.blocks.size())} * block_size;  // positions the block table holds
  bool ok = true;
  std::vector<std::pair<int64_t, size_t>> sorted;  // (position, index) of the valid ones
  for (size_t i = 0; i < q.positions.size(); ++i) {
    const int64_t pos = q.positions[i];
    if (pos < q.context_len) {
      ck.add(index_path(path, i), "position " + std::to_string(pos) + " is earlier context (context_len = " +
                                      std::to_string(q.context_len) + "), which this call must not overwrite; expected a position >= " +
                                      std::to_string(q.context_len));
      ok = false;
    } else if (pos >= table) {
      ck.add(index_path(path, i), "position " + std::to_string(pos) + " is beyond the block table (" +
                                      std::to_string(q.blocks.size()) + " blocks of " + std::to_string(block_size) +
                                      " slots hold positions 0.." + str(table - 1) + ")");
      ok = false;
    } else {
      sorted.emplace_back(pos, i);
    }
  }
  std::sort(sorted.begin(), sorted.end());
  for (size_t k = 1; k < sorted.size(); ++k) {
    if (sorted[k].first != sorted[k - 1].first) continue;
    ck.add(index_path(path, sorted[k].second), "position " + std::to_string(sorted[k].first) + " appears twice: also at " +
                                                   index_path(path, sorted[k - 1].second) + "; each new token has its own position");
    ok = false;
  }
  return ok;
}

RequestsResult check_requests(const Case& c, bool cache_ok, Checker& ck) {
  RequestsResult result;
  if (static_cast<int64_t>(c.requests.size()) > ck.limits().max_requests) {
    ck.add("/requests", std::to_string(c.requests.size()) + " requests; the limit is " +
                            std::to_string(ck.limits().max_requests));
    return result;
  }
  const CacheGeometry& g = c.cache;
  const bool geometry_ok = g.num_blocks >= 0 && g.block_size >= 1;
  // Shards (context_parallel.h): tables hold shard-local ids, below one shard's blocks.
  const int64_t table_blocks = c.shard_blocks();
  const std::string block_range = c.has_cp() ? "[0, " + std::to_string(table_blocks) + ") (a shard's blocks: num_blocks " +
                                                   std::to_string(g.num_blocks) + " over " + std::to_string(c.num_ranks()) + " ranks)"
                                             : "[0, " + std::to_string(g.num_blocks) + ") (num_blocks = " + std::to_string(g.num_blocks) + ")";
  bool ok = true;
  for (size_t r = 0; r < c.requests.size(); ++r) {
    const Request& q = c.requests[r];
    const std::string base = index_path("/requests", r);
    bool lens_ok = ck.at_least(base + "/context_len", q.context_len, 0);
    lens_ok &= ck.at_least(base + "/new_len", q.new_len, 0);
    ok &= lens_ok;
    if (!geometry_ok) continue;
    for (size_t k = 0; k < q.blocks.size(); ++k) {
      const int64_t b = q.blocks[k];
      if (b < 0 || b >= table_blocks) {
        ck.add(index_path(base + "/blocks", k), "expected a block in " + block_range + ", got " + std::to_string(b));
        ok = false;
      } else {
        result.by_block.push_back({b, r, k});
      }
      if (b == 0 && c.padding == PaddingMode::sink) {  // block 0 holds the sink slot 0, which no request owns
        ck.add(index_path(base + "/blocks", k), "block 0 holds the sink slot 0 (/serving/padding is sink), which no "
                                                "request may own; expected another block");
        ok = false;
      }
    }
    if (!lens_ok) continue;
    if (!q.positions.empty() && c.has_cp()) {
      ck.add(base + "/positions", "a sharded case's requests (/serving/context_parallel) append the consecutive positions "
                                  "context_len .. context_len + new_len - 1 in row order; leave out positions");
      ok = false;
      continue;
    }
    if (!q.positions.empty() && c.has_window()) {  // a ring: a row order of its consecutive new positions
      std::vector<int64_t> sorted = q.positions;
      std::sort(sorted.begin(), sorted.end());
      bool consecutive = static_cast<int64_t>(sorted.size()) == q.new_len;
      for (size_t i = 0; consecutive && i < sorted.size(); ++i) consecutive = sorted[i] == q.context_len + static_cast<int64_t>(i);
      if (!consecutive) {
        ck.add(base + "/positions", "a ring cache's request (/serving/window) appends the consecutive positions context_len .. "
                                    "context_len + new_len - 1 (" + std::to_string(q.context_len) + " .. " +
                                    std::to_string(q.context_len + q.new_len - 1) + "), in any row order");
        ok = false;
        continue;
      }
    } else if (!q.positions.empty()) {  // explicit placement: its own checks cover the block table's size
      ok &= check_positions(q, base, g.block_size, ck);
      continue;
    }
    i128 tokens = i128{q.context_len} + q.new_len;
    if (c.has_window() && c.window_size > 0 && tokens > c.window_size) tokens = c.window_size;  // a ring holds W slots at most
    std::string held = "context_len + new_len = " + str(tokens) + " tokens";
    if (c.has_cp() && c.cp_world_size >= 1 && c.cp_interleave >= 1 && tokens <= std::numeric_limits<int32_t>::max()) {
      const int64_t longest = shards_of(c).longest(static_cast<int64_t>(tokens));  // rank 0's shard
      held = "the longest shard of context_len + new_len = " + str(tokens) + " tokens (rank 0's, " + std::to_string(longest) +
             " positions)";
      tokens = longest;
    }
    const i128 needed = (tokens + g.block_size - 1) / g.block_size;
    if (i128(q.blocks.size()) < needed) {
      ck.add(base + "/blocks", held + " need" + (c.has_cp() ? "s " : " ") + str(needed) + " blocks of " +
                                   std::to_string(g.block_size) + " slots, but the block table has " + std::to_string(q.blocks.size()));
      ok = false;
    }
  }
  if (!geometry_ok) return result;

  std::sort(result.by_block.begin(), result.by_block.end(), [](const BlockRef& a, const BlockRef& b) {
    return std::tie(a.block, a.request, a.logical) < std::tie(b.block, b.request, b.logical);
  });
  // A block is in one block table at most once; in several only as a shared prefix block: entirely
  // earlier context of every request holding it (placement.h), so that no slot of the call is in it.
  std::vector<bool> blamed(result.by_block.size(), false);  // entries already reported as not full context
  for (size_t i = 1; i < result.by_block.size(); ++i) {
    const BlockRef& first = result.by_block[i - 1];
    const BlockRef& again = result.by_block[i];
    if (first.block != again.block) continue;
    const std::string first_path = index_path(index_path("/requests", first.request) + "/blocks", first.logical);
    const std::string again_path = index_path(index_path("/requests", again.request) + "/blocks", again.logical);
    if (first.request == again.request) {
      ck.add(again_path, "block " + std::to_string(again.block) + " is already in this block table at " + first_path +
                             "; a block appears in a block table at most once");
      ok = false;
      continue;
    }
    if (c.has_window() || c.has_cp()) {  // a ring is rewritten in place; shards are not shared
      ck.add(again_path, "block " + std::to_string(again.block) + " is also in " + first_path + "; a " +
                             (c.has_cp() ? "sharded case's (/serving/context_parallel)" : "ring cache's (/serving/window)") +
                             " blocks belong to one request each");
      ok = false;
      continue;
    }
    for (const size_t at : {i - 1, i}) {
      const BlockRef* ref = &result.by_block[at];
      const Request& q = c.requests[ref->request];
      const i128 end = (i128{static_cast<int64_t>(ref->logical)} + 1) * g.block_size;  // past the block's last position
      if ((q.context_len >= 0 && end <= q.context_len) || blamed[at]) continue;
      blamed[at] = true;
      const BlockRef& other = ref == &first ? again : first;
      ck.add(index_path(index_path("/requests", ref->request) + "/blocks", ref->logical),
             "block " + std::to_string(ref->block) + " is shared with request " + std::to_string(other.request) +
                 " (" + index_path(index_path("/requests", other.request) + "/blocks", other.logical) +
                 ") but is not entirely context of request " + std::to_string(ref->request) + ": its logical block " +
                 std::to_string(ref->logical) + " holds positions " + str(end - g.block_size) + ".." + str(end - 1) +
                 " and context_len is " + std::to_string(q.context_len) +
                 "; only full prefix blocks (every position earlier context) may be in several block tables");
      ok = false;
    }
  }
  result.ok = ok && cache_ok;
  return result;
}

// slot_mapping of a ring case (window.h) against the positional contract: with input slot_mapping,
// each token of this call that stays in the window at its ring slot exactly once and no other slot
// of a request; with input positions, each request's rows at the ring slots of its positions, in
// order. Padding and invalid rows as in the default contract.
void check_window_slots(const Case& c, Checker& ck) {
  const Window w = window_of(c);
  if (w.size < 1 || w.sinks < 0 || w.sinks >= w.size) return;  // reported by check_bookkeeping
  const int64_t bs = c.cache.block_size, capacity = c.capacity();
  const std::map<int64_t, BlockOwner> owner = block_owners(c);  // a ring's blocks have one owner each (check_requests)
  std::vector<std::vector<int64_t>> positions(c.requests.size());
  for (size_t r = 0; r < c.requests.size(); ++r) positions[r] = new_positions(c.requests[r]);
  const bool by_positions = c.window_input == WindowInput::positions;
  std::vector<size_t> next(c.requests.size(), 0);
  std::vector<std::map<int64_t, int64_t>> seen(c.requests.size());  // ring index -> row (input slot_mapping)
  for (int64_t t = 0; t < c.num_slots(); ++t) {
    const int64_t s = c.slot_mapping[static_cast<size_t>(t)];
    if (s < 0 || s >= capacity) continue;
    const std::string path = index_path("/slot_mapping", static_cast<size_t>(t));
    const auto it = owner.find(s / bs);
    if (it == owner.end()) {
      ck.add(path, "slot " + std::to_string(s) + " is in a free block; expected a ring slot of a request's token, a negative "
                                                 "padding value or a value >= capacity " + std::to_string(capacity));
      continue;
    }
    const size_t r = it->second.request;
    const Request& q = c.requests[r];
    const int64_t i = it->second.logical * bs + s % bs;  // the slot's ring index
    const std::string who = "request " + std::to_string(r);
    const int64_t len = q.context_len + q.new_len;
    if (by_positions) {
      const size_t k = next[r]++;
      if (k >= positions[r].size()) {
        ck.add(path, "slot " + std::to_string(s) + " is a row of " + who + " beyond its " + std::to_string(q.new_len) +
                         " new tokens; with window input positions every token has exactly one row, at its ring slot");
        continue;
      }
      const int64_t p = positions[r][k], want = w.index(p);
      if (i != want)
        ck.add(path, "row " + std::to_string(k) + " of " + who + " is its token at position " + std::to_string(p) +
                         ", whose ring index is " + std::to_string(want) + " (window " + std::to_string(w.size) + ", sinks " +
                         std::to_string(w.sinks) + "), but slot " + std::to_string(s) + " is ring index " + std::to_string(i));
      continue;
    }
    const int64_t p = w.held(i, len);  // the position ring index i holds after the call
    if (p < q.context_len) {
      ck.add(path, "slot " + std::to_string(s) + " is ring index " + std::to_string(i) + " of " + who + ", which " +
                       (p < 0 ? std::string("no position reaches") : "holds its context position " + std::to_string(p)) +
                       " after this call; expected only the ring slots of this call's tokens that stay in the window");
      continue;
    }
    const auto [at, fresh] = seen[r].emplace(i, t);
    if (!fresh)
      ck.add(path, "slot " + std::to_string(s) + ", " + who + "'s token at position " + std::to_string(p) +
                       ", appears twice: also at /slot_mapping/" + std::to_string(at->second));
  }
  for (size_t r = 0; r < c.requests.size(); ++r) {
    const Request& q = c.requests[r];
    const int64_t len = q.context_len + q.new_len;
    if (by_positions) {
      if (static_cast<int64_t>(next[r]) < q.new_len)
        ck.add("/slot_mapping", "request " + std::to_string(r) + " has " + std::to_string(next[r]) + " rows but " +
                                    std::to_string(q.new_len) + " new tokens; with window input positions every token has a row");
      continue;
    }
    for (int64_t p = q.context_len; p < len; ++p) {
      if (!w.kept(p, len) || seen[r].count(w.index(p)) != 0) continue;
      const int64_t i = w.index(p);
      ck.add("/slot_mapping", "ring slot " +
                                  std::to_string(q.blocks[static_cast<size_t>(i / bs)] * bs + i % bs) + " of request " +
                                  std::to_string(r) + "'s token at position " + std::to_string(p) +
                                  ", which stays in the window, is missing; each such token must appear exactly once");
    }
  }
}

// slot_mapping of a sharded case (context_parallel.h): each request's rows, in row order, are its
// new tokens in position order, each at the local slot of its position (the slot of local position
// lp = local(p) in its block table); every other row is padding (negative). No invalid rows.
void check_cp_slots(const Case& c, Checker& ck) {
  if (c.cp_world_size < 1 || c.cp_interleave < 1) return;  // reported by check_bookkeeping
  const Shards shards = shards_of(c);
  const int64_t bs = c.cache.block_size, capacity = c.shard_blocks() * bs;
  const std::map<int64_t, BlockOwner> owner = block_owners(c);  // one owner per block (check_requests)
  std::vector<int64_t> rows(c.requests.size(), 0);
  for (int64_t t = 0; t < c.num_slots(); ++t) {
    const int64_t s = c.slot_mapping[static_cast<size_t>(t)];
    if (s < 0) continue;  // padding
    const std::string path = index_path("/slot_mapping", static_cast<size_t>(t));
    if (s >= capacity) {
      ck.add(path, std::to_string(s) + " is an invalid slot (>= a shard's capacity " + std::to_string(capacity) +
                       "); a sharded case (/serving/context_parallel) has no invalid rows");
      continue;
    }
    const auto it = owner.find(s / bs);
    if (it == owner.end()) {
      ck.add(path, "slot " + std::to_string(s) + " is in a free block; expected the local slot of a request's new token or a "
                                                 "negative padding value");
      continue;
    }
    const size_t r = it->second.request;
    const Request& q = c.requests[r];
    const int64_t k = rows[r]++;
    if (k >= q.new_len) {
      ck.add(path, "slot " + std::to_string(s) + " is a row of request " + std::to_string(r) + " beyond its " +
                       std::to_string(q.new_len) + " new tokens; each new token has exactly one row");
      continue;
    }
    const int64_t p = q.context_len + k, lp = shards.local(p);
    const int64_t want = q.blocks[static_cast<size_t>(lp / bs)] * bs + lp % bs;
    if (s != want)
      ck.add(path, "row " + std::to_string(k) + " of request " + std::to_string(r) + " is its token at position " + std::to_string(p) +
                       ", local position " + std::to_string(lp) + " of rank " + std::to_string(shards.owner(p)) + " (world size " +
                       std::to_string(shards.world) + ", interleave " + std::to_string(shards.interleave) + "), slot " +
                       std::to_string(want) + "; got slot " + std::to_string(s));
  }
  for (size_t r = 0; r < c.requests.size(); ++r)
    if (rows[r] < c.requests[r].new_len)
      ck.add("/slot_mapping", "request " + std::to_string(r) + " has " + std::to_string(rows[r]) + " rows but " +
                                  std::to_string(c.requests[r].new_len) + " new tokens; each new token has exactly one row, "
                                  "in position order");
}

void check_slots(const Case& c, const RequestsResult& req, Checker& ck) {
  const int64_t num_slots = c.num_slots();
  if (num_slots > ck.limits().max_slots) {
    ck.add("/slot_mapping", std::to_string(num_slots) + " slot_mapping entries; the limit is " +
                                std::to_string(ck.limits().max_slots));
    return;
  }
  if (c.slot_dtype == IndexType::i32) {
    for (int64_t t = 0; t < num_slots; ++t) {
      const int64_t s = c.slot_mapping[static_cast<size_t>(t)];
      if (s < std::numeric_limits<int32_t>::min() || s > std::numeric_limits<int32_t>::max()) {
        ck.add(index_path("/slot_mapping", static_cast<size_t>(t)),
               "slot_dtype is i32 but " + std::to_string(s) + " does not fit in 32 bits");
      }
    }
  }
  if (!req.ok) return;  // slots are matched against valid block tables only
  if (c.has_cp()) {
    check_cp_slots(c, ck);
    return;
  }
  if (c.has_window()) {
    check_window_slots(c, ck);
    return;
  }

  // Index of each request's first new token in `seen`: new tokens of all requests, in order.
  std::vector<int64_t> first_new(c.requests.size() + 1, 0);
  for (size_t r = 0; r < c.requests.size(); ++r) {
    const int64_t room = num_slots - first_new[r];
    if (c.requests[r].new_len > room) {
      ck.add("/slot_mapping", "the requests append more new tokens than slot_mapping has entries (" +
                                  std::to_string(num_slots) + "); each new token needs its own entry");
      return;
    }
    first_new[r + 1] = first_new[r] + c.requests[r].new_len;
  }
  std::vector<int64_t> seen(static_cast<size_t>(first_new.back()), -1);  // [total new tokens] row, -1 = none
  // Explicit positions (placement.h): each request's (position, index) sorted by position for lookup,
  // and how many of its rows slot_mapping has shown so far (positions list them in row order).
  std::vector<std::vector<std::pair<int64_t, int64_t>>> lookup(c.requests.size());
  for (size_t r = 0; r < c.requests.size(); ++r) {
    const Request& q = c.requests[r];
    for (size_t i = 0; i < q.positions.size(); ++i) lookup[r].emplace_back(q.positions[i], static_cast<int64_t>(i));
    std::sort(lookup[r].begin(), lookup[r].end());
  }
  std::vector<int64_t> rows_so_far(c.requests.size(), 0);
  const auto shared = shared_blocks(c);

  const int64_t bs = c.cache.block_size;
  const int64_t capacity = c.capacity();  // safe: the cache geometry passed, capacity <= buffer size
  const bool sink = c.padding == PaddingMode::sink;
  for (int64_t t = 0; t < num_slots; ++t) {
    const int64_t s = c.slot_mapping[static_cast<size_t>(t)];
    if (sink && s < 0) {
      ck.add(index_path("/slot_mapping", static_cast<size_t>(t)),
             std::to_string(s) + " is negative; in the sink padding mode (/serving/padding) padding rows carry slot 0");
      continue;
    }
    if (sink && s == 0) continue;  // a padding row, into the sink
    if (c.addressing == Addressing::csr && (s < 0 || s >= capacity)) {
      ck.add(index_path("/slot_mapping", static_cast<size_t>(t)),
             std::to_string(s) + (s < 0 ? " is padding" : " is an invalid slot (>= capacity " + std::to_string(capacity) + ")") +
                 "; a CSR call (/serving/addressing) has no padding and no invalid rows: every entry is a new token's slot");
      continue;
    }
    if (s < 0 || s >= capacity) continue;  // padding, or invalid (never written, counted)
    const std::string path = index_path("/slot_mapping", static_cast<size_t>(t));
    const int64_t block = s / bs, offset = s % bs;
    const auto it = std::lower_bound(req.by_block.begin(), req.by_block.end(), block,
                                     [](const BlockRef& a, int64_t b) { return a.block < b; });
    const std::string where = "slot " + std::to_string(s) + " (block " + std::to_string(block) + ", offset " +
                              std::to_string(offset) + ")";
    if (it == req.by_block.end() || it->block != block) {
      ck.add(path, where + " is in a free block; expected a new-token slot of a request, a negative padding "
                           "value or a value >= capacity " + std::to_string(capacity));
      continue;
    }
    if (const auto sh = shared.find(block); sh != shared.end()) {
      std::string owners;
      for (size_t k = 0; k < sh->second.size(); ++k)
        owners += (k == 0 ? "" : k + 1 == sh->second.size() ? " and " : ", ") + std::to_string(sh->second[k]);
      ck.add(path, where + " is in a prefix block shared by requests " + owners +
                       ", which is earlier context of each of them; a shared block is never written");
      continue;
    }
    const Request& q = c.requests[it->request];
    const std::string who = "request " + std::to_string(it->request);
    const int64_t pos = static_cast<int64_t>(it->logical) * bs + offset;
    if (pos < q.context_len) {
      ck.add(path, where + " holds " + who + "'s context token " + std::to_string(pos) +
                       ", which this call must not overwrite (context_len = " + std::to_string(q.context_len) + ")");
      continue;
    }
    int64_t index = pos - q.context_len;  // of the new token in the request's positions
    if (q.positions.empty()) {
      if (index >= q.new_len) {
        ck.add(path, where + " is " + who + "'s position " + std::to_string(pos) + ", past its last new token (" +
                         "context_len + new_len = " + std::to_string(q.context_len + q.new_len) + ")");
        continue;
      }
    } else {
      const auto& l = lookup[it->request];
      const auto at = std::lower_bound(l.begin(), l.end(), std::make_pair(pos, int64_t{-1}));
      if (at == l.end() || at->first != pos) {
        ck.add(path, where + " is " + who + "'s position " + std::to_string(pos) + ", which its positions (" +
                         index_path("/requests", it->request) + "/positions) do not list: a hole, which this call must not write");
        continue;
      }
      index = at->second;
      const int64_t k = rows_so_far[it->request]++;
      if (index != k && k < q.new_len) {
        ck.add(path, where + " is " + who + "'s row " + std::to_string(k) + " in slot_mapping order, at position " +
                         std::to_string(pos) + ", but " + index_path("/requests", it->request) + "/positions/" +
                         std::to_string(k) + " is " + std::to_string(q.positions[static_cast<size_t>(k)]) +
                         "; positions list the request's new tokens in the order of their rows in slot_mapping");
      }
    }
    int64_t& row = seen[static_cast<size_t>(first_new[it->request] + index)];
    if (row >= 0) {
      ck.add(path, where + ", " + who + "'s new token at position " + std::to_string(pos) +
                       ", appears twice: also at /slot_mapping/" + std::to_string(row));
      continue;
    }
    row = t;
  }
  for (size_t r = 0; r < c.requests.size(); ++r) {
    const Request& q = c.requests[r];
    for (int64_t i = 0; i < q.new_len; ++i) {
      if (seen[static_cast<size_t>(first_new[r] + i)] >= 0) continue;
      const int64_t pos = q.positions.empty() ? q.context_len + i : q.positions[static_cast<size_t>(i)];
      const int64_t slot = q.blocks[static_cast<size_t>(pos / bs)] * bs + pos % bs;
      ck.add("/slot_mapping", "slot " + std::to_string(slot) + " of request " + std::to_string(r) +
                                  "'s new token at position " + std::to_string(pos) +
                                  " is missing; each new-token slot must appear exactly once");
    }
  }
}

void check_bookkeeping(const Case& c, Checker& ck) {
  ck.known("/payload/dist", c.dist, "value distribution");
  if (ck.known("/serving/padding", c.padding, "padding mode") && c.padding == PaddingMode::sink && c.capacity() < 1)
    ck.add("/serving/padding", "the sink slot 0 needs a cache of at least one slot (num_blocks and block_size >= 1)");
  if (ck.known("/serving/window/input", c.window_input, "window input") && c.has_window()) {
    const std::string p = "/serving/window";
    if (c.window_size < 1) ck.add(p + "/size", "expected a window of at least 1 position, got " + std::to_string(c.window_size));
    if (c.window_sinks < 0 || c.window_sinks >= std::max<int64_t>(c.window_size, 1))
      ck.add(p + "/sinks", "expected sinks in [0, size - 1] (" + std::to_string(c.window_size - 1) + "), got " +
                               std::to_string(c.window_sinks));
    if (c.padding != PaddingMode::negative) ck.add("/serving/padding", "a ring cache (/serving/window) takes negative padding only");
    if (c.addressing != Addressing::slot_mapping) ck.add("/serving/addressing", "a ring cache (/serving/window) is addressed by slot_mapping");
    if (c.window_input == WindowInput::positions && c.slot_dtype != IndexType::i32)
      ck.add("/shape/slot_dtype", "a ring cache with window input positions passes int32 positions beside slot_mapping: expected \"i32\"");
  }
  if (ck.known("/serving/context_parallel/input", c.cp_input, "context-parallel input") && c.has_cp()) {
    const std::string p = "/serving/context_parallel";
    const std::string what = "a sharded case (" + p + ")";
    const bool world_ok = ck.in_range(p + "/world_size", c.cp_world_size, 1, 64);
    ck.in_range(p + "/interleave", c.cp_interleave, 1, int64_t{1} << 20);
    if (world_ok && c.cache.num_blocks % c.cp_world_size != 0)
      ck.add("/cache/num_blocks", std::to_string(c.cache.num_blocks) + " blocks do not split into " + std::to_string(c.cp_world_size) +
                                      " shards of equal size; expected a multiple of world_size");
    if (c.padding != PaddingMode::negative) ck.add("/serving/padding", what + " takes negative padding only");
    if (c.addressing != Addressing::slot_mapping) ck.add("/serving/addressing", what + " is addressed by slot_mapping");
    if (c.has_window()) ck.add("/serving/window", what + " has no ring");
    if (c.slot_dtype != IndexType::i32)
      ck.add("/shape/slot_dtype", what + " passes int32 slot mappings and positions: expected \"i32\"");
    for (size_t r = 0; r < c.requests.size(); ++r)
      if (c.requests[r].context_len + c.requests[r].new_len > std::numeric_limits<int32_t>::max())
        ck.add(index_path("/requests", r), what + "'s positions are int32: expected context_len + new_len below 2^31");
  }
  if (ck.known("/serving/addressing", c.addressing, "addressing") && c.addressing == Addressing::csr) {
    if (c.padding != PaddingMode::negative)
      ck.add("/serving/padding", "a CSR call (/serving/addressing) has no padding rows; the sink is a slot_mapping convention");
    if (c.slot_dtype != IndexType::i32)
      ck.add("/shape/slot_dtype", "a CSR call's arrays are int32 (FlashInfer's index type): expected \"i32\"");
    if (c.cache.num_blocks > std::numeric_limits<int32_t>::max() || c.capacity() > std::numeric_limits<int32_t>::max())
      ck.add("/cache/num_blocks", "a CSR call's block ids and positions are int32: the capacity must be below 2^31");
  }
  if (c.expect.outcome != Expect::pass && c.expect.outcome != Expect::fail) {
    ck.add("/expect/outcome", "not a valid outcome (enum value " +
                                  std::to_string(static_cast<int>(c.expect.outcome)) + ")");
  }
  if (c.expect.outcome == Expect::pass && !c.expect.finding_kind.empty()) {
    ck.add("/expect/finding_kind", "a case expected to pass has no finding kind; got \"" +
                                       c.expect.finding_kind + "\"");
  }
  ck.at_least("/provenance/case_index", c.provenance.case_index, -1);
}

// Necessary conditions only: materialize() may add gaps and padding on top of these lower bounds,
// so a genotype passing here can still materialise into a case that validate() refuses.
void check_genotype(const Genotype& g, Checker& ck) {
  const Limits& lim = ck.limits();
  ck.known("/genotype/layout", g.layout, "layout");
  ck.known("/genotype/input_dtype", g.input_dtype, "dtype");
  ck.known("/genotype/cache_dtype", g.cache_dtype, "dtype");
  ck.known("/genotype/slot_dtype", g.slot_dtype, "index type");
  ck.known("/genotype/dist", g.dist, "value distribution");
  ck.known("/genotype/kv_views", g.kv_views, "K/V views kind");
  if (to_string(g.input_dtype) != "?") ck.float_input("/genotype/input_dtype", g.input_dtype);
  if (ck.known("/genotype/quant_format", g.quant_format, "quantised format") && g.quant_format != QuantFormat::none) {
    if (g.cache_dtype != format_code_dtype(g.quant_format))
      ck.add("/genotype/cache_dtype", "format " + std::string(to_string(g.quant_format)) + " stores " +
                                          std::string(to_string(format_code_dtype(g.quant_format))) + " codes");
  } else {
    ck.scale_choice("/genotype", "scale_kind", "scale_dist", g.cache_dtype, g.scale_kind, g.scale_dist);
  }
  bool ok = ck.at_least("/genotype/block_size", g.block_size, 1);
  ok &= ck.in_range("/genotype/num_heads", g.num_heads, 1, lim.max_heads);
  ok &= ck.in_range("/genotype/head_dim", g.head_dim, 1, lim.max_head_dim);
  ok &= ck.at_least("/genotype/gqa_ratio", g.gqa_ratio, 1);
  ok &= ck.at_least("/genotype/tail_padding", g.tail_padding, 0);
  ok &= ck.at_least("/genotype/interleaved_padding", g.interleaved_padding, 0);
  ok &= ck.at_least("/genotype/invalid_slots", g.invalid_slots, 0);
  ok &= ck.at_least("/genotype/extra_input_rows", g.extra_input_rows, 0);
  ok &= ck.at_least("/genotype/spare_blocks", g.spare_blocks, 0);
  if (ck.known("/genotype/family", g.family, "format family")) {  // the family's own genes (genotype.h)
    if (g.family == Family::kv_split) {
      ok &= ck.in_range("/genotype/value_head_dim", g.value_head_dim, 1, lim.max_head_dim);
    } else if (g.value_head_dim != 0) {
      ck.add("/genotype/value_head_dim", "expected 0: only family kv_split has a value_head_dim");
    }
    if (g.family == Family::mla) {
      ok &= ck.in_range("/genotype/rope_dim", g.rope_dim, 1, std::max<int64_t>(1, g.head_dim - 1));
    } else if (g.rope_dim != 0) {
      ck.add("/genotype/rope_dim", "expected 0: only family mla has a rope_dim");
    }
  }
  ok &= ck.at_least("/genotype/shared_prefix_blocks", g.shared_prefix_blocks, 0);
  ck.known("/genotype/padding", g.padding, "padding mode");
  ck.known("/genotype/addressing", g.addressing, "addressing");
  if (ck.known("/genotype/window_input", g.window_input, "window input") && g.window_input != WindowInput::none) {
    ok &= ck.at_least("/genotype/window_size", g.window_size, 1);
    ok &= ck.in_range("/genotype/window_sinks", g.window_sinks, 0, std::max<int64_t>(0, g.window_size - 1));
  }
  if (ck.known("/genotype/cp_input", g.cp_input, "context-parallel input") && g.cp_input != CpInput::none) {
    ok &= ck.in_range("/genotype/cp_world_size", g.cp_world_size, 1, 64);
    ok &= ck.in_range("/genotype/cp_interleave", g.cp_interleave, 1, int64_t{1} << 20);
  }
  if (static_cast<int64_t>(g.requests.size()) > lim.max_requests) {
    ck.add("/genotype/requests", std::to_string(g.requests.size()) + " requests; the limit is " +
                                     std::to_string(lim.max_requests));
    return;
  }
  i128 tokens = 0, new_tokens = 0;
  for (size_t r = 0; r < g.requests.size(); ++r) {
    const std::string base = index_path("/genotype/requests", r);
    const bool lens_ok = ck.at_least(base + "/context_len", g.requests[r].context_len, 0) &
                         ck.at_least(base + "/new_len", g.requests[r].new_len, 0);
    ok &= lens_ok;
    if (!lens_ok) continue;
    tokens = sat_add(tokens, sat_add(g.requests[r].context_len, g.requests[r].new_len));
    new_tokens = sat_add(new_tokens, g.requests[r].new_len);
  }
  if (!ok) return;
  const i128 slots = sat_add(new_tokens, i128{g.tail_padding} + g.interleaved_padding + g.invalid_slots);
  if (slots > lim.max_slots) {
    ck.add("/genotype/requests", "the genotype needs " + str(slots) + " slot_mapping entries; the limit is " +
                                     std::to_string(lim.max_slots));
    return;
  }
  const i128 row_elems = sat_mul(g.num_heads, g.head_dim);
  const i128 cache_bytes = sat_mul(sat_mul(sat_add(tokens, g.spare_blocks), row_elems), 2 * dtype_size(g.cache_dtype));
  ck.buffer_fits("/genotype/requests", "the cache buffer of this genotype", cache_bytes);
  const i128 input_row_heads = g.fused_qkv ? sat_mul(g.num_heads, i128{g.gqa_ratio} + 2) : i128{2} * g.num_heads;
  const i128 input_bytes = sat_mul(sat_mul(sat_add(slots, g.extra_input_rows), sat_mul(input_row_heads, g.head_dim)),
                                   dtype_size(g.input_dtype));
  ck.buffer_fits("/genotype/requests", "the input buffer of this genotype", input_bytes);
  if (g.scale_kind == ScaleKind::per_token_head) {
    const i128 scale_bytes = sat_mul(sat_mul(sat_add(tokens, g.spare_blocks), g.num_heads), 2 * 4);
    ck.buffer_fits("/genotype/requests", "the scale cache buffer of this genotype", scale_bytes);
  }
}

}  // namespace

std::vector<ValidationProblem> validate(const Case& c, const Limits& limits) {
  Checker ck(limits);
  const bool shape_ok = check_shape(c, ck);
  const bool format_ok = check_format(c, shape_ok, ck);
  const bool cache_ok = check_cache(c, shape_ok && format_ok, ck);
  check_quant(c, shape_ok, ck);
  check_input(c, shape_ok && format_ok, ck);
  const RequestsResult requests = check_requests(c, cache_ok, ck);
  check_slots(c, requests, ck);
  check_bookkeeping(c, ck);
  if (c.genotype) check_genotype(*c.genotype, ck);
  return ck.take();
}

}  // namespace kvf
