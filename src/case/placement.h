// placement.h — where a request's new tokens land: positions, holes, shared prefix blocks.
//
// A request owns the logical positions 0 .. blocks.size() * block_size - 1 of its block table.
// Positions below context_len hold earlier context. This call writes the new tokens at
// Request::positions, any positions >= context_len, in any order (speculative decoding, vLLM's
// random.sample tests); without positions they are context_len .. context_len + new_len - 1.
// Every other position >= context_len is unwritten and must stay so: below the written extent
// (the highest new position + 1) it is a *hole*, from there on the block *tail*.
//
// A *shared* block is in the block tables of several requests, as prefix caching shares full
// prefix blocks: it must be entirely earlier context of every request holding it (validate.cpp),
// so no slot of the call lies in it. Its context values are those of its first owner (the lowest
// request index, at its logical position there); any write into it corrupts every owner.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "case.h"

namespace kvf {

// The logical positions of r's new tokens, in slot_mapping row order: r.positions, or the
// consecutive range from context_len when it is empty.
std::vector<int64_t> new_positions(const Request& r);

// Whether r's new tokens are at context_len .. context_len + new_len - 1 (in any row order):
// r.positions is empty or a permutation of that range. The case file then omits `positions`.
bool consecutive_positions(const Request& r);

// One past r's highest new position; context_len when it appends nothing. Unwritten positions in
// [context_len, written_extent) are holes, those above are the tail.
int64_t written_extent(const Request& r);

// The shared blocks of c: each physical block in the block tables of more than one request, with
// those requests in order (each once). Block ids outside [0, num_blocks) are ignored. O(entries
// log entries), whatever num_blocks is.
std::map<int64_t, std::vector<int64_t>> shared_blocks(const Case& c);

// Who holds each physical block of the block tables: the first request holding it (a shared
// block's lowest) and the block's index in that request's table.
struct BlockOwner {
  size_t request = 0;
  int64_t logical = 0;
};
std::map<int64_t, BlockOwner> block_owners(const Case& c);

}  // namespace kvf
