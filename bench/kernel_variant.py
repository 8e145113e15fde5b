"""Copies kernels/cuda with one stage of the kernel done twice, or one choice changed, for bench.py
(issue 20).

    python3 bench/kernel_variant.py VARIANT OUT_DIR [KERNEL_DIR]
    bench/build_cuda_entry.sh OUT_DIR libkvf_VARIANT.so

A variant that does one stage twice writes the same bytes (bench.py verifies it like every row), so
its extra time over the unchanged kernel in the same run is that stage's cost. The second copy takes
an operand through an empty `asm volatile` so that the compiler cannot merge the two, and the two
results are combined by a bitwise AND of identical values. Variants:

  div2   every quantised element's x / scale (divide_by_scale) done twice: the IEEE division's cost
  amax2  the per-token-head row maximum (row_group_max's warp shuffles) done twice

one that changes a choice of kernel_path() (on a kernel before 01eb8c2, which made it the rule):

  aligned_static  static-scale calls of >= 4096 rows take the aligned path too (one item a thread)

and some that leave a stage out, exact only for bench.py's inputs (every slot valid, block size 16,
caches under 2^31 elements), to price the small calls' fixed chain of instructions:

  nocap    no capacity check of the slot (row_destination)
  shift16  the slot split by a shift and a mask instead of the 32-bit division by block_size
  off32    cache element offsets in 32-bit arithmetic (cache_elem_offset)
  minimal  all three
"""
import pathlib
import shutil
import sys

H, L = "kv_append.cuh", "kv_layout.cuh"
NOCAP = (H, "  if (slot >= cache_capacity(p.cache)) {\n    if (thread == 0)", "  if (false) {\n    if (thread == 0)")
SHIFT16 = (H, "  split_slot(slot, p.cache.block_size, block, pos);\n  return true;", "  block = slot >> 4;\n  pos = slot & 15;\n  return true;")
OFF32 = (L, "  return block * g.stride_block + pos * g.stride_pos + head * g.stride_head + dim;",
         "  return static_cast<int32_t>(block) * static_cast<int32_t>(g.stride_block) + static_cast<int32_t>(pos) * static_cast<int32_t>(g.stride_pos) +\n"
         "         static_cast<int32_t>(head) * static_cast<int32_t>(g.stride_head) + static_cast<int32_t>(dim);")
VARIANTS = {
    "div2": [(H,
        "KVF_HD float divide_by_scale(float x, float scale) { return x / scale; }",
        """KVF_HD float divide_by_scale(float x, float scale) {
#if defined(__CUDA_ARCH__)
  float twin;
  asm volatile("mov.b32 %0, %1;" : "=f"(twin) : "f"(scale));
  return __int_as_float(__float_as_int(x / scale) & __float_as_int(x / twin));
#else
  return x / scale;
#endif
}""",
    )],
    "amax2": [(H,
        "  for (int offset = lanes / 2; offset > 0; offset /= 2) partial = fmaxf(partial, __shfl_xor_sync(0xffffffffu, partial, offset));\n  return partial;",
        """  float twin;
  asm volatile("mov.b32 %0, %1;" : "=f"(twin) : "f"(partial));
  for (int offset = lanes / 2; offset > 0; offset /= 2) partial = fmaxf(partial, __shfl_xor_sync(0xffffffffu, partial, offset));
  for (int offset = lanes / 2; offset > 0; offset /= 2) twin = fmaxf(twin, __shfl_xor_sync(0xffffffffu, twin, offset));
  return __int_as_float(__float_as_int(partial) & __float_as_int(twin));""",
    )],
    "aligned_static": [(H,
        "  const bool two_items = p.scale_kind != ScaleKind::none && p.num_slots >= 4096;",
        "  const bool two_items = false;",
    )],
    "nocap": [NOCAP],
    "shift16": [SHIFT16],
    "off32": [OFF32],
    "minimal": [NOCAP, SHIFT16, OFF32],
}


def main(argv):
    if len(argv) not in (3, 4) or argv[1] not in VARIANTS:
        sys.exit(f"usage: kernel_variant.py {{{','.join(VARIANTS)}}} OUT_DIR [KERNEL_DIR]")
    name, out = argv[1], pathlib.Path(argv[2])
    src = pathlib.Path(argv[3] if len(argv) == 4 else pathlib.Path(__file__).parent.parent / "kernels" / "cuda")
    if out.exists():
        sys.exit(f"kernel_variant.py: {out} exists; give a new folder")
    shutil.copytree(src, out)
    for file, old, new in VARIANTS[name]:
        path = out / file
        text = path.read_text()
        if text.count(old) != 1:
            sys.exit(f"kernel_variant.py: {path}: the {name} site occurs {text.count(old)} times, expected once")
        path.write_text(text.replace(old, new))


if __name__ == "__main__":
    main(sys.argv)
