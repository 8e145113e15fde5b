// capabilities_test.cpp — campaigns on a target with capabilities: outside_reason() per case,
// restrict_profile(), and CaseSource drawing only supported cases and counting the rest.
//
//   ./build/tests/kvfuzz_gen_tests --gtest_filter='Capabilities*'
#include <gtest/gtest.h>

#include <map>

#include "case/case_json.h"
#include "base/errors.h"
#include "gen/capabilities.h"
#include "gen/generate.h"
#include "gen/materialize.h"
#include "gen/profile.h"

namespace kvf {
namespace {

template <typename... E>
uint32_t bits(E... values) {
  return ((1u << static_cast<unsigned>(values)) | ...);
}

// examples/plugins/naive/naive.c: paged NHD/HND, same-dtype float caches, every feature.
Capabilities naive() {
  Capabilities k;
  k.layouts = bits(Layout::paged_nhd, Layout::paged_hnd);
  k.input_dtypes = k.cache_dtypes = bits(DType::f16, DType::bf16, DType::f32);
  k.scale_kinds = bits(ScaleKind::none);
  k.same_input_cache_dtype = true;
  return k;
}

// A typical production kernel: f16/bf16 only, head_dim multiple of 16 up to 256, powers-of-two
// blocks up to 64, fp8 e4m3 caches per tensor, aligned dense tensors only, no QKV views.
Capabilities narrow() {
  Capabilities k;
  k.layouts = bits(Layout::paged_nhd, Layout::contiguous_bshd);
  k.input_dtypes = bits(DType::f16, DType::bf16);
  k.cache_dtypes = bits(DType::f16, DType::bf16, DType::fp8_e4m3);
  k.scale_kinds = bits(ScaleKind::none, ScaleKind::per_tensor);
  k.slot_dtypes = bits(IndexType::i64);
  k.fused_qkv = k.strided_input = k.padded_cache = k.graph_padding_rows = k.unaligned = false;
  k.same_input_cache_dtype = true;
  k.head_dim_multiple = 16;
  k.max_head_dim = 256;
  k.max_block_size = 64;
  k.block_size_pow2_only = true;
  return k;
}

TEST(Capabilities, everythingAdmitsEveryGeneratedCase) {
  const Profile p = default_profile();
  for (int64_t i = 0; i < 300; ++i) EXPECT_EQ(outside_reason(materialize(generate_case(p, 3, i)), Capabilities{}), "");
}

TEST(Capabilities, outsideReasonNamesTheFirstUnsupportedProperty) {
  Genotype g;
  g.layout = Layout::packed_kv_nhd;
  g.requests = {{3, 2}};
  EXPECT_EQ(outside_reason(materialize(g), naive()), "layout packed_kv_nhd");
  g.layout = Layout::paged_hnd;
  EXPECT_EQ(outside_reason(materialize(g), naive()), "");
  g.cache_dtype = DType::f32;
  EXPECT_EQ(outside_reason(materialize(g), naive()), "float cache of another dtype than the input");
  g.cache_dtype = DType::fp8_e4m3;
  g.scale_kind = ScaleKind::per_head;
  EXPECT_EQ(outside_reason(materialize(g), naive()), "cache dtype fp8_e4m3");
  g = Genotype{};
  g.requests = {{0, 1}};
  g.head_dim = 8;
  EXPECT_EQ(outside_reason(materialize(g), narrow()), "head_dim not a multiple of 16");
  g.head_dim = 16;
  g.block_size = 16;
  EXPECT_EQ(outside_reason(materialize(g), narrow()), "");
  g.misaligned_bases = true;  // odd base offsets: unaligned pointers
  g.layout_seed = 7;
  EXPECT_EQ(outside_reason(materialize(g), narrow()), "base pointer not 16-byte aligned");
  g.misaligned_bases = false;
  g.gapped_strides = true;
  EXPECT_EQ(outside_reason(materialize(g), narrow()), "strided input");
  g.gapped_strides = false;
  g.kv_views = KvViews::value_rows;
  EXPECT_EQ(outside_reason(materialize(g), narrow()), "strided input");
  g.kv_views = KvViews::alike;
  g.irregular = true;  // odd slot values only: every kernel's contract
  EXPECT_EQ(outside_reason(materialize(g), narrow()), "");
  g.irregular = false;
  g.extra_input_rows = 2;
  EXPECT_EQ(outside_reason(materialize(g), narrow()), "graph padding rows");
}

TEST(Capabilities, restrictedProfileKeepsOnlySupportedValues) {
  const Profile r = restrict_profile(default_profile(), narrow());
  EXPECT_EQ(r.layouts.values, (std::vector<Layout>{Layout::paged_nhd, Layout::contiguous_bshd}));
  EXPECT_EQ(r.input_dtypes.values, (std::vector<DType>{DType::f16, DType::bf16}));
  EXPECT_EQ(r.slot_dtypes.values, (std::vector<IndexType>{IndexType::i64}));
  for (int32_t d : r.head_dims.values) EXPECT_TRUE(d % 16 == 0 && d <= 256) << d;
  for (int32_t bs : r.block_sizes.values) EXPECT_TRUE(bs <= 64 && (bs & (bs - 1)) == 0) << bs;
  EXPECT_EQ(r.scale_kinds.values, (std::vector<ScaleKind>{ScaleKind::per_tensor}));
  EXPECT_EQ(r.cross_dtype_percent, 0);  // same-dtype float caches only
  EXPECT_GT(r.quant_percent, 0);        // fp8_e4m3 per tensor remains
  EXPECT_EQ(r.fused_qkv_percent, 0);
  EXPECT_EQ(r.irregular_percent, default_profile().irregular_percent);  // odd slot values: always sent
  EXPECT_EQ(r.gapped_strides_percent, 0);
  EXPECT_EQ(r.misaligned_bases_percent, 0);
  EXPECT_EQ(r.kv_views.values, (std::vector<KvViews>{KvViews::alike}));
  EXPECT_EQ(r.max_extra_input_rows, 0);
}

TEST(Capabilities, gapsDistinctViewsAndOddBasesAreSwitchedOffOneByOne) {
  // An aligned-pointer kernel that takes any strides still gets gapped caches and distinct K/V
  // views (the combination the single `irregular` flag never produced), only no odd bases.
  Capabilities aligned;
  aligned.unaligned = false;
  Profile r = restrict_profile(default_profile(), aligned);
  EXPECT_EQ(r.gapped_strides_percent, default_profile().gapped_strides_percent);
  EXPECT_EQ(r.kv_views, default_profile().kv_views);
  EXPECT_EQ(r.misaligned_bases_percent, 0);
  Capabilities dense_cache;
  dense_cache.padded_cache = false;
  r = restrict_profile(default_profile(), dense_cache);
  EXPECT_EQ(r.gapped_strides_percent, 0);
  EXPECT_EQ(r.kv_views, default_profile().kv_views);  // input strides are still free
  EXPECT_EQ(r.misaligned_bases_percent, default_profile().misaligned_bases_percent);
}

TEST(Capabilities, kindSharesFillTheHundredWhenCopiesAreImpossible) {
  Capabilities fp8_only;
  fp8_only.cache_dtypes = bits(DType::fp8_e4m3);
  fp8_only.scale_kinds = bits(ScaleKind::per_tensor, ScaleKind::per_head);
  const Profile r = restrict_profile(default_profile(), fp8_only);  // default: 15% cross, 20% quantised
  EXPECT_EQ(r.cross_dtype_percent, 0);
  EXPECT_EQ(r.quant_percent, 100);
}

TEST(Capabilities, aProfileWithNothingSupportedIsRefusedWithBothSides) {
  Profile p = default_profile();
  p.quant_percent = 100;
  p.cross_dtype_percent = 0;
  try {
    restrict_profile(p, naive());
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("generates no cache the target supports"), std::string::npos) << e.what();
  }
  Capabilities hnd_only;
  hnd_only.layouts = bits(Layout::paged_hnd);
  p = default_profile();
  p.layouts = {{Layout::paged_nhd}, {1}};
  try {
    restrict_profile(p, hnd_only);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no layout the target supports (profile: paged_nhd; target: paged_hnd)"),
              std::string::npos)
        << e.what();
  }
}

