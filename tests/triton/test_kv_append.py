"""Triton append kernels against the independent numpy reference (tests/triton/reference.py).

Default: Triton's CPU interpreter (TRITON_INTERPRET=1, set in conftest.py). Kernels run through the
raw entry point on numpy buffers (HostPtr); where torch is importable the torch API runs too, on CPU
tensors. KVFUZZ_TRITON_GPU=1 runs the torch API on CUDA instead, plus the GPU-only tests (hardware
fp8 rounding, the PTX of the division).

Every check compares whole buffers bit for bit: caches and scale caches with their guard elements,
gaps and canaries, the inputs (never written) and the invalid-slot counter. Under the interpreter the
hardware fp8 cast gets only values it converts faithfully (test_fp8_hardware_cast_under_interpreter).
"""
import os

import numpy as np
import pytest

from cases import csr_of, make_case, run_raw, run_torch
from reference import QMAX, expected

GPU = os.environ.get("KVFUZZ_TRITON_GPU") == "1"
try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False

# How a case is run: "raw" (HostPtr, interpreter), "torch" (torch API; CPU under the interpreter,
# CUDA with KVFUZZ_TRITON_GPU=1).
BACKENDS = ["torch"] if GPU else (["raw", "torch"] if HAVE_TORCH else ["raw"])
DEVICE = "cuda" if GPU else "cpu"
gpu_only = pytest.mark.skipif(not GPU, reason="needs a GPU (KVFUZZ_TRITON_GPU=1)")
interp_only = pytest.mark.skipif(GPU, reason="interpreter-only test")
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")


def run(case, backend, **kw):
    if backend == "raw":
        return run_raw(case, **kw)
    return run_torch(case, DEVICE, **kw)


def check(case, backend, **kw):
    """Runs the case and requires every buffer to equal the reference's, bit for bit."""
    before = {name: buf.copy() for name, buf in case.buffers.items()}
    want, invalid = expected(case)
    run(case, backend, **kw)
    for name, buf in case.buffers.items():
        if name == "invalid":
            assert int(buf[0]) == int(before[name][0]) + invalid, "invalid-slot counter"
            continue
        diff = np.flatnonzero(buf != want[name])
        assert diff.size == 0, (f"{name}: {diff.size} elements differ, first at {diff[:8].tolist()}: "
                                f"got {[hex(int(buf[i])) for i in diff[:4]]}, "
                                f"want {[hex(int(want[name][i])) for i in diff[:4]]} "
                                f"(before {[hex(int(before[name][i])) for i in diff[:4]]})")


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture
def rng(request):
    return np.random.default_rng(abs(hash(request.node.name)) % 2 ** 32)


# ---------------------------------------------------------------------------------------------
# Float caches: bit copies and conversions

