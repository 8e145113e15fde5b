// main.cpp — the kvfuzz command line; the only file that knows CLI11.
//
//   kvfuzz run [--target T] [--config FILE] [--cases N] [--seconds S] [--seed N] [--corpus-out DIR] [--json FILE]
//              [--junit FILE] [--summary-md FILE]
//   kvfuzz replay PATH... [--target T] [--json FILE] [--junit FILE] [--summary-md FILE]
//   kvfuzz report CASE [-o DIR] [--target T]
//   kvfuzz shrink CASE [--target T] [--config FILE] [-o DIR]
//   kvfuzz generate --seed N [--cases N] [--config FILE] -o DIR
//   kvfuzz targets
//   kvfuzz compare --target A --against B [--config FILE] [--cases N] [--seed N] [-j N] [--out-dir DIR]
//   kvfuzz merge OUT IN... | kvfuzz merge OUT.json SUMMARY.json...
//   (run, generate, compare: [--shard i/N|slurm|k8s/N]; run: [--devices 0,1,...|all])
//   kvfuzz selftest [-j N] [--filter NAME] [--target plugin|triton-interp] [--metamorphic] [--json FILE] [--junit FILE] [--list]
//
// Exit codes (report/exit_code.h, docs/exit-codes.md): 0 clean, 1 findings, 2 usage or bad input,
// 3 infrastructure (a finding not saved, I/O, missing device), 130/143 interrupted by SIGINT/SIGTERM.
// Results go to stdout and end with "kvfuzz: N passed, N failed"; progress goes to stderr. With
// `--json -`, `--junit -` or `--summary-md -` stdout carries that machine output alone and the
// results go to stderr, the closing line last.
#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "campaign/campaign.h"
#include "campaign/compare.h"
#include "campaign/devices.h"
#include "campaign/isolation.h"
#include "campaign/merge.h"
#include "campaign/report_case.h"
#include "campaign/selftest.h"
#include "campaign/shard.h"
#include "campaign/summary_merge.h"
#include "case/case_json.h"
#include "base/errors.h"
#include "base/suggest.h"
#include "report/exit_code.h"
#include "report/junit.h"
#include "report/markdown.h"
#include "report/render.h"
#include "targets/target.h"

namespace {

constexpr int kClean = kvf::kExitClean, kFindings = kvf::kExitFindings, kBadInput = kvf::kExitBadInput, kInfra = kvf::kExitInfra;

std::string join_command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    if (i) s += ' ';
    s += argv[i];
  }
  return s;
}

// --- where output goes ---------------------------------------------------------------------------

// With `--json -`, `--junit -` or `--summary-md -`, stdout carries that machine output and nothing
// else: the human lines (failures, reports, counts, the closing line) go to stderr, and file
// descriptor 1 itself is pointed at stderr, so no stray write (a plugin's printf, a worker) can
// get into the machine output, which goes to the saved descriptor of the real stdout.
struct Output {
  std::ostream* human = &std::cout;  // results for people
  int machine_fd = -1;               // the real stdout once taken for machine output, else -1

  // Call before anything is written (or any worker started) when an output option is "-".
  void take_stdout_for_machine_output() {
    std::cout.flush();
    std::fflush(stdout);
    machine_fd = ::fcntl(1, F_DUPFD_CLOEXEC, 3);
    if (machine_fd < 0 || ::dup2(2, 1) < 0) throw kvf::InfraError(std::string("cannot set up stdout: ") + std::strerror(errno));
    human = &std::cerr;
  }

  void write_machine(const std::string& text) const {
    std::cout.flush();
    if (machine_fd < 0) {
      std::cout << text << std::flush;
      return;
    }
    for (size_t done = 0; done < text.size();) {
      const ssize_t n = ::write(machine_fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw kvf::InfraError(std::string("cannot write to stdout: ") + std::strerror(errno));
      done += static_cast<size_t>(n);
    }
  }
};

Output g_out;

void write_json(const std::string& file, const nlohmann::json& j) {
  if (file.empty()) return;
  if (file == "-") {
    g_out.write_machine(j.dump(2) + "\n");
    return;
  }
  kvf::write_file_atomic(file, j.dump(2) + "\n");
}

// --- CI outputs (JUnit XML, Markdown job summary) and reports ---------------------------------

struct CiOutputs {
  std::string junit_file;       // --junit: JUnit XML
  std::string summary_md_file;  // --summary-md: Markdown for a CI job summary
};

void add_ci_outputs(CLI::App* app, CiOutputs& o) {
  app->add_option("--junit", o.junit_file, "Write JUnit XML to FILE (- for stdout alone)");
  app->add_option("--summary-md", o.summary_md_file,
                  "Append a Markdown summary to FILE (- for stdout alone), e.g. $GITHUB_STEP_SUMMARY");
}

void write_text(const std::string& file, const std::string& text) {
  if (file.empty()) return;
  if (file == "-") {
    g_out.write_machine(text);
    return;
  }
  kvf::write_file_atomic(file, text);
}

// --summary-md: appended, as $GITHUB_STEP_SUMMARY expects (every step adds its part); one write(2)
// with O_APPEND, so concurrent steps do not interleave within a summary.
void append_text(const std::string& file, const std::string& text) {
  if (file.empty()) return;
  if (file == "-") {
    g_out.write_machine(text);
    return;
  }
  std::error_code ec;  // a missing folder is made, as check_output_file() allowed
  if (std::filesystem::path(file).has_parent_path()) std::filesystem::create_directories(std::filesystem::path(file).parent_path(), ec);
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw kvf::InfraError("cannot open " + file + " to append the summary: " + std::strerror(errno));
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      throw kvf::InfraError("cannot append the summary to " + file + ": " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) throw kvf::InfraError("cannot append the summary to " + file + ": " + std::strerror(errno));
}

// Refused before anything runs: two machine outputs on stdout (they could not be told apart), an
// output file that is also an input of the command (`replay case.json --json case.json`), and an
// existing case file (schema "kvfuzz-case": `replay DIR --json DIR/keep.json`). Other existing
// output files are replaced (--json, --junit) or appended to (--summary-md).
void refuse_bad_outputs(const std::vector<std::pair<std::string, std::string>>& outputs, const std::vector<std::string>& inputs) {
  std::vector<std::string> to_stdout;
  for (const auto& [option, out] : outputs)
    if (out == "-") to_stdout.push_back(option);
  if (to_stdout.size() > 1)
    throw kvf::InputError("-", "", to_stdout[0] + " and " + to_stdout[1] +
                                       " both name stdout; at most one machine output can go there: write the others to files");
  for (const auto& [option, out] : outputs) {
    if (out.empty() || out == "-") continue;
    for (const std::string& in : inputs) {
      std::error_code ec;
      if (!in.empty() && std::filesystem::equivalent(out, in, ec))
        throw kvf::InputError(out, "", "is also an input of this command (" + in +
                                           "); kvfuzz does not overwrite its inputs: choose another output file");
    }
    if (kvf::json_file_schema(out) == kvf::kCaseSchemaName)
      throw kvf::InputError(out, "", "is a kvfuzz case file; " + option +
                                         " never writes over a case: choose another output file");
  }
}

// `x` as the shortest decimal that reads back as x ("30", "0.25", "1e-06").
std::string number_word(double x) {
  char buf[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  return buf;
}

// --- argument validation --------------------------------------------------------------------------
// Out-of-range values are refused (exit 2), never clamped or wrapped; messages echo what was typed.
// (CLI11's own ranges print open bounds as 1.79769e+308 and let an unsigned option wrap -1.)

std::string bound_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", x);
  return buf;
}

// A whole number in [lo, hi]; hi >= 2^62 reads as "lo or more".
CLI::Validator whole_number(int64_t lo, int64_t hi) {
  const std::string expected = hi >= (int64_t{1} << 62) ? "a whole number, " + std::to_string(lo) + " or more"
                                                        : "a whole number from " + std::to_string(lo) + " to " + std::to_string(hi);
  return CLI::Validator(
      [=](std::string& s) {
        int64_t v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (s.empty() || end != s.data() + s.size() || (ec != std::errc() && ec != std::errc::result_out_of_range))
          return "expected " + expected + ", got \"" + s + "\"";
        if (ec == std::errc::result_out_of_range || v < lo || v > hi) return "out of range: expected " + expected + ", got " + s;
        return std::string();
      },
      hi >= (int64_t{1} << 62) ? ">= " + std::to_string(lo) : "in [" + std::to_string(lo) + " - " + std::to_string(hi) + "]");
}

// A 64-bit seed: digits only, 0 to 2^64 - 1.
CLI::Validator seed_number() {
  return CLI::Validator(
      [](std::string& s) {
        const std::string expected = "a whole number from 0 to " + std::to_string(std::numeric_limits<uint64_t>::max());
        uint64_t v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (s.empty() || end != s.data() + s.size() || (ec != std::errc() && ec != std::errc::result_out_of_range))
          return "expected " + expected + ", got \"" + s + "\"";
        if (ec == std::errc::result_out_of_range) return "out of range: expected " + expected + ", got " + s;
        return std::string();
      },
      "in [0 - 2^64-1]");
}

// A finite number of seconds in [lo, hi] (nan and inf refused).
CLI::Validator seconds_in(double lo, double hi) {
  const std::string expected = "a number of seconds from " + bound_text(lo) + " to " + bound_text(hi);
  return CLI::Validator(
      [=](std::string& s) {
        char* end = nullptr;
        errno = 0;
        const double v = s.empty() ? 0 : std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size()) return "expected " + expected + ", got \"" + s + "\"";
        if (!std::isfinite(v) || errno == ERANGE) return "expected a finite number: " + expected + ", got " + s;
        if (v < lo || v > hi) return "out of range: expected " + expected + ", got " + s;
        return std::string();
      },
      "in [" + bound_text(lo) + " - " + bound_text(hi) + "]");
}

