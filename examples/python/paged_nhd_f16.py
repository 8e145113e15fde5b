"""A Python kernel that declares what it supports: paged NHD caches, f16 in and out, nothing else.

    kvfuzz run --target python-numpy:examples/python/paged_nhd_f16.py:kv_append \
               --config tests/e2e/python_kernels/copy.json

kvfuzz reads kv_append.kvfuzz_capabilities when it starts the worker (a function
kv_append_capabilities() in this module returning the same dict works too; one of the two) and sends
the kernel only cases inside it. A drawn case outside is counted by its reason in the run summary
("kvfuzz: skipped N cases outside the target's capabilities (layout paged_hnd: 12, input dtype bf16:
9, ...)") and replaced by a case drawn inside; shrinking and replay stay inside too. The keys mirror
the plugin ABI's kvfz_capabilities (docs/targets.md, src/gen/capabilities.h); a missing
key restricts nothing, and a bad value stops kvfuzz with exit code 2 naming the key.

The convention is python-numpy's (examples/python/kv_append_numpy.py). "features" leaves out
"invalid_slot_counter": the kernel gets invalid_slots=None and kvfuzz counts slots >= capacity itself
(it still checks that they are never written).
"""


def kv_append(key, value, key_cache, value_cache, slot_mapping, *, layout, scale_kind=None, invalid_slots=None,
              input_dtype, cache_dtype, **unused_scales):
    if layout != "nhd" or input_dtype != "f16" or cache_dtype != "f16" or scale_kind is not None:
        raise ValueError(f"paged_nhd_f16: got layout {layout}, {input_dtype} -> {cache_dtype}, scale_kind {scale_kind}")
    if invalid_slots is not None:
        raise ValueError("paged_nhd_f16 declares no invalid-slot counter, yet got one")
    num_blocks, block_size = key_cache.shape[:2]
    for token, slot in enumerate(slot_mapping.tolist()):
        if slot < 0:
            continue  # padding
        block, pos = divmod(slot, block_size)
        if block >= num_blocks:
            continue  # invalid: never written
        key_cache[block, pos] = key[token]
        value_cache[block, pos] = value[token]


kv_append.kvfuzz_capabilities = {
    "layouts": ["paged_nhd"],
    "input_dtypes": ["f16"],
    "cache_dtypes": ["f16"],
    "scale_kinds": ["none"],  # float caches only
    "features": ["fused_qkv", "strided_input", "padded_cache", "graph_padding_rows", "unaligned"],
}
