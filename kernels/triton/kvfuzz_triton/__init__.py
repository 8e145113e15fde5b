"""kvfuzz's Triton KV-cache append kernels (the contract of docs/contract.md, bit-exact with the CUDA kernel).

torch API (CUDA tensors on a GPU; CPU tensors under TRITON_INTERPRET=1):

    kv_append(key, value, key_cache, value_cache, slot_mapping, *, layout, rope=None,
              scale_kind=None, k_scale=None, v_scale=None, k_scale_cache=None, v_scale_cache=None,
              invalid_slots=None, cache_dtype=None, variant=None, fp8_software=None,
              cp_positions=None, cp_rank=0, cp_world_size=1, cp_interleave=1) -> None

  key, value      [T_in, H, D] float16/bfloat16/float32 views (last dim contiguous; token and head
                  strides free: fused-QKV slices, unbind views, padded rows). Rows >= T are never read.
                  value may have its own head dim Dv (family kv_split: value [T_in, H, Dv], value_cache
                  [.., Dv] with its own strides, nhd/hnd) or be None with value_cache None (k_only: K
                  alone; no v_scale / v_scale_cache).
  key_cache,      the caches, of one dtype; `layout` says which dim is which and is never guessed
  value_cache     from the shape:
                    "nhd"  both [blocks, block_size, H, D]     any
                    "hnd"  both [blocks, H, block_size, D]     strides but D's, which is 1 (packed K/V:
                                                               kv[:, 0], kv[:, 1]; contiguous
                                                               per-sequence caches [B, S, H, D] are
                                                               "nhd" with block = sequence)
                    "vllm_legacy"  vLLM's legacy pair (its paged-attention v1/v2 caches):
                           key_cache   5-D [blocks, H, D/x, block_size, x], x-packed: element
                                       (block, pos, head, d) at [block, head, d // x, pos, d % x];
                           value_cache 4-D [blocks, H, D, block_size], transposed: at [block, head, d, pos].
                           vLLM's x is 16 bytes of cache elements (8 for 16-bit, 4 for float32, 16 for
                           fp8/int8); any x >= 1 the key_cache's last dim gives is honoured, and
                           every stride of both tensors is free (K and V may differ).
                  K's and V's strides are free in every layout; their blocks and block_size agree.
                  dtype float16/bfloat16/float32 (equal = bit copy, other = round to nearest even,
                  NaN canonical), float8_e4m3fn, float8_e5m2 or int8 (uint8 storage with
                  cache_dtype="fp8_e4m3"/"fp8_e5m2").
  slot_mapping    [T] int32/int64, contiguous. slot < 0: skipped; slot >= blocks*block_size: never
                  written, counted in `invalid_slots` (one-element int64 tensor, incremented) if given.
                  Duplicate non-negative slots are a precondition violation (not checked).
  scale_kind      required for fp8/int8 caches, refused otherwise: "per_tensor" (k_scale, v_scale
                  float32 [1]), "per_head" ([H]), "per_block" ([blocks, H], the slot's physical block),
                  "per_token_head" (computed max(amax, 1e-6)/QMAX, written to k_scale_cache and
                  v_scale_cache, float32 [blocks, block_size, H] for nhd or [blocks, H, block_size] for
                  hnd and vllm_legacy).
  rope            MLA (family mla) only: k_pe [T_in, rope_dim] (or [T_in, 1, rope_dim]), with key = kv_c
                  [T_in, D_c] (or [T_in, 1, D_c]), value = value_cache = None and key_cache the latent
                  cache [blocks, block_size, D_c + rope_dim]: each slot's entry is kv_c's row followed by
                  k_pe's. `layout` is then moot (one head); scale_kind None or "per_tensor" (k_scale).
  cp_positions    a context-parallel rank's call (docs/contract.md "Serving conventions", input positions):
                  int32 [T] global position of each row (-1: padding), contiguous; a row whose position
                  p >= 0 has (p // cp_interleave) % cp_world_size != cp_rank is skipped (another rank's
                  token), a row of position -1 follows slot_mapping alone. The caches are the rank's
                  shard; slot_mapping holds each row's local slot. cp_rank, cp_world_size and
                  cp_interleave need cp_positions.
  variant         None: "row" for a plain call (family kv, slot_mapping addressing without cp_positions,
                  nhd/hnd caches: kv_append_row_kernel, a program per token and tile of heads holding
                  whole rows, loaded before the slot is known), else "token"; "token" (program per
                  token: all heads) or "head" (program per token and head) ask for the general kernel.
  fp8_software    fp8 conversion in exact integer arithmetic (default under the interpreter, whose
                  fp8 casts are wrong) instead of the hardware cvt.rn.satfinite (default on the GPU).

  Inputs are never written; the call returns nothing; an empty batch launches nothing. Arguments
  are validated and a ValueError names the problem.

    kv_append_mla(kv_c, k_pe, kv_cache, slot_mapping, *, scale=None, cache_dtype=None,
                  invalid_slots=None, variant=None, fp8_software=None) -> None

  MLA in the shape of vLLM's concat_and_cache_mla(kv_c, k_pe, kv_cache, slot_mapping,
  kv_cache_dtype, scale): kv_append(kv_c, None, kv_cache, None, slot_mapping, layout="nhd",
  rope=k_pe), with `scale` (float32 [1], q = x / scale) for fp8/int8 caches.

    cp_slot_mapping(positions, requests, block_tables, block_size, *, rank, world_size, interleave,
                    out=None) -> int32 tensor

  The context-parallel slot-mapping producer (cp_slot_mapping.py): rank `rank`'s slot_mapping, -1
  for the rows whose token it does not hold; see that module's docstring.

    kv_append_quant(key, value, key_cache, value_cache, slot_mapping, *, quant_format, layout="nhd",
                    key_scales=None, value_scales=None, k_scale=None, v_scale=None, rope=None,
                    scale_layout="linear", rules=None, invalid_slots=None, fp8_software=None) -> None

  The quantised formats (kv_append_format.py; quant_api.py's docstring has every format's tensors):
  quant_format "nvfp4" (e2m1 pairs [nb, bs, H, D/2], e4m3 key_scales [nb, bs, H, D/16], fp32 [1]
  decode global scales k_scale / v_scale, scale_layout "linear" | "swizzled_v" | "swizzled" for
  vLLM's SM100 readers), "mxfp4", "mxfp8_e4m3", "mxfp8_e5m2" (e8m0 scales per 32 dims),
  "fp8_inline", "int8_inline" (rows of D codes and an fp32 scale at byte D), "asym_int8", "asym_int4"
  (fp32 key_scales [nb, bs, H, 2]: scale and zero point), "ds_mla" (kv_c, rope=k_pe, records of 656
  bytes), "indexer_k" (vLLM's [nb, bs, D + 4 D/128]). rules: FormatRules(nvfp4=, mx=, ds_mla=, indexer=,
  asym_arith=, asym_lanes=, int4_pairing=) or a dict, the conventions of src/golden/block_quant.h.

Launches (direct_launch.py, launch_plan.py): on the GPU each kernel goes through Triton's JIT on the
first call of each specialisation and is launched from the compiled kernel afterwards; a kv_append
or kv_append_quant call like an earlier valid one (same tensor types, shapes, strides, dtypes,
devices and 16-byte alignment, same other arguments; for kv_append_quant also the same distances
from key_cache to value_cache and key_scales to value_scales) is launched from that call's plan
without validation.
KVFUZZ_TRITON_DIRECT_LAUNCH=0 (read at import; set_direct_launch_mode("0") at run time) validates and
goes through the JIT every call; "check" re-derives every hit the slow way and raises on a difference.
Plans launch through fastlaunch.c, a launcher of our own, instead of Triton's, with the plan key read
through torch's C++ API where it can be built (fast_launch.py; on by default, verified and timed on an
H200; KVFUZZ_TRITON_FAST_LAUNCH=0 or set_fast_launch(False) turns it off; fast_launch_status() says
which launcher plans use and why).

Raw entry point (no torch needed; used by the interpreter worker with HostPtr shims):

    launch(KvAppendParams(...), variant=None, fp8_software=None, tile=None)

  KvAppendParams mirrors kvf::KvAppendParams field for field (strides in elements), except that the
  cache is addressed per field: k_field/v_field (FieldStrides: block, pos, head, x, dim0, dim1; see
  kv_append.py's docstring for the formula), by default the shared geometry with contiguous dims;
  legacy_fields() gives vllm_legacy's. The family fields (value_head_dim, has_value, rope,
  rope_stride_token, rope_stride_head, rope_dim) default to family kv. variant as kv_append's (None: the
  row kernel where it fits, unless a tile is given). tile=AOT_TILE runs the one tile the ahead-of-time build
  (kernels/triton/aot_compile.py) compiles. quant_format (not "none") with format_rules, format_cache,
  format_scales and the FormatFields k_codes, v_codes, k_scales, v_scales, k_zeros, v_zeros and
  rope_field runs kv_append_format_kernel instead (format_api.py). launch_cp_slot_mapping(CpSlotMappingParams(...)) runs
  the producer on raw parameters (kvf::CpSlotMappingParams).
"""
from .api import (DTYPES, LAYOUTS, SCALE_KINDS, FieldStrides, KvAppendParams, cache_fields, check_params,
                  check_ranks, geometry_field, interpreting, kv_append, kv_append_mla, launch, legacy_fields,
                  pick_variant, tile_sizes)
