// fd_io.h — blocking I/O on the sockets between kvfuzz and its worker processes (the isolation
// worker, campaign/isolation.cpp, and the Python worker, targets/python_worker.cpp).
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace kvf {

// "what: strerror(errno)".
inline std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Writes all of buf to a socket (no SIGPIPE); false if the peer is gone.
inline bool write_all(int fd, const void* buf, size_t n) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads exactly n bytes, giving up at `deadline` if one is given. 1 done, 0 EOF or error, -1 timed out.
inline int read_all(int fd, void* buf, size_t n,
                    std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    if (deadline) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) return -1;
      pollfd pfd{fd, POLLIN, 0};
      const int ready = poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) return 0;
      if (ready == 0) return -1;
    }
    const ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return 1;
}

}  // namespace kvf
