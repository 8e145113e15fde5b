// kv_append.cuh — the CUDA KV-cache append kernel: parameters, per-thread body, dtype dispatch.
//
// Contract (docs/contract.md): for every slot entry t in [0, num_slots) with 0 <= slot_mapping[t] <
// capacity, the rows key[t, :, :] and value[t, :, :] are written to the cache slot converted to the
// cache dtype: a bit copy when the dtypes are equal, round-to-nearest-even between float dtypes,
// and convert(x / scale) for fp8/int8 caches (ScaleKind below; per_token_head also writes the scale
// it computed into the scale cache). slot < 0 is padding and is skipped; slot >= capacity is never
// written and is counted in *invalid_slots. No other byte changes.
//
// The body is __host__ __device__: kv_append.cu launches it on the GPU, kv_append_emu.cpp runs the
// same code on the CPU through a grid emulator (the cuda-emu target). Only the helpers marked below
// (vector load/store, the invalid-slot counter and row_group_max) have separate host and device
// implementations, with identical results.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <type_traits>

#include "kv_enums.h"
#include "kv_format.cuh"
#include "kv_layout.cuh"

// Full unrolling of a loop with a compile-time trip count (keeps small arrays in registers); the
// host compiler unrolls on its own.
#if defined(__CUDA_ARCH__)
#define KVF_UNROLL _Pragma("unroll")
#else
#define KVF_UNROLL
#endif

namespace kvf {

// DType, ScaleKind, IndexType, QuantFormat and the other shared enumerations: kv_enums.h.
struct FormatRules {
  uint8_t nvfp4 = 0;         // Nvfp4Rule: 0 flashinfer (amax / (6 g)), 1 flashinfer_precise (amax * RN(1 / (6 g)))
  uint8_t mx = 0;            // MxScaleRule: 0 ocp_floor, 1 nv_ceil
  uint8_t ds_mla = 0;        // DsMlaScale: 0 flt_min, 1 pow2
  uint8_t indexer = 0;       // IndexerScale: 0 fp32, 1 ue8m0_log2f, 2 ue8m0_exact
  uint8_t asym_arith = 0;    // AsymArith: 0 f32, 1 f16, 2 bf16
  uint8_t asym_lanes = 0;    // AsymLanes: 0 exact, 1 zero_padded_pow2
  uint8_t int4_pairing = 0;  // Int4Pairing: 0 split_half, 1 adjacent (nibble placement is in the codes' layout)
};

// One append call, in two parts: KvAppendCore, everything a classic cache's call and the format
// families need (424 bytes), and KvAppendParams, which adds the quantised formats' fields (2,080
// bytes: seven field layouts). The classic caches' kernels take KvAppendCore, so their code cannot
// touch a format's fields. (The size itself costs nothing measurable: on the H200 a graph node of an
// empty kernel takes 0.54 us with 16 bytes to 4 KB of parameters, bench/node_cost.cu.)
// Pointers are device pointers for the GPU launcher, host pointers for the emulator.
struct KvAppendCore {
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

  // Quantisation (cache_dtype fp8_e4m3 / fp8_e5m2 / int8 only).
  ScaleKind scale_kind = ScaleKind::none;
  const float* k_scale = nullptr;   // static scales of K: [1], [H_kv] or [num_blocks, H_kv], fp32
  const float* v_scale = nullptr;   // static scales of V, same shape
  float* k_scale_cache = nullptr;   // per_token_head: K scale of (block, pos, head) at
  float* v_scale_cache = nullptr;   //   cache_elem_offset(scale_cache, block, pos, head, 0)
  CacheGeometry scale_cache;        // strides of the scale caches (in fp32 elements; no dim)

  // vLLM's legacy caches (kv_format.cuh): K x-packed [nb, H, D/x, bs, x], x = 16 / sizeof(cache
  // element), V transposed [nb, H, D, bs]; `cache` gives stride_block and stride_head of both.
  bool vllm_legacy = false;

  // Format families (docs/formats.md). kv_split: V [T_in, H, value_head_dim] into a V cache with its
  // own strides `value_cache` (num_blocks and block_size are K's). k_only and mla: no V (value,
  // v_cache unused). mla: K's entry of head_dim dims is key's first head_dim - rope_dim dims (kv_c)
  // followed by rope's rope_dim dims (k_pe), num_heads 1.
  bool has_value = true;
  int32_t value_head_dim = 0;       // 0: head_dim
  CacheGeometry value_cache;        // num_blocks 0: `cache`
  const void* rope = nullptr;       // [T_in, H, rope_dim] view, last dim contiguous
  int64_t rope_stride_token = 0;
  int64_t rope_stride_head = 0;
  int32_t rope_dim = 0;

  // FlashInfer's CSR addressing (src/case/csr.h): slot_mapping unused; row t is the token at
  // position csr_positions[t] of request csr_batch_indices[t], whose pages are
  // csr_kv_indices[csr_kv_indptr[b] ..]. The kernel needs no kv_last_page_len (passed through to plugins).
  const int32_t* csr_batch_indices = nullptr;  // nullptr: slot_mapping addressing
  const int32_t* csr_positions = nullptr;
  const int32_t* csr_kv_indices = nullptr;
  const int32_t* csr_kv_indptr = nullptr;
  const int32_t* csr_kv_last_page_len = nullptr;
  int32_t csr_batch_size = 0;

  // A sliding-window ring whose kernel applies the window (src/case/window.h, input positions):
  // row t is the token at position window_positions[t] of a request of length window_seq_lens[t]
  // after this call; a token already outside the window (p >= sinks, p < len - (size - sinks)) is
  // not written. nullptr: slot_mapping says everything.
  const int32_t* window_positions = nullptr;
  const int32_t* window_seq_lens = nullptr;
  int64_t window_size = 0;
  int64_t window_sinks = 0;

  // A context-parallel rank that localises its tokens itself (src/case/context_parallel.h, input
  // positions): row t is the token at global position cp_positions[t] (-1: padding), held by rank
  // (position / cp_interleave) % cp_world_size at the slot slot_mapping[t] gives; this call writes
  // only the rows of rank cp_rank. nullptr: every row is this call's.
  const int32_t* cp_positions = nullptr;
  int32_t cp_rank = 0;
  int32_t cp_world_size = 1;
  int32_t cp_interleave = 1;
};

struct KvAppendParams : KvAppendCore {
  // A quantised format (quant_format none: everything above). Each data field's row is stored as
  // codes, `format_group` dims to a scale (and a zero point), through the fields' layouts
  // (kv_format.cuh), in elements of their dtypes: the codes (cache_dtype; nibbles for fp4_e2m1 and
  // uint4, element 2j in the low nibble of byte j) from format_cache, the scales (and zero points)
  // from format_scales: the cache buffer for ds_mla, indexer_k and the inline formats, else the scale
  // cache buffer. k_cache, v_cache, scale caches and `cache` strides above are unused; num_blocks and
  // block_size of `cache` give the capacity; k_scale / v_scale hold nvfp4's fp32 global scales.
  QuantFormat quant_format = QuantFormat::none;
  FormatRules format_rules;
  int32_t format_group = 0;           // dims per scale: 16 (nvfp4), 32 (MX), 128 (ds_mla, indexer_k), D
  void* format_cache = nullptr;       // the cache buffer's byte 0 (of the call's shard)
  void* format_scales = nullptr;      // the buffer of the scales and zero points, byte 0
  FieldLayout code_layout[2];         // K (or the latent part) and V codes, in code elements
  FieldLayout scale_layout[2];        // their scales, in scale elements (e4m3 / e8m0 bytes or fp32 words)
  FieldLayout zero_layout[2];         // asymmetric formats: the zero points (fp32 words)
  FieldLayout rope_layout;            // ds_mla: the rope dims, in elements of the input dtype
  int32_t latent_dim = 0;             // ds_mla: dims quantised (head_dim - rope_dim); the rest is rope
};


inline namespace KVF_KERNEL_NS {  // the kernel's functions (kv_layout.cuh)

// V's head dim and geometry (K's unless kv_split).
KVF_HD int64_t value_dim(const KvAppendCore& p) { return p.value_head_dim > 0 ? p.value_head_dim : p.head_dim; }
KVF_HD const CacheGeometry& value_geometry(const KvAppendCore& p) { return p.value_cache.num_blocks > 0 ? p.value_cache : p.cache; }

// Threads per block of the classic and fields paths: 128, or 64 for classic calls of >= 4096 rows
// into caches quantised with a static scale (those the aligned path cannot take), whose per-element
// division and conversion then make the fixed per-thread work worth sharing between two work items.
// On the H200 (H_kv 8 x D 128, fp8 per tensor, classic path): 64 threads take 157 us at T = 65536
// against 174 with 128 and tie at 4096 (11.3 / 11.6); at T <= 256, where the second item's load
// waits for the slot, 128 take 2.8 us against 3.9.
inline int kv_append_threads(const KvAppendParams& p) {
  if (p.quant_format != QuantFormat::none) return 128;  // a quantised format: pieces of groups (append_format_rows)
  const bool static_scale = p.scale_kind != ScaleKind::none && p.scale_kind != ScaleKind::per_token_head;
  return static_scale && p.num_slots >= 4096 ? 64 : 128;
}

// ---------------------------------------------------------------------------------------------
// Host/device helpers (the only code with separate host and device implementations)

struct alignas(16) Vec16 {
  uint32_t w[4];
};

KVF_HD Vec16 load16(const void* src) {
#if defined(__CUDA_ARCH__)  // one ld.global.v4, where the code puts it in the PTX: nvcc sinks a plain
  // load whose value only the store after the slot check uses below that check, and a small call then
  // waits for the slot's load and the row's one after the other (ptxas may still sink it below an
  // early exit: store16_if)
  uint4 x;
  asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(x.x), "=r"(x.y), "=r"(x.z), "=r"(x.w) : "l"(src));
  return Vec16{{x.x, x.y, x.z, x.w}};
#else
  Vec16 v;
  std::memcpy(&v, src, sizeof v);
  return v;
#endif
}

KVF_HD void store16(void* dst, const Vec16& v) {
#if defined(__CUDA_ARCH__)  // one st.v4 (a plain 16-byte store is split in four 4-byte ones where
  // nvcc cannot see dst's alignment, as in KernelPath aligned, whose launch checked it)
  __stwb(reinterpret_cast<uint4*>(dst), make_uint4(v.w[0], v.w[1], v.w[2], v.w[3]));
#else
  std::memcpy(dst, &v, sizeof v);
#endif
}

// store16 when `enabled`: on the GPU one st.global.v4 under a predicate, which no branch skips.
// (ptxas sinks the loads of values that only a skipped store uses below the branch that skips it, an
// early exit: the aligned path's row loads then waited for the slot's, one after the other. A
// predicated store has no branch to sink below.)
KVF_HD void store16_if(void* dst, const Vec16& v, bool enabled) {
#if defined(__CUDA_ARCH__)
  asm volatile("{\n .reg .pred p;\n setp.ne.u32 p, %5, 0;\n @p st.global.wb.v4.u32 [%0], {%1, %2, %3, %4};\n}"
               :: "l"(dst), "r"(v.w[0]), "r"(v.w[1]), "r"(v.w[2]), "r"(v.w[3]), "r"(enabled ? 1u : 0u) : "memory");
#else
  if (enabled) std::memcpy(dst, &v, sizeof v);
#endif
}

// Stores the first N bytes of v (N = 4, 8 or 16; dst aligned to N).
template <int N>
KVF_HD void store_bytes(void* dst, const Vec16& v) {
  static_assert(N == 4 || N == 8 || N == 16, "store_bytes stores 4, 8 or 16 bytes");
#if defined(__CUDA_ARCH__)
  if constexpr (N == 16) {
    store16(dst, v);
  } else if constexpr (N == 8) {
    *reinterpret_cast<uint2*>(dst) = make_uint2(v.w[0], v.w[1]);
  } else {
    *reinterpret_cast<uint32_t*>(dst) = v.w[0];
  }
#else
  std::memcpy(dst, &v, N);
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
KVF_HD bool aligned_to(const void* p, uintptr_t n) { return (reinterpret_cast<uintptr_t>(p) & (n - 1)) == 0; }

// Element i of a Vec16 read as an array of T (i a compile-time constant after unrolling, so the
// vector stays in registers), and its setter.
template <typename T>
KVF_HD T vec_elem(const Vec16& v, int i) {
  T x;
  std::memcpy(static_cast<void*>(&x), reinterpret_cast<const unsigned char*>(&v) + i * sizeof(T), sizeof(T));
  return x;
}
template <typename T>
KVF_HD void set_vec_elem(Vec16& v, int i, T x) {
  std::memcpy(reinterpret_cast<unsigned char*>(&v) + i * sizeof(T), static_cast<const void*>(&x), sizeof(T));
}

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

// ---------------------------------------------------------------------------------------------
// Quantised cache elements: stored = convert(x / scale), IEEE fp32 division (never a reciprocal).
// fp8 uses CUDA's conversion with __NV_SATFINITE (round to nearest even, saturate to ±max finite,
// NaN -> 0x7F); int8 rounds half to even (rintf: cvt.rni on the device, the default rounding mode on
// the host), saturates to [-128, 127] and maps NaN to 0.

struct Fp8E4M3 {
  uint8_t bits;
};
struct Fp8E5M2 {
  uint8_t bits;
};
struct Int8 {
  int8_t value;
};

template <typename QT>
struct QuantTraits;
template <>
struct QuantTraits<Fp8E4M3> {
  static constexpr float kMax = 448.0f;
};
template <>
struct QuantTraits<Fp8E5M2> {
  static constexpr float kMax = 57344.0f;
};
template <>
struct QuantTraits<Int8> {
  static constexpr float kMax = 127.0f;
};

template <typename T>
inline constexpr bool kIsQuantized = std::is_same_v<T, Fp8E4M3> || std::is_same_v<T, Fp8E5M2> || std::is_same_v<T, Int8>;

// x / scale in IEEE fp32 (nvcc's default -prec-div=true; never a reciprocal multiply).
KVF_HD float divide_by_scale(float x, float scale) { return x / scale; }

template <typename QT>
KVF_HD QT quantize(float x, float scale);
template <>
KVF_HD Fp8E4M3 quantize<Fp8E4M3>(float x, float scale) {
  const float q = divide_by_scale(x, scale);
  return Fp8E4M3{static_cast<uint8_t>(__nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3))};
}
template <>
KVF_HD Fp8E5M2 quantize<Fp8E5M2>(float x, float scale) {
  const float q = divide_by_scale(x, scale);
  return Fp8E5M2{static_cast<uint8_t>(__nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E5M2))};
}
template <>
KVF_HD Int8 quantize<Int8>(float x, float scale) {
  const float q = divide_by_scale(x, scale);
  if (q != q) return Int8{0};
  const float r = rintf(q);
  const float clamped = r < -128.0f ? -128.0f : (r > 127.0f ? 127.0f : r);
  return Int8{static_cast<int8_t>(clamped)};
}