@pytest.mark.parametrize("input_dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("variant", ["token", "head"])
def test_bit_copy_keeps_every_pattern(rng, backend, input_dtype, variant):
    # Random bit patterns: NaN payloads, Inf, subnormals, -0 must all survive a same-dtype copy.
    check(make_case(rng, input_dtype=input_dtype, head_dim=7, num_heads=3), backend, variant=variant)


@pytest.mark.parametrize("input_dtype,cache_dtype", [
    ("f16", "bf16"), ("f16", "f32"), ("bf16", "f16"), ("bf16", "f32"), ("f32", "f16"), ("f32", "bf16")])
def test_float_conversion_rounds_to_nearest_even(rng, backend, input_dtype, cache_dtype):
    check(make_case(rng, input_dtype=input_dtype, cache_dtype=cache_dtype, num_slots=7, head_dim=16),
          backend)


def test_float_conversion_ties_and_overflow(backend):
    # f32 -> bf16 / f16 exact ties (both directions of even), overflow to Inf, NaN payloads.
    rng = np.random.default_rng(1)
    for cache_dtype in ("bf16", "f16"):
        case = make_case(rng, input_dtype="f32", cache_dtype=cache_dtype, num_slots=2, num_heads=1,
                         head_dim=16, slots=[1, 6])
        ties = np.array([0x3F808000, 0x3F818000, 0xBF808000, 0x7F7FFFFF, 0x7F7F8000, 0x477FF000, 0x477FEFFF,
                         0x387FE000, 0x33800000, 0x7F800001, 0xFFC12345, 0x00000001, 0x80000000,
                         0x3F800001, 0x3F807FFF, 0x47800000], np.uint32)
        buf, base, st, _ = case.inputs["k"]
        buf[base:base + 16] = ties
        buf[base + st:base + st + 16] = ties[::-1]
        check(case, backend)


# ---------------------------------------------------------------------------------------------
# Layouts, strides, slots

@pytest.mark.parametrize("layout,pad", [("nhd", 0), ("hnd", 0), ("nhd", 3), ("hnd", 2)])
@pytest.mark.parametrize("variant", [None, "token", "head"])
def test_layouts_and_gapped_strides(rng, backend, layout, pad, variant):
    check(make_case(rng, layout=layout, pad=pad, num_heads=3, head_dim=5, block_size=3), backend,
          variant=variant)


def test_packed_kv_cache(rng, backend):
    # K and V interleaved per block in one tensor ([nb, 2, bs, H, D]).
    check(make_case(rng, packed=True, num_heads=2, head_dim=8, block_size=4), backend)


def test_contiguous_per_sequence_cache(rng, backend):
    # [B, S, H, D] with block = sequence and block_size = max_seq_len (a non-power of two).
    check(make_case(rng, num_blocks=2, block_size=13, num_slots=9, num_heads=2, head_dim=4), backend)


@pytest.mark.parametrize("q_heads,kv_heads", [(8, 2), (4, 1), (3, 3)])
def test_gqa_fused_qkv_views(rng, backend, q_heads, kv_heads):
    # key/value are slices of a fused [T, (Hq + 2 Hkv) * D (+pad)] projection; padding rows are NaN.
    check(make_case(rng, fused_q_heads=q_heads, num_heads=kv_heads, head_dim=6, pad=1, extra_rows=3),
          backend)


@pytest.mark.parametrize("num_heads,head_dim", [(1, 1), (5, 3), (7, 46), (2, 100), (1, 576), (33, 2)])
def test_odd_head_counts_and_dims(rng, backend, num_heads, head_dim):
    check(make_case(rng, num_heads=num_heads, head_dim=head_dim, num_slots=3, num_blocks=2, block_size=2),
          backend)


def test_many_heads_span_several_tiles(rng, backend):
    # 40 heads x 128 dims: more than one [BLOCK_H, BLOCK_D] tile per token in the token-major variant.
    check(make_case(rng, num_heads=40, head_dim=128, num_slots=2, num_blocks=1, block_size=2), backend,
          variant="token")


# ---------------------------------------------------------------------------------------------
# The row kernel (kv_append_row_kernel): what a plain call runs

@pytest.mark.parametrize("input_dtype,cache_dtype,scale_kind", [
    ("bf16", "bf16", "none"), ("f32", "f16", "none"), ("f16", "int8", "per_token_head"),
    ("bf16", "fp8_e4m3", "per_tensor"), ("bf16", "fp8_e5m2", "per_block"), ("f16", "fp8_e4m3", "per_head")])
@pytest.mark.parametrize("layout", ["nhd", "hnd"])
def test_row_kernel_over_two_head_tiles(rng, backend, input_dtype, cache_dtype, scale_kind, layout):
    # 40 heads x 128 dims: a row is two head tiles (32 + 8), a grid of (T, 2); the slot past the
    # capacity (7 of 2) is counted once, by the first tile's program; padding skipped.
    case = make_case(rng, input_dtype=input_dtype, cache_dtype=cache_dtype, scale_kind=scale_kind, layout=layout,
                     values="bits" if scale_kind == "none" else "values", magnitude=30.0, num_heads=40, head_dim=128,
                     num_slots=4, num_blocks=1, block_size=2, slots=[1, -1, 7, 0], pad=1)
    check(case, backend, variant="row")


@interp_only
@pytest.mark.parametrize("what,kernel", [
    (dict(), "row"), (dict(layout="hnd", pad=2, input_dtype="f32", cache_dtype="bf16"), "row"),
    (dict(packed=True), "row"), (dict(fused_q_heads=6), "row"),
    (dict(cache_dtype="int8", scale_kind="per_token_head", values="values"), "row"),
    (dict(layout="vllm_legacy"), "general"), (dict(family="kv_split", value_dim=5), "general"),
    (dict(family="k_only"), "general"), (dict(family="mla", head_dim=8, rope_dim=3), "general")])
def test_a_plain_call_runs_the_row_kernel(rng, monkeypatch, what, kernel):
    from kvfuzz_triton import api
    ran = []
    for name, launcher in (("row", api.KV_APPEND_ROW), ("general", api.KV_APPEND)):
        def recorded(*a, _name=name, _launch=launcher.launch, **kw):
            ran.append(_name)
            return _launch(*a, **kw)
        monkeypatch.setattr(launcher, "launch", recorded)
    check(make_case(rng, **what), "raw")
    assert ran == [kernel]
    ran.clear()
    check(make_case(rng, **what), "raw", variant="token")  # asked for: the general kernel
    assert ran == ["general"]


@interp_only
def test_row_variant_refuses_calls_it_does_not_take(rng):
    from kvfuzz_triton.api import AOT_TILE
    with pytest.raises(ValueError, match='variant "row" takes family kv'):
        run_raw(make_case(rng, layout="vllm_legacy"), variant="row")
    with pytest.raises(ValueError, match='variant "row" takes family kv'):
        run_raw(make_case(rng), variant="row", tile=AOT_TILE)


def test_row_num_warps_as_measured():
    # The H200 measurements behind row_num_warps (H 8 x D 128: 1,024 elements a tile): 2 warps for
    # bf16 at every T, 8 for fp8 up to T = 256, 2 beyond; always 1 to 8.
    from types import SimpleNamespace as P
    from kvfuzz_triton.api import row_num_warps
    assert row_num_warps(P(cache_dtype="bf16", num_slots=1), 1024) == 2
    assert row_num_warps(P(cache_dtype="fp8_e4m3", num_slots=256), 1024) == 8
    assert row_num_warps(P(cache_dtype="fp8_e4m3", num_slots=4096), 1024) == 2
    for elements in (1, 16, 1024, 4096, 2 ** 16):
        for cache, t in (("f16", 1), ("int8", 1), ("int8", 10 ** 6)):
            assert 1 <= row_num_warps(P(cache_dtype=cache, num_slots=t), elements) <= 8


@interp_only
@pytest.mark.parametrize("num_heads,head_dim", [(1, 1), (5, 3), (9, 130), (2, 576)])
@pytest.mark.parametrize("variant", ["token", "head"])
@pytest.mark.parametrize("input_dtype,cache_dtype,scale_kind", [
    ("bf16", "bf16", "none"), ("f32", "f16", "none"), ("f16", "int8", "per_token_head"),
    ("bf16", "fp8_e5m2", "per_block")])
def test_aot_tile_loops_over_heads_and_dims(rng, num_heads, head_dim, variant, input_dtype, cache_dtype,
                                            scale_kind):
    # The ahead-of-time build's fixed tile (AOT_TILE, what the C++ `triton` target runs), smaller
    # than most rows here: the loops over head and dim tiles, and per_token_head's amax over all of
    # a row's dim tiles before any element is stored.
    from kvfuzz_triton.api import AOT_TILE
    case = make_case(rng, input_dtype=input_dtype, cache_dtype=cache_dtype, scale_kind=scale_kind,
                     values="bits" if scale_kind == "none" else "values", magnitude=30.0, num_heads=num_heads,
                     head_dim=head_dim, num_slots=3, num_blocks=2, block_size=2, pad=1)
    check(case, "raw", variant=variant, tile=AOT_TILE, fp8_software=True)


@pytest.mark.parametrize("slot_dtype", [np.int32, np.int64])
def test_padding_invalid_slots_and_counter(rng, backend, slot_dtype):
    slots = [-1, 0, 12, 11, -7, 13, 2 ** 31 - 1, 5]
    if slot_dtype == np.int64:
        slots[6] = 2 ** 40  # far past the cache: must be counted, never written
    check(make_case(rng, slots=slots, num_slots=8, num_blocks=3, block_size=4, slot_dtype=slot_dtype), backend)


def test_without_counter(rng, backend):
    check(make_case(rng, slots=[3, 99, -1], num_slots=3, counter=False), backend)


def test_all_padding_and_last_slot(rng, backend):
    check(make_case(rng, slots=[-1, -1, 11], num_slots=3, num_blocks=3, block_size=4), backend)


def test_empty_batch_launches_nothing(rng, backend):
    # T = 0 (with padding rows present): nothing changes, and no grid is launched.
    case = make_case(rng, num_slots=0, extra_rows=2, slots=[])
    assert run(case, backend) is None or backend == "torch"
    check(case, backend)


def test_empty_cache(rng, backend):
    # Zero blocks: every non-negative slot is invalid.
    check(make_case(rng, num_blocks=0, slots=[0, -1, 4], num_slots=3), backend)


# ---------------------------------------------------------------------------------------------
# vLLM's legacy layout: K x-packed [nb, H, D/x, bs, x], V transposed [nb, H, D, bs]

@pytest.mark.parametrize("input_dtype,cache_dtype", [
    ("f16", "f16"), ("bf16", "bf16"), ("f32", "f32"), ("f16", "bf16"), ("bf16", "f32"), ("f32", "f16")])
@pytest.mark.parametrize("variant", ["token", "head"])
def test_vllm_legacy_float_caches(rng, backend, input_dtype, cache_dtype, variant):
    # Bit copies (every pattern) and conversions; x = 8 (16-bit caches) or 4 (f32), 3 x-chunks.
    x = 4 if cache_dtype == "f32" else 8
    check(make_case(rng, input_dtype=input_dtype, cache_dtype=cache_dtype, layout="vllm_legacy",
                    head_dim=3 * x, num_heads=3, block_size=5, num_slots=7), backend, variant=variant)


@pytest.mark.parametrize("cache_dtype", ["fp8_e4m3", "fp8_e5m2", "int8"])
@pytest.mark.parametrize("scale_kind", ["per_tensor", "per_head", "per_block", "per_token_head"])
@pytest.mark.parametrize("input_dtype", ["f16", "bf16", "f32"])
def test_vllm_legacy_quantised_caches(rng, backend, cache_dtype, scale_kind, input_dtype):
    # x = 16 for 1-byte caches: D = 32 is two x-chunks; per_token_head's scale cache is [nb, H, bs].
    check(make_case(rng, input_dtype=input_dtype, cache_dtype=cache_dtype, scale_kind=scale_kind,
                    layout="vllm_legacy", values="values", magnitude=QMAX[cache_dtype] / 4, head_dim=32,
                    num_heads=2, block_size=3, num_slots=5), backend, fp8_software=True)


@pytest.mark.parametrize("pad", [0, 3])
@pytest.mark.parametrize("head_dim", [8, 64])
def test_vllm_legacy_gapped_strides_and_one_chunk(rng, backend, pad, head_dim):
    # Gaps between heads and blocks; D = x (one chunk: pos stride x, no chunk stride) and D = 8x.
    check(make_case(rng, input_dtype="f16", layout="vllm_legacy", pad=pad, head_dim=head_dim, num_heads=3,
                    block_size=4, num_blocks=3, num_slots=6), backend)


@interp_only
@pytest.mark.parametrize("variant", ["token", "head"])
@pytest.mark.parametrize("input_dtype,cache_dtype,scale_kind,head_dim", [
    ("bf16", "bf16", "none", 136), ("f32", "f16", "none", 16), ("f16", "int8", "per_token_head", 160),
    ("bf16", "fp8_e5m2", "per_block", 48)])
def test_vllm_legacy_aot_tile(rng, variant, input_dtype, cache_dtype, scale_kind, head_dim):
    # The AOT tile (4 heads x 64 dims) over 5 heads and several dim tiles, as the triton target runs it.
    from kvfuzz_triton.api import AOT_TILE
    case = make_case(rng, input_dtype=input_dtype, cache_dtype=cache_dtype, scale_kind=scale_kind,
                     layout="vllm_legacy", values="bits" if scale_kind == "none" else "values", magnitude=30.0,
                     num_heads=5, head_dim=head_dim, num_slots=3, num_blocks=2, block_size=3, pad=1)
    check(case, "raw", variant=variant, tile=AOT_TILE, fp8_software=True)


def test_vllm_legacy_padding_invalid_slots_and_counter(rng, backend):
    check(make_case(rng, layout="vllm_legacy", slots=[-1, 0, 12, 11, -7, 13, 2 ** 40, 5], num_slots=8,
                    num_blocks=3, block_size=4, head_dim=16), backend)


def test_cache_fields_from_torch_shapes_and_strides():
    # The torch API's description of each layout (kvfuzz_triton.cache_fields), without torch.
    from kvfuzz_triton import FieldStrides, cache_fields, legacy_fields
    nb, h, d, bs, x = 3, 2, 32, 5, 8
    k_shape, k_strides = (nb, h, d // x, bs, x), (h * d * bs, d * bs, bs * x, x, 1)  # contiguous
    v_shape, v_strides = (nb, h, d, bs), (h * d * bs, d * bs, bs, 1)
    got = cache_fields("vllm_legacy", h, d, k_shape, k_strides, v_shape, v_strides)
    assert got == (nb, bs, *legacy_fields(h * d * bs, d * bs, bs, x))
    assert got[2] == FieldStrides(block=h * d * bs, pos=x, head=d * bs, x=x, dim0=1, dim1=bs * x)
    assert got[3] == FieldStrides(block=h * d * bs, pos=1, head=d * bs, x=1, dim0=1, dim1=bs)
    nhd = cache_fields("nhd", h, d, (nb, bs, h, d), (bs * h * d, h * d, d, 1), (nb, bs, h, d), (bs * h * d, h * d, d, 1))
    assert nhd == (nb, bs, FieldStrides(bs * h * d, h * d, d), FieldStrides(bs * h * d, h * d, d))
    hnd = cache_fields("hnd", h, d, (nb, h, bs, d), (h * bs * d, bs * d, d, 1), (nb, h, bs, d), (h * bs * d, bs * d, d, 1))
    assert hnd[2] == FieldStrides(block=h * bs * d, pos=d, head=bs * d)
    for args, match in [
        ((h, d, k_shape[:4], k_strides[:4], v_shape, v_strides), "key_cache .* \\(5-D\\)"),
        ((h, d + 8, k_shape, k_strides, v_shape, v_strides), "2 heads x 4\\*8 dims, but key has 2 heads x 40 dims"),
        ((h + 1, d, k_shape, k_strides, v_shape, v_strides), "but key has 3 heads"),
        ((h, d, k_shape, k_strides, (nb, h, bs, d), v_strides), "value_cache must be \\(3, 2, 32, 5\\)"),
    ]:
        with pytest.raises(ValueError, match=match):
            cache_fields("vllm_legacy", *args)


# ---------------------------------------------------------------------------------------------
# Quantised caches

@pytest.mark.parametrize("scale_kind", ["per_tensor", "per_head", "per_block", "per_token_head"])
@pytest.mark.parametrize("input_dtype", ["f16", "bf16", "f32"])
def test_int8(rng, backend, scale_kind, input_dtype):
    check(make_case(rng, input_dtype=input_dtype, cache_dtype="int8", scale_kind=scale_kind, values="values",
                    magnitude=40.0, head_dim=12), backend)


def test_int8_ties_round_half_even(backend):
    # x / 1.0 exactly on .5: -2.5 -> -2, -1.5 -> -2, 0.5 -> 0, 126.5 -> 126, 127.5 -> 127 (sat), ...
    rng = np.random.default_rng(2)
    case = make_case(rng, input_dtype="f32", cache_dtype="int8", scale_kind="per_tensor", num_slots=1,
                     num_heads=1, head_dim=16, slots=[5], scale_values="pow2")
    case.scales["k"][0] = case.scales["v"][0] = 1.0
    case.buffers["k_scale"][:] = case.buffers["v_scale"][:] = np.float32(1.0).view(np.uint32)
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 126.5, 127.5, -128.5, -129.5, 1e9, -np.inf,
                  np.nan, 3.4999998, 4194304.5, -0.0], np.float32)
    for which in ("k", "v"):
        buf, base, _, _ = case.inputs[which]
        buf[base:base + 16] = x.view(np.uint32)
    check(case, backend)


