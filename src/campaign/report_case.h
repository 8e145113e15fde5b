// report_case.h — re-running one case to explain it: the report behind `kvfuzz report` and the
// reports `kvfuzz run` writes next to each failing case it saves.
//
// The run is the one check_case() performs (initial arena, golden expectation, isolated launch,
// whole-image diff), but the three arenas are kept, so the report can show every cell
// (report/cell_map.h). Rendering lives in src/report/ (html.h, markdown.h, case_report_json()).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "campaign/check.h"
#include "case/validate.h"
#include "report/cell_map.h"
#include "report/outcome.h"
#include "targets/target.h"

namespace kvf {

struct ReportOptions {
  std::string target = "cuda-emu";  // target to run the case on
  TargetOptions target_options;     // device index for GPU targets
  std::string program = "kvfuzz";   // binary name used in reproduction commands
  CheckOptions check;               // isolation of the launch
  Limits limits;                    // limits applied when reading the case file
};

// Runs case `c` (read from `file`) once on `target` and builds its report.
CaseReport report_case(Target& target, const Case& c, const std::filesystem::path& file, const ReportOptions& options);

// Reads `file` (InputError if it is not a valid case), runs it and builds its report.
CaseReport report_case_file(const std::filesystem::path& file, const ReportOptions& options);

// Writes report.json, report.md and report.html into `dir` (created if missing), atomically each.
// Returns the paths written. Throws InfraError on I/O failure.
std::vector<std::filesystem::path> write_report(const CaseReport& report, const std::filesystem::path& dir);

// For every failure of a campaign: the report of its saved case, written to report_dir_for(file).
// A report that cannot be built or written does not fail the campaign: its error is returned.
struct FailureReport {
  std::filesystem::path case_file;
  std::filesystem::path dir;  // where the report went (empty on error)
  std::string error;          // why there is no report ("" on success)
};
std::vector<FailureReport> write_failure_reports(const CampaignResult& result, const ReportOptions& options);

}  // namespace kvf
