// plugin_target.cpp — the `plugin:PATH.so` target: an append kernel kvfuzz did not build, behind the
// C ABI of include/kvfuzz_plugin.h.
//
// The shared object is only ever loaded (dlopen) in processes that die young, never in kvfuzz's own:
//   - a probe child, forked once per plugin path: ABI version, the three symbols, and
//     kvfuzz_plugin_query(), whose capabilities come back over a pipe and steer the generator
//     (gen/capabilities.h) and whose rounding convention picks the default --tolerance;
//   - the campaign's worker (campaign/isolation.h), where every append runs. A plugin that crashes,
//     scribbles over memory or kills its CUDA context takes a worker with it — a `crash` finding —
//     and the next case starts a fresh worker that loads the plugin again.
// Host plugins get pointers into the worker's shared arena image. Device plugins get pointers into a
// device copy of it (targets/cuda/cuda_status.h, as the cuda target), run on kvfuzz's stream, and are
// followed by cudaDeviceSynchronize(): a sticky error there is a device fault (the worker is replaced).
// In a kvfuzz built without CUDA, device plugins are refused as unavailable (exit 3).
//
// Errors: PATH missing or not a file: InputError (exit 2). Not loadable, a symbol missing, another ABI
// version, a refused query: the target is unavailable (InfraError from open_target, exit 3).
#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "base/errors.h"
#include "cp_slot_mapping.cuh"
#include "kv_append.cuh"
#include "kvfuzz_plugin.h"
#include "targets/target.h"
#if defined(KVFUZZ_HAVE_CUDA)
#include "targets/cuda/cuda_status.h"
#endif

namespace kvf {

// The ABI's enums are kvfuzz's, value for value, so a cast converts them: those of kernels/enums.json are
// both written from that one table (scripts/gen-enums.py); the others are checked here.
static_assert(KVFZ_RULE_NVFP4_FLASHINFER == static_cast<int>(RuleBit::nvfp4_flashinfer) &&
              KVFZ_RULE_SCALE_LAYOUT_SWIZZLED == static_cast<int>(RuleBit::scale_layout_swizzled) &&
              KVFZ_RULE_MX_NV_CEIL == static_cast<int>(RuleBit::mx_nv_ceil) && KVFZ_RULE_DS_MLA_POW2 == static_cast<int>(RuleBit::ds_mla_pow2) &&
              KVFZ_RULE_INDEXER_UE8M0_EXACT == static_cast<int>(RuleBit::indexer_ue8m0_exact) &&
              KVFZ_RULE_ASYM_BF16 == static_cast<int>(RuleBit::asym_bf16) &&
              KVFZ_RULE_ASYM_LANES_ZERO_PADDED_POW2 == static_cast<int>(RuleBit::asym_lanes_zero_padded_pow2) &&
              KVFZ_RULE_INT4_ADJACENT == static_cast<int>(RuleBit::int4_adjacent) && KVFZ_RULE_INT4_ADJACENT + 1 == kRuleBits);
static_assert(KVFZ_ROLE_DATA == static_cast<int>(FieldRole::data) && KVFZ_ROLE_SCALE == static_cast<int>(FieldRole::scale) &&
              KVFZ_ROLE_ZERO == static_cast<int>(FieldRole::zero) && KVFZ_BUFFER_CACHE == static_cast<int>(FieldBuffer::cache) &&
              KVFZ_BUFFER_SCALE_CACHE == static_cast<int>(FieldBuffer::scale_cache));
static_assert(KVFZ_MAX_SUBMODES == kMaxSubModes && KVFZ_MAX_FIELDS == CacheFields::kMax);

namespace {

using AbiVersionFn = uint32_t (*)();
using QueryFn = int (*)(kvfz_capabilities*, int, char*, size_t);
using AppendFn = int (*)(const kvfz_append_args*, char*, size_t);
using CpSlotMappingFn = int (*)(const kvfz_cp_slot_mapping_args*, char*, size_t);

constexpr double kProbeTimeoutS = 60;  // loading and querying a plugin; a hang is reported, not waited out

// A loaded plugin's entry points (in the process that loaded it).
struct Entry {
  AbiVersionFn abi_version = nullptr;
  QueryFn query = nullptr;
  AppendFn append = nullptr;
  CpSlotMappingFn cp_slot_mapping = nullptr;  // optional: the plugin's slot-mapping producer
};

// dlopen + dlsym + the version check. Returns "" or what is wrong (for the user: what to do).
std::string load(const std::string& path, Entry& e) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return std::string("cannot load it: ") + (why ? why : "dlopen failed") +
           " (a plugin is a shared object built with -shared -fPIC; see include/kvfuzz_plugin.h)";
  }
  const auto symbol = [&](const char* name) { return dlsym(handle, name); };
  e.abi_version = reinterpret_cast<AbiVersionFn>(symbol("kvfuzz_plugin_abi_version"));
  e.query = reinterpret_cast<QueryFn>(symbol("kvfuzz_plugin_query"));
  e.append = reinterpret_cast<AppendFn>(symbol("kvfuzz_plugin_append"));
  e.cp_slot_mapping = reinterpret_cast<CpSlotMappingFn>(symbol("kvfuzz_plugin_cp_slot_mapping"));
  std::string missing;
  if (!e.abi_version) missing += " kvfuzz_plugin_abi_version";
  if (!e.query) missing += " kvfuzz_plugin_query";
  if (!e.append) missing += " kvfuzz_plugin_append";
  if (!missing.empty())
    return "it does not export" + missing +
           " (each of the three functions of include/kvfuzz_plugin.h must be exported with C linkage: extern \"C\", "
           "default visibility)";
  const uint32_t version = e.abi_version();
  if (version != 1 && version != KVFUZZ_PLUGIN_ABI_VERSION)  // v2 appends to v1: both load (kvfuzz_plugin.h)
    return "it was built for plugin ABI version " + std::to_string(version) + ", this kvfuzz speaks versions 1 and " +
           std::to_string(KVFUZZ_PLUGIN_ABI_VERSION) + ": rebuild it against this kvfuzz's include/kvfuzz_plugin.h";
  return "";
}

