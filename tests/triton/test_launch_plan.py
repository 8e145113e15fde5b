"""kv_append's launch plans (kvfuzz_triton/launch_plan.py, the plan path of api.kv_append).

On the CPU (no GPU, no torch): the plan key, and that a plan hands CompiledKernel.run the arguments
Triton's JITFunction.run hands it for the same call (duck tensors, a fake driver: launch_fakes.py).
On the GPU (KVFUZZ_TRITON_GPU=1, torch on CUDA): kv_append on a second set of tensors of the same kind
is launched from the first call's plan without validation, and writes bit for bit what the full
path (direct launch mode "0") writes, for every family and scale kind; a misaligned view gets a
plan of its own; bad arguments raise the full path's errors after a plan exists.

    build/venv-triton/bin/python -m pytest -q tests/triton/test_launch_plan.py
    KVFUZZ_TRITON_GPU=1 python3 -m pytest -q tests/triton/test_launch_plan.py       # on the GPU
"""
import os

import pytest

import kvfuzz_triton
from kvfuzz_triton import launch_plan
from kvfuzz_triton.api import PLAN_FIELDS
from kvfuzz_triton.direct_launch import DirectLauncher, set_direct_launch_mode
from launch_fakes import Tensor, fake_compiled, jit, jit_kernel, jit_launch, jit_row, launch_args, params  # noqa: F401

GPU = os.environ.get("KVFUZZ_TRITON_GPU") == "1"
cpu_only = pytest.mark.skipif(GPU, reason="CPU test with a fake driver")
gpu_only = pytest.mark.skipif(not GPU, reason="needs a GPU (KVFUZZ_TRITON_GPU=1)")


# ---------------------------------------------------------------------------------------------
# On the CPU: plans of duck tensors, Triton's JIT with a fake driver

def tensor_args(p):
    """kv_append's tensor arguments in its order (key, value, key_cache, value_cache, slot_mapping, rope,
    k_scale, v_scale, k_scale_cache, v_scale_cache, invalid_slots, cp_positions) = PLAN_FIELDS of p."""
    return tuple(getattr(p, f) for f in PLAN_FIELDS)


def pointer_args(p):
    """What a plan launches p with: tensor_args' data_ptr() values (launch_plan.keyed_pointers)."""
    return [None if t is None else t.data_ptr() for t in tensor_args(p)]


def as_launched(args):
    """(type, value) of launch arguments, each tensor as the integer pointer Triton's launcher takes
    from it (its data_ptr(); a plan passes that integer itself)."""
    return [(int, a.data_ptr()) if isinstance(a, Tensor) else (type(a), a) for a in args]


@cpu_only
@pytest.mark.parametrize("scale_kind,cache_dtype", [("none", "bf16"), ("per_tensor", "fp8_e4m3"),
                                                    ("per_token_head", "fp8_e4m3")])
@pytest.mark.parametrize("variant", ["row", "token"])
def test_plan_launches_what_the_jit_launches(request, variant, scale_kind, cache_dtype):
    kernel, made = request.getfixturevalue("jit_row" if variant == "row" else "jit")
    launcher = DirectLauncher(kernel)
    first = params(scale_kind=scale_kind, cache_dtype=cache_dtype)
    grid, args, constexprs, options = launch_args(first, variant)
    compiled = launcher.launch(grid, args, constexprs, options)
    plan = kvfuzz_triton.api.kv_append_plan(first, compiled, 0, variant=variant, fp8_software=False,
                                            launcher=launcher)
    assert plan is not None and plan.device == 0 and plan.grid == (5, 1)
    later = params(ptr=0x490000, scale_kind=scale_kind, cache_dtype=cache_dtype)
    plan.launch(pointer_args(later))
    planned = compiled.runs[-1]
    want = jit_launch(kernel, later, variant)
    assert planned[:6] == want[:6]
    assert as_launched(planned[9:]) == as_launched(want[9:])
    assert all(type(a) is int for a, b in zip(planned[9:], want[9:]) if isinstance(b, Tensor))


