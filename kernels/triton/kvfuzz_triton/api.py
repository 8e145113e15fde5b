"""Launchers of kv_append_kernel: the raw-parameter entry point and the torch API."""
import dataclasses
import os

import triton

from .kv_append import kv_append_kernel

DTYPES = ("f16", "bf16", "f32", "fp8_e4m3", "fp8_e5m2", "int8")  # index = kvf::DType
FLOAT_DTYPES = DTYPES[:3]
QUANT_DTYPES = DTYPES[3:]
SCALE_KINDS = ("none", "per_tensor", "per_head", "per_block", "per_token_head")  # index = kvf::ScaleKind
VARIANTS = ("token", "head")
QMAX = {"fp8_e4m3": 448.0, "fp8_e5m2": 57344.0, "int8": 127.0}

TILE_ELEMENTS = 4096  # elements of one program's [BLOCK_H, BLOCK_D] tile

# The ahead-of-time build (kernels/triton/aot_compile.py, the C++ `triton` target) compiles one
# kernel per (input dtype, cache dtype, slot dtype) with this fixed tile and warp count; the kernel
# loops over heads and dims, so the tile fits every head count and head_dim.
AOT_TILE = (4, 64)  # (BLOCK_H, BLOCK_D)
AOT_NUM_WARPS = 4


