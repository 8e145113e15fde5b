"""kvfuzz_triton's own launcher (fast_launch.py, fastlaunch.c).

On the CPU: fastlaunch.c builds; its plan key is launch_plan.python_keyed_pointers' for every kind of
argument; pack() lays out scalars as Triton's launcher declares them (checked against numpy's
encodings); a plan of the real kv_append kernels, with the parameter types Triton's JIT gives them,
passes the kernel the cells of the arguments Triton's own launch would parse (duck tensors, fake
driver: launch_fakes.py); LaunchPlan.launch goes through the fast plan unless a launch hook is set;
bad Plan arguments and a missing driver raise. The launch itself runs on a fake CUDA driver
(fake_libcuda.c, loaded as libcuda.so.1 in a process of its own): cuLaunchKernelEx gets Triton's
configuration, the stream, the function and the cells, with the GIL released; a thread with no context
gets the plan's device's primary one; driver errors are raised with the driver's text. Mutants of
fastlaunch.c, built, are caught by these checks. On the GPU, test_launch_plan.py's plan tests run
through this launcher and through Triton's, bit for bit against the full path.

    build/venv-triton/bin/python -m pytest -q tests/triton/test_fast_launch.py
"""
import ctypes
import json
import os
import pathlib
import struct
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import kvfuzz_triton
from kvfuzz_triton import fast_launch, launch_plan
from kvfuzz_triton.direct_launch import DirectLauncher
from kvfuzz_triton.launch_plan import Slot
from launch_fakes import (Tensor, build_fake_libcuda, compiled_like_triton, fake_meta, jit, jit_launch,  # noqa: F401
                         jit_row, launch_args, params)
from test_launch_plan import pointer_args

GPU = os.environ.get("KVFUZZ_TRITON_GPU") == "1"


@pytest.fixture(autouse=True)
def fast_launcher_on(monkeypatch):
    """The fast launcher is off by default (until verified on a GPU); these tests turn it on."""
    monkeypatch.setattr(fast_launch, "_enabled", True)


@pytest.fixture
def c_key(monkeypatch):
    """launch_plan.keyed_pointers through fastlaunch.c: torchkey.cpp (where torch is installed) left out."""
    monkeypatch.setattr(fast_launch, "torch_key_module", lambda: None)


@pytest.fixture
def mod():
    m = fast_launch.module()
    assert m is not None, fast_launch.status()
    return m


def test_it_is_on_unless_the_environment_turns_it_off(monkeypatch):
    for value, on in ((None, True), ("0", False), ("1", True)):
        if value is None:
            monkeypatch.delenv(fast_launch.FAST_LAUNCH_ENV, raising=False)
        else:
            monkeypatch.setenv(fast_launch.FAST_LAUNCH_ENV, value)
        assert fast_launch.enabled_from_environment() is on
    monkeypatch.setenv(fast_launch.FAST_LAUNCH_ENV, "yes")
    with pytest.raises(ValueError, match="KVFUZZ_TRITON_FAST_LAUNCH='yes'"):
        fast_launch.enabled_from_environment()
    fast_launch.set_fast_launch(False)
    assert "is off" in fast_launch.status()


def test_the_module_builds(mod):
    assert fast_launch.status().startswith("fast launcher (plan key ")
    assert hasattr(mod, "Plan") and hasattr(mod, "keyed_pointers")


# ---------------------------------------------------------------------------------------------
# The plan key in C

class Raising(Tensor):
    def __init__(self, error, **kw):
        super().__init__(0x1000, **kw)
        self.error = error

    def stride(self):
        raise self.error


class Negative(Tensor):
    """A negative-bit view (torch._neg_view): its memory holds the values negated."""

    def is_neg(self):
        return True


KEY_CASES = {
    "tensors and absent ones": (Tensor(0x1000), None, Tensor(0x2008, "int64", (5,), (1,), 1)),
    "alignment differs": (Tensor(0x1002),),
    "shape, strides, dtype, device": (Tensor(0x1000, "float32", (2, 3), (1, 2), 3),),
    "empty": (),
    "all absent": (None, None),
    "a list": [Tensor(0x1000), None],
    "an int": (Tensor(0x1000), 5),
    "a string": ("key",),
    "data_ptr not an int": (Tensor("0x1000"),),
    "stride() raises": (Raising(ValueError("no")),),
    "not a sequence": 7,
    "a generator": (t for t in (Tensor(0x1000),)),
    "a negative view": (Negative(0x1000),),
    "a null pointer with elements": (Tensor(0),),
    "a null pointer, no elements": (Tensor(0, shape=(0, 8)),),
}


