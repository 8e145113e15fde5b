// isolation.cpp — the persistent worker process (see isolation.h).
//
// Wire protocol on a SOCK_STREAM socketpair, native byte order:
//   request  = u64 json_bytes, u64 image_bytes, u64 windowed (0 or 1), json_bytes of case JSON (case_json.h)
//   response = u8 IsolatedStatus, u32 message_bytes, message,
//              and for a windowed request: u64 outside_bytes, encode(OutsideDiff) (arena/outside_diff.h)
// The image occupies the first image_bytes of the shared memfd (of a windowed image, only the
// ranges of plan_windows(), which both ends compute from the case).
#include "campaign/isolation.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>

#include "arena/windows.h"
#include "case/case_json.h"
#include "case/errors.h"
#include "targets/fd_io.h"

namespace kvf {

namespace {

std::string describe_exit(int wstatus) {
  if (WIFSIGNALED(wstatus)) {
    const int sig = WTERMSIG(wstatus);
    return "worker killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  if (WIFEXITED(wstatus)) return "worker exited with status " + std::to_string(WEXITSTATUS(wstatus)) + " before answering";
  return "worker ended abnormally";
}

// The worker's main loop: never returns.
[[noreturn]] void worker_main(Target& target, int sock, int memfd, int64_t capacity) {
  signal(SIGINT, SIG_IGN);   // the parent decides when to stop; a ^C must not look like a crash
  signal(SIGTERM, SIG_IGN);  // the same for a SIGTERM sent to the process group (the parent handles it)
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The arena lies between two inaccessible fences, and the capacity beyond the current image is
  // made inaccessible per case: a write outside the image (and its guard bands) faults, a `crash`,
  // whatever this worker ran before. Without this its outcome would depend on the worker's history
  // (how large its mapping grew, what lies before it), so -j 1 and -j 2 could shrink a failure to
  // different cases.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t mapped = (static_cast<size_t>(capacity) + page - 1) / page * page;
  constexpr size_t kFence = size_t{64} << 30;  // address space only (PROT_NONE, MAP_NORESERVE)
  void* shared = MAP_FAILED;
  void* reserve = mmap(nullptr, kFence + mapped + kFence, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserve != MAP_FAILED) {
    shared = mmap(static_cast<char*>(reserve) + kFence, mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, memfd, 0);
  } else {  // no address space for fences (a tight RLIMIT_AS): unfenced
    shared = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  }
  if (shared == MAP_FAILED) _exit(3);
  size_t accessible = mapped;  // bytes of the mapping currently PROT_READ | PROT_WRITE
  for (;;) {
    uint64_t header[3];
    if (read_all(sock, header, sizeof header) != 1) _exit(0);  // parent closed: done
    std::string json(header[0], '\0');
    if (read_all(sock, json.data(), json.size()) != 1) _exit(0);
    const bool windowed = header[2] != 0;
    IsolatedStatus status = IsolatedStatus::ok;
    std::string message;
    OutsideDiff outside;
    try {
      // The parent built this case's arena already: its size limits (--max-case-mib) were applied there.
      Limits trusted;
      trusted.max_buffer_bytes = std::numeric_limits<int64_t>::max();
      const Case c = case_from_text(json, "<worker>", trusted);
      const ArenaLayout layout = plan_arena(c);
      if (layout.total_bytes != static_cast<int64_t>(header[1]) || layout.total_bytes > capacity) {
        status = IsolatedStatus::launch_error;
        message = "worker: image size mismatch";
      } else {
        const size_t used = std::min(mapped, (static_cast<size_t>(layout.total_bytes) + page - 1) / page * page);
        if (used != accessible) {
          char* base = static_cast<char*>(shared);
          if (used > accessible) mprotect(base + accessible, used - accessible, PROT_READ | PROT_WRITE);
          if (used < accessible) mprotect(base + used, accessible - used, PROT_NONE);
          accessible = used;
        }
        const RunResult r = windowed ? target.run_windowed(c, static_cast<std::byte*>(shared), layout, plan_windows(c, layout), outside)
                                     : target.run(c, static_cast<std::byte*>(shared), layout);
        if (r.status == RunStatus::launch_error) status = IsolatedStatus::launch_error;
        if (r.status == RunStatus::device_fault) status = IsolatedStatus::crash;  // answered, then exit
        message = r.message;
      }
    } catch (const std::exception& e) {
      status = IsolatedStatus::launch_error;
      message = std::string("worker: ") + e.what();
    }
    const uint8_t s = static_cast<uint8_t>(status);
    const uint32_t len = static_cast<uint32_t>(std::min<size_t>(message.size(), 1 << 16));
    if (!write_all(sock, &s, 1) || !write_all(sock, &len, sizeof len) || !write_all(sock, message.data(), len)) _exit(0);
    if (windowed) {
      const std::string wire = encode(outside);
      const uint64_t n = wire.size();
      if (!write_all(sock, &n, sizeof n) || !write_all(sock, wire.data(), wire.size())) _exit(0);
    }
    if (status == IsolatedStatus::crash) _exit(4);  // the device context is dead; the parent starts a new worker
  }
}

}  // namespace

struct Isolator::Worker {
  pid_t pid = -1;
  int sock = -1;
  int memfd = -1;
  void* shared = nullptr;
  int64_t capacity = 0;
};

Isolator::Isolator(Target& target, const IsolationOptions& options) : target_(target), options_(options) {}

Isolator::~Isolator() { stop(); }

void Isolator::start(int64_t capacity) {
  stop();
  auto w = std::make_unique<Worker>();
  w->capacity = capacity;
  w->memfd = memfd_create("kvfuzz-arena", MFD_CLOEXEC);
  if (w->memfd < 0) throw InfraError(errno_text("memfd_create for the arena"));
  if (ftruncate(w->memfd, capacity) != 0) {
    close(w->memfd);
    throw InfraError(errno_text("sizing the shared arena"));
  }
  w->shared = mmap(nullptr, static_cast<size_t>(capacity), PROT_READ | PROT_WRITE, MAP_SHARED, w->memfd, 0);
  if (w->shared == MAP_FAILED) {
    close(w->memfd);
    throw InfraError(errno_text("mapping the shared arena"));
  }
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    munmap(w->shared, static_cast<size_t>(capacity));
    close(w->memfd);
    throw InfraError(errno_text("socketpair for the worker"));
  }
  std::fflush(nullptr);  // nothing buffered may be written twice
  w->pid = fork();
  if (w->pid < 0) {
    close(fds[0]);
    close(fds[1]);
    munmap(w->shared, static_cast<size_t>(capacity));
    close(w->memfd);
    throw InfraError(errno_text("fork of the worker"));
  }
  if (w->pid == 0) {
    close(fds[0]);
    worker_main(target_, fds[1], w->memfd, capacity);
  }
  close(fds[1]);
  w->sock = fds[0];
  worker_ = std::move(w);
  ++workers_started_;
}

void Isolator::stop() {
  if (!worker_) return;
  Worker& w = *worker_;
  close(w.sock);  // a healthy worker exits on EOF
  int wstatus = 0;
  bool reaped = false;
  for (int i = 0; i < 200 && !reaped; ++i) {  // up to ~1 s, then force
    const pid_t r = waitpid(w.pid, &wstatus, WNOHANG);
    reaped = r == w.pid || (r < 0 && errno != EINTR);
    if (!reaped) usleep(5000);
  }
  if (!reaped) {
    kill(w.pid, SIGKILL);
    while (waitpid(w.pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
  }
  munmap(w.shared, static_cast<size_t>(w.capacity));
  close(w.memfd);
  worker_.reset();
}

namespace {

// Copies the materialised ranges of an image.
void copy_ranges(std::byte* dest, const std::byte* src, const Arena& image) {
  for (const ByteRange& r : image.materialized()) std::memcpy(dest + r.begin, src + r.begin, static_cast<size_t>(r.size()));
}

}  // namespace

IsolatedRun Isolator::run(const Case& c, Arena& image) {
  if (!options_.fork) {
    IsolatedRun run;
    const RunResult r = image.windowed()
                            ? target_.run_windowed(c, image.data(), image.layout(), plan_windows(c, image.layout()), run.outside)
                            : target_.run(c, image.data(), image.layout());
    if (r.status != RunStatus::ok) {
      run.status = r.status == RunStatus::device_fault ? IsolatedStatus::crash : IsolatedStatus::launch_error;
      run.message = r.message;
    }
    return run;
  }
  const int64_t bytes = image.size();
  if (!worker_ || worker_->capacity < bytes) {
    const int64_t old = worker_ ? worker_->capacity : 0;
    start(std::max<int64_t>({bytes, 2 * old, int64_t{1} << 20}));
  }
  Worker& w = *worker_;
  auto* shared = static_cast<std::byte*>(w.shared);
  copy_ranges(shared, image.data(), image);
  // A windowed image's cache pages are released after the run, so the memfd never holds more than
  // one case's windows (each case's windows lie elsewhere in the cache).
  auto release_cache = [&] {
    if (!image.windowed()) return;
    const ArenaLayout& l = image.layout();
    const off_t begin = l.cache_begin / kWindowPage * kWindowPage;
    fallocate(w.memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, begin, l.cache_begin + l.cache_bytes - begin);
  };

  const std::string json = case_to_json(c).dump();
  const uint64_t header[3] = {json.size(), static_cast<uint64_t>(bytes), image.windowed() ? 1u : 0u};
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(options_.timeout_s));
  int got = write_all(w.sock, header, sizeof header) && write_all(w.sock, json.data(), json.size()) ? 1 : 0;
  uint8_t status = 0;
  uint32_t len = 0;
  std::string message;
  if (got == 1) got = read_all(w.sock, &status, 1, deadline);
  if (got == 1) got = read_all(w.sock, &len, sizeof len, deadline);
  if (got == 1) {
    message.resize(len);
    got = read_all(w.sock, message.data(), len, deadline);
  }
  std::string outside;
  if (got == 1 && image.windowed()) {
    uint64_t n = 0;
    got = read_all(w.sock, &n, sizeof n, deadline);
    if (got == 1 && n > (uint64_t{16} << 20)) throw InfraError("worker sent an oversized outside-diff message");
    if (got == 1) {
      outside.resize(n);
      got = read_all(w.sock, outside.data(), n, deadline);
    }
  }

  if (got != 1) {  // dead or hung: reap it (killing a hung one), and report what happened
    if (got < 0) kill(w.pid, SIGKILL);
    int wstatus = 0;
    while (waitpid(w.pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    copy_ranges(image.data(), shared, image);  // what the kernel wrote before dying
    release_cache();
    w.pid = -1;
    close(w.sock);
    munmap(w.shared, static_cast<size_t>(w.capacity));
    close(w.memfd);
    worker_.reset();
    if (got < 0) return {IsolatedStatus::timeout, "no result after " + std::to_string(options_.timeout_s) + " s; worker killed", {}};
    return {IsolatedStatus::crash, describe_exit(wstatus), {}};
  }
  copy_ranges(image.data(), shared, image);
  release_cache();
  IsolatedRun run{static_cast<IsolatedStatus>(status), message, {}};
  if (image.windowed()) {
    try {
      run.outside = decode_outside_diff(outside);
    } catch (const std::exception& e) {
      throw InfraError(std::string("worker: ") + e.what());
    }
  }
  if (run.status == IsolatedStatus::crash) stop();  // it is exiting
  return run;
}

}  // namespace kvf