constexpr int64_t kNoUpperBound = std::numeric_limits<int64_t>::max();
constexpr double kMinTimeout = 0.001, kMaxTimeout = 86400;  // --timeout, --worker-start-timeout
constexpr double kMaxSeconds = 1e9;                         // --seconds (about 31 years)

// --- unknown subcommands ----------------------------------------------------------------------------

// "unknown command rn; did you mean run?" (a command within 2 edits, nearest first), else the list.
std::string unknown_command_message(const std::string& word, const std::vector<std::string>& commands) {
  std::string all;
  for (const std::string& c : commands) all += (all.empty() ? "" : ", ") + c;
  const std::string best = kvf::nearest_name(word, commands);
  return "unknown command " + word + (best.empty() ? "; the commands are " + all : "; did you mean " + best + "?") +
         " (kvfuzz --help lists them)";
}

// CLI11's "The following arguments were not expected: 3 --seeed" for a mistyped option of `sub`:
// "unknown option --seeed of run; did you mean --seed?" (the nearest within 2 edits), else the
// pointer to --help. Empty when no extra argument looks like an option.
std::string unknown_option_message(const CLI::App& sub, const std::vector<std::string>& extras) {
  std::vector<std::string> names;
  for (const CLI::Option* o : sub.get_options()) {
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
    for (const std::string& s : o->get_snames()) names.push_back("-" + s);
  }
  const std::string cmd = sub.get_parent() ? "kvfuzz " + sub.get_name() : std::string("kvfuzz");
  for (const std::string& e : extras) {
    if (e.size() < 2 || e[0] != '-') continue;
    const std::string word = e.substr(0, e.find('='));
    const std::string best = kvf::nearest_name(word, names);
    return "unknown option " + word + (sub.get_parent() ? " of " + sub.get_name() : std::string()) +
           (best.empty() ? "" : "; did you mean " + best + "?") + " (" + cmd + " --help lists them)";
  }
  return "";
}

// Options shared by every subcommand that runs cases.
struct CommonOptions {
  std::string target = "cuda-emu";  // --target
  bool target_given = false;        // --target was given (replay, report: else each case's recorded target)
  bool quiet = false, verbose = false;  // -q, -v: kvf::Verbosity
  double timeout_s = 0;             // --timeout: per-launch limit; 0: the target's default (TargetInfo)
  bool no_fork = false;             // --no-fork: run launches in-process (debugging only)
  int64_t max_case_mib = 1024;      // --max-case-mib: largest buffer a case may declare
  int device = 0;                   // --device: CUDA device index for GPU targets
  std::string tolerance;            // --tolerance: value policy for expected writes (docs/contract.md "Quantisation"); empty: the target's default
  std::string python;               // --python: interpreter of the Python targets (triton-interp, python:...)
  int64_t windowed_above_mib = 256;  // --windowed-above-mib: larger caches are checked windowed (arena/windows.h)
  double worker_start_timeout_s = 120;  // --worker-start-timeout: a worker's start-up and reading of a case, at most
  int64_t worker_rss_limit_mib = 4096;  // --worker-rss-limit-mib: recycle a worker holding more private memory (0: off)
  int64_t worker_threads_limit = 256;   // --worker-threads-limit: recycle a worker running more threads (0: off)
  std::string program = "kvfuzz";       // argv[0] as given, for reproduction commands

  kvf::TargetOptions target_options() const { return kvf::TargetOptions{device, python}; }

  kvf::CheckOptions check() const { return check_for(target); }
  kvf::CheckOptions check_for(const std::string& name) const {
    kvf::CheckOptions c;
    c.isolation.fork = !no_fork;
    const kvf::TargetInfo info = kvf::make_target(name, target_options())->info();  // its defaults
    c.isolation.timeout_s = timeout_s > 0 ? timeout_s : info.default_timeout_s;
    c.isolation.windowed_above_bytes = windowed_above_mib * (int64_t{1} << 20);
    c.isolation.start_timeout_s = worker_start_timeout_s;
    c.isolation.worker_rss_limit_bytes = worker_rss_limit_mib * (int64_t{1} << 20);
    c.isolation.worker_threads_limit = worker_threads_limit;
    c.tolerance = *kvf::parse_tolerance(tolerance.empty() ? info.default_tolerance : tolerance);  // validated by the option's check
    return c;
  }
  // The part every case-running command shares, filled once here.
  kvf::RunOptions run() const {
    kvf::RunOptions o{target, target_options(), check(), limits(), invocation(), true, {}};
    o.target_given = target_given;
    o.check_for = [copy = *this](const std::string& name) { return copy.check_for(name); };
    return o;
  }

  // The options a reproduction must repeat: those that change what a case gives (a timeout, the
  // value policy, the device, the interpreter, the case-size limit, windowed checking), when set.
  kvf::Invocation invocation() const {
    kvf::Invocation inv{program, {}};
    auto add = [&inv](const char* option, const std::string& value) {
      inv.options.push_back(option);
      inv.options.push_back(value);
    };
    if (timeout_s > 0) add("--timeout", number_word(timeout_s));
    if (!tolerance.empty()) add("--tolerance", tolerance);
    if (device != 0) add("--device", std::to_string(device));
    if (!python.empty()) add("--python", python);
    if (max_case_mib != 1024) add("--max-case-mib", std::to_string(max_case_mib));
    if (windowed_above_mib != 256) add("--windowed-above-mib", std::to_string(windowed_above_mib));
    return inv;
  }

  kvf::Limits limits() const {
    kvf::Limits l;
    l.max_buffer_bytes = max_case_mib * (int64_t{1} << 20);
    return l;
  }
};

