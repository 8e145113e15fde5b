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

// The arena image on the device: one allocation, grown as needed and reused across cases.
class DeviceImage {
 public:
  DeviceImage() = default;
  ~DeviceImage();
  DeviceImage(const DeviceImage&) = delete;
  DeviceImage& operator=(const DeviceImage&) = delete;

  // Makes room for `bytes` and copies `host` there on `stream`.
  cudaError_t upload(const std::byte* host, size_t bytes, cudaStream_t stream);
  // Copies `bytes` back to `host` (synchronous).
  cudaError_t download(std::byte* host, size_t bytes) const;
  std::byte* data() const { return data_; }

 private:
  std::byte* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace kvf
