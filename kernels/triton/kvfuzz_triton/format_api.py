"""Launchers of kv_append_format_kernel (kv_append_format.py): the quantised formats' raw parameters.

kvfuzz_triton.launch(p) runs this when p.quant_format is not "none"; the torch API is
kv_append_quant() in quant_api.py.
"""
import dataclasses

import triton

from .direct_launch import DirectLauncher
from .enums import QUANT_FORMATS as FORMATS  # kvf::QuantFormat, index = value (kernels/enums.json)
from .kv_append_format import kv_append_format_kernel

# Dims one scale covers (0: the whole row, a per-token-head format).
GROUP = {"nvfp4": 16, "mxfp8_e4m3": 32, "mxfp8_e5m2": 32, "mxfp4": 32, "ds_mla": 128, "indexer_k": 128,
         "fp8_inline": 0, "int8_inline": 0, "asym_int8": 0, "asym_int4": 0}
FOUR_BIT = ("nvfp4", "mxfp4", "asym_int4")
# The conventions of kvf::QuantRules and their names, index = the enum's value (kvf::FormatRules).
RULES = {
    "nvfp4": ("flashinfer", "flashinfer_precise"),
    "mx": ("ocp_floor", "nv_ceil"),
    "ds_mla": ("flt_min", "pow2"),
    "indexer": ("fp32", "ue8m0_log2f", "ue8m0_exact"),
    "asym_arith": ("f32", "f16", "bf16"),
    "asym_lanes": ("exact", "zero_padded_pow2"),
    "int4_pairing": ("split_half", "adjacent"),
}

# The ahead-of-time build compiles the format kernel once per (input dtype, format, slot dtype) with
# this tile (dims per loop step; a multiple of every group) and warp count.
FORMAT_AOT_BLOCK = 128
FORMAT_AOT_NUM_WARPS = 4


@dataclasses.dataclass(frozen=True)
class FormatRules:
    """The conventions a format call follows (kvf::QuantRules; src/golden/block_quant.h states each).
    Only those its format reads matter; the defaults are kvf's."""
    nvfp4: str = "flashinfer"
    mx: str = "ocp_floor"
    ds_mla: str = "pow2"
    indexer: str = "fp32"
    asym_arith: str = "f32"
    asym_lanes: str = "exact"
    int4_pairing: str = "split_half"

    def values(self):
        """(name, integer value) of every rule, in kernel argument order."""
        return [(name, RULES[name].index(getattr(self, name))) for name in RULES]


