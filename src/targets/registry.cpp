// registry.cpp — the list of targets this build knows and construction by name.
#include <memory>
#include <string>

#include "case/errors.h"
#include "targets/target.h"

namespace kvf {

std::unique_ptr<Target> make_cuda_emu_target(const TargetOptions& options);
std::unique_ptr<Target> make_golden_target(const TargetOptions& options);  // golden_target.cpp
std::unique_ptr<Target> make_triton_interp_target(const TargetOptions& options);        // python_targets.cpp
std::unique_ptr<Target> make_triton_interp_fp8hw_target(const TargetOptions& options);
std::unique_ptr<Target> make_python_target(const std::string& argument, const TargetOptions& options);
std::unique_ptr<Target> make_python_cuda_target(const std::string& argument, const TargetOptions& options);
std::unique_ptr<Target> make_python_numpy_target(const std::string& argument, const TargetOptions& options);
std::unique_ptr<Target> make_plugin_target(const std::string& argument, const TargetOptions& options);  // plugin/plugin_target.cpp
#if defined(KVFUZZ_HAVE_CUDA)
std::unique_ptr<Target> make_cuda_target(const TargetOptions& options);
#endif
#if defined(KVFUZZ_HAVE_TRITON)
std::unique_ptr<Target> make_triton_target(const TargetOptions& options);  // triton/triton_target.cpp
#endif

namespace {

struct Entry {
  const char* name;
  std::unique_ptr<Target> (*make)(const TargetOptions&);
};

const Entry kTargets[] = {
    {"cuda-emu", &make_cuda_emu_target},
    {"golden", &make_golden_target},
#if defined(KVFUZZ_HAVE_CUDA)
    {"cuda", &make_cuda_target},
#endif
#if defined(KVFUZZ_HAVE_TRITON)
    {"triton", &make_triton_target},
#endif
    {"triton-interp", &make_triton_interp_target},
    {"triton-interp-fp8hw", &make_triton_interp_fp8hw_target},
};

// Targets named by a prefix and an argument: "plugin:PATH.so", "python:MODULE:FUNCTION". `make`
// receives what follows the prefix (never empty) and throws InputError for a malformed argument.
struct PrefixEntry {
  const char* prefix;  // including the colon
  const char* usage;   // for error messages and `kvfuzz targets`
  std::unique_ptr<Target> (*make)(const std::string& argument, const TargetOptions&);
};

const PrefixEntry kPrefixTargets[] = {
    {"plugin:", "plugin:PATH.so", &make_plugin_target},
    {"python:", "python:MODULE:FUNCTION", &make_python_target},
    {"python-cuda:", "python-cuda:MODULE:FUNCTION", &make_python_cuda_target},
    {"python-numpy:", "python-numpy:MODULE:FUNCTION", &make_python_numpy_target},
};

}  // namespace

std::vector<std::string> prefix_target_usages() {
  std::vector<std::string> out;
  for (const PrefixEntry& e : kPrefixTargets) out.emplace_back(e.usage);
  return out;
}

std::vector<TargetInfo> list_targets() {
  std::vector<TargetInfo> out;
  for (const Entry& e : kTargets) out.push_back(e.make({})->info());
  return out;
}

namespace {

std::unique_ptr<Target> make_unrecorded(const std::string& name, const TargetOptions& options) {
  std::string known;
  for (const Entry& e : kTargets) {
    if (name == e.name) return e.make(options);
    known += known.empty() ? e.name : std::string(", ") + e.name;
  }
  for (const PrefixEntry& e : kPrefixTargets) {
    const std::string prefix = e.prefix;
    if (name.compare(0, prefix.size(), prefix) == 0) {
      const std::string argument = name.substr(prefix.size());
      if (argument.empty()) throw InputError("", "", "target \"" + name + "\" needs an argument: " + e.usage);
      return e.make(argument, options);
    }
    known += std::string(", ") + e.usage;
  }
#if !defined(KVFUZZ_HAVE_CUDA)
  if (name == "cuda") throw InfraError("target cuda is not available: this kvfuzz was built without a CUDA compiler");
#endif
#if !defined(KVFUZZ_HAVE_TRITON)
  if (name == "triton")
    throw InfraError("target triton is not available: this kvfuzz was built without it (it needs CUDA and triton 3.6.0 "
                     "at build time: scripts/setup-triton.sh, then reconfigure; kernels/triton/aot.cmake)");
#endif
  throw InputError("", "", "unknown target \"" + name + "\"; known targets: " + known +
                               " (see `kvfuzz targets`)");
}

}  // namespace

std::unique_ptr<Target> make_target(const std::string& name, const TargetOptions& options) {
  std::unique_ptr<Target> target = make_unrecorded(name, options);
  target->set_spec(TargetSpec{name, options});
  return target;
}

std::unique_ptr<Target> open_target(const std::string& name, const TargetOptions& options) {
  std::unique_ptr<Target> target = make_target(name, options);
  if (const std::string why = target->unavailable_reason(); !why.empty())
    throw InfraError("target " + name + " is not available on this machine: " + why);
  return target;
}

}  // namespace kvf
