// check.h — one case, end to end: arena, golden expectation, isolated run, whole-arena diff.
//
// A case whose cache section is larger than IsolationOptions::windowed_above_bytes runs windowed
// (arena/windows.h): its arenas materialise the windows only, and the target checks the rest of the
// cache against the fill pattern (CaseRun::outside).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "arena/arena.h"
#include "report/verdict.h"
#include "isolation.h"
#include "case/case.h"
#include "case/validate.h"
#include "report/command_line.h"
#include "report/outcome.h"
#include "targets/target.h"

namespace kvf {

struct CheckOptions {
  IsolationOptions isolation;  // how each launch is isolated
  TolerancePolicy tolerance;   // how values of expected writes are judged (default exact)
};

// What every command that runs cases shares (run, replay, shrink, report, merge, compare): the
// option structs derive from it, and the command line fills it once (cli/main.cpp).
struct RunOptions {
  std::string target = "cuda-emu";  // target name (targets/target.h); compare: side A
  TargetOptions target_options;     // device index of GPU targets, Python interpreter
  CheckOptions check;               // isolation and value policy of each launch
  Limits limits;                    // limits applied when reading case files
  Invocation invocation;            // how to run a case again ("reproduce:" lines)
  bool target_given = true;         // `target` was named (--target); false: `replay` and `report` run a
                                    // saved case on the target it records, `target` only when it names none
  // The check options for another target (its default timeout and tolerance unless the command line
  // set them); empty: `check` for every target.
  std::function<CheckOptions(const std::string& target)> check_for;
};

// The target `replay` and `report` run saved case `c` on: o.target when it was named, else the one
// the case was found on (its provenance), else o.target.
std::string target_for(const RunOptions& o, const Case& c);

// Opens target_for(o, c) for saved case `file`. A target the case records but this machine cannot
// load (a plugin deleted or moved) is an InfraError naming it and the file: never a silent fallback
// to another. A named target that cannot be opened is open_target()'s error.
std::unique_ptr<Target> open_target_for(const RunOptions& o, const Case& c, const std::filesystem::path& file);

// A target opened to run saved cases on (replay, merge): the target, its check options
// (RunOptions::check_for) and its isolator, with what it declares it supports.
struct OpenTarget {
  std::unique_ptr<Target> target;
  CheckOptions check;
  std::unique_ptr<Isolator> isolator;
  std::optional<Capabilities> caps;
};
OpenTarget open_for_case(const RunOptions& o, const Case& c, const std::filesystem::path& file);

// Every target `cases` (read from `files`) run on, each opened once (open_for_case), before any case
// runs; `names` gets them ", "-separated in order of first use.
std::map<std::string, OpenTarget> open_targets_for(const RunOptions& o, const std::vector<Case>& cases,
                                                   const std::vector<std::filesystem::path>& files, std::string& names);

// One run of a case with its three arenas kept (same layout): what check_case() judges and what a
// report (campaign/report_case.h) draws.
struct CaseRun {
  Arena initial;   // every byte given its known pre-run value (make_initial_arena)
  Arena expected;  // `initial` after the golden model's append
  Arena actual;    // `initial` after the target's run, as it was left (also after a crash or hang)
  IsolatedStatus status = IsolatedStatus::ok;  // whether the run finished
  Verdict verdict;  // ok: compare_arenas() of the three; else one crash, timeout or launch_error finding
  OutsideDiff outside;  // windowed arenas: what the target found in the cache outside the windows
  std::string skipped;  // status skip: "skipped by the kernel: REASON" (no verdict, not a finding)
  StageSeconds stages;  // host time by stage (draw 0: the caller's)
};

// Builds the initial arena (windowed when the cache is large), derives the expected arena with the
// golden model, runs the target on a copy through `isolator` and, if the run finished, compares the
// whole image under `tolerance`.
// Crashes, timeouts and launch errors become single findings; a case the kernel skips has none.
CaseRun run_case(Isolator& isolator, const Case& c, const TolerancePolicy& tolerance = {});

// run_case() reduced to its verdict, timed.
CaseOutcome check_case(Isolator& isolator, const Case& c, const TolerancePolicy& tolerance = {});

// The same with a fresh worker for this one case.
CaseOutcome check_case(Target& target, const Case& c, const CheckOptions& options);

}  // namespace kvf
