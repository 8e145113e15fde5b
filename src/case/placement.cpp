// placement.cpp — see placement.h.
#include "placement.h"

#include <algorithm>
#include <utility>

namespace kvf {

std::vector<int64_t> new_positions(const Request& r) {
  if (!r.positions.empty()) return r.positions;
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(std::max<int64_t>(r.new_len, 0)));
  for (int64_t i = 0; i < r.new_len; ++i) out.push_back(r.context_len + i);
  return out;
}

bool consecutive_positions(const Request& r) {
  if (r.positions.empty()) return true;
  if (static_cast<int64_t>(r.positions.size()) != r.new_len) return false;
  std::vector<int64_t> sorted = r.positions;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != r.context_len + static_cast<int64_t>(i)) return false;
  return true;
}

int64_t written_extent(const Request& r) {
  if (r.positions.empty()) return r.context_len + std::max<int64_t>(r.new_len, 0);
  return std::max(r.context_len, *std::max_element(r.positions.begin(), r.positions.end()) + 1);
}

std::map<int64_t, BlockOwner> block_owners(const Case& c) {
  std::map<int64_t, BlockOwner> out;
  for (size_t r = 0; r < c.requests.size(); ++r)
    for (size_t k = 0; k < c.requests[r].blocks.size(); ++k)
      out.emplace(c.requests[r].blocks[k], BlockOwner{r, static_cast<int64_t>(k)});
  return out;
}

std::map<int64_t, std::vector<int64_t>> shared_blocks(const Case& c) {
  std::vector<std::pair<int64_t, int64_t>> entries;  // (block, request) of every block-table entry
  for (size_t r = 0; r < c.requests.size(); ++r)
    for (const int64_t b : c.requests[r].blocks)
      if (b >= 0 && b < c.cache.num_blocks) entries.emplace_back(b, static_cast<int64_t>(r));
  std::sort(entries.begin(), entries.end());
  entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
  std::map<int64_t, std::vector<int64_t>> out;
  for (size_t i = 0; i + 1 < entries.size(); ++i) {
    if (entries[i].first != entries[i + 1].first) continue;
    std::vector<int64_t>& owners = out[entries[i].first];
    if (owners.empty()) owners.push_back(entries[i].second);
    owners.push_back(entries[i + 1].second);
  }
  return out;
}

}  // namespace kvf