@pytest.mark.parametrize("case", KEY_CASES)
def test_c_key_is_the_python_key(mod, case, c_key):
    tensors = KEY_CASES[case]
    others = ("nhd", None, int, 1)
    got = mod.keyed_pointers(tensors, others, False, "")
    want = launch_plan.python_keyed_pointers(tensors, others)
    assert got == want
    assert launch_plan.keyed_pointers(tensors, others) == want
    if want[0] is not None:
        assert hash(got[0]) == hash(want[0])


class OnDevice(Tensor):
    """A tensor on device (kind, index) whose get_device() is the index alone, as torch's."""

    def __init__(self, kind, index):
        super().__init__(0x1000, device=(kind, index))

    def get_device(self):
        return self.device[1]


def test_the_key_tells_device_types_apart(mod):
    """A CUDA tensor's plan must not launch for an XPU (or a privateuse backend's) tensor of the same
    index: the key holds the device, not get_device()."""
    for keyed in (launch_plan.keyed_pointers, launch_plan.python_keyed_pointers):
        assert keyed((OnDevice("cuda", 0),), ())[0] != keyed((OnDevice("xpu", 0),), ())[0]
        assert keyed((OnDevice("cuda", 0),), ())[0] == keyed((OnDevice("cuda", 0),), ())[0]
    torch = pytest.importorskip("torch")
    cpu, meta = torch.empty(4), torch.empty(4, device="meta")
    assert cpu.get_device() == meta.get_device()
    assert launch_plan.keyed_pointers((cpu,), ())[0] != launch_plan.keyed_pointers((meta,), ())[0]
    assert mod.keyed_pointers((cpu,), (), False, "") == launch_plan.python_keyed_pointers((cpu,), ())
    assert mod.keyed_pointers((cpu,), (), False, "")[0] != mod.keyed_pointers((meta,), (), False, "")[0]


# ---------------------------------------------------------------------------------------------
# The plan key through torch's C++ API (torchkey.cpp), where torch is installed

def torch_key_calls(torch):
    """Calls' tensor arguments that differ in each thing the key holds, and pairs that do not differ."""
    base = torch.zeros(64, dtype=torch.float32)
    m = torch.zeros(4, 8)
    calls = {
        "tensors and absent ones": (m, None, base),
        "the same kind of call, other tensors": (torch.ones(4, 8), None, torch.ones(64)),
        "absent elsewhere": (None, m, base),
        "shape": (m.view(8, 4), None, base),
        "strides": (m.t().contiguous().t(), None, base),
        "dtype": (m.to(torch.bfloat16), None, base),
        "device type, same get_device()": (torch.zeros(0, 8, device="meta"), None, base),  # null pointers both
        "alignment": (m, None, base[1:61]),
        "alignment: 16 bytes on": (m, None, base[4:64]),
        "ndim": (m.view(4, 8, 1), None, base),
        "zero-sized": (torch.zeros(0, 8), None, base),
        "zero-dimensional": (torch.zeros(()), None, base),
        "one tensor": (m,),
        "none at all": (),
        "a negative view (no key)": (torch._neg_view(m), None, base),
        "a zero tensor: a null pointer with elements (no key)": (torch._efficientzerotensor(4, 8), None, base),
    }
    return calls


def torch_keys_agree(torch, keyed):
    """Whether keyed (launch_plan.keyed_pointers or a mutant's) gives two calls equal keys exactly when
    the Python key does, and the same pointers; the mismatches when not."""
    calls = torch_key_calls(torch)
    got = {name: keyed(t, ("nhd",)) for name, t in calls.items()}
    want = {name: launch_plan.python_keyed_pointers(t, ("nhd",)) for name, t in calls.items()}
    bad = [name for name in calls if got[name][1] != want[name][1]]
    for a in calls:
        for b in calls:
            if (got[a][0] == got[b][0]) != (want[a][0] == want[b][0]):
                bad.append((a, b))
    return bad


