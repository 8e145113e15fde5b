"""python_worker.py — the Python half of kvfuzz's persistent Python worker (python_worker.h is the C++ half).

kvfuzz embeds this file and starts it as `PYTHON -c SOURCE CONFIG_JSON` once per kvfuzz worker
process (never per case); it then serves every case of that process. It has two modes:
  launch  the kvfuzz_triton kernel through its raw entry point, kvfuzz_triton.launch(KvAppendParams)
          with HostPtr shims on the arena image, under TRITON_INTERPRET=1 (the triton-interp targets);
  call    a user's function fn(key, value, key_cache, value_cache, slot_mapping, **kwargs) with torch
          tensors (CPU or CUDA) or numpy arrays viewing the arena image (the python: targets).

CONFIG_JSON: {"sock": FD, "memfd": FD, "mode": "launch" | "call",
              "triton_pkg": DIR or null (put first on sys.path), "default_pkg": DIR (put last),
              launch: "fp8_software": bool;
              call:   "module": NAME or FILE.py, "function": NAME, "convention": "torch" | "numpy",
                      "device": "cpu" | "cuda:N"}

Protocol on the SOCK_STREAM socket FD: every message is a u32 little-endian byte count and that many
bytes of UTF-8 JSON.
  worker -> kvfuzz, once, first:  {"ok": true, "versions": {...}}, in call mode with
                                  "capabilities": DICT, "capabilities_from": WHERE when the function
                                  declares them (FUNCTION.kvfuzz_capabilities, or a companion
                                  FUNCTION_capabilities() in its module; gen/capabilities.h names the
                                  keys, and kvfuzz checks the values)
                                  {"ok": false, "kind": "unavailable" | "bad_target", "message": TEXT}
  kvfuzz -> worker, per case:     {"op": "run", "map_bytes": M, "image_bytes": N, "calls": [CALL, ...]}
  worker -> kvfuzz, per case:     {"status": "ok"}
                                  {"status": "error", "message": TEXT}  (a Python exception)
                                  {"status": "fault", "message": TEXT}  (the CUDA context is dead;
                                                                        the worker exits after it)
The arena image is the first N bytes of the memfd, which kvfuzz sizes to M bytes (it only grows;
the worker re-maps it when M changes). The worker maps it between inaccessible fences and makes
the mapping past the image inaccessible for each case, so a write outside the image faults (a
`crash` finding) instead of corrupting this process. The calls run in order, and the first exception
ends the case: one call, or one per rank of a context-parallel case (docs/contract.md "Serving
conventions"; each rank's tensors address its shard). CALL is one append with byte offsets into the
image (python_worker.cpp, call_json()):
  input_dtype, cache_dtype ("f16" "bf16" "f32" "fp8_e4m3" "fp8_e5m2" "int8"), slot_dtype ("i32" "i64"),
  layout ("nhd" | "hnd": the order of the 4-D cache views; "vllm_legacy": K 5-D [nb, H, D/x, bs, x],
  V 4-D [nb, H, D, bs]), num_slots, num_input_rows, num_heads,
  head_dim, key/value {offset, stride_token, stride_head}, slot_mapping, k_cache, v_cache,
  cache {num_blocks, block_size, stride_block, stride_pos, stride_head}, k_field/v_field
  {stride_block, stride_pos, stride_head, x, stride_dim0, stride_dim1}: where K and V keep (block,
  pos, head, d), as kvfuzz_triton.FieldStrides (src/targets/triton/kernel_fields.h; a string says why
  the kernel cannot address the field), family ("kv" "kv_split" "k_only" "mla", docs/formats.md),
  has_value (false for k_only and mla: value, v_cache, v_scale, v_scale_cache are null),
  value_head_dim (V's head dim, head_dim but for kv_split), value_cache (V's geometry, like cache; its
  own for kv_split), rope ({offset, stride_token, stride_head} of mla's k_pe, else null), rope_dim
  (K's last rope_dim dims come from rope), csr ({batch_indices, positions, kv_indices, kv_indptr,
  kv_last_page_len, batch_size, num_kv_indices}: offsets of FlashInfer's int32 CSR arrays, slot_mapping
  then null; null for slot_mapping addressing), window ({positions, seq_lens, size, sinks}: a ring
  whose kernel applies the window, int32 offsets; else null), ring ({size, sinks} of any ring; else
  null), cp ({positions, rank, world_size, interleave}: a context-parallel rank that skips the tokens
  other ranks hold, int32 positions; else null), shard ({rank, world_size, interleave} of any
  context-parallel rank; else null), requests ({batch_indices, positions, seq_lens, context_lens,
  block_tables, batch_size, table_width}: int32 offsets of the request structure, placed after the
  arena, for a function declaring "inputs": ["requests"]; else null), cp_producer ({positions, requests, block_tables,
  table_width, num_rows, block_size, rank, world_size, interleave, slot_mapping}: int32 offsets of the
  slot-mapping producer's call that writes this rank's slot_mapping before the append, as
  kvfuzz_triton.CpSlotMappingParams; else null; launch mode only: a function's rank gets its
  slot_mapping from kvfuzz, written before the case), invalid_slots (null when the
  function's capabilities leave out "invalid_slot_counter": it then gets invalid_slots=None), scale_kind,
  num_scales, k_scale, v_scale, k_scale_cache, v_scale_cache (offsets or null),
  scale_cache {stride_block, stride_pos, stride_head}, format (a quantised format: {name, rules, group,
  cache, cache_bytes, scales, scales_bytes, stored, k_codes, v_codes, k_scales, v_scales, k_zeros,
  v_zeros, rope}, the fields as kvfuzz_triton.FormatField, stored {FIELD: {dtype, shape}} of the fields
  the format has; k_cache, v_cache null; else null). Strides are in elements. Call mode passes the
  serving conventions and formats as keyword groups (Caller.kwargs; docs/targets.md).
"""
import ctypes
import importlib
import importlib.util
import json
import mmap
import os
import struct
import sys
import traceback
import warnings

