#!/usr/bin/env python3
"""The host work of a kv_append plan hit through the fast launcher, measured on a machine without a GPU:
real torch tensors (CPU ones), the real plan of the real row kernel, and a fake CUDA driver
(tests/triton/fake_libcuda.c) in place of libcuda.so.1. What it leaves out is the driver's own
cuLaunchKernelEx and torch's current-device and current-stream reads (stubbed): a GPU host adds those.
This is an estimate of the Python and C share of bench/api_overhead.py's `fast` row, on this host's
CPU, not a GPU figure (that is api_overhead.py's, run on a GPU host).

    PYTHON bench/api_host_cpu.py [--calls 20000] [--repeats 9] [--json FILE]

PYTHON needs torch (a CPU build is enough), triton 3.6.0 and pytest (the launcher tests' fakes build
the plan), and a C compiler. Before timing, one call is checked: the fake driver launched once, with the
plan's cells and the call's pointers. Exit status 0, 1 when that check fails, 2 bad arguments.
"""
import argparse
import ctypes
import json
import os
import pathlib
import platform
import statistics
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
H, D, BLOCK_SIZE, NUM_BLOCKS, TOKENS = 8, 128, 16, 64, 1
CASES = {"bf16-nhd": dict(scale_kind="none", cache_dtype="bf16"),
         "fp8-per-tensor": dict(scale_kind="per_tensor", cache_dtype="fp8_e4m3"),
         "fp8-per-token-head": dict(scale_kind="per_token_head", cache_dtype="fp8_e4m3")}


def fake_driver(directory):
    """The fake driver built and loaded as libcuda.so.1 (before fastlaunch.c opens it); None when this
    process has loaded a real libcuda.so.1 already (a host with a CUDA driver: torch or Triton opened it),
    which is then the one fastlaunch.c would open."""
    from launch_fakes import build_fake_libcuda
    fake = ctypes.CDLL(str(build_fake_libcuda(directory)), mode=ctypes.RTLD_GLOBAL)
    if ctypes.CDLL("libcuda.so.1")._handle != fake._handle:
        return None
    fake.fake_param.restype = ctypes.c_uint64
    return fake


def torch_call(torch, case):
    """(args, kwargs) of kv_append for `case` on CPU tensors: key and value slices of a fused [T, 3, H, D]
    projection, paged NHD caches, distinct slots."""
    qkv = torch.randn(TOKENS, 3, H, D).to(torch.bfloat16)
    nhd = (NUM_BLOCKS, BLOCK_SIZE, H, D)
    slots = torch.arange(TOKENS, dtype=torch.int64) * 3
    kw = dict(layout="nhd")
    if case == "bf16-nhd":
        kc, vc = torch.zeros(nhd, dtype=torch.bfloat16), torch.zeros(nhd, dtype=torch.bfloat16)
    else:
        kc, vc = torch.zeros(nhd, dtype=torch.uint8), torch.zeros(nhd, dtype=torch.uint8)
        kw.update(cache_dtype="fp8_e4m3", scale_kind=CASES[case]["scale_kind"])
        if case == "fp8-per-tensor":
            kw.update(k_scale=torch.tensor([0.05]), v_scale=torch.tensor([0.04]))
        else:
            kw.update(k_scale_cache=torch.zeros(nhd[:3]), v_scale_cache=torch.zeros(nhd[:3]))
    return (qkv[:, 1], qkv[:, 2], kc, vc, slots), kw


