// summary_merge.h — `kvfuzz merge OUT.json SUMMARY.json...`: the JSON summaries of a campaign's
// shards (`run --shard`, campaign/shard.h) as one result for the whole array (docs/scale.md).
//
// Every input must be a `kvfuzz run` summary (schema kvfuzz-summary) of one campaign: the same
// seed, profile, target, value policy, --cases and kvfuzz version, the same shard count, and no
// shard twice; anything else is refused (InputError naming the file and the JSON path). The result
// adds up the counts, lists every failing case by index (with the signature of the case as drawn,
// which does not depend on what ran before it, so the shards' union equals one process's run), counts
// failing cases per signature, keeps every saved failure (with its shard), and names the shards
// that are missing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvf {

struct SummaryMerge {
  nlohmann::json merged;         // schema kvfuzz-summary, command "merge" (docs/scale.md)
  int64_t shard_count = 1;
  std::vector<int64_t> present;  // shard indices merged, ascending
  std::vector<int64_t> missing;  // shard indices 0..count-1 without a summary
  int64_t cases = 0, passed = 0, failed = 0;
  int exit_code = 0;             // 3 when shards are missing or one lost a finding, else the shards' (1, 130/143, 0)
};

// True when `file` is a JSON summary (schema kvfuzz-summary) rather than a case or a folder.
bool is_summary_file(const std::filesystem::path& file);

// Reads and merges the summaries. Throws InputError for a bad or mismatched summary.
SummaryMerge merge_summaries(const std::vector<std::filesystem::path>& files);

}  // namespace kvf
