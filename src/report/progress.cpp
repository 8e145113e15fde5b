// progress.cpp — see progress.h.
#include "progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace kvf {

namespace {
Verbosity g_verbosity = Verbosity::normal;
}  // namespace

void set_verbosity(Verbosity v) { g_verbosity = v; }
Verbosity verbosity() { return g_verbosity; }

TerminalProgress::TerminalProgress()
    : tty_(isatty(STDERR_FILENO) && std::getenv("CI") == nullptr),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void TerminalProgress::update(int64_t cases, int64_t passed, int64_t failed, const std::string& phase) {
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double since_draw = std::chrono::duration<double>(now - last_draw_).count();
  const double rate = elapsed > 0 ? cases / elapsed : 0;
  if (g_verbosity == Verbosity::quiet) return;
  if (tty_ && g_verbosity == Verbosity::normal) {
    if (since_draw < 0.1) return;
    std::fprintf(stderr, "\r\033[K[%6.1fs] cases %lld (%.0f/s) | pass %lld fail %lld | %s", elapsed,
                 static_cast<long long>(cases), rate, static_cast<long long>(passed),
                 static_cast<long long>(failed), phase.c_str());
    std::fflush(stderr);
    line_open_ = true;
    last_draw_ = now;
    return;
  }
  if (g_verbosity == Verbosity::normal && cases < next_pulse_ && since_draw < 30) return;
  while (next_pulse_ <= cases) next_pulse_ *= 2;
  std::fprintf(stderr, "#%lld pulse  pass %lld fail %lld  %.0f cases/s  %.1fs\n", static_cast<long long>(cases),
               static_cast<long long>(passed), static_cast<long long>(failed), rate, elapsed);
  last_draw_ = now;
}

void TerminalProgress::event(const std::string& line) {
  finish();
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

void TerminalProgress::finish() {
  if (line_open_) {
    std::fprintf(stderr, "\r\033[K");
    line_open_ = false;
  }
}

}  // namespace kvf
