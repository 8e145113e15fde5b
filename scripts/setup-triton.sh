#!/usr/bin/env bash
# Creates the Python environment of the Triton kernel tests (build/venv-triton): triton, numpy and
# pytest from kernels/triton/requirements.txt (about 190 MB of wheels). Skips the install when the
# venv already holds exactly these requirements.
#   scripts/setup-triton.sh                 create or update build/venv-triton
#   KVFUZZ_NO_TRITON=1 scripts/setup-triton.sh   do nothing (ctest then skips triton.interp)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${KVFUZZ_NO_TRITON:-0}" = 1 ]; then exit 0; fi

venv=build/venv-triton
req=kernels/triton/requirements.txt
stamp="$venv/.requirements"
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$req" "$stamp"; then exit 0; fi

if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c "import ensurepip" 2>/dev/null; then
  echo "setup-triton: installing python3-venv" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
fi
rm -rf "$venv"
python3 -m venv "$venv"
echo "setup-triton: installing $(grep -v '^#' "$req" | xargs) into $venv" >&2
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
cp "$req" "$stamp"
