"""Test batches for the Triton kernels: numpy buffers with canaries, and two ways to run them.

A Case holds every buffer as a flat numpy array of the stored element's unsigned type (uint16 for
f16/bf16, uint32 for f32, uint8 for fp8/int8), with guard elements before and after each view and
canary bits everywhere the contract says nothing is written. Layouts: "nhd" and "hnd" (K and V of one
geometry) and "vllm_legacy" (vLLM's K [nb, H, D/x, bs, x] and V [nb, H, D, bs], x = 16 bytes of
cache elements). Families (docs/formats.md): "kv"; "kv_split" (V rows of value_dim dims into a V
cache with its own strides); "k_only" (no V); "mla" (one head, K's last rope_dim dims from the rope
input, k_pe). run_raw() launches the kernel on the
buffers in place through HostPtr (interpreter only); run_torch() copies them into torch tensors
(CPU under the interpreter, CUDA on a GPU), calls the torch API on strided views and copies back.
"""
import dataclasses

import numpy as np

from reference import QMAX, STORAGE, widen

TRITON_NAME = {"f16": "fp16", "bf16": "bf16", "f32": "fp32", "fp8_e4m3": "u8", "fp8_e5m2": "u8", "int8": "u8"}
GUARD = 5


@dataclasses.dataclass
class Case:
    input_dtype: str
    cache_dtype: str
    layout: str  # nhd | hnd (how the 4-D cache view is ordered) | vllm_legacy (K 5-D, V 4-D)
    num_slots: int
    num_rows: int
    num_heads: int
    head_dim: int
    num_blocks: int
    block_size: int
    stride_block: int
    stride_pos: int
    stride_head: int
    slots: np.ndarray
    buffers: dict  # name -> flat numpy array (stored bits)
    inputs: dict  # "k"/"v" -> (buffer, base, stride_token, stride_head)
    input_buffer: dict  # "k"/"v" -> buffer name
    cache_buffer: dict  # "k"/"v" -> buffer name
    cache_base: dict
    scale_kind: str = "none"
    scales: dict = None  # "k"/"v" -> float32 array (static kinds)
    scale_base: int = 0
    scale_strides: tuple = (0, 0, 0)
    counter: bool = True
    x: int = 0  # vllm_legacy: elements per x-chunk of K (16 bytes of the cache dtype); 0 otherwise
    family: str = "kv"  # kv | kv_split | k_only | mla
    value_dim: int = 0  # V's head dim (kv_split: its own; else head_dim)
    v_strides: tuple = None  # kv_split: V's (stride_block, stride_pos, stride_head); else K's
    rope_dim: int = 0  # mla: K's last rope_dim dims come from inputs["r"] (k_pe)

    def fields(self):
        """The cache fields the family stores: ("k", "v") or ("k",)."""
        return ("k",) if self.family in ("k_only", "mla") else ("k", "v")

    def dims(self, which):
        return self.value_dim if which == "v" else self.head_dim

    def strides(self, which):
        """(stride_block, stride_pos, stride_head) of field `which` (nhd/hnd layouts)."""
        if which == "v" and self.v_strides is not None:
            return self.v_strides
        return self.stride_block, self.stride_pos, self.stride_head


def random_bits(rng, n, dtype):
    """Random stored bit patterns of a float dtype (NaN payloads, Inf, subnormals included)."""
    if dtype == "f32":
        return rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    return rng.integers(0, 2 ** 16, n, dtype=np.uint32).astype(np.uint16)


def values_bits(rng, n, dtype, magnitude):
    """Bits of normally distributed values (times magnitude) with specials sprinkled in."""
    x = (rng.standard_normal(n) * magnitude).astype(np.float32)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -3e-39, 2.5, -0.5, 1e30],
                        np.float32)
    pick = rng.random(n) < 0.1
    x[pick] = rng.choice(specials, pick.sum())
    if dtype == "f16":
        return x.astype(np.float16).view(np.uint16)
    if dtype == "bf16":
        return (x.view(np.uint32) >> 16).astype(np.uint16)
    return x.view(np.uint32)


def xpack(cache_dtype):
    """vLLM's x: the cache elements in 16 bytes."""
    return 16 // np.dtype(STORAGE[cache_dtype]).itemsize