# The interpreter's masked-off lanes do NaN arithmetic; the results are checked bit for bit by kvfuzz.
warnings.simplefilter("ignore")


class Refusal(Exception):
    """The worker cannot serve: kind "unavailable" (exit 3) or "bad_target" (exit 2)."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


# ---------------------------------------------------------------------------------------------
# Framing

def send(fd, obj):
    data = json.dumps(obj).encode()
    data = struct.pack("<I", len(data)) + data
    while data:
        data = data[os.write(fd, data):]


def recv_exactly(fd, n):
    chunks = []
    while n > 0:
        chunk = os.read(fd, n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def recv(fd):
    head = recv_exactly(fd, 4)
    if head is None:
        return None
    body = recv_exactly(fd, struct.unpack("<I", head)[0])
    return None if body is None else json.loads(body)


# ---------------------------------------------------------------------------------------------
# The shared image

PROT_NONE, PROT_READ, PROT_WRITE = 0, 1, 2
MAP_SHARED, MAP_PRIVATE, MAP_FIXED, MAP_ANONYMOUS, MAP_NORESERVE = 0x01, 0x02, 0x10, 0x20, 0x4000
MAP_FAILED = ctypes.c_void_p(-1).value
FENCE = 64 << 30  # address space only (PROT_NONE, MAP_NORESERVE), as in campaign/isolation.cpp

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def round_up(n, m):
    return (n + m - 1) // m * m


class SharedImage:
    """The memfd mapped between two inaccessible fences; bytes past the image are inaccessible."""

    def __init__(self, memfd):
        self.memfd = memfd
        self.reserve = None  # (address, bytes) of the whole reservation
        self.base = 0        # address of the image's first byte
        self.mapped = 0      # bytes of the memfd mapped at base
        self.accessible = 0  # bytes from base that are readable and writable
        self.image_bytes = 0

    def prepare(self, map_bytes, image_bytes):
        page = mmap.PAGESIZE
        if round_up(map_bytes, page) != self.mapped:
            self._map(round_up(map_bytes, page))
        used = min(self.mapped, round_up(image_bytes, page))
        if used > self.accessible:
            _libc.mprotect(self.base + self.accessible, used - self.accessible, PROT_READ | PROT_WRITE)
        elif used < self.accessible:
            _libc.mprotect(self.base + used, self.accessible - used, PROT_NONE)
        self.accessible = used
        self.image_bytes = image_bytes

    def _map(self, size):
        if self.reserve:
            _libc.munmap(*self.reserve)
            self.reserve = None
        total = FENCE + size + FENCE
        at = _libc.mmap(None, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
        if at in (None, MAP_FAILED):  # no address space for fences (a tight RLIMIT_AS): unfenced
            at = _libc.mmap(None, size, PROT_READ | PROT_WRITE, MAP_SHARED, self.memfd, 0)
            if at in (None, MAP_FAILED):
                raise OSError(ctypes.get_errno(), "mapping the shared arena")
            self.reserve, self.base = (at, size), at
        else:
            self.reserve = (at, total)
            self.base = _libc.mmap(at + FENCE, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, self.memfd, 0)
            if self.base in (None, MAP_FAILED):
                raise OSError(ctypes.get_errno(), "mapping the shared arena")
        self.mapped = self.accessible = size

    def buffer(self):
        """A writable buffer over the image (numpy.frombuffer / torch.frombuffer accept it)."""
        return (ctypes.c_ubyte * self.image_bytes).from_address(self.base)


# ---------------------------------------------------------------------------------------------
# Tensor geometry of one call (shared by every convention)

def field(call, which):
    """call["k_field"] or call["v_field"], refused when the kernel cannot address it."""
    f = call[which]
    if isinstance(f, str):
        raise ValueError(f"{which}: {f}")
    return f


def geometry_view(layout, g, H, D):
    """(shape, strides) of a 4-D nhd [nb, bs, H, D] or hnd [nb, H, bs, D] view of geometry g."""
    nb, bs = g["num_blocks"], g["block_size"]
    if layout == "nhd":
        return (nb, bs, H, D), (g["stride_block"], g["stride_pos"], g["stride_head"], 1)
    return (nb, H, bs, D), (g["stride_block"], g["stride_head"], g["stride_pos"], 1)


def cache_views(call):
    """(shape, strides) of the key and value cache views in the call's layout and family (the torch
    convention of kvfuzz_triton.api.kv_append): nhd [nb, bs, H, D], hnd [nb, H, bs, D], both for K and
    V (kv_split: V's own geometry and head dim Dv); vllm_legacy K [nb, H, D/x, bs, x] and V [nb, H, D, bs];
    k_only: V None; mla: the latent cache [nb, bs, D] (one head) and V None."""
    H, D = call["num_heads"], call["head_dim"]
    g = call["cache"]
    nb, bs = g["num_blocks"], g["block_size"]
    family = call.get("family", "kv")
    if family == "mla":
        return ((nb, bs, D), (g["stride_block"], g["stride_pos"], 1)), None
    if family != "kv":
        key = geometry_view(call["layout"], g, H, D)
        value = geometry_view(call["layout"], call["value_cache"], H, call["value_head_dim"]) if family == "kv_split" else None
        return key, value
    if call["layout"] == "vllm_legacy":
        k, v = field(call, "k_field"), field(call, "v_field")
        x = k["x"]
        key = ((nb, H, D // x, bs, x), (k["stride_block"], k["stride_head"], k["stride_dim1"], k["stride_pos"], k["stride_dim0"]))
        value = ((nb, H, D, bs), (v["stride_block"], v["stride_head"], v["stride_dim1"], v["stride_pos"]))
        return key, value
    both = geometry_view(call["layout"], g, H, D)
    return both, both


def views(call):
    """(name, offset, dtype name, shape, element strides) of every tensor argument; absent ones (V for
    k_only and mla, scales a case has not) are left out. key and value are [T_in, H, D] and
    [T_in, H, Dv]; for mla key is kv_c [T_in, D - rope_dim] and rope k_pe [T_in, rope_dim]. The cache
    views are those of cache_views(); scale caches are 3-D [nb, bs, H] for nhd, [nb, H, bs] otherwise."""
    H, D = call["num_heads"], call["head_dim"]
    g, s = call["cache"], call["scale_cache"]
    nb, bs = g["num_blocks"], g["block_size"]
    if call["layout"] == "nhd":
        sc_shape, sc_strides = (nb, bs, H), (s["stride_block"], s["stride_pos"], s["stride_head"])
    else:
        sc_shape, sc_strides = (nb, H, bs), (s["stride_block"], s["stride_head"], s["stride_pos"])
    rows = call["num_input_rows"]
    out = []
    if call.get("family") == "mla":
        k, r, rope_dim = call["key"], call["rope"], call["rope_dim"]
        out.append(("key", k["offset"], call["input_dtype"], (rows, D - rope_dim), (k["stride_token"], 1)))
        out.append(("rope", r["offset"], call["input_dtype"], (rows, rope_dim), (r["stride_token"], 1)))
    else:
        dims = {"key": D, "value": call.get("value_head_dim", D)}
        for name in ("key", "value"):
            v = call[name]
            if v["offset"] is not None:
                out.append((name, v["offset"], call["input_dtype"], (rows, H, dims[name]),
                            (v["stride_token"], v["stride_head"], 1)))
    if call["k_cache"] is not None:  # a quantised format has no classic caches (format_views())
        key_view, value_view = cache_views(call)
        out.append(("key_cache", call["k_cache"], call["cache_dtype"]) + key_view)
        if value_view is not None:
            out.append(("value_cache", call["v_cache"], call["cache_dtype"]) + value_view)
    if call["slot_mapping"] is not None:  # CSR addressing has none (serving_views())
        out.append(("slot_mapping", call["slot_mapping"], call["slot_dtype"], (call["num_slots"],), (1,)))
    kind = call["scale_kind"]
    scale_shape = {"per_tensor": (1,), "per_head": (H,), "per_block": (nb, H)}.get(kind)
    for name in ("k_scale", "v_scale"):
        if call[name] is not None:
            strides = (H, 1) if kind == "per_block" else (1,)
            out.append((name, call[name], "f32", scale_shape, strides))
    for name in ("k_scale_cache", "v_scale_cache"):
        if call[name] is not None:
            out.append((name, call[name], "f32", sc_shape, sc_strides))
    if call["invalid_slots"] is not None:
        out.append(("invalid_slots", call["invalid_slots"], "i64", (1,), (1,)))
    return out


def serving_views(call):
    """(name, offset, dtype name, shape, element strides) of the int32 arrays of the serving
    conventions a call has: FlashInfer's CSR arrays (csr_*), a ring's window_positions and
    window_seq_lens, a context-parallel rank's cp_positions, and the request structure (req_*,
    present when the function declares "inputs": ["requests"])."""
    T = call["num_slots"]
    out = []
    csr = call.get("csr")
    if csr:
        B = csr["batch_size"]
        for name, n in (("batch_indices", T), ("positions", T), ("kv_indices", csr["num_kv_indices"]),
                        ("kv_indptr", B + 1), ("kv_last_page_len", B)):
            out.append(("csr_" + name, csr[name], "i32", (n,), (1,)))
    window = call.get("window")
    if window:
        out.append(("window_positions", window["positions"], "i32", (T,), (1,)))
        out.append(("window_seq_lens", window["seq_lens"], "i32", (T,), (1,)))
    cp = call.get("cp")
    if cp:
        out.append(("cp_positions", cp["positions"], "i32", (T,), (1,)))
    req = call.get("requests")
    if req:
        B, W = req["batch_size"], req["table_width"]
        for name, shape in (("batch_indices", (T,)), ("positions", (T,)), ("seq_lens", (B,)), ("context_lens", (B,))):
            out.append(("req_" + name, req[name], "i32", shape, (1,)))
        out.append(("req_block_tables", req["block_tables"], "i32", (B, W), (W, 1)))
    return out


# Bytes per element of a quantised format's field dtypes (4-bit codes: two per byte).
FIELD_BITS = {"fp4_e2m1": 4, "uint4": 4, "fp8_e4m3": 8, "fp8_e5m2": 8, "fp8_e8m0": 8, "int8": 8, "uint8": 8,
              "f16": 16, "bf16": 16, "f32": 32}


def format_views(fmt):
    """(name, byte offset, dtype name, shape, element strides) of the typed 4-D view [blocks, block_size,
    heads, n] of each stored field of a quantised format whose layout is one stride per axis (4-bit
    codes: bytes of two codes, n/2, with the dims contiguous); fields without such a view (vLLM's
    swizzled NVFP4 scales) are left out: format_fields describes every field."""
    out = []
    for name, info in fmt["stored"].items():
        f = fmt[name]
        if isinstance(f, str) or f["pos_x"] != 1 or f["dim_x"] != 1:
            continue
        bits = FIELD_BITS[info["dtype"]]
        nb, bs, H, n = info["shape"]
        strides = [f["block"], f["pos1"], f["head"], f["dim1"]]
        offset = f["offset"]
        dtype = info["dtype"]
        if bits == 4:  # nibbles: whole bytes of two adjacent dims
            if f["dim1"] != 1 or n % 2 or offset % 2 or any(st % 2 for st in strides[:3]):
                continue
            offset, strides, n, dtype = offset // 2, [st // 2 for st in strides[:3]] + [1], n // 2, "uint8"
        buffer = fmt["scales"] if name.endswith(("scales", "zeros")) else fmt["cache"]
        out.append((name, buffer + offset * bits // 8 if bits >= 8 else buffer + offset, dtype, (nb, bs, H, n), tuple(strides)))
    return out


def span_elements(shape, strides):
    """Elements from the first to one past the last addressed element (0 for an empty view)."""
    if any(n == 0 for n in shape):
        return 0
    return sum((n - 1) * st for n, st in zip(shape, strides)) + 1


# ---------------------------------------------------------------------------------------------
# launch mode: kvfuzz_triton.launch on HostPtr shims

TRITON_PTR = {"f16": "fp16", "bf16": "bf16", "f32": "fp32", "fp8_e4m3": "u8", "fp8_e5m2": "u8", "int8": "u8",
              "i32": "i32", "i64": "i64"}


class Launcher:
    def __init__(self, cfg):
        os.environ["TRITON_INTERPRET"] = "1"  # read when the kernel is decorated: before the import
        versions = import_numpy_triton()
        try:
            kt = importlib.import_module("kvfuzz_triton")
        except Exception as e:
            raise Refusal("unavailable", f"cannot import kvfuzz_triton from {cfg.get('triton_pkg') or cfg.get('default_pkg')}: "
                                         f"{exception_text(e)}")
        versions["kvfuzz_triton"] = os.path.dirname(os.path.abspath(kt.__file__))
        self.kt = kt
        self.fp8_software = bool(cfg["fp8_software"])
        self.versions = versions

    def run(self, image, call):
        kt = self.kt

        def ptr(offset, dtype):
            return None if offset is None else kt.HostPtr(image.base + offset, TRITON_PTR[dtype])

        def strides(which):
            f = field(call, which)
            return kt.FieldStrides(f["stride_block"], f["stride_pos"], f["stride_head"], x=f["x"],
                                   dim0=f["stride_dim0"], dim1=f["stride_dim1"])

        g, s = call["cache"], call["scale_cache"]
        p = kt.KvAppendParams(
            key=ptr(call["key"]["offset"], call["input_dtype"]), value=ptr(call["value"]["offset"], call["input_dtype"]),
            key_stride_token=call["key"]["stride_token"], key_stride_head=call["key"]["stride_head"],
            value_stride_token=call["value"]["stride_token"], value_stride_head=call["value"]["stride_head"],
            slot_mapping=ptr(call["slot_mapping"], call["slot_dtype"]), num_slots=call["num_slots"],
            k_cache=ptr(call["k_cache"], call["cache_dtype"]), v_cache=ptr(call["v_cache"], call["cache_dtype"]),
            num_blocks=g["num_blocks"], block_size=g["block_size"], stride_block=g["stride_block"],
            stride_pos=g["stride_pos"], stride_head=g["stride_head"], num_heads=call["num_heads"],
            head_dim=call["head_dim"], input_dtype=call["input_dtype"], cache_dtype=call["cache_dtype"],
            invalid_slots=ptr(call["invalid_slots"], "i64"), scale_kind=call["scale_kind"],
            k_scale=ptr(call["k_scale"], "f32"), v_scale=ptr(call["v_scale"], "f32"),
            k_scale_cache=ptr(call["k_scale_cache"], "f32"), v_scale_cache=ptr(call["v_scale_cache"], "f32"),
            scale_stride_block=s["stride_block"], scale_stride_pos=s["stride_pos"], scale_stride_head=s["stride_head"],
            k_field=strides("k_field"), v_field=strides("v_field"),
            value_head_dim=call["value_head_dim"], has_value=call["has_value"],
            rope=ptr(call["rope"]["offset"], call["input_dtype"]) if call["rope"] else None,
            rope_stride_token=call["rope"]["stride_token"] if call["rope"] else 0,
            rope_stride_head=call["rope"]["stride_head"] if call["rope"] else 0, rope_dim=call["rope_dim"])
        fmt = call.get("format")
        if fmt:  # a quantised format: its fields in the cache and scale buffers (format_api.py)
            def format_field(name):
                f = fmt[name]
                if isinstance(f, str):
                    raise ValueError(f"{fmt['name']} {name}: {f}")
                return kt.FormatField(**f)
            p.quant_format = fmt["name"]
            p.format_rules = kt.FormatRules(**fmt["rules"])
            p.format_cache = kt.HostPtr(image.base + fmt["cache"], "u8")
            p.format_scales = kt.HostPtr(image.base + fmt["scales"], "u8")
            for name in ("k_codes", "v_codes", "k_scales", "v_scales", "k_zeros", "v_zeros"):
                setattr(p, name, format_field(name))
            p.rope_field = format_field("rope")
        csr = call.get("csr")
        if csr:  # FlashInfer's CSR addressing: int32 arrays, no slot_mapping
            p.csr_batch_indices = ptr(csr["batch_indices"], "i32")
            p.csr_positions = ptr(csr["positions"], "i32")
            p.csr_kv_indices = ptr(csr["kv_indices"], "i32")
            p.csr_kv_indptr = ptr(csr["kv_indptr"], "i32")
        window = call.get("window")
        if window:  # a ring whose kernel applies the window: int32 positions and request lengths
            p.window_positions = ptr(window["positions"], "i32")
            p.window_seq_lens = ptr(window["seq_lens"], "i32")
            p.window_size, p.window_sinks = window["size"], window["sinks"]
        cp = call.get("cp")
        if cp:  # a context-parallel rank that keeps its own rows: int32 global positions
            p.cp_positions = ptr(cp["positions"], "i32")
            p.cp_rank, p.cp_world_size, p.cp_interleave = cp["rank"], cp["world_size"], cp["interleave"]
        producer = call.get("cp_producer")
        if producer:  # this rank's slot_mapping first, from positions and block tables
            kt.launch_cp_slot_mapping(kt.CpSlotMappingParams(
                positions=ptr(producer["positions"], "i32"), requests=ptr(producer["requests"], "i32"),
                block_tables=ptr(producer["block_tables"], "i32"), table_width=producer["table_width"],
                num_rows=producer["num_rows"], block_size=producer["block_size"], rank=producer["rank"],
                world_size=producer["world_size"], interleave=producer["interleave"],
                slot_mapping=ptr(producer["slot_mapping"], "i32")))
        kt.launch(p, fp8_software=self.fp8_software)


def import_numpy_triton():
    try:
        import numpy
        import triton
    except ImportError as e:
        raise Refusal("unavailable", f"{sys.executable} cannot import {e.name or 'triton'} ({exception_text(e)}): "
                                     "run scripts/setup-triton.sh, or point --python / KVFUZZ_PYTHON at a Python "
                                     "with triton 3.6 and numpy<2.4")
    np_version = tuple(int(x) for x in numpy.__version__.split(".")[:2] if x.isdigit())
    if triton.__version__.startswith("3.6") and np_version >= (2, 4):
        raise Refusal("unavailable", f"numpy {numpy.__version__} breaks the interpreter of triton {triton.__version__} "
                                     "(triton#9171): install numpy<2.4 into " + sys.prefix)
    return {"python": sys.version.split()[0], "numpy": numpy.__version__, "triton": triton.__version__}


# ---------------------------------------------------------------------------------------------
# call mode: a user's function on torch tensors or numpy arrays

NUMPY_DTYPE = {"f16": "float16", "bf16": "uint16", "f32": "float32", "fp8_e4m3": "uint8", "fp8_e5m2": "uint8",
               "int8": "int8", "i32": "int32", "i64": "int64", "uint8": "uint8", "fp8_e8m0": "uint8"}
TORCH_DTYPE = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "fp8_e4m3": "float8_e4m3fn",
               "fp8_e5m2": "float8_e5m2", "int8": "int8", "i32": "int32", "i64": "int64", "uint8": "uint8",
               "fp8_e8m0": "uint8"}
# The keyword groups of the serving conventions and quantised formats (docs/targets.md, "Python
# targets"): a function gets a group's keywords in every call (None where a call has no such input)
# when its declaration lists the group's value under the key, and none of them otherwise.
CSR_KEYWORDS = ("batch_indices", "positions", "kv_indices", "kv_indptr", "kv_last_page_len")
REQUEST_KEYWORDS = ("batch_indices", "positions", "seq_lens", "context_lens", "block_tables")
WINDOW_KEYWORDS = ("window_positions", "window_seq_lens", "window_size", "window_sinks")
CP_KEYWORDS = ("cp_positions", "cp_rank", "cp_world_size", "cp_interleave")
FORMAT_KEYWORDS = ("quant_format", "quant_rules", "quant_group", "format_cache", "format_scales", "format_fields",
                   "format_views")
FORMAT_FIELDS = ("k_codes", "v_codes", "k_scales", "v_scales", "k_zeros", "v_zeros", "rope")


class Caller:
    def __init__(self, cfg):
        self.convention = cfg["convention"]
        self.device = cfg["device"]
        versions = {"python": sys.version.split()[0]}
        if self.device == "cpu":
            os.environ["TRITON_INTERPRET"] = "1"  # Triton kernels on CPU tensors: the interpreter
        else:
            os.environ.pop("TRITON_INTERPRET", None)
        try:
            import numpy
            versions["numpy"] = numpy.__version__
            self.np = numpy
        except ImportError:
            raise Refusal("unavailable", f"{sys.executable} has no numpy: install it, or point --python / KVFUZZ_PYTHON "
                                         "at a Python that has it")
        if self.convention == "torch":
            try:
                import torch
            except ImportError:
                raise Refusal("unavailable", f"{sys.executable} has no torch: install it, point --python / KVFUZZ_PYTHON "
                                             "at a Python that has it, or use python-numpy:MODULE:FUNCTION (numpy arrays)")
            versions["torch"] = torch.__version__
            self.torch = torch
            if self.device != "cpu":
                if not torch.cuda.is_available():
                    raise Refusal("unavailable", f"torch {torch.__version__} sees no CUDA device")
                index = int(self.device.split(":")[1])
                if index >= torch.cuda.device_count():
                    raise Refusal("unavailable", f"no CUDA device {index} (torch sees {torch.cuda.device_count()})")
                torch.cuda.set_device(index)
                versions["device"] = torch.cuda.get_device_name(index)
            missing = [d for d in TORCH_DTYPE.values() if not hasattr(torch, d)]
            if missing:
                raise Refusal("unavailable", f"torch {torch.__version__} lacks {', '.join(missing)}")
        mod, self.fn = load_function(cfg["module"], cfg["function"])
        self.capabilities, self.capabilities_from = declared_capabilities(mod, self.fn, cfg["module"], cfg["function"])
        versions["function"] = f"{cfg['module']}:{cfg['function']}"
        self.versions = versions
        self.device_buffer = None

    # The keyword arguments besides the tensors: the torch convention of kvfuzz_triton.api.kv_append
    # (mla adds rope=k_pe; no other family adds a keyword).
    def kwargs(self, call, tensors):
        quantised = call["scale_kind"] != "none"
        kw = {"layout": call["layout"], "scale_kind": call["scale_kind"] if quantised else None,
              "k_scale": tensors.get("k_scale"), "v_scale": tensors.get("v_scale"),
              "k_scale_cache": tensors.get("k_scale_cache"), "v_scale_cache": tensors.get("v_scale_cache"),
              "invalid_slots": tensors.get("invalid_slots")}
        if "rope" in tensors:
            kw["rope"] = tensors["rope"]
        if self.convention == "numpy":  # numpy has no bf16 or fp8: the arrays hold their bits
            kw["input_dtype"] = call["input_dtype"]
            kw["cache_dtype"] = call["cache_dtype"]
        caps = self.capabilities or {}

        def declares(key, value):
            listed = caps.get(key)
            return isinstance(listed, list) and value in listed

        if declares("addressings", "csr"):  # FlashInfer's append_paged_kv_cache arrays; slot_mapping None
            kw.update({n: tensors.get("csr_" + n) for n in CSR_KEYWORDS})
        if declares("inputs", "requests"):  # batch_indices and positions: the CSR call's own, the same values
            kw.update({n: tensors.get("req_" + n) if kw.get(n) is None else kw[n] for n in REQUEST_KEYWORDS})
        if declares("windows", "positions"):
            ring = call.get("ring") or {}
            kw.update(window_positions=tensors.get("window_positions"), window_seq_lens=tensors.get("window_seq_lens"),
                      window_size=ring.get("size", 0), window_sinks=ring.get("sinks", 0))
        if declares("cp_inputs", "positions"):
            shard = call.get("shard") or {}
            kw.update(cp_positions=tensors.get("cp_positions"), cp_rank=shard.get("rank", 0),
                      cp_world_size=shard.get("world_size", 1), cp_interleave=shard.get("interleave", 1))
        if any(f != "none" for f in caps.get("quant_formats") or []):
            fmt = call.get("format")
            if fmt is None:
                kw.update({n: None for n in FORMAT_KEYWORDS})
            else:
                fields = {}
                for name in FORMAT_FIELDS:
                    f = fmt[name]
                    if name not in fmt["stored"]:
                        fields[name] = None
                    elif isinstance(f, str):
                        raise ValueError(f"{fmt['name']} {name}: {f}")
                    else:
                        fields[name] = dict(f, **fmt["stored"][name])
                kw.update(quant_format=fmt["name"], quant_rules=dict(fmt["rules"]), quant_group=fmt["group"],
                          format_cache=tensors.get("format_cache"), format_scales=tensors.get("format_scales"),
                          format_fields=fields,
                          format_views={n: tensors.get("view_" + n) for n in FORMAT_FIELDS if n in fmt["stored"]})
        return kw

    def run(self, image, call):
        if call.get("cp_producer"):
            raise ValueError("a context-parallel call with a slot-mapping producer: a Python function gets kvfuzz's "
                             "slot mappings (launch mode only)")
        every = views(call) + serving_views(call)
        fmt = call.get("format")
        if fmt:  # the format's two byte buffers (the same one when the scales live in the cache) and typed views
            every.append(("format_cache", fmt["cache"], "uint8", (fmt["cache_bytes"],), (1,)))
            every.append(("format_scales", fmt["scales"], "uint8", (fmt["scales_bytes"],), (1,)))
            every += [("view_" + v[0],) + tuple(v[1:]) for v in format_views(fmt)]
        if self.convention == "numpy":
            np = self.np
            buf = image.buffer()
            tensors = {}
            for name, offset, dtype, shape, strides in every:
                t = np.dtype(NUMPY_DTYPE[dtype])
                tensors[name] = np.ndarray(shape, t, buffer=buf, offset=offset,
                                           strides=tuple(st * t.itemsize for st in strides))
        else:
            torch = self.torch
            host = torch.frombuffer(image.buffer(), dtype=torch.uint8) if image.image_bytes else torch.empty(0, dtype=torch.uint8)
            if self.device == "cpu":
                whole = host
            else:
                if self.device_buffer is None or self.device_buffer.numel() < image.image_bytes:
                    self.device_buffer = None
                    self.device_buffer = torch.empty(image.image_bytes, dtype=torch.uint8, device=self.device)
                whole = self.device_buffer[:image.image_bytes]
                whole.copy_(host)
            tensors = {}
            for name, offset, dtype, shape, strides in every:
                t = getattr(torch, TORCH_DTYPE[dtype])
                size = t.itemsize if hasattr(t, "itemsize") else torch.empty(0, dtype=t).element_size()
                span = span_elements(shape, strides) * size
                tensors[name] = whole[offset:offset + span].view(t).as_strided(shape, strides)
        positional = [tensors.pop(n, None) for n in ("key", "value", "key_cache", "value_cache", "slot_mapping")]
        kw = self.kwargs(call, tensors)
        self.fn(*positional, **kw)
        if self.convention == "torch" and self.device != "cpu":
            self.torch.cuda.synchronize()
            host.copy_(whole)

    def dead_device(self):
        """After an exception: the CUDA context's sticky error, if it has one."""
        if self.convention != "torch" or self.device == "cpu":
            return None
        try:
            self.torch.cuda.synchronize()
            self.torch.zeros(1, device=self.device).add_(1).cpu()
        except Exception as e:
            return exception_text(e)
        return None


