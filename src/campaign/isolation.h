// isolation.h — running one kernel launch in a forked worker so that a faulting or hanging kernel
// becomes a finding instead of killing or corrupting kvfuzz.
//
// The image the kernel writes is a MAP_SHARED mapping created before fork(): the child runs the
// target on it and reports how the run ended over a pipe; the parent waits with a timeout, then
// copies the image back. A child that dies on a signal is a `crash`, one that outlives the timeout
// is killed and is a `timeout`. Wild writes that miss the image only ever touch the child's copy
// of kvfuzz's memory.
#pragma once

#include <string>

#include "arena/arena.h"
#include "case/case.h"
#include "targets/target.h"

namespace kvf {

struct IsolationOptions {
  bool fork = true;          // run each launch in a forked child (off: in-process, for debugging)
  double timeout_s = 30.0;   // per-launch limit when forked
};

enum class IsolatedStatus : uint8_t { ok, launch_error, crash, timeout };

struct IsolatedRun {
  IsolatedStatus status = IsolatedStatus::ok;
  std::string message;  // launch error text, signal description, or timeout limit
};

// Runs `target` on `image` (which holds the pre-run arena and receives the post-run arena).
IsolatedRun run_isolated(Target& target, const Case& c, Arena& image, const IsolationOptions& options);

}  // namespace kvf
