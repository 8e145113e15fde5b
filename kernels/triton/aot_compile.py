"""Ahead-of-time build of the Triton append kernel for the C++ `triton` target; needs no GPU or driver.

    python kernels/triton/aot_compile.py --out-dir DIR [--source-dir kernels/triton] [--jobs N]

Compiles kv_append_kernel (kvfuzz_triton/kv_append.py under --source-dir, so a rewritten copy can be
built too) once per (input dtype, cache dtype, slot dtype) with api.AOT_TILE and api.AOT_NUM_WARPS,
the quantised formats' kv_append_format_kernel (kv_append_format.py) once per (input dtype, format,
slot dtype) with format_api.FORMAT_AOT_BLOCK and FORMAT_AOT_NUM_WARPS,
and the context-parallel slot-mapping producer cp_slot_mapping_kernel (kvfuzz_triton/cp_slot_mapping.py)
once, with its ROWS_PER_PROGRAM and NUM_WARPS, through triton.compile(ASTSource(...),
target=GPUTarget("cuda", 90, 32)) (research/triton-tooling.md R1b: no driver, no generated C
launchers), and writes to DIR:

  kv_append_<in>_<cache>_<slot>.cubin   one sm_90a image per specialisation
  kv_append_format_<in>_<format>_<slot>.cubin   one per format specialisation (manifest "format_kernels")
  cp_slot_mapping.cubin                 the producer's image
  manifest.json                         what src/targets/triton/aot_manifest.h reads: per kernel its
                                        key, entry name, num_warps, shared memory, cluster dims and
                                        the launch parameters in order (the two trailing scratch
                                        pointers of Triton 3.x kernels included); the producer's
                                        entry under "cp_slot_mapping", with its rows per program
  embed.cpp                             manifest.json and the cubins as data of the binary (.incbin)

No argument is specialised: integers are plain i32/i64 parameters (no ==1 or %16 assumptions) and
pointers carry no alignment hints, so one image is correct for every value and address. The build
refuses kernels that would need more than the loader does (scratch memory, PDL, cooperative launch).
"""
import argparse
import concurrent.futures
import hashlib
import json
import multiprocessing
import os
import re
import runpy
import sys
import time
from pathlib import Path

TARGET = ("cuda", 90, 32)  # backend, compute capability, warp size: H100/H200 (sm_90a)
TRITON_VERSION = "3.6.0"  # kernels/triton/requirements.txt; the GPU machine's version

# Triton's name of each kvf::DType / kvf::IndexType element type, for pointer parameters.
ELEMENT = {"f16": "fp16", "bf16": "bf16", "f32": "fp32", "fp8_e4m3": "fp8e4nv", "fp8_e5m2": "fp8e5", "int8": "i8",
           "i32": "i32", "i64": "i64"}
INPUT_DTYPES = ("f16", "bf16", "f32")
CACHE_DTYPES = ("f16", "bf16", "f32", "fp8_e4m3", "fp8_e5m2", "int8")
SLOT_TYPES = ("i32", "i64")
# Integer parameters that are 32-bit; every other integer parameter is int64 (strides, sizes: P10).
INT32_PARAMS = {"num_heads", "head_dim", "scale_kind", "has_counter", "heads_per_program", "k_dim_x", "v_dim_x",
                "value_head_dim", "has_value", "rope_dim", "cp", "cp_rank", "cp_world_size", "cp_interleave"}
# The producer's 32-bit integers (kvf::CpSlotMappingParams: rank, world_size, interleave) and pointers.
CP_INT32_PARAMS = {"rank", "world_size", "interleave"}
CP_POINTERS = {"positions_ptr": "i32", "requests_ptr": "i32", "block_tables_ptr": "i32", "slot_mapping_ptr": "i32"}
CP_KERNEL_NAME = "cp_slot_mapping"
# The quantised formats' kernel (kvfuzz_triton/kv_append_format.py): one per (input dtype, format, slot
# dtype); its 32-bit integers and pointers.
QUANT_FORMATS = runpy.run_path(str(Path(__file__).resolve().parent / "kvfuzz_triton/enums.py"))["QUANT_FORMATS"][1:]  # all but none
FORMAT_FIELDS = ("kc", "vc", "ks", "vs", "kz", "vz", "rp")
FORMAT_INT32_PARAMS = ({"num_heads", "head_dim", "latent_dim", "rope_dim", "has_value", "has_counter", "nvfp4_rule",
                        "mx_rule", "ds_mla_rule", "indexer_rule", "asym_arith", "asym_lanes", "int4_pairing", "cp",
                        "cp_rank", "cp_world_size", "cp_interleave"}
                       | {f"{f}_{m}" for f in FORMAT_FIELDS for m in ("pos_x", "dim_x")})