// The per_token_head scale of a row whose largest magnitude is amax (NaN ignored before this).
template <typename CacheT>
KVF_HD float dynamic_scale(float amax) {
  return fmaxf(amax, 1e-6f) / QuantTraits<CacheT>::kMax;
}

// Static scale of (tensor, block, head) for per_tensor / per_head / per_block; `block` is the
// slot's physical block.
KVF_HD float static_scale(const KvAppendCore& p, bool is_value, int64_t block, int64_t head) {
  const float* scale = is_value ? p.v_scale : p.k_scale;
  switch (p.scale_kind) {
    case ScaleKind::per_tensor: return scale[0];
    case ScaleKind::per_head: return scale[head];
    case ScaleKind::per_block: return scale[block * p.num_heads + head];
    default: return 1.0f;
  }
}

// Reads slot_mapping[t] widened to 64 bits.
template <typename SlotT>
KVF_HD int64_t load_slot(const void* slot_mapping, int64_t t) {
  return static_cast<int64_t>(static_cast<const SlotT*>(slot_mapping)[t]);
}

// Row pointers of (token, head) in the input and of (block, pos, head) in the caches.
template <typename InT>
KVF_HD const InT* input_row(const KvAppendCore& p, bool is_value, int64_t token, int64_t head) {
  return is_value ? static_cast<const InT*>(p.value) + input_elem_offset(p.value_stride_token, p.value_stride_head, token, head, 0)
                  : static_cast<const InT*>(p.key) + input_elem_offset(p.key_stride_token, p.key_stride_head, token, head, 0);
}
template <typename CacheT>
KVF_HD CacheT* cache_base(const KvAppendCore& p, bool is_value) {
  return static_cast<CacheT*>(is_value ? p.v_cache : p.k_cache);
}
// kFields: the format families' path (V of its own geometry, no V, an MLA entry), else K and V of
// one shape and geometry (family kv), whose code does not pay for the others.
template <typename CacheT, bool kFields = true>
KVF_HD CacheT* cache_row(const KvAppendCore& p, bool is_value, int64_t block, int64_t pos, int64_t head) {
  return cache_base<CacheT>(p, is_value) + cache_elem_offset(kFields && is_value ? value_geometry(p) : p.cache, block, pos, head, 0);
}
KVF_HD float* scale_cell(const KvAppendCore& p, bool is_value, int64_t block, int64_t pos, int64_t head) {
  return (is_value ? p.v_scale_cache : p.k_scale_cache) + cache_elem_offset(p.scale_cache, block, pos, head, 0);
}

// Elements [lo, hi) of a row (hi - lo <= 16 / sizeof(InT)) as a Vec16 whose element i is
// src[lo + i], zero past hi: one 16-byte load when the chunk is whole and 16-byte aligned.
template <typename InT>
KVF_HD Vec16 load_chunk(const InT* src, int64_t lo, int64_t hi) {
  constexpr int kVec = 16 / sizeof(InT);
  if (hi - lo == kVec && aligned16(src + lo)) return load16(src + lo);
  Vec16 v{};
  KVF_UNROLL
  for (int i = 0; i < kVec; ++i)
    if (lo + i < hi) set_vec_elem(v, i, src[lo + i]);
  return v;
}

// Stores a loaded chunk x (load_chunk) of equal dtypes: a bit copy, 16 bytes at once where whole and aligned.
template <typename T>
KVF_HD void store_chunk(const Vec16& x, T* dst, int64_t lo, int64_t hi) {
  constexpr int kVec = 16 / sizeof(T);
  if (hi - lo == kVec && aligned16(dst + lo)) {
    store16(dst + lo, x);
    return;
  }
  KVF_UNROLL
  for (int i = 0; i < kVec; ++i)
    if (lo + i < hi) dst[lo + i] = vec_elem<T>(x, i);
}

// Quantises a loaded chunk x and stores its codes: all kVec codes in one store where whole and aligned
// (kWhole: known to be, KernelPath aligned).
template <typename InT, typename CacheT, bool kWhole = false>
KVF_HD void store_quantized(const Vec16& x, CacheT* dst, int64_t lo, int64_t hi, float scale) {
  constexpr int kVec = 16 / sizeof(InT);
  Vec16 codes{};
  KVF_UNROLL
  for (int i = 0; i < kVec; ++i) set_vec_elem(codes, i, quantize<CacheT>(to_float(vec_elem<InT>(x, i)), scale));
  if (kWhole || (hi - lo == kVec && aligned_to(dst + lo, kVec * sizeof(CacheT)))) {
    store_bytes<kVec * sizeof(CacheT)>(dst + lo, codes);
  } else {
    KVF_UNROLL
    for (int i = 0; i < kVec; ++i)
      if (lo + i < hi) dst[lo + i] = vec_elem<CacheT>(codes, i);
  }
}

// Stores a loaded chunk x (load_chunk) of InT elements converted to CacheT (both float dtypes).
template <typename InT, typename CacheT>
KVF_HD void store_converted(const Vec16& x, CacheT* dst, int64_t lo, int64_t hi) {
  constexpr int kVec = 16 / sizeof(InT);
  KVF_UNROLL
  for (int i = 0; i < kVec; ++i)
    if (lo + i < hi) dst[lo + i] = from_float<CacheT>(to_float(vec_elem<InT>(x, i)));
}

// One contiguous part of a (K or V, head) row: `len` input elements from src stored at dst. A row
// is one part, except an MLA entry: kv_c's dims, then k_pe's.
template <typename InT, typename CacheT>
struct RowPart {
  const InT* src = nullptr;
  CacheT* dst = nullptr;
  int64_t len = 0;
};

