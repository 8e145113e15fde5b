"""kvfuzz_triton's quantised-format kernel behind the format convention of python-numpy: targets.

    kvfuzz run --target python-numpy:examples/python/quant_formats_numpy.py:kv_append \
               --config configs/interp-quant-formats.json

A function whose declaration's "quant_formats" lists formats gets their cases (docs/targets.md,
"Python targets"; this one lists the ten formats and not "none", so every case it gets is in one).
In a format call key_cache and value_cache are None, and these keywords describe the cache:

  quant_format   "nvfp4" "mxfp8_e4m3" "mxfp8_e5m2" "mxfp4" "ds_mla" "indexer_k" "fp8_inline"
                 "int8_inline" "asym_int8" "asym_int4" (None in a classic call)
  quant_rules    {nvfp4, mx, ds_mla, indexer, asym_arith, asym_lanes, int4_pairing}: the
                 conventions' names, kvfuzz_triton.FormatRules' fields
  quant_group    dims per scale (16 nvfp4, 32 MX, 128 ds_mla and indexer_k, D the others)
  format_cache   uint8 [bytes] the cache buffer (codes; ds_mla's, indexer_k's and the inline
                 formats' scales too)
  format_scales  uint8 [bytes] the buffer of the scales (format_cache itself for those formats)
  format_fields  {k_codes, v_codes, k_scales, v_scales, k_zeros, v_zeros, rope: None or a dict}: each
                 stored field as kvfuzz_triton.FormatField (offset, block, pos_x, pos0, pos1, head,
                 dim_x, dim0, dim1: its elements from byte 0 of its buffer, nibbles for 4-bit codes)
                 plus dtype and shape [blocks, block_size, heads, n]
  format_views   {FIELD: array or None}: the same fields as typed 4-D views where the layout is one
                 stride per axis (4-bit codes as uint8 pairs); None for vLLM's swizzled NVFP4 scales
  k_scale, v_scale  nvfp4's fp32 [1] global (decode) scales

This example hands the fields to kvfuzz_triton's format kernel as they are, under Triton's CPU
interpreter through HostPtr shims (as kv_append_numpy.py does for the classic caches).
"""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before kvfuzz_triton defines its kernel

from kvfuzz_triton import FormatField, FormatRules, HostPtr, KvAppendParams, launch  # noqa: E402

POINTER = {"f16": "fp16", "bf16": "bf16", "f32": "fp32"}
LAYOUT_KEYS = ("offset", "block", "pos_x", "pos0", "pos1", "head", "dim_x", "dim0", "dim1")
FORMATS = ["nvfp4", "mxfp8_e4m3", "mxfp8_e5m2", "mxfp4", "ds_mla", "indexer_k", "fp8_inline", "int8_inline",
           "asym_int8", "asym_int4"]


def _elements(array):
    return [s // array.itemsize for s in array.strides]


def kv_append(key, value, key_cache, value_cache, slot_mapping, *, quant_format, quant_rules, format_cache,
              format_scales, format_fields, k_scale=None, v_scale=None, scale_kind=None, rope=None,
              invalid_slots=None, input_dtype, cache_dtype, **unused):
    if quant_format is None:
        raise ValueError("quant_formats_numpy writes the quantised formats only (declared: no \"none\")")

    def ptr(array, dtype):
        return None if array is None else HostPtr(array.ctypes.data, dtype)

    fields = {n: None if f is None else FormatField(**{k: f[k] for k in LAYOUT_KEYS}) for n, f in format_fields.items()}
    num_blocks, block_size = format_fields["k_codes"]["shape"][:2]
    if rope is not None:  # ds_mla: one latent entry, kv_c's dims then k_pe's
        num_heads, head_dim = 1, key.shape[1] + rope.shape[1]
        key_strides = (_elements(key)[0], 0)
        extra = {"rope": ptr(rope, POINTER[input_dtype]), "rope_stride_token": _elements(rope)[0], "rope_dim": rope.shape[1]}
    else:
        num_heads, head_dim = key.shape[1], key.shape[2]
        key_strides = tuple(_elements(key)[:2])
        extra = {}
    value_strides = (0, 0) if value is None else tuple(_elements(value)[:2])
    launch(KvAppendParams(
        key=ptr(key, POINTER[input_dtype]), value=ptr(value, POINTER[input_dtype]),
        key_stride_token=key_strides[0], key_stride_head=key_strides[1],
        value_stride_token=value_strides[0], value_stride_head=value_strides[1],
        slot_mapping=ptr(slot_mapping, "i32" if slot_mapping.itemsize == 4 else "i64"), num_slots=slot_mapping.shape[0],
        k_cache=None, v_cache=None, num_blocks=num_blocks, block_size=block_size, stride_block=0, stride_pos=0,
        stride_head=0, num_heads=num_heads, head_dim=head_dim, input_dtype=input_dtype, cache_dtype=cache_dtype,
        invalid_slots=ptr(invalid_slots, "i64"), scale_kind=scale_kind or "none",
        k_scale=ptr(k_scale, "fp32"), v_scale=ptr(v_scale, "fp32"), has_value=value is not None,
        quant_format=quant_format, format_rules=FormatRules(**quant_rules),
        format_cache=HostPtr(format_cache.ctypes.data, "u8"), format_scales=HostPtr(format_scales.ctypes.data, "u8"),
        k_codes=fields["k_codes"], v_codes=fields["v_codes"], k_scales=fields["k_scales"], v_scales=fields["v_scales"],
        k_zeros=fields["k_zeros"], v_zeros=fields["v_zeros"], rope_field=fields["rope"], **extra))


# Every format under every convention, in the families and layouts they come in; no classic cache.
kv_append.kvfuzz_capabilities = {
    "quant_formats": FORMATS,
    "quant_rules": ["nvfp4:flashinfer", "nvfp4:flashinfer_precise", "scale_layout:linear", "scale_layout:swizzled_v",
                    "scale_layout:swizzled", "mx:ocp_floor", "mx:nv_ceil", "ds_mla:flt_min", "ds_mla:pow2",
                    "indexer:fp32", "indexer:ue8m0_log2f", "indexer:ue8m0_exact", "asym_arith:f32", "asym_arith:f16",
                    "asym_arith:bf16", "asym_lanes:exact", "asym_lanes:zero_padded_pow2", "int4_pairing:split_half",
                    "int4_pairing:adjacent"],
    "families": ["kv", "kv_split", "k_only", "mla"],
}
