// node_cost.cu — what a small append costs as a CUDA-graph kernel node, stage by stage (issue 20).
//
//   nvcc -O3 -std=c++20 -arch=sm_90 bench/node_cost.cu -o node_cost && ./node_cost > node_cost.md
//
// Every row: `calls` launches captured in one CUDA graph, the graph replayed `reps` times between CUDA
// events after a warm-up replay; the median replay / calls is the µs per node. Rows:
//   - empty kernels whose parameter block is 16 .. 2048 bytes (one thread block of 128 threads):
//     the node's fixed cost and what the size of its parameters adds;
//   - a minimal paged-NHD bf16 append of T rows, H 8 x D 128 (one thread block of 128 threads per
//     row, one 16-byte chunk of K and of V per thread: the least such an append can do), in variants
//     that change one stage: parameters padded to 424 (kvf::KvAppendCore) or 2,080 bytes
//     (kvf::KvAppendParams), the slot split in 64-bit instead of 32-bit arithmetic, the K/V loads
//     issued before the slot is known (prefetch) or after;
//   - the copy node (cudaMemcpyAsync device to device) of the same K+V bytes.
// Each append variant is checked once against a host expectation before it is timed.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "graph_timing.cuh"

template <int N>
struct Pad {
  unsigned char bytes[N];
};

template <int N>
__global__ void empty_kernel(const __grid_constant__ Pad<N> p) {
  if (p.bytes[N - 1] == 0xAB && threadIdx.x == 1023) asm volatile("trap;");  // never: keeps p alive
}

struct MiniArgs {
  const uint4* key;          // [T, 128] 16-byte chunks (H 8 x D 128 bf16)
  const uint4* value;        // [T, 128]
  const int64_t* slots;      // [T]
  uint4* k_cache;            // [nb, bs, 128] chunks
  uint4* v_cache;
  int64_t block_size;
  int64_t stride_block;      // chunks between blocks
  int64_t stride_pos;        // chunks between slots
};
template <int kBytes>
struct MiniParams {
  MiniArgs a;
  unsigned char pad[kBytes - sizeof(MiniArgs)];
};
template <>
struct MiniParams<sizeof(MiniArgs)> {
  MiniArgs a;
};

