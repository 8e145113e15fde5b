"""kvfuzz_triton's kernel behind the numpy convention of kvfuzz's python-numpy: targets.

    kvfuzz run --target python-numpy:examples/python/kv_append_numpy.py:kv_append --config configs/interp.json

This is the worked example for Python kernels on machines without torch (CI): kvfuzz calls
kv_append() with numpy arrays that view its guarded arena, and the Triton kernel runs on them under
Triton's CPU interpreter through HostPtr shims. With torch, the same kernel is fuzzed through its own
torch API: --target python:kvfuzz_triton.api:kv_append (CPU, interpreter) or
python-cuda:kvfuzz_triton.api:kv_append (GPU).

The numpy convention (docs/targets.md): the torch convention of
kvfuzz_triton.api.kv_append, with numpy arrays instead of tensors and the dtypes spelled out, as
numpy has no bf16 or fp8:

    fn(key, value, key_cache, value_cache, slot_mapping, *, layout, scale_kind, k_scale, v_scale,
       k_scale_cache, v_scale_cache, invalid_slots, input_dtype, cache_dtype[, rope])

  key, value      [T_in, H, D] float16 / uint16 (bf16 bits) / float32 views; rows >= T are padding
  key_cache,      [blocks, block_size, H, D] (layout "nhd") or [blocks, H, block_size, D] ("hnd"),
  value_cache     both; or vLLM's legacy pair (layout "vllm_legacy"): key_cache [blocks, H, D/x,
                  block_size, x] (x = 16 bytes of cache elements) and value_cache [blocks, H, D,
                  block_size]; float16 / uint16 (bf16) / float32 / uint8 (fp8 bits) / int8; any strides
  slot_mapping    [T] int32 / int64; < 0 padding, >= blocks * block_size invalid (counted)
  scale_kind      None for float caches, else "per_tensor" | "per_head" | "per_block" | "per_token_head"
  k_scale,        float32 [1] / [H] / [blocks, H] static scales, or None
  v_scale
  k_scale_cache,  float32 [blocks, block_size, H] ("nhd") / [blocks, H, block_size] (otherwise) for
  v_scale_cache   per_token_head, or None
  invalid_slots   int64 [1]: add the number of slot entries >= capacity
  input_dtype,    "f16" "bf16" "f32" / "f16" "bf16" "f32" "fp8_e4m3" "fp8_e5m2" "int8"
  cache_dtype

The format families (docs/formats.md) change the arguments, not the signature:
  kv_split  value [T_in, H, Dv] and value_cache [.., Dv] with V's own strides (nhd/hnd)
  k_only    value, value_cache, v_scale, v_scale_cache None
  mla       key = kv_c [T_in, D_c], rope = k_pe [T_in, rope_dim] (a keyword only mla passes),
            key_cache = the latent cache [blocks, block_size, D_c + rope_dim]; value, value_cache None;
            scale_kind None or "per_tensor"

kvfuzz sends vllm_legacy cases and the families other than kv only to a function whose declared
layouts and families list them, as this one's do (kv_append.kvfuzz_capabilities below).

Context-parallel shards (docs/targets.md) need nothing of their own here: a function whose declared
cp_inputs list "slot_mapping", as this one's do, is called once per rank, each call a plain append
of that rank's shard (its caches, scales and slot_mapping, -1 where another rank holds the token).
"""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before kvfuzz_triton defines its kernel

from kvfuzz_triton import FieldStrides, HostPtr, KvAppendParams, cache_fields, launch  # noqa: E402

# Triton pointer types of the stored elements (1-byte caches are addressed as bytes).
POINTER = {"f16": "fp16", "bf16": "bf16", "f32": "fp32", "fp8_e4m3": "u8", "fp8_e5m2": "u8", "int8": "u8"}


def _elements(array):
    """Strides in elements."""
    return [s // array.itemsize for s in array.strides]


def kv_append(key, value, key_cache, value_cache, slot_mapping, *, layout, scale_kind=None, k_scale=None,
              v_scale=None, k_scale_cache=None, v_scale_cache=None, invalid_slots=None, input_dtype, cache_dtype,
              rope=None):
    def ptr(array, dtype):
        return None if array is None else HostPtr(array.ctypes.data, dtype)

    family = {}  # KvAppendParams' family fields; none for kv
    if rope is not None:  # mla: one head; the entry is kv_c's dims, then k_pe's
        num_rows, head_dim, num_heads = key.shape[0], key.shape[1] + rope.shape[1], 1
        key_strides = (_elements(key)[0], 0)
        num_blocks, block_size = key_cache.shape[:2]
        k_field = v_field = FieldStrides(_elements(key_cache)[0], _elements(key_cache)[1], 0)
        family = {"has_value": False, "rope": ptr(rope, POINTER[input_dtype]),
                  "rope_stride_token": _elements(rope)[0], "rope_dim": rope.shape[1]}
    else:
        num_rows, num_heads, head_dim = key.shape
        key_strides = _elements(key)[:2]
        value_dim = None if value is None else value.shape[2]
        num_blocks, block_size, k_field, v_field = cache_fields(
            layout, num_heads, head_dim, key_cache.shape, _elements(key_cache),
            None if value_cache is None else value_cache.shape, None if value_cache is None else _elements(value_cache),
            value_dim)
        if value is None:  # k_only
            family = {"has_value": False}
        elif value_dim != head_dim:  # kv_split
            family = {"value_head_dim": value_dim}
    value_strides = (0, 0) if value is None else _elements(value)[:2]
    scale_strides = (0, 0, 0)
    if k_scale_cache is not None:
        s = _elements(k_scale_cache)
        scale_strides = (s[0], s[1], s[2]) if layout == "nhd" else (s[0], s[2], s[1])
    launch(KvAppendParams(
        key=ptr(key, POINTER[input_dtype]), value=ptr(value, POINTER[input_dtype]),
        key_stride_token=key_strides[0], key_stride_head=key_strides[1],
        value_stride_token=value_strides[0], value_stride_head=value_strides[1],
        slot_mapping=ptr(slot_mapping, "i32" if slot_mapping.itemsize == 4 else "i64"),
        num_slots=slot_mapping.shape[0],
        k_cache=ptr(key_cache, POINTER[cache_dtype]), v_cache=ptr(value_cache, POINTER[cache_dtype]),
        num_blocks=num_blocks, block_size=block_size, stride_block=k_field.block, stride_pos=k_field.pos,
        stride_head=k_field.head, k_field=k_field, v_field=v_field, num_heads=num_heads, head_dim=head_dim,
        input_dtype=input_dtype,
        cache_dtype=cache_dtype, invalid_slots=ptr(invalid_slots, "i64"), scale_kind=scale_kind or "none",
        k_scale=ptr(k_scale, "fp32"), v_scale=ptr(v_scale, "fp32"),
        k_scale_cache=ptr(k_scale_cache, "fp32"), v_scale_cache=ptr(v_scale_cache, "fp32"),
        scale_stride_block=scale_strides[0], scale_stride_pos=scale_strides[1], scale_stride_head=scale_strides[2],
        **family))


# Every layout, vllm_legacy included, every family and context-parallel shards with each rank's own
# slot_mapping (kvfuzz leaves vllm_legacy, the families other than kv and shards out of undeclared
# functions); no other limit.
kv_append.kvfuzz_capabilities = {
    "layouts": ["paged_nhd", "paged_hnd", "contiguous_bshd", "contiguous_bhsd", "packed_kv_nhd",
                "packed_content_hnd", "vllm_legacy"],
    "families": ["kv", "kv_split", "k_only", "mla"],
    "cp_inputs": ["none", "slot_mapping"],
}