TEST(Capabilities, aKernelDeclaringNoSlotsPastCapacityNeverGetsOne) {
  Capabilities k = naive();
  k.slots_past_capacity = false;
  EXPECT_EQ(restrict_profile(default_profile(), k).max_invalid_slots, 0);
  const CaseSource source(default_profile(), k);
  int64_t past = 0;  // in the profile's own draws: the control
  for (int64_t i = 0; i < 300; ++i) {
    const Case as_drawn = materialize(generate_case(default_profile(), 8, i));
    for (int64_t s : as_drawn.slot_mapping) past += s >= as_drawn.capacity();
    const DrawnCase d = source.draw(8, i);
    if (d.skipped) continue;
    for (int64_t s : d.kase.slot_mapping) EXPECT_LT(s, d.kase.capacity()) << "case " << i;
  }
  EXPECT_GT(past, 0);
  const Capabilities j = capabilities_from_json(nlohmann::json::parse(R"({"slots_past_capacity": false})"), "caps");
  EXPECT_FALSE(j.slots_past_capacity);
  EXPECT_FALSE(capabilities_from_json(capabilities_to_json(k), "caps").slots_past_capacity);
  EXPECT_TRUE(capabilities_from_json(nlohmann::json::object(), "caps").slots_past_capacity);
}

