// mla_adapter.cu — FlashInfer's MLA append kernel behind kvfuzz's plugin C ABI (include/kvfuzz_plugin.h).
//
// The kernel is flashinfer::AppendPagedKVMlaCache of flashinfer/page.cuh, what
// flashinfer.append_paged_mla_kv_cache() runs: it copies each row's compressed latent (kv_c, 512 dims)
// and its rope part (k_pe, 64 dims) into the pages of a paged MLA cache, addressed the CSR way (row t is
// token positions[t] of request batch_indices[t], whose pages are kv_indices[kv_indptr[b] ..
// kv_indptr[b + 1])). FlashInfer takes the latent and rope caches as two tensors; a serving stack
// passes two views of one [pages, page_size, 576] cache (dims 0..511 and 512..575), which is kvfuzz's
// MLA entry (kv_c's dims, then the rope dims). This file does what FlashInfer's binding (csrc/page.cu,
// append_paged_mla_kv_cache) does between a torch call and the kernel: it builds a paged_kv_mla_t
// from the two views' base pointers and [page, entry] strides and launches the kernel on kvfuzz's stream.
// Nothing of FlashInfer is changed or re-implemented.
//
// Build (README.md next to this file):
//   examples/peers/flashinfer/fetch-headers.sh && examples/peers/flashinfer/build.sh -t mla
// Fuzz, on a machine with a Hopper GPU:
//   build/kvfuzz run --target plugin:build/plugins/flashinfer_mla_append.so --config configs/flashinfer-mla.json
//
// Every limit of the kernel is declared (kvfuzz_plugin_query, citing page.cuh), so kvfuzz sends only
// cases it can take; a case the declaration excludes arriving anyway is refused as a bug to see.
// The only skips are the 32-bit limits a campaign's caches never reach and, with
// KVFZ_FLASHINFER_SKIP_EMPTY, the empty append.
#include <cstdint>
#include <exception>

#include "kvfuzz_plugin.h"
#include "paged_append.cuh"  // set_error, aligned, fits_u32 (the helpers the paged adapter uses)

#if !defined(KVFZ_FLASHINFER_VERSION)
#define KVFZ_FLASHINFER_VERSION "unknown"
#endif

