// stage_cost.cu — the least a large append can take, one stage at a time (issue 20).
//
//   nvcc -O3 -std=c++20 -arch=sm_90 bench/stage_cost.cu -o stage_cost && ./stage_cost > stage_cost.md
//   STAGE_COST_T=1 STAGE_COST_D=128 ./stage_cost    (one T and D only, e.g. under a profiler)
//
// node_cost.cu prices the fixed cost of a small append; this program prices what the bytes and the
// arithmetic of a big one cost, with kernels that do nothing but the stage in question, so that a
// gap between kvfuzz's kernel and the copy node can be split into "the memory pattern costs it" and
// "our kernel costs it". Every kernel is one thread per 16-byte chunk of input (token, head, chunk in
// row-major order, 256 threads a block, 32-bit index arithmetic) and writes paged caches of block
// size 16 at slots drawn as in bench.py (a random permutation of max(2T, 4096) slots, or 0..T-1 for
// the "sequential" rows). Rows:
//   - bf16 rows, H 8, D 96 and 128, NHD and HND: the pure cost of each cache layout's write pattern;
//   - fp8 e4m3 per-tensor rows (D 128, NHD) converting x / s with the IEEE division the contract
//     requires, x * (1 / s) (a reciprocal: not the contract's rounding, a bound only), and x alone
//     (no scale: the conversion's own cost);
//   - fp8 per-token-head rows: each row's 16 chunks held by 16 lanes, max |x| by shuffles, scale =
//     max(amax, 1e-6) / 448, then the division per element and the scale's store;
//   - the copy node (cudaMemcpyAsync) of as many bytes as the row reads and writes, halved;
//   - bf16 NHD at random slots again with 424 bytes of kernel parameters (kvfuzz's KvAppendCore's
//     size; the extra bytes unread): what a launch's parameter size costs a small call.
// Every kernel's output is checked on the host for the first 64 tokens before it is timed; times
// are CUDA-graph replays (`calls` launches a graph, median of `reps` replays) in µs per launch.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "graph_timing.cuh"

constexpr int kBlockSize = 16, kHeads = 8, kThreads = 256;

struct Rows {
  const uint4* key;       // [T, H, C] 16-byte chunks of bf16
  const uint4* value;
  const int64_t* slots;   // [T]
  int tokens, chunks;     // C: 16-byte chunks per head row (D / 8)
};

// Chunk offset of (slot, head, chunk) in a cache whose rows are `chunks` units wide.
template <bool kHND>
__device__ __forceinline__ int64_t dst_of(int64_t slot, int head, int c, int chunks) {
  const int64_t block = slot / kBlockSize, pos = slot % kBlockSize;
  return kHND ? ((block * kHeads + head) * kBlockSize + pos) * chunks + c
              : ((block * kBlockSize + pos) * kHeads + head) * chunks + c;
}

template <bool kHND>
__device__ __forceinline__ void bf16_row_chunk(const Rows& r, uint4* kc, uint4* vc) {
  const int i = blockIdx.x * kThreads + threadIdx.x, per_token = kHeads * r.chunks;
  if (i >= r.tokens * per_token) return;
  const int token = i / per_token, head = (i - token * per_token) / r.chunks, c = i % r.chunks;
  const uint4 k = r.key[i], v = r.value[i];
  const int64_t at = dst_of<kHND>(r.slots[token], head, c, r.chunks);
  kc[at] = k;
  vc[at] = v;
}

template <bool kHND>
__global__ void bf16_rows(const Rows r, uint4* kc, uint4* vc) {
  bf16_row_chunk<kHND>(r, kc, vc);
}

// Parameter bytes as many as kvfuzz's kernels take (KvAppendCore: 424), none of them read: whether
// the size of a launch's parameters costs a small call time.
struct Unused {
  int64_t words[48];  // 384 bytes, beside Rows (32) and the two cache pointers
};

