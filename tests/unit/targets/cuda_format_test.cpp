// cuda_format_test.cpp — the CUDA kernel's quantised formats (kernels/cuda/kv_append.cuh,
// append_format_rows) on the cuda-emu target: hand-built cases of every format the kernel writes,
// under each of its conventions, in a paged NHD and a paged HND cache (and with CSR addressing and
// context-parallel shards), pass check_case(), i.e. every byte of the arena equals the golden
// model's (golden.cpp append_format_row); a deliberately broken expectation fails, so the check
// can fail. The kernel's integer conversions (e2m1, e4m3 values, e8m0, the powers of two) are
// compared with the golden model's codecs (minifloat.h) on every tie and a sweep of fp32 patterns.
//
//   cmake --build build --target kvfuzz_core_tests && build/tests/kvfuzz_core_tests --gtest_filter='CudaFormat*'
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "arena/arena.h"
#include "report/cell_map.h"
#include "report/verdict.h"
#include "campaign/check.h"
#include "case/validate.h"
#include "gen/capabilities.h"
#include "gen/materialize.h"
#include "values/convert.h"
#include "golden/golden.h"
#include "values/minifloat.h"
#include "kv_append.cuh"
#include "kv_append.h"
#include "targets/target.h"

namespace kvf {
namespace {

// ---------------------------------------------------------------------------------------------
// Cases

// One hand-built case: the batch of a materialised classic genotype (requests with context, padding
// among and after the rows, an invalid slot, graph padding rows, a spare block), its cache and
// scale cache re-laid out as the format's fields need (quant_fields.cpp): rows of the format's bytes
// per (pos, head), NHD [nb, bs, H, row] or HND [nb, H, bs, row], K's blocks then V's.
struct Spec {
  QuantFormat format = QuantFormat::nvfp4;
  QuantRules rules;
  Layout layout = Layout::paged_nhd;  // paged_nhd or paged_hnd
  DType input = DType::bf16;
  int32_t heads = 2;
  int32_t head_dim = 64;
  int32_t block_size = 4;
  int64_t row_pad = 4;  // fp8_/int8_inline: bytes after each row's codes (4: the scale; 16: padded to 16)
  ValueDist dist = ValueDist::special;
  bool fused = false;       // key and value views into one QKV row
  bool misaligned = false;  // odd input bases
  Addressing addressing = Addressing::slot_mapping;
  CpInput cp = CpInput::none;
  uint64_t seed = 1;
};

std::string name_of(const Spec& s) {
  std::string n = std::string(to_string(s.format)) + " " + std::string(to_string(s.layout)) + " " + std::string(to_string(s.input)) +
                  " H" + std::to_string(s.heads) + " D" + std::to_string(s.head_dim) + " bs" + std::to_string(s.block_size);
  for (RuleBit b : {RuleBit::nvfp4_flashinfer, RuleBit::nvfp4_flashinfer_precise, RuleBit::scale_layout_linear,
                    RuleBit::scale_layout_swizzled_v, RuleBit::scale_layout_swizzled, RuleBit::mx_ocp_floor, RuleBit::mx_nv_ceil,
                    RuleBit::ds_mla_flt_min, RuleBit::ds_mla_pow2, RuleBit::indexer_fp32, RuleBit::indexer_ue8m0_log2f,
                    RuleBit::indexer_ue8m0_exact})
    if (rule_bits(s.format, s.rules) & (1u << static_cast<unsigned>(b))) n += " " + std::string(to_string(b));
  if (s.row_pad != 4) n += " pad" + std::to_string(s.row_pad);
  if (s.addressing == Addressing::csr) n += " csr";
  if (s.cp != CpInput::none) n += " cp " + std::string(to_string(s.cp));
  return n;
}

Case format_case(const Spec& s) {
  const QuantFormat fmt = s.format;
  Genotype g;
  g.family = fmt == QuantFormat::ds_mla ? Family::mla : fmt == QuantFormat::indexer_k ? Family::k_only : Family::kv;
  g.layout = s.layout;
  g.block_size = s.block_size;
  g.num_heads = g.family == Family::kv ? s.heads : 1;
  g.head_dim = fmt == QuantFormat::ds_mla ? 576 : s.head_dim;
  g.rope_dim = fmt == QuantFormat::ds_mla ? 64 : 0;
  g.input_dtype = s.input;
  g.cache_dtype = s.input;
  g.fused_qkv = s.fused;
  g.misaligned_bases = s.misaligned;
  g.requests = {{4, 7}, {0, 1}, {9, 2}};
  g.addressing = s.addressing;
  if (s.addressing == Addressing::csr) {
    g.slot_dtype = IndexType::i32;
  } else {
    g.tail_padding = 2;
    g.interleaved_padding = 1;
    g.invalid_slots = s.cp == CpInput::none ? 1 : 0;  // a sharded case has no invalid rows
  }
  if (s.cp != CpInput::none) {
    g.cp_input = s.cp;
    g.cp_world_size = 2;
    g.cp_interleave = 2;
  }
  g.extra_input_rows = 2;
  g.spare_blocks = 1;
  g.dist = s.dist;
  g.layout_seed = s.seed;
  Case c = materialize(g);
  c.genotype.reset();

  c.quant_format = fmt;
  c.quant_rules = s.rules;
  c.cache_dtype = format_code_dtype(fmt);
  const int64_t H = c.num_heads, D = c.head_dim, bs = c.cache.block_size, nb = c.cache.num_blocks;
  const int64_t latent = D - c.rope_dim, group = format_group(fmt, latent);
  int64_t row = D;  // bytes of one (pos, head) entry
  switch (fmt) {
    case QuantFormat::nvfp4:
    case QuantFormat::mxfp4: row = D / 2; break;
    case QuantFormat::fp8_inline:
    case QuantFormat::int8_inline: row = D + s.row_pad; break;
    case QuantFormat::ds_mla: row = latent + 4 * (latent / group) + 2 * c.rope_dim; break;
    default: break;
  }
  CacheGeometry geo{nb, bs, 0, 0, 0};
  if (fmt == QuantFormat::indexer_k) {  // a block's rows of codes, then its scales, then 4 spare bytes
    geo.stride_pos = D;
    geo.stride_head = D;
    geo.stride_block = bs * D + bs * (D / group) * 4 + 4;
  } else if (s.layout == Layout::paged_hnd) {
    geo.stride_pos = row;
    geo.stride_head = bs * row;
    geo.stride_block = H * bs * row;
  } else {
    geo.stride_head = row;
    geo.stride_pos = H * row;
    geo.stride_block = bs * H * row;
  }
  c.cache = geo;
  c.value_cache.reset();
  c.cache_k_offset = 8;  // a multiple of 4 (fp32 scales among the codes), not of 16
  c.cache_v_offset = c.has_value() ? c.cache_k_offset + nb * geo.stride_block + 4 : 0;
  c.cache_buffer_elems = (c.has_value() ? c.cache_v_offset : c.cache_k_offset) + nb * geo.stride_block + 12;

  c.scale_kind = fmt == QuantFormat::nvfp4 ? ScaleKind::per_tensor : ScaleKind::none;
  c.scale_dist = fmt == QuantFormat::nvfp4 ? ScaleDist::random : ScaleDist::unit;
  c.scale_cache = CacheGeometry{};
  c.scale_k_offset = c.scale_v_offset = c.scale_cache_elems = 0;
  if (c.uses_scale_cache()) {  // nvfp4, MX: [nb, bs, H, S] or [nb, H, bs, S] scale elements (bytes)
    const int64_t S = D / group;
    c.scale_cache = s.layout == Layout::paged_hnd ? CacheGeometry{nb, bs, H * bs * S, S, bs * S} : CacheGeometry{nb, bs, bs * H * S, H * S, S};
    c.scale_k_offset = 3;
    c.scale_v_offset = c.scale_k_offset + nb * c.scale_cache.stride_block + 1;
    c.scale_cache_elems = c.scale_v_offset + nb * c.scale_cache.stride_block + 5;
  }
  return c;
}

// Every convention of a format (QuantRules' fields it reads), each on its own.
std::vector<QuantRules> conventions(QuantFormat f) {
  std::vector<QuantRules> out;
  QuantRules r;
  switch (f) {
    case QuantFormat::nvfp4:
      for (Nvfp4Rule n : {Nvfp4Rule::flashinfer, Nvfp4Rule::flashinfer_precise})
        for (ScaleLayout l : {ScaleLayout::linear, ScaleLayout::swizzled_v, ScaleLayout::swizzled}) {
          r.nvfp4 = n;
          r.scale_layout = l;
          out.push_back(r);
        }
      break;
    case QuantFormat::mxfp8_e4m3:
    case QuantFormat::mxfp8_e5m2:
    case QuantFormat::mxfp4:
      for (MxScaleRule m : {MxScaleRule::ocp_floor, MxScaleRule::nv_ceil}) {
        r.mx = m;
        out.push_back(r);
      }
      break;
    case QuantFormat::ds_mla:
      for (DsMlaScale d : {DsMlaScale::flt_min, DsMlaScale::pow2}) {
        r.ds_mla = d;
        out.push_back(r);
      }
      break;
    case QuantFormat::indexer_k:
      for (IndexerScale i : {IndexerScale::fp32, IndexerScale::ue8m0_log2f, IndexerScale::ue8m0_exact}) {
        r.indexer = i;
        out.push_back(r);
      }
      break;
    default: out.push_back(r); break;
  }
  return out;
}

constexpr QuantFormat kCudaFormats[] = {QuantFormat::nvfp4,     QuantFormat::mxfp8_e4m3, QuantFormat::mxfp8_e5m2,
                                        QuantFormat::mxfp4,     QuantFormat::ds_mla,     QuantFormat::indexer_k,
                                        QuantFormat::fp8_inline, QuantFormat::int8_inline};

// The specs of the suite: every format x its conventions x paged NHD and HND, inputs bf16, f16, f32
// in turn (ds_mla: 16-bit only), values special (NaN, Inf, zeros, subnormals) or finite; D 64
// (indexer_k 128; ds_mla 576), inline rows also padded to 16 bytes and D not a multiple of 16.
std::vector<Spec> suite() {
  std::vector<Spec> out;
  uint64_t seed = 1;
  for (QuantFormat f : kCudaFormats)
    for (const QuantRules& r : conventions(f))
      for (Layout l : {Layout::paged_nhd, Layout::paged_hnd}) {
        Spec s;
        s.format = f;
        s.rules = r;
        s.layout = l;
        s.seed = seed++;
        const DType inputs[] = {DType::bf16, DType::f16, DType::f32};
        s.input = inputs[s.seed % (f == QuantFormat::ds_mla ? 2 : 3)];
        s.dist = s.seed % 2 == 0 ? ValueDist::finite : ValueDist::special;
        s.head_dim = f == QuantFormat::indexer_k ? 128 : 64;
        s.fused = s.seed % 3 == 0;
        s.misaligned = s.seed % 4 == 1;
        out.push_back(s);
      }
  for (QuantFormat f : {QuantFormat::fp8_inline, QuantFormat::int8_inline}) {  // padded rows, D 36, 8 heads
    Spec s;
    s.format = f;
    s.row_pad = 16;
    s.head_dim = 36;
    s.heads = 8;
    s.seed = seed++;
    out.push_back(s);
  }
  Spec mx;  // MXFP4 with D 96 (three groups), 3 heads, odd block size
  mx.format = QuantFormat::mxfp4;
  mx.head_dim = 96;
  mx.heads = 3;
  mx.block_size = 5;
  mx.seed = seed++;
  out.push_back(mx);
  Spec indexer;  // two 128-dim tiles a row
  indexer.format = QuantFormat::indexer_k;
  indexer.rules.indexer = IndexerScale::ue8m0_log2f;
  indexer.head_dim = 256;
  indexer.input = DType::f32;
  indexer.seed = seed++;
  out.push_back(indexer);
  for (CpInput cp : {CpInput::slot_mapping, CpInput::positions}) {  // shards: one call per rank
    Spec s;
    s.format = QuantFormat::nvfp4;
    s.rules.scale_layout = ScaleLayout::swizzled;
    s.cp = cp;
    s.seed = seed++;
    out.push_back(s);
  }
  Spec csr;  // FlashInfer's CSR addressing
  csr.format = QuantFormat::ds_mla;
  csr.addressing = Addressing::csr;
  csr.seed = seed++;
  out.push_back(csr);
  return out;
}

TEST(CudaFormat, everySuiteCaseIsValid) {
  for (const Spec& s : suite()) {
    const Case c = format_case(s);
    const auto problems = validate(c);
    EXPECT_TRUE(problems.empty()) << name_of(s) << ": " << problems.front().json_path << ": " << problems.front().message;
  }
}

TEST(CudaFormat, coversEveryFormatAndConventionTheKernelDeclares) {
  const Capabilities caps = cuda_kernel_capabilities();
  uint32_t formats = 0, rules = 0;
  for (const Spec& s : suite()) {
    formats |= 1u << static_cast<unsigned>(s.format);
    rules |= rule_bits(s.format, s.rules);
  }
  for (QuantFormat f : kCudaFormats) EXPECT_TRUE(caps.quant_formats & (1u << static_cast<unsigned>(f))) << to_string(f);
  EXPECT_EQ(formats | 1u, caps.quant_formats & ((1u << 9) - 1)) << "a format the kernel declares has no case";
  // Every convention of the formats above (the asymmetric ones' are the Triton kernel's).
  for (int b = 0; b <= static_cast<int>(RuleBit::indexer_ue8m0_exact); ++b)
    EXPECT_TRUE(rules & (1u << b)) << to_string(static_cast<RuleBit>(b));
}

TEST(CudaFormat, cudaEmuWritesEveryFormatAsTheGoldenModel) {
  auto target = make_target("cuda-emu");
  for (const Spec& s : suite()) {
    const Case c = format_case(s);
    ASSERT_TRUE(validate(c).empty()) << name_of(s);
    const CaseOutcome o = check_case(*target, c, CheckOptions{});
    EXPECT_TRUE(o.pass()) << name_of(s) << ": " << (o.pass() ? "" : o.verdict.findings.front().sentence);
  }
}

// The example CUDA plugin (examples/plugins/cuda/plugin.cpp over the emulator) declares the same
// formats and conventions through the plugin ABI and writes the same bytes from kvfz_field layouts.
TEST(CudaFormat, theExamplePluginWritesEveryFormatThroughTheAbi) {
  auto target = make_target(std::string("plugin:") + KVFUZZ_CUDA_PLUGIN);
  const std::optional<Capabilities> caps = target->capabilities();
  ASSERT_TRUE(caps.has_value());
  EXPECT_EQ(caps->quant_formats, cuda_kernel_capabilities().quant_formats & ((1u << 11) - 1));
  EXPECT_EQ(caps->quant_rules, (1u << (static_cast<unsigned>(RuleBit::indexer_ue8m0_exact) + 1)) - 1);
  for (const Spec& s : suite()) {
    const Case c = format_case(s);
    EXPECT_EQ(outside_reason(c, *caps), "") << name_of(s);
    const CaseOutcome o = check_case(*target, c, CheckOptions{});
    EXPECT_TRUE(o.pass()) << name_of(s) << ": " << (o.pass() ? "" : o.verdict.findings.front().sentence);
  }
}

// The same run without the isolation: the target's bytes are the golden model's, and an
// expectation with one code and (for a group) its scale changed makes the comparison fail.
// The default spec of format f with finite values (D 64; indexer_k 128).
Spec finite_spec(QuantFormat f) {
  Spec s;
  s.format = f;
  s.head_dim = f == QuantFormat::indexer_k ? 128 : 64;
  s.dist = ValueDist::finite;
  return s;
}

// The slot of the first row slot_mapping writes, -1 if none.
int64_t first_written_slot(const Case& c) {
  for (int64_t x : c.slot_mapping)
    if (x >= 0 && x < c.capacity()) return x;
  return -1;
}

TEST(CudaFormat, aBrokenExpectationFails) {
  auto target = make_target("cuda-emu");
  for (QuantFormat f : kCudaFormats) {
    const Spec s = finite_spec(f);
    const Case c = format_case(s);
    ASSERT_TRUE(validate(c).empty()) << name_of(s);
    const Arena initial = make_initial_arena(c);
    Arena expected = initial;
    golden::golden_append(c, expected);
    Arena actual = initial;
    ASSERT_EQ(target->run(c, actual.data(), actual.layout()).status, RunStatus::ok) << name_of(s);
    EXPECT_TRUE(compare_arenas(c, initial, expected, actual).pass()) << name_of(s);
    EXPECT_NE(std::memcmp(initial.cache(), actual.cache(), static_cast<size_t>(actual.layout().cache_bytes)), 0) << name_of(s);

    // The first written row's first code and its group's scale, each flipped in the expectation.
    const CacheFields fields = c.fields();
    const CacheField& data = fields.field[0];
    const CacheField& scale = fields.field[data.scale];
    const int64_t slot = first_written_slot(c);
    ASSERT_GE(slot, 0);
    const int64_t block = slot / c.cache.block_size, pos = slot % c.cache.block_size;
    Arena broken_code = expected;
    const int64_t e = field_offset(data.layout, block, pos, 0, 0);
    store_field_elem(field_buffer(broken_code, data), data.dtype, e, load_field_elem(field_buffer(expected, data), data.dtype, e) ^ 1u);
    EXPECT_FALSE(compare_arenas(c, initial, broken_code, actual).pass()) << name_of(s) << ": a wrong code passed";
    Arena broken_scale = expected;
    const int64_t e2 = field_offset(scale.layout, block, pos, 0, 0);
    store_field_elem(field_buffer(broken_scale, scale), scale.dtype, e2,
                     load_field_elem(field_buffer(expected, scale), scale.dtype, e2) ^ 1u);
    const Verdict v = compare_arenas(c, initial, broken_scale, actual);
    ASSERT_FALSE(v.pass()) << name_of(s) << ": a wrong scale passed";
    EXPECT_EQ(v.findings.front().kind, FindingKind::scale_mismatch) << name_of(s);
  }
}

// The verdict and the report's cell map are folds over the same classified cells: for every format
// (scales in the scale cache or among the codes in the cache), a new token's wrong scale and a code
// of its group are a scale_mismatch on the map as in the verdict, a context cell's scale is the same
// stray or cross-request write in both, and both count each differing element once.
TEST(CudaFormat, theMapAndTheVerdictFileEveryCellAlike) {
  for (QuantFormat f : kCudaFormats) {
    const Spec s = finite_spec(f);
    const Case c = format_case(s);
    ASSERT_TRUE(validate(c).empty()) << name_of(s);
    const Arena initial = make_initial_arena(c);
    Arena expected = initial;
    golden::golden_append(c, expected);
    const CacheFields fields = c.fields();
    const CacheField& data = fields.field[0];
    const CacheField& scale = fields.field[data.scale];
    const CacheLocator loc(c);
    const int64_t slot = first_written_slot(c);
    int64_t context = -1;  // the first context slot
    for (int64_t b = 0; b < c.cache.num_blocks && context < 0; ++b)
      for (int64_t p = 0; p < c.cache.block_size && context < 0; ++p)
        if (loc.cell(false, b, p, 0, 0).role == CacheCell::Role::context) context = b * c.cache.block_size + p;
    ASSERT_GE(slot, 0);
    ASSERT_GE(context, 0) << name_of(s);
    const int64_t bs = c.cache.block_size;
    Arena actual = expected;
    const auto flip = [&](const CacheField& field, int64_t at, int64_t dim) {
      const int64_t e = field_offset(field.layout, at / bs, at % bs, 0, dim);
      store_field_elem(field_buffer(actual, field), field.dtype, e, load_field_elem(field_buffer(expected, field), field.dtype, e) ^ 1u);
    };
    flip(scale, slot, 0);    // the new token's first group's scale
    flip(data, slot, 1);     // a code of that group: it follows from the scale
    flip(scale, context, 0); // an earlier context token's scale

    const Verdict v = compare_arenas(c, initial, expected, actual);
    const CellMap m = build_cell_map(c, v, initial, expected, actual);
    EXPECT_EQ(v.differing_cells, 3) << name_of(s);
    EXPECT_EQ(m.differing_cache_cells, 3) << name_of(s);
    std::vector<FindingKind> kinds;
    for (const Finding& x : v.findings) {
      EXPECT_TRUE(x.in_cache) << name_of(s) << ": " << x.sentence;
      kinds.push_back(x.kind);
    }
    ASSERT_EQ(kinds.size(), 2u) << name_of(s);
    EXPECT_EQ(kinds[1], FindingKind::scale_mismatch) << name_of(s);
    ASSERT_EQ(m.damage.size(), 2u) << name_of(s);
    for (const SlotDamage& d : m.damage) {
      const int64_t at = d.block * bs + d.pos;
      EXPECT_EQ(d.worst, at == slot ? FindingKind::scale_mismatch : kinds[0]) << name_of(s) << " slot " << at;
      EXPECT_EQ(d.cells, at == slot ? 2 : 1) << name_of(s) << " slot " << at;
    }
    int64_t drawn = 0;  // the matrix: every differing element once, no finding row beside them
    for (const MatrixRow& r : m.matrix)
      for (int64_t n : r.cells) drawn += n;
    EXPECT_EQ(drawn, 3) << name_of(s);
  }
}

TEST(CudaFormat, theAsymmetricFormatsAreRefusedNotGuessed) {
  for (QuantFormat f : {QuantFormat::asym_int8, QuantFormat::asym_int4}) {
    KvAppendParams p;
    p.quant_format = f;
    p.format_group = 8;
    p.head_dim = 8;
    p.num_heads = 1;
    p.num_slots = 1;
    EXPECT_EQ(kv_append_emu(p), LaunchStatus::unsupported_dtype) << to_string(f);
  }
}

// ---------------------------------------------------------------------------------------------
// The kernel's integer conversions against the golden model's codecs

std::vector<uint32_t> probe_patterns() {
  std::vector<uint32_t> out;
  for (uint64_t x = 0; x <= 0xFFFFFFFFull; x += 65521) out.push_back(static_cast<uint32_t>(x));  // a sweep
  for (uint32_t e = 0; e < 256; ++e)                                                          // around every power of two
    for (uint32_t m : {0u, 1u, 2u, 3u, 21u, 22u, 23u, 44u, 45u, 46u, 0x400000u, 0x7FFFFEu, 0x7FFFFFu})
      for (uint32_t sign : {0u, 0x80000000u}) out.push_back(sign | e << 23 | m);
  for (float t : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 8.0f})  // e2m1 ties, values
    for (int d = -2; d <= 2; ++d)
      for (uint32_t sign : {0u, 0x80000000u}) {
        uint32_t b;
        std::memcpy(&b, &t, 4);
        out.push_back(sign | (b + static_cast<uint32_t>(d)));
      }
  return out;
}

float f32(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

TEST(CudaFormat, e2m1CodesAreTheGoldenModels) {
  for (uint32_t b : probe_patterns()) {
    EXPECT_EQ(e2m1_code(f32(b), 0x7), golden::f32_to_fp4_e2m1(f32(b), golden::E2m1Nan::max_positive)) << std::hex << b;
    const bool negative_nan = b > 0xFF800000u;  // never an NVFP4 product (the GPU's NaN is +NaN; kernel: NaN -> 0x0)
    if (!negative_nan) {
      EXPECT_EQ(e2m1_code(f32(b), 0x0), golden::f32_to_fp4_e2m1(f32(b), golden::E2m1Nan::signed_zero)) << std::hex << b;
    }
  }
}

TEST(CudaFormat, e4m3ValuesAndE8m0CodesAreTheGoldenModels) {
  for (uint32_t c = 0; c < 256; ++c) {
    const float want = golden::fp8_e4m3_to_f32(static_cast<uint8_t>(c)), got = e4m3_value(static_cast<uint8_t>(c));
    if (want != want) {
      EXPECT_NE(got, got) << c;
    } else {
      EXPECT_EQ(float_bits(got), float_bits(want)) << c;
    }
    if (c != 0xFF) {  // 0xFF (NaN) is never a scale the kernel decodes
      EXPECT_EQ(float_bits(e8m0_value(static_cast<uint8_t>(c))), float_bits(golden::e8m0_to_f32(static_cast<uint8_t>(c)))) << c;
    }
  }
  for (uint32_t b : probe_patterns()) {
    EXPECT_EQ(e8m0_code(f32(b), false), golden::f32_to_e8m0(f32(b), golden::E8m0Rounding::floor)) << std::hex << b;
    EXPECT_EQ(e8m0_code(f32(b), true), golden::f32_to_e8m0(f32(b), golden::E8m0Rounding::ceil)) << std::hex << b;
  }
}

TEST(CudaFormat, powersOfTwoAreTheGoldenModels) {
  for (uint32_t b : probe_patterns()) {
    if (b == 0 || b >= 0x7F800001u) continue;  // the kernel rounds positive scales and +Inf only
    EXPECT_EQ(float_bits(pow2_ceil_bits(f32(b))), float_bits(golden::pow2_ceil(f32(b)))) << std::hex << b;
    EXPECT_EQ(float_bits(pow2_ceil_log2f_bits(f32(b))), float_bits(golden::pow2_ceil_log2f(f32(b)))) << std::hex << b;
  }
  // Every fp32 just above a power of two, where log2f rounds down (and its limit's neighbours).
  for (uint32_t e = 0; e < 255; ++e)
    for (uint32_t m = 0; m <= 64; ++m) {
      const uint32_t b = e << 23 | m;
      if (b == 0) continue;
      EXPECT_EQ(float_bits(pow2_ceil_log2f_bits(f32(b))), float_bits(golden::pow2_ceil_log2f(f32(b)))) << std::hex << b;
    }
}

}  // namespace
}  // namespace kvf