def cpu_model():
    """The CPU's model name (/proc/cpuinfo) and the cores this process may use."""
    try:
        names = [line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")]
    except OSError:
        names = []
    return f"{names[0] if names else platform.machine()}, {len(os.sched_getaffinity(0))} cores"


def time_host(fn, calls, repeats, warmup=200):
    """[median, least, most] host µs per call over `repeats` x `calls` calls (api_overhead.per_call_us)."""
    from api_overhead import per_call_us
    per_call = per_call_us(fn, calls, repeats, warmup)
    return [statistics.median(per_call), min(per_call), max(per_call)]


def measure(torch, fake, kernel, case, calls, repeats):
    """{row: [median, least, most] µs per call} for `case`, or None when the check fails. The plan is the one kv_append
    keeps on a GPU for this call: its parameters validated by kv_append's own validation, its kernel
    bound by Triton's binder (a compile that makes a CompiledKernel with the signature Triton gives)."""
    import kvfuzz_triton
    from kvfuzz_triton import api, fast_launch, launch_plan
    from kvfuzz_triton.direct_launch import DirectLauncher
    from launch_fakes import compiled_like_triton, launch_args
    args, kw = torch_call(torch, case)
    tensors = (args[0], args[1], args[2], args[3], args[4], None, kw.get("k_scale"), kw.get("v_scale"),
               kw.get("k_scale_cache"), kw.get("v_scale_cache"), None, None)
    others = (kw["layout"], kw.get("scale_kind"), kw.get("cache_dtype"), None, None, 0, 1, 1)
    interpreting, api.interpreting = api.interpreting, lambda: True  # validation takes CPU tensors then
    try:
        p, _ = api._checked_params(*tensors[:5], kw["layout"], None, kw.get("scale_kind"), *tensors[6:11],
                                   kw.get("cache_dtype"), None, None, 0, 1, 1)
    finally:
        api.interpreting = interpreting
    launcher = DirectLauncher(kernel)
    compiled = compiled_like_triton(launcher.launch(*launch_args(p, "row")))
    plan = api.kv_append_plan(p, compiled, 0, variant="row", fp8_software=False, launcher=launcher)
    assert plan is not None and plan.fast is not None, "the row kernel's plan has no fast launch"
    key, pointers = api._plan_key(tensors, *others)
    api.PLANS.clear()
    api.PLANS.put(key, plan)

    # The check: one call is a plan hit launched through the fake driver with the plan's cells.
    ncells = len(plan.fast.cells(pointers)) // 8
    fake.fake_reset(min(ncells, 256))
    kvfuzz_triton.kv_append(*args, **kw)
    want = plan.fast.cells(pointers)
    got = b"".join(fake.fake_param(i).to_bytes(8, "little") for i in range(ncells))
    if fake.fake_launches() != 1 or got != want:
        return None

    call = lambda: kvfuzz_triton.kv_append(*args, **kw)  # noqa: E731
    def c_key(fn):
        """fn() with the key by fastlaunch.c (torchkey.cpp left out)."""
        torch_key_module, fast_launch.torch_key_module = fast_launch.torch_key_module, lambda: None
        try:
            return fn()
        finally:
            fast_launch.torch_key_module = torch_key_module

    api.PLANS.put(c_key(lambda: api._plan_key(tensors, *others)[0]), plan)  # the plan under that key as well

    py_key = lambda: launch_plan.python_keyed_pointers(tensors, others)  # noqa: E731
    rows = {"kv_append (plan hit, fast launcher)": time_host(call, calls, repeats),
            "kv_append, the key by fastlaunch.c (torchkey.cpp left out)": c_key(lambda: time_host(call, calls, repeats)),
            "plan key (keyed_pointers: torchkey.cpp)": time_host(lambda: api._plan_key(tensors, *others), calls,
                                                                  repeats),
            "plan key in C (fastlaunch.c)": c_key(lambda: time_host(lambda: api._plan_key(tensors, *others), calls,
                                                                    repeats)),
            "plan key in Python (python_keyed_pointers)": time_host(py_key, calls, repeats),
            "lookup": time_host(lambda: launch_plan.lookup(api.PLANS, key), calls, repeats),
            "LaunchPlan.launch": time_host(lambda: plan.launch(pointers), calls, repeats),
            "fastlaunch Plan.launch alone": time_host(lambda: plan.fast.launch(pointers, 0x5EED), calls, repeats)}
    present = [t for t in tensors if t is not None]
    for attr, read in (("data_ptr()", lambda t: t.data_ptr()), ("shape", lambda t: t.shape),
                       ("stride()", lambda t: t.stride()), ("dtype", lambda t: t.dtype),
                       ("device", lambda t: t.device)):
        rows[f"{attr} of the call's {len(present)} tensors, from Python"] = time_host(
            lambda: [read(t) for t in present], calls, repeats)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--json", type=pathlib.Path)
    a = ap.parse_args(argv)
    if a.calls < 1 or a.repeats < 1:
        ap.error("--calls and --repeats must be at least 1")
    try:
        import torch
    except ImportError:
        ap.error("needs torch (a CPU build is enough)")
    sys.path[:0] = [str(ROOT / "kernels/triton"), str(ROOT / "tests/triton")]
    import pytest
    from kvfuzz_triton import direct_launch, fast_launch
    from launch_fakes import jit_kernel
    mp = pytest.MonkeyPatch()
    with tempfile.TemporaryDirectory() as tmp:
        fake = fake_driver(tmp)
        if fake is None:
            print("api_host_cpu.py: this process loaded the real CUDA driver (libcuda.so.1) before the fake one, "
                  "so the fake cannot take its place; on a host with a GPU use bench/api_overhead.py, which times "
                  "the real launches", file=sys.stderr)
            return 2
        fast_launch.set_fast_launch(True)
        direct_launch.set_direct_launch_mode("1")
        kernel, _ = jit_kernel(mp, "kv_append_row_kernel")  # Triton's binder on the real kernel, compile faked
        from kvfuzz_triton import api
        mp.setattr(api.KV_APPEND, "supported", True)  # as on a GPU: compiled, not interpreted
        results = {}
        for case in CASES:
            rows = measure(torch, fake, kernel, case, a.calls, a.repeats)
            if rows is None:
                print(f"{case}: the plan hit did not launch the plan's cells through the fake driver")
                return 1
            results[case] = rows
    head = f"host {cpu_model()}, Python {platform.python_version()}, torch {torch.__version__}; " \
           f"{a.repeats} x {a.calls} calls, median µs per call (least-most repeat); {fast_launch.status()}"
    print(head)
    for case, rows in results.items():
        print(f"\n{case}, T = {TOKENS}:")
        for name, (us, least, most) in rows.items():
            print(f"  {us:7.2f}  ({least:.2f}-{most:.2f})  {name}")
    if a.json:
        a.json.write_text(json.dumps({"setup": head, "cases": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
