// render.cpp — see render.h.
#include "render.h"

#include "exit_code.h"

#include <algorithm>
#include <map>
#include <iomanip>
#include <sstream>
#include <utility>
#include <vector>

namespace kvf {

std::string summary_line(int64_t passed, int64_t failed) {
  return "kvfuzz: " + std::to_string(passed) + " passed, " + std::to_string(failed) + " failed";
}

std::string render_verdict(const Verdict& v, const std::string& indent) {
  std::ostringstream s;
  for (const Finding& f : v.findings) s << indent << to_string(f.kind) << ": " << f.sentence << "\n";
  if (!v.findings.empty() && !v.findings.front().example.empty())
    s << indent << "first cell: " << v.findings.front().example << "\n";
  return s.str();
}

std::string count_of(int64_t n, const std::string& noun) { return std::to_string(n) + " " + noun + (n == 1 ? "" : "s"); }

std::string render_failure(const FailureRecord& r) {
  std::ostringstream s;
  s << "kvfuzz: FAIL" << (r.flaky ? " (flaky)" : "") << " case #" << r.case_index
    << (r.target.empty() ? std::string() : " on " + r.target) << " -> "
    << (r.verdict.pass() ? std::string("?") : std::string(to_string(r.verdict.findings.front().kind))) << "\n";
  s << render_verdict(r.verdict);
  if (!r.signature.empty()) s << "  signature " << r.signature_id << ": " << r.signature << "\n";
  if (!r.flaky)
    s << "  shrunk: " << r.shrink_accepted << " steps (" << r.shrink_tries << " candidates) to " << r.requests
      << (r.requests == 1 ? " request, " : " requests, ") << r.tokens << (r.tokens == 1 ? " slot, " : " slots, ")
      << r.heads << (r.heads == 1 ? " head, " : " heads, ") << "head_dim " << r.head_dim << "\n";
  if (!r.shrink_skips.empty()) {
    s << "  shrink candidates skipped by the kernel (not taken): ";
    bool first = true;
    for (const auto& [reason, n] : r.shrink_skips) {
      s << (first ? "" : ", ") << reason << ": " << n;
      first = false;
    }
    s << "\n";
  }
  if (!r.save_error.empty()) {
    s << "  NOT SAVED: " << r.save_error << " (the case was printed to stderr)\n";
  } else {
    s << "  saved: " << r.file.string() << "\n";
    s << "  reproduce: " << r.replay_command << "\n";
    if (!r.locate_command.empty()) s << "  locate: " << r.locate_command << "\n";
  }
  return s.str();
}

std::string render_stats(const CampaignResult& r) {
  if (r.stats.empty()) return "";
  std::ostringstream s;
  s << "kvfuzz: coverage of " << count_of(r.cases, "case") << " (feature bucket: cases, share):\n";
  // One column of counts and one of shares, right-aligned, whatever the bucket names' lengths.
  // The first bucket of a feature is indented 2, the others 4.
  std::vector<std::string> heads;
  size_t name_width = 0, count_width = 1;
  std::string group;
  for (const auto& [bucket, n] : r.stats) {
    const std::string g = bucket.substr(0, bucket.find('='));
    heads.push_back((g == group ? "    " : "  ") + bucket + ":");
    name_width = std::max(name_width, heads.back().size());
    count_width = std::max(count_width, std::to_string(n).size());
    group = g;
  }
  size_t i = 0;
  for (const auto& [bucket, n] : r.stats) {
    const std::string& head = heads[i++];
    s << head << std::string(name_width - head.size() + 1, ' ') << std::setw(static_cast<int>(count_width)) << n << " ("
      << std::setw(3) << (r.cases ? 100 * n / r.cases : 0) << "%)\n";
  }
  return s.str();
}

namespace {

// The stages of StageSeconds in order, with their names in the summary JSON and on the terminal.
struct StageName {
  const char* key;
  const char* text;
  double StageSeconds::*seconds;
};
constexpr StageName kStages[] = {
    {"draw", "draw", &StageSeconds::draw},           {"arena_fill", "arena fill", &StageSeconds::arena_fill},
    {"golden", "golden model", &StageSeconds::golden}, {"handoff", "hand-off", &StageSeconds::handoff},
    {"target", "target run", &StageSeconds::target},   {"copy_back", "copy back", &StageSeconds::copy_back},
    {"diff", "diff", &StageSeconds::diff},
};

}  // namespace

nlohmann::json stages_json(const StageSeconds& s) {
  nlohmann::json j = nlohmann::json::object();
  for (const StageName& n : kStages) j[n.key] = s.*n.seconds;
  return j;
}

std::string render_stages(const CampaignResult& r) {
  const double total = r.stages.total();
  if (r.stats.empty() || r.cases == 0 || total <= 0) return "";
  std::ostringstream s;
  s << std::fixed << std::setprecision(1);
  s << "kvfuzz: host time per case by stage (µs of a campaign thread; " << 1e6 * total / r.cases << " in all):";
  for (const StageName& n : kStages) {
    const double v = r.stages.*n.seconds;
    s << (n.seconds == &StageSeconds::draw ? " " : ", ") << n.text << " " << 1e6 * v / r.cases << " (" << std::setprecision(0) << 100 * v / total
      << "%)" << std::setprecision(1);
  }
  s << "\n";
  return s.str();
}

std::string render_duplicates(const CampaignResult& r) {
  std::ostringstream s;
  for (const auto& [id, d] : r.duplicates) {
    s << "kvfuzz: " << d.count << (d.count == 1 ? " more failure" : " more failures") << " of signature " << id << " ("
      << d.signature << "), not saved again";
    if (!d.file.empty()) s << ": " << d.file.string();
    s << "\n";
  }
  return s.str();
}

std::string render_devices(const CampaignResult& r) {
  if (r.devices.empty()) return "";
  std::ostringstream s;
  s << std::fixed << std::setprecision(1);
  for (const DeviceUse& d : r.devices)
    s << "kvfuzz: device " << d.device << ": " << d.workers << (d.workers == 1 ? " worker, " : " workers, ") << count_of(d.cases, "case")
      << ", " << (r.seconds > 0 ? d.cases / r.seconds : 0.0) << " cases/s\n";
  s << "kvfuzz: host CPU: " << (r.seconds > 0 ? r.host_cpu_seconds / r.seconds : 0.0) << " of " << r.host_cores
    << " cores busy (" << r.host_cpu_seconds << " CPU-s in " << r.seconds
    << " s); near the core count, the host, not the GPUs, bounds the rate\n";
  return s.str();
}

std::string render_workers(const WorkerEvents& w) {
  if (w.infrastructure() == 0 && w.recycled_memory == 0 && w.recycled_threads == 0) return "";
  std::ostringstream s;
  s << "kvfuzz: infrastructure events (not findings): " << w.started << " workers started (slowest start "
    << w.slowest_start_s << " s)";
  if (w.failed_starts) s << ", " << w.failed_starts << " failed or slow to start or to read a case, replaced";
  if (w.deaths_retried) s << ", " << w.deaths_retried << " died mid-case and passed on a fresh worker";
  if (w.hangs_retried) s << ", " << w.hangs_retried << " hung mid-case and passed on a fresh worker";
  if (w.recycled_memory) s << ", " << w.recycled_memory << " recycled over the memory limit";
  if (w.recycled_threads) s << ", " << w.recycled_threads << " recycled over the thread limit";
  s << "\n";
  return s.str();
}

nlohmann::json duplicates_json(const CampaignResult& r) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& [id, d] : r.duplicates)
    j.push_back({{"signature_id", id}, {"signature", d.signature}, {"file", d.file.string()}, {"count", d.count}});
  return j;
}