// The parts of tensor is_value's row of (token, head) stored at (block, pos, head); returns their count.
template <typename InT, typename CacheT>
KVF_HD int row_parts(const KvAppendCore& p, bool is_value, int64_t token, int64_t block, int64_t pos, int64_t head,
                     RowPart<InT, CacheT> (&out)[2]) {
  CacheT* dst = cache_row<CacheT, true>(p, is_value, block, pos, head);
  const InT* src = input_row<InT>(p, is_value, token, head);
  if (is_value) {
    out[0] = {src, dst, value_dim(p)};
    return 1;
  }
  const int64_t key_dims = p.head_dim - p.rope_dim;
  out[0] = {src, dst, key_dims};
  if (p.rope_dim <= 0) return 1;
  out[1] = {static_cast<const InT*>(p.rope) + input_elem_offset(p.rope_stride_token, p.rope_stride_head, token, head, 0), dst + key_dims,
            p.rope_dim};
  return 2;
}

// Chunk `chunk` (16 bytes of input) of a row's parts: the part holding it and its [lo, hi); false past the row.
template <typename InT, typename CacheT>
KVF_HD bool row_chunk(const RowPart<InT, CacheT> (&parts)[2], int num_parts, int64_t chunk, RowPart<InT, CacheT>& part, int64_t& lo,
                      int64_t& hi) {
  constexpr int64_t kVec = 16 / sizeof(InT);
  for (int i = 0; i < num_parts; ++i) {
    const int64_t chunks = (parts[i].len + kVec - 1) / kVec;
    if (chunk < chunks) {
      part = parts[i];
      lo = chunk * kVec;
      hi = lo + kVec < part.len ? lo + kVec : part.len;
      return true;
    }
    chunk -= chunks;
  }
  return false;
}

// Appends chunk [k_lo, k_hi) of K's part k and [v_lo, v_hi) of V's part v (either may be absent:
// has_k / has_v). Both loads are issued before either store (the compiler cannot reorder them: it
// must assume inputs and caches alias).
template <typename InT, typename CacheT>
KVF_HD void append_chunk(const KvAppendCore& p, int64_t block, int64_t head, bool has_k, const RowPart<InT, CacheT>& k, int64_t k_lo,
                         int64_t k_hi, bool has_v, const RowPart<InT, CacheT>& v, int64_t v_lo, int64_t v_hi) {
  if constexpr (std::is_same_v<InT, CacheT>) {
    Vec16 kx{}, vx{};
    if (has_k) kx = load_chunk(k.src, k_lo, k_hi);
    if (has_v) vx = load_chunk(v.src, v_lo, v_hi);
    if (has_k) store_chunk(kx, k.dst, k_lo, k_hi);
    if (has_v) store_chunk(vx, v.dst, v_lo, v_hi);
  } else if constexpr (kIsQuantized<CacheT>) {
    Vec16 kx{}, vx{};
    if (has_k) kx = load_chunk(k.src, k_lo, k_hi);
    if (has_v) vx = load_chunk(v.src, v_lo, v_hi);
    if (has_k) store_quantized<InT, CacheT>(kx, k.dst, k_lo, k_hi, static_scale(p, false, block, head));
    if (has_v) store_quantized<InT, CacheT>(vx, v.dst, v_lo, v_hi, static_scale(p, true, block, head));
  } else {
    Vec16 kx{}, vx{};
    if (has_k) kx = load_chunk(k.src, k_lo, k_hi);
    if (has_v) vx = load_chunk(v.src, v_lo, v_hi);
    if (has_k) store_converted<InT, CacheT>(kx, k.dst, k_lo, k_hi);
    if (has_v) store_converted<InT, CacheT>(vx, v.dst, v_lo, v_hi);
  }
}

// Work item (head, chunk) of row `token`, stored at (block, pos): the chunk of the K row (or MLA
// entry) and of the V row.
template <typename InT, typename CacheT>
KVF_HD void append_item(const KvAppendCore& p, int64_t token, int64_t block, int64_t pos, int64_t head, int64_t chunk) {
  RowPart<InT, CacheT> k_parts[2], v_parts[2], k, v;
  int64_t k_lo = 0, k_hi = 0, v_lo = 0, v_hi = 0;
  const bool has_k = row_chunk(k_parts, row_parts<InT, CacheT>(p, false, token, block, pos, head, k_parts), chunk, k, k_lo, k_hi);
  const bool has_v = p.has_value &&
                     row_chunk(v_parts, row_parts<InT, CacheT>(p, true, token, block, pos, head, v_parts), chunk, v, v_lo, v_hi);
  append_chunk<InT, CacheT>(p, block, head, has_k, k, k_lo, k_hi, has_v, v, v_lo, v_hi);
}

// Stores elements [lo, hi) of a run (src[0..) -> dst[e * stride]): the chunk paths when the run is
// contiguous (stride 1), element by element otherwise. `scale` is used by quantised caches only.
template <typename InT, typename CacheT>
KVF_HD void store_run(const InT* src, CacheT* dst, int64_t lo, int64_t hi, int64_t stride, float scale) {
  if (stride == 1) {
    constexpr int64_t kVec = 16 / sizeof(InT);
    for (int64_t c = lo; c < hi; c += kVec) {  // 16-byte input chunks
      const int64_t end = c + kVec < hi ? c + kVec : hi;
      if constexpr (std::is_same_v<InT, CacheT>) {
        store_chunk(load_chunk(src, c, end), dst, c, end);
      } else if constexpr (kIsQuantized<CacheT>) {
        store_quantized<InT, CacheT>(load_chunk(src, c, end), dst, c, end, scale);
      } else {
        store_converted<InT, CacheT>(load_chunk(src, c, end), dst, c, end);
      }
    }
    return;
  }
  for (int64_t e = lo; e < hi; ++e) {
    if constexpr (std::is_same_v<InT, CacheT>) {
      dst[e * stride] = src[e];
    } else if constexpr (kIsQuantized<CacheT>) {
      dst[e * stride] = quantize<CacheT>(to_float(src[e]), scale);
    } else {
      dst[e * stride] = from_float<CacheT>(to_float(src[e]));
    }
  }
}

// vLLM's legacy layout (kv_format.cuh): K x-packed, V transposed. A field's dim mode is walked in
// runs of its first sub-mode (extent e0, stride s0: K's x contiguous elements, V's whole row at
// stride block_size), each run starting at mode_offset() of its first dim, so no element costs a
// division. Work items are (tensor, head, run, 16-byte input chunk of the run); a dynamic per-token-
// head scale needs the whole row's amax first, so there a work item is a whole (tensor, head) row.
// Values follow the geometry path's rules (bit copy, conversion, static or per-token-head scale).
template <typename InT, typename CacheT>
KVF_HD void append_legacy_rows(const KvAppendCore& p, int64_t token, int64_t block, int64_t pos, int thread, int threads) {
  constexpr int64_t kVec = 16 / sizeof(InT);
  const int64_t x = 16 / static_cast<int64_t>(sizeof(CacheT));
  const FieldLayout fields[2] = {xpacked_key_layout(p.cache, 0, p.num_heads, p.head_dim, x),
                                 transposed_value_layout(p.cache, 0, p.num_heads, p.head_dim)};
  const int64_t H = p.num_heads, D = p.head_dim;
  if constexpr (kIsQuantized<CacheT>) {
    if (p.scale_kind == ScaleKind::per_token_head) {
      for (int64_t work = thread; work < 2 * H; work += threads) {
        const bool is_value = work >= H;
        const int64_t head = work % H;
        const FieldLayout& f = fields[is_value ? 1 : 0];
        const InT* src = input_row<InT>(p, is_value, token, head);
        float amax = 0.0f;
        for (int64_t d = 0; d < D; ++d) amax = fmaxf(amax, fabsf(to_float(src[d])));  // NaN ignored
        const float scale = dynamic_scale<CacheT>(amax);
        *scale_cell(p, is_value, block, pos, head) = scale;
        CacheT* row = cache_base<CacheT>(p, is_value) + field_offset(f, block, pos, head, 0);
        const int64_t e0 = f.mode[3].extent[0], s0 = f.mode[3].stride[0];
        for (int64_t first = 0; first < D; first += e0) {
          const int64_t len = first + e0 < D ? e0 : D - first;
          store_run<InT, CacheT>(src + first, row + mode_offset(f.mode[3], first), 0, len, s0, scale);
        }
      }
      return;
    }
  }
  int64_t items[2], chunks[2];  // per tensor: work items, and chunks per run
  for (int t = 0; t < 2; ++t) {
    const int64_t e0 = fields[t].mode[3].extent[0];
    chunks[t] = (e0 + kVec - 1) / kVec;
    items[t] = H * ((D + e0 - 1) / e0) * chunks[t];
  }
  for (int64_t work = thread; work < items[0] + items[1]; work += threads) {
    const bool is_value = work >= items[0];
    const int t = is_value ? 1 : 0;
    const FieldLayout& f = fields[t];
    const int64_t e0 = f.mode[3].extent[0], s0 = f.mode[3].stride[0];
    const int64_t item = is_value ? work - items[0] : work;
    const int64_t runs = (D + e0 - 1) / e0;
    const int64_t head = item / (runs * chunks[t]);
    const int64_t first = (item / chunks[t]) % runs * e0;  // the run's first dim
    const int64_t len = first + e0 < D ? e0 : D - first;
    const int64_t lo = item % chunks[t] * kVec;
    const int64_t hi = lo + kVec < len ? lo + kVec : len;
    if (lo >= hi) continue;
    const InT* src = input_row<InT>(p, is_value, token, head) + first;
    CacheT* run = cache_base<CacheT>(p, is_value) + field_offset(f, block, pos, head, 0) + mode_offset(f.mode[3], first);
    float scale = 1.0f;
    if constexpr (kIsQuantized<CacheT>) scale = static_scale(p, is_value, block, head);
    store_run<InT, CacheT>(src, run, lo, hi, s0, scale);
  }
}