void add_common(CLI::App* app, CommonOptions& o) {
  app->add_option("--target", o.target, "Target to run cases on (see `kvfuzz targets`)")->default_str("cuda-emu");
  app->add_flag("-q,--quiet", o.quiet, "No progress lines on stderr (findings, errors and results still print)");
  app->add_flag("-v,--verbose", o.verbose, "A progress line after every case (pass and fail counts, cases/s, seconds)");
  app->add_option("--timeout", o.timeout_s,
                  "Seconds a single launch may take before it is a timeout, 0.001 to 86400 (default: the target's, 30 for "
                  "most; `kvfuzz targets`)")
      ->check(seconds_in(kMinTimeout, kMaxTimeout));
  app->add_flag("--no-fork", o.no_fork, "Run launches in the kvfuzz process (a faulting kernel kills kvfuzz)");
  app->add_option("--device", o.device, "CUDA device index for GPU targets")->check(whole_number(0, 1023));
  app->add_option("--windowed-above-mib", o.windowed_above_mib,
                  "Check caches larger than this many MiB in windowed mode: the host holds windows, the target checks the rest")
      ->check(whole_number(0, int64_t{1} << 30));
  app->add_option("--tolerance", o.tolerance,
                  "How values of expected writes are judged: exact, ulp:N, written-any-value, optionally with "
                  "per-format rules (exact,fp8_e4m3=written-any-value); default: the target's (`kvfuzz targets`)")
      ->check(CLI::Validator(
          [](std::string& s) {
            return kvf::parse_tolerance(s) ? std::string()
                                           : "expected exact, ulp:N or written-any-value, optionally followed by "
                                             ",DTYPE=RULE entries (exact,fp8_e4m3=written-any-value), got " + s;
          },
          "POLICY"));
  app->add_option("--worker-start-timeout", o.worker_start_timeout_s,
                  "Seconds a fresh worker may take to start (device context, modules, interpreter) and to read a "
                  "case; a slower one is replaced, never a finding")
      ->check(seconds_in(kMinTimeout, kMaxTimeout));
  app->add_option("--worker-rss-limit-mib", o.worker_rss_limit_mib,
                  "Recycle a worker whose private memory exceeds this after a case (a leaking kernel); 0: no limit")
      ->check(whole_number(0, int64_t{1} << 30));
  app->add_option("--worker-threads-limit", o.worker_threads_limit,
                  "Recycle a worker running more threads than this after a case; 0: no limit")
      ->check(whole_number(0, int64_t{1} << 20));
  app->add_option("--python", o.python,
                  "Python interpreter of the triton-interp and python:... targets (default: $KVFUZZ_PYTHON, "
                  "then build/venv-triton, then python3)");
}

// For subcommands that read case files.
void add_case_limits(CLI::App* app, CommonOptions& o) {
  app->add_option("--max-case-mib", o.max_case_mib, "Refuse case files whose buffers exceed this many MiB")
      ->check(whole_number(1, int64_t{1} << 30));
}

// --shard i/N | slurm | k8s/N (campaign/shard.h): read after parsing, since two forms read the environment.
void add_shard(CLI::App* app, std::string& text) {
  app->add_option("--shard", text,
                  "Check only shard i of N: the cases k with k mod N == i (0-based); slurm: the Slurm array task's; "
                  "k8s/N: JOB_COMPLETION_INDEX of N (docs/scale.md)");
}

kvf::Shard shard_from(const std::string& text) {
  if (text.empty()) return {};
  return kvf::parse_shard(text, [](const char* name) { return std::getenv(name); });
}

// --devices 0,1,... or all: distinct device indices 0..1023. `all` asks the driver, in a child
// process (campaign/devices.h).
std::vector<int> devices_from(const std::string& text) {
  if (text == "all") return kvf::all_cuda_devices();
  std::vector<int> devices;
  std::stringstream in(text);
  for (std::string word; std::getline(in, word, ',');) {
    int v = -1;
    const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), v);
    if (word.empty() || ec != std::errc() || end != word.data() + word.size() || v < 0 || v > 1023)
      throw kvf::InputError("--devices", "", "expected all or a comma-separated list of device indices from 0 to 1023, got \"" + text + "\"");
    if (std::find(devices.begin(), devices.end(), v) != devices.end())
      throw kvf::InputError("--devices", "", "device " + word + " is listed twice in \"" + text + "\"");
    devices.push_back(v);
  }
  if (devices.empty()) throw kvf::InputError("--devices", "", "expected all or a comma-separated list of device indices, got \"\"");
  return devices;
}

// Why `name` cannot run on this machine (no GPU, no interpreter, a module missing); empty when it can.
std::string unavailable_here(const std::string& name) {
  try {
    return kvf::make_target(name)->unavailable_reason();
  } catch (const std::exception& e) {
    return e.what();
  }
}

// One target of `kvfuzz targets`: its info, whether it runs here, what it supports (own targets:
// their capabilities; a named plugin or Python function: what it declared when loaded) and, for a
// Python function, the optional inputs it declared.
struct TargetEntry {
  kvf::TargetInfo info;
  std::string unavailable;  // empty: available here
  std::optional<kvf::Capabilities> capabilities;
  std::vector<std::string> inputs;
};

nlohmann::json target_entry_json(const TargetEntry& t) {
  nlohmann::json j{{"name", t.info.name},
                   {"available", t.unavailable.empty()},
                   {"unavailable_reason", t.unavailable},
                   {"summary", t.info.summary},
                   {"supports", t.info.supports},
                   {"values_checked", t.info.tolerance},
                   {"default_tolerance", t.info.default_tolerance},
                   {"default_timeout_s", t.info.default_timeout_s},
                   {"needs_gpu", t.info.needs_gpu},
                   {"capabilities", t.capabilities ? kvf::capabilities_to_json(*t.capabilities) : nlohmann::json()}};
  if (!t.inputs.empty()) j["inputs"] = t.inputs;
  return j;
}

std::string target_entry_text(const TargetEntry& t) {
  const kvf::TargetInfo& i = t.info;
  std::ostringstream o;
  o << i.name << (t.unavailable.empty() ? "" : "  (not available here)") << "\n"
    << "  " << i.summary << "\n"
    << "  supports: " << i.supports << "\n"
    << (t.capabilities ? "  formats: " + kvf::formats_text(*t.capabilities) + "\n" : "");
  if (!t.inputs.empty()) {
    o << "  inputs:";
    for (const std::string& n : t.inputs) o << " " << n;
    o << "\n";
  }
  o << "  values checked: " << i.tolerance << "\n"
    << (i.default_tolerance == "exact" ? "" : "  default --tolerance: " + i.default_tolerance + "\n")
    << (i.default_timeout_s == 30 ? "" : "  default --timeout: " + std::to_string(static_cast<int>(i.default_timeout_s)) + " s\n")
    << "  needs a GPU: " << (i.needs_gpu ? "yes" : "no") << "\n"
    << "  available here: " << (t.unavailable.empty() ? std::string("yes") : "no: " + t.unavailable) << "\n";
  return o.str();
}

// A named target as loaded: a plugin is queried and a Python function's module imported, so the
// entry shows what the kernel declares. An unknown name or a module that does not exist is exit 2
// (InputError); a kernel that cannot load here (no GPU) is listed as not available.
TargetEntry named_target_entry(const std::string& name) {
  const std::unique_ptr<kvf::Target> t = kvf::make_target(name);
  TargetEntry e{t->info(), t->unavailable_reason(), std::nullopt, {}};
  if (e.unavailable.empty()) {
    e.capabilities = t->capabilities();
    e.inputs = t->declared_inputs();
  }
  return e;
}

