# Runs the Triton kernels under the CPU interpreter unless KVFUZZ_TRITON_GPU=1 asks for the GPU.
# TRITON_INTERPRET is read when a kernel is decorated, so it is set before the package is imported.
import os
import sys

if os.environ.get("KVFUZZ_TRITON_GPU") != "1":
    os.environ["TRITON_INTERPRET"] = "1"
# KVFUZZ_TRITON_PKG points at another copy of kernels/triton (a mutant, say).
sys.path.insert(0, os.environ.get("KVFUZZ_TRITON_PKG") or
                os.path.join(os.path.dirname(__file__), "..", "..", "kernels", "triton"))
