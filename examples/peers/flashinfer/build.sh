#!/usr/bin/env bash
# build.sh — compile adapter.cu (FlashInfer's AppendPagedKVCache behind kvfuzz's plugin ABI) into a
# kvfuzz plugin, then check that it exports exactly the three kvfuzz_plugin_* functions; or, with
# -t bench, bench_driver.cu (the same call behind bench/bench.py's --peer flashinfer=PATH) into the
# driver that exports exactly the three kvfuzz_flashinfer_* functions; with -t mla, mla_adapter.cu
# (FlashInfer's AppendPagedKVMlaCache) into a second plugin.
#
# Usage: examples/peers/flashinfer/build.sh [-t plugin|mla|bench] [-f FLASHINFER] [-o OUT.so] [-a ARCH]
#   -t TARGET      plugin (default): adapter.cu; mla: mla_adapter.cu; bench: bench_driver.cu
#   -f FLASHINFER  a header tree of fetch-headers.sh (default: include-<pinned version> next to this
#                  script) or a FlashInfer source checkout. Its include/ directory is put on the include
#                  path, and its vendored libcudacxx (cccl/libcudacxx/include or
#                  3rdparty/cccl/libcudacxx/include) ahead of the CUDA toolkit's, as FlashInfer's JIT does.
#   -o OUT.so      default: build/plugins/flashinfer_append.so (plugin), flashinfer_mla_append.so (mla),
#                  build/peers/flashinfer_bench.so (bench) of this repository
#   -a ARCH        nvcc -arch value (default sm_90a, Hopper); e.g. sm_100a for Blackwell
# Environment: NVCC (default /usr/local/cuda/bin/nvcc), NVCC_FLAGS (extra flags, word-split),
#   KVFZ_FLASHINFER_VERSION (the version in the plugin's name and the driver's report; default: read
#   from the tree),
#   CCCL_INCLUDE (a libcudacxx include directory to use instead of the tree's).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
pinned=$(sed -n 's/^readonly VERSION=//p' "$here/fetch-headers.sh")

flashinfer=$here/include-$pinned
target=plugin
out=
arch=sm_90a
while getopts "t:f:o:a:h" opt; do
  case $opt in
    t) target=$OPTARG ;;
    f) flashinfer=$OPTARG ;;
    o) out=$OPTARG ;;
    a) arch=$OPTARG ;;
    h) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build.sh: usage: build.sh [-t plugin|mla|bench] [-f FLASHINFER] [-o OUT.so] [-a ARCH] (-h for help)" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[[ $# -eq 0 ]] || { echo "build.sh: unexpected argument '$1' (-h for help)" >&2; exit 2; }

die() {
  echo "build.sh: $*" >&2
  exit 1
}

# What is built, from which source, and the only symbols it may export.
case $target in
  plugin)
    source=$here/adapter.cu
    out=${out:-$repo/build/plugins/flashinfer_append.so}
    exports=(kvfuzz_plugin_abi_version kvfuzz_plugin_append kvfuzz_plugin_query) ;;
  mla)
    source=$here/mla_adapter.cu
    out=${out:-$repo/build/plugins/flashinfer_mla_append.so}
    exports=(kvfuzz_plugin_abi_version kvfuzz_plugin_append kvfuzz_plugin_query) ;;
  bench)
    source=$here/bench_driver.cu
    out=${out:-$repo/build/peers/flashinfer_bench.so}
    exports=(kvfuzz_flashinfer_append kvfuzz_flashinfer_args_size kvfuzz_flashinfer_version) ;;
  *) echo "build.sh: -t takes plugin, mla or bench, got '$target'" >&2; exit 2 ;;
esac

nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
[[ -x $nvcc ]] || die "nvcc not found at $nvcc; set NVCC to the CUDA toolkit's nvcc"

if [[ ! -d $flashinfer ]]; then
  if [[ $flashinfer == "$here/include-$pinned" ]]; then
    die "no FlashInfer headers at $flashinfer; run $here/fetch-headers.sh first, or pass -f PATH to a FlashInfer checkout"
  fi
  die "$flashinfer is not a directory (-f takes a fetch-headers.sh tree or a FlashInfer checkout)"