def load_function(module, function):
    if module.endswith(".py") or os.sep in module:
        path = os.path.abspath(module)
        if not os.path.isfile(path):
            raise Refusal("bad_target", f"no such Python file: {path}")
        name = os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        sys.path.insert(0, os.path.dirname(path))
        try:
            spec.loader.exec_module(mod)
        except Exception as e:
            raise import_refusal(module, e)
    else:
        try:
            mod = importlib.import_module(module)
        except Exception as e:
            raise import_refusal(module, e)
    if not hasattr(mod, function):
        raise Refusal("bad_target", f"module {module} ({getattr(mod, '__file__', '?')}) has no attribute {function!r}")
    fn = getattr(mod, function)
    if not callable(fn):
        raise Refusal("bad_target", f"{module}.{function} is a {type(fn).__name__}, not a function")
    return mod, fn


def declared_capabilities(mod, fn, module, function):
    """(dict, where) of what the function declares it supports, or (None, None): the attribute
    FUNCTION.kvfuzz_capabilities, or the module's FUNCTION_capabilities() (one of the two). Sets and
    tuples become lists; kvfuzz checks keys and values (gen/capabilities.h)."""
    attr = getattr(fn, "kvfuzz_capabilities", None)
    companion = getattr(mod, function + "_capabilities", None)
    if attr is not None and companion is not None:
        raise Refusal("bad_target", f"{module}: both {function}.kvfuzz_capabilities and {function}_capabilities() "
                                    "declare capabilities; keep one")
    if attr is not None:
        where, caps = f"{module}:{function}.kvfuzz_capabilities", attr
    elif companion is not None:
        where = f"{module}:{function}_capabilities()"
        if not callable(companion):
            raise Refusal("bad_target", f"{where[:-2]} is a {type(companion).__name__}, expected a function returning a dict")
        try:
            caps = companion()
        except Exception as e:
            raise Refusal("bad_target", f"{where} raised {exception_text(e)}")
    else:
        return None, None
    if not isinstance(caps, dict):
        raise Refusal("bad_target", f"{where} is a {type(caps).__name__}, expected a dict such as "
                                    "{'layouts': ['paged_nhd'], 'input_dtypes': ['f16'], 'head_dims': [64, 128]}")

    def plain(v):
        if isinstance(v, (bool, str)) or v is None:
            return v
        if isinstance(v, (set, frozenset)):
            return sorted((plain(x) for x in v), key=repr)
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if hasattr(v, "__index__"):
            return int(v.__index__())  # numpy integers
        return repr(v)  # kvfuzz names the key and the form it expected

    return {str(k): plain(v) for k, v in caps.items()}, where