__global__ void bf16_rows_424_byte_parameters(const Rows r, uint4* kc, uint4* vc, const __grid_constant__ Unused) {
  bf16_row_chunk<false>(r, kc, vc);
}

enum Fp8Mode { kDivide, kReciprocal, kNoScale, kPerTokenHead };

__device__ __forceinline__ uint2 fp8_chunk(uint4 in, float s, float inv, Fp8Mode mode) {
  const __nv_bfloat16* x = reinterpret_cast<const __nv_bfloat16*>(&in);
  uint8_t out[8];
  for (int e = 0; e < 8; ++e) {
    const float f = __bfloat162float(x[e]);
    const float q = mode == kReciprocal ? f * inv : mode == kNoScale ? f : f / s;
    out[e] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3));
  }
  uint2 o;
  std::memcpy(&o, out, 8);
  return o;
}

__device__ __forceinline__ float chunk_amax(uint4 in) {
  const __nv_bfloat16* x = reinterpret_cast<const __nv_bfloat16*>(&in);
  float m = 0.0f;
  for (int e = 0; e < 8; ++e) m = fmaxf(m, fabsf(__bfloat162float(x[e])));
  return m;
}

// NHD fp8 rows; kPerTokenHead needs chunks == 16 (a row is 16 consecutive lanes of one warp).
template <Fp8Mode kMode>
__global__ void fp8_rows(const Rows r, uint2* kc, uint2* vc, float ks, float vs, float* k_scales, float* v_scales) {
  const int i = blockIdx.x * kThreads + threadIdx.x, per_token = kHeads * r.chunks;
  if (i >= r.tokens * per_token) return;  // whole rows only: tokens * per_token is a multiple of 16
  const int token = i / per_token, head = (i - token * per_token) / r.chunks, c = i % r.chunks;
  const uint4 k = r.key[i], v = r.value[i];
  const int64_t slot = r.slots[token];
  if (kMode == kPerTokenHead) {
    float km = chunk_amax(k), vm = chunk_amax(v);
    for (int o = 8; o > 0; o /= 2) {
      km = fmaxf(km, __shfl_xor_sync(0xffffffffu, km, o));
      vm = fmaxf(vm, __shfl_xor_sync(0xffffffffu, vm, o));
    }
    ks = fmaxf(km, 1e-6f) / 448.0f;
    vs = fmaxf(vm, 1e-6f) / 448.0f;
    if (c == 0) k_scales[slot * kHeads + head] = ks, v_scales[slot * kHeads + head] = vs;
  }
  const int64_t at = dst_of<false>(slot, head, c, r.chunks);
  kc[at] = fp8_chunk(k, ks, 1.0f / ks, kMode);
  vc[at] = fp8_chunk(v, vs, 1.0f / vs, kMode);
}