fi
flashinfer=$(cd "$flashinfer" && pwd)
[[ -f $flashinfer/include/flashinfer/page.cuh ]] ||
  die "$flashinfer/include/flashinfer/page.cuh not found; -f takes a fetch-headers.sh tree or a FlashInfer checkout"

# The vendored libcudacxx: page.cuh's fastdiv.cuh needs cuda::fast_mod_div (<cuda/cmath>), which a
# toolkit's CCCL may lack (CUDA 13.0's does). -I, not -isystem, so that it wins over the toolkit's copy.
cccl=${CCCL_INCLUDE:-}
if [[ -z $cccl ]]; then
  for d in "$flashinfer/cccl/libcudacxx/include" "$flashinfer/3rdparty/cccl/libcudacxx/include"; do
    [[ -f $d/cuda/cmath ]] && { cccl=$d; break; }
  done
fi
cccl_flags=()
if [[ -n $cccl ]]; then
  [[ -f $cccl/cuda/cmath ]] || die "CCCL_INCLUDE=$cccl has no cuda/cmath"
  cccl_flags=(-I "$cccl")
else
  echo "build.sh: no vendored libcudacxx under $flashinfer (a checkout without submodules?); using the toolkit's" >&2
fi

# The version in the plugin's name: the fetched tree's stamp, a checkout's version.txt and commit.
version=${KVFZ_FLASHINFER_VERSION:-}
if [[ -z $version ]]; then
  if [[ -f $flashinfer/FLASHINFER_VERSION ]]; then
    version=$(sed -n 's/^version=//p' "$flashinfer/FLASHINFER_VERSION")
  elif [[ -f $flashinfer/version.txt ]]; then
    version=$(tr -d '[:space:]' <"$flashinfer/version.txt")
    commit=$(git -C "$flashinfer" rev-parse --short HEAD 2>/dev/null || true)
    [[ -n $commit ]] && version="$version+g$commit"
  fi
fi
version=${version:-unknown}
[[ $version =~ ^[A-Za-z0-9._+-]+$ ]] || die "version '$version' has characters other than letters, digits and ._+-"

# FlashInfer's own JIT flags for this kernel (flashinfer/jit/core.py, cpp_ext.py): C++17, -O3, NDEBUG
# (FLASHINFER_CUDA_CALL then returns errors without printing), fast math, relaxed constexpr. Hidden
# visibility and a private static CUDA runtime: only the exports checked below leave the .so.
flags=(-std=c++17 -O3 -DNDEBUG -use_fast_math --expt-relaxed-constexpr -arch="$arch"
  -shared -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -Xcompiler -fvisibility-inlines-hidden
  -cudart static -Xlinker --exclude-libs,ALL
  -DFLASHINFER_ENABLE_F16 -DFLASHINFER_ENABLE_BF16 "-DKVFZ_FLASHINFER_VERSION=\"$version\""
  -I "$repo/include" "${cccl_flags[@]}" -isystem "$flashinfer/include")
# CUDA >= 12.8 makes __global__ template stubs static by default; FlashInfer turns that off.
release=$("$nvcc" --version | sed -n 's/.*release \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
read -r major minor <<<"${release:-0 0}"
if ((major > 12 || (major == 12 && minor >= 8))); then flags+=(-static-global-template-stub=false); fi
# shellcheck disable=SC2206  # NVCC_FLAGS is word-split on purpose
[[ -n ${NVCC_FLAGS:-} ]] && flags+=($NVCC_FLAGS)

mkdir -p "$(dirname "$out")"
echo "build.sh: flashinfer $version from $flashinfer" >&2
set -x
"$nvcc" "${flags[@]}" "$source" -o "$out"
{ set +x; } 2>/dev/null

# Exactly the three functions of the ABI (plugin) or of the driver (bench), nothing of FlashInfer or
# the CUDA runtime.
exported=$(nm -D --defined-only "$out" | awk 'NF == 3 && $2 ~ /^[TtWwDdBbRrVvi]$/ {print $3}' | sort)
expected=$(printf '%s\n' "${exports[@]}" | sort)
if [[ $exported != "$expected" ]]; then
  die "$out exports other symbols than ${exports[*]}:"$'\n'"$exported"
fi
echo "build.sh: built $out (exports: $(echo $exported))"