// ---------------------------------------------------------------------------------------------
// The quantised formats (quant_format != none; src/case/quant_format.h, the formulas of
// src/golden/block_quant.h, which the comments below name). A format call has an instantiation of
// its own (CacheT = FormatCodes, below): nothing of this section runs in a classic cache's.
//
// Work split. A row's dims fall into groups of format_group dims, one scale each (16 nvfp4, 32 MX,
// 128 ds_mla and indexer_k, D the inline formats). A work item is one piece of at most
// kFormatPiece dims of one group of one (K or V, head) row. Its thread computes the whole group's
// amax itself (max |x|, NaN ignored, from 0), so the threads of one group each compute the same
// value: max is exact and independent of the order, no thread waits for or talks to another, and
// the emulator's one-at-a-time threads give the GPU's bytes. From the amax it derives the group's
// scale as the format's rule says, stores the scale if its piece is the group's first, and stores
// its piece's codes through the codes' layout (dim stride 1: format_supported), 4-bit codes two to
// a byte, element 2j in the low nibble of byte j (a piece starts at an even dim and holds whole
// bytes: no byte is shared between threads). ds_mla's rope dims are work items of their own: 16-byte
// chunks of the input, bit copies into the record.
//
// Conversions are exact on both sides: fp8 through __nv_cvt_float_to_fp8 (round to nearest even,
// satfinite, NaN -> 0x7F), int8 as the classic caches, e2m1 and e8m0 and the powers of two from
// the fp32 bits with integer arithmetic: the H200 (sm_90) has no fp4 or ue8m0 conversion
// instruction (cvt ... e2m1x2 / ue8m0x2 need sm_100), so the GPU runs the same integer code as the
// emulator. Divisions are IEEE fp32 divisions (no fast-math; nvcc's default -prec-div=true), a
// reciprocal is 1.0f / y (correctly rounded) exactly where the rule takes one, and no formula has
// an a * b + c a compiler could contract.

// The format path's cache "type": codes, scales and rope of the fields' dtypes in byte buffers.
struct FormatCodes {};
template <typename T>
inline constexpr bool kIsFormat = std::is_same_v<T, FormatCodes>;

inline constexpr int kFormatPiece = 32;  // dims of a work item (at most; a 16-dim group is one piece)

KVF_HD uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
KVF_HD float float_of_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// fp4 e2m1 code (sign in bit 3) of f: round to nearest even, saturating to ±6 (±Inf too), signed
// zeros kept; a NaN gives `nan_code` (0x0 for NVFP4's FlashInfer encoder, whose products are +NaN;
// 0x7, +6, for MX as CUDA's cvt). The magnitude's code is the number of rounding boundaries it
// passes, compared as fp32 bit patterns (unsigned order is magnitude order): 0.25 and 1.25, 2.5, 5
// are ties that go down to the even code, 0.75, 1.75, 3.5 ties that go up.
KVF_HD uint8_t e2m1_code(float f, uint8_t nan_code) {
  const uint32_t x = float_bits(f);
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return nan_code;
  const uint32_t code = (abs > 0x3E800000u ? 1u : 0u) +   // > 0.25
                        (abs >= 0x3F400000u ? 1u : 0u) +  // >= 0.75
                        (abs > 0x3FA00000u ? 1u : 0u) +   // > 1.25
                        (abs >= 0x3FE00000u ? 1u : 0u) +  // >= 1.75
                        (abs > 0x40200000u ? 1u : 0u) +   // > 2.5
                        (abs >= 0x40600000u ? 1u : 0u) +  // >= 3.5
                        (abs > 0x40A00000u ? 1u : 0u);    // > 5
  return static_cast<uint8_t>(((x >> 28) & 0x8u) | code);
}

// The value of an e4m3 code (exact: every e4m3 value is an fp32); 0x7F and 0xFF are NaN.
KVF_HD float e4m3_value(uint8_t code) {
  if ((code & 0x7Fu) == 0x7Fu) return canonical_nan_f32();
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t exp = (code >> 3) & 0xFu, mant = code & 0x7u;
  if (exp == 0) return float_of_bits(sign | float_bits(static_cast<float>(mant) * 0.001953125f));  // mant * 2^-9
  return float_of_bits(sign | ((exp + 120u) << 23) | (mant << 20));                                   // bias 7
}

// The e8m0 code of 2^floor(log2 |x|) (ceil false) or 2^ceil(log2 |x|) (ceil true), from the
// exponent bits, clipped to [2^-127, 2^127] (0x00..0xFE); NaN gives 0xFF. The sign is ignored.
KVF_HD uint8_t e8m0_code(float x, bool ceil) {
  const uint32_t abs = float_bits(x) & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return 0xFF;
  if (abs == 0x7F800000u) return 0xFE;
  const uint32_t exp = abs >> 23, mant = abs & 0x7FFFFFu;
  if (exp == 0) return ceil && abs > 0x00400000u ? 1 : 0;  // below 2^-126: 2^-126 or 2^-127
  const uint32_t code = exp + (ceil && mant != 0 ? 1u : 0u);
  return static_cast<uint8_t>(code > 0xFEu ? 0xFEu : code);
}
// 2^(code - 127); code 0 is the fp32 subnormal 2^-127 (0xFF, NaN, never occurs here).
KVF_HD float e8m0_value(uint8_t code) { return float_of_bits(code == 0 ? 0x00400000u : static_cast<uint32_t>(code) << 23); }

// floor(log2 v) of v > 0.
KVF_HD int floor_log2(uint32_t v) {
  int k = 0;
  while (v >>= 1) ++k;
  return k;
}

// The least power of two >= s, from the bits (DeepSeek's "ue8m0" scale): +Inf stays +Inf, above
// 2^127 gives +Inf, a subnormal the least (subnormal) power of two >= it. Every scale the formats
// round is positive (their floors): 0, negatives and NaN are not handled.
KVF_HD float pow2_ceil_bits(float s) {
  const uint32_t x = float_bits(s);
  const uint32_t exp = x >> 23, mant = x & 0x7FFFFFu;
  if (exp == 0xFFu || mant == 0) return s;  // +Inf, or a normal power of two
  if (exp == 0) return float_of_bits((mant & (mant - 1)) == 0 ? mant : 2u << floor_log2(mant));  // subnormal m * 2^-149
  return float_of_bits(exp == 0xFEu ? 0x7F800000u : (exp + 1u) << 23);
}

// exp2f(ceilf(log2f(s))) as vLLM's indexer writes it, with a correctly rounded log2f (the
// IndexerScale ue8m0_log2f rule): pow2_ceil_bits(s), except just above a power of two 2^k, where
// log2 s = k + log2(1 + f) is within half an ulp of the integer k, log2f gives k and the result is
// 2^k < s. Computed from the bits, not with the GPU's log2f, which is within 1 ulp but not
// correctly rounded: f * 2^23 may be at most 44, 22, 11, 5, 2, 1 for the ulp binades p = 7..2 of
// k's neighbourhood (p <= 1 and k = 0, -1: never). Positive finite s only (as pow2_ceil_bits).
KVF_HD float pow2_ceil_log2f_bits(float s) {
  const uint32_t x = float_bits(s);
  const uint32_t exp = x >> 23, mant = x & 0x7FFFFFu;
  if (exp == 0xFFu) return s;
  int k;
  uint32_t frac23;  // f * 2^23
  if (exp != 0) {
    k = static_cast<int>(exp) - 127;
    frac23 = mant;
  } else {
    const int q = floor_log2(mant);  // s = m * 2^-149, 2^q <= m < 2^(q+1)
    k = q - 149;
    frac23 = (mant - (1u << q)) << (23 - q);
  }
  const float up = pow2_ceil_bits(s);
  if (frac23 == 0 || k == 0 || k == -1) return up;
  const int p = k >= 1 ? floor_log2(static_cast<uint32_t>(k)) : floor_log2(static_cast<uint32_t>(-k - 1));
  const uint32_t limit = p == 7 ? 44u : p == 6 ? 22u : p == 5 ? 11u : p == 4 ? 5u : p == 3 ? 2u : p == 2 ? 1u : 0u;
  if (frac23 > limit) return up;
  return float_of_bits(k >= -126 ? static_cast<uint32_t>(k + 127) << 23 : 1u << (k + 149));  // 2^k
}

// The fp8 code of v itself (no scale; MX's nv_ceil multiplies by 2^-E first).
template <typename QT>
KVF_HD uint8_t fp8_code(float v);
template <>
KVF_HD uint8_t fp8_code<Fp8E4M3>(float v) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}
template <>
KVF_HD uint8_t fp8_code<Fp8E5M2>(float v) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E5M2));
}

// max |x| over n values (NaN ignored, from 0): chunks read whole, zeros past n.
template <typename InT>
KVF_HD float group_amax(const InT* src, int64_t n) {
  constexpr int64_t kVec = 16 / sizeof(InT);
  float amax = 0.0f;
  for (int64_t lo = 0; lo < n; lo += kVec) {
    const Vec16 x = load_chunk(src, lo, lo + kVec < n ? lo + kVec : n);
    KVF_UNROLL
    for (int e = 0; e < kVec; ++e) amax = fmaxf(amax, fabsf(to_float(vec_elem<InT>(x, e))));
  }
  return amax;
}

// One group's codes from its values: the encoders of the formats (x the input value as fp32).
struct Nvfp4Encode {  // Nvfp4Rule (both): e2m1(x * os), NaN -> 0
  float os;
  KVF_HD uint8_t operator()(float x) const { return e2m1_code(x * os, 0x0); }
};
template <typename QT>
struct Fp8DivideEncode {  // e4m3 / e5m2 of x / s (MX ocp_floor, ds_mla, indexer_k, fp8_inline)
  float s;
  KVF_HD uint8_t operator()(float x) const { return static_cast<uint8_t>(quantize<QT>(x, s).bits); }
};
template <typename QT>
struct Fp8MultiplyEncode {  // e4m3 / e5m2 of x * 2^-E (MX nv_ceil)
  float inverse;
  KVF_HD uint8_t operator()(float x) const { return fp8_code<QT>(x * inverse); }
};
struct E2m1DivideEncode {  // MXFP4 ocp_floor: e2m1(x / X), NaN -> +6
  float s;
  KVF_HD uint8_t operator()(float x) const { return e2m1_code(x / s, 0x7); }
};
struct E2m1MultiplyEncode {  // MXFP4 nv_ceil: e2m1(x * 2^-E), NaN -> +6
  float inverse;
  KVF_HD uint8_t operator()(float x) const { return e2m1_code(x * inverse, 0x7); }
};
struct Int8DivideEncode {  // int8_inline: the classic int8 conversion of x / s
  float s;
  KVF_HD uint8_t operator()(float x) const { return static_cast<uint8_t>(quantize<Int8>(x, s).value); }
};

