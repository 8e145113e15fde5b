// context_parallel.h — context-parallel shards (docs/contract.md, "Serving conventions").
//
// A context-parallel case (RingAttention, decode context parallelism) shards every request's
// sequence over N = world_size ranks with interleave I: global position p belongs to rank
//   owner(p) = (p / I) mod N
// at local position
//   local(p) = (p / (I * N)) * I + p mod I
// of that rank's shard of the request. Each rank holds a cache of its own (a shard) with the same
// geometry, and every rank reads the request's one block table (vLLM's convention): local position
// lp lives in block table[lp / block_size] at offset lp % block_size of the rank's shard. A case
// puts the N shards one after another in its cache: shard r is blocks [r * B, (r + 1) * B) of the
// case's cache (num_blocks = N * B), and block ids in the tables are shard-local, in [0, B).
//
// The call runs once per rank. slot_mapping (the case's) holds each row's local slot
// table[lp / bs] * bs + lp % bs, the same on every rank, or a negative value for padding; a
// request's rows are its tokens in position order (row k: position context_len + k). What rank r's
// call receives depends on the input mode (CpInput):
//   slot_mapping  rank r's own slot_mapping: the local slot for the tokens rank r holds, -1 for every
//                 other row, as a slot-mapping producer computes it from global positions and block
//                 tables (rank_slot_mapping() is the formula; a target may run its own producer,
//                 which is then checked against it);
//   positions     the case's slot_mapping, each row's global position (-1 for padding) and (r, N, I):
//                 the kernel skips the tokens other ranks hold.
// Either way, after the N calls shard r holds exactly its tokens, at their local slots.
#pragma once

#include <cstdint>
#include <vector>

#include "case.h"

namespace kvf {

struct Shards {
  int64_t world = 1;       // N
  int64_t interleave = 1;  // I

  int64_t owner(int64_t p) const { return p / interleave % world; }
  int64_t local(int64_t p) const { return p / (interleave * world) * interleave + p % interleave; }
  // The global position of rank r's local position lp (the inverse of (owner, local)).
  int64_t global(int64_t r, int64_t lp) const { return lp / interleave * interleave * world + r * interleave + lp % interleave; }
  // Positions of [0, len) that rank r holds.
  int64_t local_len(int64_t r, int64_t len) const {
    const int64_t cycle = interleave * world;
    const int64_t rest = len % cycle - r * interleave;
    return len / cycle * interleave + (rest <= 0 ? 0 : rest < interleave ? rest : interleave);
  }
  // The longest shard of a sequence of len positions: rank 0's.
  int64_t longest(int64_t len) const { return local_len(0, len); }
};

inline Shards shards_of(const Case& c) { return {c.cp_world_size, c.cp_interleave}; }

// Each row's request and global position (-1 and -1 for padding rows): a request's rows take its
// positions context_len, context_len + 1, ... in row order. A row belongs to the request whose
// block (shard-local id) holds its slot.
struct CpRows {
  std::vector<int32_t> request;   // [T]
  std::vector<int32_t> position;  // [T]
};
CpRows cp_rows(const Case& c);

// Rank r's slot_mapping: row t's slot where rank r holds its token, -1 elsewhere (the formula every
// producer is checked against).
std::vector<int32_t> rank_slot_mapping(const Case& c, const CpRows& rows, int64_t rank);

// The block tables as one int32 array [requests, max_table] (max_table = the longest table, at
// least 1), -1 past the end of a shorter table: what a slot-mapping producer reads.
struct CpTables {
  std::vector<int32_t> blocks;  // [requests * width]
  int64_t width = 1;
};
CpTables cp_tables(const Case& c);

// The arena's slots section of a context-parallel case (arena.h), in int32 elements:
//   slot_mapping input: [N * T] the ranks' slot mappings (rank r at r * T; the producer's output),
//                       then the producer's inputs: [T] positions, [T] request of each row,
//                       [requests * width] block tables;
//   positions input:    [T] slot_mapping, [T] positions.
struct CpSection {
  int64_t rank_mappings = 0;  // where rank 0's slot_mapping starts (slot_mapping input)
  int64_t positions = 0;
  int64_t requests = 0;       // slot_mapping input only
  int64_t tables = 0;         // slot_mapping input only
  int64_t table_width = 1;
  int64_t size = 0;           // int32 elements in all
};
CpSection cp_section(const Case& c);

}  // namespace kvf
