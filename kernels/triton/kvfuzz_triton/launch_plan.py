"""Launch plans: a torch API call replayed on new tensors of the same kind without validating it again.

kv_append validates its arguments and derives the kernel's ~60 arguments from their shapes, strides and
dtypes (~20-40 µs of Python per call). A later call whose tensors have the same type, shape, strides,
dtype, device and 16-byte alignment, with equal other arguments, passes the same checks and gets the
same integers, grid and compiled kernel: only the pointers differ. A LaunchPlan keeps the first call's
launch with each pointer argument replaced by the position of the call tensor it comes from:

    key, pointers = keyed_pointers(tensors, others)   # None: a call no plan describes
    plan = plans.get(key)
    if plan is not None:
        return plan.launch(pointers)             # the key, one lookup, the launch
    ...validate, launch through DirectLauncher...
    bound = the kernel's arguments derived once more with Slot(i) in place of the call's tensor i
    plans.put(key, LaunchPlan.of(compiled, grid, bound, device))

call_key holds, per tensor, (type, shape, strides, dtype, device, data_ptr() % 16), None for an
absent one (the device is t.device, its type and index: get_device() gives a CUDA tensor and one of
another device type, an XPU or a privateuse backend's, the same index), then `others` (the call's
other arguments, as given) and TRITON_DEBUG with the instrumentation mode (part of Triton's key). A
negative-bit view and a null pointer with elements get no key (_described). The caller passes in
`others` everything else its validation and kernel arguments read: the contract is that every non-pointer kernel argument follows
from the key. A pointer's value decides only its alignment (Triton's divisibility specialisation).
What the environment decides is read when the package is imported (TRITON_INTERPRET: whether the
kernels are compiled at all, and so whether plans are made) and kept by a plan (fp8_software=None's
default, which kv_append reads from TRITON_INTERPRET at each validation).

A plan launches with each pointer as the integer data_ptr() (the key read it already), not the tensor.
Triton's launcher calls data_ptr() on a tensor argument and asks the driver whether the address is
device memory (cuPointerGetAttribute, about 0.5 µs a pointer: 3.9 µs of a bf16 call's 12.8 in the
launcher, reports/gpu/2026-12-04-h200-latency); an integer it takes as it is. The plan's first call
went through that check (validation, then Triton's JIT), and a hit's tensors have its key: the same
tensor type and device (CUDA, with the same index), so the check would give the same answer.
"""
from triton import knobs

from . import fast_launch
from .direct_launch import current_device, current_stream, hooks_idle, launch_compiled, on_device


def call_key(tensors, others):
    """The plan key of a call (the module docstring), or None when a tensor argument is not one
    (the full path then raises the error that names it)."""
    return keyed_pointers(tensors, others)[0]


def keyed_pointers(tensors, others):
    """(call_key(tensors, others), [each tensor's data_ptr(), None for an absent one]), or (None, None).
    With the fast launcher on (fast_launch.py): through torch's C++ API (torchkey.cpp) when every tensor
    argument is a torch.Tensor and that module is built, else by fastlaunch.c; otherwise by
    python_keyed_pointers. fastlaunch.c's key is the Python one; torchkey.cpp's is equal for two calls
    exactly when theirs are, and never equal to theirs."""
    mod = fast_launch.module() if fast_launch.enabled() else None
    if mod is None:
        return python_keyed_pointers(tensors, others)
    debug, mode = knobs.runtime.debug, knobs.compilation.instrumentation_mode
    torch_key = fast_launch.torch_key_module()
    if torch_key is not None:
        got = torch_key.keyed_pointers(tensors, others, debug, mode)
        if got is not NotImplemented:
            return got
    return mod.keyed_pointers(tensors, others, debug, mode)


def python_keyed_pointers(tensors, others):
    """keyed_pointers in Python."""
    if not isinstance(tensors, (tuple, list)):
        return None, None
    try:
        pointers = [None if t is None else t.data_ptr() for t in tensors]
        described = [None if t is None else _described(t, ptr) for t, ptr in zip(tensors, pointers)]
    except Exception:  # noqa: BLE001 - anything but a tensor: the full path names the problem
        return None, None
    return (tuple(described), others, knobs.runtime.debug, knobs.compilation.instrumentation_mode), pointers


