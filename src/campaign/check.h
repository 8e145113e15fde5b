// check.h — one case, end to end: arena, golden expectation, isolated run, whole-arena diff.
#pragma once

#include "arena/diff.h"
#include "campaign/isolation.h"
#include "case/case.h"
#include "report/outcome.h"
#include "targets/target.h"

namespace kvf {

struct CheckOptions {
  IsolationOptions isolation;  // how each launch is isolated
  TolerancePolicy tolerance;   // how values of expected writes are judged (default exact)
};

// Builds the initial arena, derives the expected arena with the golden model, runs the target on a
// copy through `isolator` and compares the whole image. Crashes, timeouts and launch errors become
// single findings.
CaseOutcome check_case(Isolator& isolator, const Case& c, const TolerancePolicy& tolerance = {});

// The same with a fresh worker for this one case.
CaseOutcome check_case(Target& target, const Case& c, const CheckOptions& options);

}  // namespace kvf
