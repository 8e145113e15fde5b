// registry.cpp — the list of targets this build knows and construction by name.
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "case/case_json.h"
#include "base/errors.h"
#include "base/suggest.h"
#include "target.h"

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

std::vector<std::pair<std::string, std::string>> targets_not_built() {
  std::vector<std::pair<std::string, std::string>> out;
#if !defined(KVFUZZ_HAVE_CUDA)
  out.emplace_back("cuda", "this kvfuzz was built without a CUDA compiler");
#endif
#if !defined(KVFUZZ_HAVE_TRITON)
  out.emplace_back("triton", "this kvfuzz was built without it (it needs CUDA and triton 3.6.0 at build time: "
                             "scripts/setup-triton.sh, then reconfigure; kernels/triton/aot.cmake)");
#endif
  return out;
}

namespace {

// " (did you mean plugin:./k.so?)" for a shared object named without its prefix, " (did you mean
// python:m:f?)" for MODULE:FUNCTION, " (did you mean cuda-emu?)" for a name or prefix within 2 edits
// (cuda-emo, plugn:./k.so); else empty.
std::string target_suggestion(const std::string& name, const std::vector<std::string>& names) {
  const auto ends_with = [&](const std::string& tail) {
    return name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  const size_t colon = name.find(':');
  if (colon == std::string::npos && (ends_with(".so") || name.find(".so.") != std::string::npos))
    return " (did you mean plugin:" + name + "?)";
  if (colon != std::string::npos) {
    const std::string head = name.substr(0, colon + 1);
    if (const std::string best = nearest_name(head, names); !best.empty() && best.back() == ':')
      return " (did you mean " + best + name.substr(colon + 1) + "?)";
    if (name.find(':', colon + 1) == std::string::npos && colon > 0 && colon + 1 < name.size())
      return " (did you mean python:" + name + "?)";
    return "";
  }
  const std::string best = nearest_name(name, names);
  return best.empty() || best.back() == ':' ? "" : " (did you mean " + best + "?)";
}

std::unique_ptr<Target> make_unrecorded(const std::string& name, const TargetOptions& options) {
  std::string known;
  std::vector<std::string> names;  // what a mistyped name is compared with: the names and the prefixes
  for (const Entry& e : kTargets) {
    if (name == e.name) return e.make(options);
    known += known.empty() ? e.name : std::string(", ") + e.name;
    names.emplace_back(e.name);
  }
  for (const PrefixEntry& e : kPrefixTargets) {
    const std::string prefix = e.prefix;
    if (name.compare(0, prefix.size(), prefix) == 0) {
      const std::string argument = name.substr(prefix.size());
      if (argument.empty()) throw InputError("", "", "target \"" + name + "\" needs an argument: " + e.usage);
      return e.make(argument, options);
    }
    known += std::string(", ") + e.usage;
    names.emplace_back(e.prefix);
  }
  for (const auto& [missing, why] : targets_not_built())
    if (name == missing) throw InfraError("target " + name + " is not available: " + why);
  throw InputError("--target", "", "unknown target \"" + name + "\"" + target_suggestion(name, names) +
                                      "; known targets: " + known + " (see `kvfuzz targets`)");
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

std::filesystem::path target_file(const std::string& name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string plugin = "plugin:";
  if (name.compare(0, plugin.size(), plugin) == 0) {
    const fs::path file = name.substr(plugin.size());
    return fs::is_regular_file(file, ec) ? fs::absolute(file, ec) : fs::path();
  }
  for (const char* prefix : {"python:", "python-cuda:", "python-numpy:"}) {
    const std::string p = prefix;
    if (name.compare(0, p.size(), p) != 0) continue;
    const std::string rest = name.substr(p.size());
    const size_t colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0) return {};
    const std::string module = rest.substr(0, colon);
    if (fs::is_regular_file(module, ec)) return fs::absolute(module, ec);  // a path to a .py file
    std::string relative = module;  // an importable name: a.b -> a/b.py
    for (char& ch : relative) ch = ch == '.' ? '/' : ch;
    std::vector<fs::path> folders{fs::current_path(ec)};
    if (const char* pythonpath = std::getenv("PYTHONPATH")) {
      std::stringstream in(pythonpath);
      for (std::string folder; std::getline(in, folder, ':');)
        if (!folder.empty()) folders.emplace_back(folder);
    }
    for (const fs::path& folder : folders) {
      for (const fs::path& candidate : {folder / (relative + ".py"), folder / relative / "__init__.py"})
        if (fs::is_regular_file(candidate, ec)) return fs::absolute(candidate, ec);
    }
    return {};
  }
  return {};
}

std::string target_digest(const std::string& name) {
  const std::filesystem::path file = target_file(name);
  if (file.empty()) return "";
  std::ifstream in(file, std::ios::binary);
  if (!in) return "";
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return "fnv1a64:" + fnv1a_hex(bytes.str());
}

}  // namespace kvf
