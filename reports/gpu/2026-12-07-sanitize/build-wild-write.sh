#!/usr/bin/env bash
# Builds build-gpu/wild-write.so: examples/plugins/cuda/plugin.cpp around a copy of kernels/cuda with
# tests/mutants/mutants.json's "wild-write" applied (every write lands 2^36 blocks past the cache),
# as a device plugin for sm_90. Run from the repository root; needs nvcc and g++.
set -euo pipefail
out=build-gpu; src=$out/wild-write-src
rm -rf "$src"; mkdir -p "$src"; cp kernels/cuda/* "$src"/
python3 - "$src" <<'PY'
import json, pathlib, sys
m = next(m for m in json.load(open("tests/mutants/mutants.json"))["mutants"] if m["name"] == "wild-write")
f = pathlib.Path(sys.argv[1]) / m["file"]; t = f.read_text()
assert m["find"] in t; f.write_text(t.replace(m["find"], m["replace"], 1))
PY
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
flags=(-DKVFUZZ_PLUGIN_DEVICE -Iinclude -I"$src" -isystem /usr/local/cuda/include -O2 -g -fPIC -fvisibility=hidden)
g++ "${flags[@]}" -std=gnu++20 -c examples/plugins/cuda/plugin.cpp -o $out/ww-plugin.o
"$nvcc" -DKVFUZZ_PLUGIN_DEVICE -Iinclude -I"$src" -O2 -g -lineinfo --generate-code=arch=compute_90,code=[compute_90,sm_90] \
  -Xcompiler=-fPIC -Xcompiler=-fvisibility=hidden -std=c++17 -x cu -c "$src"/kv_append.cu -o $out/ww-kernel.o
"$nvcc" -shared -Xcompiler=-fPIC $out/ww-plugin.o $out/ww-kernel.o -cudart static -Xlinker --exclude-libs,ALL -o $out/wild-write.so
echo "built $out/wild-write.so"
