// generate.h — RapidCheck generator of genotypes for a profile, and the campaign's case source.
//
// All RapidCheck calls of the project live in gen/ (generate.cpp, shrink.cpp). Generation is a pure
// function of (profile, seed, size): the same inputs give the same genotype on every platform.
#pragma once

#include <cstdint>

#include <rapidcheck.h>

#include "case/genotype.h"
#include "profile.h"

namespace kvf {

// Generator of genotypes drawn from `profile` (copied into the Gen). Shapes and dtypes are drawn
// from the whole profile at every size; request count and lengths, padding, invalid slots, extra
// rows and spare blocks grow with the size. Every genotype has >= 1 request and fits the element
// budget (profile.h max_elements_per_case) by construction. Its only shrinks are shrink_genotype()
// (shrink.h), applied recursively.
rc::Gen<Genotype> gen_genotype(const Profile& profile);

// The genotype of case `index` of a campaign with `seed`: generated at size index % 101 (small
// cases first, as RapidCheck does, and again every 101 cases; never above RapidCheck's nominal
// 100) from a per-case rc::Random keyed by mix64 of (seed, index). Same inputs, same genotype.
Genotype generate_case(const Profile& profile, uint64_t seed, int64_t index);

// Makes genotype g fit its quantised format (case/quant_format.h; nothing for none): ds_mla an MLA
// record (H 1, latent dims a multiple of 128, 64 rope dims, 16-bit input), indexer_k a K-only head
// of a multiple of 128 dims, the others K and V of head dims a multiple of their group (rounded up;
// nvfp4's swizzled scales also 64 dims and blocks of 4 slots); cache dtype the format's codes,
// scale kind per_tensor (nvfp4's global scales) or none; the default serving conventions; finite
// values for the asymmetric formats. The generator and the shrinker call it.
void fit_format(Genotype& g);

}  // namespace kvf
