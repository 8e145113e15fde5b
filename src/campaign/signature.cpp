// signature.cpp — see signature.h.
#include "signature.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "arena/arena.h"
#include "case/case_json.h"
#include "base/errors.h"

namespace kvf {

namespace {

// Digits as '#': "launch refused: 64 heads" -> "launch refused: # heads".
std::string without_numbers(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size() && out.size() < 120; ++i) {
    if (std::isdigit(static_cast<unsigned char>(s[i]))) {
      out += '#';
      while (i + 1 < s.size() && (std::isdigit(static_cast<unsigned char>(s[i + 1])) || s[i + 1] == '.')) ++i;
    } else {
      out += s[i] == ' ' ? '_' : s[i];
    }
  }
  return out;
}

std::string read_all_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(file.string(), "", "cannot read the findings index");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const char* bucket(int64_t n) { return n == 0 ? "0" : n == 1 ? "1" : "many"; }

// The victim class of a finding as the signature names it: where the bug's writes land, not which
// cell of this case they happened to hit (signature.h).
std::string coarse_victim(const Finding& f) {
  std::string v = f.victim_class;
  std::string prefix;
  if (v.rfind("scale_cache:", 0) == 0) {
    prefix = "scale_cache:";
    v = v.substr(prefix.size());
  }
  switch (f.kind) {
    case FindingKind::stray_write:
      if (v == "context" || v == "tail" || v == "hole" || v == "gap") v = "own_cells";
      break;
    case FindingKind::cross_request_write:
      if (v == "context" || v == "shared_block") v = "other_request";
      break;
    case FindingKind::padding_leak:
    case FindingKind::oob_read_suspected:
      if (v != "many") v = "cache";  // where a leaked or over-read value lands follows from the case
      break;
    default: break;
  }
  return prefix + v;
}

// The writer class as the signature names it: the rows that must not be written and the over-read
// patterns by name, everything else (a decoded request, an unknown or ambiguous value, the kernel)
// as the kernel; which of those a diff can tell depends on the dtypes, not on the bug.
std::string coarse_writer(const Finding& f) {
  const std::string& w = f.writer_class;
  if (w == "padding_row" || w == "invalid_row" || w == "graph_row" || w == "unwritten_rows" || w == "input_gap" ||
      w == "guard_pattern")
    return w;
  return "kernel";
}

bool is_run_failure(FindingKind k) {
  return k == FindingKind::launch_error || k == FindingKind::crash || k == FindingKind::timeout;
}

}  // namespace

std::string Signature::text() const { return "v" + std::to_string(kVersion) + " " + bug; }

std::string Signature::id() const { return fnv1a_hex(text()); }

std::string bug_class_of(const Verdict& v) {
  if (v.pass()) return "";
  const Finding& f = v.findings.front();
  if (is_run_failure(f.kind)) return std::string(to_string(f.kind)) + "|run|kernel";
  return std::string(to_string(f.kind)) + "|" + coarse_victim(f) + "|" + coarse_writer(f);
}

std::string identity_of(const Verdict& v) {
  if (v.pass()) return "";
  const Finding& f = v.findings.front();
  std::string id = bug_class_of(v);
  if (is_run_failure(f.kind)) id += "|" + without_numbers(f.sentence);
  return id;
}

Signature signature_of(const Case& c, const Verdict& v) {
  int64_t requests = 0, padding = 0, invalid = 0;
  for (const Request& r : c.requests) requests += r.new_len > 0 ? 1 : 0;
  for (int64_t s : c.slot_mapping) {
    padding += s < 0 ? 1 : 0;
    invalid += s >= c.capacity() ? 1 : 0;
  }
  Signature s;
  s.bug = bug_class_of(v);
  s.identity = identity_of(v);
  s.features = std::string(to_string(c.layout)) + "|" + std::string(to_string(c.input_dtype)) + ">" +
               std::string(to_string(c.cache_dtype)) + "|" + std::string(to_string(c.scale_kind)) + "|requests=" +
               bucket(requests) + "|heads=" + bucket(c.num_heads) + "|padding=" + bucket(padding) + "|invalid=" + bucket(invalid);
  if (c.padding != PaddingMode::negative) s.features += "|padding_mode=" + std::string(to_string(c.padding));
  if (c.addressing != Addressing::slot_mapping) s.features += "|addressing=" + std::string(to_string(c.addressing));
  if (c.has_window()) s.features += "|window=" + std::string(to_string(c.window_input));
  if (c.has_cp()) s.features += "|cp=" + std::string(to_string(c.cp_input));
  if (c.has_format()) s.features += "|format=" + std::string(to_string(c.quant_format));
  return s;
}

