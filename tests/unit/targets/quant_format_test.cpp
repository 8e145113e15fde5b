// quant_format_test.cpp — the quantised formats' typed fields (src/case/quant_format.h,
// quant_fields.cpp): a hand-built NVFP4 case through the validator, the case JSON, the golden model
// and the diff, with every stored code and scale recomputed by hand from block_quant.h.
//
//   cmake --build build --target kvfuzz_core_tests && build/tests/kvfuzz_core_tests --gtest_filter='QuantFormat*'
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <utility>

#include "arena/arena.h"
#include "report/verdict.h"
#include "case/case_json.h"
#include "case/validate.h"
#include "golden/block_quant.h"
#include "values/convert.h"
#include "golden/golden.h"
#include "values/minifloat.h"
#include "values/payload.h"
#include "gen/generate.h"
#include "gen/materialize.h"
#include "gen/profile.h"
#include "kv_format.cuh"
#include "report/cell_map.h"
#include "report/html.h"
#include "report/markdown.h"

namespace kvf {
namespace {

// One request (context 1, two new tokens) in a paged NHD NVFP4 cache of 2 blocks of 2 slots, one
// head of 32 dims: codes are 16 bytes a row, K's rows [nb, bs, 1, 16] then V's; the e4m3 scales
// [nb, bs, 1, 2] in the scale cache, K's then V's. fp32 global scales per tensor (per_tensor).
Case nvfp4_case(ScaleLayout scale_layout = ScaleLayout::linear) {
  Case c;
  c.num_heads = 1;
  c.head_dim = 32;
  c.input_dtype = DType::bf16;
  c.cache_dtype = DType::fp4_e2m1;
  c.slot_dtype = IndexType::i64;
  c.layout = Layout::paged_nhd;
  c.quant_format = QuantFormat::nvfp4;
  c.quant_rules.scale_layout = scale_layout;
  c.cache = CacheGeometry{2, 2, 2 * 16, 16, 16};
  c.cache_k_offset = 0;
  c.cache_v_offset = 2 * 2 * 16;
  c.cache_buffer_elems = 2 * c.cache_v_offset;
  c.scale_kind = ScaleKind::per_tensor;
  c.scale_dist = ScaleDist::random;
  c.scale_cache = CacheGeometry{2, 2, 2 * 2, 2, 2};
  c.scale_k_offset = 0;
  c.scale_v_offset = 2 * 2 * 2;
  c.scale_cache_elems = 2 * c.scale_v_offset;
  c.requests = {Request{1, 2, {1, 0}, {}}};
  c.slot_mapping = {3, -1, 0};  // positions 1 (block 1 offset 1) and 2 (block 0 offset 0), a padding row between
  c.num_input_rows = 3;
  c.key = InputView{0, 64, 32};
  c.value = InputView{32, 64, 32};
  c.input_buffer_elems = 3 * 64;
  c.payload_seed = 5;
  return c;
}

float f32_of(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

TEST(QuantFormat, nvfp4FieldsAreTypedAndLaidOutFromTheGeometry) {
  const Case c = nvfp4_case();
  const CacheFields f = c.fields();
  ASSERT_EQ(f.count, 4);  // K, K scale, V, V scale
  EXPECT_EQ(f.field[0].dtype, DType::fp4_e2m1);
  EXPECT_EQ(f.field[1].dtype, DType::fp8_e4m3);
  EXPECT_EQ(f.field[1].buffer, FieldBuffer::scale_cache);
  EXPECT_EQ(f.field[0].scale, 1);
  EXPECT_EQ(f.field[2].scale, 3);
  // K dim 17 of block 1 slot 1: byte 32 + 16 + 8, its high nibble (nibble 113).
  EXPECT_EQ(field_offset(f.field[0].layout, 1, 1, 0, 17), 2 * (32 + 16 + 8) + 1);
  // V's scale of dims 16..31 at block 0 slot 1: element 8 + 2 + 1.
  EXPECT_EQ(field_offset(f.field[3].layout, 0, 1, 0, 1), 11);
  ASSERT_TRUE(validate(c).empty()) << validate(c).front().json_path << ": " << validate(c).front().message;
  const nlohmann::json j = case_to_json(c);
  EXPECT_EQ(j.at("version"), 2);
  EXPECT_EQ(j.at("quant").at("format"), "nvfp4");
  EXPECT_EQ(case_to_json(case_from_json(j, "nvfp4.json")), j);
}

// quant.rules holds only the conventions its format reads (the keys the writer writes for it); any
// other key is refused at its path, naming the format's keys, with control bytes escaped.
TEST(QuantFormat, quantRulesRefusesAKeyItsFormatDoesNotRead) {
  const auto refusal = [](const std::string& key) {
    nlohmann::json j = case_to_json(nvfp4_case());
    j["quant"]["rules"][key] = "ocp_floor";
    try {
      case_from_json(j, "nvfp4.json");
    } catch (const InputError& e) {
      return std::pair{e.json_path(), e.message()};
    }
    return std::pair{std::string("accepted"), std::string()};
  };
  EXPECT_EQ(refusal("mx"), std::pair(std::string("/quant/rules/mx"),
                                     std::string("unknown key \"mx\"; format nvfp4 reads \"nvfp4\", \"scale_layout\"")));
  EXPECT_EQ(refusal("a/\x7f"), std::pair(std::string("/quant/rules/a~1\\x7f"),
                                         std::string("unknown key \"a/\\x7f\"; format nvfp4 reads \"nvfp4\", \"scale_layout\"")));
}

TEST(QuantFormat, goldenNvfp4CodesAndScalesAreTheBlockQuantisersByHand) {
  const Case c = nvfp4_case();
  Arena expected = make_initial_arena(c);
  const Arena initial = expected;
  golden::golden_append(c, expected);
  const CacheFields f = c.fields();
  for (int t = 0; t < 2; ++t) {
    const CacheField& data = f.field[2 * t];
    const CacheField& scale = f.field[2 * t + 1];
    const float global = f32_of(golden::scale_bits(c, t == 0 ? golden::Tensor::key : golden::Tensor::value, 0));
    for (const auto& [row, block, pos] : {std::tuple{0, 1, 1}, std::tuple{2, 0, 0}}) {
      for (int g = 0; g < 2; ++g) {
        std::array<float, 16> x{};
        for (int j = 0; j < 16; ++j)
          x[j] = golden::bits_to_f32(golden::input_bits(c, t == 0 ? golden::Tensor::key : golden::Tensor::value, row, 0, 16 * g + j), c.input_dtype);
        const golden::Nvfp4Block b = golden::quantize_nvfp4(x, global, Nvfp4Rule::flashinfer);
        EXPECT_EQ(load_field_elem(expected.scale_cache(), DType::fp8_e4m3, field_offset(scale.layout, block, pos, 0, g)), b.scale)
            << "tensor " << t << " row " << row << " group " << g;
        for (int j = 0; j < 16; ++j) {
          const uint32_t want = (b.packed[j / 2] >> (4 * (j % 2))) & 0xFu;
          EXPECT_EQ(load_field_elem(expected.cache(), DType::fp4_e2m1, field_offset(data.layout, block, pos, 0, 16 * g + j)), want)
              << "tensor " << t << " row " << row << " dim " << 16 * g + j;
        }
      }
    }
    // The context (block 1 slot 0) and the unused slot (block 0 slot 1) keep their pre-run bytes.
    for (const auto& [block, pos] : {std::pair{1, 0}, std::pair{0, 1}})
      for (int d = 0; d < 32; ++d) {
        const int64_t e = field_offset(data.layout, block, pos, 0, d);
        EXPECT_EQ(load_field_elem(expected.cache(), DType::fp4_e2m1, e), load_field_elem(initial.cache(), DType::fp4_e2m1, e));
      }
  }
  EXPECT_TRUE(compare_arenas(c, initial, expected, expected).pass());
}

TEST(QuantFormat, aWrongScaleIsTheCauseAndItsCodesFollowFromIt) {
  const Case c = nvfp4_case();
  Arena expected = make_initial_arena(c);
  const Arena initial = expected;
  golden::golden_append(c, expected);
  const CacheFields f = c.fields();
  Arena actual = expected;
  // V's scale of dims 16..31 at block 0 slot 0 one code off, and every code of that group flipped.
  const int64_t s = field_offset(f.field[3].layout, 0, 0, 0, 1);
  store_field_elem(actual.scale_cache(), DType::fp8_e4m3, s, load_field_elem(expected.scale_cache(), DType::fp8_e4m3, s) ^ 1u);
  for (int j = 16; j < 32; ++j) {
    const int64_t e = field_offset(f.field[2].layout, 0, 0, 0, j);
    store_field_elem(actual.cache(), DType::fp4_e2m1, e, load_field_elem(expected.cache(), DType::fp4_e2m1, e) ^ 0x8u);
  }
  // And one K code elsewhere: a plain wrong value.
  const int64_t k = field_offset(f.field[0].layout, 1, 1, 0, 3);
  store_field_elem(actual.cache(), DType::fp4_e2m1, k, load_field_elem(expected.cache(), DType::fp4_e2m1, k) ^ 0x1u);
  const Verdict v = compare_arenas(c, initial, expected, actual);
  ASSERT_EQ(v.findings.size(), 2u);
  EXPECT_EQ(v.findings[0].kind, FindingKind::wrong_value);
  EXPECT_EQ(v.findings[0].cells, 1);
  EXPECT_EQ(v.findings[1].kind, FindingKind::scale_mismatch);
  EXPECT_NE(v.findings[1].sentence.find("V scale block 0 slot 0 head 0, dims 16..31"), std::string::npos) << v.findings[1].sentence;
  EXPECT_NE(v.findings[1].sentence.find("16 codes of those groups differ too"), std::string::npos) << v.findings[1].sentence;
  // A code one ulp off passes with fp4_e2m1=ulp:1, not exactly.
  Arena near = expected;
  const int64_t e = field_offset(f.field[0].layout, 0, 0, 0, 5);
  const uint32_t code = load_field_elem(expected.cache(), DType::fp4_e2m1, e);
  store_field_elem(near.cache(), DType::fp4_e2m1, e, (code & 0x7u) == 7 ? code - 1 : code + 1);
  EXPECT_FALSE(compare_arenas(c, initial, expected, near).pass());
  EXPECT_TRUE(compare_arenas(c, initial, expected, near, *parse_tolerance("exact,fp4_e2m1=ulp:1")).pass());
}

// vLLM's layout for SM100 readers, for V: within 4 tokens and 4 scales of each head, (t, s) lands
// at (4 (t / 4) + s / (S / 4), 4 (s mod S/4) + t mod 4) of the linear layout.
TEST(QuantFormat, nvfp4SwizzledScalesFollowTheFourByFourTranspose) {
  Case c = nvfp4_case(ScaleLayout::swizzled_v);
  c.head_dim = 64;  // S = 4 scales a row
  c.cache = CacheGeometry{2, 4, 4 * 32, 32, 32};
  c.cache_v_offset = 2 * 4 * 32;
  c.cache_buffer_elems = 2 * c.cache_v_offset;
  c.scale_cache = CacheGeometry{2, 4, 4 * 4, 4, 4};
  c.scale_v_offset = 2 * 4 * 4;
  c.scale_cache_elems = 2 * c.scale_v_offset;
  c.slot_mapping = {5, -1, 6};  // positions 1 and 2: block 1 offsets 1 and 2
  c.key = InputView{0, 128, 64};
  c.value = InputView{64, 128, 64};
  c.input_buffer_elems = 3 * 128;
  ASSERT_TRUE(validate(c).empty()) << validate(c).front().json_path << ": " << validate(c).front().message;
  const CacheFields f = c.fields();
  const int64_t S = 4, P = 4;
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t s = 0; s < S; ++s) {
      EXPECT_EQ(field_offset(f.field[1].layout, 1, t, 0, s), 1 * 16 + t * P + s);  // K linear
      const int64_t t2 = 4 * (t / 4) + s / (S / 4), s2 = 4 * (s % (S / 4)) + t % 4;
      EXPECT_EQ(field_offset(f.field[3].layout, 1, t, 0, s), c.scale_v_offset + 1 * 16 + t2 * P + s2) << t << " " << s;
    }
}

TEST(QuantFormat, theValidatorNamesWhatAFormatNeeds) {
  const auto path_of = [](const Case& c) { const auto p = validate(c); return p.empty() ? std::string("(valid)") : p.front().json_path; };
  Case dims = nvfp4_case();
  dims.head_dim = 24;  // not a multiple of 16
  EXPECT_EQ(path_of(dims), "/shape/head_dim");
  Case dtype = nvfp4_case();
  dtype.cache_dtype = DType::fp8_e4m3;
  EXPECT_EQ(path_of(dtype), "/shape/cache_dtype");
  Case classic = nvfp4_case();
  classic.quant_format = QuantFormat::none;
  classic.scale_kind = ScaleKind::none;
  EXPECT_EQ(path_of(classic), "/shape/cache_dtype");
  Case overlap = nvfp4_case();
  overlap.cache_v_offset = 16;  // V's rows over K's
  EXPECT_EQ(path_of(overlap), "/cache");
  Case narrow = nvfp4_case();
  narrow.cache.stride_pos = 8;  // rows of 16 bytes 8 apart
  const auto p = validate(narrow);
  ASSERT_FALSE(p.empty());
  EXPECT_NE(p.front().message.find("overlaps"), std::string::npos) << p.front().message;
  Case kind = nvfp4_case();
  kind.scale_kind = ScaleKind::per_head;
  EXPECT_EQ(path_of(kind), "/quant/scale_kind");
}

}  // namespace
}  // namespace kvf

