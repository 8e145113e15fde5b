"""Python kernels that fail on purpose in some cases (tests/e2e/test_python_targets.py).

Each is examples/python/naive_copy.py's correct kernel, except in cases with a slot count of 3
modulo 4, where it raises, exits or segfaults. Use with --config tests/e2e/python_kernels/copy.json.
"""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples", "python"))
from naive_copy import kv_append as copy  # noqa: E402


def unlucky(slot_mapping):
    return slot_mapping.shape[0] % 4 == 3


def raises(*args, **kwargs):
    if unlucky(args[4]):
        raise ValueError("deliberate failure for this slot count")
    copy(*args, **kwargs)


def exits(*args, **kwargs):
    if unlucky(args[4]):
        os._exit(3)
    copy(*args, **kwargs)


def segfaults(*args, **kwargs):
    if unlucky(args[4]):
        ctypes.string_at(0)  # reads address 0: SIGSEGV
    copy(*args, **kwargs)


def skips_padding_check(key, value, key_cache, value_cache, slot_mapping, **kwargs):
    """A real bug: padding slots (-1) are written, to the cache's last slot (Python's negative index)."""
    layout = kwargs["layout"]
    block_size = key_cache.shape[1] if layout == "nhd" else key_cache.shape[2]
    for token, slot in enumerate(slot_mapping.tolist()):
        block, pos = divmod(slot, block_size)
        if block >= key_cache.shape[0]:
            kwargs["invalid_slots"][0] += 1
            continue
        for src, cache in ((key, key_cache), (value, value_cache)):
            if layout == "nhd":
                cache[block, pos] = src[token]
            else:
                cache[block, :, pos] = src[token]


NOT_A_FUNCTION = 42
