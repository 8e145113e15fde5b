"""kvfuzz_triton's own launcher for launch plans (issue 20: the torch API's host time per call).

A plan hit (launch_plan.py) used to end in Triton 3.6's launcher, CompiledKernel.run: a Python
__call__ that builds two closures and forwards ~60 arguments, then a generated C function that parses
each of them from its Python object (PyArg_ParseTuple) before cuLaunchKernelEx; ~9.5 µs of a bf16
kv_append's ~22 on an H200 host (reports/gpu/2026-12-04-h200-quant-plans). A plan's arguments other
than its pointers are fixed when it is made, so they are packed here once, as the bytes of the kernel's
parameters (8-byte cells, each value at its cell's start as Triton's launcher declares it: pack()),
and fastlaunch.c copies them, patches in the call's pointers and calls cuLaunchKernelEx with Triton's
launch configuration (32 x num_warps threads, the kernel's dynamic shared memory). The plan key
(launch_plan.keyed_pointers) is computed in C as well: through torch's C++ API (torchkey.cpp, built at
first use against the imported torch: torch_key_module()) for calls whose tensors are torch.Tensor,
by fastlaunch.c for the others and where torchkey.cpp cannot be built.

The module is built at first use with Triton's own builder (triton.runtime.build.compile_module_from_src,
which builds Triton's launchers: the system C compiler, Python's headers, the cuda.h Triton ships;
cached in Triton's cache directory). Where it cannot be built, or for a kernel it does not describe
(global or profile scratch memory, clusters, cooperative or PDL launches, tensor descriptors, tuple
arguments, a type not in pack()), or while a Triton launch hook is set (a profiler), plans launch
through Triton's launcher as before. status() says which is in use and why.

It is on by default; KVFUZZ_TRITON_FAST_LAUNCH=0 turns it off (read at import; set_fast_launch()
afterwards). On an H200 host it took kv_append's host time per call from 21.6-24.5 µs through
Triton's launcher to 9.9-10.5 (nvfp4 kv_append_quant 30.2-30.9 to 11.0-11.6), every plan hit checked
bit for bit against the full path, and the whole Triton suite passed on CUDA with it on and every hit
re-derived (KVFUZZ_TRITON_DIRECT_LAUNCH=check): reports/gpu/2026-12-05-h200-fast-launch. On the CPU its
tests check the plan key against the Python one, each cell against what Triton's launcher would pass
for the real kernels' signatures, and the launch itself on a fake CUDA driver.
"""
import hashlib
import os
import pathlib
import shutil
import struct
import subprocess
import sys
import sysconfig
import tempfile

FAST_LAUNCH_ENV = "KVFUZZ_TRITON_FAST_LAUNCH"
SOURCE = pathlib.Path(__file__).with_name("fastlaunch.c")
TORCH_KEY_SOURCE = pathlib.Path(__file__).with_name("torchkey.cpp")
MAX_CELLS = 256  # fastlaunch.c's kMaxCells

def enabled_from_environment():
    """KVFUZZ_TRITON_FAST_LAUNCH: "1" or unset on, "0" off; ValueError for anything else."""
    value = os.environ.get(FAST_LAUNCH_ENV, "1")
    if value not in ("0", "1"):
        raise ValueError(f'{FAST_LAUNCH_ENV}={value!r}: expected "1" (plans launch through fastlaunch.c, the default) '
                         f'or "0" (through Triton\'s launcher)')
    return value == "1"


_enabled = enabled_from_environment()
_module = None
_failure = None  # why the module could not be built, once tried
_torch_key = None
_torch_key_failure = None  # why torchkey.cpp could not be built, once tried


def set_fast_launch(enabled):
    """Turns the fast launcher on or off for plans made from now on and every later launch; returns the
    previous setting."""
    global _enabled
    previous, _enabled = _enabled, bool(enabled)
    return previous


def enabled():
    return _enabled


