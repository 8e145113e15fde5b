// adapter.cu — FlashInfer's paged-KV append kernel behind kvfuzz's plugin C ABI (include/kvfuzz_plugin.h).
//
// The kernel is flashinfer::AppendPagedKVCache of flashinfer/page.cuh, what
// flashinfer.append_paged_kv_cache() runs. It addresses the cache the CSR way (kvfz_addressing CSR):
// row t is token positions[t] of request batch_indices[t], whose pages are kv_indices[kv_indptr[b] ..
// kv_indptr[b + 1]). This file does what FlashInfer's own binding (csrc/page.cu) does between a torch
// call and the kernel: it builds a paged_kv_t from the cache tensors' base pointers and strides and
// launches AppendPagedKVCache on kvfuzz's stream. Nothing of FlashInfer is changed or re-implemented.
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

#include <flashinfer/page.cuh>

#include "kvfuzz_plugin.h"

// build.sh passes the FlashInfer version the headers came from (FLASHINFER_VERSION of the fetched tree).
#if !defined(KVFZ_FLASHINFER_VERSION)
#define KVFZ_FLASHINFER_VERSION "unknown"
#endif

namespace {

constexpr const char* kName = "flashinfer-append-" KVFZ_FLASHINFER_VERSION;
constexpr const char* kDescription =
    "flashinfer::AppendPagedKVCache (page.cuh, flashinfer.append_paged_kv_cache) " KVFZ_FLASHINFER_VERSION
    ", CSR addressing";

// The head dims AppendPagedKVCache instantiates: DISPATCH_HEAD_DIM (utils.cuh) has cases 64, 128,
// 256 and 512 and throws for any other.
constexpr int32_t kHeadDims[] = {64, 128, 256, 512};

// One CTA of AppendPagedKVCache is (lanes, num_heads) threads: a lane copies vec_size elements of a
// head, vec_size = max(16 bytes / element, HEAD_DIM / 32) (page.cuh, AppendPagedKVCache).
constexpr int64_t kMaxThreadsPerBlock = 1024;
constexpr int64_t lanes_per_head(int64_t head_dim, int64_t elem_bytes) {
  return head_dim / (16 / elem_bytes > head_dim / 32 ? 16 / elem_bytes : head_dim / 32);
}
// The most heads any head dim allows: 1024 / 8 lanes at head_dim 64 (f16, bf16).
constexpr int32_t kMaxNumHeads = static_cast<int32_t>(kMaxThreadsPerBlock / lanes_per_head(64, 2));

// Every load and store of the kernel is one or two 16-byte vectors (vec_t<half / nv_bfloat16,
// vec_size>::memcpy in vec_dtypes.cuh copies int4s), so every row start must be 16-byte aligned.
constexpr int64_t kVectorBytes = 16;

void set_error(char* error, size_t size, const char* format, ...) {
  if (error == nullptr || size == 0) return;
  va_list args;
  va_start(args, format);
  std::vsnprintf(error, size, format, args);
  va_end(args);
}

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kVectorBytes == 0; }
bool aligned(int64_t stride_elems, int64_t elem_bytes) { return (stride_elems * elem_bytes) % kVectorBytes == 0; }
bool fits_u32(int64_t v) { return v >= 0 && v <= static_cast<int64_t>(UINT32_MAX); }

bool supported_head_dim(int32_t d) {
  for (int32_t h : kHeadDims)
    if (h == d) return true;
  return false;
}

// Why kvfuzz should not have sent this call (what the capabilities exclude), or nullptr.
const char* refusal(const kvfz_append_args& a) {
  if (a.memory != KVFZ_MEMORY_DEVICE) return "host pointers, but the plugin declared KVFZ_MEMORY_DEVICE";
  if (a.addressing != KVFZ_ADDRESSING_CSR) return "not a CSR call; the plugin declared CSR addressing only";
  if (a.family != KVFZ_FAMILY_KV) return "a format family other than KV";
  if (a.layout != KVFZ_LAYOUT_PAGED_NHD && a.layout != KVFZ_LAYOUT_PAGED_HND) return "a layout other than paged NHD/HND";
  if (a.scale_kind != KVFZ_SCALE_NONE) return "a quantised cache";
  if (a.input_dtype != KVFZ_F16 && a.input_dtype != KVFZ_BF16) return "an input dtype other than f16/bf16";
  if (a.cache_dtype != a.input_dtype) return "a cache dtype other than the input's";
  if (!supported_head_dim(a.head_dim)) return "a head_dim outside {64, 128, 256, 512}";
  if (a.num_heads < 1 || a.num_heads > kMaxNumHeads) return "num_heads outside the declared range";
  if (!aligned(a.key) || !aligned(a.value) || !aligned(a.k_cache) || !aligned(a.v_cache))
    return "a base pointer not 16-byte aligned, but the plugin does not declare KVFZ_FEATURE_UNALIGNED";
  if (a.batch_indices == nullptr || a.positions == nullptr || a.kv_indices == nullptr || a.kv_indptr == nullptr ||
      a.kv_last_page_len == nullptr)
    return "a CSR call without its CSR arrays";
  return nullptr;
}

