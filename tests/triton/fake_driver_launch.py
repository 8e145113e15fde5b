"""Launches fastlaunch.c plans on the fake CUDA driver (fake_libcuda.c) and prints what the driver
was given, as JSON; test_fast_launch.py runs it in a process of its own (the fake must be loaded before
fastlaunch.c first opens libcuda.so.1, and fastlaunch.c keeps the driver it opened).

    python fake_driver_launch.py FAKE_LIBCUDA [FASTLAUNCH_SOURCE]

FASTLAUNCH_SOURCE (a mutant of fastlaunch.c) is built instead of the package's."""
import ctypes
import json
import pathlib
import struct
import sys

FUNCTION, STREAM, DEVICE = 0xF00D, 0x5EED, 3
ILLEGAL_ADDRESS, INVALID_CONTEXT = 700, 201


def load_fake(path):
    fake = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    for name in ("fake_current", "fake_function", "fake_stream", "fake_param"):
        getattr(fake, name).restype = ctypes.c_uint64
    fake.fake_set_current.argtypes = [ctypes.c_uint64]
    return fake


def fastlaunch(source):
    if source is None:
        from kvfuzz_triton import fast_launch
        mod = fast_launch.module()
        assert mod is not None, fast_launch.status()
        return mod
    from triton.backends.nvidia.driver import include_dirs
    from triton.runtime.build import compile_module_from_src
    return compile_module_from_src(pathlib.Path(source).read_text(), "kvfuzz_fastlaunch", include_dirs=include_dirs)


def record(fake):
    config = (ctypes.c_uint * 8)()
    fake.fake_config(config)
    return dict(launches=fake.fake_launches(), retains=fake.fake_retains(), ordinal=fake.fake_device_ordinal(),
                current=fake.fake_current(), function=fake.fake_function(), stream=fake.fake_stream(),
                grid=list(config[0:3]), block=list(config[3:6]), shared=config[6], attrs=config[7],
                params=[fake.fake_param(i) for i in range(4)], gil_held=fake.fake_gil_held(),
                extra_null=fake.fake_extra_null())


def error_of(call):
    try:
        call()
    except RuntimeError as e:
        return str(e)
    return None


def main():
    fake = load_fake(sys.argv[1])
    mod = fastlaunch(sys.argv[2] if len(sys.argv) > 2 else None)
    out = {}
    plan = mod.Plan(function=FUNCTION, device=DEVICE, grid=(5, 2, 1), num_warps=4, shared=1024,
                    template=struct.pack("<qqqq", 7, 0, -9, 0), slots=((1, 0), (3, 1)))
    out["cells"] = list(struct.unpack("<4Q", plan.cells([0xAAA0, 0xBBB0])))

    fake.fake_reset(4)  # no current context: the plan's device's primary one is made current
    plan.launch([0xAAA0, 0xBBB0], STREAM)
    out["first"] = record(fake)
    plan.launch((0xCCC0, 0xDDD0), STREAM + 1)  # now a context is current
    out["second"] = record(fake)

    fake.fake_reset(4)
    fake.fake_set_current(0x77)  # a context the caller made current is used as it is
    mod.Plan(function=FUNCTION, device=DEVICE, grid=(1, 1, 7), num_warps=1, shared=0, template=bytes(32),
             slots=()).launch([], 0)
    out["current_kept"] = record(fake)

    fake.fake_reset(4)
    fake.fake_set_current(0x77)
    mod.Plan(function=FUNCTION, device=DEVICE, grid=(0, 2, 1), num_warps=4, shared=0, template=bytes(32),
             slots=()).launch([], STREAM)
    out["empty_grid"] = record(fake)

    fake.fake_reset(4)
    fake.fake_set_current(0x77)
    fake.fake_fail_launch(ILLEGAL_ADDRESS)
    out["launch_error"] = error_of(lambda: plan.launch([1, 2], STREAM))
    fake.fake_reset(4)
    fake.fake_fail_get_current(INVALID_CONTEXT)
    out["context_error"] = error_of(lambda: plan.launch([1, 2], STREAM))
    out["after_errors"] = record(fake)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
