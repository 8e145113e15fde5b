#!/usr/bin/env python3
"""Host time per call of kvfuzz_triton's torch API (issue 20: at most 15 µs): the cached launcher
against Triton's JIT path, verified bit for bit first.

    python3 bench/api_overhead.py --out DIR [--calls 500] [--repeats 9] [--tokens 1,16]
    python3 bench/api_overhead.py --list                 # the cases, no GPU needed

Paths (kernels/triton/kvfuzz_triton/direct_launch.py, launch_plan.py, fast_launch.py):
  fast    the default (KVFUZZ_TRITON_DIRECT_LAUNCH=1 and KVFUZZ_TRITON_FAST_LAUNCH=1): a kv_append or
          kv_append_quant call like an earlier one is launched from that call's plan (no validation, no
          JIT), the plan key computed and the kernel launched by fastlaunch.c (torchkey.cpp for the key);
  cached  the same through Triton's launcher (KVFUZZ_TRITON_FAST_LAUNCH=0);
  jit     mode "0" (KVFUZZ_TRITON_DIRECT_LAUNCH=0): validation and Triton's JIT dispatch every call (the API
          before issue 20).

Cases: kv_append with paged bf16 caches, NHD and HND; fp8 e4m3 caches (uint8 storage,
cache_dtype="fp8_e4m3") with a per-tensor scale and with per-token-head scales (NHD); and
kv_append_quant's nvfp4 (NHD); H 8, D 128, block_size 16, 64 blocks, T = --tokens, key and value
slices of a fused [T, 3, H, D] bf16 projection, distinct random slots with padding (-1).

For every case and T:
  1. verify, for the fast and the cached path: the jit path runs once on inputs A into caches poisoned
     with 0xA5 bytes; the path runs once on other tensors of the same kind (it validates, launches
     through the JIT and keeps its plan), then on inputs equal to A in new buffers poisoned the same
     way: that call is a plan hit (counted: no validation ran; on the fast path, its plan must have a
     fastlaunch.c launch). Every byte of every output (caches, scale caches) must equal the
     jit path's, and the slots' rows must have been written (not all poison). A case that fails is
     reported and not timed;
  2. time each path: 50 warm-up calls, then --repeats times --calls calls issued without
     synchronising (time.perf_counter around the calls, the GPU synchronised between repeats, garbage
     collection off during a repeat); host µs per call = the median repeat / calls.
Then a breakdown of the fast and cached paths at the first T, bf16 NHD: their parts timed alone the same way.

Writes DIR/api_overhead.json and DIR/api_overhead.md. Exit status: 0 every case verified, 1 a
verification failed, 2 bad arguments, 3 no CUDA device.
"""
import argparse
import gc
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
H, D, BLOCK_SIZE, NUM_BLOCKS = 8, 128, 16, 64
CASES = ("bf16-nhd", "bf16-hnd", "fp8-per-tensor", "fp8-per-token-head", "nvfp4")
# path name: (direct launch mode (set_direct_launch_mode), fast launcher on (set_fast_launch))
PATHS = {"fast": ("1", True), "cached": ("1", False), "jit": ("0", False)}
POISON = 0xA5
TARGET_US = 15.0


class Call:
    """One API call of a case on its own tensors: fn(*args, **kwargs); outputs: the tensors it writes."""

    def __init__(self, fn, args, kwargs, outputs):
        self.fn, self.args, self.kwargs, self.outputs = fn, args, kwargs, outputs

    def __call__(self):
        self.fn(*self.args, **self.kwargs)


