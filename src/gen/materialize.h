// materialize.h — genotype -> concrete Case (block tables, strides, slot_mapping, buffer sizes).
//
// Deterministic and portable: the same genotype gives the same Case, byte for byte, on every
// platform (SplitMix64 from rng.h; no <random> distributions, no std::shuffle).
#pragma once

#include "case/case.h"
#include "case/genotype.h"

namespace kvf {

// Builds the concrete case. Its `genotype` field is set to g; expect = pass; provenance empty.
Case materialize(const Genotype& g);

}  // namespace kvf
