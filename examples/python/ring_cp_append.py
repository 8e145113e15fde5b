"""A slot_mapping append that applies a sliding window and keeps its context-parallel rank's rows itself,
in numpy: the ring and context-parallel positions conventions of python-numpy: targets.

    kvfuzz run --target python-numpy:examples/python/ring_cp_append.py:kv_append \
               --config tests/e2e/python_kernels/serving.json

Some kernels get every row's slot and decide themselves which rows to write. kvfuzz sends a
function such calls only when its declaration lists "positions" under "windows" (ring caches) or
"cp_inputs" (context-parallel shards); it then gets these keywords in every call (docs/targets.md,
"Python targets"):

  window_positions  int32 [T] or None  row t's position in its request (-1: padding or invalid)
  window_seq_lens   int32 [T] or None  its request's length after the call (0 likewise)
  window_size, window_sinks  int       the ring's W and S (0, 0 without a ring)
  cp_positions      int32 [T] or None  row t's global position (-1: padding)
  cp_rank, cp_world_size, cp_interleave  int  this call's rank, N and I (0, 1, 1 without shards)

A ring row whose token is already outside the window (S <= p < len - (W - S)) is not written; a
sharded case calls the function once per rank on that rank's shard, and the rank writes the rows
whose position p has (p // I) % N == rank. Every other row follows slot_mapping as naive_copy.py's
do (caches of the input's dtype).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from naive_copy import kv_append as copy  # noqa: E402


def kv_append(key, value, key_cache, value_cache, slot_mapping, *, window_positions, window_seq_lens, window_size,
              window_sinks, cp_positions, cp_rank, cp_world_size, cp_interleave, **rest):
    keep = slot_mapping.copy()  # the rows this call writes; the rest become padding (-1)
    if window_positions is not None:
        pos, length = window_positions, window_seq_lens
        keep[(pos >= window_sinks) & (pos < length - (window_size - window_sinks))] = -1
    if cp_positions is not None:
        keep[(cp_positions >= 0) & ((cp_positions // cp_interleave) % cp_world_size != cp_rank)] = -1
    copy(key, value, key_cache, value_cache, keep, **rest)


kv_append.kvfuzz_capabilities = {
    "windows": ["none", "positions"],
    "cp_inputs": ["none", "positions"],
    "layouts": ["paged_nhd", "paged_hnd"],
    "scale_kinds": ["none"],
    "same_input_cache_dtype": True,
}