def test_torch_key_agrees_with_the_python_key(mod):
    torch = pytest.importorskip("torch")
    assert fast_launch.torch_key_module() is not None, fast_launch.status()
    assert type(launch_plan.keyed_pointers((torch.zeros(2),), ())[0][0]) is bytes  # torchkey.cpp's key
    assert torch_keys_agree(torch, launch_plan.keyed_pointers) == []
    # what torchkey.cpp leaves to fastlaunch.c, and what neither describes
    param = torch.nn.Parameter(torch.zeros(4, 8))
    for tensors in ((param, None), [torch.zeros(2)], (torch.zeros(2), "x")):
        assert launch_plan.keyed_pointers(tensors, ()) == launch_plan.python_keyed_pointers(tensors, ())
    sparse = torch.zeros(4, 4).to_sparse()
    assert launch_plan.keyed_pointers((sparse,), ()) == (None, None) == launch_plan.python_keyed_pointers((sparse,), ())


TORCH_KEY_MUTANTS = {
    "no strides": "words.insert(words.end(), strides.begin(), strides.end());",
    "no alignment": "words.push_back(static_cast<int64_t>(ptr & 15));",
    "no device type": "words.push_back(static_cast<int64_t>(t.device().type()));",
    "no dtype": "words.push_back(static_cast<int64_t>(t.scalar_type()));",
    "no mark for an absent tensor": "        words.push_back(0);\n",
    "negative views and null pointers keyed": "      if (t.is_neg() || (ptrs[i] == 0 && t.numel() > 0)) return none_pair();\n",
}


@pytest.mark.parametrize("name", TORCH_KEY_MUTANTS)
def test_mutants_of_torchkey_cpp_are_caught(name, mod):
    torch = pytest.importorskip("torch")
    source = fast_launch.TORCH_KEY_SOURCE.read_text()
    find = TORCH_KEY_MUTANTS[name]
    assert source.count(find) == 1, find
    mutant = fast_launch.build_torch_key(source.replace(find, ""))

    def keyed(tensors, others):
        got = mutant.keyed_pointers(tensors, others, False, "")
        return mod.keyed_pointers(tensors, others, False, "") if got is NotImplemented else got

    assert torch_keys_agree(torch, keyed), f"mutant not caught: {name}"


def test_no_key_for_tensors_no_plan_may_take(mod):
    """A negative-bit view (validation refuses it) and a null pointer with elements (a functionalized or
    zero tensor) get no key, so no plan; an empty tensor's null pointer is a pointer like another."""
    for keyed in (lambda t: mod.keyed_pointers(t, (), False, ""), lambda t: launch_plan.python_keyed_pointers(t, ())):
        assert keyed((Tensor(0x1000), Negative(0x2000))) == (None, None)
        assert keyed((Tensor(0),)) == (None, None)
        assert keyed((Tensor(0, shape=(0, 8)),))[0] is not None


def test_c_key_holds_tritons_flags(mod, monkeypatch, c_key):
    from triton import knobs
    t = (Tensor(0x1000),)
    plain = launch_plan.keyed_pointers(t, ())[0]
    monkeypatch.setattr(knobs.runtime, "debug", True)
    assert launch_plan.keyed_pointers(t, ())[0] != plain
    assert launch_plan.keyed_pointers(t, ())[0] == launch_plan.python_keyed_pointers(t, ())[0]


def test_c_key_lets_an_interrupt_through(mod):
    with pytest.raises(KeyboardInterrupt):
        mod.keyed_pointers((Raising(KeyboardInterrupt()),), (), False, "")


# ---------------------------------------------------------------------------------------------
# Packing

NUMPY = {"i1": np.int8, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u1": np.uint8,
         "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "fp16": np.float16,
         "fp32": np.float32, "fp64": np.float64}


def numpy_cell(ty, value):
    return np.array([value], dtype=NUMPY[ty]).tobytes().ljust(8, b"\0")


@pytest.mark.parametrize("ty,value", [("i32", -5), ("i32", 2**31 - 1), ("i64", -(2**40)), ("u64", 2**64 - 1),
                                      ("u32", 7), ("i1", True), ("i16", -3), ("u8", 200), ("fp32", 0.1),
                                      ("fp32", 3), ("fp16", 1.5), ("fp64", 1 / 3)])
def test_scalars_are_packed_as_numpy_encodes_them(ty, value):
    template, slots = fast_launch.pack([ty], [value], lambda a: False)
    assert slots == ()
    assert template == numpy_cell(ty, value) + bytes(16)  # then the two scratch pointers, null


