// adapter.cu — FlashInfer's paged-KV append kernel behind kvfuzz's plugin C ABI (include/kvfuzz_plugin.h).
//
// The kernel is flashinfer::AppendPagedKVCache of flashinfer/page.cuh, what
// flashinfer.append_paged_kv_cache() runs. It addresses the cache the CSR way (kvfz_addressing CSR):
// row t is token positions[t] of request batch_indices[t], whose pages are kv_indices[kv_indptr[b] ..
// kv_indptr[b + 1]). This file does what FlashInfer's own binding (csrc/page.cu) does between a torch
// call and the kernel: it builds a paged_kv_t from the cache tensors' base pointers and strides and
// launches AppendPagedKVCache on kvfuzz's stream (paged_append.cuh, shared with bench_driver.cu).
// Nothing of FlashInfer is changed or re-implemented.
//
// Build (README.md next to this file):
//   examples/peers/flashinfer/fetch-headers.sh && examples/peers/flashinfer/build.sh
// Fuzz, on a machine with a Hopper GPU:
//   build/kvfuzz run --target plugin:build/plugins/flashinfer_append.so --config configs/serving.json
//
// What it declares, and why, is in kvfuzz_plugin_query below (citing page.cuh); cases the declaration
// cannot express are skipped (KVFZ_APPEND_SKIP) with a reason kvfuzz counts; cases the declaration
// excludes are refused (kvfuzz never sends them, so one arriving is a bug to see).
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <exception>

#include "kvfuzz_plugin.h"
#include "paged_append.cuh"  // kvfz_flashinfer_append, the paged_kv_t and launch

// build.sh passes the FlashInfer version the headers came from (FLASHINFER_VERSION of the fetched tree).
#if !defined(KVFZ_FLASHINFER_VERSION)
#define KVFZ_FLASHINFER_VERSION "unknown"
#endif

