// kv_append.cuh — the CUDA KV-cache append kernel: parameters, per-thread body, dtype dispatch.
//
// Contract (DESIGN.md §1, unquantised part): for every slot entry t in [0, num_slots) with
// 0 <= slot_mapping[t] < capacity, the rows key[t, :, :] and value[t, :, :] are written to the
// cache slot converted to the cache dtype (bit copy when the dtypes are equal, round-to-nearest-even
// otherwise). slot < 0 is padding and is skipped; slot >= capacity is never written and is counted
// in *invalid_slots. No other byte changes.
//
// The body is __host__ __device__: kv_append.cu launches it on the GPU, kv_append_emu.cpp runs the
// same code on the CPU through a grid emulator (the cuda-emu target). Only the two collective
// helpers below (vector load/store and the invalid-slot counter) have separate host and device
// implementations, with identical results.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kv_layout.cuh"

namespace kvf {

// Element types of inputs and caches.
enum class DType : uint8_t { f16, bf16, f32 };
// Element type of slot_mapping.
enum class IndexType : uint8_t { i32, i64 };

// One append call. Pointers are device pointers for the GPU launcher, host pointers for the emulator.
struct KvAppendParams {
  const void* key = nullptr;        // [T_in, H, D] view, last dim contiguous; rows >= num_slots never read
  const void* value = nullptr;      // [T_in, H, D] view, last dim contiguous
  int64_t key_stride_token = 0;     // elements between key rows
  int64_t key_stride_head = 0;      // elements between key heads
  int64_t value_stride_token = 0;   // elements between value rows
  int64_t value_stride_head = 0;    // elements between value heads
  const void* slot_mapping = nullptr;  // [T] flat slot per row, < 0 = padding, >= capacity = invalid
  IndexType slot_type = IndexType::i64;
  int64_t num_slots = 0;            // T, the number of slot_mapping entries (the grid size)
  int64_t num_input_rows = 0;       // T_in >= T, rows of key/value; rows >= T are never read
  void* k_cache = nullptr;          // base of the K cache tensor
  void* v_cache = nullptr;          // base of the V cache tensor (same geometry as K)
  CacheGeometry cache;              // strides shared by K and V
  int32_t num_heads = 0;            // H_kv
  int32_t head_dim = 0;             // D
  DType input_dtype = DType::f16;
  DType cache_dtype = DType::f16;
  unsigned long long* invalid_slots = nullptr;  // optional counter of slots >= capacity
};

// Grid shape shared by the GPU launcher and the emulator: one thread block per slot entry.
struct LaunchConfig {
  int64_t grid = 0;   // thread blocks
  int block = 0;      // threads per block
};
inline LaunchConfig kv_append_launch_config(const KvAppendParams& p) {
  return LaunchConfig{p.num_slots, 128};
}

// ---------------------------------------------------------------------------------------------
// Host/device helpers (the only code with separate host and device implementations)

struct alignas(16) Vec16 {
  uint32_t w[4];
};

KVF_HD Vec16 load16(const void* src) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const Vec16*>(src);
#else
  Vec16 v;
  std::memcpy(&v, src, sizeof v);
  return v;
#endif
}

KVF_HD void store16(void* dst, const Vec16& v) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<Vec16*>(dst) = v;
#else
  std::memcpy(dst, &v, sizeof v);
#endif
}

KVF_HD void count_invalid_slot(unsigned long long* counter) {
  if (counter == nullptr) return;
#if defined(__CUDA_ARCH__)
  atomicAdd(counter, 1ull);
#else
  *counter += 1;  // the emulator runs threads one at a time
#endif
}

KVF_HD bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// ---------------------------------------------------------------------------------------------
// Element conversions between float dtypes: exact widening to float, round-to-nearest-even
// narrowing, and every NaN mapped to the target's canonical NaN (0x7FFF for f16 and bf16,
// 0x7FFFFFFF for f32). The NaN rule is explicit here because the host and device implementations of
// CUDA's intrinsics differ in what they do with NaN payloads.

KVF_HD float canonical_nan_f32() {
  const uint32_t bits = 0x7fffffffu;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

KVF_HD float to_float(__half x) {
  const float f = __half2float(x);
  return f != f ? canonical_nan_f32() : f;
}
KVF_HD float to_float(__nv_bfloat16 x) {
  const float f = __bfloat162float(x);
  return f != f ? canonical_nan_f32() : f;
}
KVF_HD float to_float(float x) { return x != x ? canonical_nan_f32() : x; }

template <typename T>
KVF_HD T from_float(float x);
template <>
KVF_HD __half from_float<__half>(float x) {
  return x != x ? __ushort_as_half(0x7fff) : __float2half_rn(x);
}
template <>
KVF_HD __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return x != x ? __ushort_as_bfloat16(0x7fff) : __float2bfloat16_rn(x);
}
template <>
KVF_HD float from_float<float>(float x) { return x; }