// `kvfuzz targets [TARGET...]`: every target with what it supports, or only the named ones as loaded
// (a user's kernel with its declaration); --json: the same as one JSON document, each capabilities
// object in the keys of a Python declaration (gen/capabilities.h), null where nothing is declared.
int cmd_targets(bool json, const std::vector<std::string>& names) {
  std::vector<TargetEntry> entries;
  for (const std::string& name : names) entries.push_back(named_target_entry(name));
  if (names.empty())
    for (const kvf::TargetInfo& t : kvf::list_targets()) entries.push_back({t, unavailable_here(t.name), t.capabilities, {}});
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const TargetEntry& t : entries) out.push_back(target_entry_json(t));
    if (names.empty()) {
      for (const auto& [name, why] : kvf::targets_not_built())
        out.push_back({{"name", name}, {"available", false}, {"unavailable_reason", why}, {"capabilities", nullptr}});
      for (const std::string& usage : kvf::prefix_target_usages())
        out.push_back({{"name", usage}, {"summary", "your kernel (docs/targets.md)"}, {"capabilities", nullptr}});
    }
    std::cout << nlohmann::json{{"schema_version", 1}, {"targets", out}}.dump(2) << "\n";
    return kClean;
  }
  for (const TargetEntry& t : entries) std::cout << target_entry_text(t);
  if (!names.empty()) return kClean;
  for (const auto& [name, why] : kvf::targets_not_built())
    std::cout << name << "  (not available here)\n  available here: no: " << why << "\n";
  for (const std::string& usage : kvf::prefix_target_usages())
    std::cout << usage << "\n  your kernel (docs/targets.md); `kvfuzz targets " << usage
              << "` shows what it declares\n";
  return kClean;
}

int cmd_run(kvf::CampaignOptions o, const CommonOptions& common, bool seed_given, const std::string& json_file,
            const CiOutputs& ci) {
  static_cast<kvf::RunOptions&>(o) = common.run();
  if (!seed_given) o.seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  kvf::open_target(o.target, o.target_options);  // unknown: exit 2; unavailable here: exit 3; before anything runs
  for (const int d : o.devices) kvf::open_target(o.target, kvf::TargetOptions{d, o.target_options.python});  // every --devices GPU
  std::ostream& out = *g_out.human;
  if (kvf::verbosity() != kvf::Verbosity::quiet)
    std::cerr << "kvfuzz: run on " << o.target << ", profile " << (o.config.empty() ? "default" : o.config.string())
            << ", seed " << o.seed << ", "
            << (o.cases ? kvf::count_of(o.cases, "case") : std::string("no case limit"))
            << (o.seconds > 0 ? ", at most " + number_word(o.seconds) + " s" : std::string())
            << (o.jobs > 1 ? ", " + std::to_string(o.jobs) + " jobs" : std::string())
            << (o.devices.empty() ? std::string() : ", devices " + std::to_string(o.devices.size()))
            << (o.shard.sharded() ? ", shard " + o.shard.text() + (o.cases ? " (" + std::to_string(o.shard.cases_of(o.cases)) + " of the cases)" : std::string()) : std::string())
            << ", values checked " << kvf::to_string(o.check.tolerance) << "\n";
  kvf::install_stop_handlers();
  kvf::TerminalProgress progress;
  const kvf::CampaignResult r = kvf::run_campaign(o, progress);
  for (const kvf::FailureRecord& f : r.failures) out << kvf::render_failure(f);
  kvf::ReportOptions report_opts;
  static_cast<kvf::RunOptions&>(report_opts) = o;
  for (const kvf::FailureReport& fr : kvf::write_failure_reports(r, report_opts)) {
    if (fr.error.empty()) {
      out << "kvfuzz: report of " << fr.case_file.string() << ": " << (fr.dir / "report.html").string() << "\n";
    } else {
      std::cerr << "kvfuzz: warning: no report for " << fr.case_file.string() << ": " << fr.error << "\n";
    }
  }
  out << kvf::render_skipped(r);  // cases outside a plugin's capabilities, by reason
  out << kvf::render_stats(r);
  out << kvf::render_stages(r);
  out << kvf::render_duplicates(r);
  out << kvf::render_devices(r);
  out << kvf::render_workers(r.workers);
  out << "kvfuzz: " << kvf::count_of(r.cases, "case") << " in " << r.seconds << " s (" << static_cast<int64_t>(r.cases_per_second())
      << " cases/s), seed " << r.seed << (r.interrupted ? ", interrupted" : "") << "\n";
  write_json(json_file, kvf::campaign_json(r, o.command_line));
  write_text(ci.junit_file, kvf::campaign_junit(r, o.command_line));
  append_text(ci.summary_md_file, kvf::campaign_summary_markdown(r));
  out << kvf::summary_line(r.passed, r.failed) << std::endl;
  return kvf::exit_code(r);
}

// What a saved finding that passes now means. "fixed" only when it ran on the target it was found
// on (or on one the user named): a pass on another target says nothing about the bug.
std::string fixed_line(const kvf::ReplayItem& item, bool target_named) {
  const std::string head = "kvfuzz: " + item.file.string() + " (recorded " + item.recorded.text() +
                           (item.found_on.empty() ? "" : " on " + item.found_on) + ") passes now on " + item.target;
  if (item.same_code)
    return head + ", but " + item.target + " is byte for byte the file the finding was made on: not reproduced (a flaky or "
                  "environment-dependent failure), not fixed\n";
  if (item.found_on.empty() && !target_named)
    return head + "; the file does not record the target it was found on, so this is not a verdict on it (name it with --target)\n";
  return "kvfuzz: fixed: " + item.file.string() + " (recorded " + item.recorded.text() +
         (item.found_on.empty() || item.found_on == item.target ? "" : " on " + item.found_on) + ") passes now on " + item.target + "\n";
}

int cmd_replay(kvf::ReplayOptions o, const CommonOptions& common, const std::string& json_file,
               const std::string& command_line, const CiOutputs& ci) {
  static_cast<kvf::RunOptions&>(o) = common.run();
  std::ostream& out = *g_out.human;
  kvf::install_stop_handlers();
  kvf::TerminalProgress progress;
  const kvf::ReplayResult r = kvf::replay_cases(o, progress);
  out << kvf::render_not_cases(r);  // summaries and reports found in a corpus folder: not cases
  for (const kvf::ReplayItem& item : r.items) {
    if (!item.as_expected) out << kvf::render_replay_mismatch(item);
    if (!r.expect_saved && item.recorded.outcome != kvf::Expect::pass && item.outcome.pass())  // a saved finding that no longer fails
      out << fixed_line(item, common.target_given);
  }
  out << kvf::render_skipped(r);  // case files outside a plugin's capabilities, by reason
  out << kvf::render_workers(r.workers);
  if (r.interrupted) out << "kvfuzz: interrupted after " << r.items.size() << " case files\n";
  write_json(json_file, kvf::replay_json(r, command_line));
  write_text(ci.junit_file, kvf::replay_junit(r, command_line));
  append_text(ci.summary_md_file, kvf::replay_summary_markdown(r));
  out << kvf::summary_line(r.passed(), r.failed()) << std::endl;
  return kvf::exit_code(r);
}

int cmd_shrink(kvf::ShrinkOptions o, const CommonOptions& common) {
  static_cast<kvf::RunOptions&>(o) = common.run();
  kvf::install_stop_handlers();
  kvf::TerminalProgress progress;
  const kvf::ShrinkResult r = kvf::shrink_case(o, progress);
  if (!r.skipped.empty()) {  // the kernel declined the case (KVFZ_APPEND_SKIP): neither pass nor finding
    std::cout << "kvfuzz: " << o.file.string() << " is not run on " << o.target << " (" << r.skipped
              << "); nothing to shrink\n"
              << "kvfuzz: skipped 1 case (" << r.skipped << ": 1)\n"
              << kvf::summary_line(0, 0) << std::endl;
    return kClean;
  }
  if (!r.failed) {
    std::cout << "kvfuzz: " << o.file.string() << " passes on " << o.target << "; nothing to shrink\n"
              << kvf::summary_line(1, 0) << std::endl;
    return kClean;
  }
  std::cout << kvf::render_failure(r.record) << kvf::summary_line(0, 1) << std::endl;
  return kFindings;
}