static float bf16_to_float(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::atoi(argv[1]) : 50, reps = argc > 2 ? std::atoi(argv[2]) : 30;
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# stage_cost on %s, %d launches per graph, median of %d replays\n\n", prop.name, calls, reps);
  std::printf("| row | D | T | µs per launch | copy µs (same bytes) | ratio to copy |\n|---|---:|---:|---:|---:|---:|\n");
  std::mt19937_64 rng(20);

  const int only_t = std::getenv("STAGE_COST_T") ? std::atoi(std::getenv("STAGE_COST_T")) : 0;  // one T, one D (profilers)
  const int only_d = std::getenv("STAGE_COST_D") ? std::atoi(std::getenv("STAGE_COST_D")) : 0;
  for (int T : {1, 16, 256, 4096, 65536}) {
    for (int D : {96, 128}) {
      if ((only_t != 0 && T != only_t) || (only_d != 0 && D != only_d)) continue;
      const int C = D / 8;
      const int64_t cap = std::max<int64_t>(2 * T, 4096), in_chunks = int64_t(T) * kHeads * C, cache_chunks = cap * kHeads * C;
      std::vector<int64_t> random_slots(cap), seq_slots(T);
      std::iota(random_slots.begin(), random_slots.end(), 0);
      std::shuffle(random_slots.begin(), random_slots.end(), rng);
      random_slots.resize(T);
      std::iota(seq_slots.begin(), seq_slots.end(), 0);
      std::vector<uint16_t> hk(in_chunks * 8), hv(in_chunks * 8);
      for (size_t e = 0; e < hk.size(); ++e) {  // bf16 in about [-4, 4): the top half of a random float's bits
        const uint64_t r = rng();
        const float a = float(int32_t(r)) * 0x1p-29f, b = float(int32_t(r >> 32)) * 0x1p-29f;
        uint32_t ua, ub;
        std::memcpy(&ua, &a, 4), std::memcpy(&ub, &b, 4);
        hk[e] = uint16_t(ua >> 16), hv[e] = uint16_t(ub >> 16);
      }
      uint4 *key, *kc, *vc;
      int64_t* slots;
      float* scales;
      CHECK(cudaMalloc(&key, 2 * in_chunks * 16));
      uint4* value = key + in_chunks;
      CHECK(cudaMalloc(&kc, cache_chunks * 16));
      CHECK(cudaMalloc(&vc, cache_chunks * 16));
      CHECK(cudaMalloc(&slots, T * 8));
      CHECK(cudaMalloc(&scales, 2 * cap * kHeads * 4));
      CHECK(cudaMemcpy(key, hk.data(), in_chunks * 16, cudaMemcpyHostToDevice));
      CHECK(cudaMemcpy(value, hv.data(), in_chunks * 16, cudaMemcpyHostToDevice));
      const Rows rows{key, value, slots, T, C};
      const int grid = int((in_chunks + kThreads - 1) / kThreads);
      const int check_tokens = std::min(T, 64);

      auto copy_us = [&](size_t bytes) {
        return graph_us(s, calls, reps, [&](cudaStream_t st) { CHECK(cudaMemcpyAsync(kc, key, bytes, cudaMemcpyDeviceToDevice, st)); });
      };
      auto report = [&](const char* name, float us, float copy) {
        std::printf("| %s | %d | %d | %.3f | %.3f | %.2f |\n", name, D, T, us, copy, us / copy);
        std::fflush(stdout);
      };
      const float bf16_copy = copy_us(size_t(in_chunks) * 32);  // K and V: read and written once

      // bf16: the layouts' write patterns, random and sequential slots.
      for (bool sequential : {false, true}) {
        const std::vector<int64_t>& hs = sequential ? seq_slots : random_slots;
        CHECK(cudaMemcpy(slots, hs.data(), T * 8, cudaMemcpyHostToDevice));
        for (bool hnd : {false, true}) {
          auto kernel = hnd ? bf16_rows<true> : bf16_rows<false>;
          kernel<<<grid, kThreads, 0, s>>>(rows, kc, vc);
          CHECK(cudaStreamSynchronize(s));
          bool ok = true;
          std::vector<uint16_t> got(8);
          for (int t = 0; t < check_tokens && ok; ++t)
            for (int h = 0; h < kHeads && ok; ++h)
              for (int c = 0; c < C && ok; ++c) {
                const int64_t blk = hs[t] / kBlockSize, pos = hs[t] % kBlockSize;
                const int64_t at = hnd ? ((blk * kHeads + h) * kBlockSize + pos) * C + c : ((blk * kBlockSize + pos) * kHeads + h) * C + c;
                CHECK(cudaMemcpy(got.data(), vc + at, 16, cudaMemcpyDeviceToHost));
                ok = std::memcmp(got.data(), hv.data() + ((int64_t(t) * kHeads + h) * C + c) * 8, 16) == 0;
              }
          char name[96];
          std::snprintf(name, sizeof name, "bf16 %s, %s slots", hnd ? "HND" : "NHD", sequential ? "sequential" : "random");
          if (!ok) {
            std::printf("| %s | %d | %d | WRONG | | |\n", name, D, T);
            continue;
          }
          report(name, graph_us(s, calls, reps, [&](cudaStream_t st) { kernel<<<grid, kThreads, 0, st>>>(rows, kc, vc); }), bf16_copy);
          if (!hnd && !sequential) {  // the same kernel with 424 bytes of parameters (same output, checked above)
            const Unused unused{};
            report("bf16 NHD, random slots, 424 bytes of parameters",
                   graph_us(s, calls, reps, [&](cudaStream_t st) { bf16_rows_424_byte_parameters<<<grid, kThreads, 0, st>>>(rows, kc, vc, unused); }),
                   bf16_copy);
          }
        }
      }

      if (D == 128) {  // fp8 e4m3 NHD, random slots: reads 2 bytes, writes 1 byte per element (+ scales)
        CHECK(cudaMemcpy(slots, random_slots.data(), T * 8, cudaMemcpyHostToDevice));
        const float fp8_copy = copy_us(size_t(in_chunks) * 16 * 2 * 3 / 4);  // (2 + 1) bytes per element, K and V, halved
        const float ks = 0.0123f, vs = 0.0456f;
        const struct { Fp8Mode mode; const char* name; } modes[] = {
            {kDivide, "fp8 per-tensor, x / s (IEEE division)"},
            {kReciprocal, "fp8 per-tensor, x * (1 / s) (bound only)"},
            {kNoScale, "fp8, no scale (conversion alone)"},
            {kPerTokenHead, "fp8 per-token-head, amax by shuffles, x / s"}};
        for (const auto& m : modes) {
          auto kernel = m.mode == kDivide         ? fp8_rows<kDivide>
                        : m.mode == kReciprocal   ? fp8_rows<kReciprocal>
                        : m.mode == kNoScale      ? fp8_rows<kNoScale>
                                                  : fp8_rows<kPerTokenHead>;
          uint2* kc8 = reinterpret_cast<uint2*>(kc);
          uint2* vc8 = reinterpret_cast<uint2*>(vc);
          float *ksc = scales, *vsc = scales + cap * kHeads;
          kernel<<<grid, kThreads, 0, s>>>(rows, kc8, vc8, ks, vs, ksc, vsc);
          CHECK(cudaStreamSynchronize(s));
          bool ok = true;
          std::vector<uint8_t> got(C * 8);
          for (int t = 0; t < check_tokens && ok; ++t)
            for (int h = 0; h < kHeads && ok; ++h) {
              const uint16_t* x = hk.data() + (int64_t(t) * kHeads + h) * C * 8;
              float sc = ks;
              if (m.mode == kPerTokenHead) {
                float amax = 0;
                for (int e = 0; e < C * 8; ++e) amax = std::max(amax, std::fabs(bf16_to_float(x[e])));
                sc = std::max(amax, 1e-6f) / 448.0f;
              }
              const float inv = 1.0f / sc;
              CHECK(cudaMemcpy(got.data(), kc8 + (random_slots[t] * kHeads + h) * C,
                               C * 8, cudaMemcpyDeviceToHost));
              for (int e = 0; e < C * 8 && ok; ++e) {
                const float f = bf16_to_float(x[e]);
                const float q = m.mode == kReciprocal ? f * inv : m.mode == kNoScale ? f : f / sc;
                ok = got[e] == uint8_t(__nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3));
              }
            }
          if (!ok) {
            std::printf("| %s | %d | %d | WRONG | | |\n", m.name, D, T);
            continue;
          }
          report(m.name, graph_us(s, calls, reps, [&](cudaStream_t st) { kernel<<<grid, kThreads, 0, st>>>(rows, kc8, vc8, ks, vs, ksc, vsc); }),
                 fp8_copy);
        }
      }
      CHECK(cudaFree(key));
      CHECK(cudaFree(kc));
      CHECK(cudaFree(vc));
      CHECK(cudaFree(slots));
      CHECK(cudaFree(scales));
    }
  }
  return 0;
}