namespace {

constexpr const char* kName = "flashinfer-mla-append-" KVFZ_FLASHINFER_VERSION;
constexpr const char* kDescription =
    "flashinfer::AppendPagedKVMlaCache (page.cuh, flashinfer.append_paged_mla_kv_cache) " KVFZ_FLASHINFER_VERSION
    ", CSR addressing";

// AppendPagedKVMlaCache instantiates one shape: FLASHINFER_CHECK(head_dim_ckv == 512) and
// (head_dim_kpe == 64), so kvfuzz's MLA entry is 512 + 64 = 576 dims wide.
constexpr int32_t kLatentDims = 512;
constexpr int32_t kRopeDims = 64;
constexpr int32_t kEntryDims = kLatentDims + kRopeDims;

using kvfz_flashinfer::aligned;
using kvfz_flashinfer::fits_u32;
using kvfz_flashinfer::set_error;

// Why kvfuzz should not have sent this call (what the capabilities exclude), or nullptr.
const char* refusal(const kvfz_append_args& a) {
  if (a.memory != KVFZ_MEMORY_DEVICE) return "host pointers, but the plugin declared KVFZ_MEMORY_DEVICE";
  if (a.addressing != KVFZ_ADDRESSING_CSR) return "not a CSR call; the plugin declared CSR addressing only";
  if (a.family != KVFZ_FAMILY_MLA) return "a format family other than MLA";
  if (a.quant_format != KVFZ_QUANT_NONE || a.scale_kind != KVFZ_SCALE_NONE) return "a quantised cache";
  if (a.layout != KVFZ_LAYOUT_PAGED_NHD && a.layout != KVFZ_LAYOUT_PAGED_HND) return "a layout other than paged";
  if (a.input_dtype != KVFZ_F16 && a.input_dtype != KVFZ_BF16) return "an input dtype other than f16/bf16";
  if (a.cache_dtype != a.input_dtype) return "a cache dtype other than the input's";
  if (a.head_dim != kEntryDims || a.rope_dim != kRopeDims) return "an MLA entry other than 512 + 64 dims";
  if (a.num_heads != 1) return "an MLA call with more than one head";
  const int64_t elem = 2;  // f16, bf16
  const int64_t strides[] = {a.key_stride_token, a.rope_stride_token, a.cache.stride_block, a.cache.stride_pos};
  for (int64_t s : strides)
    if (s < 0 || !aligned(s, elem)) return "a stride not a multiple of 16 bytes, but the plugin declared stride_granularity 16";
  if (!aligned(a.key) || !aligned(a.rope) || !aligned(a.k_cache))
    return "a base pointer not 16-byte aligned, but the plugin does not declare KVFZ_FEATURE_UNALIGNED";
  if (a.rope == nullptr || a.batch_indices == nullptr || a.positions == nullptr || a.kv_indices == nullptr ||
      a.kv_indptr == nullptr || a.kv_last_page_len == nullptr)
    return "an MLA CSR call without k_pe or its CSR arrays";
  return nullptr;
}

// Why AppendPagedKVMlaCache cannot take this call although the capabilities admit it, or nullptr. The
// texts are the skip reasons kvfuzz counts, so they name a kind of case, not one case.
const char* skip_reason(const kvfz_append_args& a) {
  // paged_kv_mla_t keeps its page and entry strides in uint32_t, the kernel takes nnz as uint32_t and
  // computes indptr[b] * page_size + position in 32 bits.
  if (!fits_u32(a.cache.stride_block) || !fits_u32(a.cache.stride_pos))
    return "cache stride above 2^32 - 1 elements (paged_kv_mla_t strides are uint32_t)";
  if (!fits_u32(a.num_slots)) return "more than 2^32 - 1 rows (nnz is uint32_t)";
  if (!fits_u32(a.cache.num_blocks * a.cache.block_size)) return "cache of more than 2^32 - 1 slots (page arithmetic in uint32_t)";
#if defined(KVFZ_FLASHINFER_SKIP_EMPTY)
  // As AppendPagedKVCache: a grid of min(occupancy, ceil(nnz / SMs)) * SMs CTAs, none for nnz = 0,
  // which CUDA refuses. Without this define the empty append is sent and reported.
  if (a.num_slots == 0) return "empty append (nnz = 0)";
#endif
  return nullptr;
}

// The append as csrc/page.cu's append_paged_mla_kv_cache launches it, with kvfuzz's one MLA cache as
// its two views: the latent cache at the entry's dim 0, the rope cache at dim 512, both with the
// cache's [page, entry] strides (paged_kv_mla_t's kv_strides constructor reads strides[0] and [1]).
// The inputs' token strides are kv_c's and k_pe's (their last dims contiguous).
template <typename T>
cudaError_t append(const kvfz_append_args& a) {
  const int64_t strides[2] = {a.cache.stride_block, a.cache.stride_pos};
  T* latent = static_cast<T*>(a.k_cache);
  flashinfer::paged_kv_mla_t<T, int32_t> paged_kv(
      static_cast<uint32_t>(a.cache.block_size), kLatentDims, kRopeDims, static_cast<uint32_t>(a.batch_size), latent,
      strides, latent + kLatentDims, strides, const_cast<int32_t*>(a.kv_indices), const_cast<int32_t*>(a.kv_indptr),
      const_cast<int32_t*>(a.kv_last_page_len));
  return flashinfer::AppendPagedKVMlaCache<T, int32_t>(
      paged_kv, const_cast<T*>(static_cast<const T*>(a.key)), const_cast<T*>(static_cast<const T*>(a.rope)),
      const_cast<int32_t*>(a.batch_indices), const_cast<int32_t*>(a.positions), static_cast<uint32_t>(a.num_slots),
      static_cast<size_t>(a.key_stride_token), static_cast<size_t>(a.rope_stride_token),
      static_cast<cudaStream_t>(a.stream));
}

}  // namespace

