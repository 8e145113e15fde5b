// smoke.cpp — a GPU check of the FlashInfer plugin without kvfuzz: loads the .so, appends hand-built
// CSR batches through kvfuzz_plugin_append and compares every byte of the K and V buffers (guard bands
// included) with a plain-loop expectation. It is not the fuzzer (no generator, no shrinking): it shows
// that the adapter hands FlashInfer the right pointers, strides and arrays before a campaign is run.
//
// Build (no GPU needed) and run (one needed):
//   c++ -std=c++17 -O2 -I include -isystem /usr/local/cuda/include examples/peers/flashinfer/smoke.cpp
//       -L /usr/local/cuda/lib64 -lcudart_static -ldl -lpthread -lrt -o build/smoke
//   build/smoke build/plugins/flashinfer_append.so
// Exit code 0: every case passed and every expected skip and error came back as such.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kvfuzz_plugin.h"

namespace {

using QueryFn = int (*)(kvfz_capabilities*, int, char*, size_t);
using AppendFn = int (*)(const kvfz_append_args*, char*, size_t);

constexpr int64_t kGuard = 4096;  // 16-bit elements of guard before and after each cache tensor
constexpr uint16_t kGuardBits = 0xFFFF;

#define CUDA_OK(x)                                                                             \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "smoke: %s: %s (%s:%d)\n", #x, cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(2);                                                                            \
    }                                                                                          \
  } while (0)

// One case: the geometry and the requests; the arrays are built from it.
struct Shape {
  int32_t dtype;        // KVFZ_F16 / KVFZ_BF16 (values are bit patterns either way)
  int32_t layout;       // KVFZ_LAYOUT_PAGED_NHD / _HND
  int32_t heads, head_dim, page_size;
  int64_t cache_pad;    // extra elements per head row, position row and page (multiples of 8 keep alignment)
  bool fused;           // key/value as views into one [T, (2H + 2H) * D] QKV row (2H query heads)
  bool value_head_major;  // (not fused) value stored [H, rows, D]: other strides than key's
  int64_t extra_rows;   // input rows past nnz (never to be read)
  std::vector<int32_t> context, fresh;  // per request: tokens already cached, tokens appended now
};

struct Result {
  int rc;
  std::string error;
  bool ok;  // rc == 0 and both buffers as expected
};

