"""The context-parallel slot-mapping producer: one rank's slot_mapping from global positions and block
tables, bit for bit kernels/cuda/cp_slot_mapping.cuh's cp_rank_slot (src/case/context_parallel.h
states the formula kvfuzz checks it against; docs/contract.md, "Serving conventions").

Rank `rank` of `world_size` with interleave I holds global position p iff (p // I) % world_size ==
rank, at local position (p // (I * world_size)) * I + p % I of its shard, in block
block_tables[request][local // block_size] at offset local % block_size. Every other row (another
rank's token, padding: position or request < 0) gets -1. All arithmetic is int64; the slot is
narrowed to int32 as the CUDA producer narrows it.

    cp_slot_mapping(positions, requests, block_tables, block_size, *, rank, world_size, interleave,
                    out=None) -> torch.Tensor

  positions     int32 [T], each row's global position (-1: padding)
  requests      int32 [T], each row's request: its row of block_tables (-1: padding)
  block_tables  int32 [requests, width], shard-local block ids (-1 past a shorter table's end); the
                last dim contiguous, rows any distance apart
  block_size    slots per block of a rank's shard (>= 1)
  out           int32 [T] to write into (contiguous), or None for a new tensor; returned

  Arguments are validated (ValueError names the problem); the tables are read only where the rank
  holds a row's token, and those reads are the caller's to keep inside the tables (positions a table
  covers, requests < block_tables.shape[0]). CPU tensors run under TRITON_INTERPRET=1.

    launch_cp_slot_mapping(CpSlotMappingParams(...))

  The raw entry point (the interpreter worker's, with HostPtr shims): CpSlotMappingParams mirrors
  kvf::CpSlotMappingParams field for field (table_width is the element distance between table rows).

Grid: cdiv(T, ROWS_PER_PROGRAM) programs of ROWS_PER_PROGRAM rows, one row per lane (the CUDA
launch's 256 threads per block); the ahead-of-time build (kernels/triton/aot_compile.py) compiles
this one specialisation.
"""
import dataclasses

import triton
import triton.language as tl

from .api import _integer, _is_tensor, check_ranks, check_resolved, interpreting

ROWS_PER_PROGRAM = 256  # kvf::kCpSlotMappingThreads
NUM_WARPS = 4