// kvfuzz_plugin_query() with a zero-filled struct. Returns "" or why the plugin refused. The string
// fields point into the plugin (static storage) and are copied by the caller.
std::string query(const Entry& e, int device, kvfz_capabilities& caps) {
  std::memset(&caps, 0, sizeof caps);
  caps.struct_size = sizeof caps;
  char error[1024] = {0};
  if (e.query(&caps, device, error, sizeof error) != 0) {
    error[sizeof error - 1] = '\0';
    return std::string("kvfuzz_plugin_query refused to run here: ") + (error[0] ? error : "(no reason given)");
  }
  if (caps.memory != KVFZ_MEMORY_HOST && caps.memory != KVFZ_MEMORY_DEVICE)
    return "kvfuzz_plugin_query set memory to " + std::to_string(caps.memory) + "; expected KVFZ_MEMORY_HOST (0) or KVFZ_MEMORY_DEVICE (1)";
  if (caps.rounding < KVFZ_ROUNDING_EXACT || caps.rounding > KVFZ_ROUNDING_UNSPECIFIED)
    return "kvfuzz_plugin_query set rounding to " + std::to_string(caps.rounding) + "; expected a kvfz_rounding value (0..2)";
  for (int i = 0; i < KVFZ_MAX_HEAD_DIMS; ++i)
    if (caps.head_dims[i] < 0 || caps.head_dims[i] > 4096)
      return "kvfuzz_plugin_query set head_dims[" + std::to_string(i) + "] to " + std::to_string(caps.head_dims[i]) +
             "; expected head dims 1..4096, 0 for unused entries";
  for (int i = 0; i < KVFZ_MAX_ROPE_DIMS; ++i)
    if (caps.rope_dims[i] < 0 || caps.rope_dims[i] > 4096)
      return "kvfuzz_plugin_query set rope_dims[" + std::to_string(i) + "] to " + std::to_string(caps.rope_dims[i]) +
             "; expected rope dims 1..4096, 0 for unused entries";
  if (const int32_t g = caps.stride_granularity; g < 0 || g > 4096 || (g & (g - 1)) != 0)
    return "kvfuzz_plugin_query set stride_granularity to " + std::to_string(g) +
           "; expected 0 (any) or a power of two of bytes up to 4096, e.g. 16";
  return "";
}

// What the probe child learns: an error, or the capabilities with the strings copied out.
struct Probe {
  std::string error;             // "" when the plugin loaded and answered its query
  kvfz_capabilities caps{};      // numeric fields only (pointers cleared)
  std::string name, description;
};

