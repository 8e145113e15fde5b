// campaign.h — the fuzzing loop: generate -> materialize -> check -> on failure confirm, shrink,
// save, report. Also replay (corpus files, never shrinking) and shrink (one saved case).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "check.h"
#include "shard.h"
#include "case/validate.h"
#include "report/outcome.h"
#include "report/progress.h"

namespace kvf {

struct CampaignOptions : RunOptions {
  std::filesystem::path config;            // profile file; empty = built-in default profile
  int64_t cases = 1000;                    // stop after this many cases (0 = no case limit)
  double seconds = 0;                      // stop after this much time (0 = no time limit)
  uint64_t seed = 0;                       // campaign seed: case i is generated from (seed, i)
  std::filesystem::path corpus_out = "kvfuzz-findings";  // where minimal failing cases are saved
  int confirm_runs = 3;                    // re-runs of a failing case before it counts as confirmed
  bool stats = false;                      // count the feature buckets of every checked case (stats.h)
  int repeat = 1;                          // launches of every case, each on a fresh copy of its pre-run
                                           // arena; any failing one is the case's outcome (racy kernels)
  bool keep_going = false;                 // continue after the first confirmed failure
  int jobs = 1;                            // campaign threads, each with its own worker process
  int64_t max_shrink_tries = 2000;         // shrink candidates evaluated per failure at most
  std::string command_line;                // recorded in saved cases' provenance
  Shard shard;                             // --shard: only cases k with k mod count == index (of 0..cases-1)
  std::vector<int> devices;                // --devices: thread j runs on devices[j % size] (empty: --device)
};

// Runs a campaign. Throws InputError for a bad profile or target, InfraError for I/O failures.
CampaignResult run_campaign(const CampaignOptions& options, Progress& progress);

struct ReplayOptions : RunOptions {
  std::vector<std::filesystem::path> paths;  // case files and directories (searched for *.json)
  // false (default): a case passes when the kernel gives no finding, so a saved finding fails while
  // its bug is there and passes once it is fixed (a findings folder is a regression suite).
  // true (--expect-saved): a case passes when its outcome matches its file's `expect` (corpora that
  // pin known failures; the self-test's check that a saved case still fails as recorded).
  bool expect_saved = false;
};

// Reads every case first (any bad file: InputError, nothing runs), then replays each once: it
// passes when it gives no finding, or with expect_saved when its outcome matches the file's `expect`.
ReplayResult replay_cases(const ReplayOptions& options, Progress& progress);

// The case files `replay` would read from these files and folders, in its order.
std::vector<std::filesystem::path> find_case_files(const std::vector<std::filesystem::path>& paths);

struct ShrinkOptions : RunOptions {
  std::filesystem::path file;              // a failing case with a genotype
  std::filesystem::path config;            // profile whose value lists guide shrinking
  std::filesystem::path out_dir;           // where the minimal case goes; empty = beside `file`
  int64_t max_shrink_tries = 2000;
  std::string command_line;
};

struct ShrinkResult {
  bool failed = false;                     // the input case fails on the target (else nothing to do)
  std::string skipped;                     // non-empty: the kernel skipped the input case (KVFZ_APPEND_SKIP), why
  FailureRecord record;                    // minimal case, where it was saved, how it was found
};

ShrinkResult shrink_case(const ShrinkOptions& options, Progress& progress);

struct GenerateOptions {
  std::filesystem::path config;            // profile; empty = built-in default
  uint64_t seed = 0;                       // cases are those `run --seed` would check, in order
  int64_t cases = 10;                      // cases 0..cases-1 of the seed (those of `shard` among them)
  std::filesystem::path out_dir;           // where the cases go (<hash>.json, expect pass)
  std::string command_line;
  Shard shard;                             // --shard: only cases k with k mod count == index
  bool explicit_values = false;            // --explicit: each case's written rows as explicit inputs
};

// Materialises cases 0..cases-1 of a campaign without running them and saves each (a seed corpus
// for `replay`). Returns the files written.
std::vector<std::filesystem::path> generate_cases(const GenerateOptions& options);

// Installs SIGINT/SIGTERM handlers that ask running loops to stop after the current case.
void install_stop_handlers();
bool stop_requested();
int stop_signal();  // the first stop signal received (SIGINT, SIGTERM), 0 if none

}  // namespace kvf
