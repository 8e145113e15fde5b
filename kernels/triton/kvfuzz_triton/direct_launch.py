"""Direct launches of compiled Triton kernels: the launchers' way around Triton's per-call JIT dispatch.

`kernel[grid](*args)` costs Triton 3.6 about 50-100 µs of host time per call of a 60-argument kernel
(reports/gpu/2026-12-01-h200-latency): it specialises every argument, builds and stringifies a cache
key, checks the kernel's globals, builds launch metadata, and only then calls the CompiledKernel's
launcher. DirectLauncher keeps, per specialisation, the CompiledKernel the JIT returned, and calls its
launcher directly on later calls:

    key = launcher.key(bound, options, device)      # what Triton specialises on (below)
    compiled = cache[key]                           # else kernel[grid](...): the JIT compiles and launches
    launch_compiled(compiled, grid, stream, bound)  # CompiledKernel.run, as JITFunction.run calls it

What Triton 3.6.0 specialises on (runtime/jit.py create_function_from_signature, and
native_specialize_impl of python/src/specialize.cc), which the key covers:
  - a constexpr parameter: its value (and type: True and 1 are different keys);
  - a pointer (anything with data_ptr()): its dtype and, unless the parameter is in do_not_specialize
    or do_not_specialize_on_alignment, whether data_ptr() % 16 == 0 (tt.divisibility = 16);
  - an int: its type (i32 in [-2^31, 2^31), i64 in [-2^63, 2^63), u64 up to 2^64) and, unless in
    do_not_specialize, whether it is 1 (then a constexpr) or, unless in do_not_specialize_on_alignment,
    a multiple of 16 (tt.divisibility = 16);
  - a bool: u1; a float: fp32; None: a constexpr;
  - the launch options (num_warps, ...), TRITON_DEBUG (knobs.runtime.debug or the kernel's debug) and
    the instrumentation mode: the JIT's key holds them; and the current device (one cache per device).
The key is at least as fine as Triton's (it holds torch dtypes, not their Triton names), so the kernel
found under a key is the one the JIT would run. Calls the key cannot describe (annotated parameters,
tuples, tensor descriptors, numpy integers, a callable grid, a kernel with pre-run hooks) go through
the JIT every time.

CompiledKernel.run takes the grid, the stream, the function, the packed metadata, the launch metadata,
the enter and exit hooks, then every argument in parameter order, constexprs and ints specialised to
1 included (Triton 3.6's generated C launcher parses those as objects and drops them): exactly
JITFunction.run's `*bound_args.values()`.

KVFUZZ_TRITON_DIRECT_LAUNCH: "1" (default) direct launches; "0" every call through Triton's JIT (the
launchers' behaviour before); "check" direct launches, and every cache hit is checked against the JIT's
own choice (Triton's binder and kernel cache; and in kv_append, the launch plan against the full
validation): slow, for tests. Read when the package is imported, as Triton reads TRITON_DEBUG (reading
the environment costs ~1 µs a call); set_direct_launch_mode() changes it afterwards. Under
TRITON_INTERPRET=1 the kernels are Triton's InterpretedFunction, which always runs through its own path.
"""
import contextlib
import itertools
import os
import threading

from triton import knobs
from triton.runtime.jit import JITFunction

DIRECT_LAUNCH_ENV = "KVFUZZ_TRITON_DIRECT_LAUNCH"
MODES = ("0", "1", "check")
CACHE_CAPACITY = 32  # compiled kernels per DirectLauncher; launch plans per API


def mode_from_environment():
    """KVFUZZ_TRITON_DIRECT_LAUNCH: "1" (unset), "0" or "check"; ValueError for anything else."""
    return _checked_mode(os.environ.get(DIRECT_LAUNCH_ENV, "1"), DIRECT_LAUNCH_ENV + "=")


def _checked_mode(mode, what):
    if mode not in MODES:
        raise ValueError(f'{what}{mode!r}: expected "1" (direct launches, the default), "0" (every call through '
                         f'Triton\'s JIT) or "check" (direct launches checked against the JIT)')
    return mode


_mode = mode_from_environment()


def direct_launch_mode():
    """The mode in force: "1", "0" or "check" (the module docstring)."""
    return _mode


def set_direct_launch_mode(mode):
    """Sets the mode ("1", "0" or "check") for every later call; returns the previous one."""
    global _mode
    previous, _mode = _mode, _checked_mode(mode, "direct launch mode ")
    return previous


