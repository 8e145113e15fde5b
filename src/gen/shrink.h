// shrink.h — the one shrinker of kvfuzz, used by campaigns and by `kvfuzz shrink CASE`.
//
// shrink_genotype() lists simpler genotypes, most aggressive first: fewer requests, shorter
// context and new lengths, no padding, fewer heads, smaller head_dim and block_size (towards the
// front of the profile's lists), plain dtypes, simple layout, dense strides, aligned bases, K and V
// views alike. Every candidate is a valid genotype.
// A quantised case stays quantised with the same cache dtype (the failure may be in that format's
// conversion); its scale kind moves towards per_tensor (per_tensor < per_head < per_block <
// per_token_head) and its scale_dist towards unit (unit < pow2 < random < extreme).
// shrink_to_minimal() runs the greedy descent (take the first candidate that still fails, repeat).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "case/genotype.h"
#include "profile.h"

namespace kvf {

// Candidates strictly simpler than g (never g itself), most aggressive first.
std::vector<Genotype> shrink_genotype(const Genotype& g, const Profile& profile);

// The well-founded order the shrinker descends: true when a is at most as complex as b in every
// component (number of requests then total tokens; layout; rank in the profile's list then value
// of heads, head_dim, block_size and gqa_ratio; fused; dtypes; scale kind; scale dist; slot dtype;
// dist; irregular; gapped strides; misaligned bases; kv_views; padding, invalid, extra-row and
// spare-block counts) and strictly less in at least one. Every
// candidate of shrink_genotype(b) is simpler_than b, so every descent terminates.
bool simpler_than(const Genotype& a, const Genotype& b, const Profile& profile);

struct ShrinkStats {
  int64_t tried = 0;     // candidates evaluated
  int64_t accepted = 0;  // candidates that still failed and were taken
};

// Greedy descent from a failing genotype: `still_fails(candidate)` is called for candidates in
// order; the first that returns true becomes the new current genotype. Stops when no candidate
// fails or after max_tries evaluations. Returns the minimal genotype found.
Genotype shrink_to_minimal(const Genotype& failing, const Profile& profile,
                           const std::function<bool(const Genotype&)>& still_fails,
                           ShrinkStats* stats = nullptr, int64_t max_tries = 2000);

}  // namespace kvf
