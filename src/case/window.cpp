// window.cpp — see window.h.
#include "window.h"

#include <map>

#include "placement.h"

namespace kvf {

WindowRows window_rows(const Case& c) {
  WindowRows w;
  const int64_t bs = c.cache.block_size > 0 ? c.cache.block_size : 1;
  const std::map<int64_t, BlockOwner> owner = block_owners(c);
  std::vector<std::vector<int64_t>> positions(c.requests.size());
  for (size_t r = 0; r < c.requests.size(); ++r) positions[r] = new_positions(c.requests[r]);
  std::vector<size_t> next(c.requests.size(), 0);
  for (const int64_t s : c.slot_mapping) {
    const auto it = s >= 0 && s < c.capacity() ? owner.find(s / bs) : owner.end();
    int32_t p = -1, len = 0;
    if (it != owner.end()) {
      const size_t r = it->second.request;
      const Request& q = c.requests[r];
      size_t& k = next[r];
      if (k < positions[r].size()) p = static_cast<int32_t>(positions[r][k++]);
      len = static_cast<int32_t>(q.context_len + q.new_len);
    }
    w.position.push_back(p);
    w.seq_len.push_back(len);
  }
  return w;
}

}  // namespace kvf