// Wire format, child to parent: u32 length + bytes, for error, name, description, then the caps.
void put(std::string& out, const std::string& s) {
  const uint32_t n = static_cast<uint32_t>(s.size());
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
  out += s;
}
bool take(const std::string& in, size_t& at, std::string& s) {
  uint32_t n = 0;
  if (at + sizeof n > in.size()) return false;
  std::memcpy(&n, in.data() + at, sizeof n);
  at += sizeof n;
  if (at + n > in.size()) return false;
  s.assign(in, at, n);
  at += n;
  return true;
}

// Loads and queries the plugin in a forked child, so that kvfuzz's own process never maps it.
Probe probe_in_child(const std::string& path, int device) {
  Probe p;
  int fds[2];
  if (pipe(fds) != 0) {
    p.error = std::string("cannot create a pipe to probe the plugin: ") + std::strerror(errno);
    return p;
  }
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    p.error = std::string("cannot fork to probe the plugin: ") + std::strerror(errno);
    return p;
  }
  if (pid == 0) {
    close(fds[0]);
    Entry e;
    kvfz_capabilities caps{};
    std::string error = load(path, e);
    if (error.empty()) error = query(e, device, caps);
    std::string out;
    put(out, error);
    put(out, error.empty() && caps.name ? caps.name : "");
    put(out, error.empty() && caps.description ? caps.description : "");
    caps.name = nullptr;
    caps.description = nullptr;
    out.append(reinterpret_cast<const char*>(&caps), sizeof caps);
    for (size_t at = 0; at < out.size();) {
      const ssize_t w = write(fds[1], out.data() + at, out.size() - at);
      if (w <= 0) _exit(2);
      at += static_cast<size_t>(w);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string in;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kProbeTimeoutS);
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) continue;  // the deadline check above ends it
    char buf[4096];
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    p.error = "loading it or kvfuzz_plugin_query did not finish within " + std::to_string(static_cast<int>(kProbeTimeoutS)) + " s";
    return p;
  }
  if (WIFSIGNALED(wstatus)) {
    const int sig = WTERMSIG(wstatus);
    p.error = "it crashed while loading or in kvfuzz_plugin_query (signal " + std::to_string(sig) + ", " + strsignal(sig) + ")";
    return p;
  }
  size_t at = 0;
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0 || !take(in, at, p.error) || !take(in, at, p.name) ||
      !take(in, at, p.description) || in.size() - at != sizeof p.caps) {
    p.error = "the probe process ended without an answer (exit status " +
              std::to_string(WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1) + "); did the plugin call exit()?";
    return p;
  }
  std::memcpy(&p.caps, in.data() + at, sizeof p.caps);
  return p;
}

// One probe per (path, device) and kvfuzz process: every campaign thread constructs its own target.
Probe probe(const std::string& path, int device) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, int>, Probe> done;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(path, device);
  auto it = done.find(key);
  if (it == done.end()) it = done.emplace(key, probe_in_child(path, device)).first;
  return it->second;
}

