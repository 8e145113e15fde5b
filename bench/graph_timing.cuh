// graph_timing.cuh — what bench/node_cost.cu and bench/stage_cost.cu time with: CHECK (exit on a
// CUDA error, naming the call) and graph_us (µs per launch of `launch`, captured `calls` times in one
// CUDA graph, median of `reps` replays between CUDA events after a warm-up replay).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                                  \
  do {                                                                                            \
    cudaError_t e_ = (x);                                                                         \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

inline float graph_us(cudaStream_t s, int calls, int reps, const auto& launch) {
  for (int i = 0; i < 3; ++i) launch(s);
  CHECK(cudaStreamSynchronize(s));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls; ++i) launch(s);
  CHECK(cudaStreamEndCapture(s, &g));
  CHECK(cudaGraphInstantiate(&ge, g, 0));
  CHECK(cudaGraphLaunch(ge, s));
  CHECK(cudaStreamSynchronize(s));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> us;
  for (int r = 0; r < reps; ++r) {
    CHECK(cudaEventRecord(a, s));
    CHECK(cudaGraphLaunch(ge, s));
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    us.push_back(ms * 1000.0f / calls);
  }
  std::sort(us.begin(), us.end());
  CHECK(cudaGraphExecDestroy(ge));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return us[us.size() / 2];
}
