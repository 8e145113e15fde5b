"""An independent numpy model of the append contract (docs/contract.md), for the Triton tests.

Written from the contract, not from the kernel: plain loops over slots and heads, numpy fp32
division, numpy's float16 rounding, and fp8/bf16/int8 rounding by nearest-neighbour search over
the target format's values (exact in float64), ties to the even code.
"""
import numpy as np

QMAX = {"fp8_e4m3": 448.0, "fp8_e5m2": 57344.0, "int8": 127.0}
STORAGE = {"f16": np.uint16, "bf16": np.uint16, "f32": np.uint32,
           "fp8_e4m3": np.uint8, "fp8_e5m2": np.uint8, "int8": np.uint8}


def widen(bits, dtype):
    """Stored bits of an input dtype -> float32 values (exact)."""
    bits = np.asarray(bits)
    if dtype == "f16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float32)
    if dtype == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32)
    return bits.astype(np.uint32).view(np.float32)


def _fp8_values(fmt):
    """(codes, float64 values) of every non-negative finite code of an fp8 format, ascending."""
    codes, vals = [], []
    for c in range(0x80):
        if fmt == "fp8_e4m3":
            e, m = c >> 3, c & 7
            if c == 0x7F:
                continue  # NaN
            v = m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
        else:
            e, m = c >> 2, c & 3
            if e == 31:
                continue  # Inf / NaN
            v = m * 2.0 ** -16 if e == 0 else (1 + m / 4) * 2.0 ** (e - 15)
        codes.append(c)
        vals.append(v)
    return np.array(codes), np.array(vals)


_FP8 = {f: _fp8_values(f) for f in ("fp8_e4m3", "fp8_e5m2")}


def _nearest_even(a, codes, vals):
    """Code of the value nearest to a >= 0 (float64), ties to the even code; saturating."""
    if a >= vals[-1]:
        return int(codes[-1])
    i = int(np.searchsorted(vals, a))  # vals[i-1] < a <= vals[i]
    if vals[i] == a:
        return int(codes[i])
    lo, hi = i - 1, i
    dlo, dhi = a - vals[lo], vals[hi] - a
    if dlo < dhi:
        return int(codes[lo])
    if dhi < dlo:
        return int(codes[hi])
    return int(codes[lo]) if codes[lo] % 2 == 0 else int(codes[hi])


def fp8_code(q, fmt):
    q = np.float32(q)
    if np.isnan(q):
        return 0x7F
    codes, vals = _FP8[fmt]
    mag = _nearest_even(abs(float(q)), codes, vals)
    return mag | (0x80 if np.signbit(q) else 0)


def int8_byte(q):
    q = np.float32(q)
    if np.isnan(q):
        return 0
    r = np.clip(np.rint(q), -128, 127)  # numpy rint: half to even
    return int(np.int8(r)) & 0xFF


def bf16_bits(x):
    """float32 -> bf16 bits by nearest-even search between the two neighbouring bf16 values."""
    x = np.float32(x)
    if np.isnan(x):
        return 0x7FFF
    u = int(np.array(x).view(np.uint32))
    lo = u & 0xFFFF0000
    hi = lo + 0x10000
    vlo = float(np.array(lo, np.uint32).view(np.float32))
    vhi_bits = hi & 0xFFFFFFFF
    vhi = float(np.array(vhi_bits, np.uint32).view(np.float32))
    if np.isinf(vhi) and not np.isinf(vlo):
        vhi = float(np.copysign(2.0 ** 128, vlo))  # overflow rounds like the next binade's start
    if abs(float(x) - vlo) < abs(vhi - float(x)):
        return lo >> 16
    if abs(float(x) - vlo) > abs(vhi - float(x)):
        return vhi_bits >> 16
    return lo >> 16 if (lo >> 16) % 2 == 0 else vhi_bits >> 16


def narrow(x, dtype):
    """float32 -> stored bits of a float cache dtype (RNE, canonical NaN)."""
    x = np.float32(x)
    if dtype == "f16":
        return 0x7FFF if np.isnan(x) else int(np.array(x.astype(np.float16)).view(np.uint16))
    if dtype == "bf16":
        return bf16_bits(x)
    return 0x7FFFFFFF if np.isnan(x) else int(np.array(x).view(np.uint32))