Capabilities to_capabilities(const kvfz_capabilities& k) {
  Capabilities c;
  c.layouts = k.layouts;
  c.input_dtypes = k.input_dtypes;
  c.cache_dtypes = k.cache_dtypes;
  c.scale_kinds = k.scale_kinds;
  c.slot_dtypes = k.slot_types;
  c.families = (k.families | 1u) & ((1u << 4) - 1);  // 0 (a v1 plugin): kv only
  c.padding_modes = (k.padding_modes | 1u) & ((1u << 2) - 1);  // 0: negative padding only
  c.addressings = k.addressings == 0 ? 1u : k.addressings & ((1u << 2) - 1);  // 0: slot_mapping only; CSR alone possible
  c.windows = (k.windows | 1u) & ((1u << 3) - 1);  // 0: no ring
  c.cp_inputs = (k.cp_inputs | 1u) & ((1u << 3) - 1);  // 0: no shards
  // 0: the classic caches only; formats without NONE: those formats only (no classic cache is sent).
  c.quant_formats = k.quant_formats == 0 ? 1u : k.quant_formats & ((1u << 11) - 1);
  c.quant_rules = k.quant_rules == 0 ? default_rule_bits() : k.quant_rules & ((1u << kRuleBits) - 1);  // 0: the defaults
  c.fused_qkv = (k.features & KVFZ_FEATURE_FUSED_QKV) != 0;
  c.strided_input = (k.features & KVFZ_FEATURE_STRIDED_INPUT) != 0;
  c.padded_cache = (k.features & KVFZ_FEATURE_PADDED_CACHE) != 0;
  c.graph_padding_rows = (k.features & KVFZ_FEATURE_GRAPH_PADDING_ROWS) != 0;
  c.unaligned = (k.features & KVFZ_FEATURE_UNALIGNED) != 0;
  c.same_input_cache_dtype = k.same_input_cache_dtype != 0;
  c.invalid_slot_counter = (k.features & KVFZ_FEATURE_INVALID_SLOT_COUNTER) != 0;
  c.slots_past_capacity = (k.features & KVFZ_FEATURE_NO_SLOTS_PAST_CAPACITY) == 0;
  c.min_head_dim = k.min_head_dim;
  c.max_head_dim = k.max_head_dim;
  for (int32_t d : k.head_dims)
    if (d > 0) c.head_dims.push_back(d);
  std::sort(c.head_dims.begin(), c.head_dims.end());
  c.head_dims.erase(std::unique(c.head_dims.begin(), c.head_dims.end()), c.head_dims.end());
  for (int32_t d : k.rope_dims)
    if (d > 0) c.rope_dims.push_back(d);
  std::sort(c.rope_dims.begin(), c.rope_dims.end());
  c.rope_dims.erase(std::unique(c.rope_dims.begin(), c.rope_dims.end()), c.rope_dims.end());
  c.head_dim_multiple = k.head_dim_multiple;
  c.max_num_heads = k.max_num_heads;
  c.max_block_size = k.max_block_size;
  c.block_size_pow2_only = k.block_size_pow2_only != 0;
  c.stride_granularity = k.stride_granularity > 1 ? k.stride_granularity : 0;
  return c;
}

// The tolerance policy (arena/classify.h syntax) for a rounding convention.
const char* tolerance_of(int32_t rounding) {
  switch (rounding) {
    case KVFZ_ROUNDING_WITHIN_1ULP: return "ulp:1";
    case KVFZ_ROUNDING_UNSPECIFIED: return "written-any-value";
    default: return "exact";
  }
}

template <typename E>
std::string bit_list(uint32_t bits, std::initializer_list<E> all) {
  std::string out;
  for (E e : all)
    if ((bits >> static_cast<unsigned>(e)) & 1u) out += (out.empty() ? "" : ", ") + std::string(to_string(e));
  return out.empty() ? "none" : out;
}