namespace kvf {
namespace {

// dist ties for the formats (values/payload.h): most elements of an MXFP4 group land exactly on a
// rounding tie of e2m1 once divided by the group's scale, and one on its largest value.
TEST(QuantFormat, tiesLandOnTheElementFormatsTiesAfterScaling) {
  Profile p = default_profile();
  p.format_percent = 100;
  p.quant_formats = {{QuantFormat::mxfp4}, {1}};
  p.mx_rules = {{MxScaleRule::ocp_floor}, {1}};
  p.value_dists = {{ValueDist::ties}, {1}};
  p.input_dtypes = {{DType::f32}, {1}};
  int64_t ties = 0, others = 0;
  for (int64_t i = 0; i < 40; ++i) {
    const Case c = materialize(generate_case(p, 17, i));
    ASSERT_EQ(c.quant_format, QuantFormat::mxfp4);
    ASSERT_TRUE(validate(c).empty()) << validate(c).front().json_path << ": " << validate(c).front().message;
    for (int64_t row = 0; row < c.num_slots(); ++row) {
      if (c.slot_mapping[static_cast<size_t>(row)] < 0) continue;
      for (int64_t h = 0; h < c.num_heads; ++h)
        for (int64_t g = 0; g < c.head_dim / 32; ++g) {
          std::array<float, 32> x{};
          for (int j = 0; j < 32; ++j) x[j] = f32_of(golden::input_bits(c, golden::Tensor::key, row, h, 32 * g + j));
          const golden::MxBlock b = golden::quantize_mx(x, golden::MxElement::fp4_e2m1, MxScaleRule::ocp_floor);
          const float scale = golden::e8m0_to_f32(b.scale);
          for (const float v : x) {
            const float q = std::fabs(v / scale);
            const bool tie = q == 0.25f || q == 0.75f || q == 1.25f || q == 1.75f || q == 2.5f || q == 3.5f || q == 5.0f;
            (tie ? ties : others) += 1;
          }
        }
    }
  }
  EXPECT_GT(ties, 3 * others / 2) << ties << " ties, " << others << " others";
  EXPECT_GT(ties, 1000);
}

}  // namespace
}  // namespace kvf