// `kvfuzz report CASE`: re-runs the case and writes report.json, report.md and report.html.
// Without -o, beside an earlier report (CASE.report-2, ...) unless --force replaces it; an -o folder
// holding a report is refused (exit 2) unless --force. Checked before the case runs.
int cmd_report(const std::string& file, std::string out_dir, bool force, const CommonOptions& common) {
  kvf::ReportOptions o;
  static_cast<kvf::RunOptions&>(o) = common.run();
  const bool beside = out_dir.empty() && !force;
  if (out_dir.empty()) out_dir = kvf::report_dir_for(file).string();
  if (beside && kvf::holds_report(out_dir)) {
    const std::string earlier = out_dir;
    out_dir = kvf::free_report_dir(out_dir).string();
    std::cerr << "kvfuzz: " << earlier << " holds an earlier report (kept); this one goes to " << out_dir << " (--force replaces it)\n";
  }
  kvf::check_report_dir(out_dir, force);
  kvf::check_output_directory(out_dir, "the report folder");
  kvf::install_stop_handlers();
  const kvf::CaseReport r = kvf::report_case_file(file, o);
  if (!r.skipped.empty()) {  // the kernel declined the case (KVFZ_APPEND_SKIP): nothing to report
    std::cout << "kvfuzz: " << file << " is not run on " << r.target << " (" << r.skipped << "); no report written\n"
              << kvf::summary_line(0, 0) << std::endl;
    return kClean;
  }
  std::cout << "kvfuzz: ran " << file << " on " << r.target << (common.target_given ? "" : " (the target the case records, or the default when it records none; --target names another)") << "\n";
  for (const auto& written : kvf::write_report(r, out_dir, force)) std::cout << "kvfuzz: wrote " << written.string() << "\n";
  if (r.verdict.pass()) std::cout << "kvfuzz: PASS " << file << " on " << r.target << "\n";
  if (!r.verdict.pass()) std::cout << "kvfuzz: FAIL " << file << " on " << r.target << " -> " << to_string(r.verdict.findings.front().kind) << "\n"
                                   << kvf::render_verdict(r.verdict) << "  reproduce: " << r.replay_command << "\n"
                                   << (r.locate_command.empty() ? std::string() : "  locate: " + r.locate_command + "\n");
  std::cout << kvf::summary_line(r.verdict.pass() ? 1 : 0, r.verdict.pass() ? 0 : 1) << std::endl;
  return r.verdict.pass() ? kClean : kFindings;
}

// `kvfuzz merge OUT.json SUMMARY.json...`: the shards' JSON summaries as one (campaign/summary_merge.h).
int cmd_merge_summaries(const std::string& out_file, const std::vector<std::string>& inputs) {
  refuse_bad_outputs({{"merge's OUT", out_file}}, inputs);
  // `merge s0.json s1.json s2.json` (the output name forgotten) would replace shard 0's summary.
  if (kvf::is_summary_file(out_file))
    throw kvf::InputError(out_file, "", "is a kvfuzz summary, so merging into it would replace it: kvfuzz merge OUT "
                                        "SUMMARY... writes a new file OUT; name one that does not exist (merged.json)");
  std::error_code ec;
  if (std::filesystem::is_directory(out_file, ec))
    throw kvf::InputError(out_file, "", "is a folder; merging JSON summaries writes one summary file: name a file such as merged.json");
  if (out_file == "-") g_out.take_stdout_for_machine_output();
  else kvf::check_output_file(out_file, "merge's OUT");
  std::vector<std::filesystem::path> files(inputs.begin(), inputs.end());
  const kvf::SummaryMerge m = kvf::merge_summaries(files);
  std::ostream& out = *g_out.human;
  const nlohmann::json& j = m.merged;
  out << "kvfuzz: merged " << m.present.size() << " of " << m.shard_count << " shard summaries of seed " << j["seed"].get<std::string>()
      << ", profile " << j["profile"].get<std::string>() << " on " << j["target"].get<std::string>() << ": " << kvf::count_of(m.cases, "case") << ", "
      << j["failing_cases_by_signature"].size() << " signatures among the failing cases\n";
  for (const nlohmann::json& s : j["failing_cases_by_signature"])
    out << "kvfuzz: signature " << s["signature_id"].get<std::string>() << ": " << s["failing_cases"] << " failing cases: "
        << s["signature"].get<std::string>() << "\n";
  for (const nlohmann::json& f : j["failures"])
    out << "kvfuzz: saved by shard " << f["shard"] << ": " << f.value("file", std::string()) << "\n  reproduce: " << f.value("replay", std::string()) << "\n";
  if (!m.missing.empty()) {
    std::string list;
    for (const int64_t i : m.missing) list += (list.empty() ? "" : ", ") + std::to_string(i);
    out << "kvfuzz: missing shards (no summary): " << list << " of 0.." << m.shard_count - 1 << "; the result is incomplete (exit 3)\n";
  }
  write_json(out_file, j);
  out << kvf::summary_line(m.passed, m.failed) << std::endl;
  return m.exit_code;
}

// `kvfuzz merge OUT IN...`: one case per signature in OUT (campaign/merge.h).
int cmd_merge(kvf::MergeOptions o, const CommonOptions& common) {
  static_cast<kvf::RunOptions&>(o) = common.run();
  kvf::install_stop_handlers();
  const kvf::MergeResult r = kvf::merge_cases(o);
  // Every file read is one of: in OUT already, copied, not copied, no new coverage, not checked.
  std::cout << "kvfuzz: merge into " << o.out.string() << ": " << kvf::count_of(r.read, "case file") << " read ("
            << r.in_out << " already in OUT), " << r.failing << " failing on " << (r.targets.empty() ? o.target : r.targets)
            << " (" << kvf::count_of(r.signatures, "signature") << "); " << r.copied << " copied, " << r.not_copied
            << " not copied (a case of their signature, or the same case, as small or smaller, is in OUT or among the inputs)";
  if (o.coverage)
    std::cout << "; " << r.no_new_coverage << " passing cases not copied (no new feature bucket), " << r.buckets
              << " buckets covered";
  if (r.unchecked) std::cout << "; " << r.unchecked << " not checked (interrupted)";
  if (o.prune) std::cout << "; " << kvf::count_of(static_cast<int64_t>(r.pruned.size()), "superseded case") << " deleted";
  std::cout << "\n";
  for (const auto& f : r.pruned) std::cout << "kvfuzz: deleted " << f.string() << "\n";
  return kvf::stop_requested() ? 128 + kvf::stop_signal() : kClean;
}

// `kvfuzz compare`: the same cases on two targets; their post-run images must be byte-identical.
int cmd_compare(kvf::CompareOptions o, const CommonOptions& common, bool seed_given) {
  static_cast<kvf::RunOptions&>(o) = common.run();
  if (!seed_given) o.seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  if (kvf::verbosity() != kvf::Verbosity::quiet)
    std::cerr << "kvfuzz: compare " << o.target << " against " << o.against << ", profile "
            << (o.config.empty() ? "default" : o.config.string()) << ", seed " << o.seed << ", " << kvf::count_of(o.cases, "case")
            << (o.jobs > 1 ? ", " + std::to_string(o.jobs) + " jobs" : std::string())
            << (o.shard.sharded() ? ", shard " + o.shard.text() + " (" + std::to_string(o.shard.cases_of(o.cases)) + " of them)" : std::string())
            << "\n";
  kvf::install_stop_handlers();
  kvf::TerminalProgress progress;
  const kvf::CompareResult r = kvf::compare_targets(o, progress);
  if (r.first) {
    const kvf::CompareDifference& d = *r.first;
    std::cout << "kvfuzz: DIFFER case #" << d.case_index << " at " << d.where << "\n"
              << "  " << r.target << ": " << d.a_found << "\n"
              << "  " << r.against << ": " << d.b_found << "\n"
              << "  saved: " << d.file.string() << "\n"
              << "  reproduce: " << o.invocation.command("replay", d.file, r.target) << "\n"
              << "        and: " << o.invocation.command("replay", d.file, r.against) << "\n";
  }
  for (const auto& [why, n] : r.skip_reasons) std::cout << "kvfuzz: skipped " << kvf::count_of(n, "case") << " outside " << why << "\n";
  std::cout << "kvfuzz: " << kvf::count_of(r.cases, "case") << " in " << r.seconds << " s, seed " << r.seed << ": " << r.identical << " identical"
            << (r.both_failed ? ", " + std::to_string(r.both_failed) + " refused, crashed or hung on both" : std::string())
            << (r.interrupted ? ", interrupted" : "") << "\n";
  std::cout << kvf::summary_line(r.identical + r.both_failed, r.differing) << std::endl;
  return r.differing ? kFindings : kClean;
}

