// isolation.h — running kernel launches in a worker process so that a faulting or hanging kernel
// becomes a finding instead of killing or corrupting kvfuzz.
//
// An Isolator owns one persistent worker process, forked on first use. The arena image lives in a
// shared-memory file (memfd) mapped by both processes: for each launch the parent copies the
// pre-run image in, sends the case (JSON) over a socket, and waits with a timeout; the worker runs
// the target on the shared image and answers with how the run ended; the parent copies the image
// back. A worker that dies (signal, abort) is a `crash`, one that outlives the timeout is killed and
// is a `timeout`; either way the next launch starts a fresh worker. Wild writes that miss the image
// only ever touch the worker's copy of kvfuzz's memory. GPU targets need exactly this shape: a
// sticky CUDA error kills the worker's context, never the campaign. A windowed image (a large cache,
// arena/windows.h) is a sparse memfd: only its materialised ranges are copied either way, and the
// cache section's pages are released after each run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "arena/arena.h"
#include "case/case.h"
#include "targets/target.h"

namespace kvf {

struct IsolationOptions {
  bool fork = true;          // run launches in a worker process (off: in-process, for debugging)
  double timeout_s = 30.0;   // per-launch limit in the worker
  int64_t windowed_above_bytes = int64_t{256} << 20;  // cache sections larger than this are checked in
                                                      // windowed mode (arena/windows.h; run_case())
};

enum class IsolatedStatus : uint8_t { ok, launch_error, crash, timeout };

struct IsolatedRun {
  IsolatedStatus status = IsolatedStatus::ok;
  std::string message;  // launch error text, how the worker died, or the timeout limit
  OutsideDiff outside;  // windowed images: what the target found in the cache outside the windows
};

class Isolator {
 public:
  Isolator(Target& target, const IsolationOptions& options);
  ~Isolator();
  Isolator(const Isolator&) = delete;
  Isolator& operator=(const Isolator&) = delete;

  // Runs the target on `image` (which holds the pre-run arena and receives the post-run arena).
  // A windowed image (arena/windows.h) runs through Target::run_windowed(): only its materialised
  // ranges travel, and the result's `outside` says what changed elsewhere in the cache.
  // Throws InfraError when the worker cannot be started or talked to.
  IsolatedRun run(const Case& c, Arena& image);

  Target& target() { return target_; }
  const IsolationOptions& options() const { return options_; }
  int64_t workers_started() const { return workers_started_; }

 private:
  struct Worker;
  void start(int64_t capacity);
  void stop();

  Target& target_;
  IsolationOptions options_;
  std::unique_ptr<Worker> worker_;
  int64_t workers_started_ = 0;
};

}  // namespace kvf