@dataclasses.dataclass(frozen=True)
class FormatField:
    """Where one field of a format keeps (block, pos, head, dim), in elements of its dtype (nibbles
    for 4-bit codes, 4-byte words for fp32 scales) from byte 0 of its buffer:

        offset + block*block + mode(pos; pos_x, pos0, pos1) + head*head + mode(dim; dim_x, dim0, dim1)
        mode(c; x, s0, s1) = (c % x)*s0 + (c // x)*s1

    the layout of kernels/cuda/kv_format.cuh with flat block and head axes and pos and dim axes of up
    to two sub-modes (x, *):(s0, s1); a flat mode of stride s is x = 1, s1 = s (flat()).
    """
    offset: int = 0
    block: int = 0
    pos_x: int = 1
    pos0: int = 0
    pos1: int = 0
    head: int = 0
    dim_x: int = 1
    dim0: int = 0
    dim1: int = 1

    @classmethod
    def flat(cls, offset, block, pos, head, dim=1):
        """Every axis one (extent, stride) mode."""
        return cls(offset, block, 1, 0, pos, head, 1, 0, dim)

    def at(self, block, pos, head, dim):
        """The element offset of a coordinate (for tests and tools)."""
        mode = lambda c, x, s0, s1: (c % x) * s0 + (c // x) * s1  # noqa: E731
        return (self.offset + block * self.block + mode(pos, self.pos_x, self.pos0, self.pos1) + head * self.head
                + mode(dim, self.dim_x, self.dim0, self.dim1))


def format_tile(quant_format, head_dim):
    """BLOCK for a launch: the row's dims (pairs of dims for asym_int4) rounded up to a power of two,
    at least one group, at most 1024."""
    width = max(1, head_dim // 2 if quant_format == "asym_int4" else head_dim)
    return max(GROUP[quant_format] or 1, min(triton.next_power_of_2(width), 1024))


def check_format_params(p):
    """Raises ValueError for a format call the kernel does not implement."""
    if p.quant_format not in FORMATS[1:]:
        raise ValueError(f"quant_format must be one of {FORMATS[1:]}, got {p.quant_format!r}")
    if p.input_dtype not in ("f16", "bf16", "f32"):
        raise ValueError(f"input dtype must be f16, bf16 or f32, got {p.input_dtype!r}")
    rules = p.format_rules or FormatRules()
    for name, choices in RULES.items():
        if getattr(rules, name) not in choices:
            raise ValueError(f"format_rules.{name} must be one of {choices}, got {getattr(rules, name)!r}")
    if p.format_cache is None or p.k_codes is None:
        raise ValueError(f"{p.quant_format} needs format_cache and k_codes")
    if p.quant_format != "ds_mla" and p.k_scales is None:
        raise ValueError(f"{p.quant_format} needs k_scales")
    if p.quant_format == "ds_mla" and (p.k_scales is None or p.rope_field is None or p.rope is None):
        raise ValueError("ds_mla needs k_scales (the latent scales), rope (k_pe) and rope_field")
    if p.format_scales is None:
        raise ValueError(f"{p.quant_format} needs format_scales (the buffer of its scales)")
    if p.quant_format == "nvfp4" and (p.k_scale is None or (p.has_value and p.v_scale is None)):
        raise ValueError("nvfp4 needs its global scales: k_scale" + (" and v_scale" if p.has_value else "") + " (fp32 [1])")
    if p.quant_format in ("asym_int8", "asym_int4") and (p.k_zeros is None or (p.has_value and p.v_zeros is None)):
        raise ValueError(f"{p.quant_format} needs k_zeros" + (" and v_zeros" if p.has_value else ""))
    if p.has_value and p.quant_format not in ("ds_mla", "indexer_k") and (p.v_codes is None or p.v_scales is None
                                                                          or p.value is None):
        raise ValueError(f"{p.quant_format} with a V needs value, v_codes and v_scales (has_value=False for K alone)")
    group = GROUP[p.quant_format]
    latent = latent_dim(p)
    if group and latent % group != 0:
        raise ValueError(f"{p.quant_format} quantises groups of {group} dims: {latent} dims is not a multiple")
    if p.quant_format == "asym_int4" and p.head_dim % 2 != 0:
        raise ValueError(f"asym_int4 packs two codes a byte: head_dim {p.head_dim} must be even")
    for name in ("num_slots", "num_heads", "head_dim", "num_blocks", "block_size"):
        if getattr(p, name) < 0:
            raise ValueError(f"{name} must be >= 0")
    for name in ("k_codes", "v_codes", "k_scales", "v_scales", "k_zeros", "v_zeros", "rope_field"):
        f = getattr(p, name)
        if f is not None and not (1 <= f.pos_x < 2 ** 31 and 1 <= f.dim_x < 2 ** 31):
            raise ValueError(f"{name}.pos_x and .dim_x must be in [1, 2^31), got {f.pos_x} and {f.dim_x}")


KV_APPEND_FORMAT = DirectLauncher(kv_append_format_kernel)  # launches kv_append_format_kernel (direct_launch.py)


def latent_dim(p):
    """The dims a row quantises: head_dim, or for ds_mla head_dim - rope_dim (the rest is copied)."""
    return p.head_dim - p.rope_dim if p.quant_format == "ds_mla" else p.head_dim


def launch_format(p, *, fp8_software, num_warps=4, block=None):
    """Runs kv_append_format_kernel on p (a KvAppendParams with quant_format set). block: the tile
    (FORMAT_AOT_BLOCK for the AOT build's); None: format_tile(). On the GPU through KV_APPEND_FORMAT:
    Triton's JIT on the first call of each specialisation, its compiled kernel directly afterwards."""
    call = format_call(p, fp8_software=fp8_software, block=block)
    if call is None:
        return None  # nothing to write; never launch an empty grid
    grid, args, constexprs = call
    return KV_APPEND_FORMAT.launch(grid, args, constexprs, {"num_warps": num_warps})


def format_call(p, *, fp8_software, block=None):
    """(grid, arguments, constexprs) of kv_append_format_kernel's launch for p (launch_format), or
    None for a call that writes nothing. ValueError for parameters the kernel does not implement."""
    check_format_params(p)
    if p.num_slots == 0 or p.num_heads == 0 or p.head_dim == 0:
        return None
    rules = p.format_rules or FormatRules()
    block = block or format_tile(p.quant_format, latent_dim(p))
    none = FormatField()
    fields = []
    for f in (p.k_codes, p.v_codes, p.k_scales, p.v_scales, p.k_zeros, p.v_zeros, p.rope_field):
        f = f or none
        fields += [f.offset, f.block, f.pos_x, f.pos0, f.pos1, f.head, f.dim_x, f.dim0, f.dim1]
    dummy = p.key  # stand-in for absent pointers, never dereferenced
    csr = p.csr_batch_indices is not None
    slots = p.slot_mapping if not csr else p.csr_batch_indices
    stand_in = slots
    global_k = p.k_scale if p.quant_format == "nvfp4" else None
    global_v = p.v_scale if p.quant_format == "nvfp4" else None
    has_value = bool(p.has_value) and p.quant_format not in ("ds_mla", "indexer_k")
    grid = (p.num_slots, p.num_heads)
    args = (
        p.key, p.value if has_value else dummy, p.rope if p.rope is not None else dummy, slots,
        p.format_cache, p.format_scales,
        global_k if global_k is not None else p.format_scales, global_v if global_v is not None else p.format_scales,
        slots if p.invalid_slots is None else p.invalid_slots,
        p.num_heads, p.head_dim, latent_dim(p), p.rope_dim if p.quant_format == "ds_mla" else 0,
        p.key_stride_token, p.key_stride_head, p.value_stride_token, p.value_stride_head,
        p.rope_stride_token, p.rope_stride_head,
        p.num_blocks, p.block_size, int(has_value), int(p.invalid_slots is not None),
        *fields,
        *(v for _, v in rules.values()),
        int(csr), p.csr_batch_indices if csr else stand_in, p.csr_positions if csr else stand_in,
        p.csr_kv_indices if csr else stand_in, p.csr_kv_indptr if csr else stand_in,
        int(p.window_positions is not None), p.window_size, p.window_sinks,
        stand_in if p.window_positions is None else p.window_positions,
        stand_in if p.window_seq_lens is None else p.window_seq_lens,
        int(p.cp_positions is not None), p.cp_rank, p.cp_world_size, p.cp_interleave,
        stand_in if p.cp_positions is None else p.cp_positions)
    constexprs = dict(IN_DTYPE=("f16", "bf16", "f32").index(p.input_dtype), FORMAT=FORMATS.index(p.quant_format),
                      FP8_SOFTWARE=bool(fp8_software), BLOCK=block)
    return grid, args, constexprs