class LruCache:
    """At most `capacity` entries; adding one more forgets the least recently used. A hit costs one
    dict lookup (no reordering); eviction scans the entries. Safe to share between threads."""

    def __init__(self, capacity=CACHE_CAPACITY):
        if capacity < 1:
            raise ValueError(f"LruCache capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._entries = {}  # key -> [value, tick of its last use]
        self._clock = itertools.count()
        self._lock = threading.Lock()

    def get(self, key):
        """The value under key (marked as used now), or None."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        entry[1] = next(self._clock)
        return entry[0]

    def put(self, key, value):
        with self._lock:
            self._entries[key] = [value, next(self._clock)]
            if len(self._entries) > self.capacity:
                del self._entries[min(self._entries, key=lambda k: self._entries[k][1])]

    def values(self):
        """The values, least recently used first."""
        return [v for v, _ in sorted(self._entries.values(), key=lambda e: e[1])]

    def __len__(self):
        return len(self._entries)

    def __contains__(self, key):
        return key in self._entries

    def clear(self):
        with self._lock:
            self._entries.clear()


# ---------------------------------------------------------------------------------------------
# The current CUDA device and stream (torch's, as Triton's driver reads them), bound on first use.

_get_device = None  # () -> index of the current CUDA device
_get_stream = None  # (device index) -> the raw handle of that device's current stream


def _bind_torch():
    global _get_device, _get_stream
    import torch
    _get_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
    _get_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
        lambda index: torch.cuda.current_stream(index).cuda_stream)


def current_device():
    """Index of the current CUDA device."""
    if _get_device is None:
        _bind_torch()
    return _get_device()


def current_stream(index):
    """Raw handle (an int) of CUDA device `index`'s current stream: where Triton's JIT launches."""
    if _get_stream is None:
        _bind_torch()
    return _get_stream(index)


def on_device(index):
    """A context in which CUDA device `index` is current: torch.cuda.device(index) when another device
    is current, else nothing to enter (entering and leaving torch.cuda.device costs ~7 µs)."""
    if current_device() == index:
        return contextlib.nullcontext()
    import torch
    return torch.cuda.device(index)


# ---------------------------------------------------------------------------------------------
# Launching a compiled kernel

def _hook_idle(hook):
    return hook is None or (isinstance(hook, knobs.HookChain) and not hook.calls)


def hooks_idle():
    """Whether no Triton launch hook is set (knobs.runtime.launch_enter_hook / launch_exit_hook)."""
    return _hook_idle(knobs.runtime.launch_enter_hook) and _hook_idle(knobs.runtime.launch_exit_hook)


def launch_compiled(compiled, grid, stream, bound):
    """Runs CompiledKernel `compiled` on `grid` (1 to 3 ints) and `stream` with `bound`, every
    argument in parameter order, as Triton 3.6's JITFunction.run does. When no launch hook is set
    (knobs.runtime.launch_enter_hook / launch_exit_hook empty) the launcher gets None for the hooks and
    their metadata, which the JIT would build only to call empty hook chains."""
    if hooks_idle():
        meta = enter = leave = None
    else:
        enter, leave = knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook
        meta = compiled.launch_metadata(grid, stream, *bound)
    n = len(grid)
    compiled.run(grid[0], grid[1] if n > 1 else 1, grid[2] if n > 2 else 1, stream, compiled.function,
                 compiled.packed_metadata, meta, enter, leave, *bound)


class Unsupported(Exception):
    """An argument or call DirectLauncher does not describe: it goes through the JIT."""


_MISSING = object()
_CONSTEXPR = "constexpr"


def int_type(v):
    """Triton 3.6's type of a Python int argument: "i32", "i64" or "u64"."""
    if -0x80000000 <= v <= 0x7FFFFFFF:
        return "i32"
    if -0x8000000000000000 <= v <= 0x7FFFFFFFFFFFFFFF:
        return "i64"
    if 0 <= v <= 0xFFFFFFFFFFFFFFFF:
        return "u64"
    raise Unsupported(f"integer {v} is out of Triton's range")


class DirectLauncher:
    """Launches one @triton.jit kernel, through the JIT on the first call of each specialisation and
    directly afterwards (the module docstring). Keeps up to `capacity` compiled kernels (LRU)."""

    def __init__(self, kernel, capacity=CACHE_CAPACITY):
        self.kernel = kernel
        self.compiled = LruCache(capacity)
        # An InterpretedFunction (TRITON_INTERPRET=1) or an annotated parameter: always the JIT.
        self.supported = isinstance(kernel, JITFunction) and all(
            p.is_constexpr or not p.annotation for p in kernel.params)
        if not self.supported:
            return
        params = kernel.params
        self.names = [p.name for p in params]
        self.position = {p.name: i for i, p in enumerate(params)}
        self.defaults = [p.default if p.has_default else _MISSING for p in params]
        # Per parameter: _CONSTEXPR, or (specialise on value, specialise on alignment).
        self.kinds = [_CONSTEXPR if p.is_constexpr else
                      (not p.do_not_specialize, not p.do_not_specialize and not p.do_not_specialize_on_alignment)
                      for p in params]

    def bind(self, args, kwargs):
        """Every argument in parameter order (positional `args`, then `kwargs` by name, then defaults):
        the list JITFunction.run hands to CompiledKernel.run. Unsupported when it does not bind."""
        n = len(self.names)
        if len(args) > n:
            raise Unsupported(f"{len(args)} arguments for {n} parameters")
        bound = list(args)
        bound += [_MISSING] * (n - len(args))
        for name, v in kwargs.items():
            i = self.position.get(name)
            if i is None or i < len(args):
                raise Unsupported(f"keyword {name!r}")
            bound[i] = v
        for i, v in enumerate(bound):
            if v is _MISSING:
                if self.defaults[i] is _MISSING:
                    raise Unsupported(f"no value for {self.names[i]}")
                bound[i] = self.defaults[i]
        return bound

    def key(self, bound, options, device):
        """What Triton 3.6 specialises this call on (the module docstring), as a hashable tuple: the
        device, the options with TRITON_DEBUG and the instrumentation mode, then one entry per
        argument. Unsupported for an argument it does not describe."""
        debug = options.get("debug", self.kernel.debug) or knobs.runtime.debug
        parts = [device, tuple(sorted((k, v) for k, v in options.items() if k != "debug")), debug,
                 knobs.compilation.instrumentation_mode]
        for v, kind in zip(bound, self.kinds):
            t = type(v)
            if kind is _CONSTEXPR:
                parts.append((t, v))
            elif t is int:
                value, align = kind
                if not value:
                    parts.append(int_type(v))
                elif v == 1:
                    parts.append(1)
                else:
                    parts.append((int_type(v), align and v & 15 == 0))
            elif t is bool or t is float or v is None:
                parts.append(t)
            elif hasattr(v, "data_ptr"):
                parts.append((t, v.dtype, kind[1] and v.data_ptr() & 15 == 0))
            else:
                raise Unsupported(f"argument of type {t.__name__}")
        return tuple(parts)

    def launch(self, grid, args, constexprs, options):
        """kernel[grid](*args, **constexprs, **options), directly when this specialisation has run
        before. Returns what the JIT returns: the CompiledKernel (None when a JIT hook skipped it)."""
        kernel = self.kernel
        mode = direct_launch_mode()
        if not self.supported or mode == "0" or kernel.pre_run_hooks or callable(grid):
            return kernel[grid](*args, **constexprs, **options)
        try:
            bound = self.bind(args, constexprs)
            device = current_device()
            key = self.key(bound, options, device)
            compiled = self.compiled.get(key)
        except (Unsupported, TypeError):  # TypeError: an unhashable constexpr
            return kernel[grid](*args, **constexprs, **options)
        if compiled is None:
            compiled = kernel[grid](*args, **constexprs, **options)
            if is_compiled(compiled):
                self.compiled.put(key, compiled)
            return compiled
        if mode == "check":
            self.check(compiled, args, constexprs, options, device)
        launch_compiled(compiled, grid, current_stream(device), bound)
        return compiled

    def jit_choice(self, args, constexprs, options, device):
        """The CompiledKernel Triton's JIT has for this call on `device` (its binder and kernel cache,
        Triton 3.6 internals), or None."""
        from triton.runtime.jit import compute_cache_key
        kernel = self.kernel
        kwargs = dict(constexprs, **options)
        kwargs["debug"] = kwargs.get("debug", kernel.debug) or knobs.runtime.debug
        kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
        kernel_cache, kernel_key_cache, _, _, binder = kernel.device_caches[device]
        _, specialization, jit_options = binder(*args, **kwargs)
        return kernel_cache.get(compute_cache_key(kernel_key_cache, specialization, jit_options))

    def check(self, compiled, args, constexprs, options, device):
        """RuntimeError unless the JIT would run `compiled` for this call (KVFUZZ_TRITON_DIRECT_LAUNCH=check)."""
        if self.jit_choice(args, constexprs, options, device) is not compiled:
            raise RuntimeError(f"kvfuzz_triton: the direct launch of {self.kernel.fn.__name__} picked a compiled "
                               "kernel that Triton's JIT would not run for these arguments (a specialisation "
                               "the launcher's key misses); run with KVFUZZ_TRITON_DIRECT_LAUNCH=0 meanwhile")


def is_compiled(k):
    """Whether k is a CompiledKernel (what the JIT returns for a launch on the GPU)."""
    from triton.compiler import CompiledKernel
    return isinstance(k, CompiledKernel)