// `kvfuzz targets`-style description of what the plugin declared.
std::string supports_text(const kvfz_capabilities& k) {
  std::string s = "layouts " + bit_list(k.layouts, {Layout::paged_nhd, Layout::paged_hnd, Layout::contiguous_bshd,
                                                    Layout::contiguous_bhsd, Layout::packed_kv_nhd,
                                                    Layout::packed_content_hnd, Layout::vllm_legacy});
  s += "; inputs " + bit_list(k.input_dtypes, {DType::f16, DType::bf16, DType::f32});
  s += "; caches " + bit_list(k.cache_dtypes, {DType::f16, DType::bf16, DType::f32, DType::fp8_e4m3, DType::fp8_e5m2, DType::int8});
  if (k.same_input_cache_dtype) s += " (float caches of the input's dtype only)";
  s += "; scales " + bit_list(k.scale_kinds, {ScaleKind::none, ScaleKind::per_tensor, ScaleKind::per_head,
                                              ScaleKind::per_block, ScaleKind::per_token_head});
  s += "; slots " + bit_list(k.slot_types, {IndexType::i32, IndexType::i64});
  s += "; families " + bit_list(k.families | 1u, {Family::kv, Family::kv_split, Family::k_only, Family::mla});
  s += "; padding " + bit_list(k.padding_modes | 1u, {PaddingMode::negative, PaddingMode::sink});
  s += "; addressing " + bit_list(k.addressings == 0 ? 1u : k.addressings, {Addressing::slot_mapping, Addressing::csr});
  s += "; window " + bit_list(k.windows | 1u, {WindowInput::none, WindowInput::slot_mapping, WindowInput::positions});
  s += "; context parallel " + bit_list(k.cp_inputs | 1u, {CpInput::none, CpInput::slot_mapping, CpInput::positions});
  s += "; quantised formats " + bit_list(k.quant_formats == 0 ? 1u : k.quant_formats, {QuantFormat::none, QuantFormat::nvfp4, QuantFormat::mxfp8_e4m3,
                                                                 QuantFormat::mxfp8_e5m2, QuantFormat::mxfp4, QuantFormat::ds_mla,
                                                                 QuantFormat::indexer_k, QuantFormat::fp8_inline, QuantFormat::int8_inline,
                                                                 QuantFormat::asym_int8, QuantFormat::asym_int4});
  if (k.quant_formats & ~1u) {
    std::string rules;
    const uint32_t bits = to_capabilities(k).quant_rules;
    for (int b = 0; b < kRuleBits; ++b)
      if (bits & (1u << b)) rules += (rules.empty() ? "" : ", ") + std::string(to_string(static_cast<RuleBit>(b)));
    s += " (conventions " + rules + ")";
  }
  auto limit = [&](const char* what, int32_t v) {
    if (v > 0) s += std::string("; ") + what + " " + std::to_string(v);
  };
  limit("head_dim >=", k.min_head_dim);
  limit("head_dim <=", k.max_head_dim);
  if (k.head_dim_multiple > 1) limit("head_dim multiple of", k.head_dim_multiple);
  std::string dims;
  for (int32_t d : to_capabilities(k).head_dims) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  if (!dims.empty()) s += "; head_dim in {" + dims + "}";
  std::string ropes;
  for (int32_t d : to_capabilities(k).rope_dims) ropes += (ropes.empty() ? "" : ", ") + std::to_string(d);
  if (!ropes.empty()) s += "; mla rope_dim in {" + ropes + "}";
  limit("heads <=", k.max_num_heads);
  limit("block_size <=", k.max_block_size);
  if (k.block_size_pow2_only) s += "; block sizes powers of two";
  std::string features;
  const std::pair<uint32_t, const char*> names[] = {
      {KVFZ_FEATURE_FUSED_QKV, "fused QKV"},       {KVFZ_FEATURE_STRIDED_INPUT, "strided input"},
      {KVFZ_FEATURE_PADDED_CACHE, "padded cache"}, {KVFZ_FEATURE_GRAPH_PADDING_ROWS, "graph padding rows"},
      {KVFZ_FEATURE_INVALID_SLOT_COUNTER, "invalid-slot counter"}, {KVFZ_FEATURE_UNALIGNED, "unaligned pointers"}};
  for (const auto& [bit, name] : names)
    if (k.features & bit) features += (features.empty() ? "" : ", ") + std::string(name);
  s += "; features: " + (features.empty() ? std::string("none") : features);
  if (k.features & KVFZ_FEATURE_NO_SLOTS_PAST_CAPACITY) s += "; no slots past capacity";
  if (k.stride_granularity > 1) s += "; strides in " + std::to_string(k.stride_granularity) + "-byte units";
  return s;
}

kvfz_cache_geometry to_abi(const CacheGeometry& g) {
  return kvfz_cache_geometry{g.num_blocks, g.block_size, g.stride_block, g.stride_pos, g.stride_head};
}

