"""kv_append_quant: the torch API of the quantised formats (kv_append_format.py; docs/kernels.md).

    kv_append_quant(key, value, key_cache, value_cache, slot_mapping, *, quant_format, layout="nhd",
                    key_scales=None, value_scales=None, k_scale=None, v_scale=None, rope=None,
                    scale_layout="linear", rules=None, invalid_slots=None, fp8_software=None) -> None

Every cache and scale tensor is a byte tensor of its format (uint8, int8, or the float8 dtypes: any
1-byte dtype; the asymmetric formats' scales float32), written in place; `layout` ("nhd" or "hnd")
orders the 4-D ones like kv_append's caches, and every stride but the last dim's is free:

  format        key_cache / value_cache               key_scales / value_scales         also
  nvfp4         [nb, bs, H, D/2] e2m1 pairs           [nb, bs, H, D/16] e4m3             k_scale, v_scale: fp32 [1]
                                                                                        decode global scales;
                                                                                        scale_layout "linear",
                                                                                        "swizzled_v" (V in vLLM's
                                                                                        SM100 4x4 tiles), "swizzled"
  mxfp4         [nb, bs, H, D/2] e2m1 pairs           [nb, bs, H, D/32] e8m0
  mxfp8_e4m3/   [nb, bs, H, D] fp8 codes              [nb, bs, H, D/32] e8m0
  mxfp8_e5m2
  fp8_inline,   [nb, bs, H, R] rows of D codes and    (none: the scale is at byte D of each row)
  int8_inline   an fp32 scale at byte D, R >= D + 4
  asym_int8     [nb, bs, H, D] uint8 codes            [nb, bs, H, 2] fp32 (scale, zero point)
  asym_int4     [nb, bs, H, D/2] uint4 pairs          [nb, bs, H, 2] fp32
  ds_mla        key = kv_c [T, Dc] (or [T, 1, Dc]), rope = k_pe [T, R]; value = value_cache = None;
                key_cache [nb, bs, Dc + 4 Dc/128 + R * element size] records (DeepSeek's 656 bytes for
                512 + 64 bf16): codes, fp32 scales, the rope dims copied
  indexer_k     key [T, D] (or [T, 1, D]); value = value_cache = None; key_cache [nb, bs, D + 4 D/128]
                (vLLM's indexer k cache): per block all bs rows of codes, then all fp32 scales

H and D come from key [T_in, H, D] (value: [T_in, H, D], any token and head strides, last dim
contiguous); D must be a multiple of the format's group (16 nvfp4, 32 MX, 128 ds_mla and indexer_k).
slot_mapping [T] int32/int64: < 0 skipped, >= nb * bs never written and counted in invalid_slots
(int64 [1]) when given. `rules` (FormatRules, or a dict of its fields) names the conventions
(src/golden/block_quant.h): nvfp4 "flashinfer" | "flashinfer_precise", mx "ocp_floor" | "nv_ceil",
ds_mla "flt_min" | "pow2", indexer "fp32" | "ue8m0_log2f" | "ue8m0_exact", asym_arith "f32" | "f16"
| "bf16" (asym_int8), asym_lanes "exact" | "zero_padded_pow2", int4_pairing "split_half" (dim d with
d + D/2 in one byte, LMDeploy) | "adjacent" (2j low nibble, 2j+1 high). Tensors on one device: CUDA,
or the CPU under TRITON_INTERPRET=1. A ValueError names what does not fit.

The arguments only need .shape, .stride(), .data_ptr(), .element_size(), .dtype and .device, which
torch tensors have (the tests use a numpy stand-in).
"""
import dataclasses

from .api import KvAppendParams, check_resolved, interpreting, launch
from .direct_launch import LruCache, direct_launch_mode, is_compiled, on_device
from .format_api import FORMATS, GROUP, KV_APPEND_FORMAT, FormatField, FormatRules, format_call
from .launch_plan import LaunchPlan, Slot, keyed_pointers, lookup, remember

SCALE_LAYOUTS = ("linear", "swizzled_v", "swizzled")


def _fail(msg):
    raise ValueError(f"kv_append_quant: {msg}")


def _dtype_name(t):
    return str(t.dtype).split(".")[-1]


