// golden.h — the golden model: the append contract as plain loops over (row, head, dim).
//
// Boring on purpose (STYLE.md rule 3): no vectorisation, no shortcuts. It reads the key/value rows
// and slot_mapping from the arena's input sections and writes converted values into the arena's
// cache section at Case::cache_field()'s offsets (kernels/cuda/kv_format.cuh), and the number of invalid
// slots into the arena's counter. Applied to an initial arena it yields the expected arena.
#pragma once

#include "arena/arena.h"
#include "case/case.h"

namespace kvf::golden {

void golden_append(const Case& c, Arena& arena);

// The same on a raw image laid out as `layout` (the `golden` target, targets/golden_target.cpp).
void golden_append(const Case& c, std::byte* image, const ArenaLayout& layout);

}  // namespace kvf::golden