@pytest.mark.parametrize("layout", ["nhd", "hnd"])
def test_per_token_head_scale_cache_layouts(rng, backend, layout):
    # Scale caches laid out like the KV cache without D, gapped; zero and constant rows included.
    case = make_case(rng, input_dtype="f16", cache_dtype="int8", scale_kind="per_token_head", layout=layout,
                     pad=2, values="values", magnitude=3.0, num_heads=2, head_dim=8)
    assert case.slots[1] >= 0  # token 1 is written (tokens 0, 3, ... are padding or invalid)
    buf, base, st, sh = case.inputs["k"]
    buf[base + st:base + st + 8] = 0  # all-zero row: scale floor 1e-6 / QMAX
    buf[base + st + sh:base + st + sh + 8] = np.float16(2.0).view(np.uint16)  # constant row
    check(case, backend)


FP8 = ["fp8_e4m3", "fp8_e5m2"]


@pytest.mark.parametrize("cache_dtype", FP8)
@pytest.mark.parametrize("scale_kind", ["per_tensor", "per_head", "per_block", "per_token_head"])
def test_fp8_software_conversion(rng, backend, cache_dtype, scale_kind):
    # The exact integer conversion (the default under the interpreter): bit-exact everywhere,
    # including saturation (magnitudes beyond QMAX), NaN, Inf, subnormals and -0.
    mag = QMAX[cache_dtype] / 4
    check(make_case(rng, input_dtype="f32", cache_dtype=cache_dtype, scale_kind=scale_kind, values="values",
                    magnitude=mag, head_dim=16, num_slots=4), backend, fp8_software=True)