extern "C" {

uint32_t kvfuzz_plugin_abi_version(void) { return KVFUZZ_PLUGIN_ABI_VERSION; }

int kvfuzz_plugin_query(kvfz_capabilities* caps, int device, char* error, size_t error_size) {
  // The declaration needs CSR addressing, families, rope dims and stride granularity (v2 fields).
  if (!KVFZ_HAS_FIELD(caps, kvfz_capabilities, stride_granularity)) {
    set_error(error, error_size,
              "this kvfuzz predates kvfz_capabilities.stride_granularity, which FlashInfer's MLA append needs "
              "(16-byte vector copies); rebuild the plugin against the kvfuzz that loads it");
    return 1;
  }
  if (kvfz_flashinfer::check_device(device, error, error_size) != 0) return 1;
  caps->memory = KVFZ_MEMORY_DEVICE;
  caps->name = kName;
  caps->description = kDescription;
  // One latent entry per slot (paged_kv_mla_t: "[max_num_pages, page_size, head_dim]"); with H = 1 the
  // paged NHD and HND orders are the same [page, entry] strides.
  caps->families = 1u << KVFZ_FAMILY_MLA;
  caps->layouts = (1u << KVFZ_LAYOUT_PAGED_NHD) | (1u << KVFZ_LAYOUT_PAGED_HND);
  // AppendPagedKVMlaCacheKernel copies DType to DType; the binding dispatches the cache's dtype (f16,
  // bf16, fp8; no f32). An fp8 cache takes fp8 rows bit for bit, which kvfuzz's fp8 caches (quantised
  // with scales) are not.
  caps->input_dtypes = (1u << KVFZ_F16) | (1u << KVFZ_BF16);
  caps->cache_dtypes = caps->input_dtypes;
  caps->same_input_cache_dtype = 1;
  caps->scale_kinds = 1u << KVFZ_SCALE_NONE;
  caps->slot_types = (1u << KVFZ_I32) | (1u << KVFZ_I64);  // no slot_mapping in a CSR call: both admitted
  caps->max_num_heads = 1;
  caps->head_dims[0] = kEntryDims;  // head_dims (v1) and rope_dims (v2): FLASHINFER_CHECKs of the launcher
  caps->rope_dims[0] = kRopeDims;
  // Inputs: any token stride for kv_c and k_pe (append_ckv_stride_n, append_kpe_stride_n), so views of
  // one projection output too. Cache: any page and entry strides (uint32). All in 16-byte units: every
  // copy is one vec_t<DType, 8>::memcpy (an int4) per thread, and the rope view starts 1024 bytes into
  // the entry. Rows >= nnz are never read (the loop runs i < nnz).
  caps->features =
      KVFZ_FEATURE_FUSED_QKV | KVFZ_FEATURE_STRIDED_INPUT | KVFZ_FEATURE_PADDED_CACHE | KVFZ_FEATURE_GRAPH_PADDING_ROWS;
  caps->stride_granularity = 16;
  caps->rounding = KVFZ_ROUNDING_EXACT;  // a bit copy
  caps->addressings = 1u << KVFZ_ADDRESSING_CSR;
  return 0;
}

int kvfuzz_plugin_append(const kvfz_append_args* args, char* error, size_t error_size) {
  if (!KVFZ_HAS_FIELD(args, kvfz_append_args, fields)) {
    set_error(error, error_size, "kvfz_append_args lacks the v2 fields: kvfuzz is older than this plugin's header");
    return 1;
  }
  const kvfz_append_args& a = *args;
  if (const char* why = refusal(a)) {
    set_error(error, error_size, "refused: kvfuzz sent %s", why);
    return 1;
  }
  if (const char* why = skip_reason(a)) {
    set_error(error, error_size, "%s", why);
    return KVFZ_APPEND_SKIP;
  }
  cudaError_t e = cudaSuccess;
  try {  // the launcher's FLASHINFER_CHECKs throw (refusal() has checked their dims first)
    e = a.input_dtype == KVFZ_F16 ? append<half>(a) : append<nv_bfloat16>(a);
  } catch (const std::exception& x) {
    set_error(error, error_size, "AppendPagedKVMlaCache threw: %s", x.what());
    return 1;
  }
  // The launcher returns the first failing CUDA call's status (cudaLaunchKernel's included).
  return kvfz_flashinfer::launch_result(e, "AppendPagedKVMlaCache", error, error_size) == cudaSuccess ? 0 : 1;
}

}  // extern "C"