// The ABI call of case `c` (its rank `rank`'s) on an image whose first byte is at `base` (host or
// device address).
kvfz_append_args append_args(const Case& c, std::byte* base, const ArenaLayout& layout, int32_t memory, bool counter,
                             int64_t rank) {
  const KvAppendParams p = append_params(c, base, layout, rank);
  kvfz_append_args a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.memory = memory;
  a.key = p.key;
  a.value = p.value;
  a.key_stride_token = p.key_stride_token;
  a.key_stride_head = p.key_stride_head;
  a.value_stride_token = p.value_stride_token;
  a.value_stride_head = p.value_stride_head;
  a.input_dtype = static_cast<int32_t>(p.input_dtype);
  a.slot_mapping = p.slot_mapping;
  a.slot_type = static_cast<int32_t>(p.slot_type);
  a.num_slots = p.num_slots;
  a.num_input_rows = p.num_input_rows;
  a.k_cache = p.k_cache;
  a.v_cache = p.v_cache;
  a.cache = to_abi(p.cache);
  a.cache_dtype = static_cast<int32_t>(p.cache_dtype);
  a.layout = static_cast<int32_t>(c.layout);
  a.num_heads = p.num_heads;
  a.head_dim = p.head_dim;
  a.invalid_slots = counter ? p.invalid_slots : nullptr;
  a.scale_kind = static_cast<int32_t>(p.scale_kind);
  a.k_scale = p.k_scale;
  a.v_scale = p.v_scale;
  a.k_scale_cache = p.k_scale_cache;
  a.v_scale_cache = p.v_scale_cache;
  a.scale_cache = to_abi(p.scale_cache);
  a.family = static_cast<int32_t>(c.family);
  a.value_head_dim = p.value_head_dim;
  if (c.family == Family::kv_split) a.value_cache = to_abi(p.value_cache);
  a.rope = p.rope;
  a.rope_stride_token = p.rope_stride_token;
  a.rope_stride_head = p.rope_stride_head;
  a.rope_dim = p.rope_dim;
  a.padding = static_cast<int32_t>(c.padding);
  a.addressing = static_cast<int32_t>(c.addressing);
  a.batch_indices = p.csr_batch_indices;  // all NULL for slot_mapping addressing
  a.positions = p.csr_positions;
  a.kv_indices = p.csr_kv_indices;
  a.kv_indptr = p.csr_kv_indptr;
  a.kv_last_page_len = p.csr_kv_last_page_len;
  a.batch_size = p.csr_batch_size;
  a.window = static_cast<int32_t>(c.window_input);
  a.window_size = c.window_size;
  a.window_sinks = c.window_sinks;
  a.window_positions = p.window_positions;
  a.window_seq_lens = p.window_seq_lens;
  a.cp_input = static_cast<int32_t>(c.cp_input);
  a.cp_rank = p.cp_rank;
  a.cp_world_size = c.has_cp() ? static_cast<int32_t>(c.cp_world_size) : 1;
  a.cp_interleave = c.has_cp() ? static_cast<int32_t>(c.cp_interleave) : 1;
  a.cp_positions = p.cp_positions;
  if (c.has_format()) {  // the typed fields, with the layouts the call sees (its shard's: append_params)
    a.quant_format = static_cast<int32_t>(c.quant_format);
    a.quant_rules = rule_bits(c.quant_format, c.quant_rules);
    a.quant_group = p.format_group;
    a.format_cache = base + layout.cache_begin;
    a.format_scale_cache = c.uses_scale_cache() ? base + layout.scale_cache_begin : nullptr;
    const CacheFields fields = c.fields();
    for (const CacheField& f : fields) {
      const FieldLayout& l = f.role == FieldRole::scale ? p.scale_layout[f.index]
                             : f.role == FieldRole::zero ? p.zero_layout[f.index]
                             : f.group == 0              ? p.rope_layout
                                                         : p.code_layout[f.index];
      kvfz_field& out = a.fields[a.num_fields++];
      out.role = static_cast<int32_t>(f.role);
      out.index = f.index;
      out.dtype = static_cast<int32_t>(f.dtype);
      out.buffer = static_cast<int32_t>(f.buffer);
      out.offset = l.offset;
      for (int axis = 0; axis < kAxes; ++axis) {
        out.mode[axis].rank = l.mode[axis].rank;
        for (int i = 0; i < kMaxSubModes; ++i) {
          out.mode[axis].extent[i] = l.mode[axis].extent[i];
          out.mode[axis].stride[i] = l.mode[axis].stride[i];
        }
      }
      out.group = static_cast<int32_t>(f.group);
      out.scale = f.scale;
      out.zero = f.zero;
      out.entry_dim = static_cast<int32_t>(f.entry_dim);
    }
  }
  return a;
}

// The ABI call of the slot-mapping producer for rank `rank` of a context-parallel case.
kvfz_cp_slot_mapping_args producer_args(const Case& c, std::byte* base, const ArenaLayout& layout, int32_t memory, int64_t rank) {
  const CpSlotMappingParams p = cp_producer_params(c, base, layout, rank);
  kvfz_cp_slot_mapping_args a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.memory = memory;
  a.positions = p.positions;
  a.requests = p.requests;
  a.block_tables = p.block_tables;
  a.num_rows = p.num_rows;
  a.num_requests = static_cast<int64_t>(c.requests.size());
  a.table_width = p.table_width;
  a.block_size = p.block_size;
  a.rank = p.rank;
  a.world_size = p.world_size;
  a.interleave = p.interleave;
  a.slot_mapping = p.slot_mapping;
  return a;
}