// Stores the codes of n values src[0..n) (n <= kFormatPiece, even for nibbles) at dst: one byte
// each, or (kNibbles) two a byte, value 2j in the low nibble of byte j. Whole 16-, 8- or 4-byte
// stores where aligned, bytes elsewhere.
template <bool kNibbles, typename InT, typename Encode>
KVF_HD void store_codes(const InT* src, int64_t n, uint8_t* dst, const Encode& encode) {
  constexpr int64_t kVec = 16 / sizeof(InT);
  uint8_t bytes[kFormatPiece] = {};
  KVF_UNROLL
  for (int64_t lo = 0; lo < kFormatPiece; lo += kVec) {
    if (lo >= n) break;
    const Vec16 x = load_chunk(src, lo, lo + kVec < n ? lo + kVec : n);
    KVF_UNROLL
    for (int e = 0; e < kVec; ++e) {
      const int64_t i = lo + e;
      if (i >= n) break;
      const uint8_t code = encode(to_float(vec_elem<InT>(x, e)));
      if constexpr (kNibbles) {
        bytes[i / 2] = static_cast<uint8_t>(bytes[i / 2] | (code & 0xFu) << (4 * (i % 2)));
      } else {
        bytes[i] = code;
      }
    }
  }
  const int64_t len = kNibbles ? n / 2 : n;
  for (int64_t i = 0; i < len;) {
    Vec16 v{};
    if (len - i >= 16 && aligned_to(dst + i, 16)) {
      std::memcpy(&v, bytes + i, 16);
      store_bytes<16>(dst + i, v);
      i += 16;
    } else if (len - i >= 8 && aligned_to(dst + i, 8)) {
      std::memcpy(&v, bytes + i, 8);
      store_bytes<8>(dst + i, v);
      i += 8;
    } else if (len - i >= 4 && aligned_to(dst + i, 4)) {
      std::memcpy(&v, bytes + i, 4);
      store_bytes<4>(dst + i, v);
      i += 4;
    } else {
      dst[i] = bytes[i];
      ++i;
    }
  }
}

// Whether this kernel writes the call's format: the formats but the asymmetric ones, codes at dim
// stride 1 (4-bit codes from even nibbles), ds_mla's rope dims at dim stride 1. The launchers refuse
// the rest (unsupported), which the harness never sends (cuda_kernel_capabilities).
inline bool format_supported(const KvAppendParams& p) {
  switch (p.quant_format) {
    case QuantFormat::nvfp4:
    case QuantFormat::mxfp8_e4m3:
    case QuantFormat::mxfp8_e5m2:
    case QuantFormat::mxfp4:
    case QuantFormat::ds_mla:
    case QuantFormat::indexer_k:
    case QuantFormat::fp8_inline:
    case QuantFormat::int8_inline: break;
    default: return false;  // none, asym_int8, asym_int4
  }
  const bool ds_mla = p.quant_format == QuantFormat::ds_mla;
  const int64_t dims = ds_mla ? p.latent_dim : p.head_dim;
  if (p.format_group <= 0 || dims % p.format_group != 0) return false;
  const auto dim_contiguous = [](const Mode& m) {
    for (int i = 1; i < m.rank; ++i)
      if (m.extent[i] > 1) return false;
    return m.extent[0] <= 1 || m.stride[0] == 1;
  };
  const bool nibbles = p.cache_dtype == DType::fp4_e2m1;
  for (int t = 0; t < (p.has_value ? 2 : 1); ++t) {
    const FieldLayout& f = p.code_layout[t];
    if (!dim_contiguous(f.mode[3])) return false;
    if (nibbles && f.offset % 2 != 0) return false;
    for (int a = 0; a < 3 && nibbles; ++a)
      for (int i = 0; i < f.mode[a].rank; ++i)
        if (f.mode[a].extent[i] > 1 && f.mode[a].stride[i] % 2 != 0) return false;
  }
  return !ds_mla || (p.rope_dim > 0 && dim_contiguous(p.rope_layout.mode[3]));
}

// Work item (tensor is_value, head, group g, dims [first, first + n) of the group) of row `token`
// stored at (block, pos): the group's scale (by the piece at its dim 0) and the piece's codes.
template <typename InT>
KVF_HD void append_format_piece(const KvAppendParams& p, int64_t token, int64_t block, int64_t pos, bool is_value, int64_t head,
                                int64_t g, int64_t first, int64_t n) {
  const int t = is_value ? 1 : 0;
  const int64_t group = p.format_group;
  const InT* src = input_row<InT>(p, is_value, token, head) + g * group;  // ds_mla: the latent dims of key
  const float amax = group_amax(src, group);
  const int64_t code = field_offset(p.code_layout[t], block, pos, head, g * group + first);  // in code elements
  uint8_t* codes = static_cast<uint8_t*>(p.format_cache);
  const int64_t scale = field_offset(p.scale_layout[t], block, pos, head, g);  // in scale elements
  uint8_t* scale_bytes = static_cast<uint8_t*>(p.format_scales);               // e4m3 / e8m0 scales
  float* scale_words = static_cast<float*>(p.format_scales);                   // fp32 scales
  const bool store_scale = first == 0;
  src += first;

  switch (p.quant_format) {
    case QuantFormat::nvfp4: {
      // FlashInfer's nvfp4_append_quantize_block: sf = amax / (6 g) (flashinfer) or amax * RN(1 / (6 g))
      // (flashinfer_precise), its e4m3 code; os = 1 / (e4m3_value * g); code e2m1(x * os).
      const float gs = (is_value ? p.v_scale : p.k_scale)[0];  // the decode global scale
      float sf = 0.0f;
      if (amax > 0.0f && gs > 0.0f) {
        const float six_g = 6.0f * gs;
        sf = p.format_rules.nvfp4 == 1 ? amax * (1.0f / six_g) : amax / six_g;
      }
      const uint8_t sf_code = fp8_code<Fp8E4M3>(sf);
      const float sf_value = e4m3_value(sf_code);
      const float os = amax > 0.0f && sf_value > 0.0f && gs > 0.0f ? 1.0f / (sf_value * gs) : 0.0f;
      if (store_scale) scale_bytes[scale] = sf_code;
      store_codes<true>(src, n, codes + code / 2, Nvfp4Encode{os});
      return;
    }
    case QuantFormat::mxfp8_e4m3:
    case QuantFormat::mxfp8_e5m2:
    case QuantFormat::mxfp4: {
      // OCP MX: shared exponent E in [-127, 127]; ocp_floor E = floor(log2 amax) - emax, codes of
      // x / 2^E; nv_ceil E = ceil(log2(amax / qmax)), codes of x * 2^-E. amax 0: E = -127; Inf: 127.
      const bool fp4 = p.quant_format == QuantFormat::mxfp4;
      const bool e5m2 = p.quant_format == QuantFormat::mxfp8_e5m2;
      const bool ceil = p.format_rules.mx == 1;
      int e = 127;
      if (amax == 0.0f) {
        e = -127;
      } else if (float_bits(amax) != 0x7F800000u) {  // amax < +Inf
        const int emax = fp4 ? 2 : e5m2 ? 15 : 8;
        const float qmax = fp4 ? 6.0f : e5m2 ? 57344.0f : 448.0f;
        e = ceil ? static_cast<int>(e8m0_code(amax / qmax, true)) - 127 : static_cast<int>(e8m0_code(amax, false)) - 127 - emax;
        e = e < -127 ? -127 : (e > 127 ? 127 : e);
      }
      const float scale_value = e8m0_value(static_cast<uint8_t>(e + 127));  // 2^E
      const float inverse = e8m0_value(static_cast<uint8_t>(127 - e));      // 2^-E
      if (store_scale) scale_bytes[scale] = static_cast<uint8_t>(e + 127);
      if (fp4) {
        if (ceil) store_codes<true>(src, n, codes + code / 2, E2m1MultiplyEncode{inverse});
        else store_codes<true>(src, n, codes + code / 2, E2m1DivideEncode{scale_value});
      } else if (e5m2) {
        if (ceil) store_codes<false>(src, n, codes + code, Fp8MultiplyEncode<Fp8E5M2>{inverse});
        else store_codes<false>(src, n, codes + code, Fp8DivideEncode<Fp8E5M2>{scale_value});
      } else {
        if (ceil) store_codes<false>(src, n, codes + code, Fp8MultiplyEncode<Fp8E4M3>{inverse});
        else store_codes<false>(src, n, codes + code, Fp8DivideEncode<Fp8E4M3>{scale_value});
      }
      return;
    }
    case QuantFormat::ds_mla:
    case QuantFormat::indexer_k:
    case QuantFormat::fp8_inline:
    case QuantFormat::int8_inline: {
      // fp32 scale s, codes e4m3(x / s) (int8_inline: int8(x / s)). ds_mla flt_min: max(amax / 448,
      // FLT_MIN); pow2: pow2_ceil(max(amax / 448, 1e-4)). indexer_k: max(amax, 1e-4) / 448, then
      // (ue8m0_log2f) exp2f(ceilf(log2f(s))) or (ue8m0_exact) pow2_ceil. Inline: the contract's
      // per_token_head scale, max(amax, 1e-6) / QMAX.
      float s;
      switch (p.quant_format) {
        case QuantFormat::ds_mla: {
          const float ratio = amax / 448.0f;
          s = p.format_rules.ds_mla == 1 ? pow2_ceil_bits(fmaxf(ratio, 1e-4f)) : fmaxf(ratio, float_of_bits(0x00800000u));
          break;
        }
        case QuantFormat::indexer_k:
          s = fmaxf(amax, 1e-4f) / 448.0f;
          if (p.format_rules.indexer == 1) s = pow2_ceil_log2f_bits(s);
          if (p.format_rules.indexer == 2) s = pow2_ceil_bits(s);
          break;
        case QuantFormat::int8_inline: s = dynamic_scale<Int8>(amax); break;
        default: s = dynamic_scale<Fp8E4M3>(amax); break;
      }
      if (store_scale) scale_words[scale] = s;
      if (p.quant_format == QuantFormat::int8_inline) store_codes<false>(src, n, codes + code, Int8DivideEncode{s});
      else store_codes<false>(src, n, codes + code, Fp8DivideEncode<Fp8E4M3>{s});
      return;
    }
    default: return;  // not written by this kernel (format_supported)
  }
}

