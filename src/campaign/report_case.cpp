// report_case.cpp — see report_case.h.
#include "report_case.h"

#include <fstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "campaign.h"
#include "case/case_json.h"
#include "base/errors.h"
#include "report/html.h"
#include "report/markdown.h"

namespace kvf {

CaseReport report_case(Target& target, const Case& c, const std::filesystem::path& file, const ReportOptions& o) {
  Isolator isolator(target, o.check.isolation);
  // Values are judged exactly, whatever o.check.tolerance says: the map marks every differing cell.
  const CaseRun run = run_case(isolator, c, TolerancePolicy{});

  CaseReport r;
  r.case_file = file;
  r.kase = c;
  r.target = target_for(o, c);
  r.ran = run.status == IsolatedStatus::ok;
  r.skipped = run.skipped;
  r.verdict = run.verdict;
  // A run that did not finish still left an image: the map shows it as it was left.
  r.map = build_cell_map(c, r.verdict, run.initial, run.expected, run.actual, run.initial.windowed() ? &run.outside : nullptr);
  r.replay_command = o.invocation.command("replay", file, r.target);
  r.report_command = o.invocation.command("report", file, r.target);
  r.locate_command = o.invocation.locate(r.verdict, file, r.target, target.info().needs_gpu);
  return r;
}

CaseReport report_case_file(const std::filesystem::path& file, const ReportOptions& o) {
  const Case c = read_case_file(file, o.limits);
  const std::string name = target_for(o, c);
  const std::unique_ptr<Target> target = open_target_for(o, c, file);  // unavailable here: InfraError
  ReportOptions on = o;
  on.target = name;
  if (o.check_for) on.check = o.check_for(name);
  return report_case(*target, c, file, on);
}

namespace {

// True when `file` is a report.json kvfuzz wrote (schema "kvfuzz-report").
bool is_kvfuzz_report_file(const std::filesystem::path& file) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  if (ec || size > (uintmax_t{1} << 30)) return false;
  std::ifstream in(file, std::ios::binary);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.value("schema", std::string()) == "kvfuzz-report";
}

}  // namespace

bool holds_report(const std::filesystem::path& dir) {
  std::error_code ec;
  return std::filesystem::exists(dir / "report.json", ec) && is_kvfuzz_report_file(dir / "report.json");
}

std::filesystem::path free_report_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return dir;
  for (int n = 2;; ++n) {
    std::filesystem::path next = dir;
    next += "-" + std::to_string(n);
    if (!std::filesystem::exists(next, ec)) return next;
  }
}

void check_report_dir(const std::filesystem::path& dir, bool replace) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec))
    throw InputError(dir.string(), "", "exists and is not a directory; expected a directory for the report");
  const std::filesystem::path json_file = dir / "report.json";
  if (holds_report(dir)) {
    if (replace) return;  // --force: an earlier report is replaced
    throw InputError(dir.string(), "", "holds an earlier kvfuzz report; kvfuzz does not replace it: choose another "
                                       "directory (-o), or pass --force to replace it");
  }
  for (const char* name : {"report.json", "report.md", "report.html"}) {
    const std::filesystem::path f = dir / name;
    if (std::filesystem::exists(f, ec))
      throw InputError(f.string(), "",
                       "exists and is not part of a kvfuzz report (no report.json of schema \"kvfuzz-report\" beside "
                       "it); kvfuzz does not overwrite it: choose another directory (-o) or move the file away");
  }
}

std::vector<std::filesystem::path> write_report(const CaseReport& report, const std::filesystem::path& dir, bool replace) {
  check_report_dir(dir, replace);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InfraError("cannot create the report directory " + dir.string() + ": " + ec.message());
  const std::vector<std::filesystem::path> files = {dir / "report.json", dir / "report.md", dir / "report.html"};
  write_file_atomic(files[0], case_report_json(report).dump(2) + "\n");
  write_file_atomic(files[1], render_report_markdown(report));
  write_file_atomic(files[2], render_report_html(report));
  return files;
}

std::vector<FailureReport> write_failure_reports(const CampaignResult& result, const ReportOptions& options) {
  std::vector<FailureReport> out;
  for (const FailureRecord& f : result.failures) {
    if (f.file.empty()) continue;  // not saved (the disk is full): nothing to report on
    FailureReport fr;
    fr.case_file = f.file;
    if (stop_requested()) {  // ^C or SIGTERM: the reports left are not written (each is whole or absent)
      fr.error = "interrupted; `" + options.invocation.command("report", f.file, options.target) + "` writes it";
      out.push_back(std::move(fr));
      continue;
    }
    fr.dir = report_dir_for(f.file);
    if (holds_report(fr.dir)) {  // the case was saved by an earlier run, with its report: both kept as they are
      out.push_back(std::move(fr));
      continue;
    }
    try {
      const CaseReport r = report_case_file(f.file, options);
      write_report(r, fr.dir);
    } catch (const std::exception& e) {
      fr.dir.clear();
      fr.error = e.what();
    }
    out.push_back(std::move(fr));
  }
  return out;
}

}  // namespace kvf