class PluginTarget final : public Target {
 public:
  PluginTarget(const std::string& argument, const TargetOptions& options)
      : path_(std::filesystem::absolute(argument).lexically_normal().string()), device_(options.device) {
    info_.name = "plugin:" + argument;
    if (options.in_worker) return;  // the parent probed it; the worker only loads and runs it
    probe_ = probe(path_, device_);
    const bool ok = probe_.error.empty();
    info_.summary = ok ? (probe_.name.empty() ? std::string("plugin") : probe_.name) +
                             (probe_.description.empty() ? "" : " (" + probe_.description + ")") + ", " +
                             (probe_.caps.memory == KVFZ_MEMORY_DEVICE ? "device" : "host") + " plugin " + path_
                       : "plugin " + path_ + " (not usable: " + probe_.error + ")";
    info_.supports = ok ? supports_text(probe_.caps) : "unknown";
    info_.tolerance = ok ? tolerance_of(probe_.caps.rounding) : "exact";
    info_.default_tolerance = info_.tolerance;
    info_.needs_gpu = ok && probe_.caps.memory == KVFZ_MEMORY_DEVICE;
    info_.capabilities = std::nullopt;  // the kernel's declaration, read by capabilities()
  }

  const TargetInfo& info() const override { return info_; }

  std::string unavailable_reason() const override {
    if (!probe_.error.empty()) return "plugin " + path_ + ": " + probe_.error;
    if (probe_.caps.memory == KVFZ_MEMORY_DEVICE) {
#if defined(KVFUZZ_HAVE_CUDA)
      if (std::string why = probe_cuda_device(device_); !why.empty()) return "device plugin " + path_ + ": " + why;
#else
      return "plugin " + path_ + " wants device pointers, but this kvfuzz was built without CUDA; rebuild kvfuzz "
             "with a CUDA compiler, or build the plugin for the host";
#endif
    }
    return "";
  }

  std::optional<Capabilities> capabilities() const override {
    if (!probe_.error.empty()) return std::nullopt;
    return to_capabilities(probe_.caps);
  }

  // dlopen (a plugin's constructors may take long), the query and, for a device plugin, its
  // context and stream, before the worker's first case (isolation.h).
  std::string start() override { return initialise().message; }

  RunResult run(const Case& c, std::byte* image, const ArenaLayout& layout) override {
    if (RunResult r = initialise(); r.status != RunStatus::ok) return r;
    const bool counter = (caps_.features & KVFZ_FEATURE_INVALID_SLOT_COUNTER) != 0;
    // Without a producer of its own, the plugin gets kvfuzz's slot mappings (context_parallel.h).
    if (c.cp_input == CpInput::slot_mapping && entry_.cp_slot_mapping == nullptr) write_reference_slot_mappings(c, image, layout);
    RunResult r = caps_.memory == KVFZ_MEMORY_DEVICE ? run_device(c, image, layout, counter)
                                                     : run_host(c, image, layout, counter);
    if (r.status == RunStatus::ok && !counter) add_invalid_slot_count(c, image, layout);
    return r;
  }

