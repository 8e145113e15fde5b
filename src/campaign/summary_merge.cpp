// summary_merge.cpp — see summary_merge.h.
#include "summary_merge.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <system_error>

#include "case/case_json.h"
#include "base/errors.h"
#include "report/exit_code.h"

namespace kvf {

namespace {

using json = nlohmann::json;

constexpr std::uintmax_t kMaxSummaryBytes = std::uintmax_t{1} << 30;

json read_summary(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) throw InputError(file.string(), "", "not a file (expected a kvfuzz run --json summary)");
  if (std::filesystem::file_size(file, ec) > kMaxSummaryBytes) throw InputError(file.string(), "", "larger than 1 GiB; not a summary");
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) throw InputError(file.string(), "", "cannot be read");
  return parse_json_strict(text.str(), file.string());
}

// `j`'s member `key` (JSON path `path`), which must have the type `is` checks; else InputError.
const json& member(const json& j, const char* key, const std::string& path, const std::filesystem::path& file,
                   bool (json::*is)() const noexcept, const char* expected) {
  const auto it = j.find(key);
  if (it == j.end()) throw InputError(file.string(), path, std::string("missing; expected ") + expected);
  if (!((*it).*is)()) throw InputError(file.string(), path, std::string("expected ") + expected + ", got " + it->dump());
  return *it;
}
std::string text_at(const json& j, const char* key, const std::string& path, const std::filesystem::path& file) {
  return member(j, key, path, file, &json::is_string, "a string").get<std::string>();
}
int64_t number_at(const json& j, const char* key, const std::string& path, const std::filesystem::path& file) {
  const json& v = member(j, key, path, file, &json::is_number_integer, "a whole number");
  if (v.get<int64_t>() < 0) throw InputError(file.string(), path, "expected a whole number, 0 or more, got " + v.dump());
  return v.get<int64_t>();
}

// Precedence of exit codes (docs/exit-codes.md): 2, 3, 1, 130/143, 0.
int rank(int code) {
  switch (code) {
    case kExitBadInput: return 4;
    case kExitInfra: return 3;
    case kExitFindings: return 2;
    case kExitClean: return 0;
    default: return 1;
  }
}

}  // namespace

bool is_summary_file(const std::filesystem::path& file) {
  std::error_code ec;
  return std::filesystem::is_regular_file(file, ec) && json_file_schema(file) == "kvfuzz-summary";
}

