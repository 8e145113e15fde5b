// golden_test.cpp — the golden model on small hand-worked batches.
//
//   ctest --test-dir build -R 'Golden\.' --output-on-failure
//
// Every expectation below is worked out by hand from the contract (docs/contract.md), not computed by
// the code under test: which cache elements change, and the exact bits they receive. The arena is
// built directly from a hand-written ArenaLayout (only Arena's constructor and accessors are used)
// and pre-filled with a 0xA5 pattern, so any write outside the expected cells is visible.
//
// The shared batch: one request with block table {2, 0}, context 1, new 2, block_size 2, so its new
// tokens sit at sequence positions 1 and 2 = slots 2*2+1 = 5 and 0*2+0 = 0. slot_mapping is
//   row 0 -> 5 (block 2, pos 1)   row 1 -> -1 (padding)   row 2 -> 0 (block 0, pos 0)
//   row 3 -> 6 (>= capacity 6: invalid, counted)          row 4: CUDA-graph row (T = 4 < T_in = 5)
// H = 2, D = 3, num_blocks = 3. K lives at cache element 0, V at element 40 (a 4-element gap after
// K's 36 elements and after V).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <vector>

#include "values/convert.h"
#include "golden/golden.h"
#include "values/payload.h"
#include "kv_append.h"

