// cuda_status.h — what the GPU targets (cuda, triton) share about CUDA: whether an error is sticky,
// a readable description, the availability probe, and the device copy of the arena image.
//
// CUDA is only ever initialised in the worker process (campaign/isolation.h) or in the probe's
// short-lived child, never in the kvfuzz process itself, which forks workers.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <string>

namespace kvf {

// Errors after which the context is unusable (driver_types.h: "the process must be terminated"):
// the target reports RunStatus::device_fault and the worker is replaced.
bool is_sticky(cudaError_t e);
bool is_sticky(CUresult r);

// "what: cudaErrorIllegalAddress (an illegal memory access was encountered)".
std::string describe(cudaError_t e, const char* what);

// Empty when CUDA device `device` can be used; otherwise why not. Runs in a forked child so that
// the calling process never initialises CUDA. `extra`, if given, runs in the child after the device
// count was checked and returns its own reason (empty: fine), e.g. a compute capability check.
std::string probe_cuda_device(int device, const std::function<std::string()>& extra = {});

// The arena image on the device: one allocation, grown as needed and reused across cases, and the
// page-locked staging buffer its copies go through. Both copies are DMA on the caller's stream and a
// case waits once, in download(): a synchronous cudaMemcpy would run on the legacy default stream,
// which every thread of a --no-fork run shares, so each thread's copy queued behind the others' (the
// cuda target's run took 1.39 ms a case at --no-fork -j 16 on the H200 host, 0.32 ms staged:
// reports/gpu/2026-12-04-h200-host-staging). Images up to kMaxStagingBytes are staged (a larger
// one's copies outweigh the waits), none once the driver refused a buffer (said once on stderr);
// an unstaged image is copied from where it is, pageable: slower, never wrong.
class DeviceImage {
 public:
  static constexpr size_t kMaxStagingBytes = size_t{64} << 20;

  DeviceImage() = default;
  ~DeviceImage();
  DeviceImage(const DeviceImage&) = delete;
  DeviceImage& operator=(const DeviceImage&) = delete;

  // Makes room for `bytes` on the device (the contents are lost when it grows).
  cudaError_t reserve(size_t bytes);
  // Makes room for `bytes` and copies `host` there on `stream`, asynchronously; `host_pinned`: host
  // is page-locked itself (KVFUZZ_CUDA_PIN=1) and copied directly.
  cudaError_t upload(const std::byte* host, size_t bytes, cudaStream_t stream, bool host_pinned = false);
  // Copies `bytes` back to `host` on `stream`, the way upload() copied them there (staged or
  // direct), and waits for the stream: a fault of a kernel queued before it surfaces here.
  cudaError_t download(std::byte* host, size_t bytes, cudaStream_t stream);
  std::byte* data() const { return data_; }

 private:
  // The staging buffer for an image of `bytes`, or nullptr (too large, or refused).
  std::byte* staging(size_t bytes);

  std::byte* data_ = nullptr;
  size_t capacity_ = 0;
  std::byte* staging_ = nullptr;  // page-locked, staging_bytes_ long
  size_t staging_bytes_ = 0;
  bool staging_refused_ = false;
  std::byte* staged_ = nullptr;  // the last upload's staging buffer, nullptr: it copied from the host directly
  bool in_flight_ = false;  // an upload not yet followed by a download (staging_ may still be read)
};

}  // namespace kvf
