// payload.h — every value the arena holds before a run, as a pure function of the case.
//
// Values are raw element bits (low 16 bits for f16/bf16). They are derived by mixing a salt
// (case.payload_seed) with the coordinates through SplitMix64 (base/rng.h), so they are
// reproducible everywhere and need no storage or shrinking.
//
//   input_bits    a key/value element of a row that is written (0 <= slot < capacity): drawn from
//                 case.dist (finite: every exponent and sign; special: also NaN, +-Inf, +-0,
//                 subnormals, +-max; constant: one value per row and tensor; the finite values
//                 of an f16 or bf16 copy, input dtype == cache dtype, are unique per element up to
//                 63488 / 65280 elements, see payload.cpp). Real NaNs never
//                 equal a canary, the guard pattern (all ones) or the canonical NaN, so a NaN in the
//                 cache is attributable: f16 sign|0x7D00..0x7DFF or sign|0x7F00..0x7FFE (even),
//                 bf16 sign|0x7F81..0x7FBF or sign|0x7FE0..0x7FFE (even), f32 sign|0x7FA00000..
//                 0x7FBFFFFF or sign|0x7FE00000..0x7FFFFFFE (even).
//   Rows that must never be written (negative slot, slot >= capacity, rows >= T) hold tagged NaNs
//   (canary(PaddingRow) / canary(InvalidRow) / canary(GraphRow)) so that a leaked row poisons
//   whatever reads it and is recognisable where it lands.
//   context_bits  an earlier context token of a live request, in the cache dtype; distinct per
//                 (request, position, head, dim, tensor) where the format allows.
//   canary_bits   the pattern of each region nobody may write: a quiet NaN of the dtype whose
//                 mantissa carries the region tag.
#pragma once

#include <cstdint>
#include <optional>

#include "case/case.h"

namespace kvf::golden {

enum class Tensor : uint8_t { key, value };

// Region tags carried in canary NaN mantissas (values < 32 fit every float dtype's payload).
enum class Canary : uint8_t {
  cache_gap = 1,    // cache buffer cell no (block, pos, head, dim) addresses (stride gaps)
  free_block = 2,   // cell of a block no request owns
  block_tail = 3,   // cell of an owned block past context_len + new_len (and new-token cells before the run)
  guard = 4,        // guard bands: every byte 0xFF (a NaN in every float dtype); canary_bits(t, guard) is all ones
  input_gap = 5,    // input buffer element outside the key and value views (e.g. Q heads, row padding)
  padding_row = 6,  // key/value row whose slot is negative
  invalid_row = 7,  // key/value row whose slot is >= capacity
  graph_row = 8,    // key/value row >= T (CUDA-graph padding)
};

uint32_t input_bits(const Case& c, Tensor t, int64_t row, int64_t head, int64_t dim);
// The same for dims [first, first + count) of one (row, head): out[i] = input_bits(.., first + i),
// with what does not depend on the dim computed once (the arena fill's inner loop).
void input_row_bits(const Case& c, Tensor t, int64_t row, int64_t head, int64_t first, int64_t count, uint32_t* out);

// Every written row of c (slot >= 0 and < capacity) with the values input_bits() gives it, as
// explicit inputs (`kvfuzz generate --explicit`: the same batch, its values editable in the file).
// With `from` (a shrink candidate of the case `from` came with): the rows of c whose token (request,
// cache position) is a row of `from` listed in its explicit inputs, each with that row's values for
// the heads and dims both have; nullopt when `from` has none or another input dtype.
ExplicitInputs explicit_inputs_of_payload(const Case& c);
std::optional<ExplicitInputs> explicit_inputs_carried(const Case& from, const Case& c);
uint32_t context_bits(const Case& c, Tensor t, int64_t request, int64_t pos, int64_t head, int64_t dim);
// The bits an earlier context token holds in field `f` at (head, dim) (dim: the group of a scale or
// zero field), in the field's dtype: context_bits() for the classic caches' fields; for a quantised
// format's fields a code or scale that is neither NaN nor a canary of the dtype.
uint32_t context_field_bits(const Case& c, const CacheField& f, int64_t request, int64_t pos, int64_t head, int64_t dim);
// The same for every dim of the row: out[d] for d in [0, f.head_dim), computed once per row where
// it can be (the arena fill's inner loop).
void context_field_row_bits(const Case& c, const CacheField& f, int64_t request, int64_t pos, int64_t head, uint32_t* out);
// The canaries of the 4-bit dtypes (fp4_e2m1, uint4) are nibbles: 0xD (gap), 0xE (free block),
// 0xF (block tail), 0xC (the rest); of fp8_e8m0 bytes 0xFD, 0xFF (NaN), 0xFE; of uint8 int8's.
uint32_t canary_bits(DType t, Canary tag);

// fp32 bits of static scale `index` (0 <= index < static_scale_count) of tensor t, drawn from
// c.scale_dist: positive, finite, non-zero; K and V differ; per-head/per-block values distinct.
uint32_t scale_bits(const Case& c, Tensor t, int64_t index);

// fp32 bits of the dynamic scale an earlier context token holds in the scale cache (per_token_head).
uint32_t context_scale_bits(const Case& c, Tensor t, int64_t request, int64_t pos, int64_t head);

// The canary tag a value carries, if it is one of canary_bits(t, *) exactly.
std::optional<Canary> canary_of(uint32_t bits, DType t);

}  // namespace kvf::golden
