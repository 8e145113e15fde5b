// cubin_loader.h — loading the AOT cubins into the current CUDA context and launching them through
// the CUDA driver API. The driver functions are reached through the CUDA runtime's entry-point
// query (cudaGetDriverEntryPointByVersion; the runtime is linked statically and loads the driver at
// run time), never by linking libcuda, so kvfuzz starts on machines without a driver. Used only in
// the worker process and the availability probe's child (targets/cuda/cuda_status.h).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>  // PFN_cu* function types

#include <map>
#include <string>

#include "aot_manifest.h"

namespace kvf {

class CubinLoader {
 public:
  CubinLoader() = default;
  ~CubinLoader();
  CubinLoader(const CubinLoader&) = delete;
  CubinLoader& operator=(const CubinLoader&) = delete;

  // Resolves the driver functions. Returns "" or why not. Needs the runtime initialised on the
  // device whose primary context the cubins go into (cudaSetDevice).
  std::string init();

  // The entry point of `k` (its cubin image `image`), loading the module on first use.
  CUresult function(const AotKernel& k, const std::string& image, CUfunction& out);

  // Launches `f` with the plan's grid, num_warps * 32 threads, the kernel's shared memory and
  // cluster dims, on `stream`.
  CUresult launch(const AotKernel& k, CUfunction f, const AotLaunchPlan& plan, PackedArgs& args, CUstream stream);

  // "what: CUDA_ERROR_NO_BINARY_FOR_GPU (no kernel image is available ...)".
  std::string describe(CUresult r, const char* what) const;

 private:
  PFN_cuModuleLoadData_v2000 module_load_data_ = nullptr;
  PFN_cuModuleUnload_v2000 module_unload_ = nullptr;
  PFN_cuModuleGetFunction_v2000 module_get_function_ = nullptr;
  PFN_cuFuncSetAttribute_v9000 func_set_attribute_ = nullptr;
  PFN_cuLaunchKernelEx_v11060 launch_kernel_ex_ = nullptr;
  PFN_cuGetErrorName_v6000 get_error_name_ = nullptr;
  PFN_cuGetErrorString_v6000 get_error_string_ = nullptr;
  struct Loaded {
    CUmodule module = nullptr;
    CUfunction function = nullptr;
  };
  std::map<std::string, Loaded> loaded_;  // kernel name -> module and entry point
};

}  // namespace kvf
