// cuda_target.cpp — the `cuda` target: kernels/cuda/kv_append.cu on a CUDA device.
//
// The whole arena image is copied to one device allocation (grown as needed, reused across cases),
// the launcher runs on a private stream, and the image is copied back for the whole-image diff.
// CUDA is touched only inside the worker process (campaign/isolation.h) and the availability probe
// (itself a short-lived child), never in the kvfuzz process: a sticky error (illegal address,
// misaligned address, launch failure) kills only the worker's context. The CUDA runtime is linked
// statically and loads the driver at run time, so kvfuzz starts on machines without one.
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "case/errors.h"
#include "kv_append_cuda.h"
#include "targets/target.h"

namespace kvf {

namespace {

// Errors after which the context is unusable (driver_types.h: "the process must be terminated").
bool is_sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorMisalignedAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

std::string describe(cudaError_t e, const char* what) {
  return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

class CudaTarget final : public Target {
 public:
  explicit CudaTarget(int device) : device_(device) {
    info_ = TargetInfo{
        "cuda",
        "kernels/cuda/kv_append.cu on CUDA device " + std::to_string(device) + " (run in a worker process)",
        "all layouts (any strides), f16/bf16/f32 inputs, f16/bf16/f32/fp8_e4m3/fp8_e5m2/int8 caches with "
        "per-tensor, per-head, per-block and per-token-head scales, i32/i64 slots, any H and D",
        "exact",
        true,
    };
  }

  const TargetInfo& info() const override { return info_; }

  std::string unavailable_reason() const override {
    // Probe in a child so that the kvfuzz process never initialises CUDA (it forks workers).
    int fds[2];
    if (pipe(fds) != 0) return "cannot create a pipe to probe for CUDA devices";
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) return "cannot fork to probe for CUDA devices";
    if (pid == 0) {
      close(fds[0]);
      int count = 0;
      const cudaError_t e = cudaGetDeviceCount(&count);
      std::string msg;
      if (e != cudaSuccess) msg = describe(e, "cudaGetDeviceCount") + "; is an NVIDIA driver installed?";
      else if (device_ >= count) msg = "device " + std::to_string(device_) + " requested but " + std::to_string(count) + " CUDA device(s) present";
      if (write(fds[1], msg.data(), msg.size()) < 0) _exit(2);
      _exit(0);
    }
    close(fds[1]);
    std::string msg;
    char buf[512];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(n));
    close(fds[0]);
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) return "the CUDA probe process died; no usable CUDA driver";
    return msg;
  }

  RunResult run(const Case& c, std::byte* image, const ArenaLayout& layout) override {
    if (!initialised_) {
      if (cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) return fault(e, "cudaSetDevice");
      if (cudaError_t e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking); e != cudaSuccess)
        return fault(e, "cudaStreamCreate");
      initialised_ = true;
    }
    const size_t bytes = static_cast<size_t>(layout.total_bytes);
    if (bytes > capacity_) {
      if (device_image_ != nullptr) cudaFree(device_image_);
      device_image_ = nullptr;
      capacity_ = 0;
      if (cudaError_t e = cudaMalloc(&device_image_, bytes); e != cudaSuccess)
        return {RunStatus::launch_error, describe(e, "cudaMalloc of the arena")};
      capacity_ = bytes;
    }
    if (cudaError_t e = cudaMemcpyAsync(device_image_, image, bytes, cudaMemcpyHostToDevice, stream_); e != cudaSuccess)
      return fault(e, "copying the arena to the device");
    const KvAppendParams p = append_params(c, static_cast<std::byte*>(device_image_), layout);
    if (cudaError_t e = kv_append_cuda(p, stream_); e != cudaSuccess) return fault(e, "kv_append_cuda launch");
    if (cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess) return fault(e, "kernel execution");
    if (cudaError_t e = cudaMemcpy(image, device_image_, bytes, cudaMemcpyDeviceToHost); e != cudaSuccess)
      return fault(e, "copying the arena back");
    return {};
  }

 private:
  RunResult fault(cudaError_t e, const char* what) {
    if (is_sticky(e)) return {RunStatus::device_fault, describe(e, what)};
    cudaGetLastError();  // clear a non-sticky error so the next case starts clean
    return {RunStatus::launch_error, describe(e, what)};
  }

  int device_;
  TargetInfo info_;
  bool initialised_ = false;
  cudaStream_t stream_ = nullptr;
  void* device_image_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace

std::unique_ptr<Target> make_cuda_target(const TargetOptions& options) {
  return std::make_unique<CudaTarget>(options.device);
}

}  // namespace kvf
