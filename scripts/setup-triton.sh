#!/usr/bin/env bash
# Creates the Python environment of the Triton kernel tests (build/venv-triton): triton, numpy and
# pytest from kernels/triton/requirements.txt (about 190 MB of wheels). With KVFUZZ_TRITON_TORCH=1 also
# build/venv-torch, the same plus torch (kernels/triton/requirements-torch.txt, about 4.7 GB installed),
# where ctest's triton.torch runs the same tests against a real torch. Skips an install when the venv
# already holds exactly its requirements.
#   scripts/setup-triton.sh                 create or update build/venv-triton
#   KVFUZZ_TRITON_TORCH=1 scripts/setup-triton.sh   and build/venv-torch (CI does; once made, it is
#                                                   kept up to date without the variable)
#   KVFUZZ_NO_TRITON=1 scripts/setup-triton.sh   do nothing (ctest then skips triton.interp and triton.torch)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${KVFUZZ_NO_TRITON:-0}" = 1 ]; then exit 0; fi

# make_venv VENV REQUIREMENTS...: VENV holding exactly the requirements files' contents (their
# concatenation is the stamp that says so).
make_venv() {
  local venv=$1; shift
  local stamp="$venv/.requirements" want
  want=$(cat "$@")
  if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
  if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c "import ensurepip" 2>/dev/null; then
    echo "setup-triton: installing python3-venv" >&2
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
  fi
  rm -rf "$venv"
  python3 -m venv "$venv"
  echo "setup-triton: installing $(grep -hv '^#' "$@" | grep -v '^-r' | xargs) into $venv" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "${@: -1}"
  printf '%s' "$want" > "$stamp"
}

make_venv build/venv-triton kernels/triton/requirements.txt
# build/venv-torch when asked for, and kept up to date once it exists (ctest's triton.torch runs it).
if [ "${KVFUZZ_TRITON_TORCH:-0}" = 1 ] || [ -d build/venv-torch ]; then
  make_venv build/venv-torch kernels/triton/requirements.txt kernels/triton/requirements-torch.txt
fi
