// main.cpp — the kvfuzz command line; the only file that knows CLI11.
//
//   kvfuzz run [--target T] [--config FILE] [--cases N] [--seconds S] [--seed N] [--corpus-out DIR] [--json FILE]
//              [--junit FILE] [--summary-md FILE]
//   kvfuzz replay PATH... [--target T] [--json FILE] [--junit FILE] [--summary-md FILE]
//   kvfuzz report CASE [-o DIR] [--target T]
//   kvfuzz shrink CASE [--target T] [--config FILE] [-o DIR]
//   kvfuzz generate --seed N [--cases N] [--config FILE] -o DIR
//   kvfuzz targets
//
// Exit codes: 0 clean, 1 findings, 2 usage or bad input, 3 infrastructure (I/O, missing device).
// Results go to stdout and end with "kvfuzz: N passed, N failed"; progress goes to stderr.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "campaign/campaign.h"
#include "campaign/report_case.h"
#include "case/case_json.h"
#include "case/errors.h"
#include "report/junit.h"
#include "report/markdown.h"
#include "report/render.h"
#include "targets/target.h"

namespace {

enum ExitCode { kClean = 0, kFindings = 1, kBadInput = 2, kInfra = 3 };

std::string join_command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    if (i) s += ' ';
    s += argv[i];
  }
  return s;
}

