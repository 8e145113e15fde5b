// fill_rows_test.cpp — the arena fill's row-wise values and pattern fills equal the element-wise definition.
//
//   cmake --build build --target kvfuzz_verify_tests && build/tests/kvfuzz_verify_tests --gtest_filter='FillRows*'
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "arena/arena.h"

#include "gen/capabilities.h"
#include "gen/profile.h"
#include "values/payload.h"

namespace kvf {
namespace {

// The default profile and the profiles that draw formats, quantised caches and serving conventions.
constexpr const char* kProfiles[] = {"", "formats.json", "quant.json", "quant-formats.json", "serving.json"};

// context_field_row_bits() computes a row's values with the coordinate hash's prefix hoisted out of
// the dim loop; it must give context_field_bits() bit for bit, on every field of every format, or
// the fill (and every saved case's pre-run image) would change.
TEST(FillRows, aContextRowEqualsItsElementsOnEveryProfilesFields) {
  const std::filesystem::path configs = std::filesystem::path(KVFUZZ_SOURCE_DIR) / "configs";
  for (const char* profile : kProfiles) {
    const Profile pr = *profile == '\0' ? default_profile() : load_profile(configs / profile);
    const CaseSource source(pr, std::nullopt);
    for (int64_t i = 0; i < 40; ++i) {
      const Case c = source.draw(11, i).kase;
      for (const CacheField& f : c.fields()) {
        std::vector<uint32_t> row(static_cast<size_t>(f.head_dim));
        for (int64_t request = 0; request < 3; ++request)
          for (int64_t pos = 0; pos < 5; ++pos)
            for (int64_t head = 0; head < f.num_heads; ++head) {
              golden::context_field_row_bits(c, f, request, pos, head, row.data());
              for (int64_t d = 0; d < f.head_dim; ++d)
                ASSERT_EQ(row[d], golden::context_field_bits(c, f, request, pos, head, d))
                    << (*profile ? profile : "default") << " case " << i << " field " << f.name << " request " << request << " pos " << pos
                    << " head " << head << " dim " << d;
            }
      }
    }
  }
}

// input_row_bits() decides a row's class once and hoists the coordinate hash's prefix out of the
// dim loop; it must give input_bits() bit for bit for every dim range a view asks for.
TEST(FillRows, anInputRowEqualsItsElementsOnEveryProfile) {
  const std::filesystem::path configs = std::filesystem::path(KVFUZZ_SOURCE_DIR) / "configs";
  for (const char* profile : kProfiles) {
    const Profile pr = *profile == '\0' ? default_profile() : load_profile(configs / profile);
    const CaseSource source(pr, std::nullopt);
    for (int64_t i = 0; i < 40; ++i) {
      const Case c = source.draw(13, i).kase;
      for (const golden::Tensor t : {golden::Tensor::key, golden::Tensor::value}) {
        const int64_t dims = t == golden::Tensor::key ? c.head_dim : c.value_dim();
        std::vector<uint32_t> row(static_cast<size_t>(dims));
        for (int64_t r = 0; r < c.num_input_rows; ++r)
          for (int64_t head = 0; head < c.num_heads; ++head)
            for (const int64_t first : {int64_t{0}, dims / 3}) {  // whole rows, and a second part's dims
              golden::input_row_bits(c, t, r, head, first, dims - first, row.data());
              for (int64_t d = first; d < dims; ++d)
                ASSERT_EQ(row[static_cast<size_t>(d - first)], golden::input_bits(c, t, r, head, d))
                    << (*profile ? profile : "default") << " case " << i << " row " << r << " head " << head << " dim " << d;
            }
      }
    }
  }
}

// The pre-run image element by element, as the arena's definition states it (arena.h): the input
// gap canary, then every view element's input_bits(); the gap canaries of the cache and scale cache
// buffers, then every (tensor, block, pos, head) scale-cache cell and every (field, block, pos,
// head, dim) cell by its role, each through field_offset() alone. Slot mapping, static scales and
// the counter are taken from `fast` (the fill computes them element by element already); every
// other byte is guard.
Arena elementwise_initial_arena(const Case& c, const Arena& fast) {
  using golden::Canary;
  using golden::Tensor;
  const ArenaLayout& l = fast.layout();
  Arena a(l);
  std::memset(a.data(), 0xFF, static_cast<size_t>(a.size()));
  std::memcpy(a.data() + l.slots_begin, fast.data() + l.slots_begin, static_cast<size_t>(l.scales_begin - l.slots_begin));
  std::memcpy(a.data() + l.scales_begin, fast.data() + l.scales_begin, static_cast<size_t>(l.scales_bytes));
  std::memcpy(a.data() + l.counter_begin, fast.data() + l.counter_begin, sizeof(unsigned long long));

  const int in_size = dtype_size(c.input_dtype);
  for (int64_t e = 0; e < c.input_buffer_elems; ++e) store_elem(a.input(), e, in_size, golden::canary_bits(c.input_dtype, Canary::input_gap));
  for (const CacheField& field : c.fields()) {
    const Tensor t = field.index == 1 ? Tensor::value : Tensor::key;
    int64_t first = 0;
    for (int part = 0; part < field.num_parts; ++part) {
      const InputView& v = field.parts[part].view;
      for (int64_t row = 0; row < c.num_input_rows; ++row)
        for (int64_t h = 0; h < field.num_heads; ++h)
          for (int64_t d = 0; d < field.parts[part].width; ++d)
            store_elem(a.input(), v.offset + input_elem_offset(v.stride_token, v.stride_head, row, h, d), in_size,
                       golden::input_bits(c, t, row, h, first + d));
      first += field.parts[part].width;
    }
  }

  if (c.has_format()) {
    for (int64_t e = 0; e < l.scale_cache_bytes; ++e) store_elem(a.scale_cache(), e, 1, golden::canary_bits(DType::uint8, Canary::cache_gap));
  } else {
    for (int64_t e = 0; e < c.scale_cache_elems; ++e) store_elem(a.scale_cache(), e, 4, golden::canary_bits(DType::f32, Canary::cache_gap));
  }
  if (c.scale_kind == ScaleKind::per_token_head) {
    const CacheLocator scale_loc = CacheLocator::scale_cache(c);
    for (const CacheField& field : c.fields()) {
      const bool is_value = field.index == 1;
      const int64_t base = is_value ? c.scale_v_offset : c.scale_k_offset;
      for (int64_t b = 0; b < c.scale_cache.num_blocks; ++b)
        for (int64_t p = 0; p < c.scale_cache.block_size; ++p)
          for (int64_t h = 0; h < c.num_heads; ++h) {
            const CacheCell cell = scale_loc.cell(is_value, b, p, h, 0);
            const uint32_t bits =
                cell.role == CacheCell::Role::context ? golden::context_scale_bits(c, is_value ? Tensor::value : Tensor::key, cell.request, cell.token, h)
                : cell.role == CacheCell::Role::free_block || cell.role == CacheCell::Role::sink
                    ? golden::canary_bits(DType::f32, Canary::free_block)
                    : golden::canary_bits(DType::f32, Canary::block_tail);
            store_elem(a.scale_cache(), base + cache_elem_offset(c.scale_cache, b, p, h, 0), 4, bits);
          }
    }
  }

  const DType unit = c.has_format() ? DType::uint8 : c.cache_dtype;
  for (int64_t e = 0; e < c.cache_buffer_elems; ++e) store_elem(a.cache(), e, dtype_size(unit), golden::canary_bits(unit, Canary::cache_gap));
  const CacheLocator loc(c);
  for (int64_t b = 0; b < c.cache.num_blocks; ++b)
    for (const CacheField& field : c.fields())
      for (int64_t p = 0; p < c.cache.block_size; ++p)
        for (int64_t h = 0; h < field.num_heads; ++h)
          for (int64_t d = 0; d < field.head_dim; ++d) {
            const CacheCell cell = loc.cell(field.index == 1, b, p, h, d);
            const uint32_t bits = cell.role == CacheCell::Role::context ? golden::context_field_bits(c, field, cell.request, cell.token, h, d)
                                  : cell.role == CacheCell::Role::free_block || cell.role == CacheCell::Role::sink
                                      ? golden::canary_bits(field.dtype, Canary::free_block)
                                      : golden::canary_bits(field.dtype, Canary::block_tail);
            store_field_elem(field_buffer(a, field), field.dtype, field_offset(field.layout, b, p, h, d), bits);
          }
  return a;
}

// The fill writes rows (input_row_bits, context_field_row_bits), pattern-fills the canaries and
// steps along a row's dim stride; the image must be the element-wise definition's byte for byte,
// or every saved case's pre-run image, and the diff's reading of it, would change.
TEST(FillRows, theInitialArenaIsTheElementwiseDefinitionOnEveryProfile) {
  const std::filesystem::path configs = std::filesystem::path(KVFUZZ_SOURCE_DIR) / "configs";
  for (const char* profile : kProfiles) {
    const Profile pr = *profile == '\0' ? default_profile() : load_profile(configs / profile);
    const CaseSource source(pr, std::nullopt);
    for (int64_t i = 0; i < 60; ++i) {
      const Case c = source.draw(17, i).kase;
      const Arena fast = make_initial_arena(c);
      const Arena slow = elementwise_initial_arena(c, fast);
      ASSERT_EQ(fast.size(), slow.size());
      for (int64_t byte = 0; byte < fast.size(); ++byte)
        ASSERT_EQ(fast.data()[byte], slow.data()[byte]) << (*profile ? profile : "default") << " case " << i << " byte " << byte
                                                        << " (cache section at " << fast.layout().cache_begin << ")";
    }
  }
}

// The pre-run image is part of every saved case's meaning: a faster fill must give the same bytes.
// FNV-1a 64 over the initial arenas of 40 cases of each profile, as the fill makes them since 16-bit
// copies got unique payloads (values/payload.cpp, issue 37; the remainders by multiplication,
// values/remainder.h, changed nothing before that); a change here changes images. quant.json and
// quant-formats.json got value_dists edges (issue 38), which changed their draws: their digests are
// those of the new cases, the other three the ones from before.
TEST(FillRows, theInitialArenasAreTheBytesTheyWereBeforeTheRemaindersByMultiplication) {
  const std::filesystem::path configs = std::filesystem::path(KVFUZZ_SOURCE_DIR) / "configs";
  const uint64_t expected[] = {0xa24fb156b3a05586ull, 0x28e51b7efb5785dcull, 0x54674102170661b2ull, 0xc9d7cef95583c1d3ull,
                               0x4a048a2de20e4fafull};
  for (size_t p = 0; p < std::size(kProfiles); ++p) {
    const char* profile = kProfiles[p];
    const Profile pr = *profile == '\0' ? default_profile() : load_profile(configs / profile);
    const CaseSource source(pr, std::nullopt);
    uint64_t h = 0xcbf29ce484222325ull;
    for (int64_t i = 0; i < 40; ++i) {
      const Arena a = make_initial_arena(source.draw(17, i).kase);
      for (int64_t b = 0; b < a.size(); ++b) h = (h ^ static_cast<uint8_t>(a.data()[b])) * 0x100000001b3ull;
    }
    EXPECT_EQ(h, expected[p]) << (*profile ? profile : "default") << ": 0x" << std::hex << h;
  }
}

}  // namespace
}  // namespace kvf