// Every stride of the input views and K/V caches, in bytes.
std::vector<int64_t> stride_bytes(const Case& c) {
  const int64_t in = dtype_size(c.input_dtype), cache = c.has_format() ? 1 : dtype_size(c.cache_dtype);
  std::vector<int64_t> out = {c.key.stride_token * in, c.key.stride_head * in};
  if (c.has_value()) out.insert(out.end(), {c.value.stride_token * in, c.value.stride_head * in});
  if (c.family == Family::mla) out.insert(out.end(), {c.rope.stride_token * in, c.rope.stride_head * in});
  for (const CacheGeometry* g : {&c.cache, &c.value_geometry()})
    out.insert(out.end(), {g->stride_block * cache, g->stride_pos * cache, g->stride_head * cache});
  return out;
}

// A vectorised kernel (16-byte loads and stores) with every feature but element-wise strides: it
// gets gapped strides and distinct K/V views, all in whole 16-byte units, and no other stride.
TEST(Capabilities, aKernelDeclaringAStrideGranularityGetsOnlyWholeUnits) {
  Capabilities k;
  k.stride_granularity = 16;
  const Profile r = restrict_profile(default_profile(), k);
  EXPECT_EQ(r.stride_gap_bytes, 16);
  for (const auto& d : r.head_dims.values) EXPECT_EQ(d % 16, 0) << d;  // fp8/int8 rows of whole units
  const CaseSource source(default_profile(), k);
  int64_t run = 0, gapped = 0, odd_in_profile = 0;
  for (int64_t i = 0; i < 400; ++i) {
    const Case as_drawn = materialize(generate_case(default_profile(), 9, i));  // the control
    for (int64_t s : stride_bytes(as_drawn)) odd_in_profile += s % 16 != 0;
    const DrawnCase d = source.draw(9, i);
    if (d.skipped) continue;
    ++run;
    for (int64_t s : stride_bytes(d.kase)) ASSERT_EQ(s % 16, 0) << "case " << i << ": " << case_to_json(d.kase).dump();
    gapped += d.genotype.gapped_strides;
  }
  EXPECT_GT(odd_in_profile, 0);
  EXPECT_GT(run, 350);
  EXPECT_GT(gapped, 50);
  // A case with a one-element gap is outside, with the reason.
  Genotype g;
  g.requests = {{2, 1}};
  g.head_dim = 64;
  g.gapped_strides = true;
  g.layout_seed = 3;
  bool found = false;
  for (uint64_t seed = 1; seed < 50 && !found; ++seed) {
    g.layout_seed = seed;
    const std::string why = outside_reason(materialize(g), k);
    found = why.find("stride not a multiple of 16 bytes") != std::string::npos;
  }
  EXPECT_TRUE(found);
  // The Python key, and its bad forms.
  EXPECT_EQ(capabilities_from_json(nlohmann::json::parse(R"({"stride_granularity": 16})"), "caps").stride_granularity, 16);
  EXPECT_EQ(capabilities_from_json(capabilities_to_json(k), "caps").stride_granularity, 16);
  for (const char* bad : {R"({"stride_granularity": 12})", R"({"stride_granularity": -16})", R"({"stride_granularity": "16"})"}) {
    try {
      capabilities_from_json(nlohmann::json::parse(bad), "caps");
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("at /stride_granularity: "), std::string::npos) << e.what();
    }
  }
}