def _described(t, ptr):
    """Tensor t's part of the key, its data_ptr() being ptr; ValueError for a tensor no plan may take: a
    negative-bit view (its memory holds the values negated: validation refuses it) or a null pointer
    with elements (a functionalized or zero tensor: no memory to launch on). A conjugate view needs no
    check: it is complex, a dtype validation refuses, so no plan has its key."""
    if t.is_neg() or (ptr == 0 and t.numel()):
        raise ValueError("not a tensor a plan may take")
    return type(t), t.shape, t.stride(), t.dtype, t.device, ptr & 15


def lookup(plans, key):
    """(key, plans' plan for it or None); (None, None) when key is None or unhashable (an argument such
    as a dict: the call then takes the full path every time)."""
    if key is None:
        return None, None
    try:
        return key, plans.get(key)
    except TypeError:
        return None, None


def remember(plans, key, plan, fresh, api):
    """After a validated launch of a call with plan key `key`: keeps `fresh` (its LaunchPlan, None when
    it has none) when there was no `plan`; else (KVFUZZ_TRITON_DIRECT_LAUNCH=check) raises unless the
    plan is the one validation just gave. `api` names the function in the error."""
    if plan is None:
        if fresh is not None:
            plans.put(key, fresh)
    elif not plan.same_as(fresh):
        raise RuntimeError(f"kvfuzz_triton: {api}'s launch plan for these arguments differs from what their "
                           "validation gives (the plan key misses something the arguments depend on); run with "
                           "KVFUZZ_TRITON_DIRECT_LAUNCH=0 meanwhile")


class Slot:
    """Stands for the call's tensor number `index` among a plan's arguments."""
    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index

    def __repr__(self):
        return f"Slot({self.index})"


class LaunchPlan:
    """A validated call's launch: its compiled kernel, grid and device, and its arguments in parameter
    order with each pointer's slot filled from the call's tensors at launch."""
    __slots__ = ("compiled", "grid", "device", "template", "slots", "fast")

    def __init__(self, compiled, grid, device, template, slots, fast=None):
        self.compiled = compiled
        self.grid = grid
        self.device = device  # CUDA device index
        self.template = template  # [arguments in parameter order], None where a pointer goes
        self.slots = slots  # ((argument position, index into the call's tensors), ...)
        self.fast = fast  # its fastlaunch.c Plan (fast_launch.py), None: Triton's launcher launches it

    @classmethod
    def of(cls, compiled, grid, bound, device):
        """The plan of a launch of `compiled` on `grid` and CUDA device `device` with `bound`, every
        argument in parameter order, each pointer a Slot of the call's tensors. None when an argument
        is neither a Slot nor a plain scalar (a pointer whose source the caller did not mark)."""
        template = list(bound)
        slots = []
        for pos, arg in enumerate(bound):
            if type(arg) is Slot:
                template[pos] = None
                slots.append((pos, arg.index))
            elif not (arg is None or type(arg) in (int, bool, float)):
                return None
        fast = fast_launch.plan_for(compiled, grid, device, bound, lambda a: type(a) is Slot)
        return cls(compiled, tuple(grid), device, template, tuple(slots), fast)

    def arguments(self, pointers):
        """The launch's arguments for this call's pointers (keyed_pointers(): the call's tensors'
        data_ptr(), in the order of its tensors)."""
        bound = self.template.copy()
        for pos, src in self.slots:
            bound[pos] = pointers[src]
        return bound

    def launch(self, pointers):
        device = self.device
        if current_device() == device:
            self._launch(pointers, device)
        else:
            with on_device(device):
                self._launch(pointers, device)

    def _launch(self, pointers, device):
        """On the current device: through fastlaunch.c when the plan has a fast launch and no Triton
        launch hook (a profiler) wants to see it, else through Triton's launcher."""
        fast = self.fast
        if fast is not None and fast_launch.enabled() and hooks_idle():
            fast.launch(pointers, current_stream(device))
        else:
            launch_compiled(self.compiled, self.grid, current_stream(device), self.arguments(pointers))

    def same_as(self, other):
        """Whether `other` launches the same kernel with the same arguments (a check of the key)."""
        return (other is not None and self.compiled is other.compiled and self.grid == other.grid
                and self.device == other.device and self.slots == other.slots
                and [(type(a), a) for a in self.template] == [(type(a), a) for a in other.template])