Result run_case(AppendFn append, const Shape& s, uint64_t seed, cudaStream_t stream) {
  std::mt19937_64 rng(seed);
  const int64_t H = s.heads, D = s.head_dim, P = s.page_size;
  const int B = static_cast<int>(s.context.size());
  // Pages: request b spans ceil((context + fresh) / P) pages, drawn from a shuffled pool with spares.
  std::vector<int32_t> indptr{0}, last_page_len, indices;
  int64_t total_pages = 0;
  for (int b = 0; b < B; ++b) total_pages += (s.context[b] + s.fresh[b] + P - 1) / P;
  const int64_t num_pages = total_pages + 3;
  std::vector<int32_t> pool(num_pages);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  for (int b = 0; b < B; ++b) {
    const int64_t len = s.context[b] + s.fresh[b], pages = (len + P - 1) / P;
    for (int64_t i = 0; i < pages; ++i) indices.push_back(pool[indices.size()]);
    indptr.push_back(static_cast<int32_t>(indices.size()));
    last_page_len.push_back(pages == 0 ? 0 : static_cast<int32_t>(len - (pages - 1) * P));
  }
  std::vector<int32_t> batch_indices, positions;  // [nnz]
  for (int b = 0; b < B; ++b)
    for (int32_t i = 0; i < s.fresh[b]; ++i) batch_indices.push_back(b), positions.push_back(s.context[b] + i);
  const int64_t nnz = static_cast<int64_t>(batch_indices.size()), rows = nnz + s.extra_rows;

  // Cache geometry (elements), NHD [pages, P, H, D] or HND [pages, H, P, D], with optional gaps.
  kvfz_cache_geometry g{num_pages, P, 0, 0, 0};
  if (s.layout == KVFZ_LAYOUT_PAGED_NHD) {
    g.stride_head = D + s.cache_pad;
    g.stride_pos = H * g.stride_head + s.cache_pad;
    g.stride_block = P * g.stride_pos + s.cache_pad;
  } else {
    g.stride_pos = D + s.cache_pad;
    g.stride_head = P * g.stride_pos + s.cache_pad;
    g.stride_block = H * g.stride_head + s.cache_pad;
  }
  const int64_t cache_elems = num_pages * g.stride_block;
  // Input: dense [rows, H, D] each, or K and V inside a fused [rows, 4H, D] QKV buffer.
  const int64_t row = s.fused ? 4 * H * D : H * D;
  const int64_t key_offset = s.fused ? 2 * H * D : 0, value_offset = s.fused ? 3 * H * D : 0;
  std::vector<uint16_t> key_host(rows * row), value_host(s.fused ? 0 : rows * row);
  for (auto& x : key_host) x = static_cast<uint16_t>(rng());
  for (auto& x : value_host) x = static_cast<uint16_t>(rng());
  const std::vector<uint16_t>& vsrc = s.fused ? key_host : value_host;
  const int64_t v_stride_token = s.value_head_major ? D : row, v_stride_head = s.value_head_major ? rows * D : D;

  // The buffers: each cache tensor between guard bands, filled with a pattern; the expectation.
  const int64_t buffer = kGuard + cache_elems + kGuard;
  std::vector<uint16_t> k_init(buffer, kGuardBits), v_init(buffer, kGuardBits);
  for (int64_t i = 0; i < cache_elems; ++i) {
    k_init[kGuard + i] = static_cast<uint16_t>(0x3C00 ^ (i * 2654435761u));
    v_init[kGuard + i] = static_cast<uint16_t>(0x4000 ^ (i * 40503u));
  }
  std::vector<uint16_t> k_want = k_init, v_want = v_init;
  for (int64_t t = 0; t < nnz; ++t) {
    const int b = batch_indices[t];
    const int64_t pos = positions[t], page = indices[indptr[b] + pos / P], o = pos % P;
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d) {
        const int64_t at = kGuard + page * g.stride_block + o * g.stride_pos + h * g.stride_head + d;
        k_want[at] = key_host[t * row + key_offset + h * D + d];
        v_want[at] = vsrc[t * v_stride_token + value_offset + h * v_stride_head + d];
      }
  }

  // Device copies (the CSR arrays are device memory, as kvfuzz passes them).
  auto upload = [](const void* src, size_t bytes) {
    void* p = nullptr;
    CUDA_OK(cudaMalloc(&p, std::max<size_t>(bytes, 16)));
    if (bytes) CUDA_OK(cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice));
    return p;
  };
  uint16_t* k_dev = static_cast<uint16_t*>(upload(k_init.data(), buffer * 2));
  uint16_t* v_dev = static_cast<uint16_t*>(upload(v_init.data(), buffer * 2));
  uint16_t* key_dev = static_cast<uint16_t*>(upload(key_host.data(), key_host.size() * 2));
  uint16_t* value_dev = s.fused ? key_dev : static_cast<uint16_t*>(upload(value_host.data(), value_host.size() * 2));
  auto* bi = static_cast<int32_t*>(upload(batch_indices.data(), nnz * 4));
  auto* ps = static_cast<int32_t*>(upload(positions.data(), nnz * 4));
  auto* ki = static_cast<int32_t*>(upload(indices.data(), indices.size() * 4));
  auto* kp = static_cast<int32_t*>(upload(indptr.data(), indptr.size() * 4));
  auto* kl = static_cast<int32_t*>(upload(last_page_len.data(), last_page_len.size() * 4));

  kvfz_append_args a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.memory = KVFZ_MEMORY_DEVICE;
  a.stream = stream;
  a.key = key_dev + key_offset;
  a.value = value_dev + value_offset;
  a.key_stride_token = row, a.key_stride_head = D;
  a.value_stride_token = v_stride_token, a.value_stride_head = v_stride_head;
  a.input_dtype = s.dtype;
  a.slot_type = KVFZ_I32;
  a.num_slots = nnz;
  a.num_input_rows = rows;
  a.k_cache = k_dev + kGuard;
  a.v_cache = v_dev + kGuard;
  a.cache = g;
  a.cache_dtype = s.dtype;
  a.layout = s.layout;
  a.num_heads = s.heads;
  a.head_dim = s.head_dim;
  a.scale_kind = KVFZ_SCALE_NONE;
  a.family = KVFZ_FAMILY_KV;
  a.addressing = KVFZ_ADDRESSING_CSR;
  a.batch_indices = bi, a.positions = ps, a.kv_indices = ki, a.kv_indptr = kp, a.kv_last_page_len = kl;
  a.batch_size = B;

  char error[512] = "";
  Result r{append(&a, error, sizeof error), error, false};
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint16_t> k_got(buffer), v_got(buffer);
  CUDA_OK(cudaMemcpy(k_got.data(), k_dev, buffer * 2, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(v_got.data(), v_dev, buffer * 2, cudaMemcpyDeviceToHost));
  r.ok = r.rc == 0 && k_got == k_want && v_got == v_want;
  if (r.rc == 0 && !r.ok) {
    for (int64_t i = 0; i < buffer; ++i)
      if (k_got[i] != k_want[i] || v_got[i] != v_want[i]) {
        r.error = "first difference at element " + std::to_string(i - kGuard) + " of the cache";
        break;
      }
  }
  for (void* p : {static_cast<void*>(k_dev), static_cast<void*>(v_dev), static_cast<void*>(key_dev),
                  static_cast<void*>(bi), static_cast<void*>(ps), static_cast<void*>(ki), static_cast<void*>(kp),
                  static_cast<void*>(kl)})
    CUDA_OK(cudaFree(p));
  if (!s.fused) CUDA_OK(cudaFree(value_dev));
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: smoke PLUGIN.so\n");
    return 2;
  }
  void* so = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (so == nullptr) {
    std::fprintf(stderr, "smoke: %s\n", dlerror());
    return 2;
  }
  auto version = reinterpret_cast<uint32_t (*)()>(dlsym(so, "kvfuzz_plugin_abi_version"));
  auto query = reinterpret_cast<QueryFn>(dlsym(so, "kvfuzz_plugin_query"));
  auto append = reinterpret_cast<AppendFn>(dlsym(so, "kvfuzz_plugin_append"));
  if (!version || !query || !append || version() != KVFUZZ_PLUGIN_ABI_VERSION) {
    std::fprintf(stderr, "smoke: not a kvfuzz plugin of ABI version %u\n", KVFUZZ_PLUGIN_ABI_VERSION);
    return 2;
  }
  CUDA_OK(cudaSetDevice(0));
  kvfz_capabilities caps;
  std::memset(&caps, 0, sizeof caps);
  caps.struct_size = sizeof caps;
  char error[512] = "";
  if (query(&caps, 0, error, sizeof error) != 0) {
    std::fprintf(stderr, "smoke: query refused: %s\n", error);
    return 2;
  }
  std::printf("smoke: %s: layouts 0x%x dtypes 0x%x features 0x%x max_num_heads %d addressings 0x%x\n", caps.name,
              caps.layouts, caps.input_dtypes, caps.features, caps.max_num_heads, caps.addressings);

  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int passed = 0, failed = 0;
  uint64_t seed = 1;
  auto expect = [&](const Shape& s, int want_rc, const char* what) {
    const Result r = run_case(append, s, seed++, stream);
    const bool good = want_rc == 0 ? r.ok : r.rc == want_rc;
    (good ? passed : failed)++;
    if (!good || want_rc != 0)
      std::printf("smoke: %s %s: dtype %d layout %d H %d D %d page %d pad %lld fused %d -> rc %d %s\n",
                  good ? "ok" : "FAIL", what, s.dtype, s.layout, s.heads, s.head_dim, s.page_size,
                  static_cast<long long>(s.cache_pad), s.fused, r.rc, r.error.c_str());
  };
  const std::vector<int32_t> context{0, 7, 20, 3}, fresh{5, 1, 13, 0};  // prefill, decode, chunked, idle
  for (int32_t dtype : {KVFZ_F16, KVFZ_BF16})
    for (int32_t layout : {KVFZ_LAYOUT_PAGED_NHD, KVFZ_LAYOUT_PAGED_HND})
      for (int32_t D : {64, 128, 256, 512}) {
        const int32_t max_heads = 1024 / (D == 64 ? 8 : D == 128 ? 16 : 32);
        for (int32_t H : {1, 3, 8, max_heads})
          for (int32_t P : {1, 5, 16})
            for (int64_t pad : {0, 8})
              for (int input : {0, 1, 2})  // dense, fused QKV with padding rows, value head-major
                expect(Shape{dtype, layout, H, D, P, pad, input == 1, input == 2, input == 1 ? 2 : 0, context, fresh},
                       0, "append");
        // Over 1024 threads per CTA: skipped, or (128 heads, the declared maximum) refused.
        expect(Shape{dtype, layout, max_heads + 1, D, 16, 0, false, false, 0, context, fresh},
               D == 64 ? 1 : KVFZ_APPEND_SKIP, D == 64 ? "above max_num_heads (expect refusal)" : "too many heads (expect skip)");
        expect(Shape{dtype, layout, 2, D, 16, 3, false, false, 0, context, fresh}, KVFZ_APPEND_SKIP,
               "gapped cache stride (expect skip)");
      }
  // Many rows over few CTAs (the grid-stride loop), and a long sequence of one request.
  expect(Shape{KVFZ_F16, KVFZ_LAYOUT_PAGED_NHD, 8, 128, 16, 0, false, false, 0, {0, 100, 5}, {3000, 2000, 1}}, 0,
         "large prefill");
  // An empty append (nnz = 0): FlashInfer launches a zero-CTA grid; report what comes back.
  expect(Shape{KVFZ_F16, KVFZ_LAYOUT_PAGED_NHD, 2, 64, 16, 0, false, false, 0, {4, 9}, {0, 0}}, 1,
         "empty append (expect launch error)");
  std::printf("smoke: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