namespace kvf {
namespace {

// The report of a format case: the damaged slot names its field, and the markdown and HTML render.
TEST(QuantFormat, theReportNamesTheFieldAndTheFormat) {
  CaseReport r;
  r.kase = nvfp4_case();
  const Case& c = r.kase;
  Arena expected = make_initial_arena(c);
  const Arena initial = expected;
  golden::golden_append(c, expected);
  Arena actual = expected;
  const CacheFields f = c.fields();
  const int64_t e = field_offset(f.field[2].layout, 1, 1, 0, 9);  // V dim 9 of position 1
  store_field_elem(actual.cache(), DType::fp4_e2m1, e, load_field_elem(expected.cache(), DType::fp4_e2m1, e) ^ 0x3u);
  r.case_file = "found/nvfp4.json";
  r.target = "cuda-emu";
  r.verdict = compare_arenas(c, initial, expected, actual);
  r.map = build_cell_map(c, r.verdict, initial, expected, actual);
  ASSERT_EQ(r.map.damage.size(), 1u);
  EXPECT_EQ(r.map.damage.front().first.field, "V");
  EXPECT_EQ(r.map.damage.front().worst, FindingKind::wrong_value);
  const std::string md = render_report_markdown(r);
  EXPECT_NE(md.find("V block 1 slot 1 head 0 dim 9"), std::string::npos) << md;
  EXPECT_NE(render_report_html(r).find("<!DOCTYPE html>"), std::string::npos);
}

}  // namespace
}  // namespace kvf