def _rows(t, name, dims=3):
    """t as [T, H, D] (dims 3) or [T, D] (dims 2, accepting [T, 1, D]): (tensor-like view info)."""
    shape, strides = tuple(t.shape), tuple(t.stride())
    if dims == 2 and len(shape) == 3 and shape[1] == 1:
        shape, strides = (shape[0], shape[2]), (strides[0], strides[2])
    if len(shape) != dims:
        _fail(f"{name} must be {'[tokens, heads, dims]' if dims == 3 else '[tokens, dims]'}, got shape {tuple(t.shape)}")
    if shape[-1] > 1 and strides[-1] != 1:
        _fail(f"the last dim of {name} must be contiguous (stride 1)")
    return shape, strides


def _four_d(t, name, layout, heads, row):
    """(num_blocks, block_size, (block, pos, head) strides in elements) of a 4-D nhd/hnd tensor of rows of `row`
    elements (None: any row >= 1)."""
    shape, strides = tuple(t.shape), tuple(t.stride())
    if len(shape) != 4:
        _fail(f"{name} must be 4-D ({'[blocks, block_size, heads, row]' if layout == 'nhd' else '[blocks, heads, block_size, row]'}), "
              f"got {shape}")
    if layout == "nhd":
        nb, bs, h, r = shape
        sb, sp, sh, sd = strides
    else:
        nb, h, bs, r = shape
        sb, sh, sp, sd = strides
    if h != heads or (row is not None and r != row):
        _fail(f"{name} is {shape} ({layout}): expected {heads} heads and rows of {row if row is not None else 'any'} elements")
    if r > 1 and sd != 1:
        _fail(f"the last dim of {name} must be contiguous (stride 1)")
    return nb, bs, r, (sb, sp, sh)


def _offset(t, base, unit, name):
    """Offset of t's first byte from base's in units of `unit` bytes."""
    delta = t.data_ptr() - base.data_ptr()
    if delta % unit:
        _fail(f"{name} is {delta} bytes from its buffer's first tensor: not a multiple of {unit}")
    return delta // unit


# Launch plans of kv_append_quant calls (launch_plan.py), at most CACHE_CAPACITY, least recently used
# forgotten.
PLANS = LruCache()


def kv_append_quant(key, value, key_cache, value_cache, slot_mapping, *, quant_format, layout="nhd",
                    key_scales=None, value_scales=None, k_scale=None, v_scale=None, rope=None,
                    scale_layout="linear", rules=None, invalid_slots=None, fp8_software=None):
    """Appends key/value rows to a quantised paged KV cache in place (see the module docstring).

    On the GPU a call like an earlier valid one is launched from that call's plan without validating
    again, as kv_append's are (launch_plan.py): same tensor shapes, strides, dtypes, devices and
    16-byte alignment, same other arguments, and the same byte distances from key_cache to value_cache
    and from key_scales to value_scales (the format kernel addresses V's fields from K's buffers, so
    those distances are kernel arguments). KVFUZZ_TRITON_DIRECT_LAUNCH=0 validates every call."""
    tensors = (key, value, key_cache, value_cache, slot_mapping, key_scales, value_scales, k_scale, v_scale, rope,
               invalid_slots)
    mode = direct_launch_mode()
    plan_key = plan = None
    if mode != "0" and KV_APPEND_FORMAT.supported:  # supported: compiled for the GPU, not interpreted
        plan_key, pointers = keyed_pointers(tensors, (quant_format, layout, scale_layout, rules, fp8_software))
        if plan_key is not None:
            plan_key = (plan_key, _distance(pointers, 2, 3), _distance(pointers, 5, 6))
        plan_key, plan = lookup(PLANS, plan_key)  # unhashable (rules as a dict): the full path every call
        if plan is not None and mode == "1":
            plan.launch(pointers)
            return
    p = _checked_params(key, value, key_cache, value_cache, slot_mapping, quant_format, layout, key_scales,
                        value_scales, k_scale, v_scale, rope, scale_layout, rules, invalid_slots)
    device = getattr(key, "device", None)
    if getattr(device, "type", "cpu") != "cuda":
        launch(p, fp8_software=fp8_software)
        return
    with on_device(device.index):
        compiled = launch(p, fp8_software=fp8_software)
    if plan_key is None or not is_compiled(compiled):
        return
    remember(PLANS, plan_key, plan, quant_plan(p, compiled, device.index, fp8_software=fp8_software), "kv_append_quant")


def _distance(pointers, a, b):
    """pointers[b] - pointers[a], None when either tensor is absent."""
    return None if pointers[a] is None or pointers[b] is None else pointers[b] - pointers[a]