// The rows of `token` at (block, pos) in a quantised format: work items (format_group's pieces of
// each (tensor, head) row, then ds_mla's rope chunks) strided over the block's threads.
template <typename InT>
KVF_HD void append_format_rows(const KvAppendParams& p, int64_t token, int64_t block, int64_t pos, int thread, int threads) {
  constexpr int64_t kVec = 16 / sizeof(InT);
  const int64_t group = p.format_group;
  const int64_t groups = (p.quant_format == QuantFormat::ds_mla ? p.latent_dim : p.head_dim) / group;
  const int64_t piece = group < kFormatPiece ? group : kFormatPiece;
  const int64_t pieces = (group + piece - 1) / piece;
  const int64_t code_items = (p.has_value ? 2 : 1) * int64_t{p.num_heads} * groups * pieces;
  const int64_t rope_chunks = p.quant_format == QuantFormat::ds_mla ? (p.rope_dim + kVec - 1) / kVec : 0;
  const int64_t items = code_items + int64_t{p.num_heads} * rope_chunks;
  for (int64_t work = thread; work < items; work += threads) {
    if (work < code_items) {
      const int64_t k = work % pieces, g = work / pieces % groups, row = work / (pieces * groups);
      const int64_t first = k * piece;
      append_format_piece<InT>(p, token, block, pos, row >= p.num_heads, row % p.num_heads, g, first,
                               first + piece < group ? piece : group - first);
      continue;
    }
    // ds_mla's rope: copied as the input holds it (16-bit), into the record after the scales.
    const int64_t item = work - code_items, head = item / rope_chunks;
    const int64_t lo = item % rope_chunks * kVec, hi = lo + kVec < p.rope_dim ? lo + kVec : p.rope_dim;
    const InT* src = static_cast<const InT*>(p.rope) + input_elem_offset(p.rope_stride_token, p.rope_stride_head, token, head, 0);
    InT* dst = static_cast<InT*>(p.format_cache) + field_offset(p.rope_layout, block, pos, head, 0);
    store_chunk(load_chunk(src, lo, hi), dst, lo, hi);
  }
}

// ---------------------------------------------------------------------------------------------
// Where a row goes. Every path of the kernel starts here.

// Which of the kernel's instantiations runs a call: the classic path for family kv in a geometry
// (K and V of one shape; the common case), with a dynamic per-token-head scale in an instantiation of
// its own, and the fields path for the format families and vllm_legacy. Each one's registers, and so
// its occupancy, owe nothing to the others' code (the per-token-head path's lanes took the static
// scales' kernel from 56 to 70 registers: 157 -> 175 us at T = 65536 on the H200). A classic call
// whose every chunk is whole and 16-byte aligned, addressed by its slots alone, takes the aligned
// path (aligned_chunks); with a per-token-head scale it takes aligned_dynamic when a row's chunks
// are a power of two up to a warp (the row's lanes combine their maxima by shuffles). The GPU
// launcher and the emulator both choose by this, so cuda-emu runs the path the GPU runs (the
// harness's host and device images have the same alignment).
enum class KernelPath { classic, classic_dynamic, fields, aligned, aligned_dynamic };

// Bytes of an element of a classic cache's dtypes (the host's dtype_size, in the kernel's headers).
inline int64_t classic_dtype_bytes(DType t) { return t == DType::f32 ? 4 : t == DType::f16 || t == DType::bf16 ? 2 : 1; }

// Whether address `base` + every multiple of the strides (in elements of `elem` bytes) is aligned to n bytes.
inline bool strided_aligned(const void* base, int64_t elem, int64_t n, std::initializer_list<int64_t> strides) {
  uint64_t bits = reinterpret_cast<uintptr_t>(base);
  for (const int64_t s : strides) bits |= static_cast<uint64_t>(s * elem);
  return (bits & static_cast<uint64_t>(n - 1)) == 0;
}

// Whether every 16-byte chunk of a classic call's rows is whole and aligned in the input, and its
// converted elements land on a boundary of their own size (at most 16 bytes) in the caches; and no
// more than 128 chunks make a row (one thread block's x) and 65,535 heads a call (the grid's y).
inline bool aligned_chunks(const KvAppendCore& p) {
  const int64_t in = classic_dtype_bytes(p.input_dtype), out = classic_dtype_bytes(p.cache_dtype);
  const int64_t vec = 16 / in, stored = vec * out < 16 ? vec * out : 16;
  const CacheGeometry& g = p.cache;
  return p.num_heads > 0 && p.num_heads <= 65535 && p.head_dim > 0 && p.head_dim % vec == 0 && p.head_dim / vec <= 128 &&
         strided_aligned(p.key, in, 16, {p.key_stride_token, p.key_stride_head}) &&
         strided_aligned(p.value, in, 16, {p.value_stride_token, p.value_stride_head}) &&
         strided_aligned(p.k_cache, out, stored, {g.stride_block, g.stride_pos, g.stride_head}) &&
         strided_aligned(p.v_cache, out, stored, {g.stride_block, g.stride_pos, g.stride_head});
}

// 16-byte chunks of input in a row of an aligned call (aligned_chunks: a whole number of them).
inline int64_t aligned_row_chunks(const KvAppendCore& p) { return p.head_dim / (16 / classic_dtype_bytes(p.input_dtype)); }

// On the H200 (H 8 x D 128, fp8, T = 65536) the aligned paths take 119 us per tensor and 180 per
// token head where the classic paths took 161 and 319 (reports/gpu/2026-12-04-h200-limits/).
inline KernelPath kernel_path(const KvAppendCore& p) {
  if (p.vllm_legacy || !p.has_value || p.rope_dim != 0 || p.value_head_dim != 0 || p.value_cache.num_blocks != 0) return KernelPath::fields;
  const bool plain = p.csr_batch_indices == nullptr && p.window_positions == nullptr && p.cp_positions == nullptr;
  if (p.scale_kind == ScaleKind::per_token_head) {
    const int64_t chunks = aligned_row_chunks(p);
    const bool warp_rows = chunks <= 32 && (chunks & (chunks - 1)) == 0;  // a row's lanes: a power of two
    return plain && aligned_chunks(p) && warp_rows ? KernelPath::aligned_dynamic : KernelPath::classic_dynamic;
  }
  return plain && aligned_chunks(p) ? KernelPath::aligned : KernelPath::classic;
}

// A call's launch, shared by the GPU launcher and the emulator: its path (a quantised format's is
// fields) and one thread block per slot entry; the aligned paths' blocks hold whole rows of heads, up
// to 128 threads, and a call's heads spread over grid_y blocks per slot entry. aligned_dynamic's
// blocks are whole warps (heads past the call's fill them), since every lane joins the shuffles.
struct LaunchConfig {
  KernelPath path = KernelPath::classic;
  int64_t grid = 0;   // thread blocks (x: one per slot entry)
  int block = 0;      // threads per block (x)
  int grid_y = 1;     // KernelPath aligned: thread blocks per slot entry (y), each holding block_y heads
  int block_y = 1;    //   (y) of block chunks (x) each
};
inline LaunchConfig kv_append_launch_config(const KvAppendParams& p) {
  LaunchConfig cfg{p.quant_format != QuantFormat::none ? KernelPath::fields : kernel_path(p), p.num_slots, kv_append_threads(p)};
  if (cfg.path == KernelPath::aligned || cfg.path == KernelPath::aligned_dynamic) {
    cfg.block = static_cast<int>(aligned_row_chunks(p));  // a row's chunks
    cfg.block_y = 128 / cfg.block < p.num_heads ? 128 / cfg.block : p.num_heads;
    if (cfg.path == KernelPath::aligned_dynamic) {  // rows per warp: block_y rounded up to a multiple
      const int warp_rows = 32 / cfg.block;
      cfg.block_y = (cfg.block_y + warp_rows - 1) / warp_rows * warp_rows;
    }
    cfg.grid_y = (p.num_heads + cfg.block_y - 1) / cfg.block_y;
  }
  return cfg;
}

// Row t's slot under CSR addressing: its request's page holding its position, and the offset there.
KVF_HD int64_t csr_slot(const KvAppendCore& p, int64_t t) {
  const int64_t pos = p.csr_positions[t];
  const int64_t page = p.csr_kv_indices[p.csr_kv_indptr[p.csr_batch_indices[t]] + pos / p.cache.block_size];
  return page * p.cache.block_size + pos % p.cache.block_size;
}

// Whether row t's token is already outside its request's window (window_positions set).
KVF_HD bool outside_window(const KvAppendCore& p, int64_t t) {
  const int64_t pos = p.window_positions[t];
  return pos >= p.window_sinks && pos < p.window_seq_lens[t] - (p.window_size - p.window_sinks);
}

// Whether row t's token is another context-parallel rank's (cp_positions set).
KVF_HD bool other_ranks_token(const KvAppendCore& p, int64_t t) {
  const int64_t pos = p.cp_positions[t];
  return pos >= 0 && pos / p.cp_interleave % p.cp_world_size != p.cp_rank;
}

// log2 of a power of two.
KVF_HD int log2_pow2(uint32_t x) {
#if defined(__CUDA_ARCH__)
  return __ffs(static_cast<int>(x)) - 1;
#else
  int n = 0;
  while ((x >>= 1) != 0) ++n;
  return n;
#endif
}

// Splits a slot into (block, pos): by a shift and a mask when the block size is a power of two (the
// sizes serving stacks use; H200, fp8 per tensor H 8 D 128: 119.4 -> 113.8 us at T = 65536 and
// 2.10 -> 1.94 at T = 1, reports/gpu/2026-12-04-h200-limits/), else in 32-bit arithmetic when both
// fit, which the GPU divides in a few instructions instead of a 64-bit division's subroutine (0.1 µs
// of a one-row call on the H200, bench/node_cost.cu).
KVF_HD void split_slot(int64_t slot, int64_t block_size, int64_t& block, int64_t& pos) {
  if (((slot | block_size) >> 31) == 0) {
    const uint32_t s = static_cast<uint32_t>(slot), bs = static_cast<uint32_t>(block_size);
    if (bs != 0 && (bs & (bs - 1)) == 0) {
      block = s >> log2_pow2(bs);
      pos = s & (bs - 1);
      return;
    }
    block = s / bs;
    pos = s - static_cast<uint32_t>(block) * bs;
    return;
  }
  block = slot / block_size;
  pos = slot % block_size;
}

// Row `token`'s place in the cache: false when this call writes nothing of it (padding, a token
// already outside its window or another rank's, a slot past the capacity, which thread 0 counts),
// else true with its (block, pos).
// kAddressing false: the call has no CSR addressing, window or context-parallel positions (KernelPath
// aligned), so their checks are left out.
template <typename SlotT, bool kAddressing = true>
KVF_HD bool row_destination(const KvAppendCore& p, int64_t token, int thread, int64_t& block, int64_t& pos) {
  const int64_t slot = kAddressing && p.csr_batch_indices != nullptr ? csr_slot(p, token) : load_slot<SlotT>(p.slot_mapping, token);
  if (slot < 0) return false;  // padding
  if (kAddressing && p.window_positions != nullptr && outside_window(p, token)) return false;  // evicted by this call's later tokens
  if (kAddressing && p.cp_positions != nullptr && other_ranks_token(p, token)) return false;   // held by another rank's shard
  if (slot >= cache_capacity(p.cache)) {
    if (thread == 0) count_invalid_slot(p.invalid_slots);
    return false;
  }
  split_slot(slot, p.cache.block_size, block, pos);
  return true;
}

