// triton_target.cpp — the `triton` target: kernels/triton's kv_append_kernel, compiled ahead of time
// to sm_90a cubins (kernels/triton/aot_compile.py, at build time), launched on a CUDA device.
//
// Like the cuda target it runs in the worker process: the same arena image is copied to the device,
// the same KvAppendParams (append_params) become the kernel's arguments, packed in the order
// manifest.json lists them (aot_manifest.h), and the image is copied back for the whole-image diff,
// so a case gives byte-identical arenas on triton and cuda. A context-parallel case runs one call
// per rank, each after the Triton slot-mapping producer (also compiled ahead of time) has made the
// rank's slot_mapping where the case's input is slot_mapping. No Python runs. The cubins built into
// the binary are used unless KVFUZZ_TRITON_KERNELS names an aot_compile.py --out-dir (a rewritten
// kernel, say).
#include <cuda_runtime.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "base/errors.h"
#include "targets/cuda/cuda_status.h"
#include "targets/target.h"
#include "aot_manifest.h"
#include "cubin_loader.h"

namespace kvf {
namespace {

constexpr const char* kKernelsEnv = "KVFUZZ_TRITON_KERNELS";

// The kernel set to run: $KVFUZZ_TRITON_KERNELS's directory, or the one built into the binary.
AotKernelSet load_kernel_set() {
  const char* dir = std::getenv(kKernelsEnv);
  if (dir != nullptr && *dir != '\0') return kernel_set_from_directory(dir);
  return kernel_set_from_files(embedded_triton_files(), "kvfuzz's built-in Triton kernels");
}

class TritonTarget final : public Target {
 public:
  explicit TritonTarget(int device) : device_(device) {
    // A bad kernel directory must not break `kvfuzz targets`: the error is raised when the target
    // is opened (unavailable_reason).
    try {
      set_ = load_kernel_set();
    } catch (const InputError& e) {
      load_error_ = e;
    }
    const AotManifest& m = set_.manifest;
    const char* dir = std::getenv(kKernelsEnv);
    const std::string source = dir != nullptr && *dir != '\0' ? std::string(", from $") + kKernelsEnv + "=" + dir : "";
    info_ = TargetInfo{
        "triton",
        load_error_ ? "kernels/triton compiled ahead of time; unusable: " + std::string(load_error_->what())
                    : "kernels/triton/kvfuzz_triton/kv_append.py compiled ahead of time (triton " + m.triton_version +
                          ", " + std::to_string(m.kernels.size() + m.format_kernels.size()) + " cubins for sm_" +
                          std::to_string(m.compute_capability) + "a" + source +
                          "), launched through the CUDA driver API on device " + std::to_string(device) +
                          " (run in a worker process)",
        load_error_ ? std::string() : supported(m),
        "exact",
        true,
    };
  }

  const TargetInfo& info() const override { return info_; }

  std::string unavailable_reason() const override {
    if (load_error_) throw *load_error_;  // bad input (exit 2), not a missing device
    // In the probe's child: the device must be the cubins' compute capability, and the driver must
    // have the entry points and accept one of the images.
    return probe_cuda_device(device_, [this]() -> std::string {
      cudaDeviceProp prop{};
      if (cudaError_t e = cudaGetDeviceProperties(&prop, device_); e != cudaSuccess)
        return describe(e, "cudaGetDeviceProperties");
      const int cc = prop.major * 10 + prop.minor;
      if (cc != set_.manifest.compute_capability)
        return "the Triton cubins are built for sm_" + std::to_string(set_.manifest.compute_capability) +
               "a, device " + std::to_string(device_) + " (" + prop.name + ") is sm_" + std::to_string(cc);
      if (set_.manifest.kernels.empty()) return "the Triton kernel manifest " + set_.manifest.origin + " lists no kernels";
      if (cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) return describe(e, "cudaSetDevice");
      CubinLoader loader;
      if (std::string why = loader.init(); !why.empty()) return why;
      const AotKernel& k = set_.manifest.kernels.front();
      CUfunction f = nullptr;
      if (CUresult r = loader.function(k, set_.cubins.at(k.cubin), f); r != CUDA_SUCCESS)
        return loader.describe(r, ("loading " + k.cubin).c_str());
      return "";
    });
  }

