// capabilities.h — what a target's kernel supports, and how campaigns stay inside it.
//
// kvfuzz's own targets run every case the generator makes. A plugin (targets/plugin/) declares what
// its kernel supports (kvfz_capabilities, include/kvfuzz_plugin.h), and a campaign on it only sends
// cases inside that:
//   1. case i is drawn from the profile as on any target (same seed, same case);
//   2. if it is outside the capabilities, the reason is counted (the run summary's "skipped N
//      cases: ...") and case i is drawn again, from the profile restricted to the capabilities
//      (restrict_profile: unsupported values removed, features switched off);
//   3. if that draw is outside too (something the profile cannot express, e.g. the block size of a
//      contiguous cache, which is its longest sequence), case i is not run.
// The shrinker only takes candidates inside the capabilities, so a minimal case is one the kernel
// claims to support.
//
// Plugins declare capabilities in C (kvfz_capabilities); Python targets as a dict of the names below
// (capabilities_from_json), from FUNCTION.kvfuzz_capabilities or FUNCTION_capabilities().
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "case/case.h"
#include "case/genotype.h"
#include "profile.h"

namespace kvf {

// Limits 0 mean "no limit"; bit sets are indexed by the enum's value (1u << value).
struct Capabilities {
  uint32_t layouts = ~0u;       // bits 1 << Layout
  uint32_t input_dtypes = ~0u;  // bits 1 << DType (f16, bf16, f32)
  uint32_t cache_dtypes = ~0u;  // bits 1 << DType
  uint32_t scale_kinds = ~0u;   // bits 1 << ScaleKind; `none` for float caches
  uint32_t slot_dtypes = ~0u;   // bits 1 << IndexType
  uint32_t families = ~0u;      // bits 1 << Family (kv, kv_split, k_only, mla)
  uint32_t padding_modes = ~0u; // bits 1 << PaddingMode (negative, sink)
  uint32_t addressings = ~0u;   // bits 1 << Addressing (slot_mapping, csr)
  uint32_t windows = ~0u;       // bits 1 << WindowInput (none, slot_mapping, positions): ring caches
  uint32_t cp_inputs = ~0u;     // bits 1 << CpInput (none, slot_mapping, positions): context-parallel shards
  uint32_t quant_formats = ~0u; // bits 1 << QuantFormat (case/quant_format.h): none (the classic caches) and the formats
  uint32_t quant_rules = ~0u;   // bits 1 << RuleBit: the conventions of the formats the kernel follows
  bool fused_qkv = true;            // key/value as views into one fused QKV row
  bool strided_input = true;        // input head/row strides other than dense
  bool padded_cache = true;         // cache (and scale cache) strides other than the layout's dense ones
  bool graph_padding_rows = true;   // num_input_rows > num_slots
  bool unaligned = true;            // base pointers not 16-byte aligned
  bool same_input_cache_dtype = false;  // float caches only of the input's dtype (a bit copy)
  bool invalid_slot_counter = true; // the kernel counts slots >= capacity (else it gets no counter; kvfuzz
                                    // adds the count itself and checks only that they are never written)
  bool slots_past_capacity = true;  // slots >= capacity may be sent (false: none is, as in every peer's stack)
  int32_t min_head_dim = 0, max_head_dim = 0;  // inclusive
  std::vector<int32_t> head_dims;   // the only head dims supported, ascending, distinct (empty: any); for mla
                                    // the entry's width (kv_c's dims + the rope dims)
  std::vector<int32_t> rope_dims;   // mla: the only rope (k_pe) dims supported, ascending, distinct (empty: any)
  int32_t head_dim_multiple = 0;    // head_dim % this == 0 (0 or 1: any)
  int32_t max_num_heads = 0;
  int32_t max_block_size = 0;
  bool block_size_pow2_only = false;
  int32_t stride_granularity = 0;   // bytes (a power of two; 0 or 1: any): every stride of the input views and
                                    // of the K/V caches is a multiple of it (scale caches are not held to it)

