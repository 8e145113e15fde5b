// report_case.cpp — see report_case.h.
#include "campaign/report_case.h"

#include <system_error>

#include "arena/diff.h"
#include "case/case_json.h"
#include "case/errors.h"
#include "golden/golden.h"
#include "report/html.h"
#include "report/markdown.h"

namespace kvf {

namespace {

std::string quote_path(const std::filesystem::path& p) {
  const std::string s = p.string();
  if (!s.empty() && s.find_first_of(" \t\"'$`\\;&|<>()*?!#~") == std::string::npos) return s;
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

Verdict single_finding(FindingKind kind, const std::string& what) {
  Finding f;
  f.kind = kind;
  f.victim = "the run";
  f.writer = "the kernel";
  f.sentence = what;
  Verdict v;
  v.findings.push_back(f);
  return v;
}

}  // namespace

CaseReport report_case(Target& target, const Case& c, const std::filesystem::path& file, const ReportOptions& o) {
  const Arena initial = make_initial_arena(c);
  Arena expected = initial;
  golden::golden_append(c, expected);
  Arena actual = initial;
  const IsolatedRun run = run_isolated(target, c, actual, o.check.isolation);

  CaseReport r;
  r.case_file = file;
  r.kase = c;
  r.target = o.target;
  r.program = o.program;
  r.ran = run.status == IsolatedStatus::ok;
  switch (run.status) {
    case IsolatedStatus::ok: r.verdict = compare_arenas(c, initial, expected, actual); break;
    case IsolatedStatus::launch_error: r.verdict = single_finding(FindingKind::launch_error, "launch refused: " + run.message); break;
    case IsolatedStatus::crash: r.verdict = single_finding(FindingKind::crash, "the kernel crashed: " + run.message); break;
    case IsolatedStatus::timeout: r.verdict = single_finding(FindingKind::timeout, "the kernel hung: " + run.message); break;
  }
  // A run that did not finish still left an image: the map shows it as it was left.
  r.map = build_cell_map(c, r.verdict, initial, expected, actual);
  const std::string tail = quote_path(file) + " --target " + o.target;
  r.replay_command = o.program + " replay " + tail;
  r.report_command = o.program + " report " + tail;
  return r;
}

CaseReport report_case_file(const std::filesystem::path& file, const ReportOptions& o) {
  const Case c = read_case_file(file, o.limits);
  std::unique_ptr<Target> target = open_target(o.target, o.target_options);  // unavailable here: InfraError
  return report_case(*target, c, file, o);
}

std::vector<std::filesystem::path> write_report(const CaseReport& report, const std::filesystem::path& dir) {
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
    FailureReport fr;
    fr.case_file = f.file;
    try {
      const CaseReport r = report_case_file(f.file, options);
      fr.dir = report_dir_for(f.file);
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