// An MLA kernel declares the entry's whole width (FlashInfer's MLA append: 576 = 512 + 64); a profile
// draws kv_c's dims (512) and adds the rope dims. The kernel gets its 576-wide entries, and a kernel
// declaring 512 (kv_c's dims, not the entry) gets no MLA case from that profile.
TEST(Capabilities, anMlaKernelsHeadDimIsTheEntrysWidth) {
  Profile p = default_profile();
  p.families = {{Family::mla}, {1}};
  p.head_dims = {{512}, {1}};
  p.rope_dims = {{64}, {1}};
  Capabilities k;
  k.head_dims = {576};
  k.rope_dims = {64};
  const Profile r = restrict_profile(p, k);
  ASSERT_EQ(r.head_dims.values, std::vector<int32_t>{512});
  const CaseSource source(p, k);
  int64_t drawn = 0;
  for (int64_t i = 0; i < 50; ++i) {
    const DrawnCase d = source.draw(4, i);
    if (d.skipped) continue;
    ++drawn;
    EXPECT_EQ(d.kase.head_dim, 576) << "case " << i;
  }
  EXPECT_GT(drawn, 40);
  k.head_dims = {512};
  EXPECT_THROW(restrict_profile(p, k), InputError);

  // Without KVFZ_FEATURE_UNALIGNED, k_pe's base is checked like every other base (FlashInfer's MLA
  // plugin refused a case whose kv_c was aligned and whose k_pe started 2 bytes in).
  k.head_dims = {576};
  k.unaligned = false;
  Case c = materialize(generate_case(p, 4, 0));
  ASSERT_EQ(c.family, Family::mla);
  c.key.offset = c.value.offset = c.cache_k_offset = c.cache_v_offset = 0;  // every base aligned
  c.rope.offset = 64;
  EXPECT_EQ(outside_reason(c, k), "");
  c.rope.offset = 1;
  EXPECT_EQ(outside_reason(c, k), "base pointer not 16-byte aligned");
}

TEST(Capabilities, anMlaKernelGetsOnlyItsRopeDims) {
  Profile p = default_profile();
  p.families = {{Family::kv, Family::mla}, {1, 3}};
  p.rope_dims = {{16, 32, 64}, {1, 1, 1}};
  Capabilities k;
  k.rope_dims = {64};
  const Profile r = restrict_profile(p, k);
  ASSERT_EQ(r.rope_dims.values, std::vector<int32_t>{64});
  const CaseSource source(p, k);
  int64_t mla = 0, other_rope_as_drawn = 0;
  for (int64_t i = 0; i < 300; ++i) {
    const Case as_drawn = materialize(generate_case(p, 9, i));
    other_rope_as_drawn += as_drawn.family == Family::mla && as_drawn.rope_dim != 64;
    const DrawnCase d = source.draw(9, i);
    if (d.skipped || d.kase.family != Family::mla) continue;
    ++mla;
    EXPECT_EQ(d.kase.rope_dim, 64) << "case " << i;
  }
  EXPECT_GT(mla, 50);
  EXPECT_GT(other_rope_as_drawn, 0);  // the control: the profile draws the others
  // A rope-dim set the profile never draws leaves no MLA case: MLA alone is refused, naming it.
  p.families = {{Family::mla}, {1}};
  k.rope_dims = {128};
  try {
    restrict_profile(p, k);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("mla only with rope dims {128}"), std::string::npos) << e.what();
  }
  const Capabilities j = capabilities_from_json(nlohmann::json::parse(R"({"rope_dims": [64, 32, 64]})"), "caps");
  EXPECT_EQ(j.rope_dims, (std::vector<int32_t>{32, 64}));
  EXPECT_EQ(capabilities_from_json(capabilities_to_json(j), "caps").rope_dims, j.rope_dims);
  try {
    capabilities_from_json(nlohmann::json::parse(R"({"rope_dims": [0]})"), "caps");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/rope_dims/0"), std::string::npos) << e.what();
  }
}

