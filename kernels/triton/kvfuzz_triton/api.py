"""Launchers of kv_append_kernel: the raw-parameter entry point and the torch API."""
import dataclasses
import operator
import os

import triton

from . import enums
from .direct_launch import DirectLauncher, LruCache, Unsupported, direct_launch_mode, is_compiled, on_device
from .kv_append import kv_append_kernel, kv_append_row_kernel
from .launch_plan import LaunchPlan, Slot, keyed_pointers, lookup, remember

KV_APPEND = DirectLauncher(kv_append_kernel)  # launches kv_append_kernel (direct_launch.py)
KV_APPEND_ROW = DirectLauncher(kv_append_row_kernel)

DTYPES = enums.DTYPES[:6]  # the classic element types, index = kvf::DType (kernels/enums.json)
FLOAT_DTYPES = DTYPES[:3]
QUANT_DTYPES = DTYPES[3:]
SCALE_KINDS = enums.SCALE_KINDS  # index = kvf::ScaleKind
VARIANTS = ("token", "head", "row")  # "row": kv_append_row_kernel (row_kernel_fits)
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

    Format families (docs/formats.md), as in kvf::KvAppendParams: kv_split gives value_head_dim
    (V's rows [.., H, value_head_dim]) and V's own v_field; k_only and mla set has_value=False (value,
    v_cache and V's scales are then never touched and may be None); mla gives rope (k_pe, its
    strides) and rope_dim: K's dims [head_dim - rope_dim, head_dim) are read from rope's row, the
    others from key's (kv_c). The defaults are family kv.
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
    value_head_dim: int = 0  # 0: head_dim
    has_value: bool = True
    rope: object = None  # [T_in, H, rope_dim] view (mla's k_pe), last dim contiguous
    rope_stride_token: int = 0
    rope_stride_head: int = 0
    rope_dim: int = 0  # 0: K's row is key's alone
    # FlashInfer's CSR addressing instead of slot_mapping (docs/contract.md "Serving conventions"):
    # int32 [T] batch_indices and positions, kv_indices and kv_indptr [B + 1]; None: slot_mapping.
    csr_batch_indices: object = None
    csr_positions: object = None
    csr_kv_indices: object = None
    csr_kv_indptr: object = None
    # A sliding-window ring whose kernel applies the window: int32 [T] positions and request lengths
    # (docs/contract.md "Serving conventions"); None: slot_mapping says everything.
    window_positions: object = None
    window_seq_lens: object = None
    window_size: int = 0
    window_sinks: int = 0
    # A context-parallel rank that localises its tokens itself (docs/contract.md "Serving conventions",
    # input positions): int32 [T] global positions, -1 = padding; only the rows of rank cp_rank (of
    # cp_world_size, interleave cp_interleave) are written. None: every row is this call's.
    cp_positions: object = None
    cp_rank: int = 0
    cp_world_size: int = 1
    cp_interleave: int = 1
    # A quantised format (format_api.py, kvf::KvAppendParams' format part): "none" is everything above.
    # Otherwise the codes, scales and zero points are FormatFields of format_cache (byte 0 of the
    # cache buffer: codes, ds_mla's rope) and format_scales (byte 0 of the buffer of the scales: the
    # cache buffer for ds_mla, indexer_k and the inline formats); k_cache, v_cache, cache_dtype and
    # scale_kind are unused, and k_scale / v_scale hold nvfp4's fp32 global scales.
    quant_format: str = "none"
    format_rules: object = None  # format_api.FormatRules; None: the defaults
    format_cache: object = None
    format_scales: object = None
    k_codes: object = None  # format_api.FormatField of K's codes (ds_mla: the latent codes)
    v_codes: object = None
    k_scales: object = None
    v_scales: object = None
    k_zeros: object = None  # asym_int8 / asym_int4: the zero points
    v_zeros: object = None
    rope_field: object = None  # ds_mla: the rope dims' field, in input elements


def fields(p):
    """(K, V) FieldStrides of p."""
    plain = geometry_field(p.stride_block, p.stride_pos, p.stride_head)
    return p.k_field or plain, p.v_field or plain


def value_dim(p):
    """V's head dim: value_head_dim, or head_dim when 0."""
    return p.value_head_dim or p.head_dim


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
        if p.k_scale_cache is None or (p.has_value and p.v_scale_cache is None):
            raise ValueError("per_token_head needs k_scale_cache" + (" and v_scale_cache" if p.has_value else ""))
    elif p.scale_kind != "none" and (p.k_scale is None or (p.has_value and p.v_scale is None)):
        raise ValueError(f"{p.scale_kind} needs k_scale" + (" and v_scale" if p.has_value else ""))
    if p.has_value and (p.value is None or p.v_cache is None):
        raise ValueError("has_value needs value and v_cache (has_value=False for k_only and mla)")
    if not 0 <= p.rope_dim <= p.head_dim:
        raise ValueError(f"rope_dim must be in [0, head_dim = {p.head_dim}], got {p.rope_dim}")
    if p.rope_dim > 0 and p.rope is None:
        raise ValueError("rope_dim > 0 needs rope (k_pe)")
    for name in ("num_slots", "num_heads", "head_dim", "num_blocks", "block_size", "value_head_dim"):
        if getattr(p, name) < 0:
            raise ValueError(f"{name} must be >= 0")
    if p.block_size == 0 and p.num_blocks != 0:
        raise ValueError("block_size must be > 0")
    for name, f in zip(("k_field", "v_field"), fields(p)):
        if f.x < 1 or f.x >= 2 ** 31:
            raise ValueError(f"{name}.x must be in [1, 2^31), got {f.x}")
    check_ranks(p.cp_rank, p.cp_world_size, p.cp_interleave, "cp_")


def _integer(v):
    """v as a Python int (anything with __index__ but bool), or None."""
    if isinstance(v, bool):
        return None
    try:
        return operator.index(v)
    except TypeError:
        return None


def check_ranks(rank, world_size, interleave, prefix=""):
    """(rank, world_size, interleave) as ints; ValueError unless 1 <= world_size, interleave < 2^31 and
    0 <= rank < world_size (the kernels take them as int32; docs/contract.md "Serving conventions")."""
    out = []
    for name, v in (("world_size", world_size), ("interleave", interleave)):
        i = _integer(v)
        if i is None or not 1 <= i < 2 ** 31:
            raise ValueError(f"{prefix}{name} must be an integer in [1, 2^31), got {v!r}")
        out.append(i)
    r = _integer(rank)
    if r is None or not 0 <= r < out[0]:
        raise ValueError(f"{prefix}rank must be an integer in [0, {prefix}world_size = {out[0]}), got {rank!r}")
    return r, out[0], out[1]


def tile_sizes(num_heads, head_dim, variant):
    """(BLOCK_H, BLOCK_D): the whole head dim (the larger of K's and V's), and heads up to
    TILE_ELEMENTS (1 head head-major)."""
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


def launch(p, *, variant=None, fp8_software=None, num_warps=None, tile=None):
    """Runs the append on raw parameters. variant: "token" or "head" (kv_append_kernel, a program per
    token or per token and head tile), "row" (kv_append_row_kernel), or None: "row" when
    row_kernel_fits(p) and no tile is given, else pick_variant(). num_warps None: 4, or
    row_num_warps() for the row kernel.

    Returns the compiled kernel on the GPU (its .asm holds the PTX), None otherwise.

    fp8_software: None = the exact integer fp8 conversion under the interpreter and the hardware
    conversion on the GPU (both are bit-identical to the contract on sm_90).
    tile: (BLOCK_H, BLOCK_D) powers of two, e.g. AOT_TILE; None = tile_sizes() for the shape.

    On the GPU the kernel is launched through KV_APPEND (direct_launch.py): Triton's JIT on the first
    call of each specialisation, its compiled kernel directly afterwards.
    """
    if p.quant_format != "none":
        from .format_api import FORMAT_AOT_BLOCK, launch_format
        return launch_format(p, fp8_software=interpreting() if fp8_software is None else fp8_software,
                             num_warps=4 if num_warps is None else num_warps,
                             block=FORMAT_AOT_BLOCK if tile == AOT_TILE else None)
    call = kernel_call(p, variant=variant, fp8_software=fp8_software, tile=tile)
    if call is None:
        return None  # nothing to write; never launch an empty grid
    launcher, grid, args, constexprs = call
    if num_warps is None:
        num_warps = row_num_warps(p, constexprs["BLOCK_H"] * constexprs["BLOCK_D"]) if launcher is KV_APPEND_ROW else 4
    return launcher.launch(grid, args, constexprs, {"num_warps": num_warps})


def row_kernel_fits(p):
    """Whether kv_append_row_kernel writes p: family kv (V rows of key's head dim, no rope), slot_mapping
    addressing without a ring window or a context-parallel filter, and K and V fields whose dims are
    contiguous (the nhd and hnd geometries, not vllm_legacy's packing); no quantised format."""
    return (p.quant_format == "none" and bool(p.has_value) and p.rope is None and p.rope_dim == 0
            and value_dim(p) == p.head_dim and p.csr_batch_indices is None and p.window_positions is None
            and p.cp_positions is None and all(f.x == 1 and f.dim1 == 1 for f in fields(p)))


def row_num_warps(p, tile_elements):
    """The row kernel's warps for p's tile of tile_elements (BLOCK_H x BLOCK_D): 16 elements a thread
    (two 16-byte vectors of f16/bf16), but 4 for a quantised cache of at most 256 rows, where each
    element's IEEE division is on the critical path of a short call; 1 to 8 warps.

    Measured on an H200 (reports/gpu/2026-12-04-h200-triton-row, H 8 x D 128, 1,024 elements): bf16
    T = 1 / 16 / 256 / 4096 with 1, 2, 4, 8 warps 1.34 / 1.26 / 1.24 / 1.27, 1.51 / 1.43 / 1.41 / 1.44,
    1.77 / 1.71 / 1.78 / 1.80, 6.36 / 5.96 / 6.50 / 7.73 µs; fp8 per tensor T = 1 3.94 / 2.72 / 2.11 /
    1.91, T = 256 4.21 / 3.02 / 2.46 / 2.31, T = 65536 125 / 120 / 138 / 182 µs."""
    per_thread = 4 if p.cache_dtype in QUANT_DTYPES and p.num_slots <= 256 else 16
    return max(1, min(8, tile_elements // (32 * per_thread)))


def kernel_call(p, *, variant=None, fp8_software=None, tile=None):
    """(launcher, grid, positional arguments, constexprs) of the kernel that writes raw parameters p
    (launch()'s arguments): KV_APPEND_ROW for variant "row" (None: when row_kernel_fits(p) and no tile
    is given), else KV_APPEND (kernel_arguments()). None when there is nothing to write; ValueError for
    parameters check_params refuses, or variant "row" for parameters the row kernel does not take."""
    if variant is None and tile is None and row_kernel_fits(p):
        variant = "row"
    if variant != "row":
        call = kernel_arguments(p, variant=variant, fp8_software=fp8_software, tile=tile)
        return None if call is None else (KV_APPEND, *call)
    check_params(p)
    if tile is not None or not row_kernel_fits(p):
        raise ValueError("variant \"row\" takes family kv, slot_mapping addressing without a window or "
                         "cp_positions, and caches whose dims are contiguous (nhd, hnd), and no tile")
    if p.num_slots == 0 or p.num_heads == 0 or p.head_dim == 0:
        return None
    block_h, block_d = tile_sizes(p.num_heads, p.head_dim, "token")
    k, v = fields(p)
    k_scale, v_scale, dummy = _scale_pointers(p)
    args = (p.key, p.value, p.slot_mapping, p.k_cache, p.v_cache, k_scale, v_scale,
            p.slot_mapping if p.invalid_slots is None else p.invalid_slots,
            p.num_heads, p.head_dim, p.key_stride_token, p.key_stride_head, p.value_stride_token, p.value_stride_head,
            p.num_blocks, p.block_size, k.block, k.pos, k.head, v.block, v.pos, v.head,
            p.scale_stride_block, p.scale_stride_pos, p.scale_stride_head, int(p.invalid_slots is not None))
    constexprs = dict(SCALE_KIND=SCALE_KINDS.index(p.scale_kind), IN_DTYPE=DTYPES.index(p.input_dtype),
                      CACHE_DTYPE=DTYPES.index(p.cache_dtype),
                      FP8_SOFTWARE=bool(interpreting() if fp8_software is None else fp8_software),
                      BLOCK_H=block_h, BLOCK_D=block_d)
    return KV_APPEND_ROW, (p.num_slots, triton.cdiv(p.num_heads, block_h)), args, constexprs


def _scale_pointers(p):
    """(K's, V's scale pointer, the stand-in of absent pointers) of kv_append_kernel's and
    kv_append_row_kernel's arguments: the static scales, or the scale caches for per_token_head."""
    dynamic = p.scale_kind == "per_token_head"
    k_scale = p.k_scale_cache if dynamic else p.k_scale
    v_scale = p.v_scale_cache if dynamic else p.v_scale
    # Stand-ins for absent pointers, never dereferenced (float caches read no scale; has_counter = 0).
    dummy = p.key
    # No V (k_only, mla): V's scale pointer is never read, but the JIT specialises on its element type,
    # and the tile's scale must be fp32 on every branch: K's scales stand in.
    return (dummy if k_scale is None else k_scale,
            v_scale if v_scale is not None else (k_scale if k_scale is not None else dummy), dummy)


def kernel_arguments(p, *, variant=None, fp8_software=None, tile=None):
    """(grid, positional arguments, constexprs) of kv_append_kernel for raw parameters p (launch()'s
    arguments), or None when there is nothing to write. ValueError for parameters check_params refuses."""
    check_params(p)
    variant = variant or pick_variant(p.stride_pos, p.stride_head)
    if variant not in VARIANTS[:2]:
        raise ValueError(f"variant must be one of {VARIANTS[:2]}, got {variant!r}")
    if p.num_slots == 0 or p.num_heads == 0 or p.head_dim == 0:
        return None
    if fp8_software is None:
        fp8_software = interpreting()
    block_h, block_d = tile if tile is not None else tile_sizes(p.num_heads, max(p.head_dim, value_dim(p)), variant)
    heads_per_program = block_h if variant == "head" else p.num_heads
    k_scale, v_scale, dummy = _scale_pointers(p)
    k, v = fields(p)
    value = p.value if p.has_value else dummy
    v_cache = p.v_cache if p.has_value else p.k_cache
    grid = (p.num_slots, triton.cdiv(p.num_heads, heads_per_program))
    csr = p.csr_batch_indices is not None
    slots = p.slot_mapping if not csr else p.csr_batch_indices  # a CSR call has no slot_mapping: never read
    csr_stand_in = slots  # slot_mapping addressing: the CSR pointers are never read
    args = (
        p.key, value, slots, p.k_cache, v_cache, k_scale, v_scale,
        slots if p.invalid_slots is None else p.invalid_slots,  # an integer pointer either way
        p.num_heads, p.head_dim,
        p.key_stride_token, p.key_stride_head, p.value_stride_token, p.value_stride_head,
        p.num_blocks, p.block_size,
        k.block, k.pos, k.head, k.x, k.dim0, k.dim1,
        v.block, v.pos, v.head, v.x, v.dim0, v.dim1,
        p.scale_stride_block, p.scale_stride_pos, p.scale_stride_head,
        SCALE_KINDS.index(p.scale_kind), int(p.invalid_slots is not None), heads_per_program,
        value_dim(p), int(bool(p.has_value)), dummy if p.rope is None else p.rope, p.rope_stride_token,
        p.rope_stride_head, p.rope_dim,
        int(csr), p.csr_batch_indices if csr else csr_stand_in, p.csr_positions if csr else csr_stand_in,
        p.csr_kv_indices if csr else csr_stand_in, p.csr_kv_indptr if csr else csr_stand_in,
        int(p.window_positions is not None), p.window_size, p.window_sinks,
        csr_stand_in if p.window_positions is None else p.window_positions,
        csr_stand_in if p.window_seq_lens is None else p.window_seq_lens,
        int(p.cp_positions is not None), p.cp_rank, p.cp_world_size, p.cp_interleave,
        csr_stand_in if p.cp_positions is None else p.cp_positions)
    constexprs = dict(IN_DTYPE=DTYPES.index(p.input_dtype), CACHE_DTYPE=DTYPES.index(p.cache_dtype),
                      FP8_SOFTWARE=bool(fp8_software), BLOCK_H=block_h, BLOCK_D=block_d)
    return grid, args, constexprs


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


def unresolved_view(t):
    """"negative" or "conjugate" when tensor t is a view with torch's negative or conjugate bit set (its
    memory holds the values negated or conjugated; the kernels read memory as it is), else None."""
    if getattr(t, "is_neg", None) is not None and t.is_neg():
        return "negative"
    if getattr(t, "is_conj", None) is not None and t.is_conj():
        return "conjugate"
    return None


def check_resolved(names_and_tensors, fail):
    """fail(message) for the first tensor that is an unresolved negative or conjugate view."""
    for name, t in names_and_tensors:
        bit = None if t is None else unresolved_view(t)
        if bit is not None:
            fail(f"{name} is a {bit} view (torch's {bit} bit set: its memory is not its values); pass "
                 f"{name}.resolve_{'neg' if bit == 'negative' else 'conj'}()")


LAYOUTS = ("nhd", "hnd", "vllm_legacy")


def _geometry(layout, shape, strides, num_heads, head_dim, what, source):
    """(num_blocks, block_size, FieldStrides) of one 4-D nhd/hnd cache tensor holding rows of
    num_heads x head_dim; ValueError naming the cache (`what`) and its `source` when it does not fit."""
    if layout == "nhd":
        num_blocks, block_size, cache_heads, cache_dim = shape
        stride_block, stride_pos, stride_head, stride_dim = strides
    else:
        num_blocks, cache_heads, block_size, cache_dim = shape
        stride_block, stride_head, stride_pos, stride_dim = strides
    if (cache_heads, cache_dim) != (num_heads, head_dim):
        raise ValueError(f"{what} is {shape} ({layout}): {cache_heads} heads x {cache_dim} dims, "
                         f"but {source} has {num_heads} heads x {head_dim} dims")
    if head_dim > 1 and stride_dim != 1:
        raise ValueError("the last dim of the caches must be contiguous (stride 1)")
    return num_blocks, block_size, geometry_field(stride_block, stride_pos, stride_head)


def cache_fields(layout, num_heads, head_dim, k_shape, k_strides, v_shape, v_strides, value_head_dim=None):
    """(num_blocks, block_size, k_field, v_field) of caches of `layout` with these shapes and element
    strides (torch's .shape and .stride()); ValueError when they do not fit the layout or key's
    [T, num_heads, head_dim] (and value's [T, num_heads, value_head_dim], default head_dim). v_shape
    None: no V cache (k_only; v_field None). See the package docstring for the layouts."""
    k_shape, k_strides = tuple(k_shape), tuple(k_strides)
    value_head_dim = head_dim if value_head_dim is None else value_head_dim
    if layout == "vllm_legacy":
        if v_shape is None or value_head_dim != head_dim:
            raise ValueError("vllm_legacy caches hold K and V of one head dim (kv_split and k_only take nhd or hnd)")
        v_shape, v_strides = tuple(v_shape), tuple(v_strides)
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
    if len(k_shape) != 4 or (v_shape is not None and len(v_shape) != 4):
        raise ValueError(f"key_cache and value_cache must be 4-D, got {k_shape} and {None if v_shape is None else tuple(v_shape)}")
    num_blocks, block_size, k_field = _geometry(layout, k_shape, k_strides, num_heads, head_dim,
                                                "cache" if value_head_dim == head_dim else "key_cache", "key")
    if v_shape is None:
        return num_blocks, block_size, k_field, None
    v_shape, v_strides = tuple(v_shape), tuple(v_strides)
    v_blocks, v_block_size, v_field = _geometry(layout, v_shape, v_strides, num_heads, value_head_dim,
                                                "cache" if value_head_dim == head_dim else "value_cache",
                                                "key" if value_head_dim == head_dim else "value")
    if (v_blocks, v_block_size) != (num_blocks, block_size):
        raise ValueError(f"key_cache {k_shape} and value_cache {v_shape} ({layout}) differ in blocks or block_size")
    return num_blocks, block_size, k_field, v_field


# Launch plans of kv_append calls (launch_plan.py), at most CACHE_CAPACITY, least recently used forgotten.
PLANS = LruCache()
# The KvAppendParams fields _checked_params fills from kv_append's tensor arguments, in the order of
# kv_append's `tensors` (key and rope may be [:, 0] views of the arguments: same pointer and dtype).
PLAN_FIELDS = ("key", "value", "k_cache", "v_cache", "slot_mapping", "rope", "k_scale", "v_scale", "k_scale_cache",
               "v_scale_cache", "invalid_slots", "cp_positions")


def kv_append(key, value, key_cache, value_cache, slot_mapping, *, layout, rope=None, scale_kind=None,
              k_scale=None, v_scale=None, k_scale_cache=None, v_scale_cache=None,
              invalid_slots=None, cache_dtype=None, variant=None, fp8_software=None,
              cp_positions=None, cp_rank=0, cp_world_size=1, cp_interleave=1):
    """Appends key/value rows to a paged KV cache in place (see the package docstring). The family
    follows from the arguments: value=None is k_only, rope=k_pe is mla (key = kv_c), a value head dim
    other than key's is kv_split. cp_positions (int32 [T], -1 = padding) makes the call one
    context-parallel rank's: only rows whose position rank cp_rank holds are written.

    On the GPU a call like an earlier valid one (same tensor shapes, strides, dtypes, devices and
    16-byte alignment, same other arguments: launch_plan.py) is launched from that call's plan
    without validating again; KVFUZZ_TRITON_DIRECT_LAUNCH=0 validates and goes through the JIT every call."""
    tensors = (key, value, key_cache, value_cache, slot_mapping, rope, k_scale, v_scale, k_scale_cache,
               v_scale_cache, invalid_slots, cp_positions)
    mode = direct_launch_mode()
    plan_key = plan = None
    if mode != "0" and KV_APPEND.supported:  # supported: compiled for the GPU, not interpreted
        plan_key, pointers = _plan_key(tensors, layout, scale_kind, cache_dtype, variant, fp8_software, cp_rank,
                                       cp_world_size, cp_interleave)
        plan_key, plan = lookup(PLANS, plan_key)  # unhashable: the full path names the argument
        if plan is not None and mode == "1":
            plan.launch(pointers)
            return
    p, device = _checked_params(key, value, key_cache, value_cache, slot_mapping, layout, rope, scale_kind,
                                k_scale, v_scale, k_scale_cache, v_scale_cache, invalid_slots, cache_dtype,
                                variant, cp_positions, cp_rank, cp_world_size, cp_interleave)
    if device.type != "cuda":
        launch(p, variant=variant, fp8_software=fp8_software)
        return
    with on_device(device.index):
        compiled = launch(p, variant=variant, fp8_software=fp8_software)
    if plan_key is None or not is_compiled(compiled):
        return
    remember(PLANS, plan_key, plan, kv_append_plan(p, compiled, device.index, variant=variant, fp8_software=fp8_software),
             "kv_append")


def _plan_key(tensors, layout, scale_kind, cache_dtype, variant, fp8_software, cp_rank, cp_world_size, cp_interleave):
    """keyed_pointers (launch_plan.py) of a kv_append call: the key of its tensors, then everything else
    validation and kernel_call() read (the ranks with their types: True is refused where 1 is not),
    and the tensors' pointers."""
    return keyed_pointers(tensors, (layout, scale_kind, cache_dtype, variant, fp8_software, type(cp_rank), cp_rank,
                              type(cp_world_size), cp_world_size, type(cp_interleave), cp_interleave))


def kv_append_plan(p, compiled, device, *, variant=None, fp8_software=None, launcher=None):
    """The LaunchPlan (launch_plan.py) of launching `compiled` for p on CUDA device `device`, its pointers
    taken from kv_append's tensor arguments (PLAN_FIELDS); None when an argument cannot be planned.
    The kernel's arguments are derived once more with each tensor replaced by its Slot; `launcher`
    (default: kernel_call's) binds them."""
    marked = dataclasses.replace(p, **{f: Slot(i) for i, f in enumerate(PLAN_FIELDS) if getattr(p, f) is not None})
    chosen, grid, args, constexprs = kernel_call(marked, variant=variant, fp8_software=fp8_software)
    launcher = launcher or chosen
    try:
        return LaunchPlan.of(compiled, grid, launcher.bind(args, constexprs), device)
    except Unsupported:
        return None


def _checked_params(key, value, key_cache, value_cache, slot_mapping, layout, rope, scale_kind, k_scale, v_scale,
                    k_scale_cache, v_scale_cache, invalid_slots, cache_dtype, variant, cp_positions, cp_rank,
                    cp_world_size, cp_interleave):
    """(KvAppendParams, torch.device) of a kv_append call; ValueError("kv_append: ...") naming what
    does not fit."""
    import torch

    def fail(msg):
        raise ValueError(f"kv_append: {msg}")

    names = _torch_dtype_names()
    if layout not in LAYOUTS:
        fail(f'layout must be "nhd" ([blocks, block_size, heads, head_dim]), "hnd" '
             f'([blocks, heads, block_size, head_dim]) or "vllm_legacy" (key_cache [blocks, heads, head_dim/x, '
             f'block_size, x], value_cache [blocks, heads, head_dim, block_size]), got {layout!r}')
    has_value = value is not None
    mla = rope is not None
    if mla and has_value:
        fail("rope (k_pe) is for MLA's latent cache, which has no V: pass value=None and value_cache=None")
    if has_value != (value_cache is not None):
        fail("value and value_cache go together: both tensors, or both None (k_only, mla)")
    for name, t in (("key", key), ("value", value), ("key_cache", key_cache), ("value_cache", value_cache),
                    ("slot_mapping", slot_mapping), ("rope", rope)):
        if t is not None and not _is_tensor(t):
            fail(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if not _is_tensor(key) or not _is_tensor(key_cache) or not _is_tensor(slot_mapping):
        fail("key, key_cache and slot_mapping must be torch.Tensors")
    if mla:
        # MLA (vLLM's concat_and_cache_mla): kv_c [T, D_c] and k_pe [T, rope_dim] (or [T, 1, ..]) into
        # the latent cache [blocks, block_size, D_c + rope_dim], one entry per slot.
        if key.dim() == 3 and key.shape[1] == 1:
            key = key[:, 0]
        if rope.dim() == 3 and rope.shape[1] == 1:
            rope = rope[:, 0]
        if key.dim() != 2 or rope.dim() != 2:
            fail(f"mla: key (kv_c) and rope (k_pe) must be [tokens, dims] (or [tokens, 1, dims]), got "
                 f"{tuple(key.shape)} and {tuple(rope.shape)}")
        if rope.shape[0] != key.shape[0]:
            fail(f"mla: key (kv_c) has {key.shape[0]} rows but rope (k_pe) {rope.shape[0]}")
        if rope.dtype != key.dtype:
            fail(f"mla: key (kv_c) and rope (k_pe) dtypes differ: {key.dtype} vs {rope.dtype}")
        if key_cache.dim() != 3:
            fail(f"mla: key_cache is the latent cache [blocks, block_size, kv_c dims + k_pe dims], got shape "
                 f"{tuple(key_cache.shape)}")
        rope_dim = rope.shape[1]
        head_dim = key.shape[1] + rope_dim
        if key_cache.shape[2] != head_dim:
            fail(f"mla: key_cache's last dim must be {key.shape[1]} + {rope_dim} = {head_dim}, got {key_cache.shape[2]}")
        if (key.shape[1] > 1 and key.stride(1) != 1) or (rope_dim > 1 and rope.stride(1) != 1):
            fail("mla: the last dim of key (kv_c) and rope (k_pe) must be contiguous (stride 1)")
        if head_dim > 1 and key_cache.stride(2) != 1:
            fail("the last dim of the caches must be contiguous (stride 1)")
        num_rows, num_heads, value_head_dim = key.shape[0], 1, 0
        key_strides = (key.stride(0), 0)
        num_blocks, block_size = key_cache.shape[0], key_cache.shape[1]
        k_field = geometry_field(key_cache.stride(0), key_cache.stride(1), 0)
        v_field = None
    else:
        if key.dim() != 3 or (has_value and value.dim() != 3):
            fail(f"key and value must be 3-D [tokens, heads, head_dim], got {tuple(key.shape)} and "
                 f"{None if value is None else tuple(value.shape)}")
        if has_value and key.shape[:2] != value.shape[:2]:
            fail(f"key and value shapes differ in tokens or heads: {tuple(key.shape)} vs {tuple(value.shape)}")
        num_rows, num_heads, head_dim = key.shape
        value_head_dim = value.shape[2] if has_value else 0
        rope_dim = 0
        key_strides = (key.stride(0), key.stride(1))
        if (head_dim > 1 and key.stride(2) != 1) or (value_head_dim > 1 and value.stride(2) != 1):
            fail("the last dim of key and value must be contiguous (stride 1)")
        try:
            num_blocks, block_size, k_field, v_field = cache_fields(
                layout, num_heads, head_dim, key_cache.shape, key_cache.stride(),
                value_cache.shape if has_value else None, value_cache.stride() if has_value else None,
                value_head_dim if has_value else None)
        except ValueError as e:
            fail(str(e))
    if has_value and key.dtype != value.dtype:
        fail(f"key and value dtypes differ: {key.dtype} vs {value.dtype}")
    input_dtype = names.get(key.dtype)
    if input_dtype not in FLOAT_DTYPES:
        fail(f"key/value dtype must be float16, bfloat16 or float32, got {key.dtype}")
    if slot_mapping.dtype not in (torch.int32, torch.int64):
        fail(f"slot_mapping must be int32 or int64, got {slot_mapping.dtype}")
    if slot_mapping.dim() != 1:
        fail(f"slot_mapping must be 1-D, got shape {tuple(slot_mapping.shape)}")
    num_slots = slot_mapping.shape[0]
    if num_slots > 1 and slot_mapping.stride(0) != 1:
        fail("slot_mapping must be contiguous")
    if num_slots > num_rows:
        fail(f"slot_mapping has {num_slots} entries but key has only {num_rows} rows")
    if has_value and key_cache.dtype != value_cache.dtype:
        fail(f"key_cache and value_cache dtypes differ: {key_cache.dtype} vs {value_cache.dtype}")
    if cp_positions is None:
        if (cp_rank, cp_world_size, cp_interleave) != (0, 1, 1):
            fail("cp_rank, cp_world_size and cp_interleave need cp_positions (int32 global positions of the rows)")
    else:
        if not _is_tensor(cp_positions):
            fail(f"cp_positions must be a torch.Tensor, got {type(cp_positions).__name__}")
        if cp_positions.dtype != torch.int32:
            fail(f"cp_positions must be int32, got {cp_positions.dtype}")
        if tuple(cp_positions.shape) != (num_slots,):
            fail(f"cp_positions must have slot_mapping's shape ({num_slots},), got {tuple(cp_positions.shape)}")
        if num_slots > 1 and cp_positions.stride(0) != 1:
            fail("cp_positions must be contiguous")
        try:
            cp_rank, cp_world_size, cp_interleave = check_ranks(cp_rank, cp_world_size, cp_interleave, "cp_")
        except ValueError as e:
            fail(str(e))

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
    if mla and scale_kind not in ("none", "per_tensor"):
        fail(f"mla: a quantised latent cache takes scale_kind=\"per_tensor\" (one scale for the entry), not {scale_kind!r}")
    if not has_value and (v_scale is not None or v_scale_cache is not None):
        fail("v_scale / v_scale_cache given without a value (k_only and mla have one tensor's scales: k_scale, k_scale_cache)")
    k_names = ("k_scale_cache", "v_scale_cache") if has_value else ("k_scale_cache",)
    k_static = ("k_scale", "v_scale") if has_value else ("k_scale",)
    scale_args = {"k_scale": k_scale, "v_scale": v_scale, "k_scale_cache": k_scale_cache, "v_scale_cache": v_scale_cache}

    scale_strides = (0, 0, 0)
    if scale_kind == "per_token_head":
        if k_scale is not None or v_scale is not None:
            fail("per_token_head computes its scales: pass k_scale_cache/v_scale_cache, not k_scale/v_scale")
        for name in k_names:
            t = scale_args[name]
            if not _is_tensor(t):
                fail(f"per_token_head needs {name} (float32, {'[blocks, block_size, heads]' if layout == 'nhd' else '[blocks, heads, block_size]'})")
            if t.dtype != torch.float32:
                fail(f"{name} must be float32, got {t.dtype}")
        want = (num_blocks, block_size, num_heads) if layout == "nhd" else (num_blocks, num_heads, block_size)
        for name in k_names:
            if tuple(scale_args[name].shape) != want:
                fail(f"scale caches must have shape {want} ({layout}), got " +
                     " and ".join(str(tuple(scale_args[n].shape)) for n in k_names))
        if has_value and k_scale_cache.stride() != v_scale_cache.stride():
            fail("k_scale_cache and v_scale_cache must have the same strides")
        s = k_scale_cache.stride()
        scale_strides = (s[0], s[1], s[2]) if layout == "nhd" else (s[0], s[2], s[1])
    elif quantised:
        if k_scale_cache is not None or v_scale_cache is not None:
            fail(f"scale caches are for per_token_head only, not {scale_kind}")
        want = {"per_tensor": (1,), "per_head": (num_heads,), "per_block": (num_blocks, num_heads)}[scale_kind]
        for name in k_static:
            t = scale_args[name]
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

    tensors = [key, value, key_cache, value_cache, slot_mapping, rope, k_scale, v_scale, k_scale_cache,
               v_scale_cache, invalid_slots, cp_positions]
    check_resolved(zip(("key", "value", "key_cache", "value_cache", "slot_mapping", "rope", "k_scale", "v_scale",
                        "k_scale_cache", "v_scale_cache", "invalid_slots", "cp_positions"), tensors), fail)
    devices = {t.device for t in tensors if t is not None}
    if len(devices) != 1:
        fail(f"all tensors must be on one device, got {sorted(str(d) for d in devices)}")
    device = devices.pop()
    if device.type == "cpu" and not interpreting():
        fail("CPU tensors run only under Triton's interpreter (TRITON_INTERPRET=1)")
    if variant is not None and variant not in VARIANTS:
        fail(f"variant must be one of {VARIANTS} or None, got {variant!r}")

    p = KvAppendParams(
        key=key, value=value, key_stride_token=key_strides[0], key_stride_head=key_strides[1],
        value_stride_token=value.stride(0) if has_value else 0, value_stride_head=value.stride(1) if has_value else 0,
        slot_mapping=slot_mapping, num_slots=num_slots, k_cache=key_cache, v_cache=value_cache,
        num_blocks=num_blocks, block_size=block_size, stride_block=k_field.block, stride_pos=k_field.pos,
        stride_head=k_field.head, k_field=k_field, v_field=v_field, num_heads=num_heads, head_dim=head_dim,
        input_dtype=input_dtype,
        cache_dtype=cache_dtype, invalid_slots=invalid_slots, scale_kind=scale_kind,
        k_scale=k_scale, v_scale=v_scale, k_scale_cache=k_scale_cache, v_scale_cache=v_scale_cache,
        scale_stride_block=scale_strides[0], scale_stride_pos=scale_strides[1],
        scale_stride_head=scale_strides[2], value_head_dim=value_head_dim, has_value=has_value,
        rope=rope, rope_stride_token=rope.stride(0) if mla else 0, rope_stride_head=0, rope_dim=rope_dim,
        cp_positions=cp_positions, cp_rank=cp_rank, cp_world_size=cp_world_size, cp_interleave=cp_interleave)
    return p, device


def kv_append_mla(kv_c, k_pe, kv_cache, slot_mapping, *, scale=None, cache_dtype=None, invalid_slots=None,
                  variant=None, fp8_software=None):
    """MLA's append in vLLM's concat_and_cache_mla(kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype,
    scale) shape: kv_c [T_in, D_c] and k_pe [T_in, rope_dim] (or [T_in, 1, ..]) into the latent cache
    kv_cache [blocks, block_size, D_c + rope_dim], entry = kv_c's dims then k_pe's. scale: a float32
    [1] tensor for an fp8/int8 cache (per_tensor, q = x / scale), None for a float cache."""
    kv_append(kv_c, None, kv_cache, None, slot_mapping, layout="nhd", rope=k_pe,
              scale_kind=None if scale is None else "per_tensor", k_scale=scale, cache_dtype=cache_dtype,
              invalid_slots=invalid_slots, variant=variant, fp8_software=fp8_software)
