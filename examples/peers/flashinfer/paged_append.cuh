// paged_append.cuh — one call of FlashInfer's paged-KV append (flashinfer::AppendPagedKVCache of
// flashinfer/page.cuh) from raw pointers and strides, made the way FlashInfer's own binding
// (csrc/page.cu, append_paged_kv_cache) makes it, and the calls that kernel cannot take.
//
// Shared by the two users of the kernel here, so that the paged_kv_t is built in one place:
//   adapter.cu       kvfuzz's plugin (fills a kvfz_flashinfer_append from kvfz_append_args);
//   bench_driver.cu  bench/bench.py's `--peer flashinfer=PATH` (gets one from Python through ctypes;
//                    bench.py's FlashInferArgs mirrors the struct field for field).
// mla_adapter.cu (FlashInfer's MLA append) uses only its helpers: set_error, check_device,
// launch_result, aligned, fits_u32.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <cstdio>

#include <flashinfer/page.cuh>

#include "kvfuzz_plugin.h"  // KVFZ_F16, KVFZ_BF16, KVFZ_LAYOUT_PAGED_NHD, KVFZ_LAYOUT_PAGED_HND

// One append, in FlashInfer's CSR terms. A plain C struct (bench_driver.cu takes it from ctypes). Row i
// of key / value is token positions[i] of request batch_indices[i] and lands on page
// kv_indices[kv_indptr[b] + positions[i] / page_size], entry positions[i] % page_size, of both caches.
// Element counts and strides are in elements of dtype. Standard layout, no C++ members.
struct kvfz_flashinfer_append {
  int32_t dtype;   // KVFZ_F16 or KVFZ_BF16: the inputs' and the caches' (the kernel copies bits)
  int32_t layout;  // KVFZ_LAYOUT_PAGED_NHD [pages, page_size, H, D] or KVFZ_LAYOUT_PAGED_HND [pages, H, page_size, D]
  int32_t num_heads;
  int32_t head_dim;
  const void* key;             // [nnz, H, D]: element (i, h, d) at i * key_stride_token + h * key_stride_head + d
  const void* value;           // [nnz, H, D]: likewise with the value strides
  int64_t key_stride_token;    // >= 0 (the kernel's input strides are size_t)
  int64_t key_stride_head;
  int64_t value_stride_token;
  int64_t value_stride_head;
  void* k_cache;               // base of the K cache, [num_pages, ...] in `layout`'s dimension order
  void* v_cache;               // base of the V cache: the same strides as K's (the binding requires it)
  int64_t num_pages;           // pages of each cache
  int64_t page_size;           // entries (tokens) per page
  int64_t stride_page;         // element distance between pages,
  int64_t stride_pos;          //   between entries of a page,
  int64_t stride_head;         //   between heads of an entry (dim stride 1)
  const int32_t* batch_indices;     // [nnz] the request of row i
  const int32_t* positions;         // [nnz] the position of row i in its request's sequence
  const int32_t* kv_indptr;         // [batch_size + 1] request b's pages: kv_indices[kv_indptr[b] .. kv_indptr[b + 1])
  const int32_t* kv_indices;        // [kv_indptr[batch_size]] page numbers
  const int32_t* kv_last_page_len;  // [batch_size] entries used on request b's last page, 1 .. page_size
  int32_t batch_size;               // requests
  int64_t nnz;                      // rows to append
  void* stream;                     // the cudaStream_t to launch on
};

namespace kvfz_flashinfer {

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

// printf-style text into the caller's error buffer (error, size), if it gave one.
inline void set_error(char* error, size_t size, const char* format, ...) {
  if (error == nullptr || size == 0) return;
  va_list args;
  va_start(args, format);
  std::vsnprintf(error, size, format, args);
  va_end(args);
}

// 0 when CUDA device `device` exists; else 1 with why in the caller's error buffer (the plugins' query).
inline int check_device(int device, char* error, size_t error_size) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaSuccess && device >= 0 && device < count) return 0;
  set_error(error, error_size, "no CUDA device %d (%s; is an NVIDIA driver installed?)", device,
            e != cudaSuccess ? cudaGetErrorString(e) : "fewer devices");
  return 1;
}

// A launcher's status `e` completed with the launch's own error (cudaGetLastError), or cudaSuccess; a
// failure leaves "KERNEL failed: NAME (text)" in the caller's error buffer. A refused launch writes
// nothing, so it must be reported, not left to show as missing writes. The runtime also records that
// error as the thread's last error: it is consumed, or the next call's cudaGetLastError() would report
// it for a launch that succeeded (a worker runs many cases). Shared by the plugins and the bench driver.
inline cudaError_t launch_result(cudaError_t e, const char* kernel, char* error, size_t error_size) {
  if (e == cudaSuccess) e = cudaGetLastError();
  if (e == cudaSuccess) return e;
  (void)cudaGetLastError();
  set_error(error, error_size, "%s failed: %s (%s)", kernel, cudaGetErrorName(e), cudaGetErrorString(e));
  return e;
}

inline bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kVectorBytes == 0; }
inline bool aligned(int64_t stride_elems, int64_t elem_bytes) { return (stride_elems * elem_bytes) % kVectorBytes == 0; }
inline bool fits_u32(int64_t v) { return v >= 0 && v <= static_cast<int64_t>(UINT32_MAX); }