def interpreting():
    """True when kernels run under Triton's CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@dataclasses.dataclass(frozen=True)
class FieldStrides:
    """Where one cache field (K or V) keeps element (block, pos, head, d), in elements from its base:

        block*block + pos*pos + head*head + (d % x)*dim0 + (d // x)*dim1

    the format model's layout (kernels/cuda/kv_format.cuh) with the dim axis as the mode
    (x, D/x):(dim0, dim1). Plain geometries (NHD, HND, contiguous, packed) are x = 1 and dim1 = the
    dim stride (1); see legacy_fields() for vLLM's x-packed K and transposed V.
    """
    block: int
    pos: int
    head: int
    x: int = 1  # >= 1; 1: the dim axis is flat with stride dim1
    dim0: int = 1  # stride of d % x (inside an x-chunk)
    dim1: int = 1  # stride of d // x (between x-chunks; the dim stride when x = 1)


def geometry_field(stride_block, stride_pos, stride_head):
    """The field of a plain cache geometry: the given strides, dims contiguous."""
    return FieldStrides(stride_block, stride_pos, stride_head)


def legacy_fields(stride_block, stride_head, block_size, x):
    """(K, V) fields of vLLM's legacy caches, dense inside a head: K [nb, H, D/x, bs, x] and
    V [nb, H, D, bs] (kvf::xpacked_key_layout / transposed_value_layout); x = 16 bytes of cache
    elements in vLLM (8 for f16/bf16, 4 for f32, 16 for fp8/int8)."""
    k = FieldStrides(stride_block, x, stride_head, x=x, dim0=1, dim1=block_size * x)
    v = FieldStrides(stride_block, 1, stride_head, x=1, dim0=1, dim1=block_size)
    return k, v


@dataclasses.dataclass
class KvAppendParams:
    """One append call in raw form; mirrors kvf::KvAppendParams (kernels/cuda/kv_append.cuh).

    Pointer fields take anything Triton accepts as a pointer: torch tensors, or HostPtr under the
    interpreter (the slot_mapping pointer's dtype, "i32" or "i64", selects the index type). Strides
    are in elements. Optional pointers are None when absent.

    The cache is addressed per field: k_field and v_field (FieldStrides) when given, else both
    geometry_field(stride_block, stride_pos, stride_head), kvf's shared geometry with contiguous
    dims. Where kvf::KvAppendParams says vllm_legacy, give k_field, v_field = legacy_fields(...).
    """
    key: object
    value: object
    key_stride_token: int
    key_stride_head: int
    value_stride_token: int
    value_stride_head: int
    slot_mapping: object
    num_slots: int
    k_cache: object
    v_cache: object
    num_blocks: int
    block_size: int
    stride_block: int
    stride_pos: int
    stride_head: int
    num_heads: int
    head_dim: int
    input_dtype: str = "f16"
    cache_dtype: str = "f16"
    invalid_slots: object = None  # int64 counter of slots >= capacity
    scale_kind: str = "none"
    k_scale: object = None  # fp32 static scales: [1], [H] or [num_blocks, H]
    v_scale: object = None
    k_scale_cache: object = None  # fp32 per_token_head scale caches, addressed with the strides below
    v_scale_cache: object = None
    scale_stride_block: int = 0
    scale_stride_pos: int = 0
    scale_stride_head: int = 0
    k_field: FieldStrides = None  # None: geometry_field(stride_block, stride_pos, stride_head)
    v_field: FieldStrides = None


def fields(p):
    """(K, V) FieldStrides of p."""
    plain = geometry_field(p.stride_block, p.stride_pos, p.stride_head)
    return p.k_field or plain, p.v_field or plain


def check_params(p):
    """Raises ValueError for a parameter combination the kernel does not implement."""
    if p.input_dtype not in FLOAT_DTYPES:
        raise ValueError(f"input dtype must be one of {FLOAT_DTYPES}, got {p.input_dtype!r}")
    if p.cache_dtype not in DTYPES:
        raise ValueError(f"cache dtype must be one of {DTYPES}, got {p.cache_dtype!r}")
    if p.scale_kind not in SCALE_KINDS:
        raise ValueError(f"scale_kind must be one of {SCALE_KINDS}, got {p.scale_kind!r}")
    quantised = p.cache_dtype in QUANT_DTYPES
    if quantised and p.scale_kind == "none":
        raise ValueError(f"a {p.cache_dtype} cache needs a scale_kind")
    if not quantised and p.scale_kind != "none":
        raise ValueError(f"scale_kind {p.scale_kind!r} needs a quantised cache, not {p.cache_dtype}")
    if p.scale_kind == "per_token_head":
        if p.k_scale_cache is None or p.v_scale_cache is None:
            raise ValueError("per_token_head needs k_scale_cache and v_scale_cache")
    elif p.scale_kind != "none" and (p.k_scale is None or p.v_scale is None):
        raise ValueError(f"{p.scale_kind} needs k_scale and v_scale")
    for name in ("num_slots", "num_heads", "head_dim", "num_blocks", "block_size"):
        if getattr(p, name) < 0:
            raise ValueError(f"{name} must be >= 0")
    if p.block_size == 0 and p.num_blocks != 0:
        raise ValueError("block_size must be > 0")
    for name, f in zip(("k_field", "v_field"), fields(p)):
        if f.x < 1 or f.x >= 2 ** 31:
            raise ValueError(f"{name}.x must be in [1, 2^31), got {f.x}")


def tile_sizes(num_heads, head_dim, variant):
    """(BLOCK_H, BLOCK_D): the whole head dim, and heads up to TILE_ELEMENTS (1 head head-major)."""
    block_d = triton.next_power_of_2(max(head_dim, 1))
    if variant == "head":
        return 1, block_d
    block_h = min(triton.next_power_of_2(max(num_heads, 1)), max(1, TILE_ELEMENTS // block_d))
    return block_h, block_d


def pick_variant(stride_pos, stride_head):
    """The default variant: token-major for every layout.

    Measured on an H200 (reports/bench/2026-11-30-h200): on HND caches the token-major variant runs
    as fast as on NHD (each head's row of D elements is still one contiguous store), while the
    head-major one (a program per slot entry and head) is 3.6x slower at T = 65536. The head-major
    variant stays available (variant="head") and is what the AOT `triton` target runs on HND-like
    strides, so both variants are fuzzed.
    """
    return "token"


def launch(p, *, variant=None, fp8_software=None, num_warps=4, tile=None):
    """Runs kv_append_kernel on raw parameters. variant: "token", "head" or None (by strides).

    Returns the compiled kernel on the GPU (its .asm holds the PTX), None otherwise.

    fp8_software: None = the exact integer fp8 conversion under the interpreter and the hardware
    conversion on the GPU (both are bit-identical to the contract on sm_90).
    tile: (BLOCK_H, BLOCK_D) powers of two, e.g. AOT_TILE; None = tile_sizes() for the shape.
    """
    check_params(p)
    variant = variant or pick_variant(p.stride_pos, p.stride_head)
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if p.num_slots == 0 or p.num_heads == 0 or p.head_dim == 0:
        return None  # nothing to write; never launch an empty grid
    if fp8_software is None:
        fp8_software = interpreting()
    block_h, block_d = tile if tile is not None else tile_sizes(p.num_heads, p.head_dim, variant)
    heads_per_program = block_h if variant == "head" else p.num_heads
    dynamic = p.scale_kind == "per_token_head"
    k_scale = p.k_scale_cache if dynamic else p.k_scale
    v_scale = p.v_scale_cache if dynamic else p.v_scale
    # Stand-ins for absent pointers, never dereferenced (float caches read no scale; has_counter = 0).
    dummy = p.key
    k, v = fields(p)
    grid = (p.num_slots, triton.cdiv(p.num_heads, heads_per_program))
    return kv_append_kernel[grid](
        p.key, p.value, p.slot_mapping, p.k_cache, p.v_cache,
        dummy if k_scale is None else k_scale, dummy if v_scale is None else v_scale,
        p.slot_mapping if p.invalid_slots is None else p.invalid_slots,  # an integer pointer either way
        p.num_heads, p.head_dim,
        p.key_stride_token, p.key_stride_head, p.value_stride_token, p.value_stride_head,
        p.num_blocks, p.block_size,
        k.block, k.pos, k.head, k.x, k.dim0, k.dim1,
        v.block, v.pos, v.head, v.x, v.dim0, v.dim1,
        p.scale_stride_block, p.scale_stride_pos, p.scale_stride_head,
        SCALE_KINDS.index(p.scale_kind), int(p.invalid_slots is not None), heads_per_program,
        IN_DTYPE=DTYPES.index(p.input_dtype), CACHE_DTYPE=DTYPES.index(p.cache_dtype),
        FP8_SOFTWARE=bool(fp8_software), BLOCK_H=block_h, BLOCK_D=block_d, num_warps=num_warps)


# ---------------------------------------------------------------------------------------------
# torch API

def _torch_dtype_names():
    import torch
    names = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32", torch.int8: "int8"}
    for attr, name in (("float8_e4m3fn", "fp8_e4m3"), ("float8_e5m2", "fp8_e5m2")):
        if hasattr(torch, attr):
            names[getattr(torch, attr)] = name
    return names


def _is_tensor(x):
    import torch
    return isinstance(x, torch.Tensor)


LAYOUTS = ("nhd", "hnd", "vllm_legacy")


def cache_fields(layout, num_heads, head_dim, k_shape, k_strides, v_shape, v_strides):
    """(num_blocks, block_size, k_field, v_field) of caches of `layout` with these shapes and element
    strides (torch's .shape and .stride()); ValueError when they do not fit the layout or key's
    [T, num_heads, head_dim]. See the package docstring for the layouts."""
    k_shape, v_shape = tuple(k_shape), tuple(v_shape)
    k_strides, v_strides = tuple(k_strides), tuple(v_strides)
    if layout == "vllm_legacy":
        if len(k_shape) != 5 or len(v_shape) != 4:
            raise ValueError(f"vllm_legacy caches are key_cache [blocks, heads, head_dim/x, block_size, x] (5-D) "
                             f"and value_cache [blocks, heads, head_dim, block_size] (4-D), got {k_shape} and {v_shape}")
        num_blocks, heads, chunks, block_size, x = k_shape
        if heads != num_heads or chunks * x != head_dim:
            raise ValueError(f"key_cache is {k_shape} (vllm_legacy): {heads} heads x {chunks}*{x} dims, "
                             f"but key has {num_heads} heads x {head_dim} dims")
        if x < 1:
            raise ValueError(f"key_cache's last dim x must be >= 1, got {k_shape}")
        want = (num_blocks, heads, head_dim, block_size)
        if v_shape != want:
            raise ValueError(f"value_cache must be {want} ([blocks, heads, head_dim, block_size]) to go with "
                             f"key_cache {k_shape}, got {v_shape}")
        sb, sh, s_chunk, sp, sx = k_strides
        vb, vh, vd, vp = v_strides
        return (num_blocks, block_size, FieldStrides(sb, sp, sh, x=x, dim0=sx, dim1=s_chunk),
                FieldStrides(vb, vp, vh, x=1, dim0=1, dim1=vd))
    if len(k_shape) != 4 or len(v_shape) != 4:
        raise ValueError(f"key_cache and value_cache must be 4-D, got {k_shape} and {v_shape}")
    if k_shape != v_shape or k_strides != v_strides:
        raise ValueError("key_cache and value_cache must have the same shape and strides")
    if layout == "nhd":
        num_blocks, block_size, cache_heads, cache_dim = k_shape
        stride_block, stride_pos, stride_head, stride_dim = k_strides
    else:
        num_blocks, cache_heads, block_size, cache_dim = k_shape
        stride_block, stride_head, stride_pos, stride_dim = k_strides
    if (cache_heads, cache_dim) != (num_heads, head_dim):
        raise ValueError(f"cache is {k_shape} ({layout}): {cache_heads} heads x {cache_dim} dims, "
                         f"but key has {num_heads} heads x {head_dim} dims")
    if head_dim > 1 and stride_dim != 1:
        raise ValueError("the last dim of the caches must be contiguous (stride 1)")
    field = geometry_field(stride_block, stride_pos, stride_head)
    return num_blocks, block_size, field, field


def kv_append(key, value, key_cache, value_cache, slot_mapping, *, layout, scale_kind=None,
              k_scale=None, v_scale=None, k_scale_cache=None, v_scale_cache=None,
              invalid_slots=None, cache_dtype=None, variant=None, fp8_software=None):
    """Appends key/value rows to a paged KV cache in place (see the package docstring)."""
    import torch

    def fail(msg):
        raise ValueError(f"kv_append: {msg}")

    names = _torch_dtype_names()
    if layout not in LAYOUTS:
        fail(f'layout must be "nhd" ([blocks, block_size, heads, head_dim]), "hnd" '
             f'([blocks, heads, block_size, head_dim]) or "vllm_legacy" (key_cache [blocks, heads, head_dim/x, '
             f'block_size, x], value_cache [blocks, heads, head_dim, block_size]), got {layout!r}')
    for name, t in (("key", key), ("value", value), ("key_cache", key_cache),
                    ("value_cache", value_cache), ("slot_mapping", slot_mapping)):
        if not _is_tensor(t):
            fail(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if key.dim() != 3 or value.dim() != 3:
        fail(f"key and value must be 3-D [tokens, heads, head_dim], got {tuple(key.shape)} and {tuple(value.shape)}")
    if key.shape != value.shape:
        fail(f"key and value shapes differ: {tuple(key.shape)} vs {tuple(value.shape)}")
    if key.dtype != value.dtype:
        fail(f"key and value dtypes differ: {key.dtype} vs {value.dtype}")
    input_dtype = names.get(key.dtype)
    if input_dtype not in FLOAT_DTYPES:
        fail(f"key/value dtype must be float16, bfloat16 or float32, got {key.dtype}")
    num_rows, num_heads, head_dim = key.shape
    if head_dim > 1 and (key.stride(2) != 1 or value.stride(2) != 1):
        fail("the last dim of key and value must be contiguous (stride 1)")
    if slot_mapping.dtype not in (torch.int32, torch.int64):
        fail(f"slot_mapping must be int32 or int64, got {slot_mapping.dtype}")
    if slot_mapping.dim() != 1:
        fail(f"slot_mapping must be 1-D, got shape {tuple(slot_mapping.shape)}")
    num_slots = slot_mapping.shape[0]
    if num_slots > 1 and slot_mapping.stride(0) != 1:
        fail("slot_mapping must be contiguous")
    if num_slots > num_rows:
        fail(f"slot_mapping has {num_slots} entries but key has only {num_rows} rows")

    try:
        num_blocks, block_size, k_field, v_field = cache_fields(
            layout, num_heads, head_dim, key_cache.shape, key_cache.stride(), value_cache.shape, value_cache.stride())
    except ValueError as e:
        fail(str(e))
    if key_cache.dtype != value_cache.dtype:
        fail(f"key_cache and value_cache dtypes differ: {key_cache.dtype} vs {value_cache.dtype}")

    tensor_cache_dtype = "uint8" if key_cache.dtype == torch.uint8 else names.get(key_cache.dtype)
    if cache_dtype is None:
        if tensor_cache_dtype == "uint8":
            fail('a uint8 cache needs cache_dtype="fp8_e4m3" or "fp8_e5m2"')
        if tensor_cache_dtype is None:
            fail(f"unsupported cache dtype {key_cache.dtype}")
        cache_dtype = tensor_cache_dtype
    else:
        if cache_dtype not in DTYPES:
            fail(f"cache_dtype must be one of {DTYPES}, got {cache_dtype!r}")
        if not (cache_dtype == tensor_cache_dtype
                or (tensor_cache_dtype == "uint8" and cache_dtype in ("fp8_e4m3", "fp8_e5m2"))):
            fail(f"cache_dtype {cache_dtype!r} does not match the cache tensors' dtype {key_cache.dtype}")

    quantised = cache_dtype in QUANT_DTYPES
    if quantised and scale_kind is None:
        fail(f"a {cache_dtype} cache needs scale_kind (per_tensor, per_head, per_block or per_token_head)")
    if not quantised:
        if scale_kind is not None:
            fail(f"scale_kind={scale_kind!r} given for a {cache_dtype} cache (scales apply to fp8/int8 caches only)")
        if any(s is not None for s in (k_scale, v_scale, k_scale_cache, v_scale_cache)):
            fail(f"scales given for a {cache_dtype} cache (scales apply to fp8/int8 caches only)")
        scale_kind = "none"
    elif scale_kind not in SCALE_KINDS[1:]:
        fail(f"scale_kind must be one of {SCALE_KINDS[1:]}, got {scale_kind!r}")

    scale_strides = (0, 0, 0)
    if scale_kind == "per_token_head":
        if k_scale is not None or v_scale is not None:
            fail("per_token_head computes its scales: pass k_scale_cache/v_scale_cache, not k_scale/v_scale")
        for name, t in (("k_scale_cache", k_scale_cache), ("v_scale_cache", v_scale_cache)):
            if not _is_tensor(t):
                fail(f"per_token_head needs {name} (float32, {'[blocks, block_size, heads]' if layout == 'nhd' else '[blocks, heads, block_size]'})")
            if t.dtype != torch.float32:
                fail(f"{name} must be float32, got {t.dtype}")
        want = (num_blocks, block_size, num_heads) if layout == "nhd" else (num_blocks, num_heads, block_size)
        if tuple(k_scale_cache.shape) != want or tuple(v_scale_cache.shape) != want:
            fail(f"scale caches must have shape {want} ({layout}), got {tuple(k_scale_cache.shape)} and {tuple(v_scale_cache.shape)}")
        if k_scale_cache.stride() != v_scale_cache.stride():
            fail("k_scale_cache and v_scale_cache must have the same strides")
        s = k_scale_cache.stride()
        scale_strides = (s[0], s[1], s[2]) if layout == "nhd" else (s[0], s[2], s[1])
    elif quantised:
        if k_scale_cache is not None or v_scale_cache is not None:
            fail(f"scale caches are for per_token_head only, not {scale_kind}")
        want = {"per_tensor": (1,), "per_head": (num_heads,), "per_block": (num_blocks, num_heads)}[scale_kind]
        for name, t in (("k_scale", k_scale), ("v_scale", v_scale)):
            if not _is_tensor(t):
                fail(f"{scale_kind} needs {name} (a float32 tensor of shape {want})")
            if t.dtype != torch.float32:
                fail(f"{name} must be float32, got {t.dtype}")
            shape = tuple(t.shape)
            if not (shape == want or (scale_kind == "per_tensor" and t.numel() == 1)):
                fail(f"{name} must have shape {want} for {scale_kind}, got {shape}")
            if not t.is_contiguous():
                fail(f"{name} must be contiguous")

    if invalid_slots is not None:
        if not _is_tensor(invalid_slots) or invalid_slots.dtype != torch.int64 or invalid_slots.numel() != 1:
            fail("invalid_slots must be a one-element int64 tensor")

    tensors = [key, value, key_cache, value_cache, slot_mapping, k_scale, v_scale, k_scale_cache,
               v_scale_cache, invalid_slots]
    devices = {t.device for t in tensors if t is not None}
    if len(devices) != 1:
        fail(f"all tensors must be on one device, got {sorted(str(d) for d in devices)}")
    device = devices.pop()
    if device.type == "cpu" and not interpreting():
        fail("CPU tensors run only under Triton's interpreter (TRITON_INTERPRET=1)")
    if variant is not None and variant not in VARIANTS:
        fail(f"variant must be one of {VARIANTS} or None, got {variant!r}")

    p = KvAppendParams(
        key=key, value=value, key_stride_token=key.stride(0), key_stride_head=key.stride(1),
        value_stride_token=value.stride(0), value_stride_head=value.stride(1),
        slot_mapping=slot_mapping, num_slots=num_slots, k_cache=key_cache, v_cache=value_cache,
        num_blocks=num_blocks, block_size=block_size, stride_block=k_field.block, stride_pos=k_field.pos,
        stride_head=k_field.head, k_field=k_field, v_field=v_field, num_heads=num_heads, head_dim=head_dim,
        input_dtype=input_dtype,
        cache_dtype=cache_dtype, invalid_slots=invalid_slots, scale_kind=scale_kind,
        k_scale=k_scale, v_scale=v_scale, k_scale_cache=k_scale_cache, v_scale_cache=v_scale_cache,
        scale_stride_block=scale_strides[0], scale_stride_pos=scale_strides[1],
        scale_stride_head=scale_strides[2])
    if device.type == "cuda":
        with torch.cuda.device(device):
            launch(p, variant=variant, fp8_software=fp8_software)
    else:
        launch(p, variant=variant, fp8_software=fp8_software)
