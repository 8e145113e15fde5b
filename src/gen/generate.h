// generate.h — RapidCheck generator of genotypes for a profile, and the campaign's case source.
//
// All RapidCheck calls of the project live in gen/ (generate.cpp, shrink.cpp). Generation is a pure
// function of (profile, seed, size): the same inputs give the same genotype on every platform.
#pragma once

#include <cstdint>

#include <rapidcheck.h>

#include "genotype.h"
#include "profile.h"

namespace kvf {

// Generator of genotypes drawn from `profile`. Its shrinks are shrink_genotype() (shrink.h).
rc::Gen<Genotype> gen_genotype(const Profile& profile);

// The genotype of case `index` of a campaign with `seed`: generated at a size that grows with the
// index (small cases first, as RapidCheck does) from a per-case random stream.
Genotype generate_case(const Profile& profile, uint64_t seed, int64_t index);

}  // namespace kvf
