// markdown.h — Markdown renderings: the report of one case (report.md) and the summary of a run or
// replay for a CI job summary (`--summary-md FILE`, e.g. $GITHUB_STEP_SUMMARY).
#pragma once

#include <string>

#include "cell_map.h"
#include "outcome.h"

namespace kvf {

// report.md: verdict, findings as sentences, victim x writer matrix, damaged slots (at most
// `max_slots` listed), case summary and the reproduction commands.
std::string render_report_markdown(const CaseReport& r, size_t max_slots = 50);

// CI job summaries: counts, then every failure (or replayed file not behaving as expected) with
// its findings, its case file, its report (run: report_dir_for(file)/report.html) and the
// reproduction command. `kvfuzz --summary-md FILE` appends it to FILE.
std::string campaign_summary_markdown(const CampaignResult& r);
std::string replay_summary_markdown(const ReplayResult& r);

// Escapes text for a Markdown table cell or paragraph (|, *, `, <, [, ], \); underscores inside words and ">" mid-line are left alone (GFM).
std::string markdown_escape(const std::string& text);

}  // namespace kvf