// A writer of quantised formats only (a ds_mla or indexer writer: no classic cache, no NONE bit).
Capabilities formats_only() {
  Capabilities k;
  k.quant_formats = bits(QuantFormat::ds_mla, QuantFormat::indexer_k);
  k.cache_dtypes = 0;
  k.scale_kinds = 0;
  return k;
}

TEST(Capabilities, aFormatsOnlyKernelGetsEveryCaseInOneOfItsFormats) {
  Profile p = default_profile();
  p.format_percent = 30;
  const Profile r = restrict_profile(p, formats_only());
  EXPECT_EQ(r.format_percent, 100);
  const CaseSource source(p, formats_only());
  int64_t ran = 0;
  for (int64_t i = 0; i < 200; ++i) {
    const DrawnCase d = source.draw(5, i);
    if (d.skipped) continue;
    ++ran;
    EXPECT_EQ(outside_reason(d.kase, formats_only()), "") << "case " << i;
    EXPECT_TRUE(d.kase.quant_format == QuantFormat::ds_mla || d.kase.quant_format == QuantFormat::indexer_k) << "case " << i;
  }
  EXPECT_GT(ran, 190);
  // A profile that draws no format has nothing for it: refused, naming both sides.
  p.format_percent = 0;
  try {
    restrict_profile(p, formats_only());
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("quantised formats ds_mla, indexer_k; profile: formats none (format_percent 0)"),
              std::string::npos)
        << e.what();
  }
}

// The campaign's source: what runs is inside the capabilities; a drawn case inside them runs as
// drawn (the same case as on any other target); the others are counted and replaced or skipped.
void check_source(const Capabilities& caps, int64_t cases, int64_t min_outside) {
  const Profile p = default_profile();
  const CaseSource source(p, caps);
  std::map<std::string, int64_t> reasons;
  int64_t outside = 0, skipped = 0;
  for (int64_t i = 0; i < cases; ++i) {
    const DrawnCase d = source.draw(11, i);
    const Genotype as_drawn = generate_case(p, 11, i);
    if (d.outside.empty()) {
      EXPECT_EQ(d.genotype, as_drawn) << "case " << i;
    } else {
      ++outside;
      ++reasons[d.outside];
      EXPECT_EQ(d.outside, outside_reason(materialize(as_drawn), caps));
    }
    if (d.skipped) {
      ++skipped;
      continue;
    }
    EXPECT_EQ(outside_reason(d.kase, caps), "") << "case " << i;
    EXPECT_EQ(case_hash(d.kase), case_hash(materialize(d.genotype)));
  }
  EXPECT_GE(outside, min_outside);
  EXPECT_LT(skipped, cases / 10) << "restricted draws should almost always be inside";
}

TEST(Capabilities, caseSourceRunsOnlySupportedCasesForTheNaivePlugin) { check_source(naive(), 300, 100); }
TEST(Capabilities, caseSourceRunsOnlySupportedCasesForANarrowKernel) { check_source(narrow(), 300, 250); }

// A kernel specialised for a few head dims (FlashInfer-style {64, 128, 256, 512}).
Capabilities head_dim_set() {
  Capabilities k;
  k.head_dims = {64, 128, 256, 512};
  return k;
}

TEST(Capabilities, caseSourceRunsOnlySupportedCasesForAHeadDimSet) { check_source(head_dim_set(), 300, 150); }

TEST(Capabilities, aHeadDimSetAdmitsOnlyItsMembers) {
  Genotype g;
  g.requests = {{2, 1}};
  g.head_dim = 96;
  EXPECT_EQ(outside_reason(materialize(g), head_dim_set()), "head_dim not in {64, 128, 256, 512}");
  g.head_dim = 128;
  EXPECT_EQ(outside_reason(materialize(g), head_dim_set()), "");
  const Profile r = restrict_profile(default_profile(), head_dim_set());
  EXPECT_EQ(r.head_dims.values, (std::vector<int32_t>{64, 128, 256}));  // the default profile has no 512
  for (int64_t i = 0; i < 200; ++i) {
    const int32_t d = generate_case(r, 5, i).head_dim;
    EXPECT_TRUE(d == 64 || d == 128 || d == 256) << "case " << i << ": head_dim " << d;
  }
}