from .cp_slot_mapping import CpSlotMappingParams, cp_slot_mapping, cp_slot_mapping_kernel, launch_cp_slot_mapping
from .direct_launch import direct_launch_mode, set_direct_launch_mode
from .fast_launch import set_fast_launch
from .fast_launch import status as fast_launch_status
from .format_api import FORMATS, FormatField, FormatRules, launch_format
from .hostptr import HostPtr
from .kv_append import kv_append_kernel, kv_append_row_kernel
from .kv_append_format import kv_append_format_kernel
from .quant_api import kv_append_quant

__all__ = ["DTYPES", "FORMATS", "LAYOUTS", "SCALE_KINDS", "CpSlotMappingParams", "FieldStrides", "FormatField",
           "FormatRules", "HostPtr", "KvAppendParams", "cache_fields", "check_params", "check_ranks", "cp_slot_mapping",
           "cp_slot_mapping_kernel", "direct_launch_mode", "fast_launch_status", "geometry_field", "interpreting", "kv_append", "kv_append_format_kernel",
           "kv_append_kernel", "kv_append_mla", "kv_append_row_kernel", "kv_append_quant", "launch", "launch_cp_slot_mapping", "launch_format",
           "legacy_fields", "pick_variant", "set_direct_launch_mode", "set_fast_launch", "tile_sizes"]