# The KvAppendParams fields _checked_params fills with kv_append_quant's tensor arguments: the index of
# each in the call's `tensors` (value_cache and value_scales enter as offsets from key_cache and
# key_scales; format_scales is key_scales, or key_cache itself for the formats that keep their scales
# there).
PLAN_SLOTS = {"key": 0, "value": 1, "format_cache": 2, "slot_mapping": 4, "k_scale": 7, "v_scale": 8, "rope": 9,
              "invalid_slots": 10}


def quant_plan(p, compiled, device, *, fp8_software=None):
    """The LaunchPlan (launch_plan.py) of launching `compiled` for p, the KvAppendParams _checked_params
    made of a kv_append_quant call, on CUDA device `device`: the kernel's arguments derived once more
    with each of p's tensors replaced by the Slot of the call argument it is (PLAN_SLOTS). None when an
    argument cannot be planned."""
    slots = dict(PLAN_SLOTS, format_scales=2 if p.format_scales is p.format_cache else 5)
    marked = dataclasses.replace(p, **{f: Slot(i) for f, i in slots.items() if getattr(p, f) is not None})
    call = format_call(marked, fp8_software=interpreting() if fp8_software is None else fp8_software)
    if call is None:
        return None
    grid, args, constexprs = call
    return LaunchPlan.of(compiled, grid, KV_APPEND_FORMAT.bind(args, constexprs), device)


