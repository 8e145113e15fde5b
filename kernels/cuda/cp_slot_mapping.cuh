// cp_slot_mapping.cuh — the context-parallel slot-mapping producer: each rank's slot_mapping from
// global positions and block tables (src/case/context_parallel.h states the formula it is checked
// against; docs/contract.md, "Serving conventions").
//
// Rank `rank` of `world_size` with interleave I holds global position p iff (p / I) % world_size ==
// rank, at local position (p / (I * world_size)) * I + p % I of its shard, in block
// block_tables[request][local / block_size] at offset local % block_size. Every other row (another
// rank's token, padding) gets -1. One thread per row; the body is __host__ __device__, so the
// cuda-emu target runs the same code on the CPU (kv_append_emu.cpp) as the GPU does (kv_append.cu).
#pragma once

#include <cstdint>

#include "kv_layout.cuh"  // KVF_HD

namespace kvf {

struct CpSlotMappingParams {
  const int32_t* positions = nullptr;     // [num_rows] global position of each row's token, -1 = padding
  const int32_t* requests = nullptr;      // [num_rows] request of each row, -1 = padding
  const int32_t* block_tables = nullptr;  // [num_requests, table_width] shard-local block ids, row-major
  int64_t table_width = 0;                // entries per block table row
  int64_t num_rows = 0;                   // T
  int64_t block_size = 0;                 // slots per block of a rank's shard
  int32_t rank = 0;
  int32_t world_size = 1;
  int32_t interleave = 1;
  int32_t* slot_mapping = nullptr;        // [num_rows] out: the rank's slot of each row, or -1
};

// Threads per block of the producer's launch (both launchers).
constexpr int kCpSlotMappingThreads = 256;

inline namespace KVF_KERNEL_NS {

// Row t's slot on the producer's rank, or -1 when the rank does not hold its token.
KVF_HD int32_t cp_rank_slot(const CpSlotMappingParams& p, int64_t t) {
  const int64_t pos = p.positions[t];
  const int64_t request = p.requests[t];
  if (pos < 0 || request < 0) return -1;  // padding
  if (pos / p.interleave % p.world_size != p.rank) return -1;  // another rank's token
  const int64_t local = pos / (static_cast<int64_t>(p.interleave) * p.world_size) * p.interleave + pos % p.interleave;
  const int64_t block = p.block_tables[request * p.table_width + local / p.block_size];
  return static_cast<int32_t>(block * p.block_size + local % p.block_size);
}

KVF_HD void cp_slot_mapping_thread(const CpSlotMappingParams& p, int64_t t) {
  if (t < p.num_rows) p.slot_mapping[t] = cp_rank_slot(p, t);
}

}  // namespace KVF_KERNEL_NS
}  // namespace kvf
