"""Python kernels of the serving conventions with a real bug each (tests/e2e/test_python_targets.py).

Each is one of examples/python/'s correct kernels with one mistake of the kind such kernels make;
kvfuzz must catch every one. Use with --config tests/e2e/python_kernels/serving.json.
"""


def csr_last_page_len_off_by_one(key, value, key_cache, value_cache, slot_mapping, *, layout, batch_indices,
                                 positions, kv_indices, kv_indptr, kv_last_page_len, **unused):
    """examples/python/csr_append.py, reading kv_last_page_len as the offset of the last token instead of
    the count of tokens on the last page: each request's last token is taken to be past its pages and
    dropped."""
    block_size = key_cache.shape[1] if layout == "nhd" else key_cache.shape[2]
    for t, (b, pos) in enumerate(zip(batch_indices.tolist(), positions.tolist())):
        first, end = int(kv_indptr[b]), int(kv_indptr[b + 1])
        seq_len = (end - first - 1) * block_size + int(kv_last_page_len[b]) - 1  # bug: one token short
        if pos >= seq_len:
            continue
        page = int(kv_indices[first + pos // block_size])
        for src, cache in ((key, key_cache), (value, value_cache)):
            if layout == "nhd":
                cache[page, pos % block_size] = src[t]
            else:
                cache[page, :, pos % block_size] = src[t]


csr_last_page_len_off_by_one.kvfuzz_capabilities = {
    "addressings": ["csr"], "layouts": ["paged_nhd", "paged_hnd"], "scale_kinds": ["none"],
    "same_input_cache_dtype": True}


def fill_kv_cache_contiguous_rows(key, value, key_cache, value_cache, slot_mapping, *, layout, seq_lens,
                                  context_lens, block_tables, **unused):
    """examples/python/fill_kv_cache.py as LMDeploy's kernel indexes: request b's rows taken to be rows
    q_start_loc[b] .. + q_seq_len[b] (the running sum of its new tokens) at positions context_len + i,
    ignoring batch_indices and positions. Scattered positions put a row at the wrong position, and
    padding or invalid rows between a request's rows shift every later row onto the wrong request's
    block table."""
    block_size = key_cache.shape[1] if layout == "nhd" else key_cache.shape[2]
    row = 0
    for b in range(seq_lens.shape[0]):
        for i in range(int(seq_lens[b] - context_lens[b])):
            pos = int(context_lens[b]) + i
            block = int(block_tables[b, pos // block_size])
            if row < key.shape[0] and block >= 0:
                for src, cache in ((key, key_cache), (value, value_cache)):
                    if layout == "nhd":
                        cache[block, pos % block_size] = src[row]
                    else:
                        cache[block, :, pos % block_size] = src[row]
            row += 1


fill_kv_cache_contiguous_rows.kvfuzz_capabilities = {
    "inputs": ["requests"], "layouts": ["paged_nhd", "paged_hnd"], "scale_kinds": ["none"],
    "same_input_cache_dtype": True,
    "features": ["fused_qkv", "strided_input", "padded_cache", "graph_padding_rows", "unaligned"]}


def writes_its_block_tables(key, value, key_cache, value_cache, slot_mapping, *, block_tables, **kwargs):
    """examples/python/fill_kv_cache.py that also scribbles on its read-only block_tables input."""
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples", "python"))
    from fill_kv_cache import fill_kv_cache
    fill_kv_cache(key, value, key_cache, value_cache, slot_mapping, block_tables=block_tables, **kwargs)
    if block_tables.size:
        block_tables[-1, -1] = 12345


writes_its_block_tables.kvfuzz_capabilities = dict(fill_kv_cache_contiguous_rows.kvfuzz_capabilities)


def _ring_cp():
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples", "python"))
    import ring_cp_append
    return ring_cp_append.kv_append


def ring_ignores_window(key, value, key_cache, value_cache, slot_mapping, *, window_positions, **kwargs):
    """examples/python/ring_cp_append.py without the window: tokens already outside it are written too,
    over the ring slot a later token of the call owns."""
    _ring_cp()(key, value, key_cache, value_cache, slot_mapping, window_positions=None, **kwargs)


def cp_ignores_rank(key, value, key_cache, value_cache, slot_mapping, *, cp_positions, **kwargs):
    """examples/python/ring_cp_append.py that writes every rank's rows into each rank's shard."""
    _ring_cp()(key, value, key_cache, value_cache, slot_mapping, cp_positions=None, **kwargs)


ring_ignores_window.kvfuzz_capabilities = cp_ignores_rank.kvfuzz_capabilities = {
    "windows": ["none", "positions"], "cp_inputs": ["none", "positions"], "layouts": ["paged_nhd", "paged_hnd"],
    "scale_kinds": ["none"], "same_input_cache_dtype": True}
