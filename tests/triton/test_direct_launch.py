"""The direct launcher (kvfuzz_triton/direct_launch.py) on the CPU: no GPU, no torch.

Triton's JIT runs for real with a fake driver (device 0, sm_90) and a fake compiled kernel that records
its launches (launch_fakes.py): the key is compared with Triton's own specialisation of the same
arguments (its binder, native_specialize_impl), and the arguments a direct launch hands to
CompiledKernel.run with those JITFunction.run hands it. The kernel is kv_append.py's, loaded a second
time with the interpreter off so that it is a JITFunction (the package's copy is an
InterpretedFunction under TRITON_INTERPRET=1).

    build/venv-triton/bin/python -m pytest -q tests/triton/test_direct_launch.py
"""
import itertools
import os
import random

import pytest

import kvfuzz_triton
from kvfuzz_triton import direct_launch
from kvfuzz_triton.direct_launch import DirectLauncher, LruCache, direct_launch_mode
from launch_fakes import STREAM, FakeDriver, Tensor, fake_compiled, jit, jit_launch, launch_args, params  # noqa: F401

GPU = os.environ.get("KVFUZZ_TRITON_GPU") == "1"
pytestmark = pytest.mark.skipif(GPU, reason="CPU test of the launcher with a fake driver")


# ---------------------------------------------------------------------------------------------
# The key: what Triton 3.6 specialises on

INTS = [0, 1, 2, 3, 15, 16, 17, 32, 48, -1, -16, -17, 2 ** 31 - 16, 2 ** 31 - 1, 2 ** 31, 2 ** 31 + 16,
        -2 ** 31, -2 ** 31 - 1, -2 ** 31 - 16, 2 ** 32, 2 ** 63 - 1, 2 ** 63 - 16, 2 ** 63, 2 ** 64 - 16,
        2 ** 64 - 1, -2 ** 63, -2 ** 63 + 1]
DTYPES = ["bfloat16", "float16", "float32", "int32", "int64", "uint8", "int8", "float8_e4m3fn"]


def random_arguments(kernel, rng):
    """Positional arguments for every non-constexpr parameter of kernel, constexprs, as Triton takes them:
    pointer parameters get duck tensors of random dtype and address (aligned to 16 or not), the others
    random ints from INTS, sometimes a bool, a float or None."""
    args = []
    for p in kernel.params:
        if p.is_constexpr:
            continue
        if p.name.endswith("_ptr"):
            args.append(Tensor(0x7F0000000000 + rng.choice([0, 2, 4, 8, 16, 32, 48, 1024]), rng.choice(DTYPES[:4])))
        else:
            args.append(rng.choice(INTS + [True, False, 0.5, None]) if rng.random() < 0.1 else rng.choice(INTS))
    constexprs = dict(IN_DTYPE=rng.choice([0, 1, True]), CACHE_DTYPE=rng.choice([1, 3]), FP8_SOFTWARE=rng.choice([False, True]),
                      BLOCK_H=8, BLOCK_D=rng.choice([64, 128]))
    return args, constexprs


def triton_key(kernel, args, constexprs, num_warps=4):
    """Triton 3.6's own cache key of the call (JITFunction.run: binder and compute_cache_key's input)."""
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature
    backend = make_backend(FakeDriver().get_current_target())
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    _, specialization, options = binder(*args, **constexprs, num_warps=num_warps, debug=False, instrumentation_mode="")
    return str(specialization) + str(options)


def test_key_is_exactly_as_fine_as_tritons_specialisation(jit):
    kernel, _ = jit
    launcher = DirectLauncher(kernel)
    rng = random.Random(20)
    ours, theirs = {}, {}
    samples = [random_arguments(kernel, rng) for _ in range(400)]
    # Near-duplicates too: one argument changed, so that equal keys are common.
    for args, constexprs in samples[:200]:
        i = rng.randrange(len(args))
        changed = list(args)
        changed[i] = random_arguments(kernel, rng)[0][i]
        samples.append((changed, constexprs))
    for args, constexprs in samples:
        try:
            key = launcher.key(launcher.bind(args, constexprs), {"num_warps": 4}, 0)
        except direct_launch.Unsupported:
            continue  # an int past u64: Triton refuses it too
        t = triton_key(kernel, args, constexprs)
        assert ours.setdefault(key, t) == t, f"one key for two Triton specialisations: {args}"
        assert theirs.setdefault(t, key) == key, f"two keys for one Triton specialisation: {args}"
    assert len(ours) > 100