def quantise(x, scale, dtype):
    q = np.float32(x) / np.float32(scale)  # IEEE fp32 division
    return int8_byte(q) if dtype == "int8" else fp8_code(q, dtype)


def cache_index(case, which, b, o, h, d):
    """Flat element index of (block b, offset o, head h, dim d) in K's or V's cache buffer.

    nhd/hnd: K and V each at their strides (one geometry, but kv_split's V has its own), dims
    contiguous. vllm_legacy (vLLM's picture): K is [nb, H, D/x, bs, x], element [b, h, d // x, o, d % x];
    V is [nb, H, D, bs], element [b, h, d, o]; each dense inside a head, heads and blocks at the
    case's strides."""
    c = case
    if c.layout != "vllm_legacy":
        stride_block, stride_pos, stride_head = c.strides(which)
        return c.cache_base[which] + b * stride_block + o * stride_pos + h * stride_head + d
    base = c.cache_base[which] + b * c.stride_block + h * c.stride_head
    if which == "k":
        return base + (d // c.x) * (c.block_size * c.x) + o * c.x + d % c.x
    return base + d * c.block_size + o


def source_bits(case, which, t, h, d):
    """Stored bits of input element d of token t, head h of the row field `which` is written from.
    kv, kv_split, k_only: key's or value's row. mla: the entry's dims [0, D_c) are kv_c's (inputs "k"),
    [D_c, D) are k_pe's (inputs "r") at d - D_c, D_c = head_dim - rope_dim."""
    c = case
    src = "k" if which == "k" else "v"
    if which == "k" and c.rope_dim and d >= c.head_dim - c.rope_dim:
        src, d = "r", d - (c.head_dim - c.rope_dim)
    buf, base, st, sh = c.inputs[src]
    return buf[base + t * st + h * sh + d]


def expected(case):
    """Expected (k_cache, v_cache, k_scale_cache, v_scale_cache, invalid) buffers after the append:
    every field the family stores (case.fields()), each row of its own head dim (case.dims())."""
    c = case
    out = {name: buf.copy() for name, buf in c.buffers.items()}
    invalid = 0
    cap = c.num_blocks * c.block_size
    for t in range(c.num_slots):
        slot = int(c.slots[t])
        if slot < 0:
            continue
        if slot >= cap:
            invalid += 1
            continue
        b, o = divmod(slot, c.block_size)
        for which in c.fields():
            dims = c.dims(which)
            cache = out[c.cache_buffer[which]]
            for h in range(c.num_heads):
                row_bits = [source_bits(c, which, t, h, d) for d in range(dims)]
                x = widen(np.array(row_bits), c.input_dtype)
                dst = [cache_index(c, which, b, o, h, d) for d in range(dims)]
                if c.cache_dtype == c.input_dtype:
                    for d in range(dims):
                        cache[dst[d]] = row_bits[d]
                elif c.cache_dtype in ("f16", "bf16", "f32"):
                    for d in range(dims):
                        cache[dst[d]] = narrow(x[d], c.cache_dtype)
                else:
                    if c.scale_kind == "per_token_head":
                        amax = np.float32(0.0)
                        for d in range(dims):
                            if not np.isnan(x[d]):
                                amax = max(amax, np.float32(abs(x[d])))
                        scale = np.float32(max(amax, np.float32(1e-6))) / np.float32(QMAX[c.cache_dtype])
                        sbuf = out[f"{which}_scale_cache"]
                        sbuf[c.scale_base + b * c.scale_strides[0] + o * c.scale_strides[1] + h * c.scale_strides[2]] = \
                            np.array(np.float32(scale)).view(np.uint32)
                    else:
                        s = c.scales[which]
                        scale = {"per_tensor": lambda: s[0], "per_head": lambda: s[h],
                                 "per_block": lambda: s[b * c.num_heads + h]}[c.scale_kind]()
                    for d in range(dims):
                        cache[dst[d]] = quantise(x[d], scale, c.cache_dtype)
    return out, invalid