def module():
    """The built fastlaunch.c (kvfuzz_fastlaunch), or None when it cannot be built (status() says why)."""
    global _module, _failure
    if _module is None and _failure is None:
        try:
            from triton.backends.nvidia.driver import include_dirs
            from triton.runtime.build import compile_module_from_src
            _module = compile_module_from_src(SOURCE.read_text(), "kvfuzz_fastlaunch", include_dirs=include_dirs)
        except Exception as e:  # noqa: BLE001 - no compiler, no headers: Triton's launcher instead
            _failure = f"{type(e).__name__}: {e}"
    return _module


def torch_key_module():
    """The built torchkey.cpp (kvfuzz_torchkey: the plan key through torch's C++ API), or None: when
    the process has not imported torch (it is not imported for this), or it cannot be built (status()
    says why). Built once per torch, Python and source, with the system C++ compiler against the
    imported torch's headers and libraries, and cached in Triton's cache directory (~7 s on 2 cores)."""
    global _torch_key, _torch_key_failure
    if _torch_key is None and _torch_key_failure is None and "torch" in sys.modules:
        try:
            _torch_key = build_torch_key(TORCH_KEY_SOURCE.read_text())
        except Exception as e:  # noqa: BLE001 - no C++ compiler, no headers: the key in C instead
            _torch_key_failure = f"{type(e).__name__}: {e}"
    return _torch_key


def build_torch_key(source):
    """Builds and loads `source` (torchkey.cpp or a test's mutant of it) against the imported torch. The
    cache entry is keyed by everything the module depends on: the source, the compile command, the
    compiler's version, torch's version and place, Python's version."""
    import importlib.util
    import shlex

    import torch
    from triton.runtime.cache import get_cache_manager
    name = "kvfuzz_torchkey"
    torch_dir = pathlib.Path(torch.__file__).parent
    lib = torch_dir / "lib"
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    cxx = shlex.split(os.environ.get("CXX") or "") or [shutil.which("g++") or shutil.which("clang++") or "c++"]
    flags = ["-O2", "-shared", "-fPIC", "-std=c++17", f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
             f"-I{torch_dir / 'include'}", f"-I{torch_dir / 'include/torch/csrc/api/include'}",
             f"-I{sysconfig.get_paths()['include']}", f"-L{lib}", f"-Wl,-rpath,{lib}", "-lc10", "-ltorch",
             "-ltorch_cpu", "-ltorch_python"]
    try:
        version = subprocess.run(cxx + ["--version"], capture_output=True, text=True, timeout=60).stdout
    except OSError as e:
        raise RuntimeError(f"no C++ compiler ({' '.join(cxx)}: {e}; set CXX)") from e
    ident = "\0".join([source, name, *cxx, version, *flags, torch.__version__, sys.version, suffix])
    cache = get_cache_manager(hashlib.sha256(ident.encode()).hexdigest())
    path = cache.get_file(name + suffix)
    if path is None:
        with tempfile.TemporaryDirectory() as tmp:
            src, so = pathlib.Path(tmp) / f"{name}.cpp", pathlib.Path(tmp) / f"{name}{suffix}"
            src.write_text(source)
            done = subprocess.run(cxx + [str(src), *flags, "-o", str(so)], capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(cxx)} failed: {done.stderr.strip()[-2000:]}")
            path = cache.put(so.read_bytes(), name + suffix, binary=True)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def status():
    """"fast launcher" (and how it computes the plan key) when plans launch through fastlaunch.c, else
    why they use Triton's launcher."""
    if not _enabled:
        return f"Triton's launcher (the fast launcher is off: {FAST_LAUNCH_ENV}=0 or set_fast_launch(False))"
    if module() is None:
        return f"Triton's launcher (fastlaunch.c could not be built: {_failure})"
    if torch_key_module() is not None:
        return "fast launcher (plan key through torch's C++ API)"
    why = _torch_key_failure or "torch is not imported"
    return f"fast launcher (plan key in C: torchkey.cpp unused: {why})"


