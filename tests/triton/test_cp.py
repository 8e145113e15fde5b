"""Context-parallel shards in the Triton kernels (docs/contract.md "Serving conventions"):

  - the slot-mapping producer (kvfuzz_triton.cp_slot_mapping) against an independent formula, row by
    row, on many random batches and the edge cases (one rank, an interleave past every position,
    padding rows, positions near 2^31 - 1, block tables with -1 past their end, grids of several
    programs);
  - the append's rank filter (input positions): each rank writes exactly the rows whose token it holds,
    and the ranks together write what the plain append writes;
  - argument errors of the raw and torch entry points.

Global position p, N ranks, interleave I: p = c * (I * N) + k * I + j with 0 <= j < I belongs to rank
k at local position c * I + j. The formula below is written from that decomposition, not from the
kernel's expressions.
"""
import numpy as np
import pytest

from cases import make_case, run_raw, run_torch
from reference import expected
from test_kv_append import DEVICE, GPU, needs_torch, rng  # noqa: F401  (rng: a fixture)

interp_only = pytest.mark.skipif(GPU, reason="the raw backend passes host pointers (interpreter only)")

CANARY = np.int32(-0x5A5A5A5B)


def owner_and_local(p, world_size, interleave):
    cycle, rest = divmod(p, interleave * world_size)
    return rest // interleave, cycle * interleave + rest % interleave