def test_int_types_follow_tritons_ranges():
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.nvidia.compiler import CUDABackend
    for v in INTS:
        assert direct_launch.int_type(v) == native_specialize_impl(CUDABackend, v, False, False, True)[0], v
    with pytest.raises(direct_launch.Unsupported):
        direct_launch.int_type(2 ** 64)
    with pytest.raises(direct_launch.Unsupported):
        direct_launch.int_type(-2 ** 63 - 1)


def key_of(launcher, p, num_warps=4, device=0):
    grid, args, constexprs, _ = launch_args(p)
    return launcher.key(launcher.bind(args, constexprs), {"num_warps": num_warps}, device)


def test_same_call_same_key_and_what_changes_it(jit):
    from triton import knobs
    kernel, _ = jit
    launcher = DirectLauncher(kernel)
    base = key_of(launcher, params())
    assert key_of(launcher, params()) == base
    assert key_of(launcher, params(ptr=0x10000 + 16 * 1000)) == base, "pointers 16-byte aligned as before"
    assert key_of(launcher, params(ptr=0x10008)) != base, "16-byte alignment of the pointers"
    assert key_of(launcher, params(k_stride_token=3 * 8 * 128 + 32)) == base, "a stride still divisible by 16"
    assert key_of(launcher, params(k_stride_token=3 * 8 * 128 + 8)) != base, "divisibility by 16 of an int"
    assert key_of(launcher, params(k_stride_token=1)) != base, "an int equal to 1 (a constexpr to Triton)"
    assert key_of(launcher, params(k_stride_token=2 ** 31 + 16)) != base, "an int past int32"
    assert key_of(launcher, params(cache_dtype="fp8_e4m3", scale_kind="per_tensor")) != base, "dtypes, constexprs"
    assert key_of(launcher, params(), num_warps=8) != base, "num_warps"
    assert key_of(launcher, params(), device=1) != base, "the device"
    p = params()
    p.slot_mapping = Tensor(p.slot_mapping.ptr, "int32")
    assert key_of(launcher, p) != base, "a pointer's dtype"
    p = params()
    p.invalid_slots = None  # has_counter is not specialised on; the stand-in is an aligned int64 pointer too
    assert key_of(launcher, p) == base, "no counter: the same compiled kernel"
    with pytest.MonkeyPatch.context() as m:
        m.setattr(knobs.runtime, "debug", True)
        assert key_of(launcher, params()) != base, "TRITON_DEBUG"


def test_do_not_specialize_ints_keep_only_their_type(jit):
    kernel, _ = jit
    launcher = DirectLauncher(kernel)
    p = params()
    grid, args, constexprs, _ = launch_args(p)
    at = [q.name for q in kernel.params].index("window_size")  # in do_not_specialize
    keys = set()
    for v in (0, 1, 16, 17):
        changed = list(args)
        changed[at] = v
        keys.add(launcher.key(launcher.bind(changed, constexprs), {"num_warps": 4}, 0))
    assert len(keys) == 1
    changed[at] = 2 ** 40
    assert launcher.key(launcher.bind(changed, constexprs), {"num_warps": 4}, 0) not in keys


def test_constexpr_true_and_one_are_different_keys(jit):
    kernel, _ = jit
    launcher = DirectLauncher(kernel)
    grid, args, constexprs, _ = launch_args(params())
    a = launcher.key(launcher.bind(args, dict(constexprs, FP8_SOFTWARE=True)), {"num_warps": 4}, 0)
    b = launcher.key(launcher.bind(args, dict(constexprs, FP8_SOFTWARE=1)), {"num_warps": 4}, 0)
    assert a != b


# ---------------------------------------------------------------------------------------------
# The LRU bound