// `kvfuzz selftest`: mutants of the kernels, each of which a bounded campaign must kill (campaign/selftest.h).
int cmd_selftest(const kvf::SelftestOptions& o, const std::string& json_file, const std::string& junit_file,
                 const std::string& command_line) {
  std::ostream& out = *g_out.human;
  kvf::install_stop_handlers();
  kvf::TerminalProgress progress;
  const kvf::SelftestResult r = kvf::run_selftest(o, progress);
  if (o.list) {
    for (const kvf::MutantResult& m : r.mutants)
      out << m.rule.name << "  " << m.rule.pattern << "  " << m.target << (m.rule.gpu_only.empty() ? "" : "  (GPU only)")
          << "\n  " << m.rule.description << "\n";
    for (const kvf::PatternWithoutMutant& p : r.not_applicable) out << p.pattern << ": no mutant: " << p.why << "\n";
    return kClean;
  }
  out << kvf::render_selftest_table(r);
  write_json(json_file, kvf::selftest_json(r, command_line));
  write_text(junit_file, kvf::selftest_junit(r, command_line));
  out << kvf::summary_line(r.passed(), r.failed()) << std::endl;
  if (r.stale()) return kBadInput;  // the catalogue no longer matches the kernel: not a survivor
  const bool only_errors = std::all_of(r.mutants.begin(), r.mutants.end(), [](const kvf::MutantResult& m) {
    return m.status == kvf::MutantStatus::killed || m.status == kvf::MutantStatus::skipped || m.status == kvf::MutantStatus::error;
  });
  if (r.infra_error() && only_errors) return kInfra;  // could not build or run a mutant (compiler, target)
  return r.failed() ? kFindings : kClean;
}

}  // namespace

// compute-sanitizer's path: $KVFUZZ_COMPUTE_SANITIZER, else the first on PATH, else under $CUDA_HOME/bin
// or /usr/local/cuda/bin; empty when none is installed.
std::string find_compute_sanitizer(std::vector<std::string>& looked) {
  const auto runnable = [](const std::filesystem::path& p) { return access(p.c_str(), X_OK) == 0 && !std::filesystem::is_directory(p); };
  if (const char* e = std::getenv("KVFUZZ_COMPUTE_SANITIZER"); e && *e) {
    looked.push_back(std::string("$KVFUZZ_COMPUTE_SANITIZER (") + e + ")");
    return runnable(e) ? e : "";
  }
  std::vector<std::filesystem::path> dirs;
  if (const char* path = std::getenv("PATH")) {
    std::stringstream s(path);
    for (std::string d; std::getline(s, d, ':');)
      if (!d.empty()) dirs.emplace_back(d);
  }
  looked.push_back("PATH");
  if (const char* cuda = std::getenv("CUDA_HOME"); cuda && *cuda) {
    dirs.emplace_back(std::filesystem::path(cuda) / "bin");
    looked.push_back("$CUDA_HOME/bin");
  }
  dirs.emplace_back("/usr/local/cuda/bin");
  looked.push_back("/usr/local/cuda/bin");
  for (const auto& d : dirs)
    if (runnable(d / "compute-sanitizer")) return (d / "compute-sanitizer").string();
  return "";
}

// `replay ... --sanitize`: this very command line, without --sanitize and with --no-fork, run by
// compute-sanitizer (kvf::sanitizer_words). Returns only when that cannot be started.
int exec_under_sanitizer(int argc, char** argv) {
  std::vector<std::string> looked;
  const std::string sanitizer = find_compute_sanitizer(looked);
  if (sanitizer.empty()) {
    std::string where;
    for (const std::string& l : looked) where += (where.empty() ? "" : ", ") + l;
    throw kvf::InfraError("replay --sanitize: compute-sanitizer is not installed here (looked in " + where +
                          "); it comes with the CUDA Toolkit, or set KVFUZZ_COMPUTE_SANITIZER to its path");
  }
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::vector<std::string> words = kvf::sanitizer_words(sanitizer);
  words.push_back(ec ? std::string(argv[0]) : self.string());
  bool no_fork = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sanitize" || a.rfind("--sanitize=", 0) == 0) continue;
    no_fork = no_fork || a == "--no-fork";
    words.push_back(a);
  }
  if (!no_fork) words.push_back("--no-fork");
  std::cerr << "kvfuzz: running " << kvf::reproduce_command(words.front(), {words.begin() + 1, words.end()}) << "\n";
  std::vector<char*> args;
  for (std::string& w : words) args.push_back(w.data());
  args.push_back(nullptr);
  std::fflush(nullptr);
  execv(sanitizer.c_str(), args.data());
  throw kvf::InfraError("replay --sanitize: cannot run " + sanitizer + ": " + std::strerror(errno));
}

