// cubin_loader.cpp — driver entry points, lazy module loading and cuLaunchKernelEx.
#include "cubin_loader.h"

#include <cuda_runtime.h>


namespace kvf {
namespace {

// The driver ABI version the function types above belong to (every one exists since CUDA 12.0).
constexpr unsigned kDriverApiVersion = 12000;

template <typename Fn>
std::string resolve(const char* symbol, Fn& out) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e = cudaGetDriverEntryPointByVersion(symbol, &fn, kDriverApiVersion, cudaEnableDefault, &found);
  if (e != cudaSuccess) return std::string("cudaGetDriverEntryPointByVersion(") + symbol + "): " + cudaGetErrorName(e);
  if (found != cudaDriverEntryPointSuccess || fn == nullptr)
    return std::string("the CUDA driver has no ") + symbol + " (version " + std::to_string(kDriverApiVersion) + ")";
  out = reinterpret_cast<Fn>(fn);
  return "";
}

}  // namespace

CubinLoader::~CubinLoader() {
  // Only in a process that initialised CUDA (the worker); the kvfuzz process never did.
  if (module_unload_ != nullptr)
    for (auto& [name, l] : loaded_) module_unload_(l.module);
}

std::string CubinLoader::init() {
  if (module_load_data_ != nullptr) return "";
  std::string why;
  if (why.empty()) why = resolve("cuGetErrorName", get_error_name_);
  if (why.empty()) why = resolve("cuGetErrorString", get_error_string_);
  if (why.empty()) why = resolve("cuModuleGetFunction", module_get_function_);
  if (why.empty()) why = resolve("cuModuleUnload", module_unload_);
  if (why.empty()) why = resolve("cuFuncSetAttribute", func_set_attribute_);
  if (why.empty()) why = resolve("cuLaunchKernelEx", launch_kernel_ex_);
  if (why.empty()) why = resolve("cuModuleLoadData", module_load_data_);  // last: init() is done once it is set
  if (!why.empty()) module_load_data_ = nullptr;
  return why;
}

CUresult CubinLoader::function(const AotKernel& k, const std::string& image, CUfunction& out) {
  if (auto it = loaded_.find(k.name); it != loaded_.end()) {
    out = it->second.function;
    return CUDA_SUCCESS;
  }
  Loaded l;
  if (CUresult r = module_load_data_(&l.module, image.data()); r != CUDA_SUCCESS) return r;
  CUresult r = module_get_function_(&l.function, l.module, k.function.c_str());
  if (r == CUDA_SUCCESS && k.shared_bytes > 48 * 1024)  // above the default limit: opt in
    r = func_set_attribute_(l.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k.shared_bytes);
  if (r != CUDA_SUCCESS) {
    module_unload_(l.module);
    return r;
  }
  loaded_[k.name] = l;
  out = l.function;
  return CUDA_SUCCESS;
}

CUresult CubinLoader::launch(const AotKernel& k, CUfunction f, const AotLaunchPlan& plan, PackedArgs& args,
                             CUstream stream) {
  CUlaunchConfig config{};
  // Triton's own launcher multiplies x by the cluster size (third_party/nvidia/backend/driver.py).
  config.gridDimX = plan.grid[0] * static_cast<unsigned>(k.cluster_dims[0]);
  config.gridDimY = plan.grid[1];
  config.gridDimZ = plan.grid[2];
  config.blockDimX = static_cast<unsigned>(k.num_warps * 32);
  config.blockDimY = 1;
  config.blockDimZ = 1;
  config.sharedMemBytes = static_cast<unsigned>(k.shared_bytes);
  config.hStream = stream;
  CUlaunchAttribute cluster{};
  if (k.cluster_dims != std::array<int, 3>{1, 1, 1}) {
    cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    cluster.value.clusterDim.x = static_cast<unsigned>(k.cluster_dims[0]);
    cluster.value.clusterDim.y = static_cast<unsigned>(k.cluster_dims[1]);
    cluster.value.clusterDim.z = static_cast<unsigned>(k.cluster_dims[2]);
    config.attrs = &cluster;
    config.numAttrs = 1;
  }
  return launch_kernel_ex_(&config, f, args.pointers.data(), nullptr);
}

std::string CubinLoader::describe(CUresult r, const char* what) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (get_error_name_ != nullptr) get_error_name_(r, &name);
  if (get_error_string_ != nullptr) get_error_string_(r, &text);
  return std::string(what) + ": " + (name != nullptr ? name : "CUresult " + std::to_string(static_cast<int>(r))) +
         (text != nullptr ? std::string(" (") + text + ")" : std::string());
}

}  // namespace kvf