inline bool supported_head_dim(int32_t d) {
  for (int32_t h : kHeadDims)
    if (h == d) return true;
  return false;
}

// Why AppendPagedKVCache cannot take this call, or nullptr. The texts name a kind of call, not one
// call: kvfuzz counts its plugin's skips by them.
inline const char* unsupported(const kvfz_flashinfer_append& a) {
  if (a.dtype != KVFZ_F16 && a.dtype != KVFZ_BF16) return "a dtype other than f16/bf16";
  if (a.layout != KVFZ_LAYOUT_PAGED_NHD && a.layout != KVFZ_LAYOUT_PAGED_HND) return "a layout other than paged NHD/HND";
  if (!supported_head_dim(a.head_dim)) return "a head_dim outside {64, 128, 256, 512} (DISPATCH_HEAD_DIM)";
  if (a.num_heads < 1) return "num_heads < 1";
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
  if (!aligned(a.stride_page, elem) || !aligned(a.stride_pos, elem) || !aligned(a.stride_head, elem))
    return "cache stride not a multiple of 16 bytes (16-byte vector copies)";
  // paged_kv_t keeps its strides and page_size in uint32_t, the kernel takes nnz as uint32_t, and it
  // computes indptr[b] * page_size + position in 32 bits.
  if (!fits_u32(a.stride_page) || !fits_u32(a.stride_pos) || !fits_u32(a.stride_head))
    return "cache stride above 2^32 - 1 elements (paged_kv_t strides are uint32_t)";
  if (!fits_u32(a.nnz)) return "more than 2^32 - 1 rows (nnz is uint32_t)";
  if (!fits_u32(a.page_size) || !fits_u32(a.num_pages * a.page_size))
    return "cache of more than 2^32 - 1 slots (page arithmetic in uint32_t)";
  if (a.key_stride_token < 0 || a.key_stride_head < 0 || a.value_stride_token < 0 || a.value_stride_head < 0)
    return "negative input stride (the kernel's input strides are size_t)";
  if (!aligned(a.key) || !aligned(a.value) || !aligned(a.k_cache) || !aligned(a.v_cache))
    return "a base pointer not 16-byte aligned (16-byte vector copies)";
  if (a.batch_indices == nullptr || a.positions == nullptr || a.kv_indptr == nullptr || a.kv_indices == nullptr ||
      a.kv_last_page_len == nullptr)
    return "a CSR array is NULL";
  return nullptr;
}

// The append as csrc/page.cu's append_paged_kv_cache launches it: a paged_kv_t built with the
// constructor that takes the cache tensor's strides in its dimension order ([pages, page_size, H, D]
// for NHD, [pages, H, page_size, D] for HND; K's and V's alike) and the layout, then
// AppendPagedKVCache with the input's token and head strides, on a.stream. T is half (KVFZ_F16) or
// nv_bfloat16 (KVFZ_BF16). Returns the first failing CUDA call's status; throws what
// DISPATCH_HEAD_DIM throws for a head dim it has no case for (unsupported() says so first).
template <typename T>
cudaError_t append(const kvfz_flashinfer_append& a) {
  const bool hnd = a.layout == KVFZ_LAYOUT_PAGED_HND;
  const int64_t cache_strides[3] = {a.stride_page, hnd ? a.stride_head : a.stride_pos,
                                    hnd ? a.stride_pos : a.stride_head};
  // FlashInfer's pointers are not const; the kernel only reads the inputs and the CSR arrays.
  flashinfer::paged_kv_t<T, int32_t> paged_kv(
      static_cast<uint32_t>(a.num_heads), static_cast<uint32_t>(a.page_size), static_cast<uint32_t>(a.head_dim),
      static_cast<uint32_t>(a.batch_size), hnd ? flashinfer::QKVLayout::kHND : flashinfer::QKVLayout::kNHD,
      static_cast<T*>(a.k_cache), static_cast<T*>(a.v_cache), cache_strides, const_cast<int32_t*>(a.kv_indices),
      const_cast<int32_t*>(a.kv_indptr), const_cast<int32_t*>(a.kv_last_page_len));
  return flashinfer::AppendPagedKVCache<T, int32_t>(
      paged_kv, const_cast<T*>(static_cast<const T*>(a.key)), const_cast<T*>(static_cast<const T*>(a.value)),
      const_cast<int32_t*>(a.batch_indices), const_cast<int32_t*>(a.positions), static_cast<uint32_t>(a.nnz),
      static_cast<size_t>(a.key_stride_token), static_cast<size_t>(a.key_stride_head),
      static_cast<size_t>(a.value_stride_token), static_cast<size_t>(a.value_stride_head),
      static_cast<cudaStream_t>(a.stream));
}

// append<half> or append<nv_bfloat16> by a.dtype (which unsupported() has checked).
inline cudaError_t append_dispatch(const kvfz_flashinfer_append& a) {
  return a.dtype == KVFZ_F16 ? append<half>(a) : append<nv_bfloat16>(a);
}

}  // namespace kvfz_flashinfer
