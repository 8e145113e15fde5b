// selftest.h — `kvfuzz selftest`: proves kvfuzz catches every mutant of the catalogue
// (mutant_catalogue.h, tests/mutants/mutants.json).
//
// For each rule: write a rewritten copy of the kernel sources; for CUDA rules compile it into a host
// plugin (examples/plugins/cuda/plugin.cpp + the copy's kv_append_emu.cpp, cached by a hash of the
// sources and the command), for Triton rules use the copy as the kvfuzz_triton package of the
// triton-interp target (KVFUZZ_TRITON_PKG). Then run a bounded campaign on it with this kvfuzz
// binary (a child `kvfuzz run`, so every launch stays isolated in its worker process) and require:
//   * the campaign fails (exit 1) with a confirmed, non-flaky failure whose first finding kind is one
//     the rule expects;
//   * the saved shrunk case replays as its expected failure on the mutant (exit 0)
//   * and fails its expectation on the clean kernel (exit 1): the case pins down this bug.
// A rule whose find text no longer matches is stale (exit 2), never a survivor.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mutant_catalogue.h"
#include "report/progress.h"

namespace kvf {

struct SelftestOptions {
  std::filesystem::path catalogue;   // mutants.json; empty = the source tree's tests/mutants/mutants.json
  std::filesystem::path source_dir;  // tree with kernels/, include/, examples/, configs/; empty = compiled-in
  std::filesystem::path work_dir = "kvfuzz-selftest";  // rewritten sources, plugin cache, campaign outputs
  std::filesystem::path self;        // kvfuzz executable the campaigns run with; empty = /proc/self/exe
  std::string cxx;                   // host compiler for plugins; empty = $CXX, then the configure-time one
  std::vector<std::string> targets;  // "plugin" (CUDA rules), "triton-interp" (Triton rules); empty = both
  std::string filter;                // run only rules whose name contains this
  bool list = false;                 // print the catalogue and what would run; run nothing
  int jobs = 1;                      // mutants processed in parallel
  uint64_t seed = 1;                 // campaign seed of every mutant
  std::string python;                // --python for triton-interp campaigns; empty = kvfuzz's default
  double timeout_s = 30;             // --timeout of each campaign's launches
  bool metamorphic_only = false;     // only the metamorphic checks (clean kernel + rules naming relations)
  int64_t metamorphic_trials = 200;  // random batches per relation
};

enum class MutantStatus : uint8_t {
  killed,      // caught, shrunk, and the case replays on the mutant and fails on the clean kernel
  survived,    // the campaign passed every case
  weak,        // caught, but the kind, the flakiness or a replay did not meet the contract above
  stale,       // the rule's find text no longer matches the kernel source
  error,       // the mutant could not be built or run (compiler, missing target)
  skipped,     // GPU-only rule on the CPU
};
const char* to_string(MutantStatus s);

struct MutantResult {
  MutantRule rule;
  std::string target;            // what the campaign ran on ("plugin", "triton-interp")
  MutantStatus status = MutantStatus::error;
  std::string detail;            // why it is not killed, or the gpu_only reason; the finding sentence when killed
  std::string kind;              // first finding kind of the shrunk case
  int64_t cases_to_kill = 0;     // index of the first failing case + 1
  double seconds = 0;            // campaign wall time (generation, checks, shrinking)
  double build_seconds = 0;      // compiling the plugin (0 when cached)
  bool build_cached = false;
  int64_t requests = 0, tokens = 0, heads = 0, head_dim = 0;  // size of the shrunk case
  std::filesystem::path case_file;  // the saved shrunk case
  std::vector<std::string> metamorphic_caught;  // relations the mutant violated (rules naming relations)
  bool small() const { return requests <= 2 && tokens <= 8; }
};

struct SelftestResult {
  std::vector<MutantResult> mutants;
  std::vector<PatternWithoutMutant> not_applicable;
  bool clean_checked = false;                  // the metamorphic relations ran on the clean kernel
  std::vector<std::string> clean_violations;   // relations the clean kernel broke (must be none)
  std::string clean_error;                     // why they could not run
  int64_t metamorphic_trials = 0;
  double seconds = 0;
  int64_t passed() const;   // killed
  int64_t failed() const;   // everything run that was not killed
  int64_t skipped() const;
  bool stale() const;
  bool infra_error() const;
  double median_cases_to_kill() const;
};

// Runs the self-test. Throws InputError for a bad catalogue or option, InfraError when nothing can run.
SelftestResult run_selftest(const SelftestOptions& options, Progress& progress);

// Renderers (terminal table, JSON summary, JUnit XML).
std::string render_selftest_table(const SelftestResult& r);
nlohmann::json selftest_json(const SelftestResult& r, const std::string& command_line);
std::string selftest_junit(const SelftestResult& r, const std::string& command_line);

}  // namespace kvf
