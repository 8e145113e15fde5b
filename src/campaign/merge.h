// merge.h — `kvfuzz merge`: findings folders and corpora into one folder, one case per signature.
//
// Every case of the inputs (and of OUT itself) runs once on the target; a failing case is keyed by
// its signature (signature.h), a passing one by its batch (the file name, a hash of it). Per key the
// smallest case is kept: copied into OUT (never replacing a file there) and recorded in OUT's
// signatures.kvfuzz-index. Inputs are only read. With `prune`, OUT's cases that the index lists as
// superseded by a smaller case of their signature are deleted (the only deletion kvfuzz makes).
// With `coverage` (a corpus minimiser, like libFuzzer's -merge=1 or afl-cmin), a passing case is
// copied only when it hits a feature bucket (stats.h) that no case already in OUT, and no smaller
// passing case copied before it, hits; failing cases are kept by signature as always.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "check.h"
#include "case/validate.h"
#include "targets/target.h"

namespace kvf {

// Each case runs on the target it records (RunOptions::target_given: on `target` when named), as
// replay does, to find its signature.
struct MergeOptions : RunOptions {
  std::filesystem::path out;                  // the folder merged into (created if missing)
  std::vector<std::filesystem::path> inputs;  // case files and folders
  bool prune = false;                         // delete OUT's superseded cases afterwards
  bool coverage = false;                      // passing cases: only those adding a feature bucket
};

// Every file read is counted once: read == in_out + copied + not_copied + no_new_coverage + unchecked.
struct MergeResult {
  int64_t read = 0;        // case files read (inputs and OUT)
  int64_t failing = 0;     // of them, failing on their target
  int64_t signatures = 0;  // distinct signatures among the failing ones
  std::string targets;     // the targets they ran on, ", "-separated, in order of first use
  int64_t in_out = 0;      // files that were in OUT already (they stay; --prune may delete superseded ones)
  int64_t copied = 0;      // input files copied into OUT
  int64_t not_copied = 0;  // input files not copied: a case of their signature (failing) or the same case
                           // (passing), as small or smaller, is in OUT or among the inputs
  int64_t no_new_coverage = 0;  // with coverage: passing files not copied, every bucket already covered
  int64_t unchecked = 0;        // files not run: the merge was interrupted (^C) first
  int64_t buckets = 0;          // with coverage: feature buckets OUT's cases hit afterwards
  std::vector<std::filesystem::path> pruned;  // files deleted by prune
};

// Throws InputError for a bad case file (nothing is written then) or index, InfraError for I/O.
MergeResult merge_cases(const MergeOptions& options);

}  // namespace kvf
