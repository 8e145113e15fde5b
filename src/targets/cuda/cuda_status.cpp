// cuda_status.cpp — sticky-error classification, descriptions, the child-process device probe and
// the device arena image shared by the cuda and triton targets.
#include "cuda_status.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace kvf {

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

bool is_sticky(CUresult r) {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_UNKNOWN:
      return true;
    default:
      return false;
  }
}

std::string describe(cudaError_t e, const char* what) {
  return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

std::string probe_cuda_device(int device, const std::function<std::string()>& extra) {
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
    else if (device >= count) msg = "device " + std::to_string(device) + " requested but " + std::to_string(count) + " CUDA device(s) present";
    else if (extra) msg = extra();
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

DeviceImage::~DeviceImage() {
  if (data_ != nullptr) cudaFree(data_);
  if (staging_ != nullptr) cudaFreeHost(staging_);
}

cudaError_t DeviceImage::reserve(size_t bytes) {
  if (bytes <= capacity_) return cudaSuccess;
  if (data_ != nullptr) cudaFree(data_);
  data_ = nullptr;
  capacity_ = 0;
  if (cudaError_t e = cudaMalloc(&data_, bytes); e != cudaSuccess) return e;
  capacity_ = bytes;
  return cudaSuccess;
}

std::byte* DeviceImage::staging(size_t bytes) {
  if (bytes <= staging_bytes_) return staging_;
  if (staging_refused_ || bytes > kMaxStagingBytes) return nullptr;
  if (staging_ != nullptr) cudaFreeHost(staging_);
  staging_ = nullptr;
  staging_bytes_ = 0;
  void* p = nullptr;
  if (cudaError_t e = cudaMallocHost(&p, bytes); e != cudaSuccess) {
    cudaGetLastError();  // not sticky; clear it
    staging_refused_ = true;
    std::fprintf(stderr, "kvfuzz: %s; the arena copies stay pageable\n", describe(e, "cudaMallocHost of the staging buffer").c_str());
    return nullptr;
  }
  staging_ = static_cast<std::byte*>(p);
  staging_bytes_ = bytes;
  return staging_;
}

cudaError_t DeviceImage::upload(const std::byte* host, size_t bytes, cudaStream_t stream, bool host_pinned) {
  if (cudaError_t e = reserve(bytes); e != cudaSuccess) return e;
  // A case that stopped between its upload and its download may still be reading the staging buffer.
  if (in_flight_)
    if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) return e;
  staged_ = host_pinned ? nullptr : staging(bytes);
  if (staged_ != nullptr) std::memcpy(staged_, host, bytes);
  in_flight_ = true;
  return cudaMemcpyAsync(data_, staged_ != nullptr ? staged_ : host, bytes, cudaMemcpyHostToDevice, stream);
}

cudaError_t DeviceImage::download(std::byte* host, size_t bytes, cudaStream_t stream) {
  if (cudaError_t e = cudaMemcpyAsync(staged_ != nullptr ? staged_ : host, data_, bytes, cudaMemcpyDeviceToHost, stream); e != cudaSuccess)
    return e;
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) return e;
  in_flight_ = false;
  if (staged_ != nullptr) std::memcpy(host, staged_, bytes);
  return cudaSuccess;
}

}  // namespace kvf
