// exit_code.h — the one exit-code table of kvfuzz's commands (docs/exit-codes.md), as values.
//
//   0    clean: every case passed (or replayed as expected)
//   1    findings: at least one case failed (flaky ones included), and each was saved
//   2    usage or bad input: an option, profile, case file or output path is wrong; nothing ran
//   3    infrastructure: a finding could not be saved (disk full), no worker could be started,
//        no device for a GPU target, or other I/O failure
//   130  interrupted by SIGINT (128 + 2) before any finding; 143 for SIGTERM (128 + 15)
// A finding outranks an interruption (it is saved and printed either way); a lost finding outranks
// both. Infrastructure events that are not findings (a worker killed from outside, a slow start,
// a recycled worker) change no exit code.
#pragma once

#include "outcome.h"

namespace kvf {

enum ExitCode : int { kExitClean = 0, kExitFindings = 1, kExitBadInput = 2, kExitInfra = 3 };

// The exit code of a command that ran cases: `findings` (failed cases), `lost` (a finding or
// result that could not be written) and the signal that stopped it (0 if none).
inline int exit_code(bool findings, bool lost, int stop_signal) {
  if (lost) return kExitInfra;
  if (findings) return kExitFindings;
  if (stop_signal != 0) return 128 + stop_signal;
  return kExitClean;
}

inline int exit_code(const CampaignResult& r) { return exit_code(r.failed > 0, r.save_failed(), r.stop_signal); }
inline int exit_code(const ReplayResult& r) { return exit_code(r.failed() > 0, false, r.stop_signal); }

}  // namespace kvf