  // The device's context, the stream and every cubin's module, before the worker's first case
  // (isolation.h): no launch's timeout includes module loading.
  std::string start() override { return initialise().message; }

  RunResult run(const Case& c, std::byte* image, const ArenaLayout& layout) override {
    if (RunResult r = initialise(); r.status != RunStatus::ok) return r;
    const size_t bytes = static_cast<size_t>(layout.total_bytes);
    if (cudaError_t e = device_image_.upload(image, bytes, stream_); e != cudaSuccess)
      return fault(e, "copying the arena to the device");
    for (int64_t rank = 0; rank < c.num_ranks(); ++rank) {
      if (c.cp_input == CpInput::slot_mapping)
        if (RunResult r = launch_producer(cp_producer_params(c, device_image_.data(), layout, rank)); r.status != RunStatus::ok)
          return r;
      if (RunResult r = launch(append_params(c, device_image_.data(), layout, rank)); r.status != RunStatus::ok) return r;
    }
    // A kernel's fault surfaces here too: the copy back is queued behind it.
    if (cudaError_t e = device_image_.download(image, bytes, stream_); e != cudaSuccess) return fault(e, "kernel execution and the copy back");
    return {};
  }

 private:
  RunResult initialise() {
    if (initialised_) return {};
    if (cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) return fault(e, "cudaSetDevice");
    if (cudaError_t e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking); e != cudaSuccess)
      return fault(e, "cudaStreamCreate");
    if (std::string why = loader_.init(); !why.empty()) return {RunStatus::launch_error, why};
    std::vector<const AotKernel*> all;
    for (const AotKernel& k : set_.manifest.kernels) all.push_back(&k);
    for (const AotKernel& k : set_.manifest.format_kernels) all.push_back(&k);
    all.push_back(&set_.manifest.cp_slot_mapping);
    for (const AotKernel* k : all) {
      CUfunction f = nullptr;
      if (CUresult r = loader_.function(*k, set_.cubins.at(k->cubin), f); r != CUDA_SUCCESS)
        return fault(r, ("loading " + k->cubin).c_str());
    }
    initialised_ = true;
    return {};
  }

  // Launches the slot-mapping producer for p (nothing for T = 0).
  RunResult launch_producer(const CpSlotMappingParams& p) {
    const AotKernel& k = set_.manifest.cp_slot_mapping;
    AotLaunchPlan plan;
    if (std::string why = plan_cp_slot_mapping(k, p, plan); !why.empty()) return {RunStatus::launch_error, why};
    if (plan.grid[0] == 0) return {};  // no rows: never launch an empty grid
    PackedArgs args;
    if (std::string why = pack_cp_arguments(k, p, args); !why.empty()) return {RunStatus::launch_error, why};
    CUfunction f = nullptr;
    if (CUresult r = loader_.function(k, set_.cubins.at(k.cubin), f); r != CUDA_SUCCESS)
      return fault(r, ("loading " + k.cubin).c_str());
    if (CUresult r = loader_.launch(k, f, plan, args, stream_); r != CUDA_SUCCESS) return fault(r, ("launching " + k.name).c_str());
    return {};
  }

  // A quantised format's call: the format kernel for p's input dtype, format and slot dtype.
  RunResult launch_format(const KvAppendParams& p) {
    const QuantFormat format = p.quant_format;
    const AotKernel* k = find_format_kernel(set_.manifest, p.input_dtype, format, p.slot_type);
    if (k == nullptr)
      return {RunStatus::launch_error, "no Triton format kernel for " + std::string(to_string(p.input_dtype)) + " -> " +
                                           std::string(to_string(format)) + " with " +
                                           std::string(to_string(p.slot_type)) + " slots in " + set_.manifest.origin};
    AotLaunchPlan plan;
    if (std::string why = plan_format_launch(p, plan); !why.empty()) return {RunStatus::launch_error, why};
    if (plan.grid[0] == 0) return {};  // nothing to write: never launch an empty grid
    PackedArgs args;
    if (std::string why = pack_format_arguments(*k, p, args); !why.empty()) return {RunStatus::launch_error, why};
    return load_and_launch(*k, plan, args);
  }

