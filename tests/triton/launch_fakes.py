"""Fakes for the launcher tests (test_direct_launch.py, test_launch_plan.py): duck tensors, a fake CUDA
driver, a CompiledKernel that records its launches, and kv_append_kernel (the `jit` fixture) or
kv_append_row_kernel (`jit_row`) as a JITFunction whose compilation makes one of those. Triton's JITFunction.run itself runs unchanged."""
import importlib.util
import os
import pathlib
import shutil
import subprocess
from types import SimpleNamespace

import pytest

import kvfuzz_triton
from kvfuzz_triton import KvAppendParams, direct_launch
from kvfuzz_triton.api import kernel_call

KERNEL_FILE = os.path.join(os.path.dirname(kvfuzz_triton.__file__), "kv_append.py")
STREAM = 0x5EED


class Tensor:
    """What Triton and the launchers read of a torch tensor: data_ptr(), dtype (Triton maps
    "bfloat16" to bf16, as it does str(torch.bfloat16)), shape, stride(), device, get_device(), is_neg(), numel()."""

    def __init__(self, ptr, dtype="bfloat16", shape=(4, 8), strides=(8, 1), device=0):
        self.ptr, self.dtype, self.shape, self.strides, self.device = ptr, dtype, shape, strides, device

    def data_ptr(self):
        return self.ptr

    def stride(self):
        return self.strides

    def get_device(self):
        return self.device

    def is_neg(self):
        return False

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __repr__(self):
        return f"Tensor(0x{self.ptr:x}, {self.dtype})"


class FakeDriver:
    def get_current_device(self):
        return 0

    def get_current_stream(self, device):
        return STREAM

    def get_current_target(self):
        from triton.backends.compiler import GPUTarget
        return GPUTarget("cuda", 90, 32)


def fake_compiled():
    """A CompiledKernel whose launcher records (gridX, gridY, gridZ, stream, function, packed metadata,
    launch metadata, enter hook, exit hook, *arguments) instead of launching."""
    from triton.compiler import CompiledKernel

    class FakeCompiled(CompiledKernel):
        def __init__(self):
            self.module, self.function, self.packed_metadata = "module", "function", "packed"
            self.name, self.src, self.runs = "kv_append_kernel", None, []
            self._run = lambda *a: self.runs.append(a)

    return FakeCompiled()


@pytest.fixture
def jit(monkeypatch):
    """kv_append_kernel as a JITFunction, Triton's driver faked, compilation replaced by fake_compiled():
    returns (kernel, compiled kernels made)."""
    return jit_kernel(monkeypatch, "kv_append_kernel")


@pytest.fixture
def jit_row(monkeypatch):
    """The same of kv_append_row_kernel (what kv_append runs for params())."""
    return jit_kernel(monkeypatch, "kv_append_row_kernel")


def jit_kernel(monkeypatch, name):
    import triton.experimental.gluon  # noqa: F401  (Triton's binder imports it; it must load under the interpreter)
    from triton import knobs
    from triton.runtime import driver
    monkeypatch.setattr(knobs.runtime, "interpret", False)
    spec = importlib.util.spec_from_file_location("kvfuzz_jit_kv_append", KERNEL_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel = getattr(module, name)
    monkeypatch.setattr(driver, "_active", FakeDriver())
    monkeypatch.setattr(direct_launch, "_get_device", lambda: 0)
    monkeypatch.setattr(direct_launch, "_get_stream", lambda device: STREAM)
    made = []

    def compile_(key, signature, device, constexprs, options, attrs, warmup):
        k = fake_compiled()
        k.signature = signature  # the parameter types Triton's JIT compiled for (test_fast_launch.py)
        kernel.device_caches[device][0][key] = k
        made.append(k)
        return k

    monkeypatch.setattr(kernel, "_do_compile", compile_)
    return kernel, made


def params(ptr=0x10000, k_stride_token=3 * 8 * 128, scale_kind="none", cache_dtype="bf16", num_slots=5):
    """A paged NHD bf16 call on duck tensors at ptr, ptr + 0x100000, ... (H 8, D 128, 16 blocks of 16)."""
    h, d, nb, bs = 8, 128, 16, 16
    cache = {"bf16": "bfloat16", "fp8_e4m3": "uint8"}[cache_dtype]
    t = [Tensor(ptr + i * 0x100000) for i in range(12)]
    p = KvAppendParams(
        key=t[0], value=t[1], key_stride_token=k_stride_token, key_stride_head=d, value_stride_token=k_stride_token,
        value_stride_head=d, slot_mapping=Tensor(t[4].ptr, "int64"), num_slots=num_slots,
        k_cache=Tensor(t[2].ptr, cache), v_cache=Tensor(t[3].ptr, cache), num_blocks=nb, block_size=bs,
        stride_block=bs * h * d, stride_pos=h * d, stride_head=d, num_heads=h, head_dim=d, input_dtype="bf16",
        cache_dtype=cache_dtype, invalid_slots=Tensor(t[10].ptr, "int64"))
    if scale_kind == "per_tensor":
        p.scale_kind, p.k_scale, p.v_scale = scale_kind, Tensor(t[6].ptr, "float32"), Tensor(t[7].ptr, "float32")
    elif scale_kind == "per_token_head":
        p.scale_kind = scale_kind
        p.k_scale_cache, p.v_scale_cache = Tensor(t[8].ptr, "float32"), Tensor(t[9].ptr, "float32")
        p.scale_stride_block, p.scale_stride_pos, p.scale_stride_head = bs * h, h, 1
    return p


def launch_args(p, variant="token"):
    """(grid, arguments, constexprs, options) of p's launch of the kernel of `variant` (kernel_call)."""
    _, grid, args, constexprs = kernel_call(p, variant=variant, fp8_software=False)
    return grid, args, constexprs, {"num_warps": 4}


def jit_launch(kernel, p, variant="token"):
    """The run of p through Triton's JITFunction.run: the fake compiled kernel's last record."""
    grid, args, constexprs, options = launch_args(p, variant)
    compiled = kernel[grid](*args, **constexprs, **options)
    return compiled.runs[-1]


def fake_meta(**kw):
    meta = dict(num_warps=4, num_ctas=1, shared=0, global_scratch_size=0, profile_scratch_size=0,
                launch_cooperative_grid=False, launch_pdl=False, tensordesc_meta=None)
    meta.update(kw)
    return SimpleNamespace(**meta)


def compiled_like_triton(compiled, **meta):
    """The fake CompiledKernel given what a real one has after its first launch: the parameter types
    the JIT compiled it for (src.signature), metadata and an integer CUfunction handle."""
    compiled.src = SimpleNamespace(signature=compiled.signature)
    compiled.metadata = fake_meta(**meta)
    compiled.function = 0xF00D
    return compiled


def build_fake_libcuda(directory):
    """fake_libcuda.c (a fake CUDA driver: test_fast_launch.py) built in `directory` as a library whose
    soname is libcuda.so.1; its path. Loaded (ctypes, RTLD_GLOBAL) before fastlaunch.c first opens
    libcuda.so.1, it is the driver fastlaunch.c gets."""
    from triton.backends.nvidia.driver import include_dirs
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    assert cc, "no C compiler (fastlaunch.c needs one as well)"
    lib = pathlib.Path(directory) / "libcuda.so.1"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", f"-I{include_dirs[0]}",
                    str(pathlib.Path(__file__).with_name("fake_libcuda.c")), "-o", str(lib), "-Wl,-soname,libcuda.so.1",
                    "-ldl"], check=True)
    return lib
