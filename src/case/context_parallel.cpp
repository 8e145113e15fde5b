// context_parallel.cpp — see context_parallel.h.
#include "context_parallel.h"

#include <algorithm>
#include <map>

#include "placement.h"

namespace kvf {

CpRows cp_rows(const Case& c) {
  CpRows rows;
  const int64_t bs = c.cache.block_size > 0 ? c.cache.block_size : 1;
  const std::map<int64_t, BlockOwner> owner = block_owners(c);
  std::vector<int64_t> next(c.requests.size(), 0);  // [requests] rows seen so far
  for (const int64_t s : c.slot_mapping) {
    const auto it = s >= 0 ? owner.find(s / bs) : owner.end();
    int32_t r = -1, p = -1;
    if (it != owner.end()) {
      r = static_cast<int32_t>(it->second.request);
      p = static_cast<int32_t>(c.requests[it->second.request].context_len + next[it->second.request]++);
    }
    rows.request.push_back(r);
    rows.position.push_back(p);
  }
  return rows;
}

std::vector<int32_t> rank_slot_mapping(const Case& c, const CpRows& rows, int64_t rank) {
  const Shards s = shards_of(c);
  std::vector<int32_t> out(c.slot_mapping.size(), -1);
  for (size_t t = 0; t < out.size(); ++t)
    if (rows.position[t] >= 0 && s.owner(rows.position[t]) == rank) out[t] = static_cast<int32_t>(c.slot_mapping[t]);
  return out;
}

CpTables cp_tables(const Case& c) {
  CpTables t;
  for (const Request& r : c.requests) t.width = std::max<int64_t>(t.width, static_cast<int64_t>(r.blocks.size()));
  t.blocks.assign(c.requests.size() * static_cast<size_t>(t.width), -1);
  for (size_t r = 0; r < c.requests.size(); ++r)
    for (size_t k = 0; k < c.requests[r].blocks.size(); ++k)
      t.blocks[r * static_cast<size_t>(t.width) + k] = static_cast<int32_t>(c.requests[r].blocks[k]);
  return t;
}

CpSection cp_section(const Case& c) {
  CpSection s;
  const int64_t T = c.num_slots();
  if (c.cp_input == CpInput::positions) {
    s.positions = T;
    s.size = 2 * T;
    return s;
  }
  if (c.cp_input != CpInput::slot_mapping) return s;
  int64_t width = 1;
  for (const Request& r : c.requests) width = std::max<int64_t>(width, static_cast<int64_t>(r.blocks.size()));
  s.positions = c.cp_world_size * T;
  s.requests = s.positions + T;
  s.tables = s.requests + T;
  s.table_width = width;
  s.size = s.tables + static_cast<int64_t>(c.requests.size()) * width;
  return s;
}

}  // namespace kvf