// ---------------------------------------------------------------------------------------------
// The classic caches (KernelPath classic, classic_dynamic: family kv in a geometry, K and V rows of
// one shape at one slot). A work item is one 16-byte chunk of input of one head: that chunk of the K
// row and of the V row. A dynamic per-token-head scale has its own work split
// (append_classic_dynamic: a row's chunks held by a group of lanes).
//
// A small call's time is a chain of latencies (the slot's load, the rows' loads, the stores), so a
// thread loads its first item's input before it knows the slot: row `token` of key and value exists
// whatever its slot says (they hold num_slots rows), and nothing is stored before the slot is checked.

// A pair of static scales (K's, V's).
struct ScalePair {
  float k = 1.0f, v = 1.0f;
};

// One work item's input: elements [lo, hi) of head `head`'s K and V rows, and their static scales
// where those need no slot (per_tensor, per_head).
struct ClassicItem {
  int64_t token = 0;
  int head = 0;
  int64_t lo = 0, hi = 0;
  Vec16 k{}, v{};
  ScalePair scale;
};

// Chunk `chunk` of head `head` of row `token`, its input loaded; `tensor`: the per_tensor scales,
// which the caller loads once. kWhole: the chunk is known whole and 16-byte aligned (KernelPath
// aligned), so it is one 16-byte load without a check.
template <typename InT, typename CacheT, bool kWhole = false>
KVF_HD ClassicItem load_classic_item(const KvAppendCore& p, int64_t token, int head, int chunk, const ScalePair& tensor) {
  constexpr int64_t kVec = 16 / sizeof(InT);
  ClassicItem it;
  it.token = token;
  it.head = head;
  it.lo = static_cast<int64_t>(chunk) * kVec;
  it.hi = kWhole || it.lo + kVec < p.head_dim ? it.lo + kVec : p.head_dim;
  const InT* k = input_row<InT>(p, false, token, head);
  const InT* v = input_row<InT>(p, true, token, head);
  it.k = kWhole ? load16(k + it.lo) : load_chunk(k, it.lo, it.hi);
  it.v = kWhole ? load16(v + it.lo) : load_chunk(v, it.lo, it.hi);
  if constexpr (kIsQuantized<CacheT>) {
    it.scale = p.scale_kind == ScaleKind::per_head ? ScalePair{static_scale(p, false, 0, head), static_scale(p, true, 0, head)}
                                                   : tensor;
  }
  return it;
}

// The per_tensor scales of a call quantised by them (else unused).
template <typename CacheT>
KVF_HD ScalePair tensor_scales(const KvAppendCore& p) {
  if constexpr (kIsQuantized<CacheT>) {
    if (p.scale_kind == ScaleKind::per_tensor) return {static_scale(p, false, 0, 0), static_scale(p, true, 0, 0)};
  }
  return {};
}

// Stores an item at (block, pos): bit copies, conversions, or a static scale's quantisation. kWhole:
// the chunk is whole and its destination aligned to its stored size (KernelPath aligned), so a bit
// copy or a chunk's codes is one store without a check (the compiler otherwise splits the checked
// 16-byte store into four 4-byte ones). `enabled` false: nothing is stored. The aligned path's bit
// copies are predicated on it (store16_if: the path computes every address and predicates the
// stores rather than branching past them); conversions and quantisation return before any store
// (predicating those cost fp8 per tensor 1.4 % at T = 4096 and 65536 on the H200, the same run in
// which predicated bit copies gained 4-5 % at 4096).
template <typename InT, typename CacheT, bool kWhole = false>
KVF_HD void store_classic_item(const KvAppendCore& p, const ClassicItem& it, int64_t block, int64_t pos, bool enabled = true) {
  CacheT* k_dst = cache_row<CacheT, false>(p, false, block, pos, it.head);
  CacheT* v_dst = cache_row<CacheT, false>(p, true, block, pos, it.head);
  if constexpr (std::is_same_v<InT, CacheT> && kWhole) {
    store16_if(k_dst + it.lo, it.k, enabled);
    store16_if(v_dst + it.lo, it.v, enabled);
    return;
  }
  if (!enabled) return;
  if constexpr (std::is_same_v<InT, CacheT>) {
    store_chunk(it.k, k_dst, it.lo, it.hi);
    store_chunk(it.v, v_dst, it.lo, it.hi);
  } else if constexpr (kIsQuantized<CacheT>) {
    const bool by_block = p.scale_kind == ScaleKind::per_block;  // the slot's physical block's scales
    store_quantized<InT, CacheT, kWhole>(it.k, k_dst, it.lo, it.hi, by_block ? static_scale(p, false, block, it.head) : it.scale.k);
    store_quantized<InT, CacheT, kWhole>(it.v, v_dst, it.lo, it.hi, by_block ? static_scale(p, true, block, it.head) : it.scale.v);
  } else {
    store_converted<InT, CacheT>(it.k, k_dst, it.lo, it.hi);
    store_converted<InT, CacheT>(it.v, v_dst, it.lo, it.hi);
  }
}

// The rows of `token`, work items strided over the block's threads (KernelPath classic).
template <typename InT, typename CacheT, typename SlotT>
KVF_HD void append_classic_rows(const KvAppendCore& p, int64_t token, int thread, int threads) {
  constexpr int64_t kVec = 16 / sizeof(InT);
  const int chunks = static_cast<int>((p.head_dim + kVec - 1) / kVec);
  const int items = p.num_heads * chunks;
  const ScalePair tensor = tensor_scales<CacheT>(p);
  ClassicItem first;
  if (thread < items) first = load_classic_item<InT, CacheT>(p, token, thread / chunks, thread % chunks, tensor);
  int64_t block = 0, pos = 0;
  if (!row_destination<SlotT>(p, token, thread, block, pos)) return;
  if (thread >= items) return;
  store_classic_item<InT, CacheT>(p, first, block, pos);
  for (int item = thread + threads; item < items; item += threads)
    store_classic_item<InT, CacheT>(p, load_classic_item<InT, CacheT>(p, token, item / chunks, item % chunks, tensor), block, pos);
}

// Chunk `chunk` of head `head` of row `token` when every chunk is whole and 16-byte aligned in the
// input and the caches, and the slot alone addresses the row (KernelPath aligned): one item, by a
// thread of a two-dimensional block (x: the chunk, y: the head), so no thread divides to find its
// item. The last block of a row may hold heads past the call's.
template <typename InT, typename CacheT, typename SlotT>
KVF_HD void append_aligned_item(const KvAppendCore& p, int64_t token, int head, int chunk) {
  if (head >= p.num_heads) return;
  const ClassicItem it = load_classic_item<InT, CacheT, true>(p, token, head, chunk, tensor_scales<CacheT>(p));
  int64_t block = 0, pos = 0;
  const int first = head | chunk;  // 0 for the row's first item alone, which counts an invalid slot
  // A bit copy's stores are predicated on the row's destination, not skipped by a branch
  // (store16_if: else the rows' loads are sunk below the slot's check); a conversion or
  // quantisation returns here first, which keeps its code as it was before the predicated stores
  // (leaving it to store_classic_item's own check compiles to a different, untimed kernel).
  const bool write = row_destination<SlotT, false>(p, token, first, block, pos);
  if constexpr (!std::is_same_v<InT, CacheT>) {
    if (!write) return;
  }
  store_classic_item<InT, CacheT, true>(p, it, block, pos, write);
}

// The max of `partial` and the magnitudes of a chunk's elements (NaN ignored).
template <typename InT>
KVF_HD float chunk_max(float partial, const Vec16& x) {
  KVF_UNROLL
  for (int e = 0; e < static_cast<int>(16 / sizeof(InT)); ++e) partial = fmaxf(partial, fabsf(to_float(vec_elem<InT>(x, e))));
  return partial;
}

// Lane `lane`'s share of a row of `len` elements held by `lanes` threads: the max magnitude over its
// 16-byte chunks lane, lane + lanes, ... (NaN ignored, zeros past the row); *first (if given) gets
// its first chunk.
template <typename InT>
KVF_HD float lane_max(const InT* src, int64_t len, int lane, int lanes, Vec16* first) {
  constexpr int64_t kVec = 16 / sizeof(InT);
  float partial = 0.0f;
  for (int64_t lo = lane * kVec; lo < len; lo += lanes * kVec) {
    const Vec16 x = load_chunk(src, lo, lo + kVec < len ? lo + kVec : len);
    if (first != nullptr && lo == lane * kVec) *first = x;
    partial = chunk_max<InT>(partial, x);
  }
  return partial;
}

// The max of `partial` (this thread's lane_max) over its group of `lanes` consecutive threads (a
// power of two <= 32, aligned to it), which hold the row src of len elements (nullptr: a group past
// the rows, whose partials are 0). Every thread of the block calls it, none having returned: the GPU
// combines the group's partials with warp shuffles; the emulator, which runs one thread at a time,
// computes every lane's lane_max itself. Max is exact in any order, so both give the same bits.
template <typename InT>
KVF_HD float row_group_max(float partial, int lanes, const InT* src, int64_t len) {
#if defined(__CUDA_ARCH__)
  for (int offset = lanes / 2; offset > 0; offset /= 2) partial = fmaxf(partial, __shfl_xor_sync(0xffffffffu, partial, offset));
  return partial;
#else
  if (src == nullptr) return partial;
  float amax = 0.0f;
  for (int lane = 0; lane < lanes; ++lane) amax = fmaxf(amax, lane_max(src, len, lane, lanes, static_cast<Vec16*>(nullptr)));
  return amax;
#endif
}