template <int kBytes, bool kDiv64, bool kPrefetch>
__global__ void mini_append(const __grid_constant__ MiniParams<kBytes> p) {
  const int64_t token = blockIdx.x;
  const int c = threadIdx.x;
  uint4 k{}, v{};
  if (kPrefetch) {
    k = p.a.key[token * 128 + c];
    v = p.a.value[token * 128 + c];
  }
  const int64_t slot = p.a.slots[token];
  if (slot < 0) return;
  int64_t block, pos;
  if (kDiv64) {
    block = slot / p.a.block_size;
    pos = slot % p.a.block_size;
  } else {
    const uint32_t s = static_cast<uint32_t>(slot), bs = static_cast<uint32_t>(p.a.block_size);
    block = s / bs;
    pos = s - static_cast<uint32_t>(block) * bs;
  }
  if (!kPrefetch) {
    k = p.a.key[token * 128 + c];
    v = p.a.value[token * 128 + c];
  }
  const int64_t at = block * p.a.stride_block + pos * p.a.stride_pos + c;
  p.a.k_cache[at] = k;
  p.a.v_cache[at] = v;
}

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::atoi(argv[1]) : 100, reps = argc > 2 ? std::atoi(argv[2]) : 50;
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# node_cost on %s, %d calls per graph, median of %d replays\n\n", prop.name, calls, reps);
  std::printf("| row | T | µs per node |\n|---|---:|---:|\n");

  auto empty = [&](auto tag) {
    constexpr int N = decltype(tag)::value;
    Pad<N> p{};
    std::printf("| empty kernel, %d-byte parameters | - | %.3f |\n", N,
                graph_us(s, calls, reps, [&](cudaStream_t st) { empty_kernel<N><<<1, 128, 0, st>>>(p); }));
  };
  empty(std::integral_constant<int, 16>{});
  empty(std::integral_constant<int, 256>{});
  empty(std::integral_constant<int, 424>{});
  empty(std::integral_constant<int, 1024>{});
  empty(std::integral_constant<int, 2080>{});
  empty(std::integral_constant<int, 4096>{});

  for (int T : {1, 16, 256}) {
    const int64_t nb = 4096, bs = 16, chunks = 128;
    uint4 *key, *kc, *vc;  // key: K's rows then V's, one buffer (the copy node copies both)
    int64_t* slots;
    CHECK(cudaMalloc(&key, 2 * T * chunks * 16));
    uint4* value = key + T * chunks;
    CHECK(cudaMalloc(&kc, nb * bs * chunks * 16));
    CHECK(cudaMalloc(&vc, nb * bs * chunks * 16));
    CHECK(cudaMalloc(&slots, T * 8));
    std::vector<uint32_t> hk(T * chunks * 4), hv(T * chunks * 4);
    for (size_t i = 0; i < hk.size(); ++i) hk[i] = uint32_t(i * 2654435761u), hv[i] = uint32_t(i * 40503u + 7);
    std::vector<int64_t> hs(T);
    for (int t = 0; t < T; ++t) hs[t] = (t * 977 + 13) % (nb * bs);  // distinct for T <= 256
    CHECK(cudaMemcpy(key, hk.data(), hk.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(value, hv.data(), hv.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(slots, hs.data(), T * 8, cudaMemcpyHostToDevice));
    const MiniArgs args{key, value, slots, kc, vc, bs, bs * chunks, chunks};

    auto variant = [&](const char* name, auto kernel, auto params) {
      CHECK(cudaMemset(kc, 0, nb * bs * chunks * 16));
      kernel<<<T, 128, 0, s>>>(params);
      CHECK(cudaStreamSynchronize(s));
      std::vector<uint32_t> row(chunks * 4);
      for (int t = 0; t < T; ++t) {  // K's row of token t at its slot
        CHECK(cudaMemcpy(row.data(), kc + hs[t] * chunks, chunks * 16, cudaMemcpyDeviceToHost));
        if (std::memcmp(row.data(), hk.data() + t * chunks * 4, chunks * 16) != 0) {
          std::printf("| %s | %d | WRONG |\n", name, T);
          return;
        }
      }
      std::printf("| %s | %d | %.3f |\n", name, T,
                  graph_us(s, calls, reps, [&](cudaStream_t st) { kernel<<<T, 128, 0, st>>>(params); }));
    };
    constexpr int kSmall = sizeof(MiniArgs);
    MiniParams<kSmall> small{args};
    MiniParams<424> core{args, {}};
    MiniParams<2080> full{args, {}};
    variant("mini append, 56-byte params, div32", mini_append<kSmall, false, false>, small);
    variant("mini append, 56-byte params, div32, prefetch", mini_append<kSmall, false, true>, small);
    variant("mini append, 56-byte params, div64", mini_append<kSmall, true, false>, small);
    variant("mini append, 424-byte params, div32", mini_append<424, false, false>, core);
    variant("mini append, 2080-byte params, div32", mini_append<2080, false, false>, full);
    variant("mini append, 2080-byte params, div64", mini_append<2080, true, false>, full);
    const size_t bytes = size_t(T) * chunks * 16 * 2;  // K + V
    std::printf("| copy node, %zu bytes | %d | %.3f |\n", bytes, T, graph_us(s, calls, reps, [&](cudaStream_t st) {
                  CHECK(cudaMemcpyAsync(kc, key, bytes, cudaMemcpyDeviceToDevice, st));
                }));
    CHECK(cudaFree(key));
    CHECK(cudaFree(kc));
    CHECK(cudaFree(vc));
    CHECK(cudaFree(slots));
  }
  return 0;
}