def test_bf16_is_the_fp32_upper_half_as_tritons_launcher_packs_it():
    for value in (1.5, -2.0, 1 / 3):
        bits = int(np.array([value], np.float32).view(np.uint32)[0]) >> 16
        assert fast_launch.pack(["bf16"], [value], lambda a: False)[0][:8] == bits.to_bytes(2, "little") + bytes(6)


def test_pointers_become_slots_and_constexprs_no_cell():
    slot = launch_plan.Slot(4)
    template, slots = fast_launch.pack(["*bf16", "constexpr", "i32", "*i64"], [slot, 128, 9, launch_plan.Slot(0)],
                                       lambda a: type(a) is launch_plan.Slot)
    assert slots == ((0, 4), (2, 0))
    assert template == bytes(8) + numpy_cell("i32", 9) + bytes(8) + bytes(16)


def test_int8_is_packed_as_tritons_launcher_parses_it():
    # PyArg "b": 0 to 255 into an int8_t; Triton refuses a negative value, so the fast path leaves it to Triton
    assert fast_launch.pack(["i8"], [200], lambda a: False)[0][:8] == bytes([200]) + bytes(7)
    assert fast_launch.pack(["i1"], [True], lambda a: False)[0][:8] == bytes([1]) + bytes(7)
    assert fast_launch.pack(["i8"], [-1], lambda a: False) is None


@pytest.mark.parametrize("types,bound", [
    (["i32"], [2**31]),            # out of range
    (["i32"], [1.5]),              # a float for an int
    (["fp32"], ["x"]),             # not a scalar
    (["*bf16"], [0x1000]),         # a pointer that is not a slot
    ([("i32", "i32")], [(1, 2)]),  # a tuple parameter
    (["nvTmaDesc"], [object()]),   # a tensor descriptor
    (["i32", "i32"], [1]),         # lengths differ
])
def test_what_pack_does_not_describe_is_left_to_triton(types, bound):
    assert fast_launch.pack(types, bound, lambda a: False) is None


# ---------------------------------------------------------------------------------------------
# Plans of the real kernels (Triton's JIT with a fake driver)

def expected_cells(signature, launched):
    """The cells Triton 3.6's launcher would pass for JITFunction.run's arguments `launched` (every
    argument in parameter order): each non-constexpr one as its type (a tensor: its data_ptr()), encoded
    by numpy, then the two null scratch pointers."""
    out = b""
    for ty, arg in zip(signature.values(), launched):
        if ty == "constexpr":
            continue
        if ty.startswith("*"):
            out += np.array([arg.data_ptr()], np.uint64).tobytes()
        else:
            out += numpy_cell(ty, arg)
    return out + bytes(16)


def kernel_plan(kernel, variant, scale_kind="none", cache_dtype="bf16"):
    """(LaunchPlan of a first call, its compiled kernel, a later call's params) of the real `kernel`."""
    launcher = DirectLauncher(kernel)
    first = params(scale_kind=scale_kind, cache_dtype=cache_dtype)
    grid, args, constexprs, options = launch_args(first, variant)
    compiled = compiled_like_triton(launcher.launch(grid, args, constexprs, options))
    plan = kvfuzz_triton.api.kv_append_plan(first, compiled, 0, variant=variant, fp8_software=False,
                                            launcher=launcher)
    return plan, compiled, params(ptr=0x490000, scale_kind=scale_kind, cache_dtype=cache_dtype)


def cells_match(kernel, variant, scale_kind="none", cache_dtype="bf16"):
    """Whether the fast plan of a call passes the cells Triton's launch of a later call would."""
    plan, compiled, later = kernel_plan(kernel, variant, scale_kind, cache_dtype)
    launched = jit_launch(kernel, later, variant)[9:]
    return plan.fast is not None and plan.fast.cells(pointer_args(later)) == expected_cells(compiled.signature,
                                                                                             launched)


@pytest.mark.skipif(GPU, reason="CPU test with a fake driver")
@pytest.mark.parametrize("scale_kind,cache_dtype", [("none", "bf16"), ("per_tensor", "fp8_e4m3"),
                                                    ("per_token_head", "fp8_e4m3")])