namespace kvf::golden {
namespace {

int elem_size(DType t) { return t == DType::f32 ? 4 : 2; }

uint32_t f32(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

constexpr int64_t kH = 2, kD = 3, kRows = 5, kVBase = 40, kCacheElems = 80;

Case make_case(Layout layout, DType in, DType cache, IndexType slot_dtype) {
  Case c;
  c.num_heads = kH;
  c.head_dim = kD;
  c.input_dtype = in;
  c.cache_dtype = cache;
  c.slot_dtype = slot_dtype;
  c.layout = layout;
  c.cache.num_blocks = 3;
  c.cache.block_size = 2;
  if (layout == Layout::paged_nhd) {  // [nb, bs, H, D]
    c.cache.stride_block = 12, c.cache.stride_pos = 6, c.cache.stride_head = 3;
  } else {  // paged_hnd [nb, H, bs, D]
    c.cache.stride_block = 12, c.cache.stride_pos = 3, c.cache.stride_head = 6;
  }
  c.cache_k_offset = 0;
  c.cache_v_offset = kVBase;
  c.cache_buffer_elems = kCacheElems;
  // Separate key and value views with 2 elements of row padding: [T_in, H, D] with token stride 8.
  c.num_input_rows = kRows;
  c.input_buffer_elems = 80;
  c.key = InputView{0, 8, 3};
  c.value = InputView{40, 8, 3};
  c.slot_mapping = {5, -1, 0, 6};
  c.requests = {Request{1, 2, {2, 0}, {}}};
  return c;
}

// Hand-written arena image: 256-byte sections separated by 256-byte guards, every byte 0xA5.
Arena make_arena(const Case& c) {
  ArenaLayout l;
  l.guard_bytes = 256;
  l.input_begin = 256;
  l.input_bytes = c.input_buffer_elems * elem_size(c.input_dtype);  // <= 320
  l.slots_begin = 1024;
  l.slots_bytes = c.num_slots() * (c.slot_dtype == IndexType::i32 ? 4 : 8);
  l.cache_begin = 1536;
  l.cache_bytes = c.cache_buffer_elems * elem_size(c.cache_dtype);  // <= 320
  l.counter_begin = 2304;
  l.total_bytes = 2816;
  Arena a(l);
  std::memset(a.data(), 0xA5, static_cast<size_t>(a.size()));
  for (int64_t row = 0; row < c.num_slots(); ++row) {
    const int64_t s = c.slot_mapping[static_cast<size_t>(row)];
    if (c.slot_dtype == IndexType::i32) {
      const int32_t v = static_cast<int32_t>(s);
      std::memcpy(a.slots() + row * 4, &v, 4);
    } else {
      std::memcpy(a.slots() + row * 8, &s, 8);
    }
  }
  const unsigned long long zero = 0;
  std::memcpy(a.counter(), &zero, sizeof zero);
  return a;
}

void put(std::byte* base, DType t, int64_t index, uint32_t bits) {
  if (t == DType::f32) {
    std::memcpy(base + index * 4, &bits, 4);
  } else {
    const uint16_t v = static_cast<uint16_t>(bits);
    std::memcpy(base + index * 2, &v, 2);
  }
}
uint32_t get(const std::byte* base, DType t, int64_t index) {
  if (t == DType::f32) {
    uint32_t v;
    std::memcpy(&v, base + index * 4, 4);
    return v;
  }
  uint16_t v;
  std::memcpy(&v, base + index * 2, 2);
  return v;
}

// Writes one input row [H, D] (row-major h*D + d) into the key or value view.
void put_row(Arena& a, const Case& c, const InputView& view, int64_t row, const std::vector<uint32_t>& bits) {
  for (int64_t h = 0; h < kH; ++h) {
    for (int64_t d = 0; d < kD; ++d) {
      put(a.input(), c.input_dtype, view.offset + row * view.stride_token + h * view.stride_head + d,
          bits[static_cast<size_t>(h * kD + d)]);
    }
  }
}

// Fills the rows nobody may read (padding row 1, invalid row 3, graph row 4) with a NaN so that a
// read of them would show up as a write of their value.
void poison_unread_rows(Arena& a, const Case& c) {
  const uint32_t nan = c.input_dtype == DType::f32 ? 0x7FC00006u : 0x7E06u;
  const std::vector<uint32_t> row(static_cast<size_t>(kH * kD), nan);
  for (int64_t r : {1, 3, 4}) {
    put_row(a, c, c.key, r, row);
    put_row(a, c, c.value, r, row);
  }
}

// Runs the golden model and checks: bytes outside the cache and counter are untouched, the cache
// elements in `expected` hold exactly those bits, every other cache element is untouched, and the
// counter holds `invalid`.
void run_and_check(const Case& c, Arena& a, const std::map<int64_t, uint32_t>& expected, unsigned long long invalid) {
  const Arena before = a;
  golden_append(c, a);
  const ArenaLayout& l = a.layout();
  for (int64_t i = 0; i < a.size(); ++i) {
    const bool in_cache = i >= l.cache_begin && i < l.cache_begin + l.cache_bytes;
    const bool in_counter = i >= l.counter_begin && i < l.counter_begin + 8;
    if (!in_cache && !in_counter) {
      ASSERT_EQ(a.data()[i], before.data()[i]) << "byte " << i << " outside the cache changed";
    }
  }
  for (int64_t e = 0; e < c.cache_buffer_elems; ++e) {
    const uint32_t now = get(a.cache(), c.cache_dtype, e);
    const auto it = expected.find(e);
    if (it == expected.end()) {
      EXPECT_EQ(now, get(before.cache(), c.cache_dtype, e)) << "cache element " << e << " must not change";
    } else {
      EXPECT_EQ(now, it->second) << std::hex << "cache element " << std::dec << e;
    }
  }
  EXPECT_EQ(a.counter_value(), invalid);
}

// f32 -> f16 across the rounding cases: exact values, overflow, the overflow tie, ties to even in
// the normal and the subnormal range, -0, NaN -> canonical NaN.
TEST(Golden, narrowsF32RowsIntoAPagedNhdF16CacheByHand) {
  const Case c = make_case(Layout::paged_nhd, DType::f32, DType::f16, IndexType::i64);
  Arena a = make_arena(c);
  poison_unread_rows(a, c);
  // row 0 -> slot 5 (block 2, pos 1): NHD elements 2*12 + 1*6 + h*3 + d = 30 + h*3 + d
  put_row(a, c, c.key, 0, {f32(1.5f), f32(-2.0f), f32(0.5f),                 // 0x3E00 0xC000 0x3800
                           f32(65504.0f), f32(65520.0f), f32(1.0f + 0x1p-11f)});  // 0x7BFF, tie->Inf 0x7C00, tie->even 0x3C00
  put_row(a, c, c.value, 0, {0x7FA00001u, f32(-0.0f), f32(0x1p-25f),          // NaN->0x7FFF, 0x8000, tie->0 0x0000
                             f32(0x3p-25f), f32(1.0f + 0x3p-11f), f32(0x1p-24f)});  // tie->even 0x0002, tie->0x3C02, 0x0001
  // row 2 -> slot 0 (block 0, pos 0): elements h*3 + d
  put_row(a, c, c.key, 2, {f32(1), f32(2), f32(3), f32(4), f32(5), f32(6)});
  put_row(a, c, c.value, 2, {f32(-1.0f), f32(0.25f), f32(1000.0f), f32(0.1f), f32(100000.0f), f32(-3.0f)});

  const std::map<int64_t, uint32_t> expected = {
      // K, slot 5
      {30, 0x3E00}, {31, 0xC000}, {32, 0x3800}, {33, 0x7BFF}, {34, 0x7C00}, {35, 0x3C00},
      // K, slot 0
      {0, 0x3C00}, {1, 0x4000}, {2, 0x4200}, {3, 0x4400}, {4, 0x4500}, {5, 0x4600},
      // V (base 40), slot 5
      {70, 0x7FFF}, {71, 0x8000}, {72, 0x0000}, {73, 0x0002}, {74, 0x3C02}, {75, 0x0001},
      // V, slot 0: 0.1f = 0x3DCCCCCD rounds down to 0x2E66; 1e5 overflows to +Inf
      {40, 0xBC00}, {41, 0x3400}, {42, 0x63D0}, {43, 0x2E66}, {44, 0x7C00}, {45, 0xC200},
  };
  run_and_check(c, a, expected, 1);
}

// Equal dtypes are bit copies: NaN payloads (signalling, negative, all-ones) survive. HND layout
// and int32 slots.
TEST(Golden, copiesF16RowsBitForBitIntoAPagedHndCache) {
  const Case c = make_case(Layout::paged_hnd, DType::f16, DType::f16, IndexType::i32);
  Arena a = make_arena(c);
  poison_unread_rows(a, c);
  put_row(a, c, c.key, 0, {0x3C00, 0x7D01, 0xFFFF, 0x0001, 0x8000, 0x7BFF});
  put_row(a, c, c.value, 0, {0x1111, 0x2222, 0x3333, 0x4444, 0x5555, 0xFE00});
  put_row(a, c, c.key, 2, {0x0101, 0x0202, 0x0303, 0x0404, 0x0505, 0x0606});
  put_row(a, c, c.value, 2, {0xA001, 0xA002, 0xA003, 0xA004, 0xA005, 0xA006});
  // HND: element = block*12 + h*6 + pos*3 + d. slot 5 (block 2, pos 1): h0 27..29, h1 33..35.
  // slot 0 (block 0, pos 0): h0 0..2, h1 6..8. V adds 40.
  const std::map<int64_t, uint32_t> expected = {
      {27, 0x3C00}, {28, 0x7D01}, {29, 0xFFFF}, {33, 0x0001}, {34, 0x8000}, {35, 0x7BFF},
      {67, 0x1111}, {68, 0x2222}, {69, 0x3333}, {73, 0x4444}, {74, 0x5555}, {75, 0xFE00},
      {0, 0x0101},  {1, 0x0202},  {2, 0x0303},  {6, 0x0404},  {7, 0x0505},  {8, 0x0606},
      {40, 0xA001}, {41, 0xA002}, {42, 0xA003}, {46, 0xA004}, {47, 0xA005}, {48, 0xA006},
  };
  run_and_check(c, a, expected, 1);
}

// bf16 -> f16: in range the values are exact; at the edges overflow and subnormal ties round to
// even; a bf16 NaN (even one carrying a canary payload) becomes the f16 canonical NaN.
TEST(Golden, convertsBf16RowsIntoAnF16CacheWithTiesAndNans) {
  const Case c = make_case(Layout::paged_nhd, DType::bf16, DType::f16, IndexType::i64);
  Arena a = make_arena(c);
  poison_unread_rows(a, c);
  // 0x3F81 = 1 + 2^-7 -> 0x3C08 exactly; 0x477F = 65280 -> 0x7BF8; 0x4780 = 65536 -> +Inf;
  // 0x3300 = 2^-25 (tie) -> 0; 0x3340 = 1.5 * 2^-25 -> 0x0001; 0x33C0 = 3 * 2^-25 (tie) -> 0x0002.
  put_row(a, c, c.key, 0, {0x3F81, 0x477F, 0x4780, 0x3300, 0x3340, 0x33C0});
  // NaNs of both signs and payloads -> 0x7FFF; -Inf stays -Inf; -2^-126 underflows to -0.
  put_row(a, c, c.value, 0, {0x7FC1, 0xFFFF, 0x7F81, 0xFF80, 0x8080, 0x3F80});
  put_row(a, c, c.key, 2, {0x0000, 0x8000, 0x4000, 0xC040, 0x3E80, 0x4120});
  put_row(a, c, c.value, 2, {0x3F80, 0x3F80, 0x3F80, 0x3F80, 0x3F80, 0x3F80});
  const std::map<int64_t, uint32_t> expected = {
      {30, 0x3C08}, {31, 0x7BF8}, {32, 0x7C00}, {33, 0x0000}, {34, 0x0001}, {35, 0x0002},
      {70, 0x7FFF}, {71, 0x7FFF}, {72, 0x7FFF}, {73, 0xFC00}, {74, 0x8000}, {75, 0x3C00},
      // 0 -> 0, -0 -> -0, 2 -> 0x4000, -3 -> 0xC200, 0.25 -> 0x3400, 10 -> 0x4900
      {0, 0x0000},  {1, 0x8000},  {2, 0x4000},  {3, 0xC200},  {4, 0x3400},  {5, 0x4900},
      {40, 0x3C00}, {41, 0x3C00}, {42, 0x3C00}, {43, 0x3C00}, {44, 0x3C00}, {45, 0x3C00},
  };
  run_and_check(c, a, expected, 1);
}

// The model consumes the bytes in the arena, as a kernel does: a slot section that disagrees with
// Case::slot_mapping is followed (here row 2 is redirected to slot 1 = block 0, pos 1), and an
// all-padding section writes nothing and counts zero.
TEST(Golden, readsSlotsFromTheArenaNotFromTheCase) {
  const Case c = make_case(Layout::paged_nhd, DType::f16, DType::f16, IndexType::i64);
  Arena a = make_arena(c);
  put_row(a, c, c.key, 0, {1, 2, 3, 4, 5, 6});
  put_row(a, c, c.value, 0, {7, 8, 9, 10, 11, 12});
  put_row(a, c, c.key, 2, {21, 22, 23, 24, 25, 26});
  put_row(a, c, c.value, 2, {27, 28, 29, 30, 31, 32});
  const int64_t redirected = 1;
  std::memcpy(a.slots() + 2 * 8, &redirected, 8);
  std::map<int64_t, uint32_t> expected;
  for (int64_t i = 0; i < 6; ++i) {
    expected[30 + i] = static_cast<uint32_t>(1 + i);   // K slot 5
    expected[70 + i] = static_cast<uint32_t>(7 + i);   // V slot 5
    expected[6 + i] = static_cast<uint32_t>(21 + i);   // K slot 1: block 0, pos 1 -> 6 + h*3 + d
    expected[46 + i] = static_cast<uint32_t>(27 + i);  // V slot 1
  }
  run_and_check(c, a, expected, 1);

  Arena b = make_arena(c);
  const int64_t padding = -1;
  for (int64_t row = 0; row < c.num_slots(); ++row) std::memcpy(b.slots() + row * 8, &padding, 8);
  run_and_check(c, b, {}, 0);
}

// T = 0 and an empty cache (capacity 0: every non-negative slot is invalid) change nothing but the
// counter.
TEST(Golden, handlesEmptyBatchesAndEmptyCaches) {
  Case c = make_case(Layout::paged_nhd, DType::f32, DType::f32, IndexType::i64);
  c.slot_mapping.clear();
  Arena a = make_arena(c);
  run_and_check(c, a, {}, 0);

  Case empty = make_case(Layout::paged_nhd, DType::f32, DType::f32, IndexType::i64);
  empty.cache.num_blocks = 0;
  Arena b = make_arena(empty);
  run_and_check(empty, b, {}, 3);  // slots 5, 0 and 6 are all >= capacity 0
}

// The golden model and the CUDA kernel's body (run by the CPU emulator, as the cuda-emu target does)
// agree byte for byte on every dtype pair and value distribution, with payloads from payload.h:
// NaNs, infinities, subnormals and rounding cases included. A batch of 40 rows over a 7-block
// cache with block_size 5, H 4, D 37 (odd: partial 16-byte chunks), padding and invalid rows.
TEST(Golden, agreesWithTheEmulatedKernelOnPayloadValues) {
  for (DType in : {DType::f16, DType::bf16, DType::f32}) {
    for (DType cache : {DType::f16, DType::bf16, DType::f32}) {
      for (ValueDist dist : {ValueDist::finite, ValueDist::special, ValueDist::constant}) {
        Case c;
        c.num_heads = 4, c.head_dim = 37, c.input_dtype = in, c.cache_dtype = cache;
        c.cache = CacheGeometry{7, 5, 5 * 4 * 37, 4 * 37, 37};  // paged NHD
        c.cache_k_offset = 3, c.cache_v_offset = 3 + 7 * 5 * 4 * 37 + 11;
        c.cache_buffer_elems = c.cache_v_offset + 7 * 5 * 4 * 37 + 5;
        c.num_input_rows = 43;  // 3 CUDA-graph rows
        c.key = InputView{1, 2 * 4 * 37 + 2, 37};
        c.value = InputView{1 + 4 * 37, 2 * 4 * 37 + 2, 37};
        c.input_buffer_elems = 1 + 43 * (2 * 4 * 37 + 2);
        // 33 written rows on distinct shuffled slots (17 is coprime to the capacity 35), 4 padding, 3 invalid.
        for (int64_t r = 0, k = 0; r < 40; ++r) {
          c.slot_mapping.push_back(r % 9 == 4 ? -1 : r % 13 == 6 ? 35 + r : k++ * 17 % 35);
        }
        c.dist = dist;
        c.payload_seed = 1234;

        const int64_t in_size = elem_size(in);
        ArenaLayout l;
        l.guard_bytes = 256;
        l.input_begin = 256;
        l.input_bytes = c.input_buffer_elems * in_size;
        l.slots_begin = l.input_begin + 256 * (l.input_bytes / 256 + 2);
        l.slots_bytes = c.num_slots() * 8;
        l.cache_begin = l.slots_begin + 256 * (l.slots_bytes / 256 + 2);
        l.cache_bytes = c.cache_buffer_elems * elem_size(cache);
        l.counter_begin = l.cache_begin + 256 * (l.cache_bytes / 256 + 2);
        l.total_bytes = l.counter_begin + 512;
        Arena initial(l);
        std::memset(initial.data(), 0xFF, static_cast<size_t>(initial.size()));
        std::memcpy(initial.slots(), c.slot_mapping.data(), static_cast<size_t>(l.slots_bytes));
        const unsigned long long zero = 0;
        std::memcpy(initial.counter(), &zero, sizeof zero);
        for (int64_t row = 0; row < c.num_input_rows; ++row) {
          for (int64_t h = 0; h < c.num_heads; ++h) {
            for (int64_t d = 0; d < c.head_dim; ++d) {
              put(initial.input(), in, c.key.offset + row * c.key.stride_token + h * c.key.stride_head + d,
                  input_bits(c, Tensor::key, row, h, d));
              put(initial.input(), in, c.value.offset + row * c.value.stride_token + h * c.value.stride_head + d,
                  input_bits(c, Tensor::value, row, h, d));
            }
          }
        }

        Arena expected = initial;
        golden_append(c, expected);
        Arena actual = initial;
        KvAppendParams p;
        p.key = actual.input() + c.key.offset * in_size;
        p.value = actual.input() + c.value.offset * in_size;
        p.key_stride_token = c.key.stride_token, p.key_stride_head = c.key.stride_head;
        p.value_stride_token = c.value.stride_token, p.value_stride_head = c.value.stride_head;
        p.slot_mapping = actual.slots();
        p.slot_type = IndexType::i64;
        p.num_slots = c.num_slots();
        p.num_input_rows = c.num_input_rows;
        p.k_cache = actual.cache() + c.cache_k_offset * elem_size(cache);
        p.v_cache = actual.cache() + c.cache_v_offset * elem_size(cache);
        p.cache = c.cache;
        p.num_heads = c.num_heads, p.head_dim = c.head_dim;
        p.input_dtype = in, p.cache_dtype = cache;
        p.invalid_slots = actual.counter();
        ASSERT_EQ(kv_append_emu(p), LaunchStatus::ok);

        EXPECT_EQ(expected.counter_value(), 3u);  // rows 6, 19, 32 (r % 13 == 6, not r % 9 == 4)
        int64_t differing = 0, changed = 0;
        for (int64_t i = 0; i < expected.size(); ++i) {
          differing += expected.data()[i] != actual.data()[i];
          changed += expected.data()[i] != initial.data()[i];
        }
        EXPECT_EQ(differing, 0) << "in " << static_cast<int>(in) << " cache " << static_cast<int>(cache) << " dist "
                                << static_cast<int>(dist);
        EXPECT_GT(changed, 0);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Quantised caches. The arena gets two more hand-placed sections: static scales (K then V, fp32)
// and the scale cache ([nb, bs, H] fp32: block stride 4, pos stride 2, head stride 1; K at 0, V at
// 16, 4 gap elements after each). Stored codes are worked out by hand:
//   e4m3 1 | 4 | 3, bias 7: 1.0 = 0x38, 1.5 = 0x3C, 0.5 = 0x30, 448 = 0x7E (max), NaN = 0x7F,
//        subnormals k * 2^-9 = 0x0k
//   e5m2 1 | 5 | 2, bias 15: 1.0 = 0x3C, 57344 = 0x7B (max), NaN -> 0x7F, subnormals k * 2^-16
//   int8 round half to even, saturate to [-128, 127], NaN -> 0

uint32_t b8(int v) { return static_cast<uint32_t>(static_cast<uint8_t>(v)); }

Case make_quant_case(Layout layout, DType in, DType cache, ScaleKind kind) {
  Case c = make_case(layout, in, cache, IndexType::i64);
  c.scale_kind = kind;
  if (kind == ScaleKind::per_token_head) {
    c.scale_cache = CacheGeometry{3, 2, 4, 2, 1};
    c.scale_k_offset = 0;
    c.scale_v_offset = 16;
    c.scale_cache_elems = 32;
  }
  return c;
}

Arena make_quant_arena(const Case& c) {
  ArenaLayout l;
  l.guard_bytes = 256;
  l.input_begin = 256;
  l.input_bytes = c.input_buffer_elems * elem_size(c.input_dtype);
  l.slots_begin = 1024;
  l.slots_bytes = c.num_slots() * 8;
  l.scales_begin = 1536;
  l.scales_bytes = 2 * 4 * static_scale_count(c.scale_kind, c.num_heads, c.cache.num_blocks);
  l.cache_begin = 2048;
  l.cache_bytes = c.cache_buffer_elems;  // 1-byte elements
  l.scale_cache_begin = 2560;
  l.scale_cache_bytes = 4 * c.scale_cache_elems;
  l.counter_begin = 3072;
  l.total_bytes = 3584;
  Arena a(l);
  std::memset(a.data(), 0xA5, static_cast<size_t>(a.size()));
  std::memcpy(a.slots(), c.slot_mapping.data(), static_cast<size_t>(l.slots_bytes));
  const unsigned long long zero = 0;
  std::memcpy(a.counter(), &zero, sizeof zero);
  return a;
}

void put_scales(Arena& a, const std::vector<float>& k, const std::vector<float>& v) {
  std::memcpy(a.scales(), k.data(), 4 * k.size());
  std::memcpy(a.scales() + 4 * k.size(), v.data(), 4 * v.size());
}

// Runs the golden model: only the cache bytes in `cache` and the scale cache elements in `scales`
// change (to exactly those values), the counter holds `invalid`, every other byte stays.
void run_and_check_quant(const Case& c, Arena& a, const std::map<int64_t, uint32_t>& cache, const std::map<int64_t, uint32_t>& scales,
                         unsigned long long invalid) {
  const Arena before = a;
  golden_append(c, a);
  const ArenaLayout& l = a.layout();
  for (int64_t i = 0; i < a.size(); ++i) {
    const bool in_cache = i >= l.cache_begin && i < l.cache_begin + l.cache_bytes;
    const bool in_scale_cache = i >= l.scale_cache_begin && i < l.scale_cache_begin + l.scale_cache_bytes;
    const bool in_counter = i >= l.counter_begin && i < l.counter_begin + 8;
    if (!in_cache && !in_scale_cache && !in_counter) {
      ASSERT_EQ(a.data()[i], before.data()[i]) << "byte " << i << " outside the caches changed";
    }
  }
  for (int64_t e = 0; e < c.cache_buffer_elems; ++e) {
    const auto now = static_cast<uint32_t>(a.cache()[e]);
    const auto it = cache.find(e);
    EXPECT_EQ(now, it == cache.end() ? static_cast<uint32_t>(before.cache()[e]) : it->second) << std::hex << "cache element " << std::dec << e;
  }
  for (int64_t e = 0; e < c.scale_cache_elems; ++e) {
    uint32_t now, was;
    std::memcpy(&now, a.scale_cache() + 4 * e, 4);
    std::memcpy(&was, before.scale_cache() + 4 * e, 4);
    const auto it = scales.find(e);
    EXPECT_EQ(now, it == scales.end() ? was : it->second) << std::hex << "scale cache element " << std::dec << e;
  }
  EXPECT_EQ(a.counter_value(), invalid);
}

// per_tensor e4m3 from f16, K scale 2, V scale 0.5: exact values, ties to even (also in the
// subnormal range and at the 448/480 saturation tie), saturation of large values and -Inf, NaN of
// either sign -> 0x7F, -0 -> 0x80.
TEST(Golden, quantisesPerTensorIntoE4m3ByHand) {
  const Case c = make_quant_case(Layout::paged_nhd, DType::f16, DType::fp8_e4m3, ScaleKind::per_tensor);
  Arena a = make_quant_arena(c);
  poison_unread_rows(a, c);
  put_scales(a, {2.0f}, {0.5f});
  // K row 0 (/2): 3 -> 1.5; 1000 -> 500 saturates; NaN; -Inf saturates; 2.125 -> 1.0625 (tie -> 1.0);
  // 2.375 -> 1.1875 (tie -> 1.25 = 0x3A)
  put_row(a, c, c.key, 0, {0x4200, 0x63D0, 0x7E00, 0xFC00, 0x4040, 0x40C0});
  // V row 0 (*2): 232 -> 464 (tie between 448 and 480 -> 448); 2^-10 -> 2^-9 = 0x01; 2^-11 -> 2^-10
  // (tie -> 0); 1.5 * 2^-10 -> 3 * 2^-10 (tie -> 2 * 2^-9 = 0x02); -0.25 -> -0.5; 0x2E66 (~0.1) ->
  // 0.19995 -> 1.625 * 2^-3 = 0x25
  put_row(a, c, c.value, 0, {0x5B40, 0x1400, 0x1000, 0x1600, 0xB400, 0x2E66});
  // K row 2 (/2): 2, 4, 6, 8, 10, 12 -> 1, 2, 3, 4, 5, 6
  put_row(a, c, c.key, 2, {0x4000, 0x4400, 0x4600, 0x4800, 0x4900, 0x4A00});
  // V row 2 (*2): -1 -> -2; 0; 0.25 -> 0.5; 100 -> 200 (tie between 192 and 208 -> 192 = 0x74); +Inf
  // saturates; -NaN -> 0x7F
  put_row(a, c, c.value, 2, {0xBC00, 0x0000, 0x3400, 0x5640, 0x7C00, 0xFE00});
  const std::map<int64_t, uint32_t> expected = {
      {30, 0x3C}, {31, 0x7E}, {32, 0x7F}, {33, 0xFE}, {34, 0x38}, {35, 0x3A},  // K slot 5
      {70, 0x7E}, {71, 0x01}, {72, 0x00}, {73, 0x02}, {74, 0xB0}, {75, 0x25},  // V slot 5
      {0, 0x38},  {1, 0x40},  {2, 0x44},  {3, 0x48},  {4, 0x4A},  {5, 0x4C},   // K slot 0
      {40, 0xC0}, {41, 0x00}, {42, 0x30}, {43, 0x74}, {44, 0x7E}, {45, 0x7F},  // V slot 0
  };
  run_and_check_quant(c, a, expected, {}, 1);
}

// per_head int8 from f32 (HND layout): K scales {1, 0.5}, V scales {2, 4}. Half-way cases round to
// even (2.5 -> 2, -3.5 -> -4, 127.5 -> 128 saturates to 127, -128.5 -> -128), NaN -> 0,
// +-Inf saturate, -0.5 -> -0 -> 0.
TEST(Golden, quantisesPerHeadIntoInt8ByHand) {
  const Case c = make_quant_case(Layout::paged_hnd, DType::f32, DType::int8, ScaleKind::per_head);
  Arena a = make_quant_arena(c);
  poison_unread_rows(a, c);
  put_scales(a, {1.0f, 0.5f}, {2.0f, 4.0f});
  const uint32_t nan = 0x7FC00000u, inf = 0x7F800000u, ninf = 0xFF800000u;
  put_row(a, c, c.key, 0, {f32(2.5f), f32(-3.5f), f32(126.7f), f32(63.75f), f32(-100.0f), nan});
  put_row(a, c, c.value, 0, {f32(5.0f), f32(-1.0f), f32(3.0f), ninf, f32(10.0f), f32(0.1f)});
  put_row(a, c, c.key, 2, {f32(0.5f), f32(1.5f), f32(-2.5f), f32(1.0f), f32(1.25f), f32(1.75f)});
  put_row(a, c, c.value, 2, {f32(254.0f), f32(256.0f), f32(-257.0f), inf, f32(2.0f), f32(6.0f)});
  // HND: element = block*12 + h*6 + pos*3 + d. slot 5 (block 2, pos 1): h0 27..29, h1 33..35;
  // slot 0: h0 0..2, h1 6..8. V adds 40.
  const std::map<int64_t, uint32_t> expected = {
      {27, b8(2)}, {28, b8(-4)}, {29, b8(127)}, {33, b8(127)}, {34, b8(-128)}, {35, b8(0)},  // K: 63.75/0.5 = 127.5 -> 127
      {67, b8(2)}, {68, b8(0)},  {69, b8(2)},   {73, b8(-128)}, {74, b8(2)},   {75, b8(0)},  // V: 5/2 = 2.5, -0.5, 1.5; -Inf, 2.5, 0.025
      {0, b8(0)},  {1, b8(2)},   {2, b8(-2)},   {6, b8(2)},    {7, b8(2)},     {8, b8(4)},   // K: 0.5, 1.5, -2.5; 2, 2.5, 3.5
      {40, b8(127)}, {41, b8(127)}, {42, b8(-128)}, {46, b8(127)}, {47, b8(0)}, {48, b8(2)},  // V: 127, 128, -128.5; Inf, 0.5, 1.5
  };
  run_and_check_quant(c, a, expected, {}, 1);
}

// per_block e5m2 from bf16: the scale is that of the slot's PHYSICAL block (slot 5 is logical
// block 0 of the request but physical block 2). K scales [b0h0, b0h1, b1h0, b1h1, b2h0, b2h1] =
// [1, 1, 8, 8, 4, 0.25], V = [1, 1, 1, 1, 2, 1].
TEST(Golden, quantisesPerBlockIntoE5m2WithThePhysicalBlocksScale) {
  Case c = make_quant_case(Layout::paged_nhd, DType::bf16, DType::fp8_e5m2, ScaleKind::per_block);
  Arena a = make_quant_arena(c);
  poison_unread_rows(a, c);
  put_scales(a, {1, 1, 8, 8, 4, 0.25f}, {1, 1, 1, 1, 2, 1});
  // K row 0 (block 2): h0 /4: 8 -> 2, 20 -> 5, 14 -> 3.5; h1 *4: 1 -> 4, 3.5 -> 14, 16384 -> 65536 saturates
  put_row(a, c, c.key, 0, {0x4100, 0x41A0, 0x4160, 0x3F80, 0x4060, 0x4680});
  // V row 0 (block 2): h0 /2: 2.25 -> 1.125 (tie -> 1.0), 2.75 -> 1.375 (tie -> 1.5), -0;
  // h1 /1: NaN -> 0x7F, -Inf -> -max, 2^-17 (half the smallest subnormal: tie -> 0)
  put_row(a, c, c.value, 0, {0x4010, 0x4030, 0x8000, 0x7FC1, 0xFF80, 0x3700});
  // K row 2 (block 0, scale 1): 1, -2, 0.5; 3, 6, 2^-16 (smallest subnormal 0x01)
  put_row(a, c, c.key, 2, {0x3F80, 0xC000, 0x3F00, 0x4040, 0x40C0, 0x3780});
  put_row(a, c, c.value, 2, {0x3F80, 0x3F80, 0x3F80, 0x3F80, 0x3F80, 0x3F80});
  const std::map<int64_t, uint32_t> expected = {
      {30, 0x40}, {31, 0x45}, {32, 0x43}, {33, 0x44}, {34, 0x4B}, {35, 0x7B},
      {70, 0x3C}, {71, 0x3E}, {72, 0x80}, {73, 0x7F}, {74, 0xFB}, {75, 0x00},
      {0, 0x3C},  {1, 0xC0},  {2, 0x38},  {3, 0x42},  {4, 0x46},  {5, 0x01},
      {40, 0x3C}, {41, 0x3C}, {42, 0x3C}, {43, 0x3C}, {44, 0x3C}, {45, 0x3C},
  };
  run_and_check_quant(c, a, expected, {}, 1);
}

// per_token_head e4m3 from f32: scale = max(amax, 1e-6f) / 448 with amax over the row ignoring
// NaN, written to the scale cache at (block, pos, head); elements quantised with it. Slot 5 =
// (block 2, pos 1): scale elements 10 + h (K), 26 + h (V); slot 0: 0 + h, 16 + h.
TEST(Golden, quantisesPerTokenHeadAndWritesTheScaleCache) {
  const Case c = make_quant_case(Layout::paged_nhd, DType::f32, DType::fp8_e4m3, ScaleKind::per_token_head);
  Arena a = make_quant_arena(c);
  poison_unread_rows(a, c);
  const uint32_t nan = 0x7FC00000u, inf = 0x7F800000u;
  // K row 0: h0 amax 896 -> scale 2: -448, NaN, 0.75 = 0x34. The NaN is signalling and follows the
  // largest value (std::fmax would turn the running max into NaN there). h1 zero row -> 1e-6 / 448
  put_row(a, c, c.key, 0, {f32(-896.0f), 0x7F800001u, f32(1.5f), f32(0.0f), f32(-0.0f), f32(0.0f)});
  // V row 0: h0 amax Inf -> scale Inf: Inf/Inf = NaN -> 0x7F, 1/Inf = 0; h1 amax 3 -> 3/448 (inexact):
  // -3 -> -448, 0.375 -> ~56 = 0x66, 1.6875 -> ~252 -> 256 = 0x78
  put_row(a, c, c.value, 0, {inf, f32(1.0f), f32(2.0f), f32(-3.0f), f32(0.375f), f32(1.6875f)});
  // K row 2: h0 amax 0.5: ~448, ~224 = 0x76, ~112 = 0x6E; h1 all NaN -> amax 0 -> 1e-6 / 448, NaN -> 0x7F
  put_row(a, c, c.key, 2, {f32(0.5f), f32(0.25f), f32(0.125f), nan, 0xFFA00000u, nan});
  // V row 2: h0 amax 7 -> 7/448 = 2^-6 exactly; h1 amax 1 -> 1/448
  put_row(a, c, c.value, 2, {f32(-7.0f), f32(3.5f), f32(0.0f), f32(1.0f), f32(1.0f), f32(1.0f)});
  const std::map<int64_t, uint32_t> expected = {
      {30, 0xFE}, {31, 0x7F}, {32, 0x34}, {33, 0x00}, {34, 0x80}, {35, 0x00},
      {70, 0x7F}, {71, 0x00}, {72, 0x00}, {73, 0xFE}, {74, 0x66}, {75, 0x78},
      {0, 0x7E},  {1, 0x76},  {2, 0x6E},  {3, 0x7F},  {4, 0x7F},  {5, 0x7F},
      {40, 0xFE}, {41, 0x76}, {42, 0x00}, {43, 0x7E}, {44, 0x7E}, {45, 0x7E},
  };
  // fp32 divisions exactly as the contract writes them.
  const std::map<int64_t, uint32_t> scales = {
      {10, f32(2.0f)},         {11, f32(1e-6f / 448.0f)}, {0, f32(0.5f / 448.0f)}, {1, f32(1e-6f / 448.0f)},
      {26, inf},               {27, f32(3.0f / 448.0f)},  {16, 0x3C800000u},       {17, f32(1.0f / 448.0f)},
  };
  run_and_check_quant(c, a, expected, scales, 1);
}

// ---------------------------------------------------------------------------------------------
// Format families (docs/formats.md "Families"), by hand: every expected element is written out from
// the layout's formula, not computed through Case::fields().

// MLA: one latent entry [nb 3, bs 2, 1, 5] (strides 10, 5, 5): dims 0..2 from kv_c (token stride 8),
// dims 3..4 from k_pe (its own view at 40, token stride 4). Bit copy f16 -> f16.
TEST(Golden, writesAnMlaEntryFromKvCThenKPe) {
  Case c = make_case(Layout::paged_nhd, DType::f16, DType::f16, IndexType::i64);
  c.family = Family::mla;
  c.num_heads = 1;
  c.head_dim = 5;
  c.rope_dim = 2;
  c.cache.stride_block = 10, c.cache.stride_pos = 5, c.cache.stride_head = 5;
  c.cache_v_offset = 0;
  c.cache_buffer_elems = 30;
  c.key = InputView{0, 8, 8};
  c.value = InputView{};
  c.rope = InputView{48, 4, 4};
  Arena a = make_arena(c);
  auto row = [&](const InputView& v, int64_t r, std::vector<uint32_t> bits) {
    for (size_t d = 0; d < bits.size(); ++d) put(a.input(), c.input_dtype, v.offset + r * v.stride_token + static_cast<int64_t>(d), bits[d]);
  };
  row(c.key, 0, {0x1001, 0x1002, 0x1003});
  row(c.rope, 0, {0x2001, 0x2002});
  row(c.key, 2, {0x3001, 0x3002, 0x3003});
  row(c.rope, 2, {0x4001, 0x4002});
  for (int64_t r : {1, 3, 4}) {  // rows nobody may read
    row(c.key, r, {0x7E06, 0x7E06, 0x7E06});
    row(c.rope, r, {0x7E06, 0x7E06});
  }
  // slot 5 = block 2, pos 1: elements 25..29; slot 0: elements 0..4.
  const std::map<int64_t, uint32_t> expected = {
      {25, 0x1001}, {26, 0x1002}, {27, 0x1003}, {28, 0x2001}, {29, 0x2002},
      {0, 0x3001},  {1, 0x3002},  {2, 0x3003},  {3, 0x4001},  {4, 0x4002},
  };
  run_and_check(c, a, expected, 1);
}

// kv_split: K [3, 2, 2, 3] (strides 12, 6, 3) at 0, V [3, 2, 2, 2] with its own strides (8, 4, 2) at
// 40, value rows [T_in, 2, 2] with token stride 6. bf16 -> f16 conversion of exact values.
TEST(Golden, writesKAndVOfDifferentHeadDimsWithTheirOwnStrides) {
  Case c = make_case(Layout::paged_nhd, DType::f16, DType::f16, IndexType::i64);
  c.family = Family::kv_split;
  c.value_head_dim = 2;
  CacheGeometry vg = c.cache;
  vg.stride_block = 8, vg.stride_pos = 4, vg.stride_head = 2;
  c.value_cache = vg;
  c.cache_buffer_elems = 64;
  c.value = InputView{48, 6, 2};
  Arena a = make_arena(c);
  poison_unread_rows(a, c);  // K rows (kH x kD); V rows below
  auto vrow = [&](int64_t r, std::vector<uint32_t> bits) {
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t d = 0; d < 2; ++d) put(a.input(), c.input_dtype, c.value.offset + r * 6 + h * 2 + d, bits[static_cast<size_t>(h * 2 + d)]);
  };
  put_row(a, c, c.key, 0, {0x0101, 0x0102, 0x0103, 0x0111, 0x0112, 0x0113});
  put_row(a, c, c.key, 2, {0x0201, 0x0202, 0x0203, 0x0211, 0x0212, 0x0213});
  vrow(0, {0x0A01, 0x0A02, 0x0A11, 0x0A12});
  vrow(2, {0x0B01, 0x0B02, 0x0B11, 0x0B12});
  for (int64_t r : {1, 3, 4}) vrow(r, {0x7E06, 0x7E06, 0x7E06, 0x7E06});
  const std::map<int64_t, uint32_t> expected = {
      // K slot 5: 24 + 6 + h*3 + d; slot 0: h*3 + d
      {30, 0x0101}, {31, 0x0102}, {32, 0x0103}, {33, 0x0111}, {34, 0x0112}, {35, 0x0113},
      {0, 0x0201},  {1, 0x0202},  {2, 0x0203},  {3, 0x0211},  {4, 0x0212},  {5, 0x0213},
      // V slot 5: 40 + 16 + 4 + h*2 + d; slot 0: 40 + h*2 + d
      {60, 0x0A01}, {61, 0x0A02}, {62, 0x0A11}, {63, 0x0A12},
      {40, 0x0B01}, {41, 0x0B02}, {42, 0x0B11}, {43, 0x0B12},
  };
  run_and_check(c, a, expected, 1);
}

// k_only: K as in the kv tests, no V: the V region of the buffer stays untouched.
TEST(Golden, writesOnlyKForAKOnlyCache) {
  Case c = make_case(Layout::paged_nhd, DType::f16, DType::f16, IndexType::i64);
  c.family = Family::k_only;
  c.cache_v_offset = 0;
  c.value = InputView{};
  Arena a = make_arena(c);
  poison_unread_rows(a, c);
  put_row(a, c, c.key, 0, {0x0101, 0x0102, 0x0103, 0x0111, 0x0112, 0x0113});
  put_row(a, c, c.key, 2, {0x0201, 0x0202, 0x0203, 0x0211, 0x0212, 0x0213});
  const std::map<int64_t, uint32_t> expected = {
      {30, 0x0101}, {31, 0x0102}, {32, 0x0103}, {33, 0x0111}, {34, 0x0112}, {35, 0x0113},
      {0, 0x0201},  {1, 0x0202},  {2, 0x0203},  {3, 0x0211},  {4, 0x0212},  {5, 0x0213},
  };
  run_and_check(c, a, expected, 1);
}

}  // namespace
}  // namespace kvf::golden
