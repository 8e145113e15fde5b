#!/usr/bin/env bash
# A kernel library keeps its own copies of the kernel headers' functions (kernels/cuda/kv_layout.cuh,
# KVF_KERNEL_NS): compiled at -O0, where nothing is inlined, kv_append_emu.cpp built as CMake builds
# a kernel library (KVF_KERNEL_NS=kernel) must define no function under the harness's names
# (kvf::, kvf::shared::) but the launchers kvf::kv_append_emu and kvf::cp_slot_mapping_emu, so a mutant's rewritten
# cache_elem_offset cannot replace the harness's at link time. Built as a harness file would be
# (no define), the same object does define them: the check is shown to fail there first.
#   tests/mutants/check_private_inlines.sh CXX KERNEL_DIR CUDA_INCLUDE_DIR
set -euo pipefail
cxx=$1 kernels=$2 cuda_include=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
harness_names() {  # functions the object defines (T or W) under the harness's names, the launcher aside
  "$cxx" -std=c++20 -O0 -c "$kernels/kv_append_emu.cpp" -I "$kernels" -isystem "$cuda_include" "$@" -o "$work/k.o"
  nm -C --defined-only "$work/k.o" | awk '$2 ~ /^[TW]$/' | grep ' kvf::' | grep -v ' kvf::kernel::' |
    grep -v ' kvf::kv_append_emu(' | grep -v ' kvf::cp_slot_mapping_emu(' || true
}
shared=$(harness_names)
if [ -z "$shared" ]; then
  echo "check_private_inlines: built like a harness file, no shared kvf:: function was defined; the check cannot fail" >&2
  exit 1
fi
private=$(harness_names -DKVF_KERNEL_NS=kernel)
if [ -n "$private" ]; then
  echo "check_private_inlines: the kernel library defines functions under the harness's names:" >&2
  echo "$private" >&2
  exit 1
fi
echo "check_private_inlines: $(echo "$shared" | wc -l) harness-named functions in a harness-style build, none in the kernel library's"
