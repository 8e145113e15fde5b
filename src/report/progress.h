// progress.h — live progress of long runs, on stderr.
//
// On a terminal (and CI unset) one status line is redrawn at most 10 times a second; otherwise a
// plain line is printed at each doubling of the case count and at least every 30 s. Events
// (a new failure, a finished shrink) always get their own line.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace kvf {

// How much TerminalProgress prints (-q, -v): quiet, no progress lines (events, such as a new failure
// or an unsaved case, still print); normal, as above; verbose, a plain line after every case.
enum class Verbosity { quiet, normal, verbose };
void set_verbosity(Verbosity v);
Verbosity verbosity();

class Progress {
 public:
  virtual ~Progress() = default;
  // Called after every case: counts so far.
  virtual void update(int64_t cases, int64_t passed, int64_t failed, const std::string& phase) = 0;
  // A notable event, printed on its own line.
  virtual void event(const std::string& line) = 0;
  // Clears any partial status line before the caller prints its summary.
  virtual void finish() = 0;
};

class TerminalProgress final : public Progress {
 public:
  TerminalProgress();
  void update(int64_t cases, int64_t passed, int64_t failed, const std::string& phase) override;
  void event(const std::string& line) override;
  void finish() override;

 private:
  bool tty_;
  bool line_open_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
  int64_t next_pulse_ = 1;
};

class SilentProgress final : public Progress {
 public:
  void update(int64_t, int64_t, int64_t, const std::string&) override {}
  void event(const std::string&) override {}
  void finish() override {}
};

}  // namespace kvf