// Why AppendPagedKVCache cannot take this call although the capabilities admit it, or nullptr. The
// texts are the skip reasons kvfuzz counts, so they name a kind of case, not one case.
const char* skip_reason(const kvfz_append_args& a) {
  const int64_t elem = 2;  // f16 and bf16
  if (lanes_per_head(a.head_dim, elem) * a.num_heads > kMaxThreadsPerBlock) {
    switch (a.head_dim) {  // one text per head dim: the limit differs
      case 64: return "num_heads > 128 at head_dim 64: over 1024 threads per CTA";
      case 128: return "num_heads > 64 at head_dim 128: over 1024 threads per CTA";
      default: return "num_heads > 32 at head_dim 256/512: over 1024 threads per CTA";
    }
  }
  // Row starts the 16-byte vectors need (gapped strides are drawn with gaps of a few elements).
  if (!aligned(a.key_stride_token, elem) || !aligned(a.key_stride_head, elem) || !aligned(a.value_stride_token, elem) ||
      !aligned(a.value_stride_head, elem))
    return "input stride not a multiple of 16 bytes (16-byte vector copies)";
  if (!aligned(a.cache.stride_block, elem) || !aligned(a.cache.stride_pos, elem) || !aligned(a.cache.stride_head, elem))
    return "cache stride not a multiple of 16 bytes (16-byte vector copies)";
  // paged_kv_t keeps its strides and page_size in uint32_t, the kernel takes nnz as uint32_t, and it
  // computes indptr[b] * page_size + position in 32 bits.
  if (!fits_u32(a.cache.stride_block) || !fits_u32(a.cache.stride_pos) || !fits_u32(a.cache.stride_head))
    return "cache stride above 2^32 - 1 elements (paged_kv_t strides are uint32_t)";
  if (!fits_u32(a.num_slots)) return "more than 2^32 - 1 rows (nnz is uint32_t)";
  if (!fits_u32(a.cache.block_size) || !fits_u32(a.cache.num_blocks * a.cache.block_size))
    return "cache of more than 2^32 - 1 slots (page arithmetic in uint32_t)";
  if (a.key_stride_token < 0 || a.key_stride_head < 0 || a.value_stride_token < 0 || a.value_stride_head < 0)
    return "negative input stride (the kernel's input strides are size_t)";
#if defined(KVFZ_FLASHINFER_SKIP_EMPTY)
  // AppendPagedKVCache launches a grid of min(occupancy, ceil(nnz / SMs)) * SMs CTAs: none for nnz = 0,
  // which CUDA refuses (cudaErrorInvalidValue on an H200, CUDA 13). Without this define it is reported.
  if (a.num_slots == 0) return "empty append (nnz = 0)";
#endif
  return nullptr;
}

// One append through FlashInfer, as csrc/page.cu's append_paged_kv_cache calls it: the cache tensors'
// strides in their dimension order ([pages, page_size, H, D] for NHD, [pages, H, page_size, D] for HND),
// K's and V's alike, and the input's token and head strides.
template <typename T>
cudaError_t append(const kvfz_append_args& a) {
  const bool hnd = a.layout == KVFZ_LAYOUT_PAGED_HND;
  const int64_t cache_strides[3] = {a.cache.stride_block, hnd ? a.cache.stride_head : a.cache.stride_pos,
                                    hnd ? a.cache.stride_pos : a.cache.stride_head};
  flashinfer::paged_kv_t<T, int32_t> paged_kv(
      static_cast<uint32_t>(a.num_heads), static_cast<uint32_t>(a.cache.block_size),
      static_cast<uint32_t>(a.head_dim), static_cast<uint32_t>(a.batch_size),
      hnd ? flashinfer::QKVLayout::kHND : flashinfer::QKVLayout::kNHD, static_cast<T*>(a.k_cache),
      static_cast<T*>(a.v_cache), cache_strides, const_cast<int32_t*>(a.kv_indices), const_cast<int32_t*>(a.kv_indptr),
      const_cast<int32_t*>(a.kv_last_page_len));
  // FlashInfer's pointers are not const; the kernel only reads these.
  return flashinfer::AppendPagedKVCache<T, int32_t>(
      paged_kv, const_cast<T*>(static_cast<const T*>(a.key)), const_cast<T*>(static_cast<const T*>(a.value)),
      const_cast<int32_t*>(a.batch_indices), const_cast<int32_t*>(a.positions), static_cast<uint32_t>(a.num_slots),
      static_cast<size_t>(a.key_stride_token), static_cast<size_t>(a.key_stride_head),
      static_cast<size_t>(a.value_stride_token), static_cast<size_t>(a.value_stride_head),
      static_cast<cudaStream_t>(a.stream));
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
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || device < 0 || device >= count) {
    set_error(error, error_size, "no CUDA device %d (%s; is an NVIDIA driver installed?)", device,
              e != cudaSuccess ? cudaGetErrorString(e) : "fewer devices");
    return 1;
  }
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
  // views too. Cache: any strides (stride_page, stride_n, stride_h). Both only at 16-byte multiples:
  // the others are skipped (skip_reason). Rows >= nnz are never read (the loop runs i < nnz). No
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
  if (const char* why = skip_reason(a)) {
    set_error(error, error_size, "%s", why);
    return KVFZ_APPEND_SKIP;
  }
  cudaError_t e = cudaSuccess;
  try {  // FlashInfer reports a head dim it has no case for by throwing (DISPATCH_HEAD_DIM)
    e = a.input_dtype == KVFZ_F16 ? append<half>(a) : append<nv_bfloat16>(a);
  } catch (const std::exception& x) {
    set_error(error, error_size, "AppendPagedKVCache threw: %s", x.what());
    return 1;
  }
  // AppendPagedKVCache returns the first failing CUDA call's status (cudaLaunchKernel's included); a
  // refused launch writes nothing, so it must be reported, not left to show as missing writes. The
  // runtime also records that error as the thread's last error: consume it, or the next call's
  // cudaGetLastError() would report it for a launch that succeeded (a worker runs many cases).
  if (e == cudaSuccess) e = cudaGetLastError();
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    set_error(error, error_size, "AppendPagedKVCache failed: %s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
    return 1;
  }
  return 0;
}

}  // extern "C"
