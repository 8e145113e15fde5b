// campaign.cpp — the run loop (generate, check, confirm, shrink, save), replay and shrink.
#include "campaign/campaign.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <set>

#include "case/case_json.h"
#include "case/errors.h"
#include "gen/generate.h"
#include "gen/materialize.h"
#include "gen/shrink.h"

namespace kvf {

namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_stop_signal(int) { g_stop.store(true); }

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string quote_path(const std::filesystem::path& p) {
  const std::string s = p.string();
  if (s.find_first_of(" \t\"'$`\\") == std::string::npos) return s;
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

std::string replay_command(const std::filesystem::path& file, const std::string& target) {
  return "kvfuzz replay " + quote_path(file) + " --target " + target;
}

void describe_size(const Case& c, FailureRecord& r) {
  r.requests = static_cast<int64_t>(c.requests.size());
  r.tokens = c.num_slots();
  r.heads = c.num_heads;
  r.head_dim = c.head_dim;
}

Profile profile_for(const std::filesystem::path& config) {
  return config.empty() ? default_profile() : load_profile(config);
}

// Confirms a failure by re-running; true when every re-run fails with the same first kind.
bool confirm(Isolator& isolator, const Case& c, const std::string& kind, int runs) {
  for (int i = 0; i < runs; ++i) {
    const CaseOutcome again = check_case(isolator, c);
    if (again.pass() || again.first_kind() != kind) return false;
  }
  return true;
}

// Shrinks a failing genotype to a minimal one failing with the same first finding kind.
Genotype shrink_failure(Isolator& isolator, const Genotype& g, const Profile& profile, const std::string& kind,
                        int64_t max_tries, ShrinkStats& stats, Progress& progress) {
  return shrink_to_minimal(
      g, profile,
      [&](const Genotype& candidate) {
        if (stop_requested()) return false;
        progress.update(0, 0, 0, "shrinking");
        const CaseOutcome o = check_case(isolator, materialize(candidate));
        return !o.pass() && o.first_kind() == kind;
      },
      &stats, max_tries);
}

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool stop_requested() { return g_stop.load(); }

CampaignResult run_campaign(const CampaignOptions& o, Progress& progress) {
  const Profile profile = profile_for(o.config);
  std::unique_ptr<Target> target = make_target(o.target);
  Isolator isolator(*target, o.check.isolation);

  CampaignResult result;
  result.target = o.target;
  result.profile = profile.name;
  result.seed = std::to_string(o.seed);
  std::set<std::string> saved;  // hashes already reported (with --keep-going)

  const auto start = Clock::now();
  for (int64_t i = 0; o.cases == 0 || i < o.cases; ++i) {
    if (stop_requested()) {
      result.interrupted = true;
      break;
    }
    if (o.seconds > 0 && seconds_since(start) >= o.seconds) break;

    const Genotype g = generate_case(profile, o.seed, i);
    Case c = materialize(g);
    const CaseOutcome outcome = check_case(isolator, c);
    ++result.cases;
    if (outcome.pass()) {
      ++result.passed;
      progress.update(result.cases, result.passed, result.failed, "fuzzing");
      continue;
    }
    if (stop_requested()) {  // a ^C that raced the case: do not report it as a failure
      --result.cases;
      result.interrupted = true;
      break;
    }

    const std::string kind = outcome.first_kind();
    FailureRecord rec;
    rec.case_index = i;
    rec.seconds_to_find = seconds_since(start);
    progress.event("kvfuzz: NEW-FAIL case #" + std::to_string(i) + " (" + kind + "): " +
                   outcome.verdict.findings.front().sentence);

    Case minimal = c;
    Verdict verdict = outcome.verdict;
    rec.flaky = !confirm(isolator, c, kind, o.confirm_runs);
    if (rec.flaky) {
      progress.event("kvfuzz: case #" + std::to_string(i) + " did not fail on every re-run: flaky, not shrunk");
    } else {
      ShrinkStats stats;
      const Genotype g_min = shrink_failure(isolator, g, profile, kind, o.max_shrink_tries, stats, progress);
      rec.shrink_tries = stats.tried;
      rec.shrink_accepted = stats.accepted;
      minimal = materialize(g_min);
      verdict = check_case(isolator, minimal).verdict;
      if (verdict.pass()) {  // cannot happen for a deterministic target; keep the original then
        minimal = c;
        verdict = outcome.verdict;
      }
    }
    minimal.expect = Expectation{Expect::fail, verdict.pass() ? "" : std::string(to_string(verdict.findings.front().kind))};
    minimal.provenance = Provenance{std::to_string(o.seed), i, KVFUZZ_VERSION, o.command_line, o.target};
    const std::filesystem::path dir = rec.flaky ? o.corpus_out / "flaky" : o.corpus_out;
    rec.file = save_case(minimal, dir);
    rec.verdict = verdict;
    rec.replay_command = replay_command(rec.file, o.target);
    describe_size(minimal, rec);
    ++result.failed;
    if (saved.insert(rec.file.string()).second) result.failures.push_back(rec);
    progress.update(result.cases, result.passed, result.failed, "fuzzing");
    if (!o.keep_going) break;
  }
  result.seconds = seconds_since(start);
  progress.finish();
  return result;
}

namespace {

void collect_json_files(const std::filesystem::path& p, std::vector<std::filesystem::path>& out) {
  std::error_code ec;
  if (std::filesystem::is_directory(p, ec)) {
    std::vector<std::filesystem::path> found;
    for (auto it = std::filesystem::recursive_directory_iterator(p, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_regular_file(ec) && it->path().extension() == ".json") found.push_back(it->path());
    }
    if (ec) throw InputError(p.string(), "", "cannot list the directory: " + ec.message());
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
    return;
  }
  if (!std::filesystem::exists(p, ec)) throw InputError(p.string(), "", "no such file or directory");
  out.push_back(p);
}

std::string expected_text(const Expectation& e) {
  if (e.outcome == Expect::pass) return "pass";
  return e.finding_kind.empty() ? "fail" : "fail:" + e.finding_kind;
}

bool matches_expectation(const Expectation& e, const CaseOutcome& o) {
  if (e.outcome == Expect::pass) return o.pass();
  if (o.pass()) return false;
  return e.finding_kind.empty() || e.finding_kind == o.first_kind();
}

}  // namespace

ReplayResult replay_cases(const ReplayOptions& o, Progress& progress) {
  std::unique_ptr<Target> target = make_target(o.target);
  Isolator isolator(*target, o.check.isolation);
  std::vector<std::filesystem::path> files;
  for (const auto& p : o.paths) collect_json_files(p, files);
  if (files.empty()) throw InputError("", "", "no case files (*.json) found in the given paths");

  std::vector<Case> cases;  // read everything first: a bad file means nothing runs
  cases.reserve(files.size());
  for (const auto& f : files) cases.push_back(read_case_file(f, o.limits));

  ReplayResult result;
  result.target = o.target;
  const auto start = Clock::now();
  for (size_t i = 0; i < files.size(); ++i) {
    if (stop_requested()) {
      result.interrupted = true;
      break;
    }
    ReplayItem item;
    item.file = files[i];
    item.expected = expected_text(cases[i].expect);
    item.outcome = check_case(isolator, cases[i]);
    item.as_expected = matches_expectation(cases[i].expect, item.outcome);
    result.items.push_back(std::move(item));
    progress.update(static_cast<int64_t>(result.items.size()), result.passed(), result.failed(), "replaying");
  }
  result.seconds = seconds_since(start);
  progress.finish();
  return result;
}

std::vector<std::filesystem::path> generate_cases(const GenerateOptions& o) {
  const Profile profile = profile_for(o.config);
  std::vector<std::filesystem::path> files;
  for (int64_t i = 0; i < o.cases; ++i) {
    Case c = materialize(generate_case(profile, o.seed, i));
    c.provenance = Provenance{std::to_string(o.seed), i, KVFUZZ_VERSION, o.command_line, ""};
    files.push_back(save_case(c, o.out_dir));
  }
  return files;
}

ShrinkResult shrink_case(const ShrinkOptions& o, Progress& progress) {
  const Case input = read_case_file(o.file, o.limits);
  if (!input.genotype) {
    throw InputError(o.file.string(), "/genotype",
                     "the case has no genotype, so kvfuzz cannot derive simpler variants of it; "
                     "only cases written by `kvfuzz run` can be shrunk");
  }
  const Case rebuilt = materialize(*input.genotype);
  if (case_hash(rebuilt) != case_hash(input)) {
    throw InputError(o.file.string(), "",
                     "the batch differs from what its genotype materialises to (was the file edited?); "
                     "shrinking works on the genotype and would lose the edit");
  }
  const Profile profile = profile_for(o.config);
  std::unique_ptr<Target> target = make_target(o.target);
  Isolator isolator(*target, o.check.isolation);

  ShrinkResult result;
  const CaseOutcome first = check_case(isolator, input);
  if (first.pass()) return result;
  result.failed = true;

  const std::string kind = first.first_kind();
  ShrinkStats stats;
  const Genotype g_min = shrink_failure(isolator, *input.genotype, profile, kind, o.max_shrink_tries, stats, progress);
  Case minimal = materialize(g_min);
  FailureRecord& rec = result.record;
  rec.verdict = check_case(isolator, minimal).verdict;
  rec.shrink_tries = stats.tried;
  rec.shrink_accepted = stats.accepted;
  minimal.expect = Expectation{Expect::fail, std::string(to_string(rec.verdict.findings.front().kind))};
  minimal.provenance = input.provenance;
  minimal.provenance.command_line = o.command_line;
  minimal.provenance.target = o.target;
  rec.file = save_case(minimal, o.out_dir.empty() ? o.file.parent_path() : o.out_dir);
  rec.replay_command = replay_command(rec.file, o.target);
  describe_size(minimal, rec);
  progress.finish();
  return result;
}

}  // namespace kvf
