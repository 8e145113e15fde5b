// registry.cpp — the list of targets this build knows and construction by name.
#include <memory>
#include <string>

#include "case/errors.h"
#include "targets/target.h"

namespace kvf {

std::unique_ptr<Target> make_cuda_emu_target(const TargetOptions& options);
#if defined(KVFUZZ_HAVE_CUDA)
std::unique_ptr<Target> make_cuda_target(const TargetOptions& options);
#endif

namespace {

struct Entry {
  const char* name;
  std::unique_ptr<Target> (*make)(const TargetOptions&);
};

const Entry kTargets[] = {
    {"cuda-emu", &make_cuda_emu_target},
#if defined(KVFUZZ_HAVE_CUDA)
    {"cuda", &make_cuda_target},
#endif
};

// Targets named by a prefix and an argument: "plugin:PATH.so", "python:MODULE:FUNCTION". `make`
// receives what follows the prefix (never empty) and throws InputError for a malformed argument.
struct PrefixEntry {
  const char* prefix;  // including the colon
  const char* usage;   // for error messages and `kvfuzz targets`
  std::unique_ptr<Target> (*make)(const std::string& argument, const TargetOptions&);
};

const PrefixEntry kPrefixTargets[] = {
    {nullptr, nullptr, nullptr},  // placeholder so the array is never empty; skipped below
};

}  // namespace

std::vector<TargetInfo> list_targets() {
  std::vector<TargetInfo> out;
  for (const Entry& e : kTargets) out.push_back(e.make({})->info());
  return out;
}

std::unique_ptr<Target> make_target(const std::string& name, const TargetOptions& options) {
  std::string known;
  for (const Entry& e : kTargets) {
    if (name == e.name) return e.make(options);
    known += known.empty() ? e.name : std::string(", ") + e.name;
  }
  for (const PrefixEntry& e : kPrefixTargets) {
    if (e.prefix == nullptr) continue;
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
  throw InputError("", "", "unknown target \"" + name + "\"; known targets: " + known +
                               " (see `kvfuzz targets`)");
}

std::unique_ptr<Target> open_target(const std::string& name, const TargetOptions& options) {
  std::unique_ptr<Target> target = make_target(name, options);
  if (const std::string why = target->unavailable_reason(); !why.empty())
    throw InfraError("target " + name + " is not available on this machine: " + why);
  return target;
}

}  // namespace kvf