def cache_strides(layout, nb, bs, h, d, pad, x=1):
    """(stride_block, stride_pos, stride_head, extent) of a cache; pad > 0 adds gaps everywhere.
    vllm_legacy: the block and head strides K and V share (dense inside a head, D*bs elements),
    K's pos stride x, and the extent of either."""
    if layout == "vllm_legacy":
        sh = d * bs + pad
        sb = h * sh + 2 * pad
        extent = (nb - 1) * sb + (h - 1) * sh + d * bs if nb and bs else 0
        return sb, x, sh, extent
    if layout == "nhd":
        sh = d + pad
        sp = h * sh + pad
        sb = bs * sp + 2 * pad
    else:
        sp = d + pad
        sh = bs * sp + pad
        sb = h * sh + 2 * pad
    extent = (nb - 1) * sb + (bs - 1) * sp + (h - 1) * sh + d if nb and bs else 0
    return sb, sp, sh, extent


def make_case(rng, *, input_dtype="f16", cache_dtype=None, layout="nhd", num_slots=6, extra_rows=2,
              num_heads=3, head_dim=8, num_blocks=3, block_size=4, pad=0, packed=False, fused_q_heads=None,
              slot_dtype=np.int64, slots=None, scale_kind="none", values="bits", magnitude=1.0,
              scale_values="random", counter=True, family="kv", value_dim=None, rope_dim=0, mla_fused=False):
    """A random case. family "kv_split" takes value_dim (V's head dim) and gives V its own strides;
    "mla" forces one head and takes rope_dim (k_pe's dims; kv_c has head_dim - rope_dim), k_pe a
    separate input or, mla_fused, the tail of kv_c's row (two slices of one projection row)."""
    cache_dtype = cache_dtype or input_dtype
    if family == "mla":
        num_heads = 1
        assert 0 < rope_dim <= head_dim and fused_q_heads is None and not packed and layout != "vllm_legacy"
    if family != "kv":
        assert layout in ("nhd", "hnd") and not packed and fused_q_heads is None
    value_dim = value_dim if family == "kv_split" and value_dim is not None else head_dim
    h, d, nb, bs = num_heads, head_dim, num_blocks, block_size
    in_t = STORAGE[input_dtype]
    rows = num_slots + extra_rows
    buffers, inputs, input_buffer = {}, {}, {}

    def fill(n):
        if values == "bits":
            return random_bits(rng, n, input_dtype)
        return values_bits(rng, n, input_dtype, magnitude)

    if fused_q_heads is not None:  # views into a fused QKV projection [rows, (Hq + 2H) * D + pad]
        width = (fused_q_heads + 2 * h) * d + pad
        qkv = np.full(GUARD * 2 + rows * width, in_t(0xFFFF if in_t is np.uint16 else 0xFFFFFFFF), in_t)
        qkv[GUARD:GUARD + num_slots * width] = fill(num_slots * width)
        buffers["qkv"] = qkv
        inputs["k"] = (qkv, GUARD + fused_q_heads * d, width, d)
        inputs["v"] = (qkv, GUARD + (fused_q_heads + h) * d, width, d)
        input_buffer = {"k": "qkv", "v": "qkv"}
    elif family == "mla":
        d_c = d - rope_dim
        sources = [("k", "kv_c", d_c), ("r", "k_pe", rope_dim)] if not mla_fused else [("k", "latent_in", d)]
        for which, name, dims in sources:
            row = dims + pad
            buf = np.full(GUARD * 2 + rows * row, in_t(0xFFFF if in_t is np.uint16 else 0xFFFFFFFF), in_t)
            buf[GUARD:GUARD + num_slots * row] = fill(num_slots * row)
            buffers[name] = buf
            inputs[which] = (buf, GUARD, row, 0)
            input_buffer[which] = name
        if mla_fused:  # k_pe: the row's last rope_dim dims
            buf, base, row, _ = inputs["k"]
            inputs["r"] = (buf, base + d_c, row, 0)
            input_buffer["r"] = "latent_in"
    else:
        names = (("k", "key", d), ("v", "value", value_dim)) if family != "k_only" else (("k", "key", d),)
        for which, name, dims in names:
            row = h * (dims + pad) + pad
            buf = np.full(GUARD * 2 + rows * row, in_t(0xFFFF if in_t is np.uint16 else 0xFFFFFFFF), in_t)
            buf[GUARD:GUARD + num_slots * row] = fill(num_slots * row)  # padding rows stay NaN
            buffers[name] = buf
            inputs[which] = (buf, GUARD, row, dims + pad)
            input_buffer[which] = name

    x = xpack(cache_dtype) if layout == "vllm_legacy" else 0
    if x:
        assert d % x == 0 and not packed, "vllm_legacy: head_dim a multiple of x, K and V separate"
    sb, sp, sh, extent = cache_strides(layout, nb, bs, h, d, pad, x)
    c_t = STORAGE[cache_dtype]
    canary = {np.uint8: 0xA5, np.uint16: 0x7E5A, np.uint32: 0x7FC0DEAD}[c_t]
    if packed:  # K and V in one [nb, 2, bs, H, D]-like tensor: V's base is half a block further
        assert layout == "nhd" and pad == 0
        sb = 2 * bs * h * d
        half = bs * h * d
        extent = (nb - 1) * sb + half + (bs - 1) * sp + (h - 1) * sh + d if nb else half
        buffers["kv_cache"] = np.full(extent + 2 * GUARD, c_t(canary), c_t)
        cache_buffer = {"k": "kv_cache", "v": "kv_cache"}
        cache_base = {"k": GUARD, "v": GUARD + half}
    else:
        buffers["k_cache"] = np.full(extent + 2 * GUARD, c_t(canary), c_t)
        cache_buffer, cache_base = {"k": "k_cache"}, {"k": GUARD}
        v_strides = None
        if family == "kv_split":  # V's own head dim and strides (other gaps than K's)
            vsb, vsp, vsh, extent = cache_strides(layout, nb, bs, h, value_dim, pad + 1)
            v_strides = (vsb, vsp, vsh)
        if family in ("kv", "kv_split"):
            buffers["v_cache"] = np.full(extent + 2 * GUARD, c_t(canary ^ 0x5A), c_t)
            cache_buffer["v"], cache_base["v"] = "v_cache", GUARD

    cap = nb * bs
    if slots is None:
        valid = rng.permutation(cap)[:num_slots]
        slots = [int(s) for s in valid]
        for i in range(0, num_slots, 3):  # every third entry: padding or an invalid slot
            slots[i] = [-1, cap, cap + 7, -5][i // 3 % 4]
    slots = np.array(slots, dtype=slot_dtype)
    buffers["slots"] = slots

    case = Case(input_dtype, cache_dtype, layout, num_slots, rows, h, d, nb, bs, sb, sp, sh, slots,
                buffers, inputs, input_buffer, cache_buffer, cache_base, scale_kind=scale_kind,
                counter=counter, x=x, family=family, value_dim=value_dim,
                v_strides=None if packed else v_strides, rope_dim=rope_dim if family == "mla" else 0)
    if counter:
        buffers["invalid"] = np.array([3], np.int64)  # counts on top of what is there

    if scale_kind in ("per_tensor", "per_head", "per_block"):
        n = {"per_tensor": 1, "per_head": h, "per_block": nb * h}[scale_kind]
        case.scales = {}
        for which in case.fields():
            if scale_values == "pow2":
                s = 2.0 ** rng.integers(-3, 4, n)
            else:
                s = rng.uniform(0.05, 3.0, n)
            s = s.astype(np.float32)
            case.scales[which] = s
            buffers[f"{which}_scale"] = s.view(np.uint32)
    elif scale_kind == "per_token_head":  # [nb, bs, H] for nhd, [nb, H, bs] otherwise
        ssb, ssp, ssh, sext = cache_strides("nhd" if layout == "nhd" else "hnd", nb, bs, h, 1, pad)
        case.scale_strides = (ssb, ssp, ssh)
        case.scale_base = GUARD
        for which in case.fields():
            buffers[f"{which}_scale_cache"] = np.full(sext + 2 * GUARD, np.uint32(0x7FBADBAD), np.uint32)
    return case


# ---------------------------------------------------------------------------------------------
# Running a case

def csr_of(slots, block_size):
    """FlashInfer-style CSR arrays that address `slots` (every entry valid), each row a request of its
    own whose one page is the slot's block: (batch_indices, positions, kv_indices, kv_indptr), int32."""
    slots = np.asarray(slots, dtype=np.int64)
    assert (slots >= 0).all()
    t = len(slots)
    return (np.arange(t, dtype=np.int32), (slots % block_size).astype(np.int32),
            (slots // block_size).astype(np.int32), np.arange(t + 1, dtype=np.int32))


def run_raw(case, variant=None, fp8_software=None, tile=None, csr=None, window=None, cp=None):
    """Launches the kernel in place on the numpy buffers through HostPtr (interpreter only). csr:
    (batch_indices, positions, kv_indices, kv_indptr) int32 arrays instead of the slot mapping;
    window: (positions, seq_lens, size, sinks), a ring whose kernel applies the window; cp:
    (positions, rank, world_size, interleave), a context-parallel rank that keeps its own rows."""
    from kvfuzz_triton import FieldStrides, HostPtr, KvAppendParams, launch, legacy_fields

    def ptr(buf, base, name):
        return HostPtr(buf.ctypes.data + base * buf.itemsize, name)

    c = case
    has_value = "v" in c.fields()
    kb, kbase, kst, ksh = c.inputs["k"]
    vb, vbase, vst, vsh = c.inputs["v"] if has_value else (None, 0, 0, 0)
    p = KvAppendParams(
        key=ptr(kb, kbase, TRITON_NAME[c.input_dtype]),
        value=ptr(vb, vbase, TRITON_NAME[c.input_dtype]) if has_value else None,
        key_stride_token=kst, key_stride_head=ksh, value_stride_token=vst, value_stride_head=vsh,
        slot_mapping=ptr(c.slots, 0, "i64" if c.slots.dtype == np.int64 else "i32"), num_slots=c.num_slots,
        k_cache=ptr(c.buffers[c.cache_buffer["k"]], c.cache_base["k"], TRITON_NAME[c.cache_dtype]),
        v_cache=ptr(c.buffers[c.cache_buffer["v"]], c.cache_base["v"], TRITON_NAME[c.cache_dtype]) if has_value else None,
        num_blocks=c.num_blocks, block_size=c.block_size, stride_block=c.stride_block,
        stride_pos=c.stride_pos, stride_head=c.stride_head, num_heads=c.num_heads, head_dim=c.head_dim,
        input_dtype=c.input_dtype, cache_dtype=c.cache_dtype,
        invalid_slots=ptr(c.buffers["invalid"], 0, "i64") if c.counter else None,
        scale_kind=c.scale_kind, has_value=has_value)
    if c.layout == "vllm_legacy":
        p.k_field, p.v_field = legacy_fields(c.stride_block, c.stride_head, c.block_size, c.x)
    if c.family == "kv_split":
        p.value_head_dim = c.value_dim
        p.v_field = FieldStrides(*c.v_strides)
    if c.family == "mla":
        rb, rbase, rst, rsh = c.inputs["r"]
        p.rope, p.rope_stride_token, p.rope_stride_head = ptr(rb, rbase, TRITON_NAME[c.input_dtype]), rst, rsh
        p.rope_dim = c.rope_dim
    if c.scales:
        p.k_scale = ptr(c.buffers["k_scale"], 0, "fp32")
        if has_value:
            p.v_scale = ptr(c.buffers["v_scale"], 0, "fp32")
    if c.scale_kind == "per_token_head":
        p.k_scale_cache = ptr(c.buffers["k_scale_cache"], c.scale_base, "fp32")
        if has_value:
            p.v_scale_cache = ptr(c.buffers["v_scale_cache"], c.scale_base, "fp32")
        p.scale_stride_block, p.scale_stride_pos, p.scale_stride_head = c.scale_strides
    if window is not None:
        positions, seq_lens, p.window_size, p.window_sinks = window
        p.window_positions, p.window_seq_lens = ptr(positions, 0, "i32"), ptr(seq_lens, 0, "i32")
    if cp is not None:
        positions, p.cp_rank, p.cp_world_size, p.cp_interleave = cp
        p.cp_positions = ptr(positions, 0, "i32")
    if csr is not None:
        p.slot_mapping = None
        p.csr_batch_indices, p.csr_positions, p.csr_kv_indices, p.csr_kv_indptr = (ptr(a, 0, "i32") for a in csr)
    return launch(p, variant=variant, fp8_software=fp8_software, tile=tile)


TORCH_VIEW = {np.uint8: "uint8", np.uint16: "int16", np.uint32: "int32", np.int64: "int64", np.int32: "int32"}


def run_torch(case, device, variant=None, fp8_software=None, cache_tensor_dtype=None, **overrides):
    """Copies the buffers to torch tensors on `device`, calls kv_append on views, copies back."""
    import torch
    from kvfuzz_triton import kv_append

    c = case
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
           "fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2, "int8": torch.int8}
    flat = {}
    for name, buf in c.buffers.items():
        view = buf.view(getattr(np, TORCH_VIEW[buf.dtype.type])) if buf.dtype.type in TORCH_VIEW else buf
        flat[name] = torch.from_numpy(view.copy()).to(device)

    def typed(name, dtype):
        t = flat[name]
        return t if t.dtype == dtype else t.view(dtype)

    has_value = "v" in c.fields()
    kb, kbase, kst, ksh = c.inputs["k"]
    in_dt = tdt[c.input_dtype]
    cache_dt = cache_tensor_dtype or tdt[c.cache_dtype]
    value = vc = rope = None
    if c.family == "mla":  # kv_c [T, D_c], k_pe [T, rope_dim], the latent cache [nb, bs, D]
        rb, rbase, rst, _ = c.inputs["r"]
        key = typed(c.input_buffer["k"], in_dt).as_strided((c.num_rows, c.head_dim - c.rope_dim), (kst, 1), kbase)
        rope = typed(c.input_buffer["r"], in_dt).as_strided((c.num_rows, c.rope_dim), (rst, 1), rbase)
        kc = typed(c.cache_buffer["k"], cache_dt).as_strided(
            (c.num_blocks, c.block_size, c.head_dim), (c.stride_block, c.stride_pos, 1), c.cache_base["k"])
    else:
        key = typed(c.input_buffer["k"], in_dt).as_strided((c.num_rows, c.num_heads, c.head_dim), (kst, ksh, 1), kbase)
        if has_value:
            vb, vbase, vst, vsh = c.inputs["v"]
            value = typed(c.input_buffer["v"], in_dt).as_strided((c.num_rows, c.num_heads, c.value_dim),
                                                                 (vst, vsh, 1), vbase)
    if c.layout == "vllm_legacy":  # vLLM's K [nb, H, D/x, bs, x] and V [nb, H, D, bs]
        nb, h, d, bs, x = c.num_blocks, c.num_heads, c.head_dim, c.block_size, c.x
        k_view = (nb, h, d // x, bs, x), (c.stride_block, c.stride_head, bs * x, x, 1)
        v_view = (nb, h, d, bs), (c.stride_block, c.stride_head, bs, 1)
    else:
        def view(which):
            sb, sp, sh = c.strides(which)
            if c.layout == "nhd":
                return (c.num_blocks, c.block_size, c.num_heads, c.dims(which)), (sb, sp, sh, 1)
            return (c.num_blocks, c.num_heads, c.block_size, c.dims(which)), (sb, sh, sp, 1)
        k_view, v_view = view("k"), view("v")
    if c.family != "mla":
        kc = typed(c.cache_buffer["k"], cache_dt).as_strided(*k_view, c.cache_base["k"])
        if has_value:
            vc = typed(c.cache_buffer["v"], cache_dt).as_strided(*v_view, c.cache_base["v"])
    kwargs = {"layout": c.layout, "variant": variant, "fp8_software": fp8_software}
    if rope is not None:
        kwargs["rope"] = rope
    if c.counter:
        kwargs["invalid_slots"] = flat["invalid"]
    if c.scale_kind != "none":
        kwargs["scale_kind"] = c.scale_kind
    if c.scales:
        shape = (c.num_blocks, c.num_heads) if c.scale_kind == "per_block" else (-1,)
        for which in c.fields():
            kwargs[f"{which}_scale"] = typed(f"{which}_scale", torch.float32).reshape(shape)
    if c.scale_kind == "per_token_head":
        ssb, ssp, ssh = c.scale_strides
        if c.layout == "nhd":
            s3, st3 = (c.num_blocks, c.block_size, c.num_heads), (ssb, ssp, ssh)
        else:
            s3, st3 = (c.num_blocks, c.num_heads, c.block_size), (ssb, ssh, ssp)
        for which in c.fields():
            kwargs[f"{which}_scale_cache"] = typed(f"{which}_scale_cache", torch.float32).as_strided(s3, st3, c.scale_base)
    kwargs.update(overrides)
    kv_append(key, value, kc, vc, flat["slots"], **kwargs)
    if device != "cpu":
        torch.cuda.synchronize()
    for name, buf in c.buffers.items():
        out = flat[name].cpu().numpy()
        buf[...] = out.view(buf.dtype)