  bool operator==(const Capabilities&) const = default;
};

// The layouts a Python function target (python:, python-cuda:, python-numpy:) receives unless its
// declaration lists "layouts": every one but vllm_legacy, whose caches come as a 5-D K and a 4-D V
// (docs/targets.md) that a function written for the 4-D nhd/hnd views would misread. A function
// whose declared layouts name vllm_legacy receives it; kvfuzz's own kernels take every layout.
inline uint32_t undeclared_python_layouts() {
  return ~(1u << static_cast<unsigned>(Layout::vllm_legacy));
}

// The format families a Python function target receives unless its declaration lists "families":
// kv alone. kv_split, k_only and mla come in their own calling conventions (docs/targets.md: V with
// its own head dim, V None, the latent cache with rope=k_pe) that a function written for kv would
// misread; a function whose declared families name them receives them. kvfuzz's own kernels (cuda,
// cuda-emu, triton, triton-interp) take every family.
inline uint32_t undeclared_python_families() { return 1u << static_cast<unsigned>(Family::kv); }

// The padding modes a Python function target receives unless its declaration lists
// "padding_modes": negative alone (a function written for it may check that no slot is 0).
inline uint32_t undeclared_python_padding_modes() { return 1u << static_cast<unsigned>(PaddingMode::negative); }

// The addressings a Python function target receives unless its declaration lists "addressings":
// slot_mapping alone (CSR calls pass slot_mapping=None and the CSR arrays as keywords, docs/targets.md).
inline uint32_t undeclared_python_addressings() { return 1u << static_cast<unsigned>(Addressing::slot_mapping); }

// The quantised formats a Python function target receives unless its declaration lists
// "quant_formats": none of them, the classic caches only (a format call passes key_cache=None and the
// format's buffers and fields as keywords).
inline uint32_t undeclared_python_quant_formats() { return 1u << static_cast<unsigned>(QuantFormat::none); }

// The ring caches a Python function target receives unless its declaration lists "windows": none.
inline uint32_t undeclared_python_windows() { return 1u << static_cast<unsigned>(WindowInput::none); }

// The context-parallel shards a Python function target receives unless its declaration lists
// "cp_inputs": none (one call per rank, docs/targets.md).
inline uint32_t undeclared_python_cp_inputs() { return 1u << static_cast<unsigned>(CpInput::none); }

// Capabilities from a Python target's declaration, a JSON object whose keys are all optional (a
// missing key: no restriction) and mirror kvfz_capabilities:
//   layouts, input_dtypes, cache_dtypes, scale_kinds, slot_dtypes, families, padding_modes, addressings,
//       windows, cp_inputs   lists of names ("paged_nhd",
//       "f16", "fp8_e4m3", "none" (float caches), "per_tensor", "i32", ...)
//   features      list of "fused_qkv", "strided_input", "padded_cache", "graph_padding_rows",
//                 "invalid_slot_counter", "unaligned" (given: exactly these; missing: all)
//   head_dims     list of positive integers: the only head dims supported (mla: the entry's width)
//   rope_dims     list of positive integers: mla, the only rope (k_pe) dims supported
//   min_head_dim, max_head_dim, head_dim_multiple, max_num_heads, max_block_size   integers >= 0 (0: no limit)
//   block_size_pow2_only, same_input_cache_dtype   booleans (default false)
//   slots_past_capacity   boolean (default true): false, no slot >= capacity is ever sent
//   stride_granularity    integer, 0 or a power of two up to 4096: bytes every input and cache stride is a multiple of
// Throws InputError(where, "/KEY", what was expected) for an unknown key or a value of the wrong form.
Capabilities capabilities_from_json(const nlohmann::json& j, const std::string& where);

// The inverse of capabilities_from_json: every key, lists in declaration order, features as the list
// of those present (capabilities_from_json(capabilities_to_json(c)) == c). `kvfuzz targets --json`.
nlohmann::json capabilities_to_json(const Capabilities& c);

// One line naming the layouts and families of `c` ("layouts paged_nhd, paged_hnd; families kv, mla"):
// the formats line of `kvfuzz targets`.
std::string formats_text(const Capabilities& c);

// What kvfuzz's own kernels (cuda, cuda-emu, triton, triton-interp) and the golden model declare:
// every value of every dimension. Declared like a plugin's, so that a format one of them lacks is
// skipped and counted (the run summary's "skipped"), never failed.
inline Capabilities own_kernel_capabilities() { return Capabilities{}; }

// The CUDA kernel's (cuda, cuda-emu): every value of every dimension but the asymmetric formats,
// which only the Triton kernel writes (docs/kernels.md).
inline Capabilities cuda_kernel_capabilities() {
  Capabilities c;
  c.quant_formats = ~((1u << static_cast<unsigned>(QuantFormat::asym_int8)) | (1u << static_cast<unsigned>(QuantFormat::asym_int4)));
  return c;
}


// Why case `c` is outside `caps` ("layout packed_kv_nhd", "head_dim not a multiple of 8", ...; one
// short reason, the same text for every case failing the same way, so reasons can be counted), or ""
// when the kernel supports it.
std::string outside_reason(const Case& c, const Capabilities& caps);

// `profile` with every value outside `caps` removed from its lists and every unsupported feature's
// share set to 0. When the copy kind (cache dtype = input dtype) is impossible, the cross-dtype and
// quantised shares are scaled to fill 100. Throws InputError naming the profile, the dimension and
// both sides when a dimension has no supported value left (nothing could be generated).
Profile restrict_profile(const Profile& profile, const Capabilities& caps);

// One case of a campaign on a target with capabilities (see the file comment).
struct DrawnCase {
  Genotype genotype;    // what runs (the profile's draw, or the restricted profile's)
  Case kase;            // materialize(genotype)
  std::string outside;  // why the profile's case was outside the capabilities; "" = it runs as drawn
  bool skipped = false; // the restricted draw was outside too: nothing runs
};

// Where a campaign takes its cases: the profile, kept inside a target's capabilities if it has any.
class CaseSource {
 public:
  // Throws InputError (restrict_profile) when the profile and the capabilities have nothing in common.
  CaseSource(const Profile& profile, const std::optional<Capabilities>& caps);

  DrawnCase draw(uint64_t seed, int64_t index) const;
  // Case `index` again after the kernel skipped the one drawn (KVFZ_APPEND_SKIP): attempt 0, 1, ...
  // each from the restricted profile with a seed of its own; `outside` says why when it falls
  // outside the capabilities (then it is skipped too).
  DrawnCase redraw(uint64_t seed, int64_t index, int attempt) const;
  // "" when case `c` is inside the capabilities (always, without capabilities); else why not.
  std::string outside_reason(const Case& c) const;
  const Profile& profile() const { return profile_; }

 private:
  Profile profile_;
  std::optional<Capabilities> caps_;
  Profile restricted_;  // profile_ restricted to caps_ (unused without capabilities)
};

}  // namespace kvf