@triton.jit(do_not_specialize=["table_width", "num_rows", "block_size", "rank", "world_size", "interleave"])
def cp_slot_mapping_kernel(
    positions_ptr,     # int32 [num_rows] global position of each row's token, -1 = padding
    requests_ptr,      # int32 [num_rows] request of each row, -1 = padding
    block_tables_ptr,  # int32 [num_requests, table_width] shard-local block ids, row-major
    slot_mapping_ptr,  # int32 [num_rows] out: the rank's slot of each row, or -1
    table_width, num_rows, block_size,  # int64
    rank, world_size, interleave,  # int32: this rank, N >= 1, I >= 1
    BLOCK: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    in_range = rows < num_rows
    pos = tl.load(positions_ptr + rows, mask=in_range, other=-1).to(tl.int64)
    request = tl.load(requests_ptr + rows, mask=in_range, other=-1).to(tl.int64)
    interleave64 = interleave.to(tl.int64)
    mine = (pos >= 0) & (request >= 0)  # padding: -1
    mine = mine & (pos // interleave64 % world_size == rank)  # another rank's token: -1
    local = pos // (interleave64 * world_size) * interleave64 + pos % interleave64
    block = tl.load(block_tables_ptr + (request * table_width + local // block_size), mask=mine, other=0).to(tl.int64)
    slot = tl.where(mine, block * block_size + local % block_size, -1)
    tl.store(slot_mapping_ptr + rows, slot.to(tl.int32), mask=in_range)


@dataclasses.dataclass
class CpSlotMappingParams:
    """One producer call in raw form; mirrors kvf::CpSlotMappingParams (kernels/cuda/cp_slot_mapping.cuh).
    Pointer fields take torch tensors, or HostPtr under the interpreter (all int32)."""
    positions: object
    requests: object
    block_tables: object
    table_width: int  # elements from one block table row to the next
    num_rows: int
    block_size: int
    rank: int
    world_size: int
    interleave: int
    slot_mapping: object  # out


def launch_cp_slot_mapping(p):
    """Runs cp_slot_mapping_kernel on raw parameters; launches nothing for num_rows == 0.
    Returns the compiled kernel on the GPU, None otherwise."""
    check_ranks(p.rank, p.world_size, p.interleave)
    if p.block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {p.block_size}")
    if p.num_rows < 0 or p.table_width < 0:
        raise ValueError("num_rows and table_width must be >= 0")
    if p.num_rows == 0:
        return None  # never launch an empty grid
    grid = (triton.cdiv(p.num_rows, ROWS_PER_PROGRAM),)
    return cp_slot_mapping_kernel[grid](
        p.positions, p.requests, p.block_tables, p.slot_mapping, p.table_width, p.num_rows, p.block_size,
        p.rank, p.world_size, p.interleave, BLOCK=ROWS_PER_PROGRAM, num_warps=NUM_WARPS)


def cp_slot_mapping(positions, requests, block_tables, block_size, *, rank, world_size, interleave, out=None):
    """Rank `rank`'s slot_mapping (int32 [T], -1 where it holds no token); see the module docstring."""
    import torch

    def fail(msg):
        raise ValueError(f"cp_slot_mapping: {msg}")

    named = (("positions", positions), ("requests", requests), ("block_tables", block_tables))
    for name, t in named + (("out", out),):
        if (t is not None or name != "out") and not _is_tensor(t):
            fail(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t is not None and t.dtype != torch.int32:
            fail(f"{name} must be int32, got {t.dtype}")
    check_resolved(named + (("out", out),), fail)
    for name, t in named[:2]:
        if t.dim() != 1:
            fail(f"{name} must be 1-D [rows], got shape {tuple(t.shape)}")
    if block_tables.dim() != 2:
        fail(f"block_tables must be 2-D [requests, width], got shape {tuple(block_tables.shape)}")
    num_rows = positions.shape[0]
    if requests.shape[0] != num_rows:
        fail(f"positions has {num_rows} rows but requests {requests.shape[0]}")
    if out is not None and tuple(out.shape) != (num_rows,):
        fail(f"out must have shape ({num_rows},), got {tuple(out.shape)}")
    for name, t in named[:2] + (("out", out),):
        if t is not None and t.shape[0] > 1 and t.stride(0) != 1:
            fail(f"{name} must be contiguous")
    if block_tables.shape[1] > 1 and block_tables.stride(1) != 1:
        fail("the last dim of block_tables must be contiguous (stride 1)")
    size = _integer(block_size)
    if size is None or size < 1:
        fail(f"block_size must be an integer >= 1, got {block_size!r}")
    try:
        rank, world_size, interleave = check_ranks(rank, world_size, interleave)
    except ValueError as e:
        fail(str(e))
    devices = {t.device for _, t in named + (("out", out),) if t is not None}
    if len(devices) != 1:
        fail(f"all tensors must be on one device, got {sorted(str(d) for d in devices)}")
    device = devices.pop()
    if device.type == "cpu" and not interpreting():
        fail("CPU tensors run only under Triton's interpreter (TRITON_INTERPRET=1)")
    if out is None:
        out = torch.empty(num_rows, dtype=torch.int32, device=device)
    p = CpSlotMappingParams(positions=positions, requests=requests, block_tables=block_tables,
                            table_width=block_tables.stride(0), num_rows=num_rows, block_size=size, rank=rank,
                            world_size=world_size, interleave=interleave, slot_mapping=out)
    if device.type == "cuda":
        with torch.cuda.device(device):
            launch_cp_slot_mapping(p)
    else:
        launch_cp_slot_mapping(p)
    return out
