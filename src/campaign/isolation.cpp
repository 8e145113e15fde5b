// isolation.cpp — the persistent worker process (see isolation.h).
//
// Wire protocol on a SOCK_STREAM socketpair, native byte order:
//   hello    = u8 ready (1) or not (0), u32 message_bytes, message      (once, after Target::start())
//   request  = u64 case_bytes, u64 image_bytes, u64 windowed (0 or 1), case_bytes of the case in its
//              binary hand-off form (case/case_wire.h: everything but the genotype)
//   response = u8 kLaunching (the case is read; the launch timeout starts here),
//              u8 IsolatedStatus, u32 message_bytes, message,
//              and for a windowed request: u64 outside_bytes, encode(OutsideDiff) (arena/outside_diff.h)
// The image occupies the first image_bytes of the shared memfd (of a windowed image, only the
// ranges of plan_windows(), which both ends compute from the case).
#include "isolation.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <vector>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <limits>
#include <mutex>

#include "arena/windows.h"
#include "case/case_wire.h"
#include "base/errors.h"
#include "case/validate.h"
#include "targets/fd_io.h"

namespace kvf {

namespace {

constexpr uint8_t kLaunching = 0xB0;  // the worker has read the case and starts the launch

// Decimal text of a non-negative int into out[16], async-signal-safe (between fork and exec).
void int_to_text(int v, char* out) {
  char tmp[16];
  int n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0 && n < 15);
  for (int i = 0; i < n; ++i) out[i] = tmp[n - 1 - i];
  out[n] = '\0';
}

using Clock = std::chrono::steady_clock;

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Campaign threads fork their workers one at a time, and nothing else of kvfuzz's forks while one
// does: stdio's locks (fflush(nullptr) takes each stream's) are never copied into a child held.
std::mutex& fork_mutex() {
  static std::mutex m;
  return m;
}

std::string describe_exit(int wstatus) {
  if (WIFSIGNALED(wstatus)) {
    const int sig = WTERMSIG(wstatus);
    return "worker killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  if (WIFEXITED(wstatus)) return "worker exited with status " + std::to_string(WEXITSTATUS(wstatus)) + " before answering";
  return "worker ended abnormally";
}

std::string& worker_executable() {
  static std::string exe;
  return exe;
}

// The hello: ready (why empty) or why not.
bool send_hello(int sock, const std::string& why) {
  const uint8_t ready = why.empty() ? 1 : 0;
  const uint32_t len = static_cast<uint32_t>(std::min<size_t>(why.size(), 1 << 16));
  return write_all(sock, &ready, 1) && write_all(sock, &len, sizeof len) && write_all(sock, why.data(), len);
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
  // Start-up (device context, modules, dlopen, interpreter) happens before the first case, so no
  // launch's timeout includes it; the parent waits for this hello with its own, longer limit.
  std::string why;
  try {
    why = target.start();
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (!send_hello(sock, why) || !why.empty()) _exit(0);
  size_t accessible = mapped;  // bytes of the mapping currently PROT_READ | PROT_WRITE
  for (;;) {
    uint64_t header[3];
    if (read_all(sock, header, sizeof header) != 1) _exit(0);  // parent closed: done
    std::string wire(header[0], '\0');
    if (read_all(sock, wire.data(), wire.size()) != 1) _exit(0);
    const bool windowed = header[2] != 0;
    IsolatedStatus status = IsolatedStatus::ok;
    std::string message;
    OutsideDiff outside;
    bool marked = false;  // kLaunching sent: exactly once per case, before its answer
    const auto mark = [&] {
      if (!marked && !write_all(sock, &kLaunching, 1)) _exit(0);
      marked = true;
    };
    try {
      // The parent built this case's arena already: its size limits (--max-case-mib) were applied there.
      Limits trusted;
      trusted.max_buffer_bytes = std::numeric_limits<int64_t>::max();
      const Case c = decode_case_wire(wire, "<worker>");
      if (const std::vector<ValidationProblem> problems = validate(c, trusted); !problems.empty())
        throw InputError("<worker>", problems.front().json_path, problems.front().message);
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
        mark();
        const RunResult r = windowed ? target.run_windowed(c, static_cast<std::byte*>(shared), layout, plan_windows(c, layout), outside)
                                     : target.run(c, static_cast<std::byte*>(shared), layout);
        if (r.status == RunStatus::launch_error) status = IsolatedStatus::launch_error;
        if (r.status == RunStatus::device_fault) status = IsolatedStatus::crash;  // answered, then exit
        if (r.status == RunStatus::skip) status = IsolatedStatus::skip;
        message = r.message;
      }
    } catch (const std::exception& e) {
      status = IsolatedStatus::launch_error;
      message = std::string("worker: ") + e.what();
    }
    mark();  // refused before launching: still one mark, then the answer
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

void set_worker_executable(const std::string& path) { worker_executable() = path; }

void worker_process_main(int argc, char** argv) {
  if (argc != 8) _exit(2);
  const int sock = std::atoi(argv[2]);
  const int memfd = std::atoi(argv[3]);
  const int64_t capacity = std::strtoll(argv[4], nullptr, 10);
  std::unique_ptr<Target> target;
  try {
    TargetOptions options;
    options.device = std::atoi(argv[6]);
    options.python = argv[7];
    options.in_worker = true;
    target = make_target(argv[5], options);
  } catch (const std::exception& e) {
    send_hello(sock, std::string("the worker could not make target ") + argv[5] + ": " + e.what());
    _exit(0);
  }
  worker_main(*target, sock, memfd, capacity);
}

struct Isolator::Worker {
  pid_t pid = -1;
  int sock = -1;
  int memfd = -1;
  void* shared = nullptr;
  int64_t capacity = 0;
};

Isolator::Isolator(Target& target, const IsolationOptions& options) : target_(target), options_(options) {}

Isolator::~Isolator() { stop(); }

bool Isolator::start(int64_t capacity, std::string& why) {
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
  // fork + exec of kvfuzz in worker mode where the target can be made again from its spec;
  // everything the child needs is built before fork, so it only makes async-signal-safe calls.
  const std::optional<TargetSpec>& spec = target_.spec();
  const bool exec = spec.has_value() && !worker_executable().empty();
  std::vector<std::string> args;
  if (exec) {
    args = {worker_executable(), kWorkerFlag, "", "", std::to_string(capacity), spec->name,
            std::to_string(spec->options.device), spec->options.python};
  }
  char sock_text[16] = {0}, memfd_text[16] = {0};  // filled in the child
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  if (exec) {
    argv[2] = sock_text;
    argv[3] = memfd_text;
    argv.push_back(nullptr);
  }
  const auto began = Clock::now();
  {
    std::lock_guard<std::mutex> lock(fork_mutex());
    std::fflush(nullptr);  // nothing buffered may be written twice
    w->pid = fork();
  }
  if (w->pid == 0 && exec) {
    // Descriptors without close-on-exec for the worker (every other one of kvfuzz's has it).
    const int sock = fcntl(fds[1], F_DUPFD, 3);
    const int memfd = fcntl(w->memfd, F_DUPFD, 3);
    if (sock < 0 || memfd < 0) _exit(126);
    int_to_text(sock, sock_text);
    int_to_text(memfd, memfd_text);
    execv(argv[0], argv.data());
    _exit(127);
  }
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
  ++events_.started;

  // The hello: ready, or why not.
  const auto deadline = after(options_.start_timeout_s);
  uint8_t ready = 0;
  uint32_t len = 0;
  int got = read_all(worker_->sock, &ready, 1, deadline);
  if (got == 1) got = read_all(worker_->sock, &len, sizeof len, deadline);
  std::string message;
  if (got == 1) {
    message.resize(len);
    got = read_all(worker_->sock, message.data(), len, deadline);
  }
  const double took = std::chrono::duration<double>(Clock::now() - began).count();
  events_.slowest_start_s = std::max(events_.slowest_start_s, took);
  if (got == 1 && ready == 1) return true;
  if (got == 1) {
    why = message.empty() ? "the target did not start (no reason given)" : message;
  } else if (got < 0) {
    why = "the worker did not start within " + std::to_string(options_.start_timeout_s) + " s";
  }
  const int wstatus = discard(got < 0);
  if (got == 0) why = describe_exit(wstatus) + " during start-up";
  return false;
}

int Isolator::discard(bool kill_now) {
  if (!worker_) return 0;
  Worker& w = *worker_;
  if (kill_now) kill(w.pid, SIGKILL);
  int wstatus = 0;
  while (waitpid(w.pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  close(w.sock);
  munmap(w.shared, static_cast<size_t>(w.capacity));
  close(w.memfd);
  worker_.reset();
  return wstatus;
}

void Isolator::stop() {
  if (!worker_) return;
  Worker& w = *worker_;
  shutdown(w.sock, SHUT_RDWR);  // a healthy worker exits on EOF
  bool exited = false;
  for (int i = 0; i < 200 && !exited; ++i) {  // up to ~1 s, then force
    siginfo_t info{};
    const int rc = waitid(P_PID, static_cast<id_t>(w.pid), &info, WEXITED | WNOHANG | WNOWAIT);  // left for discard() to reap
    exited = (rc == 0 && info.si_pid == w.pid) || (rc < 0 && errno != EINTR);
    if (!exited) usleep(5000);
  }
  discard(!exited);  // reaps it (killed first if it did not exit) and releases its resources
}

// A worker's first shared arena: address space and a sparse memfd, nothing resident until a case
// touches it (each case's image is fenced by mprotect in the worker all the same). An image larger
// than the arena needs a new worker, and with it a new device context (2-3 s each with 16 workers
// starting on an H200 host): from 1 MiB, doubling, a default campaign started 66 workers for 16
// threads (reports/gpu/2026-12-04-h200-worker-capacity). Under an address-space limit (RLIMIT_AS)
// the arena starts at 1 MiB instead, as it did before: 256 MiB a worker would take the room the
// campaign's other allocations need (-j 4 under 1 GiB ran out).
namespace {

constexpr int64_t kFirstCapacity = int64_t{256} << 20;

int64_t first_capacity() {
  rlimit limit{};
  const bool bounded = getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY;
  return bounded ? int64_t{1} << 20 : kFirstCapacity;
}

}  // namespace

void Isolator::ensure_worker(int64_t bytes) {
  if (worker_ && worker_->capacity >= bytes) return;
  static const int64_t first = first_capacity();
  const int64_t capacity = std::max<int64_t>({bytes, worker_ ? 2 * worker_->capacity : 0, first});
  std::string why;
  for (int i = 0; i < std::max(1, options_.start_attempts); ++i) {
    if (start(capacity, why)) return;
    ++events_.failed_starts;
  }
  throw InfraError("no worker for target " + target_.info().name + " could be started (" +
                   std::to_string(std::max(1, options_.start_attempts)) + " tries): " + why);
}

// Reads VmRSS-style counters of a process: RssAnon (bytes) and Threads; -1 where unreadable.
// After every case, so in one read(): the kernel writes the whole status file in one go.
namespace {
struct ProcessUse {
  int64_t private_bytes = -1;
  int64_t threads = -1;
};
ProcessUse process_use(pid_t pid) {
  ProcessUse u;
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%d/status", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return u;
  char text[16384];  // about 1.5 KiB in practice
  ssize_t n = -1;
  do {
    n = read(fd, text, sizeof text - 1);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return u;
  text[n] = '\0';
  const auto field = [&](const char* key) -> int64_t {  // the number after "\nKey:", -1 if absent
    const char* at = std::strstr(text, key);
    return at == nullptr ? -1 : std::strtoll(at + std::strlen(key), nullptr, 10);
  };
  if (const int64_t kib = field("\nRssAnon:"); kib >= 0) u.private_bytes = kib * 1024;
  u.threads = field("\nThreads:");
  return u;
}
}  // namespace

void Isolator::recycle_if_over_limits() {
  if (!worker_ || (options_.worker_rss_limit_bytes <= 0 && options_.worker_threads_limit <= 0)) return;
  const ProcessUse u = process_use(worker_->pid);
  if (options_.worker_rss_limit_bytes > 0 && u.private_bytes > options_.worker_rss_limit_bytes) {
    ++events_.recycled_memory;
    stop();
  } else if (options_.worker_threads_limit > 0 && u.threads > options_.worker_threads_limit) {
    ++events_.recycled_threads;
    stop();
  }
}

namespace {

// Copies the materialised ranges of an image.
void copy_ranges(std::byte* dest, const std::byte* src, const Arena& image) {
  for (const ByteRange& r : image.materialized()) std::memcpy(dest + r.begin, src + r.begin, static_cast<size_t>(r.size()));
}

}  // namespace

IsolatedRun Isolator::run_in_process(const Case& c, const Arena& initial, Arena& actual) {
  if (!started_in_process_) {
    if (std::string why = target_.start(); !why.empty())
      throw InfraError("target " + target_.info().name + " could not start: " + why);
    started_in_process_ = true;
  }
  copy_ranges(actual.data(), initial.data(), initial);  // the target runs on actual
  IsolatedRun run;
  const auto began = Clock::now();
  const RunResult r = actual.windowed()
                          ? target_.run_windowed(c, actual.data(), actual.layout(), plan_windows(c, actual.layout()), run.outside)
                          : target_.run(c, actual.data(), actual.layout());
  run.target_seconds = std::chrono::duration<double>(Clock::now() - began).count();
  if (r.status != RunStatus::ok) {
    run.status = r.status == RunStatus::device_fault ? IsolatedStatus::crash
                 : r.status == RunStatus::skip       ? IsolatedStatus::skip
                                                     : IsolatedStatus::launch_error;
    run.message = r.message;
  }
  return run;
}

Isolator::Attempt Isolator::attempt(const Case& c, const Arena& initial, Arena& actual, IsolatedRun& out) {
  Worker& w = *worker_;
  auto* shared = static_cast<std::byte*>(w.shared);
  const Arena& image = initial;  // its layout and ranges are actual's too
  copy_ranges(shared, initial.data(), image);

  // The worker needs the batch, not the genotype it was drawn from: the hand-off form leaves it out.
  const std::string wire = encode_case_wire(c);
  const uint64_t header[3] = {wire.size(), static_cast<uint64_t>(image.size()), image.windowed() ? 1u : 0u};
  if (!write_all(w.sock, header, sizeof header) || !write_all(w.sock, wire.data(), wire.size())) return Attempt::stalled;
  // Until the worker has read the case, the time is the harness's, not the kernel's.
  uint8_t mark = 0;
  if (read_all(w.sock, &mark, 1, after(options_.start_timeout_s)) != 1 || mark != kLaunching) return Attempt::stalled;

  const auto launched = Clock::now();
  const auto deadline = after(options_.timeout_s);
  uint8_t status = 0;
  uint32_t len = 0;
  std::string message;
  int got = read_all(w.sock, &status, 1, deadline);
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
  if (got != 1) return got < 0 ? Attempt::hung : Attempt::died;
  const auto answered = Clock::now();
  copy_ranges(actual.data(), shared, image);
  out = IsolatedRun{static_cast<IsolatedStatus>(status), message, {}};
  out.target_seconds = std::chrono::duration<double>(answered - launched).count();
  out.copy_back_seconds = std::chrono::duration<double>(Clock::now() - answered).count();
  if (image.windowed()) {
    try {
      out.outside = decode_outside_diff(outside);
    } catch (const std::exception& e) {
      throw InfraError(std::string("worker: ") + e.what());
    }
  }
  return Attempt::answered;
}

IsolatedRun Isolator::run(const Case& c, const Arena& initial, Arena& actual) {
  if (!options_.fork) return run_in_process(c, initial, actual);
  const Arena& image = initial;  // its layout and ranges are actual's too
  // A windowed image's cache pages are released after each try, so the memfd never holds more than
  // one case's windows (each case's windows lie elsewhere in the cache).
  auto release_cache = [&] {
    if (!image.windowed() || !worker_) return;
    const ArenaLayout& l = image.layout();
    const off_t begin = l.cache_begin / kWindowPage * kWindowPage;
    fallocate(worker_->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, begin, l.cache_begin + l.cache_bytes - begin);
  };
  int stalls = 0;
  int64_t deaths = 0, hangs = 0;  // tries of this case whose worker died or hung mid-launch
  for (;;) {
    ensure_worker(image.size());
    IsolatedRun out;
    const Attempt a = attempt(c, initial, actual, out);
    if (a == Attempt::answered) {
      release_cache();
      events_.deaths_retried += deaths;  // each did not repeat: infrastructure, not the kernel
      events_.hangs_retried += hangs;
      if (out.status == IsolatedStatus::crash) {
        stop();  // its device context is dead and it is exiting
      } else {
        recycle_if_over_limits();
      }
      return out;
    }
    if (a == Attempt::stalled) {  // before the launch: the harness's time, never a finding
      release_cache();
      discard(true);
      ++events_.failed_starts;
      if (++stalls >= std::max(1, options_.start_attempts))
        throw InfraError("the worker for target " + target_.info().name + " did not read a case within " +
                         std::to_string(options_.start_timeout_s) + " s (" + std::to_string(stalls) + " tries)");
      continue;
    }
    (a == Attempt::hung ? hangs : deaths) += 1;
    if (deaths + hangs <= options_.retries) {  // re-run from `initial` on a fresh worker (attempt() copies it in)
      release_cache();
      discard(a == Attempt::hung);
      continue;
    }
    copy_ranges(actual.data(), static_cast<std::byte*>(worker_->shared), image);  // what the kernel wrote before dying
    release_cache();
    const int wstatus = discard(a == Attempt::hung);
    // Every try died or hung: the kernel's doing. The finding is the last try's.
    const std::string again =
        deaths + hangs > 1 ? "; every one of " + std::to_string(deaths + hangs) + " tries, each on a fresh worker, died or hung" : "";
    if (a == Attempt::hung)
      return {IsolatedStatus::timeout, "no result after " + std::to_string(options_.timeout_s) + " s; worker killed" + again, {}};
    return {IsolatedStatus::crash, describe_exit(wstatus) + again, {}};
  }
}

}  // namespace kvf
