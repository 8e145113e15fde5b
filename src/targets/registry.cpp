// registry.cpp — the list of targets this build knows and construction by name.
#include <memory>
#include <string>

#include "case/errors.h"
#include "targets/target.h"

namespace kvf {

std::unique_ptr<Target> make_cuda_emu_target();

namespace {

struct Entry {
  const char* name;
  std::unique_ptr<Target> (*make)();
};

const Entry kTargets[] = {
    {"cuda-emu", &make_cuda_emu_target},
};

}  // namespace

std::vector<TargetInfo> list_targets() {
  std::vector<TargetInfo> out;
  for (const Entry& e : kTargets) out.push_back(e.make()->info());
  return out;
}

std::unique_ptr<Target> make_target(const std::string& name) {
  std::string known;
  for (const Entry& e : kTargets) {
    if (name == e.name) return e.make();
    known += known.empty() ? e.name : std::string(", ") + e.name;
  }
  throw InputError("", "", "unknown target \"" + name + "\"; known targets: " + known +
                               " (see `kvfuzz targets`)");
}

}  // namespace kvf