@pytest.mark.parametrize("variant", ["row", "token"])
def test_a_kernels_plan_passes_the_cells_of_tritons_launch(request, variant, scale_kind, cache_dtype, mod):
    kernel, made = request.getfixturevalue("jit_row" if variant == "row" else "jit")
    assert cells_match(kernel, variant, scale_kind, cache_dtype)
    plan, compiled, later = kernel_plan(kernel, variant, scale_kind, cache_dtype)

    # LaunchPlan.launch: through the fast plan, unless a launch hook wants to see the launch
    seen = []
    plan.fast = SimpleNamespace(launch=lambda pointers, stream: seen.append((pointers, stream)))
    runs = len(compiled.runs)
    plan.launch(pointer_args(later))
    assert seen == [(pointer_args(later), 0x5EED)] and len(compiled.runs) == runs
    from triton import knobs
    previous = knobs.runtime.launch_enter_hook
    knobs.runtime.launch_enter_hook = lambda meta: None
    try:
        plan.launch(pointer_args(later))
    finally:
        knobs.runtime.launch_enter_hook = previous
    assert len(seen) == 1 and len(compiled.runs) == runs + 1
    fast_launch.set_fast_launch(False)
    plan.launch(pointer_args(later))
    assert len(seen) == 1 and len(compiled.runs) == runs + 2


@pytest.mark.skipif(GPU, reason="CPU test with a fake driver")
@pytest.mark.parametrize("grid", [(2**31, 1), (-1,), (4, 1, 1, 1), ()])
def test_a_grid_tritons_launcher_refuses_keeps_it(jit_row, grid, mod):  # noqa: F811
    kernel, _ = jit_row
    plan, compiled, _ = kernel_plan(kernel, "row")
    assert plan.fast is not None
    assert fast_launch.plan_for(compiled, grid, 0, plan.arguments([Slot(i) for i in range(12)]),
                                lambda a: type(a) is Slot) is None


@pytest.mark.skipif(GPU, reason="CPU test with a fake driver")
@pytest.mark.parametrize("meta", [dict(num_ctas=2), dict(global_scratch_size=64), dict(profile_scratch_size=8),
                                  dict(launch_cooperative_grid=True), dict(launch_pdl=True)])
def test_kernels_it_does_not_describe_keep_tritons_launcher(jit_row, meta, mod):  # noqa: F811
    kernel, _ = jit_row
    launcher = DirectLauncher(kernel)
    first = params()
    grid, args, constexprs, options = launch_args(first, "row")
    compiled = compiled_like_triton(launcher.launch(grid, args, constexprs, options), **meta)
    plan = kvfuzz_triton.api.kv_append_plan(first, compiled, 0, variant="row", fp8_software=False, launcher=launcher)
    assert plan is not None and plan.fast is None
    compiled.metadata = fake_meta()
    fast_launch.set_fast_launch(False)
    off = kvfuzz_triton.api.kv_append_plan(first, compiled, 0, variant="row", fp8_software=False, launcher=launcher)
    assert off.fast is None


# ---------------------------------------------------------------------------------------------
# Plan's own checks

@pytest.mark.parametrize("kw,match", [
    (dict(template=bytes(8 * 257)), "at most 256"),
    (dict(template=bytes(12)), "8-byte cells"),
    (dict(slots=((3, 0),)), "outside the 3 cells"),
    (dict(slots=((0, -1),)), "outside"),
    (dict(num_warps=0), "num_warps"),
])
def test_plan_refuses_bad_arguments(mod, kw, match):
    args = dict(function=1, device=0, grid=(1, 1, 1), num_warps=4, shared=0, template=bytes(24), slots=((0, 0),))
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        mod.Plan(**args)


def test_plan_refuses_a_grid_tritons_launcher_would(mod):
    with pytest.raises(ValueError, match="grid sizes"):
        mod.Plan(function=1, device=0, grid=(2**31, 1, 1), num_warps=4, shared=0, template=bytes(16), slots=())
    with pytest.raises(ValueError, match="grid sizes"):
        mod.Plan(function=1, device=0, grid=(2**32 + 3, 1, 1), num_warps=4, shared=0, template=bytes(16), slots=())
    with pytest.raises(ValueError, match="grid sizes"):
        mod.Plan(function=1, device=0, grid=(-1, 1, 1), num_warps=4, shared=0, template=bytes(16), slots=())


def test_a_failed_init_keeps_the_plan(mod):
    plan = mod.Plan(function=1, device=0, grid=(1, 1, 1), num_warps=4, shared=0,
                    template=struct.pack("<qq", 5, 0), slots=((1, 0),))
    with pytest.raises(ValueError):
        plan.__init__(function=1, device=0, grid=(1, 1, 1), num_warps=4, shared=0, template=bytes(8),
                      slots=((0, 0), (0, 1)))
    assert plan.cells([9]) == struct.pack("<qq", 5, 9)