void write_json(const std::string& file, const nlohmann::json& j) {
  if (file.empty()) return;
  if (file == "-") {
    std::cout << j.dump(2) << "\n";
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
  app->add_option("--junit", o.junit_file, "Write JUnit XML to FILE (- for stdout)");
  app->add_option("--summary-md", o.summary_md_file, "Write a Markdown summary to FILE (- for stdout), e.g. $GITHUB_STEP_SUMMARY");
}

void write_text(const std::string& file, const std::string& text) {
  if (file.empty()) return;
  if (file == "-") {
    std::cout << text;
    return;
  }
  kvf::write_file_atomic(file, text);
}

// An output file that is also an input of the command (`replay case.json --json case.json`) would
// destroy the input: refused before anything runs. Other existing output files are replaced.
void refuse_output_over_input(const std::vector<std::string>& outputs, const std::vector<std::string>& inputs) {
  for (const std::string& out : outputs) {
    if (out.empty() || out == "-") continue;
    for (const std::string& in : inputs) {
      std::error_code ec;
      if (!in.empty() && std::filesystem::equivalent(out, in, ec))
        throw kvf::InputError(out, "", "is also an input of this command (" + in +
                                           "); kvfuzz does not overwrite its inputs: choose another output file");
    }
  }
}

// Binary name for reproduction commands in reports ("kvfuzz", or a mutant's name).
std::string program_name(const char* argv0) {
  const std::string name = std::filesystem::path(argv0 ? argv0 : "kvfuzz").filename().string();
  return name.empty() ? "kvfuzz" : name;
}

// Options shared by every subcommand that runs cases.
struct CommonOptions {
  std::string target = "cuda-emu";  // --target
  double timeout_s = 30;            // --timeout: per-launch limit
  bool no_fork = false;             // --no-fork: run launches in-process (debugging only)
  int64_t max_case_mib = 1024;      // --max-case-mib: largest buffer a case may declare
  int device = 0;                   // --device: CUDA device index for GPU targets
  std::string tolerance = "exact";  // --tolerance: value policy for expected writes (README "Quantisation")

  kvf::TargetOptions target_options() const { return kvf::TargetOptions{device}; }

  kvf::CheckOptions check() const {
    kvf::CheckOptions c;
    c.isolation.fork = !no_fork;
    c.isolation.timeout_s = timeout_s;
    c.tolerance = *kvf::parse_tolerance(tolerance);  // validated by the option's check
    return c;
  }
  kvf::Limits limits() const {
    kvf::Limits l;
    l.max_buffer_bytes = max_case_mib * (int64_t{1} << 20);
    return l;
  }
};

void add_common(CLI::App* app, CommonOptions& o) {
  app->add_option("--target", o.target, "Target to run cases on (see `kvfuzz targets`)");
  app->add_option("--timeout", o.timeout_s, "Seconds a single launch may take before it is a timeout")
      ->check(CLI::PositiveNumber);
  app->add_flag("--no-fork", o.no_fork, "Run launches in the kvfuzz process (a faulting kernel kills kvfuzz)");
  app->add_option("--device", o.device, "CUDA device index for GPU targets")->check(CLI::NonNegativeNumber);
  app->add_option("--tolerance", o.tolerance,
                  "How values of expected writes are judged: exact (default), ulp:N, written-any-value")
      ->check(CLI::Validator(
          [](std::string& s) {
            return kvf::parse_tolerance(s) ? std::string() : "expected exact, ulp:N or written-any-value, got " + s;
          },
          "POLICY"));
}

// For subcommands that read case files.
void add_case_limits(CLI::App* app, CommonOptions& o) {
  app->add_option("--max-case-mib", o.max_case_mib, "Refuse case files whose buffers exceed this many MiB")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
}

int cmd_targets() {
  for (const kvf::TargetInfo& t : kvf::list_targets()) {
    std::cout << t.name << "\n"
              << "  " << t.summary << "\n"
              << "  supports: " << t.supports << "\n"
              << "  values checked: " << t.tolerance << "\n"
              << "  needs a GPU: " << (t.needs_gpu ? "yes" : "no") << "\n";
  }
  return kClean;
}

int cmd_run(kvf::CampaignOptions o, const CommonOptions& common, bool seed_given, const std::string& json_file,
            const CiOutputs& ci, const std::string& program) {
  o.target = common.target;
  o.target_options = common.target_options();
  o.check = common.check();
  if (!seed_given) o.seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  kvf::open_target(o.target, o.target_options);  // unknown: exit 2; unavailable here: exit 3; before anything runs
  std::cerr << "kvfuzz: run on " << o.target << ", profile " << (o.config.empty() ? "default" : o.config.string())
            << ", seed " << o.seed << ", "
            << (o.cases ? std::to_string(o.cases) + " cases" : std::string("no case limit"))
            << (o.seconds > 0 ? ", at most " + std::to_string(o.seconds) + " s" : std::string())
            << (o.jobs > 1 ? ", " + std::to_string(o.jobs) + " jobs" : std::string())
            << ", values checked " << kvf::to_string(o.check.tolerance) << "\n";
  kvf::install_stop_handlers();
  kvf::TerminalProgress progress;
  const kvf::CampaignResult r = kvf::run_campaign(o, progress);
  for (const kvf::FailureRecord& f : r.failures) std::cout << kvf::render_failure(f);
  kvf::ReportOptions report_opts;
  report_opts.target = o.target;
  report_opts.target_options = o.target_options;
  report_opts.program = program;
  report_opts.check = o.check;
  for (const kvf::FailureReport& fr : kvf::write_failure_reports(r, report_opts)) {
    if (fr.error.empty()) {
      std::cout << "kvfuzz: report of " << fr.case_file.string() << ": " << (fr.dir / "report.html").string() << "\n";
    } else {
      std::cerr << "kvfuzz: warning: no report for " << fr.case_file.string() << ": " << fr.error << "\n";
    }
  }
  std::cout << "kvfuzz: " << r.cases << " cases in " << r.seconds << " s (" << static_cast<int64_t>(r.cases_per_second())
            << " cases/s), seed " << r.seed << (r.interrupted ? ", interrupted" : "") << "\n";
  write_json(json_file, kvf::campaign_json(r, o.command_line));
  write_text(ci.junit_file, kvf::campaign_junit(r, o.command_line));
  write_text(ci.summary_md_file, kvf::campaign_summary_markdown(r));
  std::cout << kvf::summary_line(r.passed, r.failed) << std::endl;
  return r.failed ? kFindings : kClean;
}

int cmd_replay(kvf::ReplayOptions o, const CommonOptions& common, const std::string& json_file,
               const std::string& command_line, const CiOutputs& ci) {
  o.target = common.target;
  o.target_options = common.target_options();
  o.check = common.check();
  o.limits = common.limits();
  kvf::install_stop_handlers();
  kvf::TerminalProgress progress;
  const kvf::ReplayResult r = kvf::replay_cases(o, progress);
  for (const kvf::ReplayItem& item : r.items)
    if (!item.as_expected) std::cout << kvf::render_replay_mismatch(item, r.target);
  write_json(json_file, kvf::replay_json(r, command_line));
  write_text(ci.junit_file, kvf::replay_junit(r, command_line));
  write_text(ci.summary_md_file, kvf::replay_summary_markdown(r));
  std::cout << kvf::summary_line(r.passed(), r.failed()) << std::endl;
  return r.failed() ? kFindings : kClean;
}

int cmd_shrink(kvf::ShrinkOptions o, const CommonOptions& common) {
  o.target = common.target;
  o.target_options = common.target_options();
  o.check = common.check();
  o.limits = common.limits();
  kvf::install_stop_handlers();
  kvf::TerminalProgress progress;
  const kvf::ShrinkResult r = kvf::shrink_case(o, progress);
  if (!r.failed) {
    std::cout << "kvfuzz: " << o.file.string() << " passes on " << o.target << "; nothing to shrink\n"
              << kvf::summary_line(1, 0) << std::endl;
    return kClean;
  }
  std::cout << kvf::render_failure(r.record) << kvf::summary_line(0, 1) << std::endl;
  return kFindings;
}

// `kvfuzz report CASE`: re-runs the case and writes report.json, report.md and report.html.
int cmd_report(const std::string& file, std::string out_dir, const CommonOptions& common, const std::string& program) {
  kvf::ReportOptions o;
  o.target = common.target;
  o.target_options = common.target_options();
  o.program = program;
  o.check = common.check();
  o.limits = common.limits();
  kvf::install_stop_handlers();
  const kvf::CaseReport r = kvf::report_case_file(file, o);
  if (out_dir.empty()) out_dir = kvf::report_dir_for(file).string();
  for (const auto& written : kvf::write_report(r, out_dir)) std::cout << "kvfuzz: wrote " << written.string() << "\n";
  if (!r.verdict.pass()) std::cout << "kvfuzz: FAIL " << file << " -> " << to_string(r.verdict.findings.front().kind) << "\n"
                                   << kvf::render_verdict(r.verdict) << "  reproduce: " << r.replay_command << "\n";
  std::cout << kvf::summary_line(r.verdict.pass() ? 1 : 0, r.verdict.pass() ? 0 : 1) << std::endl;
  return r.verdict.pass() ? kClean : kFindings;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command_line = join_command_line(argc, argv);
  CLI::App app{"kvfuzz: property-based fuzzer and verifier for KV-cache append kernels"};
  app.set_version_flag("--version", std::string("kvfuzz ") + KVFUZZ_VERSION);
  app.require_subcommand(1);

  CommonOptions common;
  kvf::CampaignOptions run_opts;
  run_opts.command_line = command_line;
  std::string json_file;
  CLI::App* run = app.add_subcommand("run", "Generate random batches, check each, shrink and save failures");
  add_common(run, common);
  run->add_option("--config", run_opts.config, "Campaign profile (JSON, see configs/); default: built-in default")
      ->check(CLI::ExistingFile);
  run->add_option("--cases", run_opts.cases, "Number of cases (0 = until --seconds or ^C)")->check(CLI::NonNegativeNumber);
  run->add_option("--seconds", run_opts.seconds, "Stop after this many seconds (0 = no limit)")
      ->check(CLI::NonNegativeNumber);
  CLI::Option* seed_opt = run->add_option("--seed", run_opts.seed, "Campaign seed (default: random, printed)");
  run->add_option("--corpus-out", run_opts.corpus_out, "Directory for minimal failing cases");
  run->add_option("--json", json_file, "Write a JSON summary to FILE (- for stdout)");
  CiOutputs ci;
  add_ci_outputs(run, ci);
  run->add_flag("--keep-going", run_opts.keep_going, "Continue after the first confirmed failure");
  run->add_option("-j,--jobs", run_opts.jobs, "Cases checked in parallel (threads, each with its own worker process)")
      ->check(CLI::Range(1, 256));
  run->add_option("--confirm-runs", run_opts.confirm_runs, "Re-runs that must all fail before shrinking")
      ->check(CLI::Range(0, 100));
  run->add_option("--max-shrink-tries", run_opts.max_shrink_tries, "Shrink candidates to evaluate at most")
      ->check(CLI::NonNegativeNumber);

  kvf::ReplayOptions replay_opts;
  std::vector<std::string> replay_paths;
  CLI::App* replay = app.add_subcommand("replay", "Re-run case files or corpus directories (never shrinks)");
  add_common(replay, common);
  add_case_limits(replay, common);
  replay->add_option("paths", replay_paths, "Case files and directories of *.json cases")->required();
  replay->add_option("--json", json_file, "Write a JSON summary to FILE (- for stdout)");
  add_ci_outputs(replay, ci);

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
      ->check(CLI::NonNegativeNumber);

  kvf::GenerateOptions gen_opts;
  gen_opts.command_line = command_line;
  CLI::App* generate = app.add_subcommand("generate", "Write the cases a campaign would check, without running them");
  generate->add_option("--config", gen_opts.config, "Campaign profile (JSON)")->check(CLI::ExistingFile);
  generate->add_option("--seed", gen_opts.seed, "Campaign seed")->required();
  generate->add_option("--cases", gen_opts.cases, "Number of cases")->check(CLI::PositiveNumber);
  generate->add_option("-o,--out-dir", gen_opts.out_dir, "Directory for the case files")->required();

  std::string report_file, report_dir;
  CLI::App* report = app.add_subcommand("report", "Re-run a case and write report.json, report.md and report.html");
  add_common(report, common);
  add_case_limits(report, common);
  report->add_option("case", report_file, "The case file")->required();
  report->add_option("-o,--out-dir", report_dir, "Directory for the report (default: CASE's directory/<name>.report)");

  CLI::App* targets = app.add_subcommand("targets", "List targets and what each supports");

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kBadInput;
  }

  try {
    if (*targets) return cmd_targets();
    if (*generate) {
      for (const auto& f : kvf::generate_cases(gen_opts)) std::cout << f.string() << "\n";
      return kClean;
    }
    const std::vector<std::string> outputs = {json_file, ci.junit_file, ci.summary_md_file};
    if (*run) refuse_output_over_input(outputs, {run_opts.config.string()});
    if (*replay) refuse_output_over_input(outputs, replay_paths);
    if (*run) return cmd_run(run_opts, common, seed_opt->count() > 0, json_file, ci, program_name(argv[0]));
    if (*replay) {
      for (const std::string& p : replay_paths) replay_opts.paths.emplace_back(p);
      return cmd_replay(replay_opts, common, json_file, command_line, ci);
    }
    if (*report) return cmd_report(report_file, report_dir, common, program_name(argv[0]));
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