def test_lru_keeps_at_most_capacity_and_forgets_the_least_recently_used():
    cache = LruCache(3)
    for k in "abc":
        cache.put(k, k.upper())
    assert cache.get("a") == "A"  # a is now more recent than b
    cache.put("d", "D")
    assert len(cache) == 3 and "b" not in cache and cache.get("a") == "A" and cache.get("d") == "D"
    for i in range(100):
        cache.put(i, i)
    assert len(cache) == 3 and cache.get(99) == 99 and cache.get(96) is None


def test_lru_refuses_a_capacity_below_one():
    with pytest.raises(ValueError, match="capacity"):
        LruCache(0)


def test_launcher_keeps_at_most_its_capacity_of_compiled_kernels(jit):
    kernel, made = jit
    launcher = DirectLauncher(kernel, capacity=2)
    for stride in (16, 17, 18, 16):
        grid, args, constexprs, options = launch_args(params(k_stride_token=stride))
        launcher.launch(grid, args, constexprs, options)
    # 16 (D), 17 and 18 ('' both): two specialisations, both kept; the JIT compiled each once.
    assert len(made) == 2 and len(launcher.compiled) == 2
    for warps in (1, 2, 8):
        grid, args, constexprs, _ = launch_args(params())
        launcher.launch(grid, args, constexprs, {"num_warps": warps})
    assert len(launcher.compiled) == 2


# ---------------------------------------------------------------------------------------------
# The launch: the arguments Triton's JIT would pass

@pytest.mark.parametrize("scale_kind,cache_dtype", [("none", "bf16"), ("per_tensor", "fp8_e4m3"),
                                                    ("per_token_head", "fp8_e4m3")])
def test_direct_launch_passes_what_the_jit_passes(jit, scale_kind, cache_dtype):
    kernel, made = jit
    launcher = DirectLauncher(kernel)
    first = params(scale_kind=scale_kind, cache_dtype=cache_dtype)
    grid, args, constexprs, options = launch_args(first)
    compiled = launcher.launch(grid, args, constexprs, options)  # the JIT: compiles, launches
    assert made == [compiled] and len(compiled.runs) == 1
    later = params(ptr=0x90000, scale_kind=scale_kind, cache_dtype=cache_dtype, num_slots=7)
    grid, args, constexprs, options = launch_args(later)
    assert launcher.launch(grid, args, constexprs, options) is compiled
    direct = compiled.runs[-1]
    want = jit_launch(kernel, later)
    assert len(made) == 1
    # Grid, stream, function, packed metadata; then every argument in parameter order, constexprs
    # and ints equal to 1 included.
    assert direct[:6] == want[:6] == (7, 1, 1, STREAM, "function", "packed")
    assert len(direct) == 9 + len(kernel.params)
    assert [(type(a), a) for a in direct[9:]] == [(type(a), a) for a in want[9:]]
    assert all(a is b for a, b in zip(direct[9:], want[9:]) if isinstance(a, Tensor))
    # No launch hook set: the JIT passes its empty hook chains and their metadata, the direct launch None.
    assert direct[6:9] == (None, None, None)


def test_direct_launch_with_a_hook_passes_the_hooks_and_their_metadata(jit):
    from triton import knobs
    kernel, _ = jit
    launcher = DirectLauncher(kernel)
    grid, args, constexprs, options = launch_args(params())
    compiled = launcher.launch(grid, args, constexprs, options)
    seen = []
    knobs.runtime.launch_enter_hook.add(seen.append)
    try:
        launcher.launch(grid, args, constexprs, options)
    finally:
        knobs.runtime.launch_enter_hook.remove(seen.append)
    meta, enter, leave = compiled.runs[-1][6:9]
    assert enter is knobs.runtime.launch_enter_hook and leave is knobs.runtime.launch_exit_hook
    assert meta.get()["name"] == "kv_append_kernel" and meta.get()["stream"] == STREAM


def test_check_mode_accepts_the_jits_choice_and_refuses_another(jit, monkeypatch):
    kernel, made = jit
    monkeypatch.setattr(direct_launch, "_mode", "check")
    launcher = DirectLauncher(kernel)
    grid, args, constexprs, options = launch_args(params())
    compiled = launcher.launch(grid, args, constexprs, options)
    assert launcher.launch(grid, args, constexprs, options) is compiled  # checked: the JIT's choice
    # A cache that maps the key to another compiled kernel (what a key missing a specialisation does).
    key = launcher.key(launcher.bind(args, constexprs), options, 0)
    launcher.compiled.put(key, fake_compiled())
    with pytest.raises(RuntimeError, match="would not run"):
        launcher.launch(grid, args, constexprs, options)


