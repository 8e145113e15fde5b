"""A FlashInfer-style append on CSR page tables, in numpy: the CSR convention of python-numpy: targets.

    kvfuzz run --target python-numpy:examples/python/csr_append.py:append_paged_kv_cache \
               --config tests/e2e/python_kernels/serving.json

FlashInfer's append_paged_kv_cache(append_key, append_value, batch_indices, positions, paged_kv_cache,
kv_indices, kv_indptr, kv_last_page_len) addresses the cache through each request's page list
instead of a slot per row. kvfuzz sends a function CSR cases only when its declaration's
"addressings" lists "csr" (this one lists nothing else, so it gets CSR cases only); then
slot_mapping is None and these keywords carry the addressing (docs/targets.md, "Python targets"):

  batch_indices     int32 [T]      request of row t
  positions         int32 [T]      position of row t's token in its request
  kv_indptr         int32 [B + 1]  request b's pages are kv_indices[kv_indptr[b] : kv_indptr[b + 1]]
  kv_indices        int32 [kv_indptr[B]]
  kv_last_page_len  int32 [B]      tokens on request b's last page (0 for a request with no pages)

Row t goes to page kv_indices[kv_indptr[b] + positions[t] // block_size], offset positions[t] %
block_size. A CSR call has no padding and no invalid rows. Caches of the input's dtype only, as in
naive_copy.py.
"""


def append_paged_kv_cache(key, value, key_cache, value_cache, slot_mapping, *, layout, batch_indices, positions,
                          kv_indices, kv_indptr, kv_last_page_len, input_dtype, cache_dtype, **unused):
    if slot_mapping is not None:
        raise ValueError("append_paged_kv_cache takes CSR page tables only (declared addressings: csr)")
    if cache_dtype != input_dtype:
        raise ValueError(f"append_paged_kv_cache only copies: {input_dtype} -> {cache_dtype}")
    block_size = key_cache.shape[1] if layout == "nhd" else key_cache.shape[2]
    for t, (b, pos) in enumerate(zip(batch_indices.tolist(), positions.tolist())):
        first, end = int(kv_indptr[b]), int(kv_indptr[b + 1])
        seq_len = (end - first - 1) * block_size + int(kv_last_page_len[b])  # tokens the pages hold
        if not 0 <= pos < seq_len:
            raise ValueError(f"row {t}: position {pos} outside request {b}'s {seq_len} tokens")
        page = int(kv_indices[first + pos // block_size])
        for src, cache in ((key, key_cache), (value, value_cache)):
            if layout == "nhd":
                cache[page, pos % block_size] = src[t]
            else:
                cache[page, :, pos % block_size] = src[t]


append_paged_kv_cache.kvfuzz_capabilities = {
    "addressings": ["csr"],
    "layouts": ["paged_nhd", "paged_hnd"],
    "scale_kinds": ["none"],
    "same_input_cache_dtype": True,
}
