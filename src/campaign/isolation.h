// isolation.h — running kernel launches in a worker process so that a faulting or hanging kernel
// becomes a finding instead of killing or corrupting kvfuzz.
//
// An Isolator owns one persistent worker process, forked on first use. The arena image lives in a
// shared-memory file (memfd) mapped by both processes: for each launch the parent copies the
// pre-run image in, sends the case (case/case_wire.h) over a socket, and waits; the worker runs the target on
// the shared image and answers with how the run ended; the parent copies the image back. Wild
// writes that miss the image only ever touch the worker's copy of kvfuzz's memory. GPU targets need
// exactly this shape: a sticky CUDA error kills the worker's context, never the campaign. A
// windowed image (a large cache, arena/windows.h) is a sparse memfd: only its materialised ranges
// are copied either way, and the cache section's pages are released after each run.
//
// A worker of a target made by make_target() (one that has a TargetSpec) is started by fork + exec
// of kvfuzz itself in worker mode (kWorkerFlag; main() hands over to worker_process_main()), which
// makes the target again from its spec: the worker starts as a fresh single-threaded process. A
// worker forked without exec from the multi-threaded campaign inherits whatever lock another thread
// held at that instant (the dynamic loader's, stdio's, the allocator's); on an H200 one start-up in
// about 80 never finished, which the timeout then reported as the first case's `timeout`
// (reports/gpu/2026-12-01-h200-cold-start). Test binaries, which have no worker mode, and targets
// constructed directly still fork without exec.
//
// What is a finding and what is not (docs/contract.md "What kvfuzz guarantees", docs/exit-codes.md):
//   - A fresh worker first runs Target::start() (device context, modules, dlopen, interpreter) and
//     says it is ready; the parent waits for that at most start_timeout_s. The per-launch timeout
//     runs from the worker's "launching" mark, sent after it has read the case, to its answer: it
//     measures the kernel's run, never a worker's start-up, however loaded the machine is.
//   - A worker that is slow to start, fails to start, or stalls before its "launching" mark is
//     replaced (an infrastructure event); after start_attempts workers in a row, InfraError.
//   - A worker that dies or hangs mid-launch is replaced and the case re-run from its pre-run image
//     on up to `retries` fresh workers: only a death (`crash`) or hang (`timeout`) that repeats on
//     every one is a finding; one that does not is an infrastructure event (a worker killed from
//     outside, the OOM killer). A worker that answers that its device context is dead (a sticky CUDA
//     error) is the kernel's own `crash` at once.
//   - After each case the worker's private memory (RssAnon) and thread count are read; a worker over
//     either limit is recycled (stopped, a fresh one for the next case), never a finding.
// WorkerEvents (report/outcome.h) counts each of these.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "arena/arena.h"
#include "case/case.h"
#include "report/outcome.h"
#include "targets/target.h"

namespace kvf {

struct IsolationOptions {
  bool fork = true;          // run launches in a worker process (off: in-process, for debugging)
  double timeout_s = 30.0;   // per-launch limit: from the worker's "launching" mark to its answer
  double start_timeout_s = 120.0;  // a worker's start-up (Target::start) and its reading of a case, at most
  int retries = 1;           // fresh workers a case is re-run on after its worker died or hung mid-launch
  int start_attempts = 3;    // workers in a row that may fail to start before InfraError
  int64_t worker_rss_limit_bytes = int64_t{4} << 30;  // private memory after a case beyond which the
                                                      // worker is recycled (0: no limit)
  int64_t worker_threads_limit = 256;  // threads after a case beyond which the worker is recycled (0: no limit)
  int64_t windowed_above_bytes = int64_t{256} << 20;  // cache sections larger than this are checked in
                                                      // windowed mode (arena/windows.h; run_case())
};

// skip: the kernel declined the case (RunStatus::skip; a plugin's KVFZ_APPEND_SKIP), not a finding.
enum class IsolatedStatus : uint8_t { ok, launch_error, crash, timeout, skip };

struct IsolatedRun {
  IsolatedStatus status = IsolatedStatus::ok;
  std::string message;  // launch error text, how the worker died, the timeout limit, or why the kernel skipped
  OutsideDiff outside;  // windowed images: what the target found in the cache outside the windows
  double target_seconds = 0;     // the answered try: from the worker's start of the case to its answer (in process: the run)
  double copy_back_seconds = 0;  // the answered try: the image copied back from the worker
};

// argv[1] of a kvfuzz worker process.
inline constexpr const char* kWorkerFlag = "--kvfuzz-worker";

// Registers the executable whose kWorkerFlag mode serves as worker (kvfuzz's main(): its own
// binary). Without one, workers are forked without exec.
void set_worker_executable(const std::string& path);

// main() of a worker process: argv = {exe, kWorkerFlag, socket fd, memfd, capacity, target name,
// device, python}. Never returns.
[[noreturn]] void worker_process_main(int argc, char** argv);

class Isolator {
 public:
  Isolator(Target& target, const IsolationOptions& options);
  ~Isolator();
  Isolator(const Isolator&) = delete;
  Isolator& operator=(const Isolator&) = delete;

  // Runs the target on a copy of `initial` (the pre-run arena, left unchanged) and leaves the image
  // the run left behind in `actual`, an arena of initial's layout and materialised ranges
  // (Arena::shaped_like(initial): its bytes need no values). In a worker the image is copied once
  // each way, `initial` into the shared memory and the shared memory into `actual`, and every retry
  // starts again from `initial`; in process `initial` is copied into `actual` and the target runs
  // there. A windowed image (arena/windows.h) runs through Target::run_windowed(): only its
  // materialised ranges travel, and the result's `outside` says what changed elsewhere in the cache.
  // Throws InfraError when no worker can be started or talked to.
  IsolatedRun run(const Case& c, const Arena& initial, Arena& actual);

  Target& target() { return target_; }
  const IsolationOptions& options() const { return options_; }
  int64_t workers_started() const { return events_.started; }
  const WorkerEvents& events() const { return events_; }

 private:
  struct Worker;
  enum class Attempt : uint8_t { answered, died, hung, stalled };  // how one try of a launch ended
  Attempt attempt(const Case& c, const Arena& initial, Arena& actual, IsolatedRun& out);
  void ensure_worker(int64_t bytes);
  bool start(int64_t capacity, std::string& why);
  void stop();
  int discard(bool kill_now);  // reaps a dead or hung worker (killing it first if asked); its wait status
  void recycle_if_over_limits();
  IsolatedRun run_in_process(const Case& c, const Arena& initial, Arena& actual);

  Target& target_;
  IsolationOptions options_;
  std::unique_ptr<Worker> worker_;
  WorkerEvents events_;
  bool started_in_process_ = false;
};

}  // namespace kvf
