// cuda_target.cpp — the `cuda` target: kernels/cuda/kv_append.cu on a CUDA device.
//
// The whole arena image is copied to one device allocation (grown as needed, reused across cases),
// the launcher runs on a private stream, and the image is copied back for the whole-image diff, both
// copies through a page-locked staging buffer on that stream (DeviceImage, cuda_status.h). A
// large cache (arena/windows.h) is filled on the device instead; only its windows cross the bus, and
// the rest is checked on the device with Thrust (cuda_outside_scan.cu).
// CUDA is touched only inside the worker process (campaign/isolation.h) and the availability probe
// (itself a short-lived child), never in the kvfuzz process: a sticky error (illegal address,
// misaligned address, launch failure) kills only the worker's context. The CUDA runtime is linked
// statically and loads the driver at run time, so kvfuzz starts on machines without one.
//
// Two switches from the environment, for measuring the host's share of a case (docs/targets.md):
//   KVFUZZ_CUDA_SYNC=auto|spin|yield|blocking  how the host thread waits for the device: the device
//                                               is initialised with cudaDeviceScheduleAuto / Spin /
//                                               Yield / BlockingSync (unset: the runtime's default)
//   KVFUZZ_CUDA_PIN=1                           page-lock the worker's shared arena (cudaHostRegister)
//                                               and copy it directly, without DeviceImage's staging
// Any other value is bad input (exit 2), raised when the target is opened.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "base/errors.h"
#include "kv_append_cuda.h"
#include "cuda_outside_scan.h"
#include "cuda_status.h"  // is_sticky, describe, probe_cuda_device (shared with triton)
#include "targets/target.h"

namespace kvf {

namespace {

// The environment's switches (the file comment).
struct HostSwitches {
  std::optional<unsigned int> schedule;  // KVFUZZ_CUDA_SYNC: a cudaDeviceSchedule* flag; none: unset
  bool pin = false;                      // KVFUZZ_CUDA_PIN=1
};

// $name's value; nullopt when unset or empty.
std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

// Throws InputError naming the variable, its value and the values it takes.
HostSwitches host_switches() {
  HostSwitches s;
  if (const std::optional<std::string> v = env("KVFUZZ_CUDA_SYNC")) {
    if (*v == "auto") s.schedule = cudaDeviceScheduleAuto;
    else if (*v == "spin") s.schedule = cudaDeviceScheduleSpin;
    else if (*v == "yield") s.schedule = cudaDeviceScheduleYield;
    else if (*v == "blocking") s.schedule = cudaDeviceScheduleBlockingSync;
    else
      throw InputError("$KVFUZZ_CUDA_SYNC", "",
                       "\"" + *v + "\" is not a way to wait for the device; expected auto, spin, yield or blocking (or leave it unset)");
  }
  if (const std::optional<std::string> v = env("KVFUZZ_CUDA_PIN")) {
    if (*v != "0" && *v != "1")
      throw InputError("$KVFUZZ_CUDA_PIN", "", "\"" + *v + "\" is neither 0 nor 1 (1: page-lock the arena image)");
    s.pin = *v == "1";
  }
  return s;
}

class CudaTarget final : public Target {
 public:
  CudaTarget(int device, bool in_worker) : device_(device), in_worker_(in_worker) {
    // A bad switch must not break `kvfuzz targets`: it is raised when the target is opened.
    try {
      switches_ = host_switches();
    } catch (const InputError& e) {
      switch_error_ = e;
    }
    info_ = TargetInfo{
        "cuda",
        "kernels/cuda/kv_append.cu on CUDA device " + std::to_string(device) + " (run in a worker process)",
        "all layouts (any strides; vllm_legacy element by element), every family (kv, kv_split, k_only, mla), f16/bf16/f32 inputs, f16/bf16/f32/fp8_e4m3/fp8_e5m2/int8 caches with "
        "per-tensor, per-head, per-block and per-token-head scales, the quantised formats nvfp4, mxfp8_e4m3, mxfp8_e5m2, mxfp4, ds_mla, "
        "indexer_k, fp8_inline and int8_inline under every convention of theirs (not asym_int8, asym_int4), i32/i64 slots, any H and D",
        "exact",
        true,
        "exact",
        30,
        cuda_kernel_capabilities(),
    };
  }

