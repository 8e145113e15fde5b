#!/usr/bin/env bash
# Installs what kvfuzz needs to build and test on Debian 12 (bookworm), then configures and builds.
#   scripts/setup.sh            install packages (if missing) and build kvfuzz itself into ./build
#                               (the quick start's main job: no tests, no mutants, no example plugins)
#   scripts/setup.sh --all      the same, then every target: tests, mutants, plugins (scripts/test.sh)
#   KVFUZZ_NO_BROWSER=1 scripts/setup.sh   the same without chromium (for the HTML report's browser test)
# The CUDA toolkit (nvcc, headers) is expected at /usr/local/cuda; CCCL/Thrust ship with it.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake g++ make python3 python3-yaml zip libcli11-dev nlohmann-json3-dev librapidcheck-dev libgtest-dev)
# clang with libFuzzer and the sanitizer runtimes: the parser fuzzers (scripts/fuzz.sh, ctest -L fuzz).
packages+=(clang libclang-rt-14-dev)
# gdb: the e2e test of a crash finding runs the `locate:` command it prints and reads the stack.
packages+=(gdb)
# Headless Chromium renders report.html in the browser test (ctest -L browser); KVFUZZ_NO_BROWSER=1
# skips it (the test then skips itself).
if [ "${KVFUZZ_NO_BROWSER:-0}" != 1 ]; then packages+=(chromium); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ -d /usr/local/cuda/bin ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
if [ "${1:-}" = --all ]; then
  cmake --build build -j"$(nproc)"
else
  cmake --build build -j"$(nproc)" --target kvfuzz
fi
