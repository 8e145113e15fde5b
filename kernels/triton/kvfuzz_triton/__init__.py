"""kvfuzz's Triton KV-cache append kernels (the contract of docs/contract.md, bit-exact with the CUDA kernel).

torch API (CUDA tensors on a GPU; CPU tensors under TRITON_INTERPRET=1):

    kv_append(key, value, key_cache, value_cache, slot_mapping, *, layout,
              scale_kind=None, k_scale=None, v_scale=None, k_scale_cache=None, v_scale_cache=None,
              invalid_slots=None, cache_dtype=None, variant=None, fp8_software=None) -> None

  key, value      [T_in, H, D] float16/bfloat16/float32 views (last dim contiguous; token and head
                  strides free: fused-QKV slices, unbind views, padded rows). Rows >= T are never read.
  key_cache,      4-D caches of one shape, strides and dtype; `layout` says which dim is which and is
  value_cache     never guessed from the shape: "nhd" = [blocks, block_size, H, D],
                  "hnd" = [blocks, H, block_size, D]. Any strides (packed K/V: kv[:, 0], kv[:, 1]);
                  contiguous per-sequence caches [B, S, H, D] are "nhd" with block = sequence.
                  dtype float16/bfloat16/float32 (equal = bit copy, other = round to nearest even,
                  NaN canonical), float8_e4m3fn, float8_e5m2 or int8 (uint8 storage with
                  cache_dtype="fp8_e4m3"/"fp8_e5m2").
  slot_mapping    [T] int32/int64, contiguous. slot < 0: skipped; slot >= blocks*block_size: never
                  written, counted in `invalid_slots` (one-element int64 tensor, incremented) if given.
                  Duplicate non-negative slots are a precondition violation (not checked).
  scale_kind      required for fp8/int8 caches, refused otherwise: "per_tensor" (k_scale, v_scale
                  float32 [1]), "per_head" ([H]), "per_block" ([blocks, H], the slot's physical block),
                  "per_token_head" (computed max(amax, 1e-6)/QMAX, written to k_scale_cache and
                  v_scale_cache, float32 [blocks, block_size, H] for nhd or [blocks, H, block_size] for hnd).
  variant         "token" (program per token: all heads) or "head" (program per token and head);
                  None picks "head" when slots of one head are nearer than heads of one slot (HND).
  fp8_software    fp8 conversion in exact integer arithmetic (default under the interpreter, whose
                  fp8 casts are wrong) instead of the hardware cvt.rn.satfinite (default on the GPU).

  Inputs are never written; the call returns nothing; an empty batch launches nothing. Arguments
  are validated and a ValueError names the problem.

Raw entry point (no torch needed; used by the interpreter worker with HostPtr shims):

    launch(KvAppendParams(...), variant=None, fp8_software=None, tile=None)

  KvAppendParams mirrors kvf::KvAppendParams field for field (strides in elements). tile=AOT_TILE
  runs the one tile the ahead-of-time build (kernels/triton/aot_compile.py) compiles.
"""
from .api import (DTYPES, SCALE_KINDS, KvAppendParams, check_params, interpreting, kv_append, launch,
                  pick_variant, tile_sizes)
from .hostptr import HostPtr
from .kv_append import kv_append_kernel

__all__ = ["DTYPES", "SCALE_KINDS", "HostPtr", "KvAppendParams", "check_params", "interpreting", "kv_append",
           "kv_append_kernel", "launch", "pick_variant", "tile_sizes"]