# Parameters the compiled kernel takes after the Python ones (Triton 3.x ABI); passed as null.
SCRATCH_PARAMS = ("global_scratch", "profile_scratch")


def kernel_name(in_dtype, cache_dtype, slot_type):
    return f"kv_append_{in_dtype}_{cache_dtype}_{slot_type}"


def format_kernel_name(in_dtype, quant_format, slot_type):
    return f"kv_append_format_{in_dtype}_{quant_format}_{slot_type}"


def format_signature(kernel, in_dtype, slot_type, constexprs):
    """Parameter name -> Triton type for one specialisation of kv_append_format_kernel."""
    pointers = {"key_ptr": ELEMENT[in_dtype], "value_ptr": ELEMENT[in_dtype], "rope_ptr": ELEMENT[in_dtype],
                "slot_ptr": ELEMENT[slot_type], "cache_ptr": "u8", "scales_ptr": "u8", "k_global_ptr": "fp32",
                "v_global_ptr": "fp32", "invalid_slots_ptr": "i64", "csr_batch_ptr": "i32", "csr_pos_ptr": "i32",
                "csr_indices_ptr": "i32", "csr_indptr_ptr": "i32", "window_pos_ptr": "i32", "window_len_ptr": "i32",
                "cp_pos_ptr": "i32"}
    return typed_signature(kernel, "kv_append_format_kernel", pointers, FORMAT_INT32_PARAMS, constexprs)


def signature(kernel, in_dtype, cache_dtype, slot_type, constexprs):
    """Parameter name -> Triton type for one specialisation (every parameter, constexprs included)."""
    pointers = {"key_ptr": ELEMENT[in_dtype], "value_ptr": ELEMENT[in_dtype], "slot_ptr": ELEMENT[slot_type],
                "k_cache_ptr": ELEMENT[cache_dtype], "v_cache_ptr": ELEMENT[cache_dtype],
                "k_scale_ptr": "fp32", "v_scale_ptr": "fp32", "invalid_slots_ptr": "i64",
                "rope_ptr": ELEMENT[in_dtype], "csr_batch_ptr": "i32", "csr_pos_ptr": "i32",
                "csr_indices_ptr": "i32", "csr_indptr_ptr": "i32", "window_pos_ptr": "i32", "window_len_ptr": "i32",
                "cp_pos_ptr": "i32"}
    return typed_signature(kernel, "kv_append_kernel", pointers, INT32_PARAMS, constexprs)


def typed_signature(kernel, what, pointers, int32_params, constexprs):
    """Parameter name -> Triton type: constexprs, pointers (`pointers`: name -> element), i32 for
    `int32_params`, i64 for every other integer (strides, sizes: P10)."""
    sig = {}
    for name in kernel.arg_names:
        if name in constexprs:
            sig[name] = "constexpr"
        elif name.endswith("_ptr"):
            if name not in pointers:
                raise SystemExit(f"aot_compile: no element type for pointer parameter {name!r} of {what}")
            sig[name] = "*" + pointers[name]
        else:
            sig[name] = "i32" if name in int32_params else "i64"
    missing = set(constexprs) - set(sig)
    if missing:
        raise SystemExit(f"aot_compile: {what} has no parameter {sorted(missing)}")
    return sig


