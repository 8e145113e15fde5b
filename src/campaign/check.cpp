// check.cpp — see check.h.
#include "check.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "report/verdict.h"
#include "arena/windows.h"
#include "base/errors.h"
#include "golden/golden.h"

namespace kvf {

namespace {

Verdict single_finding(FindingKind kind, const std::string& what) {
  Finding f;
  f.kind = kind;
  f.victim = "the run";
  f.writer = "the kernel";
  f.sentence = what;
  f.victim_class = "run";
  f.writer_class = "kernel";
  Verdict v;
  v.findings.push_back(f);
  return v;
}

}  // namespace

std::string target_for(const RunOptions& o, const Case& c) {
  return o.target_given || c.provenance.target.empty() ? o.target : c.provenance.target;
}

std::unique_ptr<Target> open_target_for(const RunOptions& o, const Case& c, const std::filesystem::path& file) {
  const std::string name = target_for(o, c);
  try {
    return open_target(name, o.target_options);
  } catch (const std::exception& e) {
    if (name == o.target) throw;
    throw InfraError("the target " + file.string() + " was found on, " + name + ", cannot be opened here: " + e.what() +
                     "; rebuild it at that path, or name the target to run it on with --target");
  }
}

OpenTarget open_for_case(const RunOptions& o, const Case& c, const std::filesystem::path& file) {
  OpenTarget t;
  t.target = open_target_for(o, c, file);
  const std::string name = target_for(o, c);
  t.check = o.check_for ? o.check_for(name) : o.check;
  t.isolator = std::make_unique<Isolator>(*t.target, t.check.isolation);
  t.caps = t.target->capabilities();
  return t;
}

std::map<std::string, OpenTarget> open_targets_for(const RunOptions& o, const std::vector<Case>& cases,
                                                   const std::vector<std::filesystem::path>& files, std::string& names) {
  std::map<std::string, OpenTarget> targets;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string name = target_for(o, cases[i]);
    if (targets.count(name)) continue;
    targets.emplace(name, open_for_case(o, cases[i], files[i]));
    names += (names.empty() ? "" : ", ") + name;
  }
  return targets;
}

CaseOutcome check_case(Target& target, const Case& c, const CheckOptions& options) {
  Isolator isolator(target, options.isolation);
  return check_case(isolator, c, options.tolerance);
}

CaseRun run_case(Isolator& isolator, const Case& c, const TolerancePolicy& tolerance) {
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  StageSeconds stages;
  const auto began = Clock::now();
  // A large cache runs windowed (arena/windows.h): the host holds the windows, the target checks
  // the rest of the cache. The windows are planned from the geometry, so a layout the geometry
  // cannot express (vllm_legacy) is always checked whole.
  const ArenaLayout layout = plan_arena(c);
  const bool windowed = layout.cache_bytes > isolator.options().windowed_above_bytes && c.layout != Layout::vllm_legacy;
  Arena initial = windowed ? make_initial_arena(c, plan_windows(c, layout)) : make_initial_arena(c);
  const auto filled = Clock::now();
  stages.arena_fill = seconds(began, filled);
  Arena expected = initial;
  golden::golden_append(c, expected);
  const auto golden_done = Clock::now();
  stages.golden = seconds(filled, golden_done);
  Arena actual = Arena::shaped_like(initial);
  IsolatedRun run = isolator.run(c, initial, actual);
  const auto ran = Clock::now();
  stages.target = run.target_seconds;
  stages.copy_back = run.copy_back_seconds;
  stages.handoff = std::max(0.0, seconds(golden_done, ran) - run.target_seconds - run.copy_back_seconds);

  CaseRun r{std::move(initial), std::move(expected), std::move(actual), run.status, Verdict{}, std::move(run.outside), {}, {}};
  switch (run.status) {
    case IsolatedStatus::ok:
      r.verdict = compare_arenas(c, r.initial, r.expected, r.actual, tolerance, r.initial.windowed() ? &r.outside : nullptr);
      break;
    case IsolatedStatus::launch_error:
      r.verdict = single_finding(FindingKind::launch_error, "launch refused: " + run.message);
      break;
    case IsolatedStatus::crash:
      r.verdict = single_finding(FindingKind::crash, "the kernel crashed: " + run.message);
      break;
    case IsolatedStatus::timeout:
      r.verdict = single_finding(FindingKind::timeout, "the kernel hung: " + run.message);
      break;
    case IsolatedStatus::skip:  // no verdict: the kernel does not support the case
      r.skipped = std::string(kKernelSkipPrefix) + (run.message.empty() ? std::string("(no reason given)") : run.message);
      break;
  }
  stages.diff = seconds(ran, Clock::now());
  r.stages = stages;
  return r;
}

CaseOutcome check_case(Isolator& isolator, const Case& c, const TolerancePolicy& tolerance) {
  const auto start = std::chrono::steady_clock::now();
  CaseOutcome out;
  CaseRun run = run_case(isolator, c, tolerance);
  out.verdict = std::move(run.verdict);
  out.skipped = std::move(run.skipped);
  out.stages = run.stages;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace kvf
