// compare.h — differential runs: the same generated cases on two targets, whose post-run images must
// be byte-identical (`kvfuzz compare --target A --against B`).
//
// Each case is generated as `kvfuzz run --seed S` would generate it, given one initial arena, and run
// once on each target (each through its own worker, campaign/isolation.h). The two images left
// behind are compared byte for byte over the whole image; for a large (windowed, arena/windows.h)
// case, over every materialised byte, and the two targets' reports of the cache outside the windows
// (count, runs and the bits returned) must be equal too. No golden model is involved: a difference
// means the targets disagree, whichever is right (`--against golden` compares with the contract).
// Cases that neither target finishes the same way (one crashes, one refuses) differ as well; cases
// both refuse or on which both crash or hang count as agreeing and are reported separately.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "check.h"
#include "shard.h"
#include "report/progress.h"

namespace kvf {

struct CompareOptions : RunOptions {      // target: side A; check.tolerance is not used (images must be identical)
  std::string against;                    // side B (--against)
  std::filesystem::path config;           // profile; empty = built-in default
  int64_t cases = 1000;                   // cases 0..cases-1 of the seed
  uint64_t seed = 0;                      // case i is generated from (seed, i), as by `kvfuzz run`
  int jobs = 1;                           // threads, each with a worker per target
  std::filesystem::path out_dir = "kvfuzz-compare";  // where the first differing case is saved
  std::string command_line;               // recorded in the saved case's provenance
  Shard shard;                            // --shard: only cases k with k mod count == index
};

// The first (lowest-index) case on which the two images differ.
struct CompareDifference {
  int64_t case_index = -1;
  std::string where;    // "image byte 8448 = cache element 24 (K block 0 slot 3 head 0 dim 0; request 1's new token 3)"
  std::string a_found;  // what side A left there ("0x3c00", "crash: ...")
  std::string b_found;  // what side B left there
  std::filesystem::path file;  // the saved case
};

struct CompareResult {
  std::string target, against, profile, seed;
  int64_t cases = 0;          // cases compared
  int64_t identical = 0;      // both finished and left identical images
  int64_t both_failed = 0;    // both refused the launch, or both crashed or hung (agreeing, not compared)
  int64_t differing = 0;      // 0 or 1: the comparison stops at the first difference
  std::optional<CompareDifference> first;
  bool interrupted = false;   // stopped by ^C
  double seconds = 0;
  // Drawn cases outside the capabilities of either target (gen/capabilities.h): --target's are
  // replaced by a case drawn inside them (as `run` does), --against's are not run.
  int64_t skipped = 0;
  std::map<std::string, int64_t> skip_reasons;  // by reason, prefixed with the target's name
};

// Throws InputError for a bad profile or target, InfraError when a target cannot run here.
CompareResult compare_targets(const CompareOptions& options, Progress& progress);

}  // namespace kvf
