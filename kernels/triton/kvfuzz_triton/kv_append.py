"""Triton kernels of the kvfuzz append contract (docs/contract.md), bit for bit the CUDA kernel's.

Two @triton.jit kernels share the helpers below: `kv_append_kernel`, the general one, covers the
whole contract, and `kv_append_row_kernel` the plain call (family kv, slot_mapping addressing, dims
contiguous: see its docstring), which is what decode runs and what kvfuzz_triton.launch and kv_append
pick for such a call; the general kernel is described first.

`kv_append_kernel` covers the whole contract. Only the dtypes and the tile
are constexpr; the scale kind, the counter, the variant and the cache format are runtime integers,
and the kernel loops over heads and dims in tiles of BLOCK_H x BLOCK_D, so one compiled kernel per
(input dtype, cache dtype, slot dtype) serves every shape and layout (the ahead-of-time build,
kernels/triton/aot_compile.py, compiles exactly those). Arguments are pointers, int scalars and
constexprs only (scales travel as fp32 pointers: AOT passes float scalars as double,
research/triton-tooling.md P1), every address is computed in int64 (P10), constexprs come last
(P6), and the callers never launch an empty grid (P2).

Cache addressing (the format model of kernels/cuda/kv_format.cuh, docs/formats.md): K and V are
separate fields, each with its own strides, and element (block, pos, head, d) of a field is at
  base + block*s_block + pos*s_pos + head*s_head + (d % x)*s_dim0 + (d // x)*s_dim1
(the dim mode (x, D/x):(s_dim0, s_dim1), in int64; d % x and d // x in int32, d < D). The plain
geometries (NHD, HND, contiguous, packed) are x = 1, s_dim0 = 1, s_dim1 = 1; vLLM's legacy pair
is K [nb, H, D/x, bs, x]: x = 16 bytes of cache elements, s_pos = x, s_dim0 = 1, s_dim1 = bs*x, and
V [nb, H, D, bs]: x = 1, s_pos = 1, s_dim1 = bs.

Format families (docs/formats.md) are runtime arguments too, not specialisations: kv_split's V has
its own head dim (value_head_dim; its strides are the v_* field's), k_only and mla have no V
(has_value = 0: value_ptr, v_cache_ptr and v_scale_ptr are never dereferenced), and mla's entry of
head_dim dims takes its last rope_dim from a second source, rope_ptr (k_pe), at dim - (head_dim -
rope_dim); a dim tile that reaches past key's dims selects each dim's pointer from the two rows
(_src_ptrs), so both parts share one mask and one store. A row's per_token_head amax runs over its
own head dim (V's value_head_dim; both parts of an mla entry).

Tiles are held dims first, [BLOCK_D, BLOCK_H]: with a runtime dim stride no axis of the store's
pointers is provably contiguous, and Triton 3.6's coalescing then orders a tile by its first axis;
dims first gives the store the load's layout (consecutive dims across lanes), so no tile is shuffled
through shared memory between them (the compiled kernels use the shared memory they did when dims
were contiguous at compile time: none, or 32 bytes for the scale reductions).

Grid: (num_slots, cdiv(num_heads, heads_per_program)). Program (t, p) handles slot entry t, heads
[p * heads_per_program, (p + 1) * heads_per_program), BLOCK_H heads x BLOCK_D dims at a time:
  - token-major (heads_per_program = num_heads): every head of the row in one program; suits NHD
    caches, where a token's heads are one contiguous row;
  - head-major (heads_per_program = BLOCK_H): one program per tile of heads; suits HND caches,
    where a head's consecutive slots are adjacent.

Conversions (identical to kernels/cuda/kv_append.cuh):
  - equal dtypes: raw bit copy through integer pointers (NaN payloads survive);
  - float -> float: exact widening to fp32, then round-to-nearest-even; every NaN becomes the
    canonical NaN (0x7FFF f16/bf16, 0x7FFFFFFF f32). bf16 is widened and rounded with integer
    arithmetic (Triton's interpreter truncates fp32 -> bf16, research/triton-tooling.md §2.4);
  - quantised: q = x / scale with IEEE division (tl.math.div_rn -> div.rn.f32; `/` and
    tl.fdiv(ieee_rounding=True) both lower to the approximate div.full.f32 in Triton 3.6), then
      fp8: round to nearest even, saturate to ±max finite (±Inf too), NaN -> 0x7F. Either the
           hardware conversion (FP8_SOFTWARE=0: clamp, then cvt.rn.satfinite) or an exact integer
           implementation (FP8_SOFTWARE=1), which is also what runs under the interpreter, whose
           fp8 casts are wrong (triton-tooling §2.4);
      int8: round half to even by (q + 1.5*2^23) - 1.5*2^23 (exact in fp32 for |q| <= 2^22, q is
           clamped to ±256 first), saturate to [-128, 127], NaN -> 0;
    scale = k_scale[0] / k_scale[h] / k_scale[block*H + h] (physical block), or per token-head
    max(amax, 1e-6) / QMAX with amax = max |x| over D ignoring NaN, stored in the scale cache.
"""
import pathlib
import runpy