def make_call(torch, kt, case, tokens, seed):
    """A call of `case` with T = tokens on new tensors: inputs and slots from `seed`, outputs poisoned."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    dev = "cuda"
    qkv = torch.randn(tokens, 3, H, D, generator=g, device=dev).to(torch.bfloat16)
    key, value = qkv[:, 1], qkv[:, 2]
    slots = torch.randperm(NUM_BLOCKS * BLOCK_SIZE, generator=g, device=dev)[:tokens]
    slots[1::4] = -1

    def poisoned(shape, dtype=torch.uint8):
        t = torch.empty(shape, dtype=dtype, device=dev)
        t.view(torch.uint8).fill_(POISON)
        return t

    nhd = (NUM_BLOCKS, BLOCK_SIZE, H, D)
    if case == "nvfp4":
        codes = poisoned((2,) + nhd[:3] + (D // 2,))  # K's and V's codes in one buffer, as vLLM keeps them
        scales = poisoned((2,) + nhd[:3] + (D // 16,))
        kw = dict(quant_format="nvfp4", layout="nhd", key_scales=scales[0], value_scales=scales[1],
                  k_scale=torch.tensor([1.0], device=dev), v_scale=torch.tensor([0.5], device=dev))
        return Call(kt.kv_append_quant, (key, value, codes[0], codes[1], slots), kw, [codes, scales])
    if case == "bf16-hnd":
        kc, vc = poisoned((NUM_BLOCKS, H, BLOCK_SIZE, D), torch.bfloat16), poisoned((NUM_BLOCKS, H, BLOCK_SIZE, D), torch.bfloat16)
        return Call(kt.kv_append, (key, value, kc, vc, slots), dict(layout="hnd"), [kc, vc])
    if case == "bf16-nhd":
        kc, vc = poisoned(nhd, torch.bfloat16), poisoned(nhd, torch.bfloat16)
        return Call(kt.kv_append, (key, value, kc, vc, slots), dict(layout="nhd"), [kc, vc])
    kc, vc = poisoned(nhd), poisoned(nhd)
    if case == "fp8-per-tensor":
        kw = dict(layout="nhd", cache_dtype="fp8_e4m3", scale_kind="per_tensor", k_scale=torch.tensor([0.05], device=dev),
                  v_scale=torch.tensor([0.04], device=dev))
        return Call(kt.kv_append, (key, value, kc, vc, slots), kw, [kc, vc])
    sk, sv = poisoned(nhd[:3], torch.float32), poisoned(nhd[:3], torch.float32)
    kw = dict(layout="nhd", cache_dtype="fp8_e4m3", scale_kind="per_token_head", k_scale_cache=sk, v_scale_cache=sv)
    return Call(kt.kv_append, (key, value, kc, vc, slots), kw, [kc, vc, sk, sv])


def set_path(path):
    from kvfuzz_triton.direct_launch import set_direct_launch_mode
    from kvfuzz_triton.fast_launch import set_fast_launch
    mode, fast = PATHS[path]
    set_direct_launch_mode(mode)
    set_fast_launch(fast)


def verify(torch, kt, case, tokens, path):
    """{"case", "tokens", "path", "ok", "plan_hit", "fast", "problems"}: the plan hit of `path` (fast or
    cached) against the jit path; fast: whether the plan launched through fastlaunch.c."""
    api = kt.api
    set_path("jit")
    jit = make_call(torch, kt, case, tokens, seed=1)
    jit()
    set_path(path)
    module = kt.quant_api if case == "nvfp4" else api  # kv_append_quant's validation and plans, or kv_append's
    module.PLANS.clear()
    make_call(torch, kt, case, tokens, seed=2)()  # validates, launches, keeps the plan
    fast = all(plan.fast is not None for plan in module.PLANS.values()) and PATHS[path][1]
    cached = make_call(torch, kt, case, tokens, seed=1)
    validations = []
    real = module._checked_params
    module._checked_params = lambda *a, **k: validations.append(1) or real(*a, **k)
    try:
        cached()
    finally:
        module._checked_params = real
    torch.cuda.synchronize()
    problems = []
    for i, (a, b) in enumerate(zip(cached.outputs, jit.outputs)):
        a, b = a.contiguous().view(-1).view(torch.uint8), b.contiguous().view(-1).view(torch.uint8)
        differ = int((a != b).sum())
        if differ:
            problems.append(f"output {i}: {differ} of {a.numel()} bytes differ")
        if i == 0 and bool((b == POISON).all()):
            problems.append("output 0 is all poison: nothing was written")
    plan_hit = not validations
    if plan_hit is False:
        problems.append(f"the {path} path's second call was validated again: not a plan hit")
    if path == "fast" and not fast:
        problems.append(f"the plan does not launch through fastlaunch.c: {kt.fast_launch.status()}")
    return {"case": case, "tokens": tokens, "path": path, "ok": not problems, "plan_hit": plan_hit, "fast": fast,
            "problems": problems}


def per_call_us(fn, calls, repeats, warmup, between=lambda: None):
    """Host µs per call of each of `repeats` runs of `calls` calls of fn (after `warmup` calls; garbage
    collection off during a run); between() after the warm-up and after each run (api_host_cpu.py uses
    this too)."""
    for _ in range(warmup):
        fn()
    between()
    per_call = []
    for _ in range(repeats):
        gc.disable()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        gc.enable()
        per_call.append((t1 - t0) / calls * 1e6)
        between()
    return per_call


def time_host(torch, fn, calls, repeats, warmup=50):
    """(median, every repeat) of host µs per call over `repeats` x `calls` un-synchronised calls, the GPU
    synchronised between repeats."""
    per_call = per_call_us(fn, calls, repeats, warmup, torch.cuda.synchronize)
    return statistics.median(per_call), per_call


def breakdown(torch, kt, tokens, calls, repeats):
    """[{"part", "host_us"}]: the fast and cached paths' parts at bf16 NHD, each timed alone."""
    from kvfuzz_triton import direct_launch, fast_launch, launch_plan
    api = kt.api
    set_path("fast")
    call = make_call(torch, kt, "bf16-nhd", tokens, seed=3)
    api.PLANS.clear()
    call()
    plan = api.PLANS.values()[0]
    key, value, kc, vc, slots = call.args
    tensors = (key, value, kc, vc, slots) + (None,) * 7
    pointers = [None if t is None else t.data_ptr() for t in tensors]
    bound = plan.arguments(pointers)  # what a plan hit launches: pointers as integers
    as_tensors = plan.arguments(tensors)
    stream = direct_launch.current_stream(plan.device)
    p, _ = api._checked_params(key, value, kc, vc, slots, "nhd", None, None, None, None, None, None, None, None,
                               None, None, 0, 1, 1)
    dev = key.device

    def device_context():
        with torch.cuda.device(dev):
            pass

    parts = [
        ("kv_append, fast (plan hit, fastlaunch.c)", "1", call),
        ("kv_append, cached (plan hit, Triton's launcher)", "triton", call),
        ("kv_append, jit", "0", call),
        ("launch(p): prebuilt KvAppendParams, direct launch", "1", lambda: kt.launch(p)),
        ("launch(p): prebuilt KvAppendParams, jit", "0", lambda: kt.launch(p)),
        ("validation alone (api._checked_params)", "1", lambda: api._checked_params(
            key, value, kc, vc, slots, "nhd", None, None, None, None, None, None, None, None, None, None, 0, 1, 1)),
        ("plan key + pointers + lookup (keyed_pointers, PLANS.get)", "1",
         lambda: api.PLANS.get(api._plan_key(tensors, "nhd", None, None, None, None, 0, 1, 1)[0])),
        ("keyed_pointers (torchkey.cpp, or fastlaunch.c where it is not built)", "1",
         lambda: launch_plan.keyed_pointers(tensors, ())),
        ("keyed_pointers in C (fastlaunch.c)", "1",
         lambda: fast_launch.module().keyed_pointers(tensors, (), False, "")),
        ("keyed_pointers in Python", "1", lambda: launch_plan.python_keyed_pointers(tensors, ())),
        ("LaunchPlan.launch, fast launcher (device, stream, launch)", "1", lambda: plan.launch(pointers)),
        ("LaunchPlan.launch, Triton's launcher (arguments, device, stream, launch)", "triton",
         lambda: plan.launch(pointers)),
        ("fastlaunch.c Plan.launch alone (cuLaunchKernelEx)", "1", lambda: plan.fast.launch(pointers, stream)),
        # what reading each attribute of one CUDA tensor (key) costs
        ("tensor.data_ptr()", "1", lambda: key.data_ptr()),
        ("tensor.shape", "1", lambda: key.shape),
        ("tensor.stride()", "1", lambda: key.stride()),
        ("tensor.dtype", "1", lambda: key.dtype),
        ("tensor.get_device()", "1", lambda: key.get_device()),
        ("tensor.device", "1", lambda: key.device),
        ("launch_compiled, prebuilt arguments (pointers as integers, as a plan passes them)", "1",
         lambda: direct_launch.launch_compiled(plan.compiled, plan.grid, stream, bound)),
        ("launch_compiled, prebuilt arguments, pointers as tensors (Triton's pointer check)", "1",
         lambda: direct_launch.launch_compiled(plan.compiled, plan.grid, stream, as_tensors)),
        ("torch.cuda.device(dev) enter + exit (no longer on the path)", "1", device_context),
    ]
    out = []
    for name, mode, fn in parts:
        fast_launch.set_fast_launch(mode != "triton")
        direct_launch.set_direct_launch_mode("1" if mode == "triton" else mode)
        us, every = time_host(torch, fn, calls, repeats)
        out.append({"part": name, "tokens": tokens, "host_us": us, "repeats_us": every})
    return out


