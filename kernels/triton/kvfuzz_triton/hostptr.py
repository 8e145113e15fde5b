"""HostPtr: a host address that Triton's interpreter accepts where a torch tensor is expected.

Under TRITON_INTERPRET=1 a pointer argument must speak a little of torch's tensor/storage protocol
(research/triton-tooling.md §2.2). HostPtr wraps a raw host address (a numpy array's
`ctypes.data`, or memory owned by a C++ worker) and a Triton type name ("fp16", "bf16", "fp32",
"u8", "i32", "i64", ...) so kernels can run on it without torch. The interpreter loads and stores
straight through the address; nothing is copied.
"""


class HostPtr:
    def __init__(self, addr, dtype):
        self.addr = int(addr)
        self.dtype = dtype

    @classmethod
    def of(cls, array, dtype):
        """HostPtr to a numpy array's first element."""
        return cls(array.ctypes.data, dtype)

    def data_ptr(self):
        return self.addr

    def untyped_storage(self):
        return self

    def cpu(self):
        return self

    def storage_offset(self):
        return 0

    def size(self):
        return ()

    def stride(self):
        return ()

    def new_empty(self, *args, **kwargs):
        return HostPtr(self.addr, self.dtype)

    def set_(self, storage, *args):
        self.addr = storage.addr
        return self

    def copy_(self, other):
        return self  # same host memory: nothing to copy back

    def __repr__(self):
        return f"HostPtr(0x{self.addr:x}, {self.dtype!r})"