TEST(Capabilities, aHeadDimSetTheProfileDoesNotDrawIsRefusedWithBothSides) {
  Capabilities k;
  k.head_dims = {512};
  k.min_head_dim = 8;
  try {
    restrict_profile(default_profile(), k);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no head_dim the target supports (profile: 1, 2, 3,"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("target: >= 8, one of {512})"), std::string::npos) << e.what();
  }
}

TEST(Capabilities, aPythonDeclarationParsesIntoTheSameCapabilities) {
  const nlohmann::json j = {{"layouts", {"paged_nhd"}},
                            {"input_dtypes", {"f16"}},
                            {"cache_dtypes", {"f16", "fp8_e4m3"}},
                            {"scale_kinds", {"none", "per_tensor"}},
                            {"slot_dtypes", {"i64"}},
                            {"features", {"strided_input", "invalid_slot_counter"}},
                            {"head_dims", {256, 64, 128, 64}},
                            {"max_head_dim", 256},
                            {"head_dim_multiple", 16},
                            {"max_num_heads", 32},
                            {"max_block_size", 64},
                            {"block_size_pow2_only", true},
                            {"same_input_cache_dtype", true}};
  const Capabilities c = capabilities_from_json(j, "k.py:fn_capabilities()");
  EXPECT_EQ(c.layouts, bits(Layout::paged_nhd));
  EXPECT_EQ(c.input_dtypes, bits(DType::f16));
  EXPECT_EQ(c.cache_dtypes, bits(DType::f16, DType::fp8_e4m3));
  EXPECT_EQ(c.scale_kinds, bits(ScaleKind::none, ScaleKind::per_tensor));
  EXPECT_EQ(c.slot_dtypes, bits(IndexType::i64));
  EXPECT_TRUE(c.strided_input && c.invalid_slot_counter);
  EXPECT_FALSE(c.fused_qkv || c.padded_cache || c.graph_padding_rows || c.unaligned);
  EXPECT_EQ(c.head_dims, (std::vector<int32_t>{64, 128, 256}));
  EXPECT_EQ(c.max_head_dim, 256);
  EXPECT_EQ(c.head_dim_multiple, 16);
  EXPECT_EQ(c.max_num_heads, 32);
  EXPECT_EQ(c.max_block_size, 64);
  EXPECT_TRUE(c.block_size_pow2_only && c.same_input_cache_dtype);
  // Missing keys restrict nothing.
  const Capabilities any = capabilities_from_json(nlohmann::json::object(), "x");
  EXPECT_TRUE(any.head_dims.empty() && any.fused_qkv && any.invalid_slot_counter && any.layouts == ~0u);
  for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(outside_reason(materialize(generate_case(default_profile(), 2, i)), any), "");
}