import triton
import triton.language as tl

# Loaded as a file of its own too (Triton's AOT compiler, tests/triton/launch_fakes.py): the table's
# numbers come from the enums.py beside it, not through the package.
_ENUMS = runpy.run_path(str(pathlib.Path(__file__).with_name("enums.py")))
DTYPES_ID, SCALE_KINDS_ID = _ENUMS["DTYPES_ID"], _ENUMS["SCALE_KINDS_ID"]

# Element types and scale kinds: the numbers of kvf::DType and kvf::ScaleKind (kernels/enums.json).
F16 = tl.constexpr(DTYPES_ID["f16"])
BF16 = tl.constexpr(DTYPES_ID["bf16"])
F32 = tl.constexpr(DTYPES_ID["f32"])
FP8_E4M3 = tl.constexpr(DTYPES_ID["fp8_e4m3"])
FP8_E5M2 = tl.constexpr(DTYPES_ID["fp8_e5m2"])
INT8 = tl.constexpr(DTYPES_ID["int8"])

SCALE_NONE = tl.constexpr(SCALE_KINDS_ID["none"])
PER_TENSOR = tl.constexpr(SCALE_KINDS_ID["per_tensor"])
PER_HEAD = tl.constexpr(SCALE_KINDS_ID["per_head"])
PER_BLOCK = tl.constexpr(SCALE_KINDS_ID["per_block"])
PER_TOKEN_HEAD = tl.constexpr(SCALE_KINDS_ID["per_token_head"])

ROUND_MAGIC = tl.constexpr(12582912.0)  # 1.5 * 2^23: adding and subtracting it rounds to an integer


@triton.jit
def _bits_ptr(ptr, DTYPE: tl.constexpr):
    """The pointer reinterpreted as one to unsigned integers of the element's width."""
    if DTYPE == F32:
        return ptr.to(tl.pointer_type(tl.uint32))
    elif DTYPE == F16 or DTYPE == BF16:
        return ptr.to(tl.pointer_type(tl.uint16))
    else:
        return ptr.to(tl.pointer_type(tl.uint8))


@triton.jit
def _load_f32(ptrs, mask, IN_DTYPE: tl.constexpr):
    """Loads input elements widened exactly to fp32 (ptrs are unsigned-integer pointers)."""
    return _widen(tl.load(ptrs, mask=mask, other=0), IN_DTYPE)


@triton.jit
def _widen(bits, IN_DTYPE: tl.constexpr):
    """Input element bits (unsigned integers of the element's width) widened exactly to fp32."""
    if IN_DTYPE == BF16:
        x = (bits.to(tl.uint32) << 16).to(tl.float32, bitcast=True)
    elif IN_DTYPE == F16:
        x = bits.to(tl.float16, bitcast=True).to(tl.float32)
    else:
        x = bits.to(tl.float32, bitcast=True)
    return x