def render_markdown(result):
    m = result["meta"]
    lines = [f"# Python API host time per call ({m['date']})", "",
             f"{m['device']}; torch {m['torch']}, triton {m['triton']}, Python {m['python']}; commit {m['commit'] or '?'}; "
             f"{m['calls']} calls x {m['repeats']} repeats, median. Command: `{m['command']}`", "",
             f"The fast path launches through: {result['meta'].get('fast_launch', '?')}.", "",
             "## Verification (the fast and cached paths' plan hits against the jit path, every output byte)", "",
             "| case | T | path | plan hit | fastlaunch.c | result |", "|---|---:|---|---|---|---|"]
    for v in result["verify"]:
        hit = {True: "yes", False: "**no**"}[v["plan_hit"]]
        lines.append(f"| {v['case']} | {v['tokens']} | {v['path']} | {hit} | "
                     f"{'yes' if v.get('fast') else 'no'} | {'identical' if v['ok'] else '; '.join(v['problems'])} |")
    lines += ["", "## Host µs per call", "",
              f"| case | T | fast | cached | jit | jit / fast | fast ≤ {TARGET_US:g} µs |",
              "|---|---:|---:|---:|---:|---:|---|"]
    rows = {}
    for h in result["host"]:
        rows.setdefault((h["case"], h["tokens"]), {})[h["path"]] = h["host_us"]
    for (case, tokens), paths in rows.items():
        f, c, j = paths.get("fast"), paths.get("cached"), paths.get("jit")
        lines.append(f"| {case} | {tokens} | {f:.1f} | {c:.1f} | {j:.1f} | {j / f:.1f}x | "
                     f"{'yes' if f <= TARGET_US else '**no**'} |")
    if result["breakdown"]:
        lines += ["", f"## The fast and cached paths' parts (bf16 NHD, T = {result['breakdown'][0]['tokens']})", "",
                  "| part | host µs |", "|---|---:|"]
        lines += [f"| {b['part']} | {b['host_us']:.2f} |" for b in result["breakdown"]]
    return "\n".join(lines) + "\n"