// capabilities_to_json is what `kvfuzz targets --json` prints: read back as a Python declaration, it
// is the same capabilities (every bit set of a narrow kernel exactly; the unrestricted ~0u sets as
// their known values, which admit the same cases).
TEST(Capabilities, theJsonFormReadsBackAsTheSameCapabilities) {
  Capabilities sets = head_dim_set();
  sets.families = bits(Family::kv, Family::mla);
  for (const Capabilities& c : {narrow(), naive(), sets, own_kernel_capabilities()}) {
    const nlohmann::json j = capabilities_to_json(c);
    const Capabilities back = capabilities_from_json(j, "targets --json");
    EXPECT_EQ(capabilities_to_json(back), j);
    EXPECT_EQ(back.families & c.families, back.families);
    for (int64_t i = 0; i < 100; ++i) {
      const Case k = materialize(generate_case(default_profile(), 4, i));
      EXPECT_EQ(outside_reason(k, back), outside_reason(k, c)) << j.dump();
    }
  }
  Capabilities exact = narrow();
  exact.families = bits(Family::kv, Family::kv_split, Family::k_only, Family::mla);
  exact.padding_modes = bits(PaddingMode::negative, PaddingMode::sink);
  exact.addressings = bits(Addressing::csr);
  exact.windows = bits(WindowInput::none, WindowInput::positions);
  exact.cp_inputs = bits(CpInput::none, CpInput::positions);
  exact.quant_formats = bits(QuantFormat::none, QuantFormat::nvfp4);
  exact.quant_rules = 1u << static_cast<unsigned>(RuleBit::mx_nv_ceil);
  EXPECT_EQ(capabilities_from_json(capabilities_to_json(exact), "x"), exact);
  EXPECT_EQ(capabilities_to_json(narrow())["layouts"], nlohmann::json({"paged_nhd", "contiguous_bshd"}));
  EXPECT_EQ(capabilities_to_json(sets)["families"], nlohmann::json({"kv", "mla"}));
  EXPECT_EQ(formats_text(narrow()), "layouts paged_nhd, contiguous_bshd; families kv, kv_split, k_only, mla; padding negative, sink; "
                                    "addressing slot_mapping, csr; window none, slot_mapping, positions; context parallel none, "
                                    "slot_mapping, positions; quantised formats none, nvfp4, mxfp8_e4m3, mxfp8_e5m2, mxfp4, ds_mla, "
                                    "indexer_k, fp8_inline, int8_inline, asym_int8, asym_int4");
  EXPECT_EQ(formats_text(exact).substr(formats_text(exact).rfind(';')), "; quantised formats none, nvfp4");
}

TEST(Capabilities, aBadPythonDeclarationNamesTheKeyAndTheExpectedForm) {
  const auto error = [](const nlohmann::json& j) {
    try {
      capabilities_from_json(j, "k.py:fn.kvfuzz_capabilities");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error({{"layouts", {"paged_nhd", "nhd"}}}),
            "k.py:fn.kvfuzz_capabilities: at /layouts/1: \"nhd\" is not one of a list of layout names (paged_nhd, "
            "paged_hnd, contiguous_bshd, contiguous_bhsd, packed_kv_nhd, packed_content_hnd, vllm_legacy)");
  EXPECT_NE(error({{"layouts", "paged_nhd"}}).find("at /layouts: expected a list of layout names"), std::string::npos);
  EXPECT_NE(error({{"input_dtypes", {"int8"}}}).find("at /input_dtypes/0: \"int8\" is not one of a list of input dtype names (f16, bf16, f32)"),
            std::string::npos);
  EXPECT_NE(error({{"head_dims", {64, -1}}}).find("at /head_dims/1: -1 is not in a non-empty list of head dims"), std::string::npos);
  EXPECT_NE(error({{"head_dims", nlohmann::json::array()}}).find("at /head_dims: expected a non-empty list"), std::string::npos);
  EXPECT_NE(error({{"max_head_dim", 2.5}}).find("at /max_head_dim: 2.5 is not an integer >= 0"), std::string::npos);
  EXPECT_NE(error({{"block_size_pow2_only", 1}}).find("at /block_size_pow2_only: 1 is not true or false"), std::string::npos);
  EXPECT_NE(error({{"features", {"fused"}}}).find("at /features/0: \"fused\" is not one of the features fused_qkv,"), std::string::npos);
  EXPECT_NE(error({{"head_dim", {64}}}).find("at /head_dim: unknown key \"head_dim\"; the keys are layouts,"), std::string::npos);
  EXPECT_NE(error(nlohmann::json::array()).find("expected a dict of capabilities"), std::string::npos);
}

TEST(Capabilities, caseSourceWithoutCapabilitiesIsTheProfile) {
  const Profile p = default_profile();
  const CaseSource source(p, std::nullopt);
  for (int64_t i = 0; i < 50; ++i) {
    const DrawnCase d = source.draw(4, i);
    EXPECT_EQ(d.genotype, generate_case(p, 4, i));
    EXPECT_EQ(d.outside, "");
    EXPECT_FALSE(d.skipped);
  }
}

}  // namespace
}  // namespace kvf
