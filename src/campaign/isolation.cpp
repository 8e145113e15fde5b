// isolation.cpp — fork-per-launch worker (see isolation.h).
#include "campaign/isolation.h"

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "case/errors.h"

namespace kvf {

namespace {

// Wire format of the child's report: one status byte, then the message text.
void report_and_exit(int fd, IsolatedStatus status, const std::string& message) {
  std::string wire(1, static_cast<char>(status));
  wire += message.substr(0, 4000);
  const char* p = wire.data();
  size_t left = wire.size();
  while (left > 0) {
    const ssize_t n = write(fd, p, left);
    if (n <= 0) break;
    p += n;
    left -= static_cast<size_t>(n);
  }
  _exit(0);
}

IsolatedRun run_in_process(Target& target, const Case& c, Arena& image) {
  const RunResult r = target.run(c, image.data(), image.layout());
  if (r.status == RunStatus::ok) return {};
  return {IsolatedStatus::launch_error, r.message};
}

std::string describe_exit(int wstatus) {
  if (WIFSIGNALED(wstatus)) {
    const int sig = WTERMSIG(wstatus);
    return std::string("worker killed by signal ") + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  if (WIFEXITED(wstatus)) return "worker exited with status " + std::to_string(WEXITSTATUS(wstatus)) + " before reporting";
  return "worker ended abnormally";
}

}  // namespace

IsolatedRun run_isolated(Target& target, const Case& c, Arena& image, const IsolationOptions& options) {
  if (!options.fork) return run_in_process(target, c, image);

  const size_t bytes = static_cast<size_t>(image.size());
  void* shared = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) throw InfraError(std::string("mmap of the arena failed: ") + strerror(errno));
  std::memcpy(shared, image.data(), bytes);

  int fds[2];
  if (pipe(fds) != 0) {
    munmap(shared, bytes);
    throw InfraError(std::string("pipe() failed: ") + strerror(errno));
  }
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    munmap(shared, bytes);
    throw InfraError(std::string("fork() failed: ") + strerror(errno));
  }
  if (pid == 0) {  // worker
    close(fds[0]);
    signal(SIGINT, SIG_IGN);  // the parent decides when to stop; a ^C must not look like a crash
    const RunResult r = target.run(c, static_cast<std::byte*>(shared), image.layout());
    report_and_exit(fds[1], r.status == RunStatus::ok ? IsolatedStatus::ok : IsolatedStatus::launch_error,
                    r.message);
  }
  close(fds[1]);

  // Read the report until EOF or the deadline.
  std::string wire;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(options.timeout_s);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      timed_out = true;
      break;
    }
    char buf[4096];
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the worker is done (or dead)
    wire.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }

  std::memcpy(image.data(), shared, bytes);
  munmap(shared, bytes);

  if (timed_out) return {IsolatedStatus::timeout, "no result after " + std::to_string(options.timeout_s) + " s; worker killed"};
  if (wire.empty()) return {IsolatedStatus::crash, describe_exit(wstatus)};
  return {static_cast<IsolatedStatus>(wire[0]), wire.substr(1)};
}

}  // namespace kvf