  // Releases what prepare() and pin() made (a campaign thread's target, with --no-fork; the device
  // image releases its own); a worker exits without. After a sticky error these calls fail, harmlessly.
  ~CudaTarget() override {
    if (!initialised_) return;
    unpin();
    cudaStreamDestroy(stream_);
  }
  CudaTarget(const CudaTarget&) = delete;
  CudaTarget& operator=(const CudaTarget&) = delete;

  const TargetInfo& info() const override { return info_; }

  std::string unavailable_reason() const override {
    if (switch_error_) throw *switch_error_;  // bad input (exit 2), also on a machine without a device
    return probe_cuda_device(device_);
  }

  // The device's context is created here, before the worker's first case (isolation.h).
  std::string start() override {
    if (switch_error_) return switch_error_->what();
    return prepare().message;
  }

  RunResult run(const Case& c, std::byte* image, const ArenaLayout& layout) override {
    const size_t bytes = static_cast<size_t>(layout.total_bytes);
    if (RunResult r = prepare(); r.status != RunStatus::ok) return r;
    pin(image, bytes);
    // KVFUZZ_CUDA_PIN=1: the image is page-locked, copied directly
    if (cudaError_t e = device_image_.upload(image, bytes, stream_, pinned_ != nullptr); e != cudaSuccess)
      return fault(e, "copying the arena to the device");
    if (RunResult r = launch(c, device_image_.data(), layout); r.status != RunStatus::ok) return r;
    // A kernel's fault surfaces here too: the copy back is queued behind it.
    if (cudaError_t e = device_image_.download(image, bytes, stream_); e != cudaSuccess)
      return fault(e, "kernel execution and the copy back");
    return {};
  }

  // A large cache (arena/windows.h): the whole image lives on the device; only the windows cross
  // the bus, and the rest of the cache is filled and checked there with Thrust (cuda_outside_scan.h).
  RunResult run_windowed(const Case& c, std::byte* image, const ArenaLayout& layout, const WindowPlan& plan,
                         OutsideDiff& outside) override {
    if (RunResult r = prepare(); r.status != RunStatus::ok) return r;
    if (cudaError_t e = device_image_.reserve(static_cast<size_t>(layout.total_bytes)); e != cudaSuccess)
      return {RunStatus::launch_error, describe(e, "cudaMalloc of the arena")};
    // The parent releases a windowed image's cache pages after the run (isolation.cpp), which would
    // leave registered pages that are no longer the shared file's: nothing stays pinned here.
    unpin();
    std::byte* device = device_image_.data();
    auto* cache = reinterpret_cast<unsigned char*>(device + layout.cache_begin);
    const int64_t elems = layout.cache_bytes / plan.fill.elem_size;
    if (cudaError_t e = fill_cache_on_device(cache, plan.fill, elems, stream_); e != cudaSuccess) return fault(e, "filling the cache");
    for (const ByteRange& r : plan.ranges)
      if (cudaError_t e = cudaMemcpyAsync(device + r.begin, image + r.begin, static_cast<size_t>(r.size()), cudaMemcpyHostToDevice, stream_);
          e != cudaSuccess)
        return fault(e, "copying the windows to the device");
    if (RunResult r = launch(c, device, layout); r.status != RunStatus::ok) return r;
    if (cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess) return fault(e, "kernel execution");
    for (const ByteRange& r : plan.ranges)
      if (cudaError_t e = cudaMemcpyAsync(image + r.begin, device + r.begin, static_cast<size_t>(r.size()), cudaMemcpyDeviceToHost, stream_);
          e != cudaSuccess)
        return fault(e, "copying the windows back");
    if (cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess) return fault(e, "copying the windows back");
    if (cudaError_t e = scan_outside_on_device(cache, plan.fill, cache_windows(plan, layout), elems, stream_, outside); e != cudaSuccess)
      return fault(e, "checking the cache outside the windows");
    return {};
  }