nlohmann::json workers_json(const WorkerEvents& w) {
  return {{"started", w.started},
          {"slowest_start_seconds", w.slowest_start_s},
          {"failed_starts", w.failed_starts},
          {"deaths_retried", w.deaths_retried},
          {"hangs_retried", w.hangs_retried},
          {"recycled_memory", w.recycled_memory},
          {"recycled_threads", w.recycled_threads}};
}

namespace {

// Skip reasons split by who declined the case: the target's capabilities, or the kernel when run
// (its reasons without kKernelSkipPrefix), each part by count.
struct SkipSplit {
  std::vector<std::pair<std::string, int64_t>> outside, kernel;
  int64_t n_outside = 0, n_kernel = 0;
};

SkipSplit split_skips(const std::map<std::string, int64_t>& skip_reasons) {
  SkipSplit s;
  for (const auto& [reason, n] : skip_reasons) {
    if (is_kernel_skip(reason)) {
      s.kernel.emplace_back(reason.substr(kKernelSkipPrefix.size()), n);
      s.n_kernel += n;
    } else {
      s.outside.emplace_back(reason, n);
      s.n_outside += n;
    }
  }
  return s;
}

// "(reason: n, ...)", most frequent first.
std::string reason_list(std::vector<std::pair<std::string, int64_t>> reasons) {
  std::stable_sort(reasons.begin(), reasons.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::ostringstream s;
  s << "(";
  for (size_t i = 0; i < reasons.size(); ++i) s << (i ? ", " : "") << reasons[i].first << ": " << reasons[i].second;
  s << ")";
  return s.str();
}

// "N cases outside the target's capabilities (reason: n, ...)", "N cases by the kernel (reason: n,
// ...)", or both as "N cases: A outside ... (...), B by the kernel (...)". `noun` is "case" or "case file".
std::string skip_parts(int64_t total, const SkipSplit& s, const std::string& noun) {
  const std::string outside = "outside the target's capabilities " + reason_list(s.outside);
  const std::string kernel = "by the kernel " + reason_list(s.kernel);
  if (s.kernel.empty()) return count_of(total, noun) + " " + outside;
  if (s.outside.empty()) return count_of(total, noun) + " " + kernel;
  return count_of(total, noun) + ": " + std::to_string(s.n_outside) + " " + outside + ", " + std::to_string(s.n_kernel) +
         " " + kernel;
}

}  // namespace

std::string render_skipped(const CampaignResult& r) {
  if (r.skipped == 0) return "";
  const SkipSplit split = split_skips(r.skip_reasons);
  std::ostringstream s;
  s << "kvfuzz: skipped " << skip_parts(r.skipped, split, "case") << "; " << r.replaced
    << (split.kernel.empty() ? " replaced by cases drawn inside them" : " replaced by other draws");
  if (r.skipped > r.replaced) s << ", " << r.skipped - r.replaced << " not run";
  s << "\n";
  return s.str();
}

std::string render_skipped(const ReplayResult& r) {
  if (r.skipped == 0) return "";
  return "kvfuzz: skipped " + skip_parts(r.skipped, split_skips(r.skip_reasons), "case file") + "\n";
}

std::string render_not_cases(const ReplayResult& r) {
  std::string s;
  for (const SkippedFile& f : r.not_cases)
    s += "kvfuzz: note: " + f.file.string() + " is not a case file (" + f.reason + "), not replayed\n";
  return s;
}

std::string render_replay_mismatch(const ReplayItem& item) {
  std::ostringstream s;
  const std::string got = item.outcome.pass() ? std::string("pass") : "fail:" + item.outcome.first_kind();
  if (item.expected.outcome == Expect::pass) {
    s << "kvfuzz: FAIL " << item.file.string() << " on " << item.target << " -> " << item.outcome.first_kind() << "\n";
    if (item.recorded.outcome != Expect::pass)
      s << "  (the file records this failure, expect " << item.recorded.text()
        << ": it still reproduces; --expect-saved checks the record instead)\n";
  } else {
    s << "kvfuzz: FAIL " << item.file.string() << " on " << item.target << ": expected " << item.expected.text() << ", got " << got << "\n";
  }
  s << render_verdict(item.outcome.verdict);
  s << "  reproduce: " << item.replay_command << "\n";
  if (!item.locate_command.empty()) s << "  locate: " << item.locate_command << "\n";
  return s.str();
}

namespace {

nlohmann::json findings_by_kind(const std::vector<const Verdict*>& verdicts) {
  std::map<std::string, int64_t> counts;
  for (const Verdict* v : verdicts)
    for (const Finding& f : v->findings) counts[std::string(to_string(f.kind))] += 1;
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, n] : counts) j[k] = n;
  return j;
}