@cpu_only
def test_kv_append_launches_a_known_call_from_its_plan(jit_row, monkeypatch):
    """kv_append's own hit path, on duck tensors (it reads no more of them than call_key does): no
    validation, the plan's launch, the JIT's arguments (of the row kernel, a plain call's)."""
    from kvfuzz_triton import api
    kernel, _ = jit_row
    launcher = DirectLauncher(kernel)
    first = params()
    grid, args, constexprs, options = launch_args(first, "row")
    compiled = launcher.launch(grid, args, constexprs, options)
    tensors = tensor_args(first)
    key, _ = api._plan_key(tensors, "nhd", None, None, None, False, 0, 1, 1)
    monkeypatch.setattr(api, "PLANS", api.LruCache())
    api.PLANS.put(key, api.kv_append_plan(first, compiled, 0, fp8_software=False, launcher=launcher))
    # The package's kernels are interpreted here: kv_append takes plans only where KV_APPEND is supported.
    monkeypatch.setattr(api, "KV_APPEND", DirectLauncher(jit_kernel(monkeypatch, "kv_append_kernel")[0]))
    monkeypatch.setattr(api, "KV_APPEND_ROW", launcher)
    monkeypatch.setattr(api, "_checked_params", lambda *a: pytest.fail("validated a call that has a plan"))
    later = params(ptr=0x490000)
    api.kv_append(later.key, later.value, later.k_cache, later.v_cache, later.slot_mapping, layout="nhd",
                  invalid_slots=later.invalid_slots, fp8_software=False)
    planned = compiled.runs[-1]
    want = jit_launch(kernel, later, "row")
    assert as_launched(planned[9:]) == as_launched(want[9:]) and planned[:6] == want[:6]
    with pytest.raises(pytest.fail.Exception, match="validated"):  # another layout: another key, validation
        api.kv_append(later.key, later.value, later.k_cache, later.v_cache, later.slot_mapping, layout="hnd",
                      invalid_slots=later.invalid_slots, fp8_software=False)


@cpu_only
def test_plan_refuses_an_argument_it_cannot_place(jit):
    kernel, _ = jit
    launcher = DirectLauncher(kernel)
    p = params()
    p.csr_batch_indices = Tensor(0x1000, "int32")  # a tensor field kv_append never fills
    p.csr_positions = p.csr_kv_indices = p.csr_kv_indptr = p.csr_batch_indices
    grid, args, constexprs, options = launch_args(p)
    compiled = launcher.launch(grid, args, constexprs, options)
    assert kvfuzz_triton.api.kv_append_plan(p, compiled, 0, fp8_software=False, launcher=launcher) is None


@cpu_only
def test_plan_key_covers_shape_strides_dtype_device_alignment():
    call_key = launch_plan.call_key
    t = [Tensor(0x1000 * (i + 1)) for i in range(3)]
    others = ("nhd", None)
    base = call_key((t[0], None, t[1]), others)

    def with_first(**kw):
        a = dict(ptr=t[0].ptr, dtype=t[0].dtype, shape=t[0].shape, strides=t[0].strides, device=t[0].device)
        a.update(kw)
        return call_key((Tensor(**a), None, t[1]), others)

    assert with_first() == base and with_first(ptr=0x1000 + 64) == base
    for change in (dict(ptr=0x1008), dict(dtype="float16"), dict(shape=(4, 9)), dict(strides=(16, 1)),
                   dict(device=1)):
        assert with_first(**change) != base, change
    assert call_key((t[0], t[2], t[1]), others) != base, "a tensor where None was"
    assert call_key((t[0], None, t[1]), ("hnd", None)) != base, "another argument"
    assert call_key((t[0], None, object()), others) is None, "not a tensor: the full path names it"


@cpu_only
def test_plan_key_covers_tritons_debug_flag(monkeypatch):
    from triton import knobs
    t = (Tensor(0x1000),)
    base = launch_plan.call_key(t, ())
    monkeypatch.setattr(knobs.runtime, "debug", True)
    assert launch_plan.call_key(t, ()) != base


@cpu_only
def test_plan_same_as_compares_every_part():
    compiled = fake_compiled()
    a = launch_plan.LaunchPlan.of(compiled, (5, 1), [launch_plan.Slot(0), 16, True, None], 0)
    assert a.same_as(launch_plan.LaunchPlan.of(compiled, (5, 1), [launch_plan.Slot(0), 16, True, None], 0))
    for other in ([launch_plan.Slot(1), 16, True, None], [launch_plan.Slot(0), 16, 1, None],
                  [launch_plan.Slot(0), 17, True, None]):
        assert not a.same_as(launch_plan.LaunchPlan.of(compiled, (5, 1), other, 0))
    assert not a.same_as(launch_plan.LaunchPlan.of(fake_compiled(), (5, 1), [launch_plan.Slot(0), 16, True, None], 0))
    assert not a.same_as(None)
    assert a.arguments(("x",)) == ["x", 16, True, None]
    assert launch_plan.LaunchPlan.of(compiled, (5, 1), [Tensor(0x1000)], 0) is None


