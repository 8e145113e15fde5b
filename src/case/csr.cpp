// csr.cpp — see csr.h.
#include "csr.h"

#include <algorithm>
#include <map>
#include <string>

#include "placement.h"

namespace kvf {

std::vector<int32_t> CsrArrays::packed() const {
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(size()));
  for (const std::vector<int32_t>* v : {&batch_indices, &positions, &kv_indptr, &kv_last_page_len, &kv_indices})
    out.insert(out.end(), v->begin(), v->end());
  return out;
}

int64_t CsrArrays::size() const { return kv_indices_at() + static_cast<int64_t>(kv_indices.size()); }

CsrArrays csr_arrays(const Case& c) {
  CsrArrays a;
  const int64_t bs = std::max<int64_t>(1, c.cache.block_size);
  a.kv_indptr.push_back(0);
  for (const Request& q : c.requests) {
    const int64_t extent = std::max(q.context_len, written_extent(q));
    const int64_t pages = std::min<int64_t>((extent + bs - 1) / bs, static_cast<int64_t>(q.blocks.size()));
    for (int64_t k = 0; k < pages; ++k) a.kv_indices.push_back(static_cast<int32_t>(q.blocks[static_cast<size_t>(k)]));
    a.kv_indptr.push_back(static_cast<int32_t>(a.kv_indices.size()));
    a.kv_last_page_len.push_back(static_cast<int32_t>(pages == 0 ? 0 : extent - (pages - 1) * bs));
  }
  const std::map<int64_t, BlockOwner> owner = block_owners(c);
  for (const int64_t s : c.slot_mapping) {
    const auto it = s >= 0 && s < c.capacity() ? owner.find(s / bs) : owner.end();
    a.batch_indices.push_back(it == owner.end() ? -1 : static_cast<int32_t>(it->second.request));
    a.positions.push_back(it == owner.end() ? -1 : static_cast<int32_t>(it->second.logical * bs + s % bs));
  }
  return a;
}

std::string csr_element_name(const CsrArrays& a, int64_t i) {
  struct Part {
    const char* name;
    int64_t begin;
  };
  const Part parts[] = {{"kv_indices", a.kv_indices_at()}, {"kv_last_page_len", a.kv_last_page_len_at()},
                        {"kv_indptr", a.kv_indptr_at()}, {"positions", a.positions_at()}, {"batch_indices", 0}};
  for (const Part& p : parts)
    if (i >= p.begin) return std::string(p.name) + "[" + std::to_string(i - p.begin) + "]";
  return "?";
}

}  // namespace kvf
