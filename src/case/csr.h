// csr.h — FlashInfer's CSR addressing of a case (docs/contract.md, "Serving conventions").
//
// A case in the csr addressing mode still holds slot_mapping (every entry a valid slot: a CSR call
// has no padding and no invalid rows), which stays the truth the golden model reads. What the
// kernel receives instead is derived from it and the block tables, deterministically:
//   batch_indices[t]  the request whose block holds row t's slot
//   positions[t]      that slot's logical position in the request (logical block * block_size + offset)
//   kv_indptr[b]      where request b's pages start in kv_indices (kv_indptr[B] = all pages)
//   kv_indices        each request's first ceil(L / block_size) blocks, L its written extent
//                     (context and this call's tokens): the pages its sequence spans, no more
//   kv_last_page_len  L - (pages - 1) * block_size, 0 for a request with no pages
// so that row t goes to page kv_indices[kv_indptr[b] + positions[t] / block_size], offset
// positions[t] % block_size: slot_mapping[t] again. All are int32 (FlashInfer's index type).
#pragma once

#include <cstdint>
#include <vector>

#include "case.h"

namespace kvf {

struct CsrArrays {
  std::vector<int32_t> batch_indices;     // [T]
  std::vector<int32_t> positions;         // [T]
  std::vector<int32_t> kv_indptr;         // [B + 1]
  std::vector<int32_t> kv_last_page_len;  // [B]
  std::vector<int32_t> kv_indices;        // [kv_indptr[B]]

  // The arrays in one int32 buffer, in the order above (the arena's slots section of a CSR case),
  // and where each starts in it.
  std::vector<int32_t> packed() const;
  int64_t size() const;  // elements of packed()
  int64_t positions_at() const { return static_cast<int64_t>(batch_indices.size()); }
  int64_t kv_indptr_at() const { return 2 * static_cast<int64_t>(batch_indices.size()); }
  int64_t kv_last_page_len_at() const { return kv_indptr_at() + static_cast<int64_t>(kv_indptr.size()); }
  int64_t kv_indices_at() const { return kv_last_page_len_at() + static_cast<int64_t>(kv_last_page_len.size()); }
};

// The CSR arrays of a valid case (any addressing; meaningful when every slot is valid). Rows whose
// slot is not a request's new-token slot get batch index -1 and position -1 (a valid CSR case has none).
CsrArrays csr_arrays(const Case& c);

// Which array of csr_arrays(c).packed() element i is in, and its index there
// ("kv_indices[3]"), for findings about a modified CSR input.
std::string csr_element_name(const CsrArrays& a, int64_t i);

}  // namespace kvf