# ---------------------------------------------------------------------------------------------
# On the GPU: kv_append through its plans against the full path

H, D, BS, NB = 8, 128, 16, 64  # heads, head_dim, block_size, blocks
KINDS = ["bf16-nhd", "bf16-hnd", "fp8-per-tensor", "fp8-per-token-head", "int8-per-head", "bf16-legacy",
         "bf16-k-only", "bf16-kv-split", "bf16-mla", "bf16-cp", "f16-to-f32"]


class Call:
    """One kv_append call: fn(*args, **kwargs), and the tensors it writes (compared bit for bit)."""

    def __init__(self, fn, args, kwargs, outputs):
        self.fn, self.args, self.kwargs, self.outputs = fn, args, kwargs, outputs

    def run(self, mode):
        """The call in direct launch mode `mode` ("1", "0", "check"), then the mode as it was."""
        before = set_direct_launch_mode(mode)
        try:
            self.fn(*self.args, **self.kwargs)
        finally:
            set_direct_launch_mode(before)
        import torch
        torch.cuda.synchronize()


def poisoned(shape, dtype):
    """A new CUDA tensor with every byte 0xA5."""
    import torch
    t = torch.empty(shape, dtype=dtype, device="cuda")
    t.view(torch.uint8).fill_(0xA5)
    return t


def slots_and_counter(g, tokens):
    """A call's slot_mapping of `tokens` distinct slots of the NB x BS cache from generator g, every fifth
    padding (-1) and one invalid (past the cache), and a zeroed invalid-slot counter."""
    import torch
    slots = torch.randperm(NB * BS, generator=g, device="cuda")[:tokens]
    slots[::5] = -1
    slots[3 % tokens] = NB * BS + 7
    return slots, torch.zeros(1, dtype=torch.int64, device="cuda")


