#!/usr/bin/env bash
# fetch-headers.sh — download the pinned flashinfer-python wheel from PyPI, check its sha256, and
# extract the C++ headers the kvfuzz adapter compiles against (nothing is installed):
#   DIR/include/flashinfer/...            FlashInfer's headers (page.cuh and what it includes)
#   DIR/cccl/libcudacxx/include/...       the libcudacxx FlashInfer vendors (page.cuh's fastdiv.cuh
#                                         needs cuda::fast_mod_div, which CUDA 13.0's own CCCL lacks)
#   DIR/LICENSE                           FlashInfer's Apache-2.0 licence
#   DIR/FLASHINFER_VERSION                what was fetched (build.sh reads the version from it)
#
# Usage: examples/peers/flashinfer/fetch-headers.sh [DIR]
#   DIR defaults to examples/peers/flashinfer/include-<version> (git-ignored).
# Environment: PYTHON (default python3), whose pip downloads the wheel.
# Running it again with the tree in place does nothing; a DIR holding anything else is refused.
set -euo pipefail

readonly VERSION=0.7.4
readonly WHEEL="flashinfer_python-${VERSION}-py3-none-any.whl"
readonly WHEEL_SHA256=a051a62e09a2738e8b0de47a1944fd2f0f3eff01b728b662141ea660cb09dd32

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dest=${1:-$here/include-$VERSION}
python=${PYTHON:-python3}

die() {
  echo "fetch-headers.sh: $*" >&2
  exit 1
}

sha256_of() {
  if command -v sha256sum >/dev/null; then
    sha256sum "$1" | cut -d' ' -f1
  elif command -v shasum >/dev/null; then
    shasum -a 256 "$1" | cut -d' ' -f1
  else
    die "neither sha256sum nor shasum is installed; install coreutils"
  fi
}

stamp="$dest/FLASHINFER_VERSION"
if [[ -d $dest ]] && [[ -z $(ls -A "$dest") ]]; then
  rmdir "$dest"  # an empty directory made for it
fi
if [[ -e $dest ]]; then
  if [[ -f $stamp ]] && grep -qx "version=$VERSION" "$stamp" && grep -qx "wheel_sha256=$WHEEL_SHA256" "$stamp" &&
    [[ -f $dest/include/flashinfer/page.cuh ]]; then
    echo "fetch-headers.sh: flashinfer-python $VERSION headers already in $dest"
    exit 0
  fi
  die "$dest exists but is not the flashinfer-python $VERSION header tree this script makes; remove it or pass another directory"
fi

command -v "$python" >/dev/null || die "$python not found; set PYTHON to a Python 3 with pip"
"$python" -m pip --version >/dev/null 2>&1 || die "$python has no pip; install it (python3 -m ensurepip) or set PYTHON"

work=$(mktemp -d "${TMPDIR:-/tmp}/kvfuzz-flashinfer.XXXXXX")
trap 'rm -rf "$work"' EXIT

# --only-binary with --python-version: the one pure-Python wheel whose hash is recorded above, whatever
# the local Python's version; --no-deps: FlashInfer's torch and CUDA dependencies are not needed.
echo "fetch-headers.sh: downloading flashinfer-python==$VERSION from PyPI"
"$python" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --disable-pip-version-check \
  "flashinfer-python==$VERSION" -d "$work" >&2 ||
  die "pip download of flashinfer-python==$VERSION failed (is PyPI reachable? a proxy or index set in pip.conf?)"
[[ -f $work/$WHEEL ]] || die "pip did not save $WHEEL (got: $(ls "$work"))"

actual=$(sha256_of "$work/$WHEEL")
[[ $actual == "$WHEEL_SHA256" ]] ||
  die "sha256 of $WHEEL is $actual, expected $WHEEL_SHA256; the download is not the pinned wheel, refusing it"

# Extract into a staging directory next to DEST and rename it into place, so that an interrupted
# run leaves no half tree behind.
mkdir -p "$(dirname "$dest")"
stage=$(mktemp -d "$(dirname "$dest")/.include-$VERSION.XXXXXX")
trap 'rm -rf "$work" "$stage"' EXIT
"$python" - "$work/$WHEEL" "$stage" "$VERSION" "$WHEEL_SHA256" <<'PY'
import os, re, shutil, sys, zipfile

wheel, stage, version, sha256 = sys.argv[1:]
# wheel prefix -> destination under the stage directory
trees = {
    "flashinfer/data/include/": "include/",
    "flashinfer/data/cccl/libcudacxx/include/": "cccl/libcudacxx/include/",
}
files = {f"flashinfer_python-{version}.dist-info/licenses/LICENSE": "LICENSE"}
with zipfile.ZipFile(wheel) as z:
    count = 0
    for info in z.infolist():
        if info.is_dir():
            continue
        target = files.get(info.filename)
        for prefix, out in trees.items():
            if info.filename.startswith(prefix):
                target = out + info.filename[len(prefix):]
        if target is None:
            continue
        if target.startswith("/") or ".." in target.split("/"):
            sys.exit(f"fetch-headers.sh: refusing the wheel member {info.filename!r}")
        path = os.path.join(stage, target)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with z.open(info) as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)
        count += 1
    meta = z.read("flashinfer/_build_meta.py").decode()
commit = re.search(r'__git_commit__\s*=\s*"([0-9a-f]+)"', meta)
for need in ("include/flashinfer/page.cuh", "cccl/libcudacxx/include/cuda/cmath"):
    if not os.path.isfile(os.path.join(stage, need)):
        sys.exit(f"fetch-headers.sh: the wheel has no {need}; its layout changed")
with open(os.path.join(stage, "FLASHINFER_VERSION"), "w") as f:
    f.write(f"version={version}\n")
    f.write(f"wheel={os.path.basename(wheel)}\n")
    f.write(f"wheel_sha256={sha256}\n")
    f.write(f"git_commit={commit.group(1) if commit else 'unknown'}\n")
print(f"fetch-headers.sh: extracted {count} files", file=sys.stderr)
PY
chmod 755 "$stage"
mv "$stage" "$dest"
echo "fetch-headers.sh: flashinfer-python $VERSION headers in $dest"