namespace {

constexpr const char* kName = "flashinfer-append-" KVFZ_FLASHINFER_VERSION;
constexpr const char* kDescription =
    "flashinfer::AppendPagedKVCache (page.cuh, flashinfer.append_paged_kv_cache) " KVFZ_FLASHINFER_VERSION
    ", CSR addressing";

using kvfz_flashinfer::kHeadDims;
using kvfz_flashinfer::kMaxNumHeads;

using kvfz_flashinfer::set_error;

// Why kvfuzz should not have sent this call (what the capabilities exclude), or nullptr.
const char* refusal(const kvfz_append_args& a) {
  if (a.memory != KVFZ_MEMORY_DEVICE) return "host pointers, but the plugin declared KVFZ_MEMORY_DEVICE";
  if (a.addressing != KVFZ_ADDRESSING_CSR) return "not a CSR call; the plugin declared CSR addressing only";
  if (a.family != KVFZ_FAMILY_KV) return "a format family other than KV";
  if (a.layout != KVFZ_LAYOUT_PAGED_NHD && a.layout != KVFZ_LAYOUT_PAGED_HND) return "a layout other than paged NHD/HND";
  if (a.scale_kind != KVFZ_SCALE_NONE) return "a quantised cache";
  if (a.input_dtype != KVFZ_F16 && a.input_dtype != KVFZ_BF16) return "an input dtype other than f16/bf16";
  if (a.cache_dtype != a.input_dtype) return "a cache dtype other than the input's";
  if (!kvfz_flashinfer::supported_head_dim(a.head_dim)) return "a head_dim outside {64, 128, 256, 512}";
  if (a.num_heads < 1 || a.num_heads > kMaxNumHeads) return "num_heads outside the declared range";
  if (!kvfz_flashinfer::aligned(a.key) || !kvfz_flashinfer::aligned(a.value) || !kvfz_flashinfer::aligned(a.k_cache) ||
      !kvfz_flashinfer::aligned(a.v_cache))
    return "a base pointer not 16-byte aligned, but the plugin does not declare KVFZ_FEATURE_UNALIGNED";
  if (a.batch_indices == nullptr || a.positions == nullptr || a.kv_indices == nullptr || a.kv_indptr == nullptr ||
      a.kv_last_page_len == nullptr)
    return "a CSR call without its CSR arrays";
  return nullptr;
}

// The call in FlashInfer's terms: kvfuzz's CSR arrays are FlashInfer's, its cache geometry the
// page, entry and head strides (K's and V's alike), its rows the nnz.
kvfz_flashinfer_append flashinfer_call(const kvfz_append_args& a) {
  kvfz_flashinfer_append c{};
  c.dtype = a.input_dtype;  // = cache_dtype (refusal)
  c.layout = a.layout;
  c.num_heads = a.num_heads;
  c.head_dim = a.head_dim;
  c.key = a.key;
  c.value = a.value;
  c.key_stride_token = a.key_stride_token;
  c.key_stride_head = a.key_stride_head;
  c.value_stride_token = a.value_stride_token;
  c.value_stride_head = a.value_stride_head;
  c.k_cache = a.k_cache;
  c.v_cache = a.v_cache;
  c.num_pages = a.cache.num_blocks;
  c.page_size = a.cache.block_size;
  c.stride_page = a.cache.stride_block;
  c.stride_pos = a.cache.stride_pos;
  c.stride_head = a.cache.stride_head;
  c.batch_indices = a.batch_indices;
  c.positions = a.positions;
  c.kv_indptr = a.kv_indptr;
  c.kv_indices = a.kv_indices;
  c.kv_last_page_len = a.kv_last_page_len;
  c.batch_size = a.batch_size;
  c.nnz = a.num_slots;
  c.stream = a.stream;
  return c;
}

// Why AppendPagedKVCache cannot take this call although the capabilities admit it, or nullptr: the
// kernel's limits (paged_append.cuh's unsupported()), and with KVFZ_FLASHINFER_SKIP_EMPTY the empty
// append. The texts are the skip reasons kvfuzz counts, so they name a kind of case, not one case.
const char* skip_reason(const kvfz_flashinfer_append& c) {
  if (const char* why = kvfz_flashinfer::unsupported(c)) return why;
#if defined(KVFZ_FLASHINFER_SKIP_EMPTY)
  // AppendPagedKVCache launches a grid of min(occupancy, ceil(nnz / SMs)) * SMs CTAs: none for nnz = 0,
  // which CUDA refuses (cudaErrorInvalidValue on an H200, CUDA 13). Without this define it is reported.
  if (c.nnz == 0) return "empty append (nnz = 0)";
#endif
  return nullptr;
}

}  // namespace

