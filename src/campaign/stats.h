// stats.h — what a campaign covered (`run --stats`): the feature buckets each checked case hits,
// counted, like Hypothesis's --hypothesis-show-statistics.
//
// Buckets are "name=value" strings read off the concrete case (never the genotype, so replayed and
// generated cases count alike): format, padding mode, layout, input, cache and slot dtypes, scale kind, value
// distribution, block size (1, power of two, other), heads (1, odd, even), head_dim (power of two or
// not), requests with new tokens (0, 1, many), decode-only and prefill-with-context batches,
// padding rows, invalid slots and a slot exactly at the capacity, CUDA-graph input rows, a fused QKV
// input, K and V input views with different strides, gapped cache strides, misaligned bases.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "case/case.h"

namespace kvf {

// The format family a case exercises, as the run summary counts them (docs/formats.md): "mla",
// "k_only", "kv_split", or for K and V of one shape by layout "x_packed" (vllm_legacy),
// "content_packed", "block_packed" (packed_kv_nhd), "paged", "contiguous".
std::string format_family(const Case& c);

// The buckets case `c` hits, each once.
std::vector<std::string> feature_buckets(const Case& c);

// Counts of checked cases per bucket.
using FeatureStats = std::map<std::string, int64_t>;

}  // namespace kvf