@triton.jit
def _float_bits(x, CACHE_DTYPE: tl.constexpr):
    """fp32 -> f16/bf16/f32 bits, round to nearest even, every NaN canonical."""
    is_nan = x != x
    if CACHE_DTYPE == F16:
        bits = tl.where(is_nan, 0x7FFF, x.to(tl.float16).to(tl.uint16, bitcast=True).to(tl.uint32))
        return bits.to(tl.uint16)
    elif CACHE_DTYPE == BF16:
        u = x.to(tl.uint32, bitcast=True)
        rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        return tl.where(is_nan, 0x7FFF, rounded).to(tl.uint16)
    else:
        return tl.where(is_nan, 0x7FFFFFFF, x.to(tl.uint32, bitcast=True)).to(tl.uint32)


@triton.jit
def _fp8_bits(q, CACHE_DTYPE: tl.constexpr, FP8_SOFTWARE: tl.constexpr):
    """fp32 -> fp8 e4m3/e5m2 code: round to nearest even, saturate to ±max finite, NaN -> 0x7F."""
    if CACHE_DTYPE == FP8_E4M3:
        MAX_FINITE: tl.constexpr = 448.0
        MANT: tl.constexpr = 3
        BIAS: tl.constexpr = 7
        SUB_SCALE: tl.constexpr = 512.0  # 2^9: one unit = the smallest subnormal
        MIN_NORMAL: tl.constexpr = 0.015625  # 2^-6
    else:
        MAX_FINITE: tl.constexpr = 57344.0
        MANT: tl.constexpr = 2
        BIAS: tl.constexpr = 15
        SUB_SCALE: tl.constexpr = 65536.0  # 2^16
        MIN_NORMAL: tl.constexpr = 0.00006103515625  # 2^-14
    is_nan = q != q
    if FP8_SOFTWARE:
        sign = ((q.to(tl.uint32, bitcast=True) >> 24) & 0x80).to(tl.int32)
        a = tl.minimum(tl.abs(q), MAX_FINITE)  # saturates ±Inf too; NaN is replaced below
        ab = a.to(tl.int32, bitcast=True)
        SHIFT: tl.constexpr = 23 - MANT
        # Normal results: round the fp32 mantissa to MANT bits, half to even; a carry moves into
        # the exponent by itself. Then rebias the exponent.
        normal = ((ab + ((1 << (SHIFT - 1)) - 1) + ((ab >> SHIFT) & 1)) >> SHIFT) - ((127 - BIAS) << MANT)
        # Subnormal results: the count of smallest subnormals, rounded half to even (exact: a *
        # SUB_SCALE < 2^MANT + 1 is a power-of-two scaling).
        sub = ((a * SUB_SCALE + ROUND_MAGIC) - ROUND_MAGIC).to(tl.int32)
        code = sign | tl.where(a < MIN_NORMAL, sub, normal)
        return tl.where(is_nan, 0x7F, code).to(tl.uint8)
    else:
        clamped = tl.minimum(tl.maximum(q, -MAX_FINITE), MAX_FINITE)
        if CACHE_DTYPE == FP8_E4M3:
            code = clamped.to(tl.float8e4nv, fp_downcast_rounding="rtne").to(tl.uint8, bitcast=True)
        else:
            code = clamped.to(tl.float8e5, fp_downcast_rounding="rtne").to(tl.uint8, bitcast=True)
        return tl.where(is_nan, 0x7F, code.to(tl.int32)).to(tl.uint8)


@triton.jit
def _int8_bits(q):
    """fp32 -> int8 (as its byte): round half to even, saturate to [-128, 127], NaN -> 0."""
    is_nan = q != q
    clamped = tl.minimum(tl.maximum(tl.where(is_nan, 0.0, q), -256.0), 256.0)
    rounded = (clamped + ROUND_MAGIC) - ROUND_MAGIC
    rounded = tl.minimum(tl.maximum(rounded, -128.0), 127.0)
    return rounded.to(tl.int32).to(tl.uint8)  # two's complement byte


@triton.jit
def _cache_bits(bits, scale, IN_DTYPE: tl.constexpr, CACHE_DTYPE: tl.constexpr, FP8_SOFTWARE: tl.constexpr):
    """Cache element bits of input element bits [BLOCK_D, BLOCK_H] (the module docstring's
    conversions); scale: each head's fp32 scale [BLOCK_H] (quantised caches only)."""
    if CACHE_DTYPE == IN_DTYPE:
        return bits
    elif CACHE_DTYPE <= F32:
        return _float_bits(_widen(bits, IN_DTYPE), CACHE_DTYPE)
    else:
        q = tl.math.div_rn(_widen(bits, IN_DTYPE), scale[None, :])
        if CACHE_DTYPE == INT8:
            return _int8_bits(q)
        else:
            return _fp8_bits(q, CACHE_DTYPE, FP8_SOFTWARE)


