// outcome.h — results of checking cases and running campaigns, as plain values.
//
// Rendering (terminal lines, JSON summary) lives in render.h; nothing here prints.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "arena/finding.h"
#include "case/case.h"
#include "case/genotype.h"

namespace kvf {

// The skip reason of a case the kernel declined when run (KVFZ_APPEND_SKIP, a Python target's skip)
// is this prefix and the kernel's text; every other skip reason is outside the target's capabilities.
inline constexpr std::string_view kKernelSkipPrefix = "skipped by the kernel: ";
inline bool is_kernel_skip(std::string_view reason) { return reason.substr(0, kKernelSkipPrefix.size()) == kKernelSkipPrefix; }

// Where the host time of checking cases goes, stage by stage, in seconds of wall time of the thread
// that checks them (a campaign sums its threads: `run --stats`, the summary's "stages").
struct StageSeconds {
  double draw = 0;        // generate and materialise the case (campaigns only)
  double arena_fill = 0;  // plan the arena and give every byte its pre-run value
  double golden = 0;      // copy the arena and run the golden model on it
  double handoff = 0;     // copy the image to the worker and hand it the case, until the target starts (retries too)
  double target = 0;      // the target's run: device copies, launch and kernel (in the worker, or in process)
  double copy_back = 0;   // the image back from the worker
  double diff = 0;        // compare the whole image with the expectation
  StageSeconds& operator+=(const StageSeconds& o);
  double total() const { return draw + arena_fill + golden + handoff + target + copy_back + diff; }
};

// The result of one case on one target. A run that did not finish (crash, timeout, launch error)
// is a Verdict with a single finding of that kind.
struct CaseOutcome {
  Verdict verdict;
  double seconds = 0;  // wall time of build + run + verify
  StageSeconds stages;  // `seconds`, stage by stage (draw 0)
  // Non-empty when the kernel declined the case (a plugin's KVFZ_APPEND_SKIP): "skipped by the
  // kernel: REASON". Such a case neither passes nor fails; campaigns count it as skipped by reason.
  std::string skipped;
  bool pass() const { return verdict.pass() && skipped.empty(); }
  // Kind of the most severe finding ("" when the case passed).
  std::string first_kind() const;
};

// What happened to worker processes (campaign/isolation.h): infrastructure events, never findings.
struct WorkerEvents {
  int64_t started = 0;           // worker processes started (each runs Target::start() once)
  double slowest_start_s = 0;    // longest start-up, fork to ready, of any worker
  int64_t failed_starts = 0;     // workers replaced because they did not start (an error, a death, or
                                 // past the start limit) or did not read a case in time
  int64_t deaths_retried = 0;    // deaths (signal, exit) mid-case that did not repeat on a fresh worker
  int64_t hangs_retried = 0;     // timeouts that did not repeat on a fresh worker
  int64_t recycled_memory = 0;   // workers replaced after a case for holding more private memory than the limit
  int64_t recycled_threads = 0;  // workers replaced after a case for running more threads than the limit
  void add(const WorkerEvents& o);
  // Events that replaced a worker for a reason other than recycling.
  int64_t infrastructure() const { return failed_starts + deaths_retried + hangs_retried; }
};

// One failure a campaign found, confirmed and shrunk.
struct FailureRecord {
  std::filesystem::path file;   // saved minimal case (<hash>.json); empty when saving failed
  std::string save_error;       // why the case could not be saved (disk full, ...); empty when saved
  Verdict verdict;              // findings of the minimal case
  bool flaky = false;           // did not fail on every confirmation run; saved unshrunk
  int64_t case_index = -1;      // index of the original failing case in the campaign
  double seconds_to_find = 0;   // campaign time until the original failure
  int64_t shrink_tries = 0;     // shrink candidates evaluated
  int64_t shrink_accepted = 0;  // shrink steps taken
  std::map<std::string, int64_t> shrink_skips;  // shrink candidates the kernel skipped (not taken), by reason
  int64_t requests = 0, tokens = 0, heads = 0, head_dim = 0;  // size of the minimal case
  std::string target;           // the target it failed on
  std::string replay_command;   // copy-pastable command that reproduces it
  std::string locate_command;   // Invocation::locate(): how to see where a crash happened ("" if not one)
  std::string signature;        // campaign/signature.h: Signature::text() of the minimal case
  std::string signature_id;     // its 16-hex-digit id
  std::string case_signature;   // Signature::text() of the failing case as drawn (before shrinking):
                                // a function of the case alone, whatever ran before it (shards, -j)
  std::string case_signature_id;
  bool duplicate = false;       // its signature was known (this run or the folder's index): not saved again;
                                // `file` is then the known case
};

// Failures of one known signature a campaign did not save again.
struct DuplicateFindings {
  std::string signature;        // Signature::text()
  std::filesystem::path file;   // the case the index holds for it (empty if only this run's failing case)
  int64_t count = 0;
};

// A failing case of a campaign, by index (shrunk and saved or not): what `--shard` runs and
// `merge` of their summaries compare with a single run (docs/scale.md).
struct FailingCase {
  int64_t case_index = -1;
  std::string signature;     // FailureRecord::case_signature
  std::string signature_id;
};

// The cases one device's campaign threads checked (`run --devices`).
struct DeviceUse {
  int device = 0;
  int workers = 0;           // campaign threads (each with its worker process) on this device
  int64_t cases = 0;         // cases they checked (passed and failed)
};

struct CampaignResult {
  std::string target;
  std::string profile;
  std::string seed;             // campaign seed as a decimal string
  std::string tolerance;        // value policy the campaign used ("exact", "ulp:N", ...)
  int64_t cases = 0;            // cases generated and checked
  int64_t passed = 0;
  int64_t failed = 0;           // confirmed failures and flaky cases
  double seconds = 0;
  bool interrupted = false;     // stopped by SIGINT/SIGTERM
  int stop_signal = 0;          // the signal that interrupted it (SIGINT, SIGTERM), 0 if none
  std::vector<FailureRecord> failures;
  WorkerEvents workers;         // infrastructure events of all campaign threads' workers
  std::map<std::string, DuplicateFindings> duplicates;  // by signature id: failures of known signatures
  std::map<std::string, int64_t> stats;  // --stats: checked cases per feature bucket ("layout=paged_nhd")
  std::map<std::string, int64_t> formats;  // checked cases per format family (campaign/stats.h format_family)
  int64_t flaky() const;        // failures that did not repeat on every confirmation run
  bool save_failed() const;     // some finding could not be saved (exit 3)
  // Drawn cases outside the target's capabilities (gen/capabilities.h; plugins and Python targets
  // declare them): each was replaced by a case drawn inside them, or, where none could be drawn, not
  // run; and cases the kernel skipped when run (KVFZ_APPEND_SKIP, reason "skipped by the kernel: ..."),
  // not run. Each case counts once, under the last reason.
  int64_t skipped = 0;
  int64_t replaced = 0;                           // skipped cases replaced (skipped - replaced were not run)
  std::map<std::string, int64_t> skip_reasons;    // skipped cases by reason ("layout packed_kv_nhd")
  double cases_per_second() const { return seconds > 0 ? cases / seconds : 0; }
  int64_t shard_index = 0, shard_count = 1;  // --shard (count 1: the whole campaign)
  std::string shard_from;                    // "i/N", "slurm", "k8s"; "" without --shard
  int64_t case_limit = 0;                    // --cases (0: none): the campaign's cases, all shards together
  std::vector<FailingCase> failing_cases;    // every failing case, by case index
  std::vector<DeviceUse> devices;            // --devices: per device; empty without it
  double host_cpu_seconds = 0;               // CPU time of kvfuzz and its workers during the campaign
  StageSeconds stages;                       // the checked cases' host time by stage, summed over threads
  int host_cores = 0;                        // cores this process may use (sched_getaffinity)
};

// One replayed corpus file.
struct ReplayItem {
  std::filesystem::path file;
  std::string target;      // the target it ran on (RunOptions::target_given: named, else the file's)
  std::string found_on;    // the target the file records it was found on ("" if none)
  bool same_code = false;  // found_on is target and its code file is byte-identical to the recorded one
  Expectation recorded;    // the file's `expect`
  Expectation expected;    // what counts as passing: pass, or with --expect-saved `recorded`
  std::string replay_command;  // Invocation::command("replay", file, target)
  std::string report_command;  // Invocation::command("report", file, target)
  std::string locate_command;  // Invocation::locate() of its outcome ("" unless it crashed)
  CaseOutcome outcome;
  bool as_expected = false;  // outcome agrees with the file's expect
};

// A *.json file replay did not run, and why.
struct SkippedFile {
  std::filesystem::path file;
  std::string reason;  // "layout packed_kv_nhd" (outside the capabilities), "schema kvfuzz-summary" (not a case)
};

struct ReplayResult {
  std::string target;  // the targets the cases ran on, ", "-separated, in order of first use
  bool expect_saved = false;  // outcomes compared with each file's `expect` (else: no finding = pass)
  std::vector<ReplayItem> items;
  double seconds = 0;
  bool interrupted = false;
  int stop_signal = 0;  // the signal that interrupted it, 0 if none
  WorkerEvents workers;
  // Case files outside the target's capabilities (gen/capabilities.h), or skipped by the kernel when
  // run (KVFZ_APPEND_SKIP): not in `items`.
  int64_t skipped = 0;
  std::map<std::string, int64_t> skip_reasons;  // by reason ("layout packed_kv_nhd")
  std::vector<SkippedFile> skipped_files;       // those files, in replay order (`skipped` of them)
  // Files found in a given folder whose JSON "schema" names another kvfuzz output (a summary, a
  // report), not a case: not read as cases (docs/corpus-format.md "Replaying a folder").
  std::vector<SkippedFile> not_cases;
  int64_t passed() const;
  int64_t failed() const;
};

}  // namespace kvf