nlohmann::json finding_json(const Finding& f) {
  nlohmann::json j = {{"kind", std::string(to_string(f.kind))}, {"victim", f.victim}, {"writer", f.writer},
                      {"where", f.where}, {"cells", f.cells}, {"sentence", f.sentence}, {"example", f.example}};
  if (f.victim_requests.size() > 1) j["victim_requests"] = f.victim_requests;  // a shared prefix block's owners
  return j;
}

nlohmann::json files_json(const std::vector<SkippedFile>& files) {
  nlohmann::json j = nlohmann::json::array();
  for (const SkippedFile& f : files) j.push_back({{"file", f.file.string()}, {"reason", f.reason}});
  return j;
}

}  // namespace

nlohmann::json campaign_json(const CampaignResult& r, const std::string& command_line) {
  nlohmann::json failures = nlohmann::json::array();
  std::vector<const Verdict*> verdicts;
  for (const FailureRecord& f : r.failures) {
    verdicts.push_back(&f.verdict);
    nlohmann::json fs = nlohmann::json::array();
    for (const Finding& x : f.verdict.findings) fs.push_back(finding_json(x));
    failures.push_back({{"file", f.file.string()}, {"target", f.target}, {"save_error", f.save_error}, {"flaky", f.flaky}, {"case_index", f.case_index},
                        {"signature", f.signature}, {"signature_id", f.signature_id},
                        {"case_signature", f.case_signature}, {"case_signature_id", f.case_signature_id},
                        {"seconds_to_find", f.seconds_to_find}, {"shrink_tries", f.shrink_tries},
                        {"shrink_steps", f.shrink_accepted}, {"shrink_skipped", f.shrink_skips},
                        {"size", {{"requests", f.requests}, {"slots", f.tokens}, {"heads", f.heads}, {"head_dim", f.head_dim}}},
                        {"findings", fs}, {"replay", f.replay_command}, {"locate", f.locate_command}});
  }
  nlohmann::json failing_cases = nlohmann::json::array();
  for (const FailingCase& f : r.failing_cases)
    failing_cases.push_back({{"case_index", f.case_index}, {"signature_id", f.signature_id}, {"signature", f.signature}});
  nlohmann::json devices = nlohmann::json::array();
  for (const DeviceUse& d : r.devices)
    devices.push_back({{"device", d.device}, {"workers", d.workers}, {"cases", d.cases},
                       {"cases_per_second", r.seconds > 0 ? d.cases / r.seconds : 0.0}});
  return {{"schema", "kvfuzz-summary"}, {"version", 1}, {"tool_version", KVFUZZ_VERSION},
          {"shard", {{"index", r.shard_index}, {"count", r.shard_count}, {"from", r.shard_from}}},
          {"case_limit", r.case_limit}, {"failing_cases", failing_cases}, {"devices", devices},
          {"host", {{"cpu_seconds", r.host_cpu_seconds}, {"cores", r.host_cores},
                    {"cores_busy", r.seconds > 0 ? r.host_cpu_seconds / r.seconds : 0.0}}},
          {"command", "run"}, {"command_line", command_line}, {"target", r.target}, {"profile", r.profile},
          {"seed", r.seed}, {"tolerance", r.tolerance}, {"cases", r.cases}, {"passed", r.passed}, {"failed", r.failed},
          {"seconds", r.seconds}, {"cases_per_second", r.cases_per_second()}, {"interrupted", r.interrupted},
          {"stop_signal", r.stop_signal}, {"flaky", r.flaky()}, {"exit_code", exit_code(r)}, {"workers", workers_json(r.workers)},
          {"duplicates", duplicates_json(r)}, {"stats", r.stats}, {"formats", r.formats}, {"stages", stages_json(r.stages)},
          {"findings_by_kind", findings_by_kind(verdicts)}, {"failures", failures},
          {"skipped", {{"cases", r.skipped}, {"replaced", r.replaced}, {"not_run", r.skipped - r.replaced},
                       {"reasons", r.skip_reasons}}}};
}