 private:
  RunResult initialise() {
    if (!loaded_) {
      if (std::string why = load(path_, entry_); !why.empty()) return {RunStatus::launch_error, "plugin " + path_ + ": " + why};
      if (std::string why = query(entry_, device_, caps_); !why.empty()) return {RunStatus::launch_error, why};
      loaded_ = true;
    }
#if defined(KVFUZZ_HAVE_CUDA)
    if (caps_.memory == KVFZ_MEMORY_DEVICE && stream_ == nullptr) {
      if (cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) return fault(e, "cudaSetDevice");
      if (cudaError_t e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking); e != cudaSuccess)
        return fault(e, "cudaStreamCreate");
    }
#endif
    return {};
  }

  // The case's calls: one per rank (one without shards). A context-parallel case with input
  // slot_mapping gets its ranks' slot mappings from the plugin's producer before each rank's call,
  // or from kvfuzz's formula when it exports none. `stream` is the device plugins' stream.
  RunResult call(const Case& c, std::byte* base, const ArenaLayout& layout, bool counter, void* stream) {
    const bool produce = c.cp_input == CpInput::slot_mapping && entry_.cp_slot_mapping != nullptr;
    for (int64_t rank = 0; rank < c.num_ranks(); ++rank) {
      char error[1024] = {0};
      if (produce) {
        kvfz_cp_slot_mapping_args pa = producer_args(c, base, layout, caps_.memory, rank);
        pa.stream = stream;
        if (const int rc = entry_.cp_slot_mapping(&pa, error, sizeof error); rc != 0) {
          const std::string why(error, strnlen(error, sizeof error));
          return {RunStatus::launch_error, "the plugin's slot-mapping producer refused the call: " + (why.empty() ? "(no reason given)" : why)};
        }
      }
      kvfz_append_args args = append_args(c, base, layout, caps_.memory, counter, rank);
      args.stream = stream;
      if (const int rc = entry_.append(&args, error, sizeof error); rc != 0) return refused(rc, error, sizeof error);
    }
    return {};
  }

  RunResult run_host(const Case& c, std::byte* image, const ArenaLayout& layout, bool counter) {
    return call(c, image, layout, counter, nullptr);
  }

  RunResult run_device(const Case& c, std::byte* image, const ArenaLayout& layout, bool counter) {
#if defined(KVFUZZ_HAVE_CUDA)
    const size_t bytes = static_cast<size_t>(layout.total_bytes);
    if (cudaError_t e = device_image_.upload(image, bytes, stream_); e != cudaSuccess) return fault(e, "copying the arena to the device");
    if (cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess) return fault(e, "copying the arena to the device");
    const RunResult r = call(c, device_image_.data(), layout, counter, stream_);
    // Whatever the plugin launched, on whichever stream: a fault surfaces here, and is sticky.
    if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) return fault(e, "the plugin's kernel");
    if (r.status != RunStatus::ok) return r;
    if (cudaError_t e = device_image_.download(image, bytes, stream_); e != cudaSuccess) return fault(e, "copying the arena back");
    return {};
#else
    (void)c, (void)image, (void)layout, (void)counter;
    return {RunStatus::launch_error, "device plugins need a kvfuzz built with CUDA"};
#endif
  }

  // A nonzero return `rc` of kvfuzz_plugin_append: a skip (KVFZ_APPEND_SKIP) or a refusal, with its
  // reason, at most `size` bytes of `error`.
  static RunResult refused(int rc, const char* error, size_t size) {
    std::string why(error, strnlen(error, size));
    if (why.empty()) why = "(no reason given)";
    if (rc == KVFZ_APPEND_SKIP) return {RunStatus::skip, why};
    return {RunStatus::launch_error, "the plugin refused the call: " + why};
  }

#if defined(KVFUZZ_HAVE_CUDA)
  RunResult fault(cudaError_t e, const char* what) {
    if (is_sticky(e)) return {RunStatus::device_fault, describe(e, what)};
    cudaGetLastError();  // clear a non-sticky error so the next case starts clean
    return {RunStatus::launch_error, describe(e, what)};
  }
#endif

  std::string path_;  // absolute: dlopen must not search the library path for a bare file name
  int device_;
  Probe probe_;       // what the probe child found (kvfuzz's process)
  TargetInfo info_;
  // Worker-side state: the plugin as loaded in this (worker) process.
  bool loaded_ = false;
  Entry entry_;
  kvfz_capabilities caps_{};
#if defined(KVFUZZ_HAVE_CUDA)
  cudaStream_t stream_ = nullptr;
  DeviceImage device_image_;
#endif
};

}  // namespace

std::unique_ptr<Target> make_plugin_target(const std::string& argument, const TargetOptions& options) {
  std::error_code ec;
  const std::filesystem::path path(argument);
  if (!std::filesystem::exists(path, ec))
    throw InputError(argument, "", "no such file; --target plugin:PATH expects the path of a plugin shared object "
                                   "(see include/kvfuzz_plugin.h and docs/targets.md)");
  if (!std::filesystem::is_regular_file(path, ec))
    throw InputError(argument, "", "is not a regular file; --target plugin:PATH expects the path of a plugin shared object");
  return std::make_unique<PluginTarget>(argument, options);
}

}  // namespace kvf
