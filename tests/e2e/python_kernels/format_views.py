"""examples/python/quant_formats_numpy.py, checking on every call that each typed view in format_views
addresses the element its format_fields entry says (tests/e2e/test_python_targets.py): a ValueError
(a launch_error finding) names the first field whose view is elsewhere.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples", "python"))
from quant_formats_numpy import kv_append as append  # noqa: E402

BITS = {"fp4_e2m1": 4, "uint4": 4, "f16": 16, "bf16": 16, "f32": 32}


def kv_append(key, value, key_cache, value_cache, slot_mapping, *, format_fields, format_views, format_cache,
              format_scales, **kwargs):
    for name, view in format_views.items():
        f = format_fields[name]
        if view is None:
            if f["pos_x"] == 1 and f["dim_x"] == 1 and BITS.get(f["dtype"], 8) != 4:
                raise ValueError(f"{name}: a one-stride field without a view")
            continue
        buffer = format_scales if name.endswith(("scales", "zeros")) else format_cache
        nb, bs, H, n = f["shape"]
        bits = BITS.get(f["dtype"], 8)
        if bits == 4:
            n //= 2
        if view.shape != (nb, bs, H, n):
            raise ValueError(f"{name}: view shape {view.shape}, expected {(nb, bs, H, n)}")
        for b, p, h, d in {(0, 0, 0, 0), (nb - 1, bs - 1, H - 1, n - 1)}:
            if min(nb, bs, H, n) == 0:
                break
            element = f["offset"] + b * f["block"] + p * f["pos1"] + h * f["head"] + (2 * d if bits == 4 else d) * f["dim1"]
            want = buffer.ctypes.data + element * bits // 8
            got = view[b, p, h, d:].ctypes.data
            if got != want:
                raise ValueError(f"{name}[{b}, {p}, {h}, {d}] is at byte {got - buffer.ctypes.data}, "
                                 f"its field says {want - buffer.ctypes.data}")
    append(key, value, key_cache, value_cache, slot_mapping, format_fields=format_fields, format_cache=format_cache,
           format_scales=format_scales, **kwargs)


kv_append.kvfuzz_capabilities = dict(append.kvfuzz_capabilities)