def test_plan_cells_and_their_errors(mod):
    plan = mod.Plan(function=1, device=0, grid=(2, 1, 1), num_warps=4, shared=0,
                    template=struct.pack("<qqq", 7, 0, 9), slots=((1, 2),))
    assert plan.cells([None, None, 0xDEADBEEF]) == struct.pack("<qQq", 7, 0xDEADBEEF, 9)
    with pytest.raises(IndexError):
        plan.cells([1])
    with pytest.raises(TypeError):
        plan.cells([None, None, None])
    with pytest.raises(TypeError):
        plan.cells("abc")


def driver_present():
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


@pytest.mark.skipif(driver_present(), reason="a CUDA driver is present: launch() would launch")
def test_launch_without_a_driver_names_it(mod):
    plan = mod.Plan(function=1, device=0, grid=(1, 1, 1), num_warps=4, shared=0, template=bytes(16), slots=())
    for _ in range(2):  # the second call says it again
        with pytest.raises(RuntimeError, match="cannot open libcuda.so.1"):
            plan.launch([], 0)


# ---------------------------------------------------------------------------------------------
# The launch itself, on a fake CUDA driver (fake_libcuda.c, in a process of its own:
# fake_driver_launch.py): what cuLaunchKernelEx and the context functions are given.

HERE = pathlib.Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def fake_libcuda(tmp_path_factory):
    return str(build_fake_libcuda(tmp_path_factory.mktemp("fake_driver")))


def fake_driver_launches(lib, source=None):
    """What fake_driver_launch.py's launches gave the fake driver (its JSON), with fastlaunch.c or the
    source file `source` built."""
    args = [sys.executable, str(HERE / "fake_driver_launch.py"), lib] + ([str(source)] if source else [])
    package_root = str(pathlib.Path(kvfuzz_triton.__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (package_root, os.environ.get("PYTHONPATH")))))
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def launch_mismatches(got):
    """Each way the recorded launches differ from Triton 3.6's launch of the same plan (an empty list:
    none). The plan: function 0xF00D on device 3, grid (5, 2, 1), 4 warps, 1,024 bytes of shared memory,
    cells (7, pointer 0, -9, pointer 1)."""
    want = {
        # no current context: device 3's primary context retained and made current, then the launch
        "first": dict(launches=1, retains=1, ordinal=3, current=0x1003, function=0xF00D, stream=0x5EED,
                      grid=[5, 2, 1], block=[128, 1, 1], shared=1024, attrs=0,
                      params=[7, 0xAAA0, 2**64 - 9, 0xBBB0], gil_held=0, extra_null=1),
        # the context is current now: no second retain; a tuple of pointers and another stream
        "second": dict(launches=2, retains=1, current=0x1003, stream=0x5EEE, params=[7, 0xCCC0, 2**64 - 9, 0xDDD0]),
        # a context the caller made current stays; one warp is 32 threads
        "current_kept": dict(launches=1, retains=0, current=0x77, grid=[1, 1, 7], block=[32, 1, 1], shared=0,
                             stream=0),
        "empty_grid": dict(launches=0),  # as Triton's launcher: a grid with a zero launches nothing
        "after_errors": dict(launches=0, retains=0),
    }
    out = []
    if got["cells"] != want["first"]["params"]:
        out.append(f"cells {got['cells']}")
    for name, fields in want.items():
        out += [f"{name}.{k}: {got[name][k]!r}, expected {v!r}" for k, v in fields.items() if got[name][k] != v]
    if got["launch_error"] != "kvfuzz_triton fast launcher: cuLaunchKernelEx failed: fake: an illegal memory " \
                              "access (CUresult 700)":
        out.append(f"launch error: {got['launch_error']!r}")
    if got["context_error"] != "kvfuzz_triton fast launcher: cuCtxGetCurrent failed: fake: some error (CUresult 201)":
        out.append(f"context error: {got['context_error']!r}")
    return out


@pytest.mark.skipif(GPU, reason="CPU test with a fake driver")
def test_a_launch_gives_the_driver_what_tritons_launcher_would(fake_libcuda, mod):
    assert launch_mismatches(fake_driver_launches(fake_libcuda)) == []


# ---------------------------------------------------------------------------------------------
# The checks above catch a broken fastlaunch.c: each mutant is built and must fail one of them.

