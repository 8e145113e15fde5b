// render.h — outcome values as terminal text and as a JSON summary (harness-anchors §5.4).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "outcome.h"

namespace kvf {

// "kvfuzz: N passed, N failed" — the last line of every run and replay.
std::string summary_line(int64_t passed, int64_t failed);

// "1 case", "0 cases", "12 cases": a count and its noun (`noun` singular; the plural adds "s").
std::string count_of(int64_t n, const std::string& noun);

// Multi-line description of a verdict: one line per finding (sentence), then the first example.
std::string render_verdict(const Verdict& v, const std::string& indent = "  ");

// A campaign failure: findings, shrink statistics, where it was saved, how to reproduce it.
std::string render_failure(const FailureRecord& r);

// "kvfuzz: skipped N cases outside the target's capabilities (reason: n, ...); M replaced by cases
// drawn inside them[, K not run]\n", or "" when nothing was skipped. Cases the kernel declined
// (KVFZ_APPEND_SKIP) are counted apart: "N cases by the kernel (reason: n, ...); M replaced by other
// draws", or with both "N cases: A outside the target's capabilities (...), B by the kernel (...)".
std::string render_skipped(const CampaignResult& r);

// One line of infrastructure events (worker retries, slow starts, recycling); "" when there were none.
std::string render_workers(const WorkerEvents& w);
// --devices: one line per device (workers, cases, cases/s), then the host's CPU use; "" without it.
std::string render_devices(const CampaignResult& r);
// --stats: the feature buckets with their counts and shares; "" without --stats.
std::string render_stats(const CampaignResult& r);

// --stats: where the checked cases' host time went, µs per case by stage (StageSeconds), one line;
// "" without --stats. stages_json: the summary's "stages" object (seconds by stage, all threads).
std::string render_stages(const CampaignResult& r);
nlohmann::json stages_json(const StageSeconds& s);
// One line per known signature whose failures were not saved again; "" when there were none.
std::string render_duplicates(const CampaignResult& r);
nlohmann::json duplicates_json(const CampaignResult& r);
nlohmann::json workers_json(const WorkerEvents& w);

// "kvfuzz: skipped N case files outside the target's capabilities (reason: n, ...)\n", or "";
// files the kernel declined are counted apart as in the campaign's line.
std::string render_skipped(const ReplayResult& r);

// "kvfuzz: note: DIR/keep.json is not a case file (schema kvfuzz-summary), not replayed\n" per file
// a folder walk found that is another kvfuzz output; "" when there is none.
std::string render_not_cases(const ReplayResult& r);

// A replayed file whose outcome differs from its expectation.
std::string render_replay_mismatch(const ReplayItem& item);

// JSON summaries (schema "kvfuzz-summary", version 1). Seeds are strings.
nlohmann::json campaign_json(const CampaignResult& r, const std::string& command_line);
nlohmann::json replay_json(const ReplayResult& r, const std::string& command_line);

}  // namespace kvf
