// campaign.cpp — the run loop (generate, check, confirm, shrink, save), replay and shrink.
#include "campaign.h"
#include "jobs.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <chrono>
#include <csignal>
#include <mutex>
#include <set>
#include <thread>

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include "case/case_json.h"
#include "base/errors.h"
#include "gen/capabilities.h"
#include "gen/generate.h"
#include "gen/materialize.h"
#include "gen/shrink.h"
#include "values/payload.h"
#include "signature.h"
#include "stats.h"

namespace kvf {

namespace {

std::atomic<int> g_stop{0};  // the first stop signal received, 0 if none

// The first ^C (or SIGTERM) asks the campaign to stop after the current case, keeping every
// confirmed failure and printing the summary; a second one ends the process at once (files are
// written atomically, so nothing partial is left; a worker dies with its parent).
extern "C" void on_stop_signal(int sig) {
  int none = 0;
  if (!g_stop.compare_exchange_strong(none, sig)) {
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  static const char kNote[] = "\nkvfuzz: stopping after the current case (again to quit at once)\n";
  [[maybe_unused]] const ssize_t n = ::write(2, kNote, sizeof kNote - 1);
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void describe_size(const Case& c, FailureRecord& r) {
  r.requests = static_cast<int64_t>(c.requests.size());
  r.tokens = c.num_slots();
  r.heads = c.num_heads;
  r.head_dim = c.head_dim;
}

Profile profile_for(const std::filesystem::path& config) {
  return config.empty() ? default_profile() : load_profile(config);
}

// Confirms a failure by re-running; true when every re-run fails with the same identity
// (signature.h: kind, victim and writer classes, refusal message).
bool confirm(Isolator& isolator, const Case& c, const std::string& identity, int runs, const TolerancePolicy& tolerance) {
  for (int i = 0; i < runs; ++i) {
    const CaseOutcome again = check_case(isolator, c, tolerance);
    if (identity_of(again.verdict) != identity) return false;
  }
  return true;
}

// Shrinks a failing genotype to a minimal one failing with the same identity (signature.h: the same
// bug, not only the same kind), taking only candidates inside the target's capabilities. A candidate
// the kernel skips (KVFZ_APPEND_SKIP) shows nothing about the bug: it is not taken, and counted in
// `skips` by reason. `make` turns a candidate into its case (materialize, and for a case with explicit
// inputs those carried over).
Genotype shrink_failure(Isolator& isolator, const Genotype& g, const CaseSource& source, const std::string& identity,
                        const TolerancePolicy& tolerance, int64_t max_tries, ShrinkStats& stats,
                        std::map<std::string, int64_t>& skips, Progress& progress,
                        const std::function<Case(const Genotype&)>& make = materialize) {
  return shrink_to_minimal(
      g, source.profile(),
      [&](const Genotype& candidate) {
        if (stop_requested()) return false;
        const Case c = make(candidate);
        if (!validate(c).empty() || !source.outside_reason(c).empty()) return false;  // e.g. a head_dim x-packing cannot take
        const CaseOutcome o = check_case(isolator, c, tolerance);
        if (!o.skipped.empty()) {
          ++skips[o.skipped];
          return false;
        }
        return identity_of(o.verdict) == identity;
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

bool stop_requested() { return g_stop.load() != 0; }

int stop_signal() { return g_stop.load(); }

namespace {

// Serialises a Progress shared by campaign threads.
class LockedProgress final : public Progress {
 public:
  LockedProgress(Progress& inner, std::mutex& mutex) : inner_(inner), mutex_(mutex) {}
  void update(int64_t cases, int64_t passed, int64_t failed, const std::string& phase) override {
    std::lock_guard<std::mutex> lock(mutex_);
    inner_.update(cases, passed, failed, phase);
  }
  void event(const std::string& line) override {
    std::lock_guard<std::mutex> lock(mutex_);
    inner_.event(line);
  }
  void finish() override {
    std::lock_guard<std::mutex> lock(mutex_);
    inner_.finish();
  }

 private:
  Progress& inner_;
  std::mutex& mutex_;
};

// What the campaign threads share; every field is guarded by `mutex`.
struct CampaignState {
  std::mutex mutex;
  std::mutex progress_mutex;
  int64_t next = 0;   // next case index to check
  bool stop = false;  // a failure (without --keep-going), ^C, or the budget ends the campaign
  CampaignResult result;
  std::set<std::string> saved;  // files already reported (with --keep-going)
};

// One bug, one finding (signature.h): the signatures this campaign has handled, and the folder's index.
struct Dedup {
  std::mutex mutex;
  std::set<std::string> seen;  // signature texts of failing and minimal cases handled by this run
  FindingsIndex index;         // --corpus-out's signatures.kvfuzz-index
  explicit Dedup(const std::filesystem::path& folder) : index(folder) {}
  bool seen_before(const Signature& s) {
    std::lock_guard<std::mutex> lock(mutex);
    return !seen.insert(s.text()).second;
  }
  void remember(const Signature& s) {
    std::lock_guard<std::mutex> lock(mutex);
    seen.insert(s.text());
  }
};

// Confirms a failing case; unless its signature is known (to this run or the folder's index),
// shrinks it and saves the minimal case unless the index holds a case of its signature that is no
// larger. Returns the record; `duplicate` set when nothing new was saved.
FailureRecord handle_failure(Isolator& isolator, const CampaignOptions& o, const CaseSource& source, Dedup& dedup,
                             const Genotype& g, const Case& c, const CaseOutcome& outcome, int64_t index,
                             double elapsed, Progress& progress) {
  const std::string kind = outcome.first_kind();
  const std::string identity = identity_of(outcome.verdict);
  FailureRecord rec;
  rec.case_index = index;
  rec.target = o.target;
  rec.seconds_to_find = elapsed;

  Case minimal = c;
  Verdict verdict = outcome.verdict;
  rec.flaky = !confirm(isolator, c, identity, o.confirm_runs, o.check.tolerance);
  const Signature first = signature_of(c, outcome.verdict);
  rec.case_signature = first.text();
  rec.case_signature_id = first.id();
  // The index holds a case of `s` (no larger than `size`, when given): a duplicate of that case.
  const auto known = [&](const Signature& s, const CaseSize* size) -> bool {
    const std::optional<FindingsIndex::Entry> e = dedup.index.find(s.id());
    if (!e || (size != nullptr && *size < e->size)) return false;
    dedup.index.count(s.id());
    rec.duplicate = true;
    rec.file = dedup.index.folder() / e->file;
    rec.replay_command = o.invocation.command("replay", rec.file, o.target);
    rec.locate_command = o.invocation.locate(verdict, rec.file, o.target, isolator.target().info().needs_gpu);
    return true;
  };
  if (!rec.flaky && (dedup.seen_before(first) || known(first, nullptr))) {
    rec.duplicate = true;
    rec.signature = first.text();
    rec.signature_id = first.id();
    rec.verdict = verdict;
    describe_size(minimal, rec);
    return rec;
  }
  progress.event("kvfuzz: NEW-FAIL case #" + std::to_string(index) + " (" + kind + "): " +
                 outcome.verdict.findings.front().sentence);
  if (rec.flaky) {
    progress.event("kvfuzz: case #" + std::to_string(index) + " did not fail on every re-run: flaky, not shrunk");
  } else {
    ShrinkStats stats;
    const Genotype g_min =
        shrink_failure(isolator, g, source, identity, o.check.tolerance, o.max_shrink_tries, stats, rec.shrink_skips, progress);
    rec.shrink_tries = stats.tried;
    rec.shrink_accepted = stats.accepted;
    minimal = materialize(g_min);
    verdict = check_case(isolator, minimal, o.check.tolerance).verdict;
    if (identity_of(verdict) != identity) {  // cannot happen for a deterministic target; keep the original then
      minimal = c;
      verdict = outcome.verdict;
    }
  }
  const Signature sig = signature_of(minimal, verdict);
  rec.signature = sig.text();
  rec.signature_id = sig.id();
  rec.verdict = verdict;
  describe_size(minimal, rec);
  dedup.remember(sig);
  const CaseSize size = size_of(minimal);
  if (!rec.flaky && known(sig, &size)) return rec;  // the folder has it already, as small or smaller
  minimal.expect = Expectation{Expect::fail, verdict.pass() ? "" : std::string(to_string(verdict.findings.front().kind))};
  minimal.provenance = Provenance{std::to_string(o.seed), index, KVFUZZ_VERSION, o.command_line, o.target, target_digest(o.target)};
  try {
    rec.file = save_case(minimal, rec.flaky ? o.corpus_out / "flaky" : o.corpus_out);
    rec.replay_command = o.invocation.command("replay", rec.file, o.target);
    rec.locate_command = o.invocation.locate(verdict, rec.file, o.target, isolator.target().info().needs_gpu);
    if (!rec.flaky) dedup.index.offer(sig, std::filesystem::relative(rec.file, o.corpus_out).string(), size);
  } catch (const InfraError& e) {
    // Disk full, say: the finding is still reported (exit 3), and the case that could not be
    // written goes to stderr whole, so nothing is lost.
    rec.save_error = e.what();
    progress.event("kvfuzz: could not save case #" + std::to_string(index) + ": " + rec.save_error +
                   "\nkvfuzz: the unsaved case follows\n" + case_to_json(minimal).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  return rec;
}

// One campaign thread: takes the next case index of its shard until the campaign stops. Each
// thread has its own target object and worker process; with --devices, thread `thread_no` runs on
// device o.devices[thread_no % size] (its DeviceUse in st.result.devices).
void campaign_thread(CampaignState& st, const CampaignOptions& campaign, const CaseSource& source, Dedup& dedup,
                     Progress& progress, Clock::time_point start, int thread_no) {
  CampaignOptions o = campaign;  // this thread's: its device, and reproduction lines that name it
  DeviceUse* device_use = nullptr;
  if (!o.devices.empty()) {
    const size_t d = static_cast<size_t>(thread_no) % o.devices.size();
    o.target_options.device = o.devices[d];
    device_use = &st.result.devices[d];
    if (o.devices[d] != 0) o.invocation.options.insert(o.invocation.options.end(), {"--device", std::to_string(o.devices[d])});
  }
  std::unique_ptr<Target> target = make_target(o.target, o.target_options);
  Isolator isolator(*target, o.check.isolation);
  int64_t checked = 0;  // cases this thread checked (passed or failed)
  struct AddEvents {  // on every way out, also an exception
    CampaignState& st;
    Isolator& isolator;
    DeviceUse* device_use;
    const int64_t& checked;
    ~AddEvents() {
      std::lock_guard<std::mutex> lock(st.mutex);
      st.result.workers.add(isolator.events());
      if (device_use != nullptr) device_use->cases += checked;
    }
  } add_events{st, isolator, device_use, checked};
  for (;;) {
    int64_t i = 0;
    {
      std::lock_guard<std::mutex> lock(st.mutex);
      if (stop_requested()) {
        st.result.interrupted = true;
        st.stop = true;
      }
      i = o.shard.case_at(st.next);  // the shard's next case: index, index + count, ...
      if (st.stop || (o.cases != 0 && i >= o.cases) || (o.seconds > 0 && seconds_since(start) >= o.seconds))
        return;
      ++st.next;
    }
    // Every draw of a case index that does not run is a skip, by its reason: outside the capabilities
    // (draw() has redrawn it already) or declined by the kernel (KVFZ_APPEND_SKIP: redrawn here, up
    // to kKernelRedraws times). `replaced` counts the redraws that took a skipped draw's place, so
    // skipped - replaced is the number of indices that ran nothing.
    constexpr int kKernelRedraws = 8;
    const auto draw_began = std::chrono::steady_clock::now();
    DrawnCase drawn = source.draw(o.seed, i);
    if (!drawn.outside.empty()) {
      std::lock_guard<std::mutex> lock(st.mutex);
      ++st.result.skipped;
      ++st.result.skip_reasons[drawn.outside];
      if (drawn.skipped) continue;
      ++st.result.replaced;
    }
    StageSeconds stages;
    stages.draw = std::chrono::duration<double>(std::chrono::steady_clock::now() - draw_began).count();
    CaseOutcome outcome;
    int redraws = 0;
    for (;;) {
      // --repeat: a kernel right most of the time (a race) fails on some launch of the case.
      outcome = check_case(isolator, drawn.kase, o.check.tolerance);
      stages += outcome.stages;
      for (int r = 1; r < o.repeat && outcome.pass() && !stop_requested(); ++r) {
        outcome = check_case(isolator, drawn.kase, o.check.tolerance);
        stages += outcome.stages;
      }
      if (outcome.skipped.empty()) break;
      {
        std::lock_guard<std::mutex> lock(st.mutex);
        ++st.result.skipped;
        ++st.result.skip_reasons[outcome.skipped];
      }
      const auto again = std::chrono::steady_clock::now();
      bool found = false;
      while (!found && redraws < kKernelRedraws && !stop_requested()) {
        drawn = source.redraw(o.seed, i, redraws++);
        found = drawn.outside.empty();
      }
      stages.draw += std::chrono::duration<double>(std::chrono::steady_clock::now() - again).count();
      if (!found) break;  // declined every time: the index runs nothing
      std::lock_guard<std::mutex> lock(st.mutex);
      ++st.result.replaced;
    }
    const Genotype& g = drawn.genotype;
    const Case& c = drawn.kase;
    std::vector<std::string> buckets;  // --stats: the case that ran
    if (o.stats && outcome.skipped.empty()) buckets = feature_buckets(c);
    {
      std::lock_guard<std::mutex> lock(st.mutex);
      st.result.stages += stages;
      if (!outcome.skipped.empty()) continue;  // counted above
      for (const std::string& b : buckets) ++st.result.stats[b];
      ++st.result.formats[format_family(c)];
      if (outcome.pass()) {
        ++checked;
        ++st.result.cases;
        ++st.result.passed;
        progress.update(st.result.cases, st.result.passed, st.result.failed, "fuzzing");
        continue;
      }
      if (stop_requested()) {  // a ^C that raced the case: do not report it as a failure
        st.result.interrupted = true;
        st.stop = true;
        return;
      }
      if (st.stop) return;  // another thread's failure ended the campaign first
      ++checked;
      ++st.result.cases;
      if (!o.keep_going) st.stop = true;
    }
    const FailureRecord rec = handle_failure(isolator, o, source, dedup, g, c, outcome, i, seconds_since(start), progress);
    std::lock_guard<std::mutex> lock(st.mutex);
    ++st.result.failed;
    st.result.failing_cases.push_back(FailingCase{i, rec.case_signature, rec.case_signature_id});
    if (rec.duplicate) {  // a known signature: counted, not saved again
      DuplicateFindings& d = st.result.duplicates[rec.signature_id];
      d.signature = rec.signature;
      d.file = rec.file;
      ++d.count;
      progress.update(st.result.cases, st.result.passed, st.result.failed, "fuzzing");
      continue;
    }
    if (!rec.save_error.empty()) st.stop = true;  // the disk is full or gone: stop, exit 3
    if (rec.file.empty() || st.saved.insert(rec.file.string()).second) st.result.failures.push_back(rec);
    progress.update(st.result.cases, st.result.passed, st.result.failed, "fuzzing");
  }
}

// CPU seconds (user + system) of this process and of its waited-for children (the workers).
double host_cpu_seconds() {
  const auto seconds = [](const rusage& u) {
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  };
  rusage self{}, children{};
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  return seconds(self) + seconds(children);
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  return CPU_COUNT(&set);
}

}  // namespace

CampaignResult run_campaign(const CampaignOptions& o, Progress& progress) {
  const Profile profile = profile_for(o.config);
  // Unknown or unavailable target, or a profile with nothing the target supports: throw before any
  // thread starts.
  const CaseSource source(profile, open_target(o.target, o.target_options)->capabilities());
  // A --corpus-out that cannot hold cases is refused now, not after hours of fuzzing.
  check_output_directory(o.corpus_out, "--corpus-out");
  Dedup dedup(o.corpus_out);  // reads the folder's signature index (a bad one: exit 2, before any case)

  CampaignState st;
  st.result.target = o.target;
  st.result.profile = profile.name;
  st.result.seed = std::to_string(o.seed);
  st.result.tolerance = to_string(o.check.tolerance);
  st.result.shard_index = o.shard.index;
  st.result.shard_count = o.shard.count;
  st.result.shard_from = o.shard.from;
  st.result.case_limit = o.cases;
  for (const int d : o.devices) st.result.devices.push_back(DeviceUse{d, 0, 0});
  for (int j = 0; j < std::max(1, o.jobs) && !o.devices.empty(); ++j) ++st.result.devices[static_cast<size_t>(j) % o.devices.size()].workers;
  LockedProgress locked(progress, st.progress_mutex);

  const double cpu_before = host_cpu_seconds();
  const auto start = Clock::now();
  std::atomic<int> threads{0};
  run_jobs(
      o.jobs, [&] { campaign_thread(st, o, source, dedup, locked, start, threads++); },
      [&] {
        std::lock_guard<std::mutex> lock(st.mutex);
        st.stop = true;
      });

  std::sort(st.result.failures.begin(), st.result.failures.end(),
            [](const FailureRecord& a, const FailureRecord& b) { return a.case_index < b.case_index; });
  std::sort(st.result.failing_cases.begin(), st.result.failing_cases.end(),
            [](const FailingCase& a, const FailingCase& b) { return a.case_index < b.case_index; });
  st.result.seconds = seconds_since(start);
  st.result.host_cpu_seconds = host_cpu_seconds() - cpu_before;  // every worker has been reaped by now
  st.result.host_cores = usable_cores();
  st.result.stop_signal = st.result.interrupted ? stop_signal() : 0;
  progress.finish();
  return st.result;
}

namespace {

// The case files among `p` (a file, read as a case whatever it holds, or a folder searched for
// *.json). In a folder, a file whose JSON object names a schema other than "kvfuzz-case" (a
// `--json` summary, a report) is another output, not a case: it goes to `not_cases`. Every other
// *.json file is a case, and a bad one stops the replay.
void collect_json_files(const std::filesystem::path& p, std::vector<std::filesystem::path>& out,
                        std::vector<SkippedFile>& not_cases) {
  std::error_code ec;
  if (std::filesystem::is_directory(p, ec)) {
    std::vector<std::filesystem::path> found;
    for (auto it = std::filesystem::recursive_directory_iterator(p, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      // Reports written next to saved cases (<hash>.report/report.json) are not cases.
      if (it->is_directory(ec) && it->path().extension() == ".report") {
        it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file(ec) && it->path().extension() == ".json") found.push_back(it->path());
    }
    if (ec) throw InputError(p.string(), "", "cannot list the directory: " + ec.message());
    std::sort(found.begin(), found.end());
    for (const auto& f : found) {
      const std::string schema = json_file_schema(f);
      if (schema.empty() || schema == kCaseSchemaName) {
        out.push_back(f);
      } else {
        not_cases.push_back(SkippedFile{f, "schema " + schema});
      }
    }
    return;
  }
  if (!std::filesystem::exists(p, ec)) throw InputError(p.string(), "", "no such file or directory");
  out.push_back(p);
}

bool matches_expectation(const Expectation& e, const CaseOutcome& o) {
  if (e.outcome == Expect::pass) return o.pass();
  if (o.pass()) return false;
  return e.finding_kind.empty() || e.finding_kind == o.first_kind();
}

}  // namespace

ReplayResult replay_cases(const ReplayOptions& o, Progress& progress) {
  std::vector<std::filesystem::path> files;
  ReplayResult result;
  for (const auto& p : o.paths) collect_json_files(p, files, result.not_cases);
  if (files.empty()) throw InputError("", "", "no case files (*.json) found in the given paths");

  std::vector<Case> cases;  // read everything first: a bad file means nothing runs
  cases.reserve(files.size());
  for (const auto& f : files) cases.push_back(read_case_file(f, o.limits));

  // Every target the cases need, opened before the first case runs (one that cannot be: exit 3).
  std::map<std::string, OpenTarget> targets = open_targets_for(o, cases, files, result.target);
  result.expect_saved = o.expect_saved;
  const auto start = Clock::now();
  for (size_t i = 0; i < files.size(); ++i) {
    if (stop_requested()) {
      result.interrupted = true;
      break;
    }
    const std::string name = target_for(o, cases[i]);
    OpenTarget& t = targets.at(name);
    if (const std::string why = t.caps ? outside_reason(cases[i], *t.caps) : ""; !why.empty()) {
      ++result.skipped;  // a case the kernel does not claim to support: not run
      ++result.skip_reasons[why];
      result.skipped_files.push_back(SkippedFile{files[i], why});
      continue;
    }
    ReplayItem item;
    item.file = files[i];
    item.target = name;
    item.found_on = cases[i].provenance.target;
    item.same_code = item.found_on == name && !cases[i].provenance.target_digest.empty() &&
                     cases[i].provenance.target_digest == target_digest(name);
    item.recorded = cases[i].expect;
    item.expected = o.expect_saved ? item.recorded : Expectation{};
    item.replay_command = o.invocation.command("replay", item.file, name);
    item.report_command = o.invocation.command("report", item.file, name);
    item.outcome = check_case(*t.isolator, cases[i], t.check.tolerance);
    item.locate_command = o.invocation.locate(item.outcome.verdict, item.file, name, t.target->info().needs_gpu);
    if (!item.outcome.skipped.empty()) {  // the kernel declined it (KVFZ_APPEND_SKIP): not run
      ++result.skipped;
      ++result.skip_reasons[item.outcome.skipped];
      continue;
    }
    item.as_expected = o.expect_saved ? matches_expectation(cases[i].expect, item.outcome) : item.outcome.pass();
    result.items.push_back(std::move(item));
    progress.update(static_cast<int64_t>(result.items.size()), result.passed(), result.failed(), "replaying");
  }
  result.seconds = seconds_since(start);
  result.stop_signal = result.interrupted ? stop_signal() : 0;
  for (auto& [name, t] : targets) {
    const WorkerEvents e = t.isolator->events();
    result.workers.add(e);
  }
  progress.finish();
  return result;
}

std::vector<std::filesystem::path> find_case_files(const std::vector<std::filesystem::path>& paths) {
  std::vector<std::filesystem::path> files;
  std::vector<SkippedFile> not_cases;  // other kvfuzz outputs (summaries) in a folder: not cases
  for (const auto& p : paths) collect_json_files(p, files, not_cases);
  return files;
}

std::vector<std::filesystem::path> generate_cases(const GenerateOptions& o) {
  const Profile profile = profile_for(o.config);
  std::vector<std::filesystem::path> files;
  for (int64_t i = o.shard.index; i < o.cases; i += o.shard.count) {
    Case c = materialize(generate_case(profile, o.seed, i));
    if (o.explicit_values) c.explicit_inputs = golden::explicit_inputs_of_payload(c);
    c.provenance = Provenance{std::to_string(o.seed), i, KVFUZZ_VERSION, o.command_line, "", ""};
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
  // Explicit input values ride along: each candidate's rows take the values of the same tokens.
  const std::function<Case(const Genotype&)> make = [&input](const Genotype& g) {
    Case c = materialize(g);
    c.explicit_inputs = golden::explicit_inputs_carried(input, c);
    return c;
  };
  const Case rebuilt = make(*input.genotype);
  if (case_hash(rebuilt) != case_hash(input)) {
    throw InputError(o.file.string(), "",
                     "the batch differs from what its genotype materialises to (was the file edited?); "
                     "shrinking works on the genotype and would lose the edit (input values belong in \"explicit_inputs\")");
  }
  std::unique_ptr<Target> target = open_target(o.target, o.target_options);
  const CaseSource source(profile_for(o.config), target->capabilities());
  Isolator isolator(*target, o.check.isolation);

  ShrinkResult result;
  const CaseOutcome first = check_case(isolator, input, o.check.tolerance);
  if (!first.skipped.empty()) {  // the kernel declined the case itself: nothing to shrink
    result.skipped = first.skipped;
    return result;
  }
  if (first.pass()) return result;
  result.failed = true;

  ShrinkStats stats;
  FailureRecord& rec = result.record;
  const Genotype g_min = shrink_failure(isolator, *input.genotype, source, identity_of(first.verdict), o.check.tolerance,
                                        o.max_shrink_tries, stats, rec.shrink_skips, progress, make);
  Case minimal = make(g_min);
  rec.verdict = check_case(isolator, minimal, o.check.tolerance).verdict;
  if (rec.verdict.pass()) {  // cannot happen for a deterministic target; keep the input then
    minimal = input;
    rec.verdict = first.verdict;
  }
  rec.shrink_tries = stats.tried;
  rec.shrink_accepted = stats.accepted;
  minimal.expect = Expectation{Expect::fail, std::string(to_string(rec.verdict.findings.front().kind))};
  minimal.provenance = input.provenance;
  minimal.provenance.command_line = o.command_line;
  minimal.provenance.target = o.target;
  minimal.provenance.target_digest = target_digest(o.target);
  rec.file = save_case(minimal, o.out_dir.empty() ? o.file.parent_path() : o.out_dir);
  rec.target = o.target;
  rec.replay_command = o.invocation.command("replay", rec.file, o.target);
  rec.locate_command = o.invocation.locate(rec.verdict, rec.file, o.target, isolator.target().info().needs_gpu);
  describe_size(minimal, rec);
  progress.finish();
  return result;
}

}  // namespace kvf
