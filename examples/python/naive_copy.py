"""The least a Python kernel for kvfuzz must do: a naive numpy append for unquantised caches.

    kvfuzz run --target python-numpy:examples/python/naive_copy.py:kv_append \
               --config tests/e2e/python_kernels/copy.json

One loop over slot_mapping, one row copy per slot: caches of the input's dtype only (the profile
above generates nothing else; quantised or converting cases are refused with a ValueError, which
kvfuzz reports as a launch_error). The convention is python-numpy's (examples/python/kv_append_numpy.py).
"""


def kv_append(key, value, key_cache, value_cache, slot_mapping, *, layout, scale_kind=None, invalid_slots=None,
              input_dtype, cache_dtype, **unused_scales):
    if cache_dtype != input_dtype or scale_kind is not None:
        raise ValueError(f"naive_copy only copies: {input_dtype} -> {cache_dtype} (scale_kind {scale_kind})")
    num_blocks = key_cache.shape[0]
    block_size = key_cache.shape[1] if layout == "nhd" else key_cache.shape[2]
    for token, slot in enumerate(slot_mapping.tolist()):
        if slot < 0:
            continue  # padding
        block, pos = divmod(slot, block_size)
        if block >= num_blocks:
            if invalid_slots is not None:
                invalid_slots[0] += 1  # never written, counted
            continue
        for src, cache in ((key, key_cache), (value, value_cache)):
            if layout == "nhd":
                cache[block, pos] = src[token]
            else:
                cache[block, :, pos] = src[token]