CaseSize size_of(const Case& c) {
  return {c.num_slots(), static_cast<int64_t>(c.requests.size()), c.num_heads, c.head_dim, plan_arena(c).total_bytes};
}

// --- FindingsIndex -------------------------------------------------------------------------------

FindingsIndex::FindingsIndex(std::filesystem::path folder) : folder_(std::move(folder)) {
  locked([](std::map<std::string, Entry>&) { return false; }, false);  // read it once: a bad index fails now
}

bool FindingsIndex::locked(const std::function<bool(std::map<std::string, Entry>&)>& f, bool may_write) {
  std::lock_guard<std::mutex> guard(mutex_);
  const std::filesystem::path file = folder_ / kFileName;
  std::error_code ec;
  int lock = -1;  // readers need none: the index is replaced by rename, never written in place
  if (may_write && std::filesystem::is_directory(folder_, ec)) {
    lock = ::open((folder_ / (std::string(kFileName) + ".lock")).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock >= 0) ::flock(lock, LOCK_EX);
  }
  struct Unlock {
    int fd;
    ~Unlock() {
      if (fd >= 0) ::close(fd);  // releases the flock
    }
  } unlock{lock};
  entries_.clear();
  if (std::filesystem::exists(file, ec)) {
    const nlohmann::json j = parse_json_strict(read_all_text(file), file.string());
    if (j.value("schema", "") != "kvfuzz-findings-index" || !j.contains("signatures") || !j["signatures"].is_object())
      throw InputError(file.string(), "/schema", "expected a kvfuzz findings index (schema kvfuzz-findings-index)");
    for (const auto& [id, e] : j["signatures"].items()) {
      Entry x;
      x.signature = e.value("signature", "");
      x.file = e.value("file", "");
      if (e.contains("size") && e["size"].is_array() && e["size"].size() == x.size.size())
        for (size_t i = 0; i < x.size.size(); ++i) x.size[i] = e["size"][i].get<int64_t>();
      x.found = e.value("found", int64_t{0});
      x.superseded = e.value("superseded", std::vector<std::string>{});
      entries_[id] = x;
    }
  }
  const bool result = f(entries_);
  if (result) {
    nlohmann::json sigs = nlohmann::json::object();
    for (const auto& [id, e] : entries_)
      sigs[id] = {{"signature", e.signature}, {"file", e.file}, {"size", e.size}, {"found", e.found}, {"superseded", e.superseded}};
    const nlohmann::json j = {{"schema", "kvfuzz-findings-index"}, {"version", 1}, {"signature_version", Signature::kVersion},
                              {"signatures", sigs}};
    std::filesystem::create_directories(folder_, ec);
    write_file_atomic(file, j.dump(2) + "\n");
  }
  return result;
}

std::optional<FindingsIndex::Entry> FindingsIndex::find(const std::string& id) {
  std::optional<Entry> found;
  locked([&](std::map<std::string, Entry>& entries) {
    if (auto it = entries.find(id); it != entries.end()) found = it->second;
    return false;
  }, false);
  return found;
}

void FindingsIndex::count(const std::string& id) {
  locked([&](std::map<std::string, Entry>& entries) {
    auto it = entries.find(id);
    if (it == entries.end()) return false;
    ++it->second.found;
    return true;
  }, true);
}

bool FindingsIndex::offer(const Signature& s, const std::string& file, const CaseSize& size) {
  bool taken = false;
  locked([&](std::map<std::string, Entry>& entries) {
    auto [it, inserted] = entries.try_emplace(s.id());
    Entry& e = it->second;
    if (!inserted && !(size < e.size)) {
      ++e.found;
      return true;  // counted; the smaller case stays the index's
    }
    taken = true;
    if (!inserted && e.file != file) e.superseded.push_back(e.file);
    e.signature = s.text();
    e.file = file;
    e.size = size;
    ++e.found;
    return true;
  }, true);
  return taken;
}

std::vector<std::filesystem::path> FindingsIndex::prune() {
  std::vector<std::filesystem::path> deleted;
  locked([&](std::map<std::string, Entry>& entries) {
    bool changed = false;
    for (auto& [id, e] : entries) {
      for (const std::string& old : e.superseded) {
        std::error_code ec;
        const std::filesystem::path f = folder_ / old;
        if (old == e.file || old.find("..") != std::string::npos) continue;  // never the index's own case, never outside
        if (std::filesystem::remove(f, ec)) deleted.push_back(f);
        std::filesystem::remove_all(folder_ / (std::filesystem::path(old).stem().string() + ".report"), ec);
      }
      changed = changed || !e.superseded.empty();
      e.superseded.clear();
    }
    return changed;
  }, true);
  return deleted;
}

}  // namespace kvf
