"""The least a Triton append of a few rows takes as a CUDA-graph node (issue 20).

    python3 bench/triton_floor.py > triton_floor.md

One program per token: load its slot and its K and V rows (H 8 x D 128 bf16, 2 KiB each), store
both rows at the slot of a paged NHD cache (block size 16) when the slot is not -1. No layout
strides, no head loop, no capacity check: the floor of what a Triton kernel of this shape costs, to
set beside the kvfuzz Triton kernel's graph µs (bench.py) and the copy node of the same bytes, both
timed here too. Each variant (num_warps 1, 2, 4, 8) is checked against torch indexing before it is
timed; times are median graph replays / launches, as in bench.py.
"""
import sys

import torch
import triton
import triton.language as tl

H, D, BLOCK_SIZE = 8, 128, 16


@triton.jit
def row_append(key, value, slots, k_cache, v_cache, ROW: tl.constexpr):
    t = tl.program_id(0)
    slot = tl.load(slots + t)
    offs = tl.arange(0, ROW)
    k = tl.load(key + t * ROW + offs)
    v = tl.load(value + t * ROW + offs)
    if slot >= 0:
        tl.store(k_cache + slot * ROW + offs, k)
        tl.store(v_cache + slot * ROW + offs, v)


def graph_us(fn, calls=100, reps=50):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0 / calls)
    times.sort()
    return times[len(times) // 2]


def main():
    gen = torch.Generator(device="cuda").manual_seed(20)
    print(f"# triton_floor on {torch.cuda.get_device_name()}, triton {triton.__version__}, torch {torch.__version__}\n")
    print("| row | T | graph µs |\n|---|---:|---:|")
    for T in (1, 16, 256):
        cap = max(2 * T, 4096)
        key = torch.randn(T, H, D, generator=gen, device="cuda").to(torch.bfloat16)
        value = torch.randn(T, H, D, generator=gen, device="cuda").to(torch.bfloat16)
        slots = torch.randperm(cap, generator=gen, device="cuda")[:T].contiguous()
        kc = torch.zeros(cap // BLOCK_SIZE, BLOCK_SIZE, H, D, dtype=torch.bfloat16, device="cuda")
        vc = torch.zeros_like(kc)
        src = torch.cat([key.flatten(), value.flatten()])
        dst = torch.empty_like(src)
        print(f"| copy node, {src.numel() * 2} bytes | {T} | {graph_us(lambda: dst.copy_(src)):.3f} |")
        for warps in (1, 2, 4, 8):
            kc.zero_(), vc.zero_()

            def launch():
                row_append[(T,)](key, value, slots, kc, vc, ROW=H * D, num_warps=warps)

            launch()
            torch.cuda.synchronize()
            flat_k, flat_v = kc.view(-1, H, D), vc.view(-1, H, D)
            if not (torch.equal(flat_k[slots], key) and torch.equal(flat_v[slots], value)):
                print(f"| minimal Triton append, num_warps {warps} | {T} | WRONG |")
                continue
            print(f"| minimal Triton append, num_warps {warps} | {T} | {graph_us(launch):.3f} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