 private:
  // The case's calls on the device image, in order on the stream: one per rank (one for a case
  // without shards), each rank of a context-parallel case with input slot_mapping after the
  // kernel's slot-mapping producer has made its slot_mapping.
  RunResult launch(const Case& c, std::byte* device, const ArenaLayout& layout) {
    for (int64_t rank = 0; rank < c.num_ranks(); ++rank) {
      if (c.cp_input == CpInput::slot_mapping)
        if (cudaError_t e = cp_slot_mapping_cuda(cp_producer_params(c, device, layout, rank), stream_); e != cudaSuccess)
          return fault(e, "cp_slot_mapping_cuda launch");
      if (cudaError_t e = kv_append_cuda(append_params(c, device, layout, rank), stream_); e != cudaSuccess)
        return fault(e, "kv_append_cuda launch");
    }
    return {};
  }

  // KVFUZZ_CUDA_PIN=1, in a worker: page-locks the image's pages, once, and again when a larger
  // image needs more. The image is the worker's shared mapping, at one address for every case (in
  // process each case's image is a new allocation, so nothing is pinned there). A registration the
  // driver refuses is said once on stderr and the copies stay pageable: slower, never wrong.
  void pin(std::byte* image, size_t bytes) {
    if (!switches_.pin || !in_worker_ || pin_failed_ || (image == pinned_ && bytes <= pinned_bytes_)) return;
    unpin();
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t span = (bytes + page - 1) / page * page;  // the worker maps whole pages
    if (cudaError_t e = cudaHostRegister(image, span, cudaHostRegisterDefault); e != cudaSuccess) {
      cudaGetLastError();  // not sticky; clear it
      pin_failed_ = true;
      std::fprintf(stderr, "kvfuzz: KVFUZZ_CUDA_PIN=1: %s; the arena copies stay pageable in this worker\n",
                   describe(e, "cudaHostRegister of the arena").c_str());
      return;
    }
    pinned_ = image;
    pinned_bytes_ = span;
  }

  void unpin() {
    if (pinned_ == nullptr) return;
    cudaHostUnregister(pinned_);
    cudaGetLastError();
    pinned_ = nullptr;
    pinned_bytes_ = 0;
  }

  // Selects the device and creates the stream (once per target). KVFUZZ_CUDA_SYNC initialises
  // the device with its schedule flag first.
  RunResult prepare() {
    if (initialised_) return {};
    if (switches_.schedule)
      if (cudaError_t e = cudaInitDevice(device_, *switches_.schedule, cudaInitDeviceFlagsAreValid); e != cudaSuccess)
        return fault(e, "cudaInitDevice with the schedule of KVFUZZ_CUDA_SYNC");
    if (cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) return fault(e, "cudaSetDevice");
    if (cudaError_t e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking); e != cudaSuccess)
      return fault(e, "cudaStreamCreate");
    initialised_ = true;
    return {};
  }

  RunResult fault(cudaError_t e, const char* what) {
    if (is_sticky(e)) return {RunStatus::device_fault, describe(e, what)};
    cudaGetLastError();  // clear a non-sticky error so the next case starts clean
    return {RunStatus::launch_error, describe(e, what)};
  }

  int device_;
  bool in_worker_;  // made in a worker process: the image is the shared mapping (pin())
  HostSwitches switches_;
  std::optional<InputError> switch_error_;
  TargetInfo info_;
  bool initialised_ = false;
  std::byte* pinned_ = nullptr;  // the registered range (KVFUZZ_CUDA_PIN=1), or none
  size_t pinned_bytes_ = 0;
  bool pin_failed_ = false;
  cudaStream_t stream_ = nullptr;
  DeviceImage device_image_;  // the arena on the device, and its staging buffer
};

}  // namespace

std::unique_ptr<Target> make_cuda_target(const TargetOptions& options) {
  return std::make_unique<CudaTarget>(options.device, options.in_worker);
}

}  // namespace kvf