# Per Triton 3.6 type of a scalar parameter: the struct format of its value (little-endian), as the
# launcher Triton generates declares it (triton/backends/nvidia/driver.py: ty_to_cpp, FLOAT_STORAGE_TYPE).
# i1 and i8 as Triton parses them (PyArg "b": 0 to 255, stored in an int8_t): a negative value, which
# Triton refuses, is left to Triton. Values outside a type's range are left to Triton too (it refuses
# the signed ones and wraps the unsigned ones).
_INT_FORMATS = {"i1": "<B", "i8": "<B", "i16": "<h", "i32": "<i", "i64": "<q",
                "u1": "<B", "u8": "<B", "u16": "<H", "u32": "<I", "u64": "<Q"}
_FLOAT_FORMATS = {"fp16": "<e", "fp32": "<f", "f32": "<f", "fp64": "<d"}


def _cell(ty, value):
    """The 8-byte cell of scalar parameter type `ty` holding `value`, or None when pack() does not
    describe it (the plan then uses Triton's launcher)."""
    if type(value) not in (int, bool, float):
        return None
    try:
        if ty in _INT_FORMATS:
            if type(value) is float:
                return None
            return struct.pack(_INT_FORMATS[ty], value).ljust(8, b"\0")
        if ty in _FLOAT_FORMATS:
            return struct.pack(_FLOAT_FORMATS[ty], value).ljust(8, b"\0")
        if ty == "bf16":  # Triton's pack_bf16: the fp32's upper half (truncated, not rounded)
            return struct.pack("<H", struct.unpack("<I", struct.pack("<f", value))[0] >> 16).ljust(8, b"\0")
    except (struct.error, OverflowError):
        return None
    return None


def pack(types, bound, is_slot):
    """(template, slots) of a launch: `types` the kernel's parameter types in order (Triton's signature
    values: "*bf16", "i32", "fp32", "constexpr", ...), `bound` its arguments in the same order,
    is_slot(arg) whether an argument is a pointer the call fills in (then arg.index is its source).
    template holds one 8-byte cell per parameter Triton passes to the kernel (constexprs dropped), then
    the two scratch pointers Triton 3.6 appends (0: no scratch); slots = ((cell, source), ...). None
    when an argument or type is not described."""
    cells, slots = [], []
    if len(types) != len(bound):
        return None
    for ty, arg in zip(types, bound):
        if not isinstance(ty, str):
            return None  # a tuple parameter
        if ty == "constexpr":
            continue
        if ty.startswith("*"):
            if not is_slot(arg):
                return None
            slots.append((len(cells), arg.index))
            cells.append(bytes(8))
            continue
        cell = _cell(ty, arg)
        if cell is None:
            return None
        cells.append(cell)
    cells += [bytes(8), bytes(8)]  # global_scratch, profile_scratch
    if len(cells) > MAX_CELLS:
        return None
    return b"".join(cells), tuple(slots)


def plan_for(compiled, grid, device, bound, is_slot):
    """A kvfuzz_fastlaunch.Plan launching CompiledKernel `compiled` on `grid` and CUDA device `device`
    with `bound` (every argument in parameter order, pointers as slots), or None where Triton's
    launcher must do it (the module docstring)."""
    if not _enabled:
        return None
    meta = getattr(compiled, "metadata", None)
    signature = getattr(getattr(compiled, "src", None), "signature", None)
    function = getattr(compiled, "function", None)
    if meta is None or not isinstance(signature, dict) or type(function) is not int:
        return None
    if (getattr(meta, "num_ctas", 1) != 1 or getattr(meta, "global_scratch_size", 0)
            or getattr(meta, "profile_scratch_size", 0) or getattr(meta, "launch_cooperative_grid", False)
            or getattr(meta, "launch_pdl", False) or getattr(meta, "tensordesc_meta", None)):
        return None
    packed = pack(list(signature.values()), bound, is_slot)
    mod = module()
    if packed is None or mod is None or not 1 <= len(grid) <= 3 or \
            not all(type(g) is int and 0 <= g <= 0x7FFFFFFF for g in grid):
        return None  # Triton's launcher takes the grid as C ints (and refuses what does not fit)
    grid = tuple(grid) + (1,) * (3 - len(grid))
    return mod.Plan(function, device, grid, meta.num_warps, meta.shared, packed[0], packed[1])