MUTANTS = {
    "a slot's pointer lands one cell late": ("cells[self->slot_cell[i]] = ptr;", "cells[self->slot_cell[i] + 1] = ptr;"),
    "the template is not copied": ("memcpy(cells, self->cells, (size_t)self->ncells * 8);",
                                   "memset(cells, 0, (size_t)self->ncells * 8);"),
    "the key drops the dtype": ("out = PyTuple_Pack(6, (PyObject *)Py_TYPE(t), shape, stride, dtype, device, low);",
                                "out = PyTuple_Pack(6, (PyObject *)Py_TYPE(t), shape, stride, shape, device, low);"),
    "the key ignores the alignment": ("if (!(low = PyNumber_And(ptr, fifteen))) goto done;",
                                      "if (!(low = PyNumber_And(fifteen, fifteen))) goto done;"),
    "the key holds get_device()": ('!(str_device = PyUnicode_InternFromString("device"))',
                                   '!(str_device = PyUnicode_InternFromString("get_device"))'),
    "negative views and null pointers keyed": ("  if (refuse != 0) {", "  if (refuse < 0) {"),
}


def mutant_source(*edits):
    """fastlaunch.c with each (find, replace) of `edits` applied (each find occurs once)."""
    source = fast_launch.SOURCE.read_text()
    for find, replace in edits:
        assert source.count(find) == 1, find
        source = source.replace(find, replace)
    return source


def mutant_module(find, replace):
    from triton.backends.nvidia.driver import include_dirs
    from triton.runtime.build import compile_module_from_src
    return compile_module_from_src(mutant_source((find, replace)), "kvfuzz_fastlaunch", include_dirs=include_dirs)


def keys_match():
    return all(launch_plan.keyed_pointers(t, ("nhd",)) == launch_plan.python_keyed_pointers(t, ("nhd",))
               for t in KEY_CASES.values()) and \
        launch_plan.keyed_pointers((Tensor(0x1000, "int8"),), ()) != launch_plan.keyed_pointers((Tensor(0x1000),), ()) and \
        launch_plan.keyed_pointers((OnDevice("cuda", 0),), ()) != launch_plan.keyed_pointers((OnDevice("xpu", 0),), ())


@pytest.mark.skipif(GPU, reason="CPU test with a fake driver")
@pytest.mark.parametrize("name", MUTANTS)
def test_mutants_of_fastlaunch_c_are_caught(name, jit_row, monkeypatch, mod, c_key):  # noqa: F811
    kernel, _ = jit_row
    assert keys_match() and cells_match(kernel, "row")  # the built module passes
    monkeypatch.setattr(fast_launch, "_module", mutant_module(*MUTANTS[name]))
    assert not (keys_match() and cells_match(kernel, "row")), f"mutant not caught: {name}"


# Mutants of the launch, each caught by the fake driver's record (launch_mismatches).
LAUNCH_MUTANTS = {
    "a block of num_warps threads": [("self->block = 32u * (unsigned)num_warps;", "self->block = (unsigned)num_warps;")],
    "the default stream": [("config.hStream = (CUstream)(uintptr_t)stream;", "config.hStream = NULL;")],
    "no dynamic shared memory": [("config.sharedMemBytes = self->shared;", "config.sharedMemBytes = 0;")],
    "device 0's primary context": [("status = cu.device_get(&dev, self->device);", "status = cu.device_get(&dev, 0);")],
    "a primary context every launch": [("if (status == CUDA_SUCCESS && !ctx) {", "if (status == CUDA_SUCCESS) {")],
    "every parameter the first cell": [("params[i] = &cells[i];", "params[i] = &cells[0];")],
    "the GIL held": [("Py_BEGIN_ALLOW_THREADS;", "{"), ("Py_END_ALLOW_THREADS;", "}")],
    "a launch error ignored": [("if (cuda_failed(status, what)) return NULL;", "(void)what;")],
}


@pytest.mark.skipif(GPU, reason="CPU test with a fake driver")
@pytest.mark.parametrize("name", LAUNCH_MUTANTS)
def test_mutants_of_the_launch_are_caught(name, fake_libcuda, tmp_path):
    source = tmp_path / "fastlaunch.c"
    source.write_text(mutant_source(*LAUNCH_MUTANTS[name]))
    assert launch_mismatches(fake_driver_launches(fake_libcuda, source)), f"mutant not caught: {name}"
