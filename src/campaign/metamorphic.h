// metamorphic.h — checks of an append kernel that need no golden model: relations between runs of the
// kernel itself. Run by `kvfuzz selftest --metamorphic` on host plugins (include/kvfuzz_plugin.h):
// the clean kernel must satisfy every relation, and each mutant that names a relation in its
// catalogue entry ("metamorphic": [...]) must violate it, which proves the relation can fail.
//
// Relations, each over random batches (f16 K/V, paged NHD or HND caches, random slots and padding):
//   split   — appending tokens [0, k) then [k, T) leaves the caches as appending [0, T) at once;
//   permute — permuting the batch order (rows and their slots together) changes nothing;
//   rename  — renaming physical blocks (cache blocks moved by a permutation, slots renamed with it)
//             changes nothing beyond the renaming.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kvf {

inline constexpr const char* kMetamorphicRelations[] = {"split", "permute", "rename"};

struct MetamorphicResult {
  bool ran = false;                 // false: the plugin could not be loaded or the checker crashed
  std::string error;                // why not
  std::vector<std::string> violated;  // relations that failed in at least one trial
  int64_t trials = 0;               // random batches per relation
};

// Runs `trials` random batches per relation on the host plugin `so`, in a child process (a crashing
// plugin cannot take kvfuzz down). Deterministic for a given seed.
MetamorphicResult check_metamorphic(const std::filesystem::path& so, uint64_t seed, int64_t trials);

}  // namespace kvf