// Reads slot_mapping[t] widened to 64 bits.
template <typename SlotT>
KVF_HD int64_t load_slot(const void* slot_mapping, int64_t t) {
  return static_cast<int64_t>(static_cast<const SlotT*>(slot_mapping)[t]);
}

// Copies elements [lo, hi) of one row. Equal dtypes are bit copies (NaN payloads survive), 16 bytes
// at a time where the chunk is whole and both addresses are 16-byte aligned.
template <typename InT, typename CacheT>
KVF_HD void copy_chunk(const InT* src, CacheT* dst, int64_t lo, int64_t hi, int64_t vec) {
  if constexpr (std::is_same_v<InT, CacheT>) {
    if (hi - lo == vec && aligned16(src + lo) && aligned16(dst + lo)) {
      store16(dst + lo, load16(src + lo));
      return;
    }
    for (int64_t e = lo; e < hi; ++e) dst[e] = src[e];
  } else {
    for (int64_t e = lo; e < hi; ++e) dst[e] = from_float<CacheT>(to_float(src[e]));
  }
}

// ---------------------------------------------------------------------------------------------
// Per-thread body. Thread block `cta` handles slot entry `cta`; its threads stride over
// (K or V) x heads x 16-byte chunks of head_dim, so any head count and head_dim are covered.

template <typename InT, typename CacheT, typename SlotT>
KVF_HD void kv_append_thread(const KvAppendParams& p, int64_t cta, int thread, int threads) {
  const int64_t token = cta;
  const int64_t slot = load_slot<SlotT>(p.slot_mapping, token);
  if (slot < 0) return;  // padding
  if (slot >= cache_capacity(p.cache)) {
    if (thread == 0) count_invalid_slot(p.invalid_slots);
    return;
  }
  const int64_t block = slot / p.cache.block_size;
  const int64_t pos = slot % p.cache.block_size;

  constexpr int64_t kVec = 16 / sizeof(InT);  // elements per chunk
  const int64_t head_dim = p.head_dim;
  const int64_t chunks = (head_dim + kVec - 1) / kVec;
  const int64_t per_tensor = static_cast<int64_t>(p.num_heads) * chunks;

  for (int64_t work = thread; work < 2 * per_tensor; work += threads) {
    const bool is_value = work >= per_tensor;
    const int64_t head = (work % per_tensor) / chunks;
    const int64_t lo = (work % chunks) * kVec;
    const int64_t hi = lo + kVec < head_dim ? lo + kVec : head_dim;

    const InT* src = static_cast<const InT*>(is_value ? p.value : p.key) +
                     (is_value ? input_elem_offset(p.value_stride_token, p.value_stride_head, token, head, 0)
                               : input_elem_offset(p.key_stride_token, p.key_stride_head, token, head, 0));
    CacheT* dst = static_cast<CacheT*>(is_value ? p.v_cache : p.k_cache) +
                  cache_elem_offset(p.cache, block, pos, head, 0);
    copy_chunk<InT, CacheT>(src, dst, lo, hi, kVec);
  }
}

// ---------------------------------------------------------------------------------------------
// Dtype dispatch: calls fn(InT{}, CacheT{}, SlotT{}) for the runtime dtypes in p. Returns false
// for a combination this kernel does not implement.

template <typename T>
struct TypeTag {
  using type = T;
};

template <typename InT, typename CacheT, typename Fn>
bool dispatch_slot(const KvAppendParams& p, Fn& fn) {
  switch (p.slot_type) {
    case IndexType::i32: fn(TypeTag<InT>{}, TypeTag<CacheT>{}, TypeTag<int32_t>{}); return true;
    case IndexType::i64: fn(TypeTag<InT>{}, TypeTag<CacheT>{}, TypeTag<int64_t>{}); return true;
  }
  return false;
}

template <typename InT, typename Fn>
bool dispatch_cache(const KvAppendParams& p, Fn& fn) {
  switch (p.cache_dtype) {
    case DType::f16: return dispatch_slot<InT, __half>(p, fn);
    case DType::bf16: return dispatch_slot<InT, __nv_bfloat16>(p, fn);
    case DType::f32: return dispatch_slot<InT, float>(p, fn);
  }
  return false;
}

template <typename Fn>
bool dispatch_kv_append(const KvAppendParams& p, Fn fn) {
  switch (p.input_dtype) {
    case DType::f16: return dispatch_cache<__half>(p, fn);
    case DType::bf16: return dispatch_cache<__nv_bfloat16>(p, fn);
    case DType::f32: return dispatch_cache<float>(p, fn);
  }
  return false;
}

}  // namespace kvf