// The rows of `token` under a dynamic per-token-head scale. The 2 H rows (K's heads, then V's) are
// held by groups of `lanes` threads, the power of two >= the row's 16-byte chunks (at most 32, a
// warp), lane j holding chunks j, j + lanes, ...; each lane takes the max over its chunks, the group
// combines them (row_group_max), every lane quantises its chunks by the row's scale and lane 0
// stores the scale. Rows are dealt to the block's threads in passes, which every thread runs
// (a group past the rows only joins the shuffles). The first pass's input and maxima are taken
// before the slot is known.
template <typename InT, typename CacheT, typename SlotT>
KVF_HD void append_classic_dynamic(const KvAppendCore& p, int64_t token, int thread, int threads) {
  constexpr int64_t kVec = 16 / sizeof(InT);
  const int chunks = static_cast<int>((p.head_dim + kVec - 1) / kVec);
  int lanes = 1;
  while (lanes < chunks && lanes < 32) lanes *= 2;
  const int rows = 2 * p.num_heads, rows_per_pass = threads / lanes, lane = thread % lanes;
  struct Share {  // one lane's share of one row
    const InT* src = nullptr;  // the row's input; nullptr: past the rows
    bool is_value = false;
    int head = 0;
    Vec16 first{};  // the lane's first chunk (chunk `lane`), zeros past the row
    float amax = 0.0f;
  };
  auto take = [&](int pass) {  // loads of the lane's chunks and the row's amax
    Share s;
    const int row = pass * rows_per_pass + thread / lanes;
    float partial = 0.0f;
    if (row < rows) {
      s.is_value = row >= p.num_heads;
      s.head = s.is_value ? row - p.num_heads : row;
      s.src = input_row<InT>(p, s.is_value, token, s.head);
      partial = lane_max(s.src, p.head_dim, lane, lanes, &s.first);
    }
    s.amax = row_group_max(partial, lanes, s.src, p.head_dim);
    return s;
  };
  const int passes = (rows + rows_per_pass - 1) / rows_per_pass;
  const Share first = take(0);
  int64_t block = 0, pos = 0;
  if (!row_destination<SlotT>(p, token, thread, block, pos)) return;  // the whole block returns: one slot
  for (int pass = 0; pass < passes; ++pass) {
    const Share s = pass == 0 ? first : take(pass);
    if (s.src == nullptr) continue;
    const float scale = dynamic_scale<CacheT>(s.amax);
    if (lane == 0) *scale_cell(p, s.is_value, block, pos, s.head) = scale;
    CacheT* dst = cache_row<CacheT, false>(p, s.is_value, block, pos, s.head);
    for (int c = lane; c < chunks; c += lanes) {
      const int64_t lo = static_cast<int64_t>(c) * kVec, hi = lo + kVec < p.head_dim ? lo + kVec : p.head_dim;
      store_quantized<InT, CacheT>(c == lane ? s.first : load_chunk(s.src, lo, hi), dst, lo, hi, scale);
    }
  }
}

// Chunk `chunk` of head `head` of row `token` under a per-token-head scale when the aligned path's
// conditions hold and a row's chunks are a power of two up to 32 (KernelPath aligned_dynamic): the
// row's K (and V) chunks are held by that many consecutive lanes of one warp, one chunk each, which
// combine their maxima (row_group_max); the row's first lane stores the scales. Every thread of the
// block reaches the shuffles: a head past the call's joins them with zeros and returns after.
template <typename InT, typename CacheT, typename SlotT>
KVF_HD void append_aligned_dynamic_item(const KvAppendCore& p, int64_t token, int head, int chunk, int chunks) {
  const bool live = head < p.num_heads;
  ClassicItem it;
  float k_max = 0.0f, v_max = 0.0f;
  if (live) {
    it = load_classic_item<InT, CacheT, true>(p, token, head, chunk, ScalePair{});
    k_max = chunk_max<InT>(0.0f, it.k);
    v_max = chunk_max<InT>(0.0f, it.v);
  }
  k_max = row_group_max(k_max, chunks, live ? input_row<InT>(p, false, token, head) : nullptr, p.head_dim);
  v_max = row_group_max(v_max, chunks, live ? input_row<InT>(p, true, token, head) : nullptr, p.head_dim);
  int64_t block = 0, pos = 0;
  if (!live || !row_destination<SlotT, false>(p, token, head | chunk, block, pos)) return;
  const ScalePair scale{dynamic_scale<CacheT>(k_max), dynamic_scale<CacheT>(v_max)};
  if (chunk == 0) {
    *scale_cell(p, false, block, pos, head) = scale.k;
    *scale_cell(p, true, block, pos, head) = scale.v;
  }
  CacheT* k_dst = cache_row<CacheT, false>(p, false, block, pos, head);
  CacheT* v_dst = cache_row<CacheT, false>(p, true, block, pos, head);
  store_quantized<InT, CacheT, true>(it.k, k_dst, it.lo, it.hi, scale.k);
  store_quantized<InT, CacheT, true>(it.v, v_dst, it.lo, it.hi, scale.v);
}

// ---------------------------------------------------------------------------------------------
// The format families and vllm_legacy (KernelPath fields). Thread block `cta` handles slot entry `cta`;
// its threads stride over heads x 16-byte chunks of head_dim, each work item covering that chunk of
// the K row (or MLA entry) and of the V row, so any head count and head_dim are covered. With a
// dynamic per-token-head scale a work item is a whole (K or V, head) row instead: the row's amax
// must be known before any element is stored.

// The rows of `token` at (block, pos), work items strided over the block's threads.
template <typename InT, typename CacheT>
KVF_HD void append_rows(const KvAppendCore& p, int64_t token, int64_t block, int64_t pos, int thread, int threads) {
  constexpr int64_t kVec = 16 / sizeof(InT);  // elements per chunk
  const int num_tensors = p.has_value ? 2 : 1;

  if constexpr (kIsQuantized<CacheT>) {
    if (p.scale_kind == ScaleKind::per_token_head) {
      for (int64_t work = thread; work < num_tensors * int64_t{p.num_heads}; work += threads) {
        const bool is_value = work >= p.num_heads;
        const int64_t head = work % p.num_heads;
        RowPart<InT, CacheT> parts[2];
        const int num_parts = row_parts<InT, CacheT>(p, is_value, token, block, pos, head, parts);
        float amax = 0.0f;
        for (int i = 0; i < num_parts; ++i) amax = fmaxf(amax, lane_max(parts[i].src, parts[i].len, 0, 1, static_cast<Vec16*>(nullptr)));
        const float scale = dynamic_scale<CacheT>(amax);
        *scale_cell(p, is_value, block, pos, head) = scale;
        for (int i = 0; i < num_parts; ++i) {
          for (int64_t lo = 0; lo < parts[i].len; lo += kVec) {
            const int64_t hi = lo + kVec < parts[i].len ? lo + kVec : parts[i].len;
            store_quantized<InT, CacheT>(load_chunk(parts[i].src, lo, hi), parts[i].dst, lo, hi, scale);
          }
        }
      }
      return;
    }
  }

  // Work item = one chunk (16 bytes of input) of one head, of the K row and of the V row (rows of
  // unequal length: the shorter one's item past its end does nothing). The item's head and chunk
  // advance by `threads` items per iteration, without a division.
  const int64_t key_dims = p.head_dim - p.rope_dim;
  const int k_chunks = static_cast<int>((key_dims + kVec - 1) / kVec + (p.rope_dim + kVec - 1) / kVec);
  const int v_chunks = p.has_value ? static_cast<int>((value_dim(p) + kVec - 1) / kVec) : 0;
  const int chunks = k_chunks > v_chunks ? k_chunks : v_chunks;
  if (chunks == 0) return;
  const int64_t per_tensor = static_cast<int64_t>(p.num_heads) * chunks;
  int item_head = thread / chunks;
  int item_chunk = thread % chunks;
  const int head_step = threads / chunks;
  const int chunk_step = threads % chunks;

  for (int64_t work = thread; work < per_tensor; work += threads) {
    const int64_t head = item_head;
    append_item<InT, CacheT>(p, token, block, pos, head, item_chunk);
    item_head += head_step;
    item_chunk += chunk_step;
    if (item_chunk >= chunks) {
      item_chunk -= chunks;
      ++item_head;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Per-thread body: thread `thread` of thread block `cta`, which handles slot entry `cta`.
// P: KvAppendCore for a classic cache's instantiations, KvAppendParams for a quantised format's.
// kPath: kernel_path() of the call (a quantised format's is fields, with CacheT FormatCodes).
template <typename InT, typename CacheT, typename SlotT, KernelPath kPath, typename P>
KVF_HD void kv_append_thread(const P& p, int64_t cta, int thread, int threads) {
  const int64_t token = cta;
  if constexpr (kPath == KernelPath::classic_dynamic) {
    if constexpr (kIsQuantized<CacheT>) append_classic_dynamic<InT, CacheT, SlotT>(p, token, thread, threads);
  } else if constexpr (kPath == KernelPath::classic) {
    append_classic_rows<InT, CacheT, SlotT>(p, token, thread, threads);
  } else {
    int64_t block = 0, pos = 0;
    if (!row_destination<SlotT>(p, token, thread, block, pos)) return;
    if constexpr (kIsFormat<CacheT>) {  // a quantised format: the instantiation of its own
      append_format_rows<InT>(p, token, block, pos, thread, threads);
    } else if (p.vllm_legacy) {
      append_legacy_rows<InT, CacheT>(p, token, block, pos, thread, threads);
    } else {
      append_rows<InT, CacheT>(p, token, block, pos, thread, threads);
    }
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

// A quantised cache needs a scale kind and a float cache must have none; other combinations are
// refused rather than guessed (bug pattern B28). A quantised format's call is CacheT FormatCodes
// (its codes' and scales' dtypes are the format's), if this kernel writes it (format_supported).
template <typename InT, typename Fn>
bool dispatch_cache(const KvAppendParams& p, Fn& fn) {
  if (p.quant_format != QuantFormat::none) return format_supported(p) && dispatch_slot<InT, FormatCodes>(p, fn);
  const bool scaled = p.scale_kind != ScaleKind::none;
  switch (p.cache_dtype) {
    case DType::f16: return !scaled && dispatch_slot<InT, __half>(p, fn);
    case DType::bf16: return !scaled && dispatch_slot<InT, __nv_bfloat16>(p, fn);
    case DType::f32: return !scaled && dispatch_slot<InT, float>(p, fn);
    case DType::fp8_e4m3: return scaled && dispatch_slot<InT, Fp8E4M3>(p, fn);
    case DType::fp8_e5m2: return scaled && dispatch_slot<InT, Fp8E5M2>(p, fn);
    case DType::int8: return scaled && dispatch_slot<InT, Int8>(p, fn);
    default: return false;  // the quantised formats' dtypes: not in this dispatch
  }
  return false;
}

template <typename Fn>
bool dispatch_kv_append(const KvAppendParams& p, Fn fn) {
  switch (p.input_dtype) {
    case DType::f16: return dispatch_cache<__half>(p, fn);
    case DType::bf16: return dispatch_cache<__nv_bfloat16>(p, fn);
    case DType::f32: return dispatch_cache<float>(p, fn);
    default: return false;  // quantised dtypes are cache-only
  }
}

}  // namespace KVF_KERNEL_NS
}  // namespace kvf