def import_refusal(module, e):
    """A module that is not there, or raises while imported, is bad input; a dependency it lacks is
    this machine's problem."""
    if isinstance(e, ImportError) and e.name and not (module == e.name or module.startswith(e.name + ".")):
        return Refusal("unavailable", f"importing {module} failed: it needs {e.name}, which {sys.executable} lacks "
                                      f"({exception_text(e)})")
    if isinstance(e, ModuleNotFoundError):
        return Refusal("bad_target", f"no module named {module!r} on the Python path ({os.pathsep.join(sys.path)}); "
                                     "set PYTHONPATH, or give the module as a path to its .py file")
    return Refusal("bad_target", f"importing {module} failed: {exception_text(e)}")


# ---------------------------------------------------------------------------------------------

def exception_text(e):
    """The traceback's last line, and where it was raised."""
    text = traceback.format_exception_only(type(e), e)[-1].strip()
    frames = traceback.extract_tb(e.__traceback__)
    if frames:
        f = frames[-1]
        text += f" (at {os.path.basename(f.filename)}:{f.lineno} in {f.name})"
    return text[:4000]


def main():
    cfg = json.loads(sys.argv[1])
    sock = cfg["sock"]
    if cfg.get("triton_pkg"):
        sys.path.insert(0, cfg["triton_pkg"])
    if cfg.get("default_pkg"):
        sys.path.append(cfg["default_pkg"])
    try:
        runner = Launcher(cfg) if cfg["mode"] == "launch" else Caller(cfg)
    except Refusal as r:
        send(sock, {"ok": False, "kind": r.kind, "message": str(r)})
        return
    except Exception as e:
        send(sock, {"ok": False, "kind": "unavailable", "message": "the Python worker failed to start: " + exception_text(e)})
        return
    hello = {"ok": True, "versions": runner.versions}
    if getattr(runner, "capabilities", None) is not None:
        hello["capabilities"] = runner.capabilities
        hello["capabilities_from"] = runner.capabilities_from
    send(sock, hello)
    image = SharedImage(cfg["memfd"])
    while True:
        request = recv(sock)
        if request is None:
            return  # kvfuzz closed the socket: done
        image.prepare(request["map_bytes"], request["image_bytes"])
        try:
            for call in request["calls"]:
                runner.run(image, call)
            reply = {"status": "ok"}
        except Exception as e:
            dead = runner.dead_device() if isinstance(runner, Caller) else None
            reply = {"status": "fault" if dead else "error",
                     "message": exception_text(e) + (f"; the CUDA context is dead: {dead}" if dead else "")}
        send(sock, reply)
        if reply["status"] == "fault":
            os._exit(4)


main()