nlohmann::json replay_json(const ReplayResult& r, const std::string& command_line) {
  nlohmann::json items = nlohmann::json::array();
  std::vector<const Verdict*> verdicts;
  for (const ReplayItem& i : r.items) {
    verdicts.push_back(&i.outcome.verdict);
    nlohmann::json fs = nlohmann::json::array();
    for (const Finding& x : i.outcome.verdict.findings) fs.push_back(finding_json(x));
    items.push_back({{"file", i.file.string()}, {"target", i.target}, {"found_on", i.found_on},
                     {"recorded", i.recorded.text()}, {"expected", i.expected.text()},
                     {"outcome", i.outcome.pass() ? std::string("pass") : "fail:" + i.outcome.first_kind()},
                     {"as_expected", i.as_expected}, {"seconds", i.outcome.seconds}, {"findings", fs},
                     {"replay", i.replay_command}, {"locate", i.locate_command}});
  }
  return {{"schema", "kvfuzz-summary"}, {"version", 1}, {"tool_version", KVFUZZ_VERSION},
          {"command", "replay"}, {"command_line", command_line}, {"target", r.target},
          {"mode", r.expect_saved ? "expect-saved" : "no-findings"},
          {"cases", static_cast<int64_t>(r.items.size())}, {"passed", r.passed()}, {"failed", r.failed()},
          {"seconds", r.seconds}, {"interrupted", r.interrupted}, {"stop_signal", r.stop_signal},
          {"exit_code", exit_code(r)}, {"workers", workers_json(r.workers)},
          {"findings_by_kind", findings_by_kind(verdicts)}, {"items", items},
          {"skipped", {{"cases", r.skipped}, {"reasons", r.skip_reasons}, {"files", files_json(r.skipped_files)}}},
          {"not_cases", files_json(r.not_cases)}};
}

}  // namespace kvf