int main(int argc, char** argv) {
  // A worker process of a campaign (campaign/isolation.h): kvfuzz re-executed, never a user's command.
  if (argc >= 2 && std::string(argv[1]) == kvf::kWorkerFlag) kvf::worker_process_main(argc, argv);
  kvf::set_worker_executable("/proc/self/exe");
  const std::string command_line = join_command_line(argc, argv);
  CLI::App app{"kvfuzz: property-based fuzzer and verifier for KV-cache append kernels"};
  app.set_version_flag("--version", std::string("kvfuzz ") + KVFUZZ_VERSION);
  app.require_subcommand(1);

  CommonOptions common;
  common.program = argc > 0 && argv[0] && *argv[0] ? argv[0] : "kvfuzz";
  kvf::CampaignOptions run_opts;
  run_opts.command_line = command_line;
  std::string json_file;
  CLI::App* run = app.add_subcommand("run", "Generate random batches, check each, shrink and save failures");
  add_common(run, common);
  run->add_option("--config", run_opts.config, "Campaign profile (JSON, see configs/); default: built-in default")
      ->check(CLI::ExistingFile);
  CLI::Option* cases_opt =
      run->add_option("--cases", run_opts.cases, "Number of cases (default 1000, none with --seconds; 0 = until --seconds or ^C)")
          ->check(whole_number(0, kNoUpperBound));
  CLI::Option* seconds_opt =
      run->add_option("--seconds", run_opts.seconds, "Stop after this many seconds (0 = no limit); alone, it lifts the case limit")
          ->check(seconds_in(0, kMaxSeconds));
  CLI::Option* seed_opt =
      run->add_option("--seed", run_opts.seed, "Campaign seed, 0 to 2^64-1 (default: random, printed)")->check(seed_number());
  run->add_option("--corpus-out", run_opts.corpus_out, "Directory for minimal failing cases");
  run->add_option("--json", json_file, "Write a JSON summary to FILE (- for stdout alone)");
  CiOutputs ci;
  add_ci_outputs(run, ci);
  run->add_flag("--keep-going", run_opts.keep_going, "Continue after the first confirmed failure");
  run->add_option("-j,--jobs", run_opts.jobs,
                  "Cases checked in parallel, 1 to 256 (threads, each with its own worker process; the cores of a "
                  "host target's machine, 16 or so for one GPU)")
      ->check(whole_number(1, 256))
      ->capture_default_str();
  run->add_option("--confirm-runs", run_opts.confirm_runs, "Re-runs that must all fail before shrinking")
      ->check(whole_number(0, 100));
  run->add_flag("--stats", run_opts.stats,
                "Count the feature buckets every checked case hits (layouts, dtypes, non-power-of-two blocks, padding "
                "rows, slot == capacity, distinct K/V strides, misaligned bases, ...): text and JSON `stats`");
  run->add_option("--repeat", run_opts.repeat,
                  "Launch every case N times, each on a fresh arena; any failing launch is a finding (races)")
      ->check(whole_number(1, 1000));
  run->add_option("--max-shrink-tries", run_opts.max_shrink_tries, "Shrink candidates to evaluate at most")
      ->check(whole_number(0, kNoUpperBound));
  std::string run_shard, run_devices;
  add_shard(run, run_shard);
  CLI::Option* devices_opt = run->add_option(
      "--devices", run_devices,
      "Spread the -j workers over these GPUs (0,1,... or all; thread j on the (j mod count)-th); the summary "
      "reports cases/s per device and the host's CPU use");

  kvf::ReplayOptions replay_opts;
  std::vector<std::string> replay_paths;
  CLI::App* replay = app.add_subcommand("replay", "Re-run case files or corpus directories (never shrinks)");
  add_common(replay, common);
  add_case_limits(replay, common);
  replay->add_option("paths", replay_paths, "Case files and directories of *.json cases")->required();
  replay->add_flag("--expect-saved", replay_opts.expect_saved,
                   "A case passes when its outcome matches its file's `expect` (default: when it gives no finding, "
                   "so a saved finding fails while its bug is there)");
  replay->add_option("--json", json_file, "Write a JSON summary to FILE (- for stdout alone)");
  add_ci_outputs(replay, ci);
  bool replay_sanitize = false;
  replay->add_flag("--sanitize", replay_sanitize,
                   "Run the cases in one process (--no-fork) under compute-sanitizer's memcheck, which names the kernel, "
                   "thread and address of a bad GPU access ($KVFUZZ_COMPUTE_SANITIZER, else PATH, $CUDA_HOME/bin, "
                   "/usr/local/cuda/bin); exit 1 when it reports an error");

  kvf::ShrinkOptions shrink_opts;
  shrink_opts.command_line = command_line;
  std::string shrink_file;
  CLI::App* shrink = app.add_subcommand("shrink", "Minimise a failing case (written by `kvfuzz run`)");
  add_common(shrink, common);
  add_case_limits(shrink, common);
  shrink->add_option("case", shrink_file, "The failing case file")->required();
  shrink->add_option("--config", shrink_opts.config, "Profile whose value lists guide shrinking")
      ->check(CLI::ExistingFile);
  shrink->add_option("-o,--out-dir", shrink_opts.out_dir, "Directory for the minimal case (default: beside CASE)");
  shrink->add_option("--max-shrink-tries", shrink_opts.max_shrink_tries, "Shrink candidates to evaluate at most")
      ->check(whole_number(0, kNoUpperBound));

  kvf::GenerateOptions gen_opts;
  gen_opts.command_line = command_line;
  CLI::App* generate = app.add_subcommand("generate", "Write the cases a campaign would check, without running them");
  generate->add_option("--config", gen_opts.config, "Campaign profile (JSON)")->check(CLI::ExistingFile);
  generate->add_option("--seed", gen_opts.seed, "Campaign seed")->required()->check(seed_number());
  generate->add_option("--cases", gen_opts.cases, "Number of cases")->check(whole_number(1, kNoUpperBound));
  generate->add_option("-o,--out-dir", gen_opts.out_dir, "Directory for the case files")->required();
  generate->add_flag("--explicit", gen_opts.explicit_values,
                     "Write each case's input rows as explicit values (explicit_inputs), to edit by hand");
  std::string generate_shard;
  add_shard(generate, generate_shard);

  std::string report_file, report_dir;
  CLI::App* report = app.add_subcommand("report", "Re-run a case and write report.json, report.md and report.html");
  add_common(report, common);
  add_case_limits(report, common);
  report->add_option("case", report_file, "The case file")->required();
  report->add_option("-o,--out-dir", report_dir,
                     "Directory for the report (default: CASE's directory/<name>.report, or beside an earlier report there)");
  bool report_force = false;
  report->add_flag("--force", report_force, "Replace an earlier kvfuzz report in the report directory");

  bool targets_json = false;
  CLI::App* targets = app.add_subcommand("targets", "List targets and what each supports");
  targets->add_flag("--json", targets_json, "Print the list as JSON (each target's capabilities in the keys of docs/targets.md)");
  std::vector<std::string> targets_named;
  targets->add_option("target", targets_named,
                      "Only these targets, loaded: a plugin or Python function with what it declares");

  kvf::MergeOptions merge_opts;
  std::string merge_out;
  std::vector<std::string> merge_inputs;
  CLI::App* merge = app.add_subcommand(
      "merge", "Merge findings folders and corpora into OUT (one case per signature, the smallest), or the JSON "
               "summaries of a campaign's shards into OUT.json (docs/scale.md)");
  add_common(merge, common);
  add_case_limits(merge, common);
  merge->add_option("out", merge_out, "The folder merged into (its signatures.kvfuzz-index is updated), or the merged summary file")->required();
  merge->add_option("inputs", merge_inputs, "Case files and folders to merge, or `run --json` summaries (only read)");
  merge->add_flag("--prune", merge_opts.prune, "Delete OUT's cases superseded by a smaller case of their signature");
  merge->add_flag("--coverage", merge_opts.coverage,
                  "Copy a passing case only when it adds a feature bucket of `run --stats` (smallest first): a minimal corpus");

  kvf::CompareOptions compare_opts;
  compare_opts.command_line = command_line;
  CLI::App* compare = app.add_subcommand("compare", "Run the same cases on two targets and require byte-identical images");
  add_common(compare, common);
  compare->add_option("--against", compare_opts.against, "The second target (see `kvfuzz targets`; golden = the contract)")->required();
  compare->add_option("--config", compare_opts.config, "Campaign profile (JSON, see configs/); default: built-in default")
      ->check(CLI::ExistingFile);
  compare->add_option("--cases", compare_opts.cases, "Number of cases")->check(whole_number(1, kNoUpperBound));
  CLI::Option* compare_seed =
      compare->add_option("--seed", compare_opts.seed, "Campaign seed (default: random, printed)")->check(seed_number());
  compare->add_option("-j,--jobs", compare_opts.jobs, "Cases compared in parallel, 1 to 256")->check(whole_number(1, 256))->capture_default_str();
  compare->add_option("-o,--out-dir", compare_opts.out_dir, "Directory for the first differing case (default: kvfuzz-compare)");
  std::string compare_shard;
  add_shard(compare, compare_shard);

  kvf::SelftestOptions selftest_opts;
  std::string selftest_json_file, selftest_junit_file;
  CLI::App* selftest = app.add_subcommand("selftest", "Build every mutant of the catalogue and require kvfuzz to catch it");
  selftest->add_option("--catalogue", selftest_opts.catalogue, "Mutant catalogue (default: tests/mutants/mutants.json)")
      ->check(CLI::ExistingFile);
  selftest->add_option("--source-dir", selftest_opts.source_dir, "Source tree with kernels/, include/, examples/, configs/")
      ->check(CLI::ExistingDirectory);
  selftest->add_option("--work-dir", selftest_opts.work_dir, "Rewritten sources, cached plugins, campaign outputs");
  selftest->add_option("--cxx", selftest_opts.cxx, "Host C++ compiler for the mutant plugins (default: $CXX, then the configure-time one)");
  selftest->add_option("--target", selftest_opts.targets, "plugin (CUDA mutants) and/or triton-interp (Triton mutants); default both");
  selftest->add_option("--filter", selftest_opts.filter, "Only mutants whose name contains this");
  selftest->add_option("-j,--jobs", selftest_opts.jobs, "Mutants built and checked in parallel, 1 to 256")->check(whole_number(1, 256))->capture_default_str();
  selftest->add_option("--seed", selftest_opts.seed, "Campaign seed of every mutant")->check(seed_number());
  selftest->add_option("--python", selftest_opts.python, "Python interpreter for triton-interp campaigns");
  selftest->add_option("--timeout", selftest_opts.timeout_s, "Seconds a single launch may take, 0.001 to 86400")
      ->check(seconds_in(kMinTimeout, kMaxTimeout));
  selftest->add_flag("--metamorphic", selftest_opts.metamorphic_only,
                     "Only the metamorphic checks (no golden model): the clean kernel and the rules that name relations");
  selftest->add_option("--metamorphic-trials", selftest_opts.metamorphic_trials, "Random batches per metamorphic relation")
      ->check(whole_number(1, 1000000));
  selftest->add_flag("--list", selftest_opts.list, "List the catalogue's rules and patterns without a mutant; run nothing");
  selftest->add_option("--json", selftest_json_file, "Write a JSON summary to FILE (- for stdout alone)");
  selftest->add_option("--junit", selftest_junit_file, "Write JUnit XML to FILE (- for stdout alone)");

  // The first word that is not an option names the command: an unknown one is named, with the
  // nearest known one (CLI11 would only say that a subcommand is required).
  if (argc >= 2 && argv[1][0] != '-') {
    std::vector<std::string> commands;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App* s) { return !s->get_name().empty(); })) commands.push_back(sub->get_name());
    if (std::find(commands.begin(), commands.end(), argv[1]) == commands.end()) {
      std::cerr << "kvfuzz: error: " << unknown_command_message(argv[1], commands) << "\n";
      return kBadInput;
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
      const CLI::App* sub = &app;
      for (const CLI::App* s : app.get_subcommands()) sub = s;
      const std::vector<std::string> extras = sub->remaining(true);
      if (const std::string m = unknown_option_message(*sub, extras.empty() ? app.remaining(true) : extras); !m.empty()) {
        std::cerr << "kvfuzz: error: " << m << "\n";
        return kBadInput;
      }
    }
    app.exit(e);
    return kBadInput;
  }
  // replay and report run a saved case on the target it records unless --target names one.
  // merge finds each case's signature on the same target.
  for (CLI::App* sub : {replay, report, merge}) {
    if (*sub) common.target_given = sub->get_option("--target")->count() > 0;
  }
  if (!*replay && !*report && !*merge) common.target_given = true;
  if (common.quiet && common.verbose) {
    std::cerr << "kvfuzz: error: -q and -v both given: -q prints no progress lines, -v one after every case; give one\n";
    return kBadInput;
  }
  kvf::set_verbosity(common.quiet ? kvf::Verbosity::quiet : common.verbose ? kvf::Verbosity::verbose : kvf::Verbosity::normal);
  // `run --seconds S` alone runs for S seconds: the default case limit applies only without --seconds.
  if (seconds_opt->count() > 0 && cases_opt->count() == 0 && run_opts.seconds > 0) run_opts.cases = 0;

  try {
    if (*targets) return cmd_targets(targets_json, targets_named);
    if (*run) run_opts.shard = shard_from(run_shard);
    if (*generate) gen_opts.shard = shard_from(generate_shard);
    if (*compare) compare_opts.shard = shard_from(compare_shard);
    if ((*run && run_opts.shard.sharded() && seed_opt->count() == 0) || (*compare && compare_opts.shard.sharded() && compare_seed->count() == 0))
      throw kvf::InputError("--shard", "", "needs --seed: every shard must check the cases of one seed (without it each "
                                           "process would draw its own, and the shards would not add up to one campaign)");
    if (*run && devices_opt->count() > 0) {
      const std::string device_option = "--device";
      if (run->get_option(device_option)->count() > 0)
        throw kvf::InputError("--devices", "", "--device and --devices both given: --device N runs every worker on N, --devices spreads them; give one");
      if (!kvf::make_target(common.target, common.target_options())->info().needs_gpu)
        throw kvf::InputError("--devices", "", "target " + common.target + " runs on no GPU (kvfuzz targets: needs a GPU: no)");
      run_opts.devices = devices_from(run_devices);
    }
    if (*merge && !merge_inputs.empty() &&
        std::any_of(merge_inputs.begin(), merge_inputs.end(), [](const std::string& f) { return kvf::is_summary_file(f); })) {
      for (const std::string& f : merge_inputs)
        if (!kvf::is_summary_file(f))
          throw kvf::InputError(f, "", "is not a JSON summary (schema kvfuzz-summary), but other inputs are; merge takes either "
                                       "case files and folders, or the summaries of a campaign's shards, not both");
      if (merge_opts.prune || merge_opts.coverage)
        throw kvf::InputError("merge", "", "--prune and --coverage apply to case folders, not to summaries");
      return cmd_merge_summaries(merge_out, merge_inputs);
    }
    if (*merge) {
      merge_opts.out = merge_out;
      for (const std::string& p : merge_inputs) merge_opts.inputs.emplace_back(p);
      return cmd_merge(merge_opts, common);
    }
    if (*compare) return cmd_compare(compare_opts, common, compare_seed->count() > 0);
    if (*selftest) {
      refuse_bad_outputs({{"--json", selftest_json_file}, {"--junit", selftest_junit_file}}, {selftest_opts.catalogue.string()});
      if (selftest_json_file == "-" || selftest_junit_file == "-") g_out.take_stdout_for_machine_output();
      return cmd_selftest(selftest_opts, selftest_json_file, selftest_junit_file, command_line);
    }
    if (*generate) {
      for (const auto& f : kvf::generate_cases(gen_opts)) std::cout << f.string() << "\n";
      return kClean;
    }
    const std::vector<std::pair<std::string, std::string>> outputs = {
        {"--json", json_file}, {"--junit", ci.junit_file}, {"--summary-md", ci.summary_md_file}};
    if (*run) refuse_bad_outputs(outputs, {run_opts.config.string()});
    if (*replay) refuse_bad_outputs(outputs, replay_paths);
    if (*run || *replay) {  // every output path is checked before any work
      for (const auto& [option, file] : outputs) kvf::check_output_file(file, option);
      if (json_file == "-" || ci.junit_file == "-" || ci.summary_md_file == "-") g_out.take_stdout_for_machine_output();
    }
    if (*run) return cmd_run(run_opts, common, seed_opt->count() > 0, json_file, ci);
    if (*replay && replay_sanitize) return exec_under_sanitizer(argc, argv);  // returns only on failure
    if (*replay) {
      for (const std::string& p : replay_paths) replay_opts.paths.emplace_back(p);
      return cmd_replay(replay_opts, common, json_file, command_line, ci);
    }
    if (*report) return cmd_report(report_file, report_dir, report_force, common);
    if (*shrink) {
      shrink_opts.file = shrink_file;
      return cmd_shrink(shrink_opts, common);
    }
  } catch (const kvf::InputError& e) {
    std::cerr << "kvfuzz: error: " << e.what() << "\n";
    return kBadInput;
  } catch (const kvf::InfraError& e) {
    std::cerr << "kvfuzz: infrastructure error: " << e.what() << "\n";
    return kInfra;
  } catch (const std::bad_alloc&) {
    std::cerr << "kvfuzz: infrastructure error: out of memory\n";
    return kInfra;
  }
  return kBadInput;
}
