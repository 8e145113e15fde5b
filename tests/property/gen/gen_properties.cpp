// gen_properties.cpp — properties of the generator, materialize() and the shrinker over random
// genotypes of the default and smoke profiles (RapidCheck, 100 cases each by default).
//
//   ./build/tests/kvfuzz_gen_tests --gtest_filter='*RapidCheck*:Generate*:Shrink*:Materialize*'
//   RC_PARAMS="seed=1 max_success=1000" ./build/tests/kvfuzz_gen_tests
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <string>

#include "case/validate.h"
#include "gen/generate.h"
#include "gen/materialize.h"
#include "gen/shrink.h"

namespace kvf {
namespace {

const Profile& smoke() {
  static const Profile p = load_profile(std::string(KVFUZZ_SOURCE_DIR) + "/configs/smoke.json");
  return p;
}

std::string problems(const Case& c) {
  std::string s;
  for (const ValidationProblem& p : validate(c)) s += p.json_path + ": " + p.message + "\n";
  return s;
}

bool same_view(const InputView& a, const InputView& b) {
  return a.offset == b.offset && a.stride_token == b.stride_token && a.stride_head == b.stride_head;
}

// Field-by-field equality of two materialised cases (Case has no operator==).
bool same_case(const Case& a, const Case& b) {
  bool same = a.num_heads == b.num_heads && a.head_dim == b.head_dim && a.num_q_heads == b.num_q_heads &&
              a.input_dtype == b.input_dtype && a.cache_dtype == b.cache_dtype && a.slot_dtype == b.slot_dtype &&
              a.layout == b.layout && a.cache.num_blocks == b.cache.num_blocks &&
              a.cache.block_size == b.cache.block_size && a.cache.stride_block == b.cache.stride_block &&
              a.cache.stride_pos == b.cache.stride_pos && a.cache.stride_head == b.cache.stride_head &&
              a.cache_k_offset == b.cache_k_offset && a.cache_v_offset == b.cache_v_offset &&
              a.cache_buffer_elems == b.cache_buffer_elems && a.num_input_rows == b.num_input_rows &&
              a.input_buffer_elems == b.input_buffer_elems && same_view(a.key, b.key) &&
              same_view(a.value, b.value) && a.slot_mapping == b.slot_mapping && a.dist == b.dist &&
              a.payload_seed == b.payload_seed && a.requests.size() == b.requests.size() &&
              a.genotype == b.genotype;
  for (size_t i = 0; same && i < a.requests.size(); ++i)
    same = a.requests[i].context_len == b.requests[i].context_len && a.requests[i].new_len == b.requests[i].new_len &&
           a.requests[i].blocks == b.requests[i].blocks;
  return same;
}

RC_GTEST_PROP(Generate, defaultGenotypesMaterialiseToValidCases, ()) {
  const Genotype g = *gen_genotype(default_profile());
  const Case c = materialize(g);
  RC_ASSERT(problems(c) == "");
  RC_ASSERT(!g.requests.empty());
}

RC_GTEST_PROP(Generate, smokeGenotypesMaterialiseToValidCases, ()) {
  const Genotype g = *gen_genotype(smoke());
  RC_ASSERT(problems(materialize(g)) == "");
}

RC_GTEST_PROP(Generate, casesStayWithinTheElementBudget, ()) {
  const Profile& p = default_profile();
  const Genotype g = *gen_genotype(p);
  const Case c = materialize(g);
  const int64_t per_slot = int64_t{c.num_heads} * c.head_dim;
  int64_t new_tokens = 0;
  for (const RequestGene& r : g.requests) new_tokens += r.new_len;
  // New tokens within the budget; the cache (with spare blocks and slack) within twice it.
  RC_ASSERT(new_tokens * per_slot <= p.max_elements_per_case);
  RC_ASSERT(c.capacity() * per_slot <= p.max_elements_per_case * 2);
}

RC_GTEST_PROP(Generate, generateCaseIsAFunctionOfProfileSeedAndIndex, (uint64_t seed)) {
  const int64_t index = *rc::gen::inRange<int64_t>(0, 1'000'000);
  const Genotype a = generate_case(smoke(), seed, index);
  const Genotype b = generate_case(smoke(), seed, index);
  RC_ASSERT(a == b);
  RC_ASSERT(problems(materialize(a)) == "");
}

RC_GTEST_PROP(Materialize, isDeterministic, ()) {
  const Genotype g = *gen_genotype(default_profile());
  RC_ASSERT(same_case(materialize(g), materialize(g)));
}

RC_GTEST_PROP(Shrink, everyCandidateIsValidDifferentAndSimpler, ()) {
  const Profile& p = smoke();
  const Genotype g = *gen_genotype(p);
  for (const Genotype& c : shrink_genotype(g, p)) {
    RC_ASSERT(!(c == g));
    RC_ASSERT(simpler_than(c, g, p));
    RC_ASSERT(!simpler_than(g, c, p));
    RC_ASSERT(!c.requests.empty());
    RC_ASSERT(problems(materialize(c)) == "");
  }
}

// Planted bug: a paged append crossing a block boundary. From any failing genotype the descent
// ends at one request crossing the boundary by exactly one token, everything else simplest.
RC_GTEST_PROP(Shrink, findsTheMinimumOfAPlantedBlockBoundaryBug, ()) {
  const Profile& p = default_profile();
  Genotype g = *gen_genotype(p);
  g.layout = Layout::paged_nhd;
  const int64_t bs = g.block_size;
  // Plant one request that crosses a boundary: context ends one slot before a block end.
  const int64_t k = *rc::gen::inRange<int64_t>(0, 3);
  g.requests.insert(g.requests.begin() + static_cast<int64_t>(g.requests.size() / 2),
                    RequestGene{k * bs + bs - 1, *rc::gen::inRange<int64_t>(2, 40)});
  auto fails = [](const Genotype& x) {
    if (x.layout != Layout::paged_nhd) return false;
    for (const RequestGene& r : x.requests)
      if (r.context_len % x.block_size + r.new_len > x.block_size) return true;
    return false;
  };
  RC_ASSERT(fails(g));
  ShrinkStats stats;
  const Genotype m = shrink_to_minimal(g, p, fails, &stats, 1'000'000);
  RC_ASSERT(fails(m));
  RC_ASSERT(m.requests.size() == 1u);
  const RequestGene r = m.requests[0];
  RC_ASSERT(r.context_len < m.block_size);
  RC_ASSERT(r.context_len + r.new_len == m.block_size + 1);
  // Locally minimal: no candidate still fails.
  for (const Genotype& c : shrink_genotype(m, p)) RC_ASSERT(!fails(c));
  // Every field the bug does not depend on is at its simplest.
  RC_ASSERT(m.num_heads == p.num_heads.values[0]);
  RC_ASSERT(m.head_dim == p.head_dims.values[0]);
  RC_ASSERT(!m.fused_qkv && m.gqa_ratio == p.gqa_ratios.values[0]);
  RC_ASSERT(m.input_dtype == p.input_dtypes.values[0] && m.cache_dtype == m.input_dtype);
  RC_ASSERT(m.slot_dtype == IndexType::i64 && m.dist == ValueDist::finite && !m.irregular);
  RC_ASSERT(m.tail_padding + m.interleaved_padding + m.invalid_slots + m.extra_input_rows + m.spare_blocks == 0);
  RC_ASSERT(m.layout_seed == g.layout_seed);
}

}  // namespace
}  // namespace kvf
