"""An LMDeploy-style fill_kv_cache from block tables, in numpy: the request-structure convention.

    kvfuzz run --target python-numpy:examples/python/fill_kv_cache.py:fill_kv_cache \
               --config tests/e2e/python_kernels/serving.json

LMDeploy's fill_kv_cache(k_states, v_states, k_caches, v_caches, q_start_loc, q_seq_length,
kv_seq_length, max_q_seq_length, block_offsets) computes each token's slot itself, from the
request's sequence lengths and block table, instead of reading a slot_mapping. A function whose
declaration's "inputs" lists "requests" gets that structure in every call (docs/targets.md, "Python
targets"), besides slot_mapping:

  batch_indices  int32 [T]     request of row t, -1 for padding and invalid rows (never written)
  positions      int32 [T]     position of row t's token in its request, -1 likewise
  seq_lens       int32 [B]     each request's length after the call (LMDeploy's kv_seq_length)
  context_lens   int32 [B]     its tokens before the call
  block_tables   int32 [B, W]  its block ids, -1 past the table's end (LMDeploy's block_offsets)

Row t goes to block block_tables[b, positions[t] // block_size], offset positions[t] % block_size
(b = batch_indices[t]): slot_mapping[t] again. A request's rows need not be contiguous (padding and
invalid rows may sit between them), so this kernel takes each row's request from batch_indices rather
than from LMDeploy's q_start_loc; tests/e2e/python_kernels/buggy.py has the version that does not.
It never reads slot_mapping, so it does not count invalid slots (declared: no invalid_slot_counter;
kvfuzz then adds the count itself and checks the slots are never written).
"""


def fill_kv_cache(key, value, key_cache, value_cache, slot_mapping, *, layout, batch_indices, positions, seq_lens,
                  context_lens, block_tables, input_dtype, cache_dtype, **unused):
    if cache_dtype != input_dtype:
        raise ValueError(f"fill_kv_cache only copies: {input_dtype} -> {cache_dtype}")
    block_size = key_cache.shape[1] if layout == "nhd" else key_cache.shape[2]
    for t, (b, pos) in enumerate(zip(batch_indices.tolist(), positions.tolist())):
        if b < 0:
            continue  # padding or an invalid slot
        if not context_lens[b] <= pos < seq_lens[b]:
            raise ValueError(f"row {t}: position {pos} outside request {b}'s new tokens [{context_lens[b]}, {seq_lens[b]})")
        block = int(block_tables[b, pos // block_size])
        for src, cache in ((key, key_cache), (value, value_cache)):
            if layout == "nhd":
                cache[block, pos % block_size] = src[t]
            else:
                cache[block, :, pos % block_size] = src[t]


fill_kv_cache.kvfuzz_capabilities = {
    "inputs": ["requests"],
    "layouts": ["paged_nhd", "paged_hnd"],
    "scale_kinds": ["none"],
    "same_input_cache_dtype": True,
    "features": ["fused_qkv", "strided_input", "padded_cache", "graph_padding_rows", "unaligned"],
}