# ---------------------------------------------------------------------------------------------
# The environment switch and the interpreter

def test_switch_values(monkeypatch):
    monkeypatch.delenv("KVFUZZ_TRITON_DIRECT_LAUNCH", raising=False)
    assert direct_launch.mode_from_environment() == "1"
    for v in ("0", "1", "check"):
        monkeypatch.setenv("KVFUZZ_TRITON_DIRECT_LAUNCH", v)
        assert direct_launch.mode_from_environment() == v
    monkeypatch.setenv("KVFUZZ_TRITON_DIRECT_LAUNCH", "yes")
    with pytest.raises(ValueError, match="KVFUZZ_TRITON_DIRECT_LAUNCH='yes'"):
        direct_launch.mode_from_environment()


def test_setting_the_mode(monkeypatch):
    monkeypatch.setattr(direct_launch, "_mode", "1")
    assert direct_launch.set_direct_launch_mode("check") == "1" and direct_launch_mode() == "check"
    with pytest.raises(ValueError, match="direct launch mode 'off'"):
        direct_launch.set_direct_launch_mode("off")
    assert direct_launch_mode() == "check"


def counting_jit(kernel, monkeypatch):
    """Counts the calls that go through JITFunction.run."""
    calls = []
    real = type(kernel).run.__get__(kernel)

    def run(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(kernel, "run", run)
    return calls


def test_switch_off_sends_every_call_through_the_jit(jit, monkeypatch):
    kernel, made = jit
    calls = counting_jit(kernel, monkeypatch)
    launcher = DirectLauncher(kernel)
    grid, args, constexprs, options = launch_args(params())
    monkeypatch.setattr(direct_launch, "_mode", "0")
    for _ in range(3):
        launcher.launch(grid, args, constexprs, options)
    assert len(calls) == 3 and len(launcher.compiled) == 0
    direct_launch.set_direct_launch_mode("1")
    for _ in range(3):
        launcher.launch(grid, args, constexprs, options)
    assert len(calls) == 4 and len(made) == 1 and len(made[0].runs) == 6  # the JIT once, then direct


def test_unsupported_calls_go_through_the_jit(jit, monkeypatch):
    kernel, _ = jit
    calls = counting_jit(kernel, monkeypatch)
    launcher = DirectLauncher(kernel)
    grid, args, constexprs, options = launch_args(params())
    for _ in range(2):
        launcher.launch(lambda meta: grid, args, constexprs, options)  # a callable grid
    odd = list(args)
    odd[[q.name for q in kernel.params if not q.is_constexpr].index("num_heads")] = (8,)  # a tuple
    launcher.launch(grid, odd, constexprs, options)
    assert len(calls) == 3 and len(launcher.compiled) == 0


def test_interpreter_path_is_untouched():
    from triton.runtime.interpreter import InterpretedFunction
    # conftest.py sets TRITON_INTERPRET=1 before the package is imported.
    assert isinstance(kvfuzz_triton.kv_append_kernel, InterpretedFunction)
    assert not kvfuzz_triton.api.KV_APPEND.supported and not kvfuzz_triton.format_api.KV_APPEND_FORMAT.supported
    ran = []

    class Kernel(InterpretedFunction):
        def __init__(self):
            pass

        def __getitem__(self, grid):
            return lambda *a, **k: ran.append((grid, a, k)) or "interpreted"

    assert DirectLauncher(Kernel()).launch((1, 1), (1, 2), {"B": 3}, {"num_warps": 4}) == "interpreted"
    assert ran == [((1, 1), (1, 2), {"B": 3, "num_warps": 4})]


def test_lru_is_thread_safe_enough():
    import threading
    cache = LruCache(4)
    errors = []

    def work(seed):
        try:
            for i in itertools.islice(itertools.count(seed), 2000):
                cache.put(i % 7, i)
                cache.get((i + 3) % 7)
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors and len(cache) <= 4