def formula(positions, requests, tables, block_size, rank, world_size, interleave):
    """Rank `rank`'s slot of each row, or -1; the slot narrowed to int32 as the producers store it."""
    out = []
    for p, r in zip(positions.tolist(), requests.tolist()):
        if p < 0 or r < 0:
            out.append(-1)
            continue
        k, local = owner_and_local(p, world_size, interleave)
        if k != rank:
            out.append(-1)
            continue
        slot = int(tables[r, local // block_size]) * block_size + local % block_size
        out.append(int(np.array(slot, np.int64).astype(np.int32)))
    return np.array(out, np.int32)


def produce(positions, requests, tables, block_size, rank, world_size, interleave, guard=7):
    """Runs the producer through HostPtr on numpy buffers; returns rank's slot_mapping and checks
    that no element past it and no input changed."""
    from kvfuzz_triton import CpSlotMappingParams, HostPtr, launch_cp_slot_mapping
    positions, requests = np.ascontiguousarray(positions, np.int32), np.ascontiguousarray(requests, np.int32)
    tables = np.ascontiguousarray(tables, np.int32)
    inputs = (positions.copy(), requests.copy(), tables.copy())
    t = len(positions)
    out = np.full(t + guard, CANARY, np.int32)
    launch_cp_slot_mapping(CpSlotMappingParams(
        positions=HostPtr.of(positions, "i32"), requests=HostPtr.of(requests, "i32"),
        block_tables=HostPtr.of(tables, "i32"), table_width=tables.shape[1], num_rows=t, block_size=block_size,
        rank=rank, world_size=world_size, interleave=interleave, slot_mapping=HostPtr.of(out, "i32")))
    assert (out[t:] == CANARY).all(), "the producer wrote past its rows"
    for before, after in zip(inputs, (positions, requests, tables)):
        assert (before == after).all(), "the producer changed an input"
    return out[:t]


def random_batch(rng, world_size, interleave, block_size, *, num_requests=None, max_position=200,
                 base_position=0, padding=True, free_blocks=64):
    """(positions, requests, tables): each request's new tokens at random distinct positions, its
    table as long as its longest-reaching local position needs (-1 past a shorter table's end),
    padding rows (position and/or request -1) in between, rows shuffled."""
    num_requests = num_requests or int(rng.integers(1, 6))
    positions, requests, lengths = [], [], []
    for r in range(num_requests):
        n = int(rng.integers(1, 12))
        ps = base_position + rng.choice(max_position, size=n, replace=False)
        positions += ps.tolist()
        requests += [r] * n
        lengths.append(max(owner_and_local(int(p), world_size, interleave)[1] for p in ps) // block_size + 1)
    width = max(lengths)
    tables = np.full((num_requests, width), -1, np.int64)
    blocks = rng.permutation(max(free_blocks, num_requests * width))
    for r, n in enumerate(lengths):
        tables[r, :n] = blocks[r * width:r * width + n]
    if padding:
        for _ in range(int(rng.integers(0, 4))):
            kind = int(rng.integers(0, 3))  # both -1, position -1 alone, request -1 alone
            positions.append(-1 if kind != 2 else int(rng.integers(0, max_position)))
            requests.append(-1 if kind != 1 else int(rng.integers(0, num_requests)))
    order = rng.permutation(len(positions))
    return (np.array(positions, np.int64)[order].astype(np.int32), np.array(requests, np.int32)[order],
            tables.astype(np.int32))


def check_every_rank(positions, requests, tables, block_size, world_size, interleave):
    """Every rank's mapping equals the formula's, and each non-padding row belongs to exactly one rank."""
    claimed = np.zeros(len(positions), np.int64)
    for rank in range(world_size):
        got = produce(positions, requests, tables, block_size, rank, world_size, interleave)
        want = formula(positions, requests, tables, block_size, rank, world_size, interleave)
        diff = np.flatnonzero(got != want)
        assert diff.size == 0, (f"rank {rank} of {world_size}, interleave {interleave}, block_size {block_size}: "
                                f"rows {diff[:8].tolist()} (positions {positions[diff[:8]].tolist()}) got "
                                f"{got[diff[:8]].tolist()}, want {want[diff[:8]].tolist()}")
        claimed += got != -1
    real = (positions >= 0) & (requests >= 0)
    assert (claimed[real] == 1).all() and (claimed[~real] == 0).all()


# ---------------------------------------------------------------------------------------------
# The slot-mapping producer

@interp_only
@pytest.mark.parametrize("seed", range(40))
def test_producer_matches_the_formula_on_random_batches(seed):
    rng = np.random.default_rng(seed)
    world_size = int(rng.choice([1, 2, 3, 4, 5, 8, 16]))
    interleave = int(rng.choice([1, 2, 3, 7, 16, 64]))
    block_size = int(rng.choice([1, 2, 3, 5, 8, 16, 17]))
    check_every_rank(*random_batch(rng, world_size, interleave, block_size), block_size, world_size, interleave)


@interp_only
def test_producer_with_one_rank_maps_every_token():
    # N = 1: the local position is the global one, every row but padding is rank 0's.
    rng = np.random.default_rng(1)
    positions, requests, tables = random_batch(rng, 1, 3, 4)
    got = produce(positions, requests, tables, 4, 0, 1, 3)
    real = (positions >= 0) & (requests >= 0)
    want = tables[requests[real], positions[real] // 4] * 4 + positions[real] % 4
    assert (got[real] == want).all() and (got[~real] == -1).all()


@interp_only
@pytest.mark.parametrize("world_size", [2, 3, 8])
def test_producer_with_an_interleave_past_every_position_gives_rank_0_everything(world_size):
    rng = np.random.default_rng(world_size)
    positions, requests, tables = random_batch(rng, world_size, 1000, 5, max_position=300)
    check_every_rank(positions, requests, tables, 5, world_size, 1000)
    real = (positions >= 0) & (requests >= 0)
    assert (produce(positions, requests, tables, 5, 0, world_size, 1000)[real] >= 0).all()
    for rank in range(1, world_size):
        assert (produce(positions, requests, tables, 5, rank, world_size, 1000) == -1).all()


@interp_only
def test_producer_padding_rows():
    # Position -1, request -1, or both: -1 on every rank, and the table is never read for them
    # (request -1 with a valid position would read row -1).
    positions = np.array([-1, 5, -1, 3, 0], np.int32)
    requests = np.array([-1, -1, 0, 0, 0], np.int32)
    tables = np.array([[4, 9]], np.int32)
    for rank in range(2):
        got = produce(positions, requests, tables, 2, rank, 2, 1)
        assert (got[:3] == -1).all()
    assert produce(positions, requests, tables, 2, 0, 2, 1).tolist() == [-1, -1, -1, -1, 8]
    assert produce(positions, requests, tables, 2, 1, 2, 1).tolist() == [-1, -1, -1, 9, -1]


@interp_only
@pytest.mark.parametrize("world_size,interleave", [(1, 1), (4, 3), (3, 16), (8, 1)])
def test_producer_positions_near_int32_max(world_size, interleave):
    # Positions up to 2^31 - 1 (the int32 input's largest): owner and local position in int64, blocks
    # of 2^26 slots keep the tables short; slots past 2^31 - 1 wrap as the CUDA producer's narrowing.
    rng = np.random.default_rng(world_size * 100 + interleave)
    block_size = 1 << 26
    positions, requests, tables = random_batch(rng, world_size, interleave, block_size, max_position=50000,
                                               base_position=2 ** 31 - 50000, free_blocks=48)
    positions[rng.integers(0, len(positions))] = 2 ** 31 - 1
    requests[requests < 0] = 0  # keep every row real: the top position needs a table row
    positions[positions < 0] = 2 ** 31 - 2
    for r in range(tables.shape[0]):  # the longest reach, 2^31 - 1, in every request's table
        need = owner_and_local(2 ** 31 - 1, world_size, interleave)[1] // block_size + 1
        if tables.shape[1] < need:
            tables = np.concatenate([tables, np.full((tables.shape[0], need - tables.shape[1]), -1, np.int32)], 1)
        row = tables[r]
        row[row < 0] = 40 + rng.permutation(8)[:int((row < 0).sum())]
    check_every_rank(positions, requests, tables, block_size, world_size, interleave)


@interp_only
def test_producer_reads_minus_one_past_a_shorter_table_as_the_formula_does():
    # A position past its table's real entries reads the -1 there: block -1, the slot
    # -block_size + offset, as kernels/cuda/cp_slot_mapping.cuh computes it (validation never makes
    # such a case; the producers must still agree).
    positions = np.array([0, 9, 4], np.int32)
    requests = np.array([0, 0, 1], np.int32)
    tables = np.array([[7, -1, -1], [2, 3, 5]], np.int32)
    got = produce(positions, requests, tables, 4, 0, 1, 1)
    assert got.tolist() == [28, -4 + 1, 12]
    assert (got == formula(positions, requests, tables, 4, 0, 1, 1)).all()


@interp_only
def test_producer_grid_of_several_programs():
    # 700 rows: three programs of 256 rows, the last one masked at row 700.
    rng = np.random.default_rng(7)
    positions, requests, tables = random_batch(rng, 3, 2, 8, num_requests=3, max_position=2000, padding=False)
    reps = -(-700 // len(positions))
    positions = np.tile(positions, reps)[:700]
    requests = np.tile(requests, reps)[:700]
    check_every_rank(positions, requests, tables, 8, 3, 2)


@interp_only
def test_producer_empty_batch_launches_nothing():
    from kvfuzz_triton import CpSlotMappingParams, HostPtr, launch_cp_slot_mapping
    out = np.full(4, CANARY, np.int32)
    nothing = np.zeros(1, np.int32)
    p = CpSlotMappingParams(*(HostPtr.of(nothing, "i32"),) * 3, table_width=1, num_rows=0, block_size=1, rank=0,
                            world_size=1, interleave=1, slot_mapping=HostPtr.of(out, "i32"))
    assert launch_cp_slot_mapping(p) is None
    assert (out == CANARY).all()


def test_producer_raw_arguments_refused():
    from kvfuzz_triton import CpSlotMappingParams, launch_cp_slot_mapping
    base = dict(positions=None, requests=None, block_tables=None, table_width=1, num_rows=3, block_size=4, rank=0,
                world_size=2, interleave=1, slot_mapping=None)
    for change, match in [({"rank": 2}, r"rank must be an integer in \[0, world_size = 2\), got 2"),
                          ({"rank": -1}, "rank must be"), ({"world_size": 0}, r"world_size must be an integer in \[1, 2\^31\)"),
                          ({"interleave": 0}, "interleave must be"), ({"interleave": 2 ** 31}, "interleave must be"),
                          ({"block_size": 0}, "block_size must be >= 1"), ({"rank": True}, "rank must be")]:
        with pytest.raises(ValueError, match=match):
            launch_cp_slot_mapping(CpSlotMappingParams(**dict(base, **change)))


@needs_torch
class TestProducerTorchApi:
    def setup_method(self):
        import torch
        self.torch = torch
        self.positions = torch.tensor([0, 5, 2, -1, 7], dtype=torch.int32, device=DEVICE)
        self.requests = torch.tensor([0, 0, 1, -1, 1], dtype=torch.int32, device=DEVICE)
        self.tables = torch.tensor([[3, 1, -1], [0, 2, 4]], dtype=torch.int32, device=DEVICE)

    def call(self, **kw):
        from kvfuzz_triton import cp_slot_mapping
        args = dict(positions=self.positions, requests=self.requests, block_tables=self.tables, block_size=2,
                    rank=0, world_size=2, interleave=1)
        args.update(kw)
        return cp_slot_mapping(**args)

    def expect(self, match, **kw):
        with pytest.raises(ValueError, match="cp_slot_mapping: " + match):
            self.call(**kw)

    def test_negative_views_are_refused(self):
        neg = self.torch._neg_view
        self.expect(r"positions is a negative view .*positions.resolve_neg\(\)", positions=neg(self.positions))
        self.expect("block_tables is a negative view", block_tables=neg(self.tables))

    def test_matches_the_formula_and_fills_out(self):
        t = self.torch
        for rank in range(2):
            want = formula(self.positions.cpu().numpy(), self.requests.cpu().numpy(), self.tables.cpu().numpy(), 2,
                           rank, 2, 1)
            got = self.call(rank=rank)
            assert got.dtype == t.int32 and got.cpu().numpy().tolist() == want.tolist()
            out = t.full((5,), 99, dtype=t.int32, device=DEVICE)
            assert self.call(rank=rank, out=out) is out and out.cpu().numpy().tolist() == want.tolist()
        wide = t.full((2, 8), -1, dtype=t.int32, device=DEVICE)
        wide[:, :3] = self.tables
        assert self.call(block_tables=wide[:, :3]).cpu().tolist() == self.call().cpu().tolist()  # row stride 8

    def test_argument_errors(self):
        t = self.torch
        self.expect("positions must be int32, got torch.int64", positions=self.positions.long())
        self.expect("block_tables must be int32", block_tables=self.tables.long())
        self.expect("out must be int32", out=t.zeros(5, dtype=t.int64, device=DEVICE))
        self.expect("requests must be a torch.Tensor, got list", requests=[0, 0, 1, -1, 1])
        self.expect("block_tables must be a torch.Tensor, got NoneType", block_tables=None)
        self.expect(r"positions must be 1-D \[rows\]", positions=self.positions.reshape(5, 1))
        self.expect(r"block_tables must be 2-D \[requests, width\]", block_tables=self.tables.flatten())
        self.expect("positions has 5 rows but requests 4", requests=self.requests[:4])
        self.expect(r"out must have shape \(5,\)", out=t.zeros(4, dtype=t.int32, device=DEVICE))
        self.expect("positions must be contiguous", positions=t.zeros(10, dtype=t.int32, device=DEVICE)[::2])
        self.expect("the last dim of block_tables must be contiguous", block_tables=self.tables.t().contiguous().t())
        self.expect("block_size must be an integer >= 1", block_size=0)
        self.expect(r"rank must be an integer in \[0, world_size = 2\)", rank=2)
        self.expect("world_size must be an integer", world_size=0)
        self.expect("interleave must be an integer", interleave=-3)
        if GPU:
            self.expect("all tensors must be on one device", requests=self.requests.cpu())


# ---------------------------------------------------------------------------------------------
# The append's rank filter (input positions)

def rank_rows(positions, rank, world_size, interleave):
    """Rows rank `rank` writes: padding (position -1) is the slot's to skip, every rank reads it."""
    return np.array([p < 0 or owner_and_local(p, world_size, interleave)[0] == rank for p in positions.tolist()])


def check_ranks_write_their_rows(case, positions, world_size, interleave, **kw):
    """Rank by rank on one case: each rank's call changes exactly what the plain append of its rows
    (the others' slots made padding) changes; after the last rank the buffers are the plain append's."""
    slots = case.slots.copy()
    final, final_invalid = expected(case)
    invalid_before = int(case.buffers["invalid"][0]) if case.counter else 0
    invalid_total = 0
    for rank in range(world_size):
        case.slots[:] = np.where(rank_rows(positions, rank, world_size, interleave), slots, -1)
        want, invalid = expected(case)
        invalid_total += invalid
        case.slots[:] = slots
        run_raw(case, cp=(positions, rank, world_size, interleave), **kw)
        for name, buf in case.buffers.items():
            if name == "invalid":
                assert int(buf[0]) == invalid_before + invalid_total, f"rank {rank}: invalid-slot counter"
                continue
            if name == "slots":  # want's copy holds the masked slots
                continue
            diff = np.flatnonzero(buf != want[name])
            assert diff.size == 0, f"rank {rank} of {world_size} (interleave {interleave}): {name} differs at {diff[:8].tolist()}"
    assert invalid_total == final_invalid
    for name, buf in case.buffers.items():
        if name != "invalid":
            assert (buf == final[name]).all(), f"{name}: the ranks together differ from the plain append"


def cp_positions(rng, case, world_size, interleave):
    """Distinct global positions for the case's rows (-1 where the slot is padding), spread so that
    every rank gets some."""
    n = case.num_slots
    positions = rng.choice(max(4 * n, world_size * interleave * 3), size=n, replace=False).astype(np.int32)
    positions[case.slots < 0] = -1
    return positions


@interp_only
@pytest.mark.parametrize("world_size,interleave", [(1, 1), (2, 1), (3, 2), (4, 16), (8, 3)])
@pytest.mark.parametrize("slot_dtype", [np.int32, np.int64])
def test_each_rank_writes_exactly_its_tokens(rng, world_size, interleave, slot_dtype):
    # Padding rows (slot -1, position -1) and invalid slots (counted by the rank holding their token).
    case = make_case(rng, num_slots=12, num_blocks=5, block_size=4, slot_dtype=slot_dtype, pad=1)
    check_ranks_write_their_rows(case, cp_positions(rng, case, world_size, interleave), world_size, interleave)


@interp_only
@pytest.mark.parametrize("variant", ["token", "head"])
@pytest.mark.parametrize("input_dtype,cache_dtype,scale_kind,layout", [
    ("bf16", "bf16", "none", "hnd"), ("f16", "int8", "per_token_head", "nhd"), ("f32", "fp8_e4m3", "per_block", "hnd"),
    ("f16", "f16", "none", "vllm_legacy")])
def test_rank_filter_with_the_aot_tile(rng, variant, input_dtype, cache_dtype, scale_kind, layout):
    # The tile the triton target runs; a rank's skipped row must leave its per_token_head scales alone too.
    from kvfuzz_triton.api import AOT_TILE
    case = make_case(rng, input_dtype=input_dtype, cache_dtype=cache_dtype, scale_kind=scale_kind, layout=layout,
                     values="bits" if scale_kind == "none" else "values", magnitude=20.0, num_heads=5,
                     head_dim=16 if layout == "vllm_legacy" else 72, num_slots=6, num_blocks=3, block_size=3)
    check_ranks_write_their_rows(case, cp_positions(rng, case, 3, 2), 3, 2, variant=variant, tile=AOT_TILE,
                                 fp8_software=True)


@interp_only
def test_rank_filter_with_positions_near_int32_max(rng):
    case = make_case(rng, num_slots=6, num_blocks=3, block_size=4, slot_dtype=np.int32)
    positions = (2 ** 31 - 1 - rng.choice(64, size=6, replace=False)).astype(np.int32)
    positions[0] = 2 ** 31 - 1
    positions[case.slots < 0] = -1
    check_ranks_write_their_rows(case, positions, 5, 3)


def test_raw_rank_arguments_refused():
    from kvfuzz_triton import KvAppendParams, check_params
    p = KvAppendParams(key=None, value=None, key_stride_token=0, key_stride_head=0, value_stride_token=0,
                       value_stride_head=0, slot_mapping=None, num_slots=0, k_cache=None, v_cache=None,
                       num_blocks=1, block_size=1, stride_block=1, stride_pos=1, stride_head=1, num_heads=1,
                       head_dim=1, has_value=False, cp_rank=3, cp_world_size=3)
    with pytest.raises(ValueError, match=r"cp_rank must be an integer in \[0, cp_world_size = 3\), got 3"):
        check_params(p)
    p.cp_rank, p.cp_interleave = 0, 0
    with pytest.raises(ValueError, match=r"cp_interleave must be an integer in \[1, 2\^31\)"):
        check_params(p)


@needs_torch
def test_torch_api_rank_filter(rng):
    import torch
    case = make_case(rng, num_slots=8, num_blocks=4, block_size=3, slot_dtype=np.int32, counter=False)
    positions = cp_positions(rng, case, 3, 2)
    slots = case.slots.copy()
    case.slots[:] = np.where(rank_rows(positions, 1, 3, 2), slots, -1)
    want, _ = expected(case)
    case.slots[:] = slots
    run_torch(case, DEVICE, cp_positions=torch.from_numpy(positions).to(DEVICE), cp_rank=1, cp_world_size=3,
              cp_interleave=2)
    for name, buf in case.buffers.items():
        assert name == "slots" or (buf == want[name]).all(), name


@needs_torch
class TestAppendRankArguments:
    def setup_method(self):
        import torch
        self.torch = torch
        z = dict(dtype=torch.float16, device=DEVICE)
        self.args = dict(key=torch.zeros(4, 2, 8, **z), value=torch.zeros(4, 2, 8, **z),
                         key_cache=torch.zeros(3, 4, 2, 8, **z), value_cache=torch.zeros(3, 4, 2, 8, **z),
                         slot_mapping=torch.tensor([0, 1, -1, 5], dtype=torch.int32, device=DEVICE), layout="nhd")
        self.positions = torch.tensor([0, 1, -1, 2], dtype=torch.int32, device=DEVICE)

    def expect(self, match, **kw):
        from kvfuzz_triton import kv_append
        with pytest.raises(ValueError, match="kv_append: " + match):
            kv_append(**dict(self.args, **kw))

    def test_valid_call_returns_none(self):
        from kvfuzz_triton import kv_append
        assert kv_append(**self.args, cp_positions=self.positions, cp_rank=1, cp_world_size=2) is None

    def test_errors(self):
        t = self.torch
        self.expect("cp_rank, cp_world_size and cp_interleave need cp_positions", cp_rank=1, cp_world_size=2)
        self.expect("cp_rank, cp_world_size and cp_interleave need cp_positions", cp_interleave=4)
        self.expect("cp_positions must be a torch.Tensor, got list", cp_positions=[0, 1, -1, 2])
        self.expect("cp_positions must be int32, got torch.int64", cp_positions=self.positions.long())
        self.expect(r"cp_positions must have slot_mapping's shape \(4,\), got \(3,\)", cp_positions=self.positions[:3])
        self.expect("cp_positions must be contiguous", cp_positions=t.zeros(8, dtype=t.int32, device=DEVICE)[::2])
        self.expect(r"cp_rank must be an integer in \[0, cp_world_size = 2\), got 2", cp_positions=self.positions,
                    cp_rank=2, cp_world_size=2)
        self.expect(r"cp_world_size must be an integer in \[1, 2\^31\)", cp_positions=self.positions, cp_world_size=0)
        self.expect("cp_interleave must be an integer", cp_positions=self.positions, cp_interleave=1.5)
        if GPU:
            self.expect("all tensors must be on one device", cp_positions=self.positions.cpu())