extern "C" {

uint32_t kvfuzz_plugin_abi_version(void) { return KVFUZZ_PLUGIN_ABI_VERSION; }

int kvfuzz_plugin_query(kvfz_capabilities* caps, int device, char* error, size_t error_size) {
  // FlashInfer's append takes CSR arrays only; a kvfuzz that cannot send them has nothing to run here.
  if (!KVFZ_HAS_FIELD(caps, kvfz_capabilities, addressings)) {
    set_error(error, error_size,
              "this kvfuzz predates CSR addressing (kvfz_capabilities.addressings), the only convention "
              "FlashInfer's append takes; rebuild the plugin against the kvfuzz that loads it");
    return 1;
  }
  if (kvfz_flashinfer::check_device(device, error, error_size) != 0) return 1;
  caps->memory = KVFZ_MEMORY_DEVICE;
  caps->name = kName;
  caps->description = kDescription;
  // paged_kv_t's two layouts (page.cuh: "[max_num_pages, page_size, num_heads, head_dim] if NHD",
  // "[max_num_pages, num_heads, page_size, head_dim] if HND"), any strides through its kv_strides
  // constructor, which is how the binding passes torch strides.
  caps->layouts = (1u << KVFZ_LAYOUT_PAGED_NHD) | (1u << KVFZ_LAYOUT_PAGED_HND);
  // The kernel copies DType to DType: the input is the cache's dtype. The binding dispatches f16,
  // bf16, fp8 and fp4 caches, but an fp8 cache takes fp8 rows bit for bit (no scale, no conversion),
  // which kvfuzz cannot describe (its fp8 caches are quantised from f16/bf16/f32 rows with scales).
  // f32 is not dispatched.
  caps->input_dtypes = (1u << KVFZ_F16) | (1u << KVFZ_BF16);
  caps->cache_dtypes = caps->input_dtypes;
  caps->same_input_cache_dtype = 1;
  caps->scale_kinds = 1u << KVFZ_SCALE_NONE;
  // A CSR call carries no slot_mapping, so its element type is never read: both are admitted so that
  // kvfuzz does not skip cases for it. The CSR arrays are int32, FlashInfer's IdType.
  caps->slot_types = (1u << KVFZ_I32) | (1u << KVFZ_I64);
  // Input: any token and head strides (append_k/v_stride_n, _h; K's and V's may differ), so fused QKV
  // views too. Cache: any strides (stride_page, stride_n, stride_h). Both only at 16-byte multiples
  // (stride_granularity below). Rows >= nnz are never read (the loop runs i < nnz). No
  // unaligned bases (16-byte vectors) and no invalid-slot counter (CSR has no invalid rows).
  caps->features =
      KVFZ_FEATURE_FUSED_QKV | KVFZ_FEATURE_STRIDED_INPUT | KVFZ_FEATURE_PADDED_CACHE | KVFZ_FEATURE_GRAPH_PADDING_ROWS;
  caps->rounding = KVFZ_ROUNDING_EXACT;  // a bit copy
  // Threads per CTA = lanes * num_heads <= 1024: 128 heads at head_dim 64; fewer at larger head dims,
  // which the capabilities cannot say per head dim (skipped). Any page size (uint_fastdiv divides by
  // any d >= 1), so no block-size limit.
  caps->max_num_heads = kMaxNumHeads;
  if (KVFZ_HAS_FIELD(caps, kvfz_capabilities, head_dims))
    for (size_t i = 0; i < sizeof(kHeadDims) / sizeof(kHeadDims[0]); ++i) caps->head_dims[i] = kHeadDims[i];
  if (KVFZ_HAS_FIELD(caps, kvfz_capabilities, families)) caps->families = 1u << KVFZ_FAMILY_KV;
  // Every copy is a 16-byte vector: strides in whole 16-byte units only (a kvfuzz that predates the
  // field sends others, and skip_reason skips them).
  if (KVFZ_HAS_FIELD(caps, kvfz_capabilities, stride_granularity)) caps->stride_granularity = 16;
  caps->addressings = 1u << KVFZ_ADDRESSING_CSR;  // KVFZ_HAS_FIELD checked first thing
  return 0;
}

int kvfuzz_plugin_append(const kvfz_append_args* args, char* error, size_t error_size) {
  if (!KVFZ_HAS_FIELD(args, kvfz_append_args, batch_size)) {
    set_error(error, error_size, "kvfz_append_args has no CSR fields: kvfuzz is older than this plugin's header");
    return 1;
  }
  const kvfz_append_args& a = *args;
  if (const char* why = refusal(a)) {
    set_error(error, error_size, "refused: kvfuzz sent %s", why);
    return 1;
  }
  const kvfz_flashinfer_append call = flashinfer_call(a);
  if (const char* why = skip_reason(call)) {
    set_error(error, error_size, "%s", why);
    return KVFZ_APPEND_SKIP;
  }
  cudaError_t e = cudaSuccess;
  try {  // FlashInfer reports a head dim it has no case for by throwing (DISPATCH_HEAD_DIM)
    e = kvfz_flashinfer::append_dispatch(call);
  } catch (const std::exception& x) {
    set_error(error, error_size, "AppendPagedKVCache threw: %s", x.what());
    return 1;
  }
  // The launcher returns the first failing CUDA call's status (cudaLaunchKernel's included).
  return kvfz_flashinfer::launch_result(e, "AppendPagedKVCache", error, error_size) == cudaSuccess ? 0 : 1;
}

}  // extern "C"