def commit():
    if os.environ.get("KVFUZZ_BENCH_COMMIT"):
        return os.environ["KVFUZZ_BENCH_COMMIT"]
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="folder for api_overhead.json and api_overhead.md")
    ap.add_argument("--tokens", default="1,16", help="comma-separated T values (default 1,16)")
    ap.add_argument("--calls", type=int, default=500, help="calls per timed repeat (default 500)")
    ap.add_argument("--repeats", type=int, default=9, help="timed repeats per path (default 9)")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {','.join(CASES)}")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    args = ap.parse_args(argv)
    try:
        tokens = [int(t) for t in args.tokens.split(",")]
        cases = args.cases.split(",")
        if any(t < 1 or t > NUM_BLOCKS * BLOCK_SIZE for t in tokens) or not set(cases) <= set(CASES):
            raise ValueError
    except ValueError:
        print(f"api_overhead: --tokens takes integers in [1, {NUM_BLOCKS * BLOCK_SIZE}], --cases names from "
              f"{','.join(CASES)}", file=sys.stderr)
        return 2
    if args.list:
        for case in cases:
            for t in tokens:
                print(f"{case} T={t} H={H} D={D} block_size={BLOCK_SIZE}")
        return 0
    if not args.out or args.calls < 1 or args.repeats < 1:
        print("api_overhead: --out DIR is required; --calls and --repeats must be >= 1", file=sys.stderr)
        return 2
    import torch
    if not torch.cuda.is_available():
        print("api_overhead: no CUDA device", file=sys.stderr)
        return 3
    sys.path.insert(0, str(ROOT / "kernels" / "triton"))
    import triton
    import kvfuzz_triton as kt
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    props = torch.cuda.get_device_properties(0)
    result = {"meta": {"device": f"{props.name} ({props.multi_processor_count} SMs)", "torch": torch.__version__,
                       "triton": triton.__version__, "python": platform.python_version(),
                       "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "commit": commit(),
                       "command": " ".join(sys.argv), "calls": args.calls, "repeats": args.repeats,
                       "host": platform.node(), "cpus": os.cpu_count()},
              "verify": [], "host": [], "breakdown": []}
    failed = False
    kt.fast_launch.set_fast_launch(True)
    result["meta"]["fast_launch"] = kt.fast_launch.status()
    for case in cases:
        for t in tokens:
            vs = [verify(torch, kt, case, t, path) for path in ("fast", "cached")]
            result["verify"] += vs
            for v in vs:
                print(f"verify {case} T={t} {v['path']}: {'ok' if v['ok'] else 'FAILED: ' + '; '.join(v['problems'])}",
                      flush=True)
            if not all(v["ok"] for v in vs):
                failed = True
                continue
            for path in PATHS:
                set_path(path)
                us, every = time_host(torch, make_call(torch, kt, case, t, seed=4), args.calls, args.repeats)
                result["host"].append({"case": case, "tokens": t, "path": path, "host_us": us, "repeats_us": every})
                print(f"  {path}: {us:.1f} us per call", flush=True)
    if "bf16-nhd" in cases and not failed:
        result["breakdown"] = breakdown(torch, kt, tokens[0], args.calls, args.repeats)
        for b in result["breakdown"]:
            print(f"  {b['part']}: {b['host_us']:.2f} us", flush=True)
    (out / "api_overhead.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "api_overhead.md").write_text(render_markdown(result))
    print(render_markdown(result))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