def make(kind, seed, tokens=16, misaligned=False):
    """A kv_append call of `kind` on new tensors: inputs from `seed`, caches poisoned with one pattern,
    slots distinct with padding (-1) and an invalid slot, counted. misaligned: key, value (and kv_c)
    start 2 bytes past a 16-byte boundary."""
    import torch
    from kvfuzz_triton import kv_append, kv_append_mla
    g = torch.Generator(device="cuda").manual_seed(seed)
    in_dt = torch.float16 if kind == "f16-to-f32" else torch.bfloat16

    def rows(cols):
        n = tokens * cols
        flat = torch.randn(n + 8, generator=g, device="cuda").to(in_dt)
        return flat[1:n + 1] if misaligned else flat[:n]

    slots, counter = slots_and_counter(g, tokens)
    kw = dict(invalid_slots=counter)
    if kind == "bf16-mla":
        kv_c, k_pe = rows(512).view(tokens, 512), rows(64).view(tokens, 64)
        cache = poisoned((NB, BS, 576), torch.bfloat16)
        return Call(kv_append_mla, (kv_c, k_pe, cache, slots), kw, [cache, counter])
    qkv = rows(3 * H * D).view(tokens, 3, H, D)
    key, value = qkv[:, 1], qkv[:, 2]
    if kind == "bf16-kv-split":
        value = rows(H * 64).view(tokens, H, 64)
    layout = "hnd" if kind == "bf16-hnd" else ("vllm_legacy" if kind == "bf16-legacy" else "nhd")
    cache_dt = {"fp8-per-tensor": torch.uint8, "fp8-per-token-head": torch.float8_e4m3fn, "int8-per-head": torch.int8,
                "f16-to-f32": torch.float32}.get(kind, torch.bfloat16)
    if layout == "vllm_legacy":
        k_shape, v_shape = (NB, H, D // 8, BS, 8), (NB, H, D, BS)
    elif layout == "hnd":
        k_shape = v_shape = (NB, H, BS, D)
    else:
        k_shape, v_shape = (NB, BS, H, D), (NB, BS, H, value.shape[2])
    kc = poisoned(k_shape, cache_dt)
    vc = None if kind == "bf16-k-only" else poisoned(v_shape, cache_dt)
    outputs = [kc, counter] + ([vc] if vc is not None else [])
    if kind == "bf16-k-only":
        value = None
    if kind == "fp8-per-tensor":
        kw.update(scale_kind="per_tensor", cache_dtype="fp8_e4m3",
                  k_scale=torch.tensor([0.5], device="cuda"), v_scale=torch.tensor([0.25], device="cuda"))
    elif kind == "fp8-per-token-head":
        sk, sv = poisoned((NB, BS, H), torch.float32), poisoned((NB, BS, H), torch.float32)
        kw.update(scale_kind="per_token_head", k_scale_cache=sk, v_scale_cache=sv)
        outputs += [sk, sv]
    elif kind == "int8-per-head":
        kw.update(scale_kind="per_head", k_scale=torch.linspace(0.01, 0.1, H, device="cuda"),
                  v_scale=torch.linspace(0.02, 0.2, H, device="cuda"))
    elif kind == "bf16-cp":
        kw.update(cp_positions=torch.arange(tokens, dtype=torch.int32, device="cuda"), cp_rank=1, cp_world_size=2)
    return Call(kv_append, (key, value, kc, vc, slots), dict(kw, layout=layout), outputs)


def same_bytes(a, b):
    import torch
    return all(torch.equal(x.contiguous().view(-1).view(torch.uint8), y.contiguous().view(-1).view(torch.uint8))
               for x, y in zip(a, b))


def count_validations(monkeypatch, module=None):
    """A list that gains an entry at each call of `module`'s validation (_checked_params): api's
    (kv_append's, the default) or quant_api's (kv_append_quant's)."""
    if module is None:
        from kvfuzz_triton import api as module
    calls = []
    real = module._checked_params

    def checked(*a, **k):
        calls.append(1)
        return real(*a, **k)
    monkeypatch.setattr(module, "_checked_params", checked)
    return calls


def launched_by(launcher, plans, monkeypatch):
    """Plans launch through `launcher` ("fast": fastlaunch.c, "triton": Triton's own launcher) from now
    on in this test; after a first call, checks that its plans do."""
    from kvfuzz_triton import fast_launch
    monkeypatch.setattr(fast_launch, "_enabled", launcher == "fast")

    def check():
        fast = [p.fast is not None for p in plans.values()]
        assert fast == [launcher == "fast"] * len(fast), fast_launch.status()
    return check


def check_plan_against_the_full_path(module, make_call, launcher, monkeypatch):
    """module: api (kv_append) or quant_api (kv_append_quant), whose PLANS and validation are watched;
    make_call(seed): a Call on new tensors. A first call keeps one plan, launched through `launcher`;
    a second call like it is launched from the plan without validation and writes bit for bit what
    the full path writes; a third runs in check mode (the plan against the validation, the kernel
    against the JIT's). Returns the planned call."""
    module.PLANS.clear()
    check_launcher = launched_by(launcher, module.PLANS, monkeypatch)
    make_call(1).run("1")  # validates, launches, keeps a plan
    assert len(module.PLANS) == 1
    check_launcher()
    validations = count_validations(monkeypatch, module)
    planned, full = make_call(2), make_call(2)
    planned.run("1")
    assert validations == [], "a call like the first is launched from its plan"
    full.run("0")
    assert validations == [1]
    assert same_bytes(planned.outputs, full.outputs)
    make_call(3).run("check")
    return planned


@gpu_only
@pytest.mark.parametrize("launcher", ["fast", "triton"])
@pytest.mark.parametrize("tokens", [1, 16])
@pytest.mark.parametrize("kind", KINDS)
def test_plan_writes_what_the_full_path_writes(kind, tokens, launcher, monkeypatch):
    from kvfuzz_triton import api
    check_plan_against_the_full_path(api, lambda seed: make(kind, seed=seed, tokens=tokens), launcher, monkeypatch)


@gpu_only
def test_misaligned_inputs_get_a_plan_of_their_own():
    from kvfuzz_triton import api
    api.PLANS.clear()
    make("bf16-nhd", seed=1).run("1")
    planned, full = make("bf16-nhd", seed=2, misaligned=True), make("bf16-nhd", seed=2, misaligned=True)
    assert planned.args[0].data_ptr() % 16 == 2
    planned.run("1")
    assert len(api.PLANS) == 2
    full.run("0")
    assert same_bytes(planned.outputs, full.outputs)


@gpu_only
def test_errors_after_a_plan_are_the_full_paths():
    import torch
    from kvfuzz_triton import api
    api.PLANS.clear()
    make("bf16-nhd", seed=1).run("1")
    for mode in ("1", "0"):
        bad = make("bf16-nhd", seed=2)
        bad.args = (bad.args[0], bad.args[1].to(torch.float16)) + bad.args[2:]
        with pytest.raises(ValueError, match="kv_append: key and value dtypes differ"):
            bad.run(mode)
        bad = make("bf16-nhd", seed=2)
        bad.args = bad.args[:4] + (bad.args[4].cpu(),)
        with pytest.raises(ValueError, match="all tensors must be on one device"):
            bad.run(mode)
        bad = make("bf16-nhd", seed=2)
        bad.kwargs["layout"] = "hnd"
        with pytest.raises(ValueError, match="cache is"):
            bad.run(mode)


@gpu_only
def test_plans_are_bounded():
    from kvfuzz_triton import api
    api.PLANS.clear()
    for tokens in range(1, api.PLANS.capacity + 6):
        make("bf16-nhd", seed=tokens, tokens=tokens).run("1")
    assert len(api.PLANS) == api.PLANS.capacity


# ---------------------------------------------------------------------------------------------
# kv_append_quant's plans (quant_api.py)

def quant_tensors(ptr=0x10000, v_distance=0x100000):
    """kv_append_quant's tensor arguments of an nvfp4 call on duck tensors at ptr (H 8, D 128, 16 blocks
    of 16): key, value, key_cache, value_cache (v_distance bytes after key_cache), slot_mapping,
    key_scales, value_scales, k_scale, v_scale, rope, invalid_slots."""
    h, d, nb, bs = 8, 128, 16, 16
    at = lambda i: ptr + i * 0x1000000  # noqa: E731
    rows = dict(shape=(5, h, d), strides=(3 * h * d, d, 1))
    return (Tensor(at(0), **rows), Tensor(at(1), **rows),
            Tensor(at(2), "uint8", (nb, bs, h, d // 2), (bs * h * d // 2, h * d // 2, d // 2, 1)),
            Tensor(at(2) + v_distance, "uint8", (nb, bs, h, d // 2), (bs * h * d // 2, h * d // 2, d // 2, 1)),
            Tensor(at(4), "int64", (5,), (1,)),
            Tensor(at(5), "uint8", (nb, bs, h, d // 16), (bs * h * d // 16, h * d // 16, d // 16, 1)),
            Tensor(at(6), "uint8", (nb, bs, h, d // 16), (bs * h * d // 16, h * d // 16, d // 16, 1)),
            Tensor(at(7), "float32", (1,), (1,)), Tensor(at(8), "float32", (1,), (1,)), None,
            Tensor(at(10), "int64", (1,), (1,)))


def call_quant(tensors, **kw):
    from kvfuzz_triton.quant_api import kv_append_quant
    key, value, kc, vc, slots, ks, vs, k_scale, v_scale, rope, invalid = tensors
    kv_append_quant(key, value, kc, vc, slots, quant_format="nvfp4", key_scales=ks, value_scales=vs, k_scale=k_scale,
                    v_scale=v_scale, rope=rope, invalid_slots=invalid, fp8_software=False, **kw)


@cpu_only
def test_kv_append_quant_launches_a_known_call_from_its_plan(monkeypatch):
    """kv_append_quant's hit path on duck tensors: no validation, the plan's launch with the call's
    pointers; another distance between the K and V caches (a kernel argument), another layout or
    rules dict: no plan, the full path."""
    from kvfuzz_triton import quant_api

    class Plan:
        def __init__(self):
            self.launched = []

        def launch(self, pointers):
            self.launched.append(pointers)

    class Supported:
        supported = True

    first = quant_tensors()
    key, pointers = launch_plan.keyed_pointers(first, ("nvfp4", "nhd", "linear", None, False))
    plan = Plan()
    monkeypatch.setattr(quant_api, "KV_APPEND_FORMAT", Supported())
    monkeypatch.setattr(quant_api, "PLANS", quant_api.LruCache())
    quant_api.PLANS.put((key, 0x100000, 0x1000000), plan)
    monkeypatch.setattr(quant_api, "_checked_params", lambda *a: pytest.fail("validated a call that has a plan"))
    later = quant_tensors(ptr=0x490000)
    call_quant(later)
    assert plan.launched == [[None if t is None else t.data_ptr() for t in later]]
    for change in (dict(tensors=quant_tensors(ptr=0x490000, v_distance=0x200000)), dict(layout="hnd"),
                   dict(rules={"nvfp4": "flashinfer"})):
        tensors = change.pop("tensors", later)
        with pytest.raises(pytest.fail.Exception, match="validated"):
            call_quant(tensors, **change)
    assert len(plan.launched) == 1


@cpu_only
def test_kv_append_quant_makes_no_plan_under_the_interpreter():
    from kvfuzz_triton import quant_api
    assert not quant_api.KV_APPEND_FORMAT.supported  # interpreted: launched by Triton's interpreter, unplanned
    assert len(quant_api.PLANS) == 0


QUANT_KINDS = ["nvfp4", "mxfp8_e4m3", "mxfp4", "fp8_inline", "asym_int8", "asym_int4", "ds_mla", "indexer_k"]


def make_quant(fmt, seed, tokens=16, together=True):
    """A kv_append_quant call of format `fmt` on new CUDA tensors (H 8, D 128; ds_mla 512 + 64 rope
    dims, indexer_k 128), caches and scales poisoned, slots distinct with padding and an invalid slot,
    counted. together: K and V caches (and scales) are the two halves of one tensor per block, as vLLM
    allocates them (one distance for every call); else separate allocations."""
    import torch
    from kvfuzz_triton import kv_append_quant
    g = torch.Generator(device="cuda").manual_seed(seed)

    def pair(row, dtype=torch.uint8):
        if together:
            kv = poisoned((NB, 2, BS, H, row), dtype)
            return kv[:, 0], kv[:, 1]
        return poisoned((NB, BS, H, row), dtype), poisoned((NB, BS, H, row), dtype)

    slots, counter = slots_and_counter(g, tokens)
    kw = dict(quant_format=fmt, invalid_slots=counter)
    if fmt in ("ds_mla", "indexer_k"):
        dc = 512 if fmt == "ds_mla" else D
        key = torch.randn(tokens, dc, generator=g, device="cuda").to(torch.bfloat16)
        if fmt == "ds_mla":
            kw["rope"] = torch.randn(tokens, 64, generator=g, device="cuda").to(torch.bfloat16)
        cache = poisoned((NB, BS, 656 if fmt == "ds_mla" else D + 4), torch.uint8)
        return Call(kv_append_quant, (key, None, cache, None, slots), kw, [cache, counter])
    qkv = torch.randn(tokens, 3, H, D, generator=g, device="cuda").to(torch.bfloat16)
    key, value = qkv[:, 1], qkv[:, 2]
    four = fmt in ("nvfp4", "mxfp4", "asym_int4")
    kc, vc = pair(D + 4 if fmt == "fp8_inline" else D // 2 if four else D)
    outputs = [kc, vc, counter]
    if fmt in ("asym_int8", "asym_int4"):
        ks, vs = pair(2, torch.float32)
    elif fmt != "fp8_inline":
        ks, vs = pair(D // (16 if fmt == "nvfp4" else 32))
    if fmt != "fp8_inline":
        kw.update(key_scales=ks, value_scales=vs)
        outputs += [ks, vs]
    if fmt == "nvfp4":
        kw.update(k_scale=torch.tensor([0.02], device="cuda"), v_scale=torch.tensor([0.03], device="cuda"))
    return Call(kv_append_quant, (key, value, kc, vc, slots), kw, outputs)


@gpu_only
@pytest.mark.parametrize("launcher", ["fast", "triton"])
@pytest.mark.parametrize("tokens", [1, 16])
@pytest.mark.parametrize("fmt", QUANT_KINDS)
def test_quant_plan_writes_what_the_full_path_writes(fmt, tokens, launcher, monkeypatch):
    from kvfuzz_triton import quant_api
    planned = check_plan_against_the_full_path(quant_api, lambda seed: make_quant(fmt, seed=seed, tokens=tokens),
                                               launcher, monkeypatch)
    if tokens > 1:  # (T = 1: the one slot is the invalid one, counted, nothing written)
        assert not torch_all_poison(planned.outputs[0]), "the slots' rows were written"


def torch_all_poison(t):
    import torch
    return bool((t.contiguous().view(-1).view(torch.uint8) == 0xA5).all())


@gpu_only
def test_quant_caches_at_another_distance_get_a_plan_of_their_own(monkeypatch):
    from kvfuzz_triton import quant_api
    quant_api.PLANS.clear()
    make_quant("nvfp4", seed=1).run("1")
    validations = count_validations(monkeypatch, quant_api)
    planned, full = make_quant("nvfp4", seed=2, together=False), make_quant("nvfp4", seed=2, together=False)
    planned.run("1")
    assert validations == [1] and len(quant_api.PLANS) == 2
    full.run("0")
    assert same_bytes(planned.outputs, full.outputs)