@pytest.mark.parametrize("cache_dtype", FP8)
@pytest.mark.parametrize("fp8_software", [True, pytest.param(False, marks=gpu_only)])
def test_fp8_every_tie_and_boundary(backend, cache_dtype, fp8_software):
    # Every fp8 value, every midpoint between neighbours and its fp32 neighbours, the saturation and
    # underflow boundaries. The hardware conversion runs on the GPU only.
    from reference import _FP8
    codes, vals = _FP8[cache_dtype]
    mids = (vals[1:] + vals[:-1]) / 2
    pts = np.concatenate([vals, mids]).astype(np.float32)
    pts = np.concatenate([pts, np.nextafter(pts, np.float32(np.inf)), np.nextafter(pts, np.float32(0))])
    pts = np.concatenate([pts, -pts, [np.inf, -np.inf, np.nan, QMAX[cache_dtype] * 1.0625, 1e-45]])
    pts = pts.astype(np.float32)
    n = 256
    rows = -(-pts.size // n)
    data = np.zeros(rows * n, np.float32)
    data[:pts.size] = pts
    rng = np.random.default_rng(3)
    case = make_case(rng, input_dtype="f32", cache_dtype=cache_dtype, scale_kind="per_tensor", num_slots=rows,
                     num_heads=1, head_dim=n, num_blocks=rows, block_size=1, extra_rows=0,
                     slots=list(range(rows)), scale_values="pow2")
    for which in ("k", "v"):
        case.scales[which][0] = 1.0
        case.buffers[f"{which}_scale"][0] = np.float32(1.0).view(np.uint32)
        buf, base, _, _ = case.inputs[which]
        buf[base:base + rows * n] = data.view(np.uint32)
    check(case, backend, fp8_software=fp8_software)


@interp_only
@pytest.mark.parametrize("cache_dtype", FP8)
def test_fp8_hardware_cast_under_interpreter(cache_dtype):
    # Triton 3.6's interpreter converts fp32 -> fp8 wrongly (research/triton-tooling.md §2.4), so the
    # hardware path (fp8_software=False) is checked here only where the interpreter is faithful:
    # inputs whose x / scale is exactly representable, ±Inf (saturated by the explicit clamp) and NaN
    # (mapped to 0x7F explicitly); for those, every buffer is still compared bit for bit. Other values
    # would be "written-any-value" here; their rounding is checked on the GPU (test_fp8_*_on_gpu,
    # test_fp8_every_tie_and_boundary).
    rng = np.random.default_rng(4)
    from reference import _FP8
    _, vals = _FP8[cache_dtype]
    case = make_case(rng, input_dtype="f32", cache_dtype=cache_dtype, scale_kind="per_head", num_slots=4,
                     num_heads=2, head_dim=16, scale_values="pow2")
    for which in ("k", "v"):
        buf, base, st, sh = case.inputs[which]
        for t in range(case.num_slots):
            for h in range(2):
                exact = rng.choice(vals, 16) * rng.choice([-1, 1], 16) * case.scales[which][h]
                exact[:3] = [np.nan, np.inf, -np.inf]
                buf[base + t * st + h * sh:base + t * st + h * sh + 16] = exact.astype(np.float32).view(np.uint32)
    check(case, "raw", fp8_software=False)


@gpu_only
@pytest.mark.parametrize("cache_dtype", FP8)
@pytest.mark.parametrize("fp8_software", [False, True])
@pytest.mark.parametrize("scale_kind", ["per_tensor", "per_token_head"])
def test_fp8_rounding_on_gpu(rng, cache_dtype, fp8_software, scale_kind):
    # Random values, ties and saturation on the real hardware: both conversions bit-exact.
    check(make_case(rng, input_dtype="bf16", cache_dtype=cache_dtype, scale_kind=scale_kind, values="values",
                    magnitude=QMAX[cache_dtype] / 3, num_heads=8, head_dim=128, num_slots=64, num_blocks=40,
                    block_size=16), "torch", fp8_software=fp8_software)


@gpu_only
def test_gpu_division_is_ieee():
    # x / scale must be div.rn.f32: Triton's `/` and tl.fdiv(ieee_rounding=True) emit div.full.f32.
    rng = np.random.default_rng(5)
    from kvfuzz_triton import kv_append_kernel
    check(make_case(rng, input_dtype="f32", cache_dtype="int8", scale_kind="per_token_head", values="values",
                    num_heads=2, head_dim=64), "torch")
    ptx = "\n".join(k.asm["ptx"] for k in _compiled(kv_append_kernel))
    assert "div.rn.f32" in ptx and "div.full.f32" not in ptx and "div.approx" not in ptx


def _compiled(kernel):
    out = []
    for cache in kernel.device_caches.values():
        out.extend(cache[0].values())
    return out


# ---------------------------------------------------------------------------------------------
# Format families (docs/formats.md): kv_split, k_only, mla

FAMILY_CONVERSIONS = [  # (input dtype, cache dtype, scale kind): copies, float conversions, quantised
    ("f16", "f16", "none"), ("bf16", "bf16", "none"), ("f32", "f32", "none"), ("f32", "bf16", "none"),
    ("bf16", "f16", "none"), ("f16", "f32", "none"), ("f16", "fp8_e4m3", "per_tensor"),
    ("bf16", "fp8_e5m2", "per_head"), ("f32", "int8", "per_block"), ("bf16", "int8", "per_token_head"),
    ("f16", "fp8_e4m3", "per_token_head")]
MLA_CONVERSIONS = [c for c in FAMILY_CONVERSIONS if c[2] in ("none", "per_tensor")] + [
    ("bf16", "fp8_e5m2", "per_tensor"), ("f32", "int8", "per_tensor")]


def family_case(rng, family, input_dtype, cache_dtype, scale_kind, **kw):
    values = "bits" if scale_kind == "none" and input_dtype == cache_dtype else "values"
    return make_case(rng, family=family, input_dtype=input_dtype, cache_dtype=cache_dtype, scale_kind=scale_kind,
                     values=values, magnitude=30.0, **kw)


@pytest.mark.parametrize("input_dtype,cache_dtype,scale_kind", FAMILY_CONVERSIONS)
@pytest.mark.parametrize("layout", ["nhd", "hnd"])
@pytest.mark.parametrize("value_dim", [5, 12])  # V narrower and wider than K's 8 dims
def test_kv_split_writes_v_with_its_own_head_dim_and_strides(rng, backend, input_dtype, cache_dtype, scale_kind,
                                                             layout, value_dim):
    case = family_case(rng, "kv_split", input_dtype, cache_dtype, scale_kind, layout=layout, value_dim=value_dim,
                       pad=1)
    check(case, backend)


@pytest.mark.parametrize("input_dtype,cache_dtype,scale_kind", FAMILY_CONVERSIONS)
@pytest.mark.parametrize("layout", ["nhd", "hnd"])
def test_k_only_writes_k_alone(rng, backend, input_dtype, cache_dtype, scale_kind, layout):
    case = family_case(rng, "k_only", input_dtype, cache_dtype, scale_kind, layout=layout, pad=1)
    check(case, backend)


@pytest.mark.parametrize("input_dtype,cache_dtype,scale_kind", MLA_CONVERSIONS)
@pytest.mark.parametrize("head_dim,rope_dim", [(8, 3), (9, 9), (20, 4)])
@pytest.mark.parametrize("mla_fused", [False, True])
def test_mla_concatenates_kv_c_and_k_pe_into_one_entry(rng, backend, input_dtype, cache_dtype, scale_kind,
                                                       head_dim, rope_dim, mla_fused):
    case = family_case(rng, "mla", input_dtype, cache_dtype, scale_kind, head_dim=head_dim, rope_dim=rope_dim,
                       mla_fused=mla_fused, pad=2)
    check(case, backend)


@interp_only  # the raw backend passes host pointers
@pytest.mark.parametrize("family,extra", [("kv_split", {"value_dim": 130}), ("k_only", {}),
                                          ("mla", {"head_dim": 576, "rope_dim": 64})])
@pytest.mark.parametrize("variant", ["token", "head"])
@pytest.mark.parametrize("input_dtype,cache_dtype,scale_kind", [
    ("bf16", "bf16", "none"), ("f16", "fp8_e4m3", "per_tensor"), ("f32", "int8", "per_token_head")])
def test_families_with_the_aot_tile(rng, family, extra, variant, input_dtype, cache_dtype, scale_kind):
    # AOT_TILE's 64 dims: kv_c and k_pe meet inside a dim tile (576 = 9 * 64, D_c 512 ends a tile:
    # 20 + 9 the rope part starts mid-tile), V wider than K spans more tiles, and per_token_head's
    # amax runs over each row's own dims.
    from kvfuzz_triton.api import AOT_TILE
    if family == "mla" and scale_kind == "per_token_head":
        scale_kind = "per_tensor"
    for head_dim, rope_dim in ([(576, 64), (100, 37)] if family == "mla" else [(72, 0)]):
        kw = dict(extra, head_dim=head_dim, rope_dim=rope_dim) if family == "mla" else dict(extra, head_dim=head_dim)
        case = family_case(rng, family, input_dtype, cache_dtype, scale_kind, num_heads=3, num_slots=3,
                           num_blocks=2, block_size=2, pad=1, **kw)
        check(case, "raw", variant=variant, tile=AOT_TILE, fp8_software=True)


@interp_only
@pytest.mark.parametrize("layout", ["nhd", "hnd", "vllm_legacy"])
@pytest.mark.parametrize("cache_dtype,scale_kind", [("f16", "none"), ("fp8_e4m3", "per_token_head")])
def test_csr_addressing_writes_what_the_slot_mapping_would(rng, layout, cache_dtype, scale_kind):
    # FlashInfer's CSR arrays (each row a request of its own, its page the slot's block) instead of
    # slot_mapping: the reference, which reads the slots, must see the same cache.
    slots = [5, 6, 1, 9, 10, 11]
    case = make_case(rng, layout=layout, cache_dtype=cache_dtype, scale_kind=scale_kind, slots=slots,
                     num_slots=len(slots), head_dim=16 if layout == "vllm_legacy" else 8, counter=False)
    check(case, "raw", csr=tuple(csr_of(slots, case.block_size)))


@interp_only
@pytest.mark.parametrize("cache_dtype,scale_kind", [("f16", "none"), ("fp8_e4m3", "per_token_head")])
def test_ring_window_skips_tokens_already_outside_it(rng, cache_dtype, scale_kind):
    # One request of length 5 in a W = 3, S = 1 ring (ring indices 0 | 1, 2 at slots 7 | 8, 9):
    # positions 4, 1, 3, 2, 0 in row order land on slots 9, 8, 8, 9, 7. Positions 1 and 2 are evicted
    # by 3 and 4 in the same call: the kernel must skip them, so the cache is the one of slot_mapping
    # [9, -1, 8, -1, 7]. Row 3 (position 2) comes after row 0 (position 4), which replaced it.
    slots = np.array([9, -1, 8, -1, 7], dtype=np.int32)
    case = make_case(rng, cache_dtype=cache_dtype, scale_kind=scale_kind, slots=slots.tolist(), num_slots=5,
                     slot_dtype=np.int32, counter=False)
    want, _ = expected(case)
    case.slots[:] = [9, 8, 8, 9, 7]  # every token at its ring slot
    positions = np.array([4, 1, 3, 2, 0], dtype=np.int32)
    run_raw(case, window=(positions, np.full(5, 5, dtype=np.int32), 3, 1))
    for name, buf in case.buffers.items():
        if name != "slots":  # rewritten above
            assert (buf == want[name]).all(), name


def test_families_padding_and_invalid_slots(rng, backend):
    slots = [-1, 0, 12, 11, -7, 13, 5]
    for family, kw in (("kv_split", {"value_dim": 6}), ("k_only", {}), ("mla", {"rope_dim": 2})):
        case = make_case(rng, family=family, slots=slots, num_slots=len(slots), **kw)
        check(case, backend)


@interp_only  # the raw backend passes host pointers
def test_mla_per_token_head_amax_covers_both_sources(rng):
    # Not a combination the format family uses (mla: none or per_tensor), but the raw kernel's
    # amax is over the whole entry: kv_c's and k_pe's dims.
    case = family_case(rng, "mla", "f32", "int8", "per_token_head", head_dim=10, rope_dim=4)
    check(case, "raw")


@needs_torch
def test_kv_append_mla_takes_concat_and_cache_mla_arguments(rng):
    # kv_append_mla(kv_c, k_pe, kv_cache, slot_mapping, scale=...) against the same case through kv_append.
    import torch
    from kvfuzz_triton import kv_append_mla
    case = family_case(rng, "mla", "bf16", "fp8_e4m3", "per_tensor", head_dim=12, rope_dim=4, counter=False)
    want, _ = expected(case)
    flat = {n: torch.from_numpy(b.view(np.int16) if b.dtype == np.uint16 else b.copy()).to(DEVICE)
            for n, b in case.buffers.items()}
    kb, kbase, kst, _ = case.inputs["k"]
    rb, rbase, rst, _ = case.inputs["r"]
    kv_c = flat["kv_c"].view(torch.bfloat16).as_strided((case.num_rows, 8), (kst, 1), kbase)
    k_pe = flat["k_pe"].view(torch.bfloat16).as_strided((case.num_rows, 1, 4), (rst, 4, 1), rbase)
    cache = flat["k_cache"].view(torch.float8_e4m3fn).as_strided(
        (case.num_blocks, case.block_size, 12), (case.stride_block, case.stride_pos, 1), case.cache_base["k"])
    kv_append_mla(kv_c, k_pe, cache, flat["slots"], scale=flat["k_scale"].view(torch.float32))
    got = flat["k_cache"].cpu().numpy()
    assert (got == want["k_cache"]).all()


# ---------------------------------------------------------------------------------------------
# Torch API: argument validation

@needs_torch
class TestValidation:
    def setup_method(self):
        import torch
        self.torch = torch
        self.dev = DEVICE
        self.key = torch.zeros(4, 2, 8, dtype=torch.float16, device=self.dev)
        self.value = torch.zeros(4, 2, 8, dtype=torch.float16, device=self.dev)
        self.kc = torch.zeros(3, 4, 2, 8, dtype=torch.float16, device=self.dev)
        self.vc = torch.zeros(3, 4, 2, 8, dtype=torch.float16, device=self.dev)
        self.slots = torch.tensor([0, 1, -1, 5], dtype=torch.int64, device=self.dev)

    def call(self, **kw):
        from kvfuzz_triton import kv_append
        args = dict(key=self.key, value=self.value, key_cache=self.kc, value_cache=self.vc,
                    slot_mapping=self.slots, layout="nhd")
        args.update(kw)
        return kv_append(**args)

    def expect(self, match, **kw):
        with pytest.raises(ValueError, match=match):
            self.call(**kw)

    def test_valid_call_returns_none(self):
        assert self.call() is None

    def test_layout_is_required_and_checked(self):
        from kvfuzz_triton import kv_append
        with pytest.raises(TypeError):
            kv_append(self.key, self.value, self.kc, self.vc, self.slots)
        self.expect(r'layout must be "nhd"', layout="NHD")

    def test_shapes(self):
        t = self.torch
        self.expect("key and value must be 3-D", key=self.key.reshape(4, 16))
        self.expect("key and value shapes differ", value=self.value[:, :1])
        self.expect(r"cache is \(3, 4, 2, 8\) \(hnd\): 4 heads x 8 dims, but key has 2 heads", layout="hnd")
        self.expect("key_cache and value_cache must be 4-D", key_cache=self.kc[0])
        assert self.call(value_cache=self.vc.transpose(1, 2).contiguous().transpose(1, 2)) is None  # V's own strides
        self.expect("differ in blocks or block_size", value_cache=self.vc[:2])
        self.expect(r"value_cache is \(3, 4, 2, 8\) \(nhd\): 2 heads x 8 dims, but value has 2 heads x 4 dims",
                    value=self.value[..., :4])
        self.expect("value and value_cache go together", value=None)
        self.expect("rope .* has no V", rope=self.key[:, 0])
        self.expect("mla: key_cache is the latent cache", value=None, value_cache=None, key=self.key[:, 0],
                    rope=self.key[:, 0])
        self.expect("slot_mapping has 5 entries but key has only 4 rows",
                    slot_mapping=t.zeros(5, dtype=t.int64, device=self.dev))
        self.expect("slot_mapping must be 1-D", slot_mapping=self.slots.reshape(2, 2))

    def test_negative_views_are_refused(self):
        # torch._neg_view: the memory holds the values negated; `c.conj().imag` of a complex c is one too
        neg = self.torch._neg_view
        self.expect(r"key is a negative view .*key.resolve_neg\(\)", key=neg(self.key))
        self.expect("value_cache is a negative view", value_cache=neg(self.vc))
        self.expect("slot_mapping is a negative view", slot_mapping=neg(self.slots))
        assert self.call(key=neg(self.key).resolve_neg()) is None

    def test_contiguity(self):
        t = self.torch
        wide = t.zeros(4, 2, 16, dtype=t.float16, device=self.dev)
        self.expect("last dim of key and value must be contiguous", key=wide[:, :, ::2])
        wide_c = t.zeros(3, 4, 2, 16, dtype=t.float16, device=self.dev)
        self.expect("last dim of the caches must be contiguous", key_cache=wide_c[..., ::2],
                    value_cache=wide_c[..., 1::2])
        self.expect("slot_mapping must be contiguous",
                    slot_mapping=t.zeros(8, dtype=t.int64, device=self.dev)[::2])

    def test_dtypes(self):
        t = self.torch
        self.expect("key and value dtypes differ", value=self.value.float())
        self.expect("key/value dtype must be float16, bfloat16 or float32", key=self.key.double(),
                    value=self.value.double())
        self.expect("slot_mapping must be int32 or int64", slot_mapping=self.slots.float())
        self.expect("key_cache and value_cache dtypes differ", value_cache=self.vc.float())
        self.expect("unsupported cache dtype", key_cache=self.kc.double(), value_cache=self.vc.double())
        u8 = t.zeros(3, 4, 2, 8, dtype=t.uint8, device=self.dev)
        self.expect("a uint8 cache needs cache_dtype", key_cache=u8, value_cache=u8.clone())
        self.expect("cache_dtype 'int8' does not match", cache_dtype="int8")

    def test_quantisation_arguments(self):
        t = self.torch
        i8 = t.zeros(3, 4, 2, 8, dtype=t.int8, device=self.dev)
        s1 = t.ones(1, device=self.dev)
        q = dict(key_cache=i8, value_cache=i8.clone())
        self.expect("a int8 cache needs scale_kind", **q)
        self.expect("per_tensor needs k_scale", scale_kind="per_tensor", **q)
        self.expect("scale_kind must be one of", scale_kind="per_channel", k_scale=s1, v_scale=s1, **q)
        self.expect(r"k_scale must have shape \(2,\) for per_head", scale_kind="per_head", k_scale=s1,
                    v_scale=s1, **q)
        self.expect(r"v_scale must have shape \(3, 2\) for per_block", scale_kind="per_block",
                    k_scale=t.ones(3, 2, device=self.dev), v_scale=t.ones(2, device=self.dev), **q)
        self.expect("k_scale must be float32", scale_kind="per_tensor", k_scale=s1.half(), v_scale=s1, **q)
        self.expect("scale caches are for per_token_head only", scale_kind="per_tensor", k_scale=s1,
                    v_scale=s1, k_scale_cache=t.ones(3, 4, 2, device=self.dev), **q)
        self.expect("per_token_head computes its scales", scale_kind="per_token_head", k_scale=s1, **q)
        self.expect("per_token_head needs k_scale_cache", scale_kind="per_token_head", **q)
        self.expect(r"scale caches must have shape \(3, 4, 2\)", scale_kind="per_token_head",
                    k_scale_cache=t.ones(3, 2, 4, device=self.dev), v_scale_cache=t.ones(3, 2, 4, device=self.dev), **q)
        self.expect("scale_kind='per_tensor' given for a f16 cache", scale_kind="per_tensor", k_scale=s1,
                    v_scale=s1)
        self.expect("scales given for a f16 cache", k_scale=s1)

    def test_counter_and_variant(self):
        t = self.torch
        self.expect("invalid_slots must be a one-element int64 tensor",
                    invalid_slots=t.zeros(1, dtype=t.int32, device=self.dev))
        self.expect("variant must be one of", variant="diagonal")

    def test_devices(self):
        if GPU:
            self.expect("all tensors must be on one device", slot_mapping=self.slots.cpu())
        else:
            os.environ["TRITON_INTERPRET"] = "0"
            try:
                self.expect("CPU tensors run only under Triton's interpreter")
            finally:
                os.environ["TRITON_INTERPRET"] = "1"

    def test_not_tensors(self):
        self.expect("slot_mapping must be a torch.Tensor", slot_mapping=[0, 1, 2, 3])


@needs_torch
def test_uint8_storage_for_fp8(rng):
    # vLLM-style uint8 cache storage with cache_dtype naming the fp8 format.
    import torch
    case = make_case(rng, input_dtype="f16", cache_dtype="fp8_e4m3", scale_kind="per_tensor", values="values",
                     magnitude=50.0)
    want, _ = expected(case)
    run_torch(case, DEVICE, cache_tensor_dtype=torch.uint8, cache_dtype="fp8_e4m3", fp8_software=True)
    assert (case.buffers["k_cache"] == want["k_cache"]).all() and (case.buffers["v_cache"] == want["v_cache"]).all()


def test_raw_params_refused():
    from kvfuzz_triton import KvAppendParams, check_params
    p = KvAppendParams(key=None, value=None, key_stride_token=0, key_stride_head=0, value_stride_token=0,
                       value_stride_head=0, slot_mapping=None, num_slots=0, k_cache=None, v_cache=None,
                       num_blocks=1, block_size=1, stride_block=1, stride_pos=1, stride_head=1, num_heads=1,
                       head_dim=1, input_dtype="f16", cache_dtype="fp8_e4m3")
    with pytest.raises(ValueError, match="a fp8_e4m3 cache needs a scale_kind"):
        check_params(p)
    p.cache_dtype, p.scale_kind = "f16", "per_head"
    with pytest.raises(ValueError, match="scale_kind 'per_head' needs a quantised cache"):
        check_params(p)
    p.input_dtype, p.scale_kind = "int8", "none"
    with pytest.raises(ValueError, match="input dtype must be one of"):
        check_params(p)
    p.input_dtype, p.cache_dtype, p.scale_kind = "f16", "int8", "per_block"
    with pytest.raises(ValueError, match="per_block needs k_scale and v_scale"):
        check_params(p)


def test_variant_choice_by_strides():
    from kvfuzz_triton import pick_variant, tile_sizes
    assert pick_variant(stride_pos=256, stride_head=64) == "token"  # NHD
    assert pick_variant(stride_pos=64, stride_head=1024) == "token"  # HND: token-major is faster (bench)
    assert tile_sizes(40, 128, "token") == (32, 128)
    assert tile_sizes(40, 576, "head") == (1, 1024)
