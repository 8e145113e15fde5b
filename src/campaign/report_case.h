// report_case.h — re-running one case to explain it: the report behind `kvfuzz report` and the
// reports `kvfuzz run` writes next to each failing case it saves.
//
// The run is run_case() (campaign/check.h), the one check_case() performs (initial arena, golden
// expectation, isolated launch, whole-image diff), whose three arenas the report keeps to show
// every cell (report/cell_map.h). Values are judged exactly, whatever `check.tolerance` says. Rendering lives in src/report/ (html.h, markdown.h, case_report_json()).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "check.h"
#include "case/validate.h"
#include "report/cell_map.h"
#include "report/outcome.h"
#include "targets/target.h"

namespace kvf {

struct ReportOptions : RunOptions {};  // check.tolerance is not used: reports judge values exactly

// Runs case `c` (read from `file`) once on `target` and builds its report.
CaseReport report_case(Target& target, const Case& c, const std::filesystem::path& file, const ReportOptions& options);

// Reads `file` (InputError if it is not a valid case), runs it and builds its report.
CaseReport report_case_file(const std::filesystem::path& file, const ReportOptions& options);

// Refuses (InputError) a report directory that would overwrite a user's files or an earlier
// report: `dir` is usable when it does not exist or holds none of report.json, report.md and
// report.html; one holding an earlier kvfuzz report (report.json of schema "kvfuzz-report") only
// with `replace` (`report --force`). Other files in it are never touched.
void check_report_dir(const std::filesystem::path& dir, bool replace = false);

// Whether `dir` holds a report kvfuzz wrote (report.json of schema "kvfuzz-report").
bool holds_report(const std::filesystem::path& dir);

// `dir` if nothing is there, else the first of dir-2, dir-3, ... that does not exist: where
// `kvfuzz report CASE` writes beside an earlier report.
std::filesystem::path free_report_dir(const std::filesystem::path& dir);

// Writes report.json, report.md and report.html into `dir` (created if missing), atomically each,
// after check_report_dir(dir, replace). Returns the paths written. Throws InfraError on I/O failure.
std::vector<std::filesystem::path> write_report(const CaseReport& report, const std::filesystem::path& dir, bool replace = false);

// For every failure of a campaign: the report of its saved case, written to report_dir_for(file),
// unless that folder already holds a report (the case was saved by an earlier run): it is kept.
// A report that cannot be built or written does not fail the campaign: its error is returned.
struct FailureReport {
  std::filesystem::path case_file;
  std::filesystem::path dir;  // where the report went (empty on error)
  std::string error;          // why there is no report ("" on success)
};
std::vector<FailureReport> write_failure_reports(const CampaignResult& result, const ReportOptions& options);

}  // namespace kvf