def _checked_params(key, value, key_cache, value_cache, slot_mapping, quant_format, layout, key_scales,
                    value_scales, k_scale, v_scale, rope, scale_layout, rules, invalid_slots):
    """The KvAppendParams of a kv_append_quant call; ValueError("kv_append_quant: ...") naming what
    does not fit."""
    if quant_format not in FORMATS[1:]:
        _fail(f"quant_format must be one of {FORMATS[1:]}, got {quant_format!r}")
    if layout not in ("nhd", "hnd"):
        _fail(f'layout must be "nhd" or "hnd", got {layout!r}')
    if scale_layout not in SCALE_LAYOUTS:
        _fail(f"scale_layout must be one of {SCALE_LAYOUTS}, got {scale_layout!r}")
    if scale_layout != "linear" and quant_format != "nvfp4":
        _fail("scale_layout is nvfp4's (vLLM's swizzled SM100 scales)")
    if isinstance(rules, dict):
        rules = FormatRules(**rules)
    rules = rules or FormatRules()
    fmt = quant_format
    single = fmt in ("ds_mla", "indexer_k")
    if single and (value is not None or value_cache is not None or value_scales is not None):
        _fail(f"{fmt} stores one tensor: pass value=None, value_cache=None, value_scales=None")
    has_value = value is not None
    if not single and has_value != (value_cache is not None):
        _fail("value and value_cache go together: both tensors, or both None (K alone)")
    if (rope is not None) != (fmt == "ds_mla"):
        _fail("rope (k_pe) goes with ds_mla, and ds_mla needs it")
    input_dtype = {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}.get(_dtype_name(key))
    if input_dtype is None:
        _fail(f"key must be float16, bfloat16 or float32, got {key.dtype}")
    for name, t in (("value", value), ("rope", rope)):
        if t is not None and t.dtype != key.dtype:
            _fail(f"key and {name} dtypes differ: {key.dtype} vs {t.dtype}")
    if _dtype_name(slot_mapping) not in ("int32", "int64") or len(tuple(slot_mapping.shape)) != 1:
        _fail(f"slot_mapping must be a 1-D int32 or int64 tensor, got {slot_mapping.dtype} {tuple(slot_mapping.shape)}")
    num_slots = slot_mapping.shape[0]
    if num_slots > 1 and slot_mapping.stride(0) != 1:
        _fail("slot_mapping must be contiguous")
    for name, t in (("key_cache", key_cache), ("value_cache", value_cache)):
        if t is not None and t.element_size() != 1:
            _fail(f"{name} must be a 1-byte tensor (uint8, int8, float8), got {t.dtype}")

    rope_dim = 0
    rope_stride = 0
    v_strides = (0, 0)
    fields = {}
    scale_base = key_scales
    if single:
        (num_rows, D), (k_token, _) = _rows(key, "key (kv_c)" if fmt == "ds_mla" else "key", dims=2)
        k_strides = (k_token, 0)
        H = 1
        shape, strides = tuple(key_cache.shape), tuple(key_cache.stride())
        if len(shape) != 3 or (shape[2] > 1 and strides[2] != 1):
            _fail(f"{fmt}: key_cache must be [blocks, block_size, record bytes] with contiguous records, got {shape}")
        nb, bs, record = shape
        groups = D // 128
        scale_base = key_cache
        if fmt == "ds_mla":
            (_, rope_dim), (rope_stride, _) = _rows(rope, "rope (k_pe)", dims=2)
            if rope.shape[0] != num_rows:
                _fail(f"ds_mla: kv_c has {num_rows} rows, k_pe {rope.shape[0]}")
            esz = key.element_size()
            want = D + 4 * groups + rope_dim * esz
            if record != want:
                _fail(f"ds_mla: records of {D} codes, {groups} fp32 scales and {rope_dim} rope dims are {want} bytes, "
                      f"key_cache's are {record}")
            for s, unit in ((strides[0], 4), (strides[1], 4), (D, 4), (D + 4 * groups, esz)):
                if s % unit:
                    _fail(f"ds_mla: record strides and offsets must be multiples of 4 bytes, got strides {strides}")
            fields["kc"] = FormatField.flat(0, strides[0], strides[1], 0)
            fields["ks"] = FormatField.flat(D // 4, strides[0] // 4, strides[1] // 4, 0)
            fields["rp"] = FormatField.flat((D + 4 * groups) // esz, strides[0] // esz, strides[1] // esz, 0)
            head_dim = D + rope_dim
        else:
            if record != D + 4 * groups or (bs > 1 and strides[1] != record) or strides[0] % 4:
                _fail(f"indexer_k: key_cache must be [blocks, block_size, {D} + {4 * groups}] with dense blocks "
                      f"(block stride a multiple of 4), got {shape} strides {strides}")
            fields["kc"] = FormatField.flat(0, strides[0], D, 0)
            fields["ks"] = FormatField.flat(bs * D // 4, strides[0] // 4, groups, groups)
            head_dim = D
    else:
        (num_rows, H, D), k_strides = _rows(key, "key")
        if has_value:
            (v_rows, v_heads, v_dim), v_strides = _rows(value, "value")
            if (v_rows, v_heads, v_dim) != (num_rows, H, D):
                _fail(f"key and value shapes differ: {tuple(key.shape)} vs {tuple(value.shape)}")
        four = fmt in ("nvfp4", "mxfp4", "asym_int4")
        inline = fmt in ("fp8_inline", "int8_inline")
        if four and D % 2:
            _fail(f"{fmt} packs two dims a byte: D = {D} must be even")
        unit = 2 if four else 1
        row = None if inline else (D // 2 if four else D)
        nb, bs, r, k_geo = _four_d(key_cache, "key_cache", layout, H, row)
        caches = [("k", key_cache, k_geo)]
        if has_value:
            v_nb, v_bs, v_r, v_geo = _four_d(value_cache, "value_cache", layout, H, row)
            if (v_nb, v_bs) != (nb, bs):
                _fail(f"key_cache {tuple(key_cache.shape)} and value_cache {tuple(value_cache.shape)} differ in blocks or block_size")
            caches.append(("v", value_cache, v_geo))
        if inline and r < D + 4:
            _fail(f"{fmt}: rows of {D} codes and an fp32 scale need at least {D + 4} bytes, key_cache's have {r}")
        for side, t, (sb, sp, sh) in caches:
            f = FormatField.flat(unit * _offset(t, key_cache, 1, f"{side}_cache"), unit * sb, unit * sp, unit * sh)
            if fmt == "asym_int4" and rules.int4_pairing == "split_half":
                f = FormatField(f.offset, f.block, 1, 0, f.pos1, f.head, D // 2, 2, 1)
            fields[side + "c"] = f
            if inline:  # the fp32 scale at byte D of the row
                if (sb | sp | sh | D) % 4:
                    _fail(f"{fmt}: the fp32 scales need D and the cache's strides multiples of 4 bytes, got D = {D}, "
                          f"strides {(sb, sp, sh)}")
                fields[side + "s"] = FormatField.flat(_offset(t, key_cache, 4, f"{side}_cache") + D // 4, sb // 4,
                                                      sp // 4, sh // 4)
        if inline:
            scale_base = key_cache
            if key_scales is not None or value_scales is not None:
                _fail(f"{fmt} keeps its scales in the cache rows: no key_scales / value_scales")
        else:
            asym = fmt in ("asym_int8", "asym_int4")
            S = 2 if asym else D // GROUP[fmt]
            if D % (GROUP[fmt] or 1):
                _fail(f"{fmt} has a scale per {GROUP[fmt]} dims: D = {D} is not a multiple")
            for side, t in (("k", key_scales), ("v", value_scales if has_value else None)):
                if side == "v" and not has_value:
                    continue
                if t is None:
                    _fail(f"{fmt} needs {'key' if side == 'k' else 'value'}_scales")
                if asym and _dtype_name(t) != "float32":
                    _fail(f"{fmt}: {side}_scales must be float32 [blocks, block_size, heads, 2] (scale, zero point)")
                if not asym and t.element_size() != 1:
                    _fail(f"{fmt}: {side}_scales must be a 1-byte tensor (uint8, float8_e4m3fn / float8_e8m0fnu)")
                s_nb, s_bs, _, (sb, sp, sh) = _four_d(t, f"{'key' if side == 'k' else 'value'}_scales", layout, H, S)
                if (s_nb, s_bs) != (nb, bs):
                    _fail(f"{side}_scales and the caches differ in blocks or block_size")
                esz = 4 if asym else 1
                f = FormatField.flat(_offset(t, key_scales, esz, f"{side}_scales"), sb, sp, sh)
                swizzled = fmt == "nvfp4" and (scale_layout == "swizzled" or (scale_layout == "swizzled_v" and side == "v"))
                if swizzled:
                    if bs % 4 or S % 4:
                        _fail(f"nvfp4's swizzled scales tile 4 tokens x 4 scales: block_size {bs} and D/16 = {S} must be "
                              "multiples of 4")
                    f = FormatField(f.offset, f.block, 4, 1, 4 * sp, f.head, S // 4, 4, sp)
                fields[side + "s"] = f
                if asym:
                    fields[side + "z"] = FormatField(f.offset + 1, f.block, f.pos_x, f.pos0, f.pos1, f.head)
        head_dim = D
    if num_slots > num_rows:
        _fail(f"slot_mapping has {num_slots} entries but key has only {num_rows} rows")
    if fmt == "nvfp4":
        for name, t in (("k_scale", k_scale), ("v_scale", v_scale if has_value else None)):
            if name == "v_scale" and not has_value:
                continue
            if t is None or _dtype_name(t) != "float32":
                _fail(f"nvfp4 needs {name}, the fp32 decode global scale ([1] float32 tensor)")
    elif k_scale is not None or v_scale is not None:
        _fail("k_scale / v_scale are nvfp4's global scales")
    if invalid_slots is not None and (_dtype_name(invalid_slots) != "int64"):
        _fail("invalid_slots must be a one-element int64 tensor")
    named = (("key", key), ("value", value), ("key_cache", key_cache), ("value_cache", value_cache),
             ("slot_mapping", slot_mapping), ("key_scales", key_scales), ("value_scales", value_scales),
             ("k_scale", k_scale), ("v_scale", v_scale), ("rope", rope), ("invalid_slots", invalid_slots))
    check_resolved(named, _fail)
    tensors = [t for _, t in named if t is not None]
    devices = {str(t.device) for t in tensors}
    if len(devices) != 1:
        _fail(f"all tensors must be on one device, got {sorted(devices)}")
    if devices.pop().startswith("cpu") and not interpreting():
        _fail("CPU tensors run only under Triton's interpreter (TRITON_INTERPRET=1)")

    p = KvAppendParams(
        key=key, value=value, key_stride_token=k_strides[0], key_stride_head=k_strides[1],
        value_stride_token=v_strides[0], value_stride_head=v_strides[1], slot_mapping=slot_mapping,
        num_slots=num_slots, k_cache=None, v_cache=None, num_blocks=nb, block_size=bs, stride_block=0, stride_pos=0,
        stride_head=0, num_heads=H, head_dim=head_dim, input_dtype=input_dtype, invalid_slots=invalid_slots,
        has_value=has_value, rope=rope, rope_stride_token=rope_stride, rope_dim=rope_dim, k_scale=k_scale,
        v_scale=v_scale, quant_format=fmt, format_rules=rules, format_cache=key_cache, format_scales=scale_base,
        k_codes=fields.get("kc"), v_codes=fields.get("vc"), k_scales=fields.get("ks"), v_scales=fields.get("vs"),
        k_zeros=fields.get("kz"), v_zeros=fields.get("vz"), rope_field=fields.get("rp"))
    return p
