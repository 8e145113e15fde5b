// mutant_catalogue.cpp — see mutant_catalogue.h.
#include "mutant_catalogue.h"

#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/errors.h"

namespace kvf {

namespace fs = std::filesystem;

const char* to_string(MutantKernel k) { return k == MutantKernel::cuda ? "cuda" : "triton"; }

namespace {

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(file.string(), "", "cannot be read");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A required string member of `obj` at JSON path `path`.
std::string get_string(const nlohmann::json& obj, const char* key, const fs::path& file, const std::string& path,
                       bool required = true) {
  if (!obj.contains(key)) {
    if (required) throw InputError(file.string(), path, std::string("missing \"") + key + "\" (a string)");
    return "";
  }
  if (!obj[key].is_string()) throw InputError(file.string(), path + "/" + key, "expected a string");
  return obj[key].get<std::string>();
}

size_t count_occurrences(const std::string& text, const std::string& what) {
  if (what.empty()) return 0;
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

MutantCatalogue read_mutant_catalogue(const fs::path& file) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text(file));
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(file.string(), "", std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object() || j.value("schema", "") != "kvfuzz-mutants")
    throw InputError(file.string(), "/schema", "expected \"kvfuzz-mutants\" (a mutant catalogue)");
  if (!j.contains("mutants") || !j["mutants"].is_array()) throw InputError(file.string(), "/mutants", "expected an array of rules");

  MutantCatalogue cat;
  cat.file = file;
  std::set<std::string> names;
  for (size_t i = 0; i < j["mutants"].size(); ++i) {
    const nlohmann::json& m = j["mutants"][i];
    const std::string path = "/mutants/" + std::to_string(i);
    if (!m.is_object()) throw InputError(file.string(), path, "expected an object (a rule)");
    MutantRule r;
    r.index = static_cast<int>(i);
    r.name = get_string(m, "name", file, path);
    if (r.name.empty() || r.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos)
      throw InputError(file.string(), path + "/name", "expected a non-empty name of a-z, 0-9 and '-'");
    if (!names.insert(r.name).second) throw InputError(file.string(), path + "/name", "duplicate mutant name " + r.name);
    r.pattern = get_string(m, "pattern", file, path);
    const std::string kernel = get_string(m, "kernel", file, path, false);
    if (kernel.empty() || kernel == "cuda") {
      r.kernel = MutantKernel::cuda;
    } else if (kernel == "triton") {
      r.kernel = MutantKernel::triton;
    } else {
      throw InputError(file.string(), path + "/kernel", "expected \"cuda\" or \"triton\", got \"" + kernel + "\"");
    }
    r.description = get_string(m, "description", file, path, false);
    r.file = get_string(m, "file", file, path);
    if (r.file.empty() || r.file.find('/') != std::string::npos || r.file[0] == '.')
      throw InputError(file.string(), path + "/file", "expected a file name inside the kernel directory");
    r.find = get_string(m, "find", file, path);
    if (r.find.empty()) throw InputError(file.string(), path + "/find", "expected non-empty text");
    r.replace = get_string(m, "replace", file, path);
    if (!m.contains("expect") || !m["expect"].is_array() || m["expect"].empty())
      throw InputError(file.string(), path + "/expect", "expected a non-empty array of finding kinds");
    for (const auto& k : m["expect"]) {
      if (!k.is_string()) throw InputError(file.string(), path + "/expect", "expected finding kinds as strings");
      r.expect.push_back(k.get<std::string>());
    }
    if (m.contains("max_cases")) {
      if (!m["max_cases"].is_number_integer() || m["max_cases"].get<int64_t>() < 1)
        throw InputError(file.string(), path + "/max_cases", "expected a positive integer");
      r.max_cases = m["max_cases"].get<int64_t>();
    }
    r.config = get_string(m, "config", file, path, false);
    if (m.contains("max_case_mib")) {
      if (!m["max_case_mib"].is_number_integer() || m["max_case_mib"].get<int64_t>() < 1)
        throw InputError(file.string(), path + "/max_case_mib", "expected a positive integer (MiB)");
      r.max_case_mib = m["max_case_mib"].get<int64_t>();
    }
    r.gpu_only = get_string(m, "gpu_only", file, path, false);
    r.needs_size = get_string(m, "needs_size", file, path, false);
    if (m.contains("metamorphic")) {
      const auto& mm = m["metamorphic"];
      const std::string mpath = path + "/metamorphic";
      if (!mm.is_array()) throw InputError(file.string(), mpath, "expected an array of relations (split, permute, rename)");
      for (const auto& x : mm) {
        if (!x.is_string() || (x != "split" && x != "permute" && x != "rename"))
          throw InputError(file.string(), mpath, "expected relations among split, permute, rename");
        r.metamorphic.push_back(x.get<std::string>());
      }
      if (r.kernel != MutantKernel::cuda) throw InputError(file.string(), mpath, "metamorphic checks run on CUDA rules only");
    }
    cat.rules.push_back(std::move(r));
  }
  if (j.contains("not_applicable")) {
    if (!j["not_applicable"].is_array()) throw InputError(file.string(), "/not_applicable", "expected an array");
    for (size_t i = 0; i < j["not_applicable"].size(); ++i) {
      const std::string path = "/not_applicable/" + std::to_string(i);
      const nlohmann::json& e = j["not_applicable"][i];
      if (!e.is_object()) throw InputError(file.string(), path, "expected {\"pattern\": ..., \"why\": ...}");
      cat.not_applicable.push_back({get_string(e, "pattern", file, path), get_string(e, "why", file, path)});
    }
  }
  return cat;
}

void apply_rule(const MutantCatalogue& catalogue, const MutantRule& rule, const fs::path& kernel_dir, const fs::path& out_dir) {
  fs::create_directories(out_dir);
  bool found = false;
  for (const fs::directory_entry& e : fs::directory_iterator(kernel_dir)) {
    if (!e.is_regular_file()) continue;
    fs::copy_file(e.path(), out_dir / e.path().filename(), fs::copy_options::overwrite_existing);
    found = found || e.path().filename() == rule.file;
  }
  const std::string path = "/mutants/" + std::to_string(rule.index) + "/find";
  if (!found)
    throw InputError(catalogue.file.string(), "/mutants/" + std::to_string(rule.index) + "/file",
                     "stale rule " + rule.name + ": " + (kernel_dir / rule.file).string() + " does not exist");
  const fs::path target = out_dir / rule.file;
  std::string text = read_text(target);
  const size_t n = count_occurrences(text, rule.find);
  if (n != 1)
    throw InputError(catalogue.file.string(), path,
                     "stale rule " + rule.name + ": the find text occurs " + std::to_string(n) + " times in " +
                         (kernel_dir / rule.file).string() +
                         " (expected exactly 1); update the rule to the kernel's current source");
  text.replace(text.find(rule.find), rule.find.size(), rule.replace);
  std::ofstream out(target, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw InfraError("cannot write " + target.string());
}

}  // namespace kvf