SummaryMerge merge_summaries(const std::vector<std::filesystem::path>& files) {
  if (files.empty()) throw InputError("", "", "no summaries to merge");
  SummaryMerge r;
  // What every shard of one campaign shares: checked against the first file.
  static const char* const kSame[] = {"tool_version", "target", "profile", "seed", "tolerance"};
  json first;
  std::filesystem::path first_file;
  std::map<int64_t, std::filesystem::path> shard_files;  // shard index -> its file
  std::map<std::string, int64_t> findings_by_kind;
  std::map<std::string, int64_t> formats;  // checked cases per format family
  std::map<std::string, std::pair<std::string, int64_t>> by_signature;  // case signature id -> (text, failing cases)
  std::map<std::string, json> duplicates;                              // signature id -> merged entry
  json failures = json::array(), failing_cases = json::array(), shard_list = json::array();
  double seconds_max = 0, seconds_sum = 0, cpu_seconds = 0;
  json stages = json::object();  // host seconds by stage, summed (absent in summaries of older kvfuzz)
  int64_t flaky = 0, skipped = 0;
  int worst = kExitClean;
  for (const auto& file : files) {
    const json j = read_summary(file);
    if (!j.is_object()) throw InputError(file.string(), "", "expected a JSON object (a kvfuzz run --json summary)");
    if (const std::string schema = text_at(j, "schema", "/schema", file); schema != "kvfuzz-summary")
      throw InputError(file.string(), "/schema", "expected \"kvfuzz-summary\" (a kvfuzz run --json summary), got \"" + schema + "\"");
    if (number_at(j, "version", "/version", file) != 1)
      throw InputError(file.string(), "/version", "expected summary version 1, got " + j["version"].dump() + " (written by another kvfuzz?)");
    if (const std::string command = text_at(j, "command", "/command", file); command != "run")
      throw InputError(file.string(), "/command", "expected a summary of `kvfuzz run`, got one of `kvfuzz " + command + "`");
    const json& shard = member(j, "shard", "/shard", file, &json::is_object, "an object {index, count, from}");
    const int64_t index = number_at(shard, "index", "/shard/index", file);
    const int64_t count = number_at(shard, "count", "/shard/count", file);
    const int64_t limit = number_at(j, "case_limit", "/case_limit", file);
    if (count < 1 || index >= count)
      throw InputError(file.string(), "/shard", "expected 0 <= index < count, got " + shard.dump());
    if (first.is_null()) {
      first = j;
      first_file = file;
      r.shard_count = count;
    } else {
      for (const char* key : kSame) {
        const std::string mine = text_at(j, key, std::string("/") + key, file), theirs = first[key].get<std::string>();
        if (mine != theirs)
          throw InputError(file.string(), std::string("/") + key,
                           std::string(key) + " is \"" + mine + "\" but \"" + theirs + "\" in " + first_file.string() +
                               "; only summaries of one campaign (same seed, profile, target, value policy, kvfuzz version) merge");
      }
      if (count != r.shard_count)
        throw InputError(file.string(), "/shard/count", "shard count " + std::to_string(count) + " but " +
                                                            std::to_string(r.shard_count) + " in " + first_file.string());
      if (limit != first["case_limit"].get<int64_t>())
        throw InputError(file.string(), "/case_limit", "--cases " + std::to_string(limit) + " but " +
                                                           first["case_limit"].dump() + " in " + first_file.string());
    }
    if (const auto [it, inserted] = shard_files.emplace(index, file); !inserted)
      throw InputError(file.string(), "/shard/index", "shard " + std::to_string(index) + " of " + std::to_string(count) +
                                                          " is also " + it->second.string() + "; merge one summary per shard (the rerun's)");
    r.cases += number_at(j, "cases", "/cases", file);
    r.passed += number_at(j, "passed", "/passed", file);
    r.failed += number_at(j, "failed", "/failed", file);
    flaky += number_at(j, "flaky", "/flaky", file);
    const int code = static_cast<int>(number_at(j, "exit_code", "/exit_code", file));
    if (rank(code) > rank(worst)) worst = code;
    const double secs = member(j, "seconds", "/seconds", file, &json::is_number, "a number").get<double>();
    seconds_max = std::max(seconds_max, secs);
    seconds_sum += secs;
    if (const auto host = j.find("host"); host != j.end() && host->is_object() && host->contains("cpu_seconds"))
      cpu_seconds += (*host)["cpu_seconds"].get<double>();
    if (const auto st = j.find("stages"); st != j.end() && st->is_object())
      for (const auto& [stage, s] : st->items())
        if (s.is_number()) stages[stage] = stages.value(stage, 0.0) + s.get<double>();
    if (const auto sk = j.find("skipped"); sk != j.end() && sk->is_object() && sk->contains("cases")) skipped += (*sk)["cases"].get<int64_t>();
    if (const auto fm = j.find("formats"); fm != j.end() && fm->is_object())  // absent in summaries of older kvfuzz
      for (const auto& [family, n] : fm->items())
        if (n.is_number_integer()) formats[family] += n.get<int64_t>();
    const json& kinds_here = member(j, "findings_by_kind", "/findings_by_kind", file, &json::is_object, "an object");
    for (const auto& [kind, n] : kinds_here.items()) {
      if (!n.is_number_integer()) throw InputError(file.string(), "/findings_by_kind/" + kind, "expected a whole number, got " + n.dump());
      findings_by_kind[kind] += n.get<int64_t>();
    }
    const json& fc = member(j, "failing_cases", "/failing_cases", file, &json::is_array, "an array");
    for (size_t k = 0; k < fc.size(); ++k) {
      const std::string path = "/failing_cases/" + std::to_string(k);
      if (!fc[k].is_object()) throw InputError(file.string(), path, "expected an object {case_index, signature_id, signature}");
      const int64_t ci = number_at(fc[k], "case_index", path + "/case_index", file);
      if (ci % count != index)
        throw InputError(file.string(), path + "/case_index", "case " + std::to_string(ci) + " is not in shard " +
                                                                  std::to_string(index) + " of " + std::to_string(count) + " (case k belongs to shard k mod N)");
      const std::string id = text_at(fc[k], "signature_id", path + "/signature_id", file);
      auto& entry = by_signature[id];
      entry.first = text_at(fc[k], "signature", path + "/signature", file);
      ++entry.second;
      failing_cases.push_back(fc[k]);
    }
    const json& fs = member(j, "failures", "/failures", file, &json::is_array, "an array");
    for (json f : fs) {
      f["shard"] = index;
      failures.push_back(std::move(f));
    }
    if (const auto d = j.find("duplicates"); d != j.end() && d->is_array()) {
      for (const json& e : *d) {
        if (!e.is_object() || !e.contains("signature_id") || !e["signature_id"].is_string()) continue;
        json& m = duplicates[e["signature_id"].get<std::string>()];
        const int64_t before = m.is_object() ? m.value("count", int64_t{0}) : 0;
        m = e;
        m["count"] = before + e.value("count", int64_t{0});
      }
    }
    shard_list.push_back({{"index", index}, {"file", file.string()}, {"cases", j["cases"]}, {"failed", j["failed"]},
                          {"exit_code", code}, {"seconds", secs}});
  }
  for (int64_t i = 0; i < r.shard_count; ++i) {
    if (shard_files.count(i)) {
      r.present.push_back(i);
    } else {
      r.missing.push_back(i);
    }
  }
  const auto by_index = [](const json& a, const json& b) { return a["case_index"].get<int64_t>() < b["case_index"].get<int64_t>(); };
  std::stable_sort(failing_cases.begin(), failing_cases.end(), by_index);
  std::stable_sort(failures.begin(), failures.end(), [](const json& a, const json& b) {
    return a.value("case_index", int64_t{-1}) < b.value("case_index", int64_t{-1});
  });
  std::stable_sort(shard_list.begin(), shard_list.end(), [](const json& a, const json& b) { return a["index"] < b["index"]; });
  json signatures = json::array();
  for (const auto& [id, e] : by_signature) signatures.push_back({{"signature_id", id}, {"signature", e.first}, {"failing_cases", e.second}});
  json dups = json::array();
  for (auto& [id, e] : duplicates) dups.push_back(e);
  if (!r.missing.empty() && rank(kExitInfra) > rank(worst)) worst = kExitInfra;
  r.exit_code = worst;
  r.merged = {{"schema", "kvfuzz-summary"}, {"version", 1}, {"tool_version", first["tool_version"]}, {"command", "merge"},
              {"target", first["target"]}, {"profile", first["profile"]}, {"seed", first["seed"]},
              {"tolerance", first["tolerance"]}, {"case_limit", first["case_limit"]},
              {"shards", {{"count", r.shard_count}, {"present", r.present}, {"missing", r.missing}, {"summaries", shard_list}}},
              {"cases", r.cases}, {"passed", r.passed}, {"failed", r.failed}, {"flaky", flaky},
              {"skipped", {{"cases", skipped}}}, {"formats", formats},
              {"seconds", seconds_max}, {"shard_seconds", seconds_sum},
              {"cases_per_second", seconds_sum > 0 ? r.cases / seconds_sum : 0.0},
              {"host", {{"cpu_seconds", cpu_seconds}}}, {"stages", stages},
              {"exit_code", r.exit_code}, {"findings_by_kind", findings_by_kind},
              {"failing_cases_by_signature", signatures}, {"failing_cases", failing_cases},
              {"failures", failures}, {"duplicates", dups}};
  return r;
}

}  // namespace kvf
