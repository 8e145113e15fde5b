// mutant_catalogue.h — the mutant catalogue (tests/mutants/mutants.json): source-rewrite rules that
// put real append-kernel bugs (research/kernel-anchors.md B1-B28) into copies of the kernel sources,
// and the bug patterns that have no mutant, with the reason.
//
// A rule replaces `find`, which must occur exactly once in `file`, with `replace`. A rule whose
// `find` no longer matches is a stale catalogue (the kernel changed under it), never a survivor:
// apply_rule() throws InputError naming the rule and the JSON path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kvf {

enum class MutantKernel : uint8_t {
  cuda,    // a rewrite of kernels/cuda/*, run as a host plugin (--target plugin:X.so)
  triton,  // a rewrite of kernels/triton/kvfuzz_triton/*.py, run on triton-interp
};
const char* to_string(MutantKernel k);

struct MutantRule {
  std::string name;                  // unique, [a-z0-9-]
  std::string pattern;               // bug pattern, "B6", "B1/B25", or "fault" for harness checks
  MutantKernel kernel = MutantKernel::cuda;
  std::string description;           // what the rewrite does, one line
  std::string file;                  // file of the kernel directory the rewrite applies to
  std::string find;                  // text that must occur exactly once in `file`
  std::string replace;               // what it becomes
  std::vector<std::string> expect;   // finding kinds the shrunk case may report first
  int64_t max_cases = 2000;          // the bounded campaign that must kill it
  std::string config;                // profile, relative to the source tree; empty = built-in default
  int64_t max_case_mib = 0;          // --max-case-mib for replaying its case (large caches); 0 = kvfuzz's default
  std::string gpu_only;              // non-empty: only a GPU shows this bug (why); skipped on the CPU
  std::string needs_size;            // non-empty: the trigger needs more than 2 requests / 8 tokens (why)
  std::vector<std::string> metamorphic;  // relations (metamorphic.h) that must catch it without the golden model
  int index = 0;                     // position in the catalogue's "mutants" array (for error paths)
};

// A bug pattern of kernel-anchors.md with no mutant, and why it does not apply to an append kernel
// (or is covered elsewhere).
struct PatternWithoutMutant {
  std::string pattern;  // "B5"
  std::string why;
};

struct MutantCatalogue {
  std::filesystem::path file;                 // where it was read from
  std::vector<MutantRule> rules;
  std::vector<PatternWithoutMutant> not_applicable;
};

// Reads and validates a catalogue. Throws InputError(file, JSON path, expectation) on bad input.
MutantCatalogue read_mutant_catalogue(const std::filesystem::path& file);

// Copies every regular file of `kernel_dir` into `out_dir` (created) and applies `rule` to the
// copy of rule.file. Throws InputError when the rule is stale (find occurs != 1 times).
void apply_rule(const MutantCatalogue& catalogue, const MutantRule& rule, const std::filesystem::path& kernel_dir,
                const std::filesystem::path& out_dir);

}  // namespace kvf