@triton.jit
def _row_slot(token, slot_ptr, block_size, csr, csr_batch_ptr, csr_pos_ptr, csr_indices_ptr, csr_indptr_ptr,
              window, window_size, window_sinks, window_pos_ptr, window_len_ptr,
              cp, cp_rank, cp_world_size, cp_interleave, cp_pos_ptr):
    """(slot, write) of input row `token`: its slot (slot_mapping, or under CSR addressing its
    request's page holding its position), and whether this call writes it: not padding (slot < 0),
    not evicted by this call's later tokens (ring window), not another rank's (context parallel).
    Shared by kv_append_kernel and kv_append_format_kernel."""
    if csr != 0:  # the row's page: its request's page holding its position, and the offset there
        seq_pos = tl.load(csr_pos_ptr + token).to(tl.int64)
        page_at = tl.load(csr_indptr_ptr + tl.load(csr_batch_ptr + token)).to(tl.int64) + seq_pos // block_size
        slot = tl.load(csr_indices_ptr + page_at).to(tl.int64) * block_size + seq_pos % block_size
    else:
        slot = tl.load(slot_ptr + token).to(tl.int64)
    write = slot >= 0  # slot < 0: padding, skipped
    if window != 0:  # a token evicted by this call's later tokens is skipped like padding
        seq_pos = tl.load(window_pos_ptr + token).to(tl.int64)
        seq_len = tl.load(window_len_ptr + token).to(tl.int64)
        write = write & ((seq_pos < window_sinks) | (seq_pos >= seq_len - (window_size - window_sinks)))
    if cp != 0:  # a token another rank's shard holds is skipped like padding
        cp_pos = tl.load(cp_pos_ptr + token).to(tl.int64)
        write = write & ((cp_pos < 0) | (cp_pos // cp_interleave % cp_world_size == cp_rank))
    return slot, write


@triton.jit
def _head_scales(src_rows, rope_rows, key_dims, scale_ptr, block, pos, heads, head_mask, num_heads, head_dim,
                 scale_kind, scale_stride_block, scale_stride_pos, scale_stride_head, IN_DTYPE: tl.constexpr,
                 CACHE_DTYPE: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    """The fp32 scale of each head of the tile: read (static kinds) or computed and stored (per
    token-head, amax over the row's own head_dim dims, both sources of a two-part row)."""
    amax = tl.zeros([BLOCK_H], dtype=tl.float32)
    if scale_kind == PER_TOKEN_HEAD:
        for d0 in range(0, head_dim, BLOCK_D):
            dims = (d0 + tl.arange(0, BLOCK_D)).to(tl.int64)
            mask = (dims < head_dim)[:, None] & head_mask[None, :]
            x = _load_f32(_src_ptrs(src_rows, rope_rows, d0, dims, key_dims, BLOCK_D), mask, IN_DTYPE)
            amax = tl.maximum(amax, _abs_max(x))
    return _tile_scales(amax, scale_ptr, block, pos, heads, head_mask, num_heads, scale_kind, scale_stride_block,
                        scale_stride_pos, scale_stride_head, CACHE_DTYPE)


@triton.jit
def _abs_max(x):
    """Each head's max |x| over the dims of a tile [BLOCK_D, BLOCK_H] of fp32, NaN ignored (masked
    dims hold 0)."""
    return tl.max(tl.where(x != x, 0.0, tl.abs(x)), axis=0)


@triton.jit
def _tile_scales(amax, scale_ptr, block, pos, heads, head_mask, num_heads, scale_kind, scale_stride_block,
                 scale_stride_pos, scale_stride_head, CACHE_DTYPE: tl.constexpr):
    """The fp32 scale of each head of the tile: read (static kinds), or per token-head computed from
    the row's amax (each head's max |x| over its dims) and stored in the scale cache."""
    if CACHE_DTYPE == INT8:
        QMAX: tl.constexpr = 127.0
    elif CACHE_DTYPE == FP8_E4M3:
        QMAX: tl.constexpr = 448.0
    else:
        QMAX: tl.constexpr = 57344.0
    if scale_kind == PER_TOKEN_HEAD:
        scale = tl.math.div_rn(tl.maximum(amax, 1e-6), QMAX)
        cell = block * scale_stride_block + pos * scale_stride_pos + heads * scale_stride_head
        tl.store(scale_ptr + cell, scale, mask=head_mask)
    elif scale_kind == PER_TENSOR:
        scale = tl.load(scale_ptr + heads * 0, mask=head_mask, other=1.0)
    elif scale_kind == PER_HEAD:
        scale = tl.load(scale_ptr + heads, mask=head_mask, other=1.0)
    else:  # PER_BLOCK: the slot's physical block
        scale = tl.load(scale_ptr + (block * num_heads + heads), mask=head_mask, other=1.0)
    return scale


@triton.jit
def _src_ptrs(src_rows, rope_rows, d0, dims, key_dims, BLOCK_D: tl.constexpr):
    """Input pointers [BLOCK_D, BLOCK_H] of dims `dims` = d0 + [0, BLOCK_D) (int64) of each head's row: dims < key_dims
    from src_rows (key or value), the others from rope_rows at dim - key_dims (mla's k_pe). A row of
    one source has key_dims >= its head dim (rope_rows is then never selected)."""
    own = src_rows + dims[:, None]
    if d0 + BLOCK_D > key_dims:  # a tile reaching into the second source
        own = tl.where(dims[:, None] < key_dims, own, rope_rows + (dims - key_dims)[:, None])
    return own


@triton.jit
def _dim_offsets(dims, dim_x, stride_dim0, stride_dim1):
    """int64 element offsets of head dims `dims` (int32, >= 0) in the dim mode (x, D/x):(s_dim0, s_dim1)."""
    return (dims % dim_x).to(tl.int64) * stride_dim0 + (dims // dim_x).to(tl.int64) * stride_dim1


@triton.jit
def _append_rows(src_base, stride_token, stride_head, rope_base, rope_stride_token, rope_stride_head, key_dims,
                 dst_base, scale_ptr, token, block, pos, h0, h_end, num_heads, head_dim, field_stride_block,
                 field_stride_pos, field_stride_head, field_dim_x, field_stride_dim0, field_stride_dim1,
                 scale_stride_block, scale_stride_pos, scale_stride_head, scale_kind,
                 IN_DTYPE: tl.constexpr, CACHE_DTYPE: tl.constexpr, FP8_SOFTWARE: tl.constexpr,
                 BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    """Writes heads [h0, min(h0 + BLOCK_H, h_end)) of one input row of head_dim dims into one cache
    slot of one field (K or V, addressed by its field_* strides), BLOCK_D dims at a time. Dims
    [0, key_dims) come from src_base's row, [key_dims, head_dim) from rope_base's (mla's k_pe;
    key_dims >= head_dim: one source)."""
    heads = (h0 + tl.arange(0, BLOCK_H)).to(tl.int64)
    head_mask = heads < h_end
    src_rows = _input_rows(src_base, token, stride_token, stride_head, heads, IN_DTYPE)
    rope_rows = _input_rows(rope_base, token, rope_stride_token, rope_stride_head, heads, IN_DTYPE)
    dst_rows = _field_rows(dst_base, block, pos, heads, field_stride_block, field_stride_pos, field_stride_head,
                           CACHE_DTYPE)
    scale = 1.0  # float caches read no scale
    if CACHE_DTYPE > F32:
        scale = _head_scales(src_rows, rope_rows, key_dims, scale_ptr, block, pos, heads, head_mask, num_heads,
                             head_dim, scale_kind, scale_stride_block, scale_stride_pos, scale_stride_head,
                             IN_DTYPE, CACHE_DTYPE, BLOCK_H, BLOCK_D)
    for d0 in range(0, head_dim, BLOCK_D):
        dims32, dims, mask = _dim_tile(d0, head_dim, head_mask, BLOCK_D)
        src = _src_ptrs(src_rows, rope_rows, d0, dims, key_dims, BLOCK_D)
        dst = dst_rows + _dim_offsets(dims32, field_dim_x, field_stride_dim0, field_stride_dim1)[:, None]
        tl.store(dst, _cache_bits(tl.load(src, mask=mask, other=0), scale, IN_DTYPE, CACHE_DTYPE, FP8_SOFTWARE),
                 mask=mask)


@triton.jit
def _input_rows(base, token, stride_token, stride_head, heads, IN_DTYPE: tl.constexpr):
    """Pointers [1, BLOCK_H] to dim 0 of each head's row of input row `token` (unsigned-integer pointers)."""
    return _bits_ptr(base, IN_DTYPE) + (token * stride_token + heads[None, :] * stride_head)


@triton.jit
def _field_rows(base, block, pos, heads, field_stride_block, field_stride_pos, field_stride_head,
                CACHE_DTYPE: tl.constexpr):
    """Pointers [1, BLOCK_H] to dim 0 of each head's entry at slot (block, pos) of one cache field."""
    return _bits_ptr(base, CACHE_DTYPE) + (block * field_stride_block + pos * field_stride_pos
                                           + heads[None, :] * field_stride_head)


@triton.jit
def _dim_tile(d0, head_dim, head_mask, BLOCK_D: tl.constexpr):
    """(dims32, dims, mask) of the dim tile d0 + [0, BLOCK_D): the dims in int32 and int64, and the
    mask [BLOCK_D, BLOCK_H] of the elements that exist (dim < head_dim, head in range)."""
    dims32 = d0 + tl.arange(0, BLOCK_D)
    dims = dims32.to(tl.int64)
    mask = (dims < head_dim)[:, None] & head_mask[None, :]
    return dims32, dims, mask


@triton.jit
def _slot_place(slot, block_size, num_blocks, has_counter, invalid_slots_ptr):
    """(block, pos, inside) of a written row's slot (>= 0); inside: the slot is below the capacity. A
    slot past it is never written, and counted (has_counter != 0) once per slot entry, by the row's
    programs of the first head tile."""
    block = slot // block_size
    pos = slot - block * block_size
    outside = block >= num_blocks  # slot >= capacity: never written, counted once per slot entry
    if outside:
        if has_counter != 0:
            if tl.program_id(1) == 0:
                tl.atomic_add(invalid_slots_ptr, 1)
    return block, pos, outside == 0


# Runtime integers that take the values 0 and 1: never specialised on (the JIT would otherwise
# compile a variant per value; the ahead-of-time build compiles none).
@triton.jit(do_not_specialize=["scale_kind", "has_counter", "heads_per_program", "has_value", "csr", "window",
                               "window_size", "window_sinks", "cp", "cp_rank", "cp_world_size", "cp_interleave"])
def kv_append_kernel(
    key_ptr, value_ptr, slot_ptr, k_cache_ptr, v_cache_ptr,
    k_scale_ptr, v_scale_ptr,  # fp32: static scales, or the scale caches for PER_TOKEN_HEAD
    invalid_slots_ptr,  # int64 counter (only touched when has_counter != 0)
    num_heads, head_dim,
    key_stride_token, key_stride_head, value_stride_token, value_stride_head,
    num_blocks, block_size,
    # Where K and V keep (block, pos, head, d): the module docstring's formula, per field.
    k_stride_block, k_stride_pos, k_stride_head, k_dim_x, k_stride_dim0, k_stride_dim1,
    v_stride_block, v_stride_pos, v_stride_head, v_dim_x, v_stride_dim0, v_stride_dim1,
    scale_stride_block, scale_stride_pos, scale_stride_head,
    scale_kind,  # kvf::ScaleKind value; SCALE_NONE for float caches
    has_counter,  # 0 or 1
    heads_per_program,  # >= 1: num_heads (token-major) or BLOCK_H (head-major)
    # Format families (docs/formats.md): V's head dim (kv_split; else head_dim), whether V is
    # written at all (0: k_only, mla; value_ptr, v_cache_ptr, v_scale_ptr untouched), and mla's
    # second source: K's dims [head_dim - rope_dim, head_dim) from rope_ptr's row (k_pe).
    value_head_dim, has_value, rope_ptr, rope_stride_token, rope_stride_head, rope_dim,
    # FlashInfer's CSR addressing (csr != 0; slot_ptr unused): row t is the token at position
    # csr_pos_ptr[t] of request csr_batch_ptr[t], whose pages are csr_indices_ptr[csr_indptr_ptr[b] ..]
    # (int32 arrays).
    csr, csr_batch_ptr, csr_pos_ptr, csr_indices_ptr, csr_indptr_ptr,
    # A sliding-window ring whose kernel applies the window (window != 0): row t is the token at
    # position window_pos_ptr[t] of a request of length window_len_ptr[t]; a token already outside the
    # window (p >= window_sinks, p < len - (window_size - window_sinks)) is not written (int32 arrays).
    window, window_size, window_sinks, window_pos_ptr, window_len_ptr,
    # A context-parallel rank that localises its tokens itself (cp != 0): row t is the token at global
    # position cp_pos_ptr[t] (int32, -1: padding), held by rank (position // cp_interleave) %
    # cp_world_size; this call writes only rank cp_rank's rows (docs/contract.md "Serving conventions").
    cp, cp_rank, cp_world_size, cp_interleave, cp_pos_ptr,
    IN_DTYPE: tl.constexpr, CACHE_DTYPE: tl.constexpr, FP8_SOFTWARE: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    slot, write = _row_slot(token, slot_ptr, block_size, csr, csr_batch_ptr, csr_pos_ptr, csr_indices_ptr, csr_indptr_ptr,
                            window, window_size, window_sinks, window_pos_ptr, window_len_ptr,
                            cp, cp_rank, cp_world_size, cp_interleave, cp_pos_ptr)
    h_begin = tl.program_id(1) * heads_per_program
    h_end = tl.minimum(h_begin + heads_per_program, num_heads)
    if write:
        block, pos, inside = _slot_place(slot, block_size, num_blocks, has_counter, invalid_slots_ptr)
        if inside:
            for h0 in range(h_begin, h_end, BLOCK_H):
                _append_rows(key_ptr, key_stride_token, key_stride_head, rope_ptr, rope_stride_token,
                             rope_stride_head, head_dim - rope_dim, k_cache_ptr, k_scale_ptr, token, block, pos,
                             h0, h_end, num_heads, head_dim, k_stride_block, k_stride_pos, k_stride_head, k_dim_x,
                             k_stride_dim0, k_stride_dim1, scale_stride_block, scale_stride_pos,
                             scale_stride_head, scale_kind, IN_DTYPE, CACHE_DTYPE, FP8_SOFTWARE, BLOCK_H, BLOCK_D)
                if has_value != 0:
                    _append_rows(value_ptr, value_stride_token, value_stride_head, value_ptr, 0, 0,
                                 value_head_dim, v_cache_ptr, v_scale_ptr, token, block, pos, h0, h_end,
                                 num_heads, value_head_dim, v_stride_block, v_stride_pos, v_stride_head,
                                 v_dim_x, v_stride_dim0, v_stride_dim1, scale_stride_block, scale_stride_pos,
                                 scale_stride_head, scale_kind, IN_DTYPE, CACHE_DTYPE, FP8_SOFTWARE, BLOCK_H,
                                 BLOCK_D)


@triton.jit
def _store_row(bits, dst_base, scale_ptr, block, pos, heads, head_mask, dims, mask, num_heads, field_stride_block,
               field_stride_pos, field_stride_head, scale_stride_block, scale_stride_pos, scale_stride_head,
               SCALE_KIND: tl.constexpr, IN_DTYPE: tl.constexpr, CACHE_DTYPE: tl.constexpr,
               FP8_SOFTWARE: tl.constexpr, BLOCK_H: tl.constexpr):
    """kv_append_row_kernel's write of one field: the input bits [BLOCK_D, BLOCK_H] of whole rows
    (every dim; masked elements hold 0) converted into the entry at slot (block, pos), dims contiguous;
    per token-head, the amax of the rows already loaded."""
    scale = 1.0  # float caches read no scale
    if CACHE_DTYPE > F32:
        amax = tl.zeros([BLOCK_H], dtype=tl.float32)
        if SCALE_KIND == PER_TOKEN_HEAD:
            amax = _abs_max(_widen(bits, IN_DTYPE))
        scale = _tile_scales(amax, scale_ptr, block, pos, heads, head_mask, num_heads, SCALE_KIND, scale_stride_block,
                             scale_stride_pos, scale_stride_head, CACHE_DTYPE)
    dst = _field_rows(dst_base, block, pos, heads, field_stride_block, field_stride_pos, field_stride_head,
                      CACHE_DTYPE) + dims[:, None]
    tl.store(dst, _cache_bits(bits, scale, IN_DTYPE, CACHE_DTYPE, FP8_SOFTWARE), mask=mask)


@triton.jit(do_not_specialize=["has_counter"])
def kv_append_row_kernel(
    key_ptr, value_ptr, slot_ptr, k_cache_ptr, v_cache_ptr,
    k_scale_ptr, v_scale_ptr,  # fp32: static scales, or the scale caches for PER_TOKEN_HEAD
    invalid_slots_ptr,  # int64 counter (only touched when has_counter != 0)
    num_heads, head_dim,
    key_stride_token, key_stride_head, value_stride_token, value_stride_head,
    num_blocks, block_size,
    k_stride_block, k_stride_pos, k_stride_head,  # K and V entries: (block, pos, head), dims contiguous
    v_stride_block, v_stride_pos, v_stride_head,
    scale_stride_block, scale_stride_pos, scale_stride_head,
    has_counter,  # 0 or 1
    SCALE_KIND: tl.constexpr, IN_DTYPE: tl.constexpr, CACHE_DTYPE: tl.constexpr, FP8_SOFTWARE: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
):
    """The plain call's kernel (api.row_kernel_fits): family kv, slot_mapping addressing, K and V
    fields with contiguous dims, BLOCK_D >= head_dim. Grid (num_slots, cdiv(num_heads, BLOCK_H)):
    program (t, p) holds heads [p * BLOCK_H, (p + 1) * BLOCK_H) of row t whole, and loads its K and V
    rows before its slot is known (the rows exist whatever the slot is), so a small call waits for one
    round of loads instead of the slot's and then the rows'. The same helpers as kv_append_kernel; the
    scale kind is a constexpr, and per token-head takes its amax from the rows already loaded."""
    token = tl.program_id(0).to(tl.int64)
    slot, write = _row_slot(token, slot_ptr, block_size, 0, slot_ptr, slot_ptr, slot_ptr, slot_ptr,
                            0, 0, 0, slot_ptr, slot_ptr, 0, 0, 1, 1, slot_ptr)
    heads = (tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)).to(tl.int64)
    head_mask = heads < num_heads
    _, dims, mask = _dim_tile(0, head_dim, head_mask, BLOCK_D)
    k_bits = tl.load(_input_rows(key_ptr, token, key_stride_token, key_stride_head, heads, IN_DTYPE) + dims[:, None],
                     mask=mask, other=0)
    v_bits = tl.load(_input_rows(value_ptr, token, value_stride_token, value_stride_head, heads, IN_DTYPE)
                     + dims[:, None], mask=mask, other=0)
    if write:
        block, pos, inside = _slot_place(slot, block_size, num_blocks, has_counter, invalid_slots_ptr)
        if inside:
            _store_row(k_bits, k_cache_ptr, k_scale_ptr, block, pos, heads, head_mask, dims, mask, num_heads,
                       k_stride_block, k_stride_pos, k_stride_head, scale_stride_block, scale_stride_pos,
                       scale_stride_head, SCALE_KIND, IN_DTYPE, CACHE_DTYPE, FP8_SOFTWARE, BLOCK_H)
            _store_row(v_bits, v_cache_ptr, v_scale_ptr, block, pos, heads, head_mask, dims, mask, num_heads,
                       v_stride_block, v_stride_pos, v_stride_head, scale_stride_block, scale_stride_pos,
                       scale_stride_head, SCALE_KIND, IN_DTYPE, CACHE_DTYPE, FP8_SOFTWARE, BLOCK_H)