def compile_one(source_dir, spec):
    """Compiles one specialisation of kv_append_kernel, or the producer for spec CP_KERNEL_NAME;
    returns (manifest entry, cubin bytes, seconds)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from kvfuzz_triton import api
    from kvfuzz_triton import format_api
    from kvfuzz_triton.cp_slot_mapping import NUM_WARPS, ROWS_PER_PROGRAM, cp_slot_mapping_kernel
    from kvfuzz_triton.kv_append import kv_append_kernel
    from kvfuzz_triton.kv_append_format import kv_append_format_kernel

    if spec[0] == "format":
        _, in_dtype, quant_format, slot_type = spec
        kernel, name = kv_append_format_kernel, format_kernel_name(in_dtype, quant_format, slot_type)
        num_warps = format_api.FORMAT_AOT_NUM_WARPS
        constexprs = {"IN_DTYPE": api.DTYPES.index(in_dtype), "FORMAT": format_api.FORMATS.index(quant_format),
                      "FP8_SOFTWARE": False, "BLOCK": format_api.FORMAT_AOT_BLOCK}
        sig = format_signature(kernel, in_dtype, slot_type, constexprs)
    elif spec == CP_KERNEL_NAME:
        kernel, name, num_warps = cp_slot_mapping_kernel, CP_KERNEL_NAME, NUM_WARPS
        constexprs = {"BLOCK": ROWS_PER_PROGRAM}
        sig = typed_signature(kernel, "cp_slot_mapping_kernel", CP_POINTERS, CP_INT32_PARAMS, constexprs)
    else:
        in_dtype, cache_dtype, slot_type = spec
        block_h, block_d = api.AOT_TILE
        kernel, name, num_warps = kv_append_kernel, kernel_name(in_dtype, cache_dtype, slot_type), api.AOT_NUM_WARPS
        constexprs = {"IN_DTYPE": api.DTYPES.index(in_dtype), "CACHE_DTYPE": api.DTYPES.index(cache_dtype),
                      "FP8_SOFTWARE": False, "BLOCK_H": block_h, "BLOCK_D": block_d}
        sig = signature(kernel, in_dtype, cache_dtype, slot_type, constexprs)
    start = time.monotonic()
    compiled = triton.compile(ASTSource(kernel, sig, constexprs), target=GPUTarget(*TARGET),
                              options={"num_warps": num_warps})
    seconds = time.monotonic() - start
    md = compiled.metadata
    for field in ("global_scratch_size", "profile_scratch_size"):
        if getattr(md, field, 0):
            raise SystemExit(f"aot_compile: {name} needs {field}={getattr(md, field)}; the loader passes none")
    if md.launch_pdl or md.launch_cooperative_grid:
        raise SystemExit(f"aot_compile: {name} asks for a PDL or cooperative launch; the loader does neither")
    params = [{"name": n, "type": t} for n, t in sig.items() if t != "constexpr"]
    params += [{"name": n, "type": "scratch"} for n in SCRATCH_PARAMS]
    ptx = compiled.asm["ptx"]
    entry = re.search(r"\.entry\s+(\w+)\s*\(([^)]*)\)", ptx)
    ptx_params = len(re.findall(r"\.param\s", entry.group(2)))
    if entry.group(1) != md.name or ptx_params != len(params):
        raise SystemExit(f"aot_compile: {name}: the PTX entry {entry.group(1)} has {ptx_params} parameters, "
                         f"expected {md.name} with {len(params)} ({[p['name'] for p in params]})")
    arch = re.search(r"^\.target\s+(\w+)", ptx, re.M).group(1)
    cubin = compiled.asm["cubin"]
    entry = {"name": name, "function": md.name}
    if spec == CP_KERNEL_NAME:
        entry["rows_per_program"] = ROWS_PER_PROGRAM
    elif spec[0] == "format":
        entry.update({"input_dtype": in_dtype, "quant_format": quant_format, "slot_type": slot_type})
    else:
        entry.update({"input_dtype": in_dtype, "cache_dtype": cache_dtype, "slot_type": slot_type})
    entry.update({
        "constexprs": {k: int(v) for k, v in constexprs.items()},
        "num_warps": md.num_warps,
        "shared_bytes": md.shared,
        "cluster_dims": [md.num_ctas, 1, 1],
        "arch": arch,
        "params": params,
        "cubin": name + ".cubin",
        "cubin_bytes": len(cubin),
        "cubin_sha256": hashlib.sha256(cubin).hexdigest(),
    })
    return entry, cubin, seconds


def write_if_changed(path, data):
    data = data.encode() if isinstance(data, str) else data
    if path.exists() and path.read_bytes() == data:
        os.utime(path)  # still newer than the inputs, so the build does not rerun this step
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def embed_source(out_dir, files):
    """C++ source holding `files` ([(name, sha256)] under out_dir) as read-only data."""
    lines = ["// Generated by kernels/triton/aot_compile.py; do not edit. The Triton AOT kernel set of the",
             "// `triton` target (manifest.json and its cubins) as read-only data of the binary.",
             '#include "targets/triton/embedded_files.h"', "", "__asm__("]
    for i, (name, digest) in enumerate(files):
        path = str(out_dir / name).replace("\\", "\\\\").replace('"', '\\"')
        sym = f"kvf_triton_file_{i}"
        lines += [f'    ".section .rodata\\n.balign 64\\n.globl {sym}\\n.hidden {sym}\\n{sym}:\\n"',
                  f'    "# {name} sha256 {digest}\\n"',  # a changed file changes this source (ccache)
                  f'    ".incbin \\"{path}\\"\\n.globl {sym}_end\\n.hidden {sym}_end\\n{sym}_end:\\n.previous\\n"']
    lines += [");", ""]
    for i in range(len(files)):
        lines.append(f"extern \"C\" const unsigned char kvf_triton_file_{i}[], kvf_triton_file_{i}_end[];")
    lines += ["", "namespace kvf {", "", "std::vector<EmbeddedFile> embedded_triton_files() {", "  return {"]
    for i, (name, _) in enumerate(files):
        lines.append(f'      {{"{name}", kvf_triton_file_{i}, '
                     f"static_cast<size_t>(kvf_triton_file_{i}_end - kvf_triton_file_{i})}},")
    lines += ["  };", "}", "", "}  // namespace kvf", ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", required=True, type=Path)
    ap.add_argument("--source-dir", type=Path, default=Path(__file__).resolve().parent,
                    help="directory holding the kvfuzz_triton package (default: this script's)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()

    # The interpreter flag makes @triton.jit return an InterpretedFunction, which cannot be compiled
    # (triton-tooling.md P11); the Triton cache goes into the build tree, not ~/.triton.
    os.environ.pop("TRITON_INTERPRET", None)
    out_dir = args.out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    os.environ["TRITON_CACHE_DIR"] = str(out_dir / "cache")
    sys.path.insert(0, str(args.source_dir.resolve()))
    import triton
    if triton.__version__ != TRITON_VERSION:
        raise SystemExit(f"aot_compile: triton {triton.__version__} found, {TRITON_VERSION} needed")
    from kvfuzz_triton import api, format_api  # noqa: F401  (imported before forking the workers)

    specs = [(i, c, s) for i in INPUT_DTYPES for c in CACHE_DTYPES for s in SLOT_TYPES] + [CP_KERNEL_NAME]
    specs += [("format", i, f, s) for i in INPUT_DTYPES for f in QUANT_FORMATS for s in SLOT_TYPES]
    start = time.monotonic()
    with concurrent.futures.ProcessPoolExecutor(max_workers=max(1, args.jobs),
                                                mp_context=multiprocessing.get_context("fork")) as pool:
        results = list(pool.map(compile_one, [args.source_dir.resolve()] * len(specs), specs))
    kernels = []
    format_kernels = []
    producer = None
    files = []
    total_bytes = 0
    for spec, (entry, cubin, _) in zip(specs, results):
        write_if_changed(out_dir / entry["cubin"], cubin)
        if spec == CP_KERNEL_NAME:
            producer = entry
        elif spec[0] == "format":
            format_kernels.append(entry)
        else:
            kernels.append(entry)
        files.append((entry["cubin"], entry["cubin_sha256"]))
        total_bytes += len(cubin)
    source = b"".join((args.source_dir / "kvfuzz_triton" / f).read_bytes()
                      for f in ("kv_append.py", "cp_slot_mapping.py", "kv_append_format.py"))
    manifest = {
        "schema": "kvfuzz-triton-aot/3",
        "triton_version": triton.__version__,
        "target": {"backend": TARGET[0], "compute_capability": TARGET[1], "warp_size": TARGET[2]},
        "source_sha256": hashlib.sha256(source).hexdigest(),
        "tile": list(api.AOT_TILE),
        # The integer values of the constexpr dtypes and of scale_kind (kvf::DType, kvf::ScaleKind):
        # the loader refuses a manifest whose numbering differs from its own.
        "dtypes": list(api.DTYPES),
        "scale_kinds": list(api.SCALE_KINDS),
        "kernels": kernels,
        "cp_slot_mapping": producer,
        # The quantised formats' kernels: kvf::QuantFormat's numbering, the tile, one per specialisation.
        "formats": list(format_api.FORMATS),
        "format_block": format_api.FORMAT_AOT_BLOCK,
        "format_kernels": format_kernels,
    }
    text = json.dumps(manifest, indent=1) + "\n"
    write_if_changed(out_dir / "manifest.json", text)
    files.insert(0, ("manifest.json", hashlib.sha256(text.encode()).hexdigest()))
    write_if_changed(out_dir / "embed.cpp", embed_source(out_dir, files))
    compile_seconds = sum(r[2] for r in results)
    print(f"aot_compile: {len(kernels)} kernels, {len(format_kernels)} format kernels and the slot-mapping producer, {total_bytes} bytes of cubin, {time.monotonic() - start:.1f} s "
          f"({compile_seconds:.1f} s of compilation, {args.jobs} jobs) -> {out_dir}")


if __name__ == "__main__":
    main()