  // Launches kernel k (its module loaded on first use) with the plan and the packed arguments on the stream.
  RunResult load_and_launch(const AotKernel& k, const AotLaunchPlan& plan, PackedArgs& args) {
    CUfunction f = nullptr;
    if (CUresult r = loader_.function(k, set_.cubins.at(k.cubin), f); r != CUDA_SUCCESS)
      return fault(r, ("loading " + k.cubin).c_str());
    if (CUresult r = loader_.launch(k, f, plan, args, stream_); r != CUDA_SUCCESS)
      return fault(r, ("launching " + k.name).c_str());
    return {};
  }

  // Selects the kernel for p's dtypes, packs its arguments and launches it (nothing for T = 0).
  RunResult launch(const KvAppendParams& p) {
    if (p.quant_format != QuantFormat::none) return launch_format(p);
    const AotKernel* k = find_kernel(set_.manifest, p.input_dtype, p.cache_dtype, p.slot_type);
    if (k == nullptr)
      return {RunStatus::launch_error, "no Triton kernel for " + std::string(to_string(p.input_dtype)) + " -> " +
                                           std::string(to_string(p.cache_dtype)) + " with " +
                                           std::string(to_string(p.slot_type)) + " slots in " + set_.manifest.origin};
    AotLaunchPlan plan;
    if (std::string why = plan_launch(set_.manifest, p, plan); !why.empty()) return {RunStatus::launch_error, why};
    if (plan.grid[0] == 0) return {};  // no slot entries: never launch an empty grid
    PackedArgs args;
    if (std::string why = pack_arguments(*k, p, plan, args); !why.empty()) return {RunStatus::launch_error, why};
    return load_and_launch(*k, plan, args);
  }

  static std::string supported(const AotManifest& m) {
    std::string combos;
    for (DType in : {DType::f16, DType::bf16, DType::f32})
      for (DType cache : {DType::f16, DType::bf16, DType::f32, DType::fp8_e4m3, DType::fp8_e5m2, DType::int8})
        for (IndexType slot : {IndexType::i32, IndexType::i64})
          if (find_kernel(m, in, cache, slot) == nullptr)
            combos += std::string(combos.empty() ? "" : ", ") + std::string(to_string(in)) + "->" +
                      std::string(to_string(cache)) + "/" + std::string(to_string(slot));
    return "every layout (any strides; vllm_legacy through per-field strides), every family (kv, kv_split, k_only, mla), f16/bf16/f32 inputs, "
           "f16/bf16/f32/fp8_e4m3/fp8_e5m2/int8 caches with "
           "per-tensor, per-head, per-block and per-token-head scales, i32/i64 slots, any H and D (one " +
           std::to_string(m.block_h) + "x" + std::to_string(m.block_d) + " tile looped over heads and dims), "
           "context-parallel shards (one call per rank; input slot_mapping from the Triton slot-mapping producer, "
           "input positions filtered in the kernel), every quantised format (nvfp4, mxfp8_e4m3/e5m2, mxfp4, ds_mla, "
           "indexer_k, fp8_inline, int8_inline, asym_int8, asym_int4) under every convention (" +
           std::to_string(m.format_kernels.size()) + " format cubins)" +
           (combos.empty() ? std::string() : "; missing from " + m.origin + ": " + combos);
  }

  RunResult fault(cudaError_t e, const char* what) {
    if (is_sticky(e)) return {RunStatus::device_fault, describe(e, what)};
    cudaGetLastError();  // clear a non-sticky error so the next case starts clean
    return {RunStatus::launch_error, describe(e, what)};
  }
  RunResult fault(CUresult r, const char* what) {
    return {is_sticky(r) ? RunStatus::device_fault : RunStatus::launch_error, loader_.describe(r, what)};
  }

  int device_;
  AotKernelSet set_;
  std::optional<InputError> load_error_;  // why the kernel set could not be read
  TargetInfo info_;
  bool initialised_ = false;
  cudaStream_t stream_ = nullptr;
  DeviceImage device_image_;
  CubinLoader loader_;
};

}  // namespace

std::unique_ptr<Target> make_triton_target(const TargetOptions& options) {
  return std::make_unique<TritonTarget>(options.device);
}

}  // namespace kvf
