"""The Ascend C kernel's performance model (ascend_impl/perf_model, bench --ascend).

- Its counts are those of the real CPU-build run: the same with and without the data moved.
- Its GM bytes agree with an independent count from the shape and the tiling's documented rules.
- The ResNet-50 rows of `bench --ascend` carry the JSON fields of issue 27 and are read against its
  targets on every SoC line (perf_targets.py); the rows that do not meet one yet are strict xfails
  with the measured number, so meeting one fails the test until the row leaves perf_targets.UNMET.

Modeling all 53 ResNet-50 layers takes minutes (the simulator runs every instruction of every core),
so those tests are `slow` (opt-in: `python -m pytest -m slow`); the per-row rules also run, by default,
on a sample of three of its layers (single-pass and two-pass ones).
"""
import json
import math

import pytest

import perf_targets
from mindspore_bn_grad_bench import ascend, ascend_model

pytestmark = pytest.mark.ascend_sim
FIELDS = ("gm_bytes_per_element", "cores_used", "max_core_share", "modeled_us", "bound_us", "combine_us")
COUNTED = ("gm_read_bytes", "gm_write_bytes", "act_read_bytes", "act_write_bytes", "copies", "bursts",
           "vector_instrs", "scalar_ops", "sync_alls", "ub_bytes")


@pytest.fixture(scope="module")
def lib():
    return ascend_model.build()


SOCS = tuple(ascend_model.capabilities())
TARGET_DTYPES = ("float32", "float16")


@pytest.fixture(scope="module")
def resnet910b(lib):
    return ascend.model_all(["ascend910b"], list(TARGET_DTYPES), ascend.resnet50_shapes(), lib)


@pytest.fixture(scope="module")
def resnet_all(lib, resnet910b):
    """The ResNet-50 rows of every SoC line (slow)."""
    others = [soc for soc in SOCS if soc != "ascend910b"]
    return resnet910b + ascend.model_all(others, list(TARGET_DTYPES), ascend.resnet50_shapes(), lib)


SAMPLE = [(32, 256, 14, 14), (32, 64, 56, 56), (32, 128, 28, 28)]


@pytest.fixture(scope="module", params=["sample", pytest.param("resnet50", marks=pytest.mark.slow)])
def rows(request, lib):
    """The 910B rows the per-row rules read: three ResNet-50 layers, or (slow) all of them."""
    if request.param == "resnet50":
        return request.getfixturevalue("resnet910b")
    shapes = [(shape, n) for shape, n in ascend.resnet50_shapes() if shape in SAMPLE]
    assert len(shapes) == len(SAMPLE)
    return ascend.model_all(["ascend910b"], ["float32", "float16"], shapes, lib)


@pytest.mark.parametrize("soc,shape,dtype,two_pass", [
    ("ascend910b", (4, 40, 7, 7), "float32", False),
    ("ascend910b", (4, 40, 7, 7), "float16", True),
    ("ascend910b", (3, 2, 3000), "float32", True),   # channels span cores: SyncAll, shared totals
    ("ascend910", (4, 24, 8, 8), "float16", False),
    ("ascend310p", (5, 9, 33), "float32", False),    # two-pass with whole-block tails
    ("ascend950", (2, 70, 10, 10), "float16", False),
])
def test_counts_do_not_depend_on_moving_the_data(lib, soc, shape, dtype, two_pass):
    a = ascend_model.run(lib, soc, shape, dtype, skip_data=True, two_pass=two_pass)
    b = ascend_model.run(lib, soc, shape, dtype, skip_data=False, two_pass=two_pass)
    assert a.tiling.used_cores == b.tiling.used_cores > 0
    for ca, cb in zip(a.cores, b.cores):
        for f in COUNTED:
            assert getattr(ca, f) == getattr(cb, f), f
        # Which core first touches a 32-byte block two cores share is a race of the threads: the L2
        # model may then count that block as a miss on one run and a hit on the other.
        assert abs(ca.hbm_read_bytes - cb.hbm_read_bytes) <= 32 * ca.bursts
        assert ca.end_ns == pytest.approx(cb.end_ns, rel=0.02)


def _per_core_channels(c, groups, runs=1):
    """Balanced channel groups of the single pass: [C * g / groups, C * (g + 1) / groups), in runs of
    `runs` adjacent channels (packed slices without DataCopyPad)."""
    m = c // runs
    return [runs * (m * (g + 1) // groups - m * g // groups) for g in range(groups)]


@pytest.mark.parametrize("shape,dtype", [((4, 40, 7, 7), "float32"), ((6, 19, 14, 14), "float16"),
                                         ((32, 100, 7, 7), "bfloat16"), ((2, 5, 9), "float32")])
def test_single_pass_bytes_match_an_independent_count(lib, shape, dtype):
    """DataCopyPad moves exact bytes: x, dy read once, dx written once, plus weight / mean / invstd
    read and grad_weight / grad_bias written once per channel. GM traffic counts whole 32-byte blocks
    of what is not found in L2, so it is at least that and at most a block more per burst."""
    r = ascend_model.run(lib, "ascend910b", shape, dtype)
    eb = ascend_model.DTYPES[dtype][1]
    n, c = shape[0], shape[1]
    inner = r.elements // (n * c)
    assert r.strategy == "single_pass" and r.tiling.cross_core == 0 and r.tiling.workspace_bytes == 0
    exact = 3 * r.elements * eb + 5 * c * eb
    assert r.requested_bytes == exact and r.requested_accesses == 3.0
    assert exact <= r.gm_bytes + 32 * len(r.cores) and r.gm_bytes <= exact + 32 * sum(k.bursts for k in r.cores)
    per_core = _per_core_channels(c, r.tiling.groups)
    assert [k.act_read_bytes for k in r.cores] == [2 * n * inner * ch * eb for ch in per_core]
    assert [k.act_write_bytes for k in r.cores] == [n * inner * ch * eb for ch in per_core]
    assert all(k.sync_alls == 0 for k in r.cores)


@pytest.mark.parametrize("soc", ["ascend910", "ascend310p"])
@pytest.mark.parametrize("shape,dtype,runs", [((4, 48, 7, 7), "float32", 8), ((6, 40, 14, 14), "float32", 2),
                                              ((3, 64, 7, 7), "float16", 16)])
def test_packed_single_pass_bytes_match_an_independent_count(lib, soc, shape, dtype, runs):
    """Without DataCopyPad, slices that are not whole blocks: runs of adjacent channels whose rows are
    whole blocks, so x and dy are read once and dx written once with whole-block copies of exactly
    their bytes, each core those of its runs of channels; no workspace, no SyncAll."""
    r = ascend_model.run(lib, soc, shape, dtype)
    eb = ascend_model.DTYPES[dtype][1]
    n, c = shape[0], shape[1]
    inner = r.elements // (n * c)
    assert r.strategy == "single_pass" and r.tiling.cross_core == 0 and r.tiling.workspace_bytes == 0
    assert r.requested_accesses == 3.0 and r.act_bytes == 3 * r.elements * eb
    per_core = _per_core_channels(c, r.tiling.groups, runs)
    assert len(r.cores) == r.tiling.groups and all(ch % runs == 0 and ch > 0 for ch in per_core)
    assert [k.act_read_bytes for k in r.cores] == [2 * n * inner * ch * eb for ch in per_core]
    assert [k.act_write_bytes for k in r.cores] == [n * inner * ch * eb for ch in per_core]
    assert all(k.sync_alls == 0 for k in r.cores)


@pytest.mark.parametrize("shape,dtype", [((32, 64, 56, 56), "float32"), ((3, 2, 3000), "float16")])
def test_two_pass_activation_bytes(lib, shape, dtype):
    """Two passes: x and dy read twice, dx written once; one SyncAll, after the partials (each core then
    combines the totals of its own channels)."""
    r = ascend_model.run(lib, "ascend910b", shape, dtype, two_pass=True)
    eb = ascend_model.DTYPES[dtype][1]
    assert r.strategy == "two_pass" and r.act_bytes == 5 * r.elements * eb and r.tiling.l2_rounds == 0
    assert all(k.sync_alls == 1 for k in r.cores)
    # x + dy of the whole tensor fit the L2 window: the second reads are L2 hits (activations only: the
    # partial sums, two blocks per unit, are workspace traffic).
    assert r.activation_accesses < 3 + 0.05 / eb
    assert r.gm_bytes_per_element < 3 * eb + 0.1


@pytest.mark.parametrize("shape,dtype", [((32, 64, 112, 112), "float32"), ((32, 64, 112, 112), "float16")])
def test_l2_rounds_keep_the_second_read_in_l2(lib, shape, dtype):
    """Larger than the L2 budget: both passes round by round, one SyncAll per round (each core then combines
    the channels its own units of the round touch), second reads in L2."""
    r = ascend_model.run(lib, "ascend910b", shape, dtype)
    eb = ascend_model.DTYPES[dtype][1]
    caps = ascend_model.capabilities()["ascend910b"]
    rounds = -(-r.tiling.groups // r.tiling.l2_rounds)
    assert r.tiling.l2_rounds > 0 and rounds > 1 and all(k.sync_alls == rounds for k in r.cores)
    assert r.requested_accesses == 5.0 and r.activation_accesses < 3 + 0.05 / eb
    # beside the activations: the partial sums (64 bytes per unit), written once and read back by the cores
    # whose units of a round touch their channel (a few each) and by the channel's combiner at the end
    other = r.requested_bytes - r.act_bytes
    units = sum(k.gm_write_bytes for k in r.cores) - r.elements * eb  # partials and grad_weight / grad_bias
    assert other <= 6 * units and r.gm_bytes_per_element < 3 * eb + 0.1
    per_channel = 2 * eb * r.elements // shape[1]  # x + dy of one channel
    assert per_channel * r.tiling.group_width * r.tiling.l2_rounds <= caps["l2_bytes"] // 2


@pytest.mark.parametrize("shape,dtype", [((32, 128, 28, 28), "float32"), ((32, 256, 56, 56), "float32")])
def test_whole_channels_per_core(lib, shape, dtype):
    """Two passes whose channels split over the cores within 12.5% of even: every core takes whole
    channels, no SyncAll; both passes group by group, as many groups per core as the tensor's x + dy
    take halves of L2, so the second reads are L2 hits without rounds."""
    r = ascend_model.run(lib, "ascend910b", shape, dtype)
    eb = ascend_model.DTYPES[dtype][1]
    caps = ascend_model.capabilities()["ascend910b"]
    c = shape[1]
    per_core = -(-2 * eb * r.elements // (caps["l2_bytes"] // 2))
    assert r.strategy == "two_pass" and r.tiling.cross_core == 0 and r.tiling.l2_rounds == 0
    assert r.tiling.used_cores == 48 and r.tiling.groups == 48 * per_core
    assert all(k.sync_alls == 0 for k in r.cores)
    assert r.requested_accesses == 5.0 and r.gm_bytes_per_element < 3 * eb + 0.05
    # whole channels: each core's bytes are those of its channels (balanced groups, contiguous per core)
    per_core_channels = _per_core_channels(c, 48)
    assert [k.act_write_bytes for k in r.cores] == [n * eb * r.elements // c for n in per_core_channels]


@pytest.mark.parametrize("soc,shape,dtype,cores", [("ascend910", (32, 256, 28, 28), "float32", 32),
                                                   ("ascend910", (32, 512, 28, 28), "float16", 32)])
def test_channels_in_l2_without_sync_all(lib, soc, shape, dtype, cores):
    """No SyncAll between the passes, every core busy (whole groups of 8 float32 / 16 float16 channels
    per core; two passes asked for): the groups are too large for half of L2 on every core at once;
    both passes run l2_channels channels of a group at a time, so the second reads are L2 hits."""
    r = ascend_model.run(lib, soc, shape, dtype, two_pass=True)
    eb = ascend_model.DTYPES[dtype][1]
    caps = ascend_model.capabilities()[soc]
    per_channel = 2 * eb * r.elements // shape[1]  # x + dy of one channel
    assert r.strategy == "two_pass" and r.tiling.cross_core == 0 and r.tiling.used_cores == cores
    assert 0 < r.tiling.l2_channels < r.tiling.group_width
    assert per_channel * r.tiling.l2_channels * cores <= caps["l2_bytes"] // 2
    assert per_channel * r.tiling.group_width * cores > caps["l2_bytes"] // 2
    assert all(k.sync_alls == 0 for k in r.cores)
    assert r.requested_accesses == 5.0 and r.gm_bytes_per_element < 3 * eb + 0.05


@pytest.mark.parametrize("shape", [(32, 64, 56, 56), (32, 128, 56, 56)])
def test_tail_pipeline_in_l2(lib, shape):
    """ascend310p float32, whole groups of 8 channels per core: one channel on every core fits half of L2,
    two do not; the channels run partly pipelined (pl_tail: the last phase-2 units of a channel beside
    the next one's first phase-1 units), no l2_channels, no SyncAll, the second reads still L2 hits, and
    faster than one channel at a time (ascend910's order on the same shape: l2_channels)."""
    r = ascend_model.run(lib, "ascend310p", shape, "float32")
    caps = ascend_model.capabilities()["ascend310p"]
    per_channel = 2 * 4 * r.elements // shape[1]  # x + dy of one channel
    t = r.tiling
    assert r.strategy == "two_pass" and t.cross_core == 0 and t.soft_sync == 0 and t.l2_channels == 0
    assert t.pl_tail > 0 and t.used_cores == 8
    assert per_channel * t.used_cores <= caps["l2_bytes"] // 2 < 2 * per_channel * t.used_cores
    assert all(k.sync_alls == 0 for k in r.cores)
    assert r.requested_accesses == 5.0 and r.gm_bytes_per_element < 12.05
    # MTE2 streams during part of phase 2: the launch is shorter than the serial per-channel order's sum
    # of phase 1 (MTE2) and phase 2 (MTE3) on the busiest core
    assert r.timeline_us < 0.88 * (r.busy_us("mte2") + r.busy_us("mte3"))


def test_rounds_load_ahead(lib):
    """ascend310p float32 (32, 64, 112, 112): serial software-SyncAll L2 rounds whose phase 2 ends beside the
    next round's first phase-1 units (pl_tail), with the input queues' third buffer: each step issues the loads
    of the step two ahead, so the window's first reads no longer hold the next phase-2 unit's loads; the next
    phase 2's first tile is loaded before the round's last phase-1 units and held aside (AheadTileLead), its
    second tile behind it while the cores meet, so the window opens later than 12/16 of the round with the
    second reads still L2 hits. MTE2, the pipe of the bound there, then idles only around each SyncAll."""
    r = ascend_model.run(lib, "ascend310p", (32, 64, 112, 112), "float32")
    t = r.tiling
    assert r.strategy == "two_pass" and t.cross_core == 1 and t.soft_sync == 1 and t.l2_rounds > 0
    assert t.pl_tail > 12
    assert r.requested_accesses == 5.0 and r.gm_bytes_per_element < 12.1
    assert r.busy_us("mte2") > 0.87 * r.timeline_us


def test_interleaved_rounds_pair_ahead(lib):
    """ascend310p float16 (32, 64, 112, 112): interleaved software-SyncAll L2 rounds (ilRounds: pl_tail 0) with
    loads two steps ahead: each period's last two steps issue the loads of the next period's first two
    (PairAhead) and the next round's statistics are taken before the SyncAll, and the last groups' statistics
    (whose 32-byte block would reach past the vector's end in GM) load in one round trip, not one per
    statistic; MTE2, the pipe of the bound, then idles only around each SyncAll, with the second reads still
    L2 hits."""
    r = ascend_model.run(lib, "ascend310p", (32, 64, 112, 112), "float16")
    t = r.tiling
    assert r.strategy == "two_pass" and t.cross_core == 1 and t.soft_sync == 1 and t.l2_rounds > 0
    assert t.pl_tail == 0
    assert r.requested_accesses == 5.0 and r.gm_bytes_per_element < 6.06
    assert r.busy_us("mte2") > 0.85 * r.timeline_us


def _software_sync_rounds_row(lib, soc, shape, dtype, max_bytes_per_element):
    """The model's row, checked to be two passes in L2 rounds with the software SyncAll (no plTail): five
    accesses requested and at most `max_bytes_per_element` moved (the second reads L2 hits)."""
    r = ascend_model.run(lib, soc, shape, dtype)
    t = r.tiling
    assert r.strategy == "two_pass" and t.soft_sync == 1 and t.l2_rounds > 0 and t.pl_tail == 0
    assert r.requested_accesses == 5.0 and r.gm_bytes_per_element < max_bytes_per_element
    return r


def test_interleaved_rounds_loads_beside_combine(lib):
    """ascend310p float16 (32, 64, 112, 112), interleaved software-SyncAll L2 rounds: after each SyncAll the
    loads of the steps after the period's first two go right behind the partials' and statistics' loads,
    before the combine (LoadsBesideCombine), and the scalar unit forms phase 2's scalars channel by channel
    (OwnChannelScalars), so a core whose units span two channels no longer comes to every SyncAll last. MTE2
    then idles less than an eighth of the launch, the combine is under 1.9% of it, the time within issue 27's
    1.25x of the bound, with the same bytes and the second reads still L2 hits."""
    r = _software_sync_rounds_row(lib, "ascend310p", (32, 64, 112, 112), "float16", 6.06)
    assert r.busy_us("mte2") > 0.875 * r.timeline_us
    assert r.combine_share < 0.019
    assert r.modeled_us <= perf_targets.TIME_RATIO * r.bound_us


@pytest.mark.parametrize("shape", [(32, 256, 56, 56), (32, 64, 112, 112)])
def test_serial_rounds_second_tile_beside_combine(lib, shape):
    """ascend910 float32: serial software-SyncAll L2 rounds with two input buffers (no third: four event ids),
    the first phase-2 tile loaded before the SyncAll. After it the second tile's loads go right behind the
    partials' and statistics' loads, into the buffer the round's last phase-1 unit freed, and the vector unit
    takes the first tile's x - mean and a * dy while the partials land (LoadsBesideCombine: AloneAhead,
    CentreAndScale); the scalar unit forms the coefficients (OwnChannelScalars). Phase 2's first store then
    follows the combine by two vector instructions and its second tile waits for no load, so MTE2 (the pipe
    of the bound) idles less than a quarter of the launch, the combine is under 2% of it, with the same
    bytes and the second reads still L2 hits."""
    r = _software_sync_rounds_row(lib, "ascend910", shape, "float32", 12.13)
    assert r.busy_us("mte2") > 0.75 * r.timeline_us
    assert r.combine_share < 0.02


def test_serial_rounds_last_round_beside_combine(lib):
    """ascend910 float32: the last of the serial software-SyncAll L2 rounds takes the same path after its
    SyncAll as the rounds before it (LastApply: Interleaved with no next phase 1), its second tile's loads
    beside the partials' round trip and its first tile centred and scaled while they land, the share's
    partials loaded behind the coefficients; before, it took Taken's path (a full barrier for the combine,
    the second tile loaded after it). And the launch's first statistics load before its first tile with an
    event of their own (StatsBeforeTile), so the second tile's loads follow the first at once (a full
    barrier held them a copy latency), and the round before the last takes the last round's scalars before
    its SyncAll too (their statistics' round trip came between its combine and its first store). On the
    row with the fewest rounds, where those weigh most, MTE2 then idles under 27% of the launch, with the
    same bytes and second reads in L2."""
    r = _software_sync_rounds_row(lib, "ascend910", (32, 64, 56, 56), "float32", 12.08)
    assert r.busy_us("mte2") > 0.73 * r.timeline_us
    assert r.combine_share < 0.05


@pytest.mark.parametrize("soc,shape,dtype", [("ascend310p", (32, 128, 56, 56), "float16"),
                                             ("ascend310p", (32, 256, 56, 56), "float16")])
def test_channel_pipeline_in_l2_without_sync_all(lib, soc, shape, dtype):
    """Whole groups per core too large for half of L2, but two channels on every core fit it: the group's
    channels run pipelined (channel c's second read beside channel c + 1's first) with no l2_channels, no
    software SyncAll, and the second reads are L2 hits."""
    r = ascend_model.run(lib, soc, shape, dtype)
    eb = ascend_model.DTYPES[dtype][1]
    caps = ascend_model.capabilities()[soc]
    per_channel = 2 * eb * r.elements // shape[1]  # x + dy of one channel
    t = r.tiling
    assert r.strategy == "two_pass" and t.cross_core == 0 and t.soft_sync == 0 and t.l2_channels == 0
    assert per_channel * t.group_width * t.used_cores > caps["l2_bytes"] // 2
    assert 2 * per_channel * t.used_cores <= caps["l2_bytes"] // 2
    assert all(k.sync_alls == 0 for k in r.cores)
    assert r.requested_accesses == 5.0 and r.gm_bytes_per_element < 3 * eb + 0.05


def test_soft_whole_channels(lib):
    """ascend310p float16 (32, 64, 56, 56): whole groups of a block of the 16-bit vectors (16 channels) would
    run on 4 of 8 cores; every core takes 8 whole channels instead, pipelined (two channels of every core
    fit half of L2), one software SyncAll before grad_weight / grad_bias are written in whole blocks (no
    L2 rounds), the second reads L2 hits, within 1.3x of the bound."""
    shape = (32, 64, 56, 56)
    r = ascend_model.run(lib, "ascend310p", shape, "float16")
    caps = ascend_model.capabilities()["ascend310p"]
    per_channel = 2 * 2 * r.elements // shape[1]
    t = r.tiling
    assert r.strategy == "two_pass" and t.cross_core == 0 and t.soft_sync == 1 and t.l2_rounds == 0
    assert t.used_cores == caps["vector_cores"] == t.groups and t.group_width == 8 and t.l2_channels == 0
    assert 2 * per_channel * t.used_cores <= caps["l2_bytes"] // 2
    assert all(k.sync_alls == 1 for k in r.cores)
    assert r.requested_accesses == 5.0 and r.gm_bytes_per_element < 6.05
    assert r.modeled_us < 1.3 * r.bound_us


@pytest.mark.parametrize("soc,shape,dtype", [("ascend910", (32, 64, 112, 112), "float32"),
                                             ("ascend910", (32, 64, 56, 56), "float16"),
                                             ("ascend310p", (32, 64, 112, 112), "float32")])
def test_soft_sync_rounds(lib, soc, shape, dtype):
    """Atlas training / inference: whole groups would leave cores idle (a 64-channel layer: 8 cores in
    float32, 4 with 16-bit parameters) and read the second pass from GM; with the software SyncAll the
    channels are split over every core in L2 rounds, one software SyncAll per round, so the second
    reads are L2 hits. A round takes up to half of L2, as on the hardware-SyncAll lines."""
    r = ascend_model.run(lib, soc, shape, dtype)
    eb = ascend_model.DTYPES[dtype][1]
    caps = ascend_model.capabilities()[soc]
    per_channel = 2 * eb * r.elements // shape[1]
    t = r.tiling
    assert r.strategy == "two_pass" and t.cross_core == 1 and t.soft_sync == 1
    assert t.used_cores == caps["vector_cores"] and t.l2_rounds > 0
    assert per_channel * t.group_width * t.l2_rounds <= caps["l2_bytes"] // 2
    rounds = -(-t.groups // t.l2_rounds)
    assert all(k.sync_alls == rounds for k in r.cores)
    # the floor's 3 accesses, plus partials, flags and vectors (0.25 B/el), plus second reads that miss L2:
    # rounds of half of L2 leave the last lines of a round's first reads to be evicted before their second
    # read, at most a tenth of the second reads (x and dy)
    assert r.requested_accesses == 5.0 and r.gm_bytes_per_element < 3 * eb + 0.1 * 2 * eb + 0.25


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_soft_sync_rounds_share_evenly(lib, dtype):
    """ascend310p's stem in L2 rounds: each round ends on a software SyncAll that waits for the core with
    the most of the round, so the tiles take a row count that divides N (evenRows, 16-bit types too on
    this line, whose GM is the bound) and every core moves the same activation bytes (a short last row
    block had left two of the eight cores with 22% less of the fp16 stem)."""
    r = ascend_model.run(lib, "ascend310p", (32, 64, 112, 112), dtype)
    t = r.tiling
    assert r.strategy == "two_pass" and t.cross_core == 1 and t.soft_sync == 1 and t.l2_rounds > 0
    assert t.used_cores == ascend_model.capabilities()["ascend310p"]["vector_cores"]
    assert len({(k.act_read_bytes, k.act_write_bytes) for k in r.cores}) == 1, [k.act_read_bytes for k in r.cores]


def test_soft_sync_rounds_16bit_sums_take_one_tree(lib):
    """ascend910's 16-bit two passes are bound by the vector unit, 16 issue cycles an instruction: a phase-1
    unit whose rows are contiguous sums dy and dy * (x - mean) by one flat tree (InterleavedTreeSumTo), each
    level past the first ones one instruction for both sums, not a row tree and a column tree per sum (7-row
    units of 56x56: 14 instructions for the two sums, were 18). So a unit costs the busiest core at most 27
    vector instructions over both passes (casts, x - mean, the product, the tree and invstd; the apply's six),
    where it took about 30."""
    r = ascend_model.run(lib, "ascend910", (32, 64, 56, 56), "float16")
    t = r.tiling
    assert r.strategy == "two_pass" and t.soft_sync == 1 and t.l2_rounds > 0
    per_unit = max(k.vector_instrs for k in r.cores) / (t.units / t.used_cores)
    assert per_unit <= 27, per_unit


def test_soft_sync_rounds_16bit_vector_unit_waits_little_per_round(lib):
    """ascend910's 16-bit serial rounds: the vector unit is the bound but for each round's turn, where it
    waits for the partials to land, the software SyncAll's three GM round trips and the partials' load.
    What needs no other core goes before the SyncAll, inside the partials' landing: the next round's
    statistics (loaded during the round's last unit, EarlyStats), the first phase-2 tile cast and its dy
    scaled, the second tile's loads (SecondTile), the partials' lanes folded behind the vector unit
    (FoldBehind). So the busiest core's vector unit is idle at most 6.75 copy latencies a round, launch
    and end included (it was about 8)."""
    r = ascend_model.run(lib, "ascend910", (32, 256, 56, 56), "float16")
    t = r.tiling
    assert r.strategy == "two_pass" and t.soft_sync == 1 and t.l2_rounds > 0
    rounds = -(-t.groups // t.l2_rounds)
    idle = (r.modeled_us * 1e3 - max(k.busy_v for k in r.cores)) / rounds
    assert idle <= 6.75 * ascend_model.capabilities()["ascend910"]["copy_latency_ns"], idle


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_lane_sums_gather_on_ascend310p(lib, dtype):
    """ascend310p's 7x7 single pass (packed slices, lane sums): the per-channel values reach their slabs by a
    Gather of a block per channel and masked Subs over the runs (SpreadRuns), the lane partials are summed
    by ReduceDataBlock, so a core's scalar accesses are Gather's offsets, written once, whatever
    its channels (a scalar read per channel and value before, for a masked Duplicate each), and fp16 (32,
    512, 7, 7) is within 1.25x of the bound, its combine within 9% of its time (were 1.39x and 13.3%)."""
    runs = [ascend_model.run(lib, "ascend310p", shape, dtype) for shape in ((32, 512, 7, 7), (32, 2048, 7, 7))]
    for r in runs:
        assert r.strategy == "single_pass" and r.tiling.used_cores == 8
    assert len({k.scalar_ops for r in runs for k in r.cores}) == 1, [r.cores[0].scalar_ops for r in runs]
    if dtype == "float16":
        assert runs[0].modeled_us <= 1.25 * runs[0].bound_us and runs[0].combine_share < 0.09


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_lane_combine_on_ascend310p(lib, dtype):
    """ascend310p's 7x7 lane path: the lane partials summed by ReduceDataBlock straight into the lanes, k and b
    gathered by one Gather (16-bit full sub-groups since: test_block_coefs_on_ascend310p), a run's head block
    spread with its body; float32 sub-groups (one run) spread k and b as products of the sums' and the
    weights' blocks (no Mul over the vectors), both rows 0 in one set of calls: float32 (32, 512 / 2048, 7, 7) within issue 27's 5% combine (were 7.1 / 7.6%), float16 (32, 512,
    7, 7) within 7% (was 8.2%); neither slower."""
    for shape in ((32, 512, 7, 7), (32, 2048, 7, 7)):
        r = ascend_model.run(lib, "ascend310p", shape, dtype)
        assert r.strategy == "single_pass" and r.tiling.used_cores == 8
        if dtype == "float32":
            assert r.combine_share <= 0.05 and r.modeled_us <= 1.06 * r.bound_us, (shape, r.combine_share)
        elif shape[1] == 512:
            assert r.combine_share < 0.07 and r.modeled_us <= 1.25 * r.bound_us, (shape, r.combine_share)


def _ascend310p_combine_ns_per_sub_group(lib, shape, channels):
    """ascend310p's 16-bit single pass of `shape` on its 8 cores in sub-groups of `channels`: the model's row
    and the combine's time per sub-group (ns)."""
    r = ascend_model.run(lib, "ascend310p", shape, "float16")
    t = r.tiling
    assert r.strategy == "single_pass" and t.used_cores == 8 and t.sp_channels == channels, (shape, t.sp_channels)
    sub_groups = shape[1] // t.used_cores // t.sp_channels
    return r, r.combine_us * 1e3 / sub_groups


def test_block_coefs_on_ascend310p(lib):
    """ascend310p's 16-bit 7x7 single pass (lane sums, ColumnApply), full sub-groups: the combine takes k and b
    from the lane partials' blocks (BlockCoefs): one ReduceDataBlock reading each block eight times puts each
    channel's sum in a block of its own, one set of SpreadRuns calls multiplies them by the weights' blocks
    into b's and k's rows (both in the dy sums' slab, whole runs apart), then b += k * -mean over the row; the
    weights' blocks and -mean's row come at the reduce's start, the group totals' lanes after the apply. No
    Gather and no Mul over the vectors in the combine, so a sub-group of 16 channels combines in under 300 ns
    (was about 360: six Subs, a Gather, two ReduceDataBlocks and Coefs' two steps after the lane partials),
    the 16-bit (32, 512 / 1024 / 2048, 7, 7) within issue 27's 5% (were 5.1 / 5.7 / 6.2%), none slower than
    1.21x its bound."""
    for shape in ((32, 512, 7, 7), (32, 1024, 7, 7), (32, 2048, 7, 7)):
        r, ns = _ascend310p_combine_ns_per_sub_group(lib, shape, 16)
        assert ns < 300, (shape, r.combine_us)
        assert r.combine_share <= 0.05 and r.modeled_us <= 1.21 * r.bound_us, (shape, r.combine_share)


def test_packed_scalar_coefs_on_ascend310p(lib):
    """ascend310p's 14x14 single pass (packed slices, no lane sums, four channels a sub-group): the scalar
    unit, which finishes the packed sums, forms k and b as well (ScalarCoefs), so a sub-group's combine has no
    vector step for them and no second wait for the scalar unit: per sub-group under 430 ns (was 452: Mul and
    MulAddDst with them; lower since, test_packed_column_apply_and_phase_sums_on_ascend310p)."""
    for shape in ((32, 256, 14, 14), (32, 512, 14, 14), (32, 1024, 14, 14)):
        r, ns = _ascend310p_combine_ns_per_sub_group(lib, shape, 4)
        assert ns < 430, (shape, r.combine_us)


@pytest.mark.slow
def test_json_rows(resnet910b, tmp_path):
    assert sum(r["layers"] for r in resnet910b if r["dtype"] == "float32") == 53
    for r in resnet910b:
        for f in FIELDS:
            assert isinstance(r[f], (int, float)) and r[f] > 0, f
    out = tmp_path / "ascend.json"
    assert ascend.main(["--soc", "ascend910b", "--dtype", "float16", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == len(ascend.RESNET50_BN) and all(set(FIELDS) <= set(r) for r in rows)


def test_three_accesses_wherever_a_channel_fits_ub(rows):
    for r in rows:
        if perf_targets.channel_fits_ub(r):  # clearly fits beside the small buffers
            assert perf_targets.check(perf_targets.THREE_ACCESSES, r)[0], r["shape"]


def test_cores_and_balance(rows):
    """Every core works; the largest share is that of whole channels (single pass) or 1/48 + 12%."""
    for r in rows:
        c = r["shape"][1]
        whole_channels = -(-c // 48) / c * 1.01
        assert r["cores_used"] == 48 and r["max_core_share"] <= max(1.12 / 48, whole_channels), r["shape"]


@pytest.mark.slow
def test_step_bytes_at_most_opsnn_plus_one_percent(resnet_all):
    for t in ascend.totals(resnet_all):
        assert t["gm_bytes"] <= 1.01 * t["opsnn_bytes"], t


@pytest.mark.slow
def test_floor_between_bound_and_model(resnet_all):
    """The floor of the modeled time (bench/ascend_floor.py) never above the model, never below the bound."""
    for r in resnet_all:
        assert r["bound_us"] <= r["floor_us"] <= r["modeled_us"], (r["soc"], r["shape"], r["dtype"])


def test_target_bytes_never_above_opsnn(rows):
    """Where both read once the counts tie (x, dy, dx and five per-channel vectors); 0.1% covers the
    32-byte blocks two neighbouring bursts share."""
    for r in rows:
        assert perf_targets.check(perf_targets.BYTES, r)[0], r["shape"]


def _unmet_910b(target):
    return {(k[1], k[2]) for k in perf_targets.UNMET[target] if k[0] == "ascend910b"}


def test_combine_is_timed_and_within_5_percent(rows):
    over = _unmet_910b(perf_targets.COMBINE)
    for r in rows:
        assert 0 < r["combine_us"] < r["modeled_us"], r["shape"]
        if (tuple(r["shape"]), r["dtype"]) not in over:
            assert perf_targets.check(perf_targets.COMBINE, r)[0], r["shape"]


# Issue 27's targets on every SoC line: one case per (target, SoC, layer, dtype) it applies to (the step
# total: per SoC, fp32). The rows perf_targets.UNMET lists (what bench/RESULTS_ASCEND_MODEL.json
# measured) are strict xfails whose reason says what was measured, so a row that meets its target fails
# until it leaves the list; every other row is held to the target. docs/ascend_kernel.md ("Where it
# stands") says what dominates.
WHY = "docs/ascend_kernel.md, Where it stands, says what dominates"


def _target_cases():
    cases = []
    for target in perf_targets.TARGETS:
        for soc in SOCS:
            for dtype in TARGET_DTYPES:
                shapes = [None] if target == perf_targets.STEP_TOTAL else [s for s, _ in ascend.resnet50_shapes()]
                for shape in shapes:
                    probe = {"soc": soc, "shape": list(shape or ()), "dtype": dtype,
                             "elements": math.prod(shape or ())}
                    if not perf_targets.applies(target, probe):
                        continue
                    miss = perf_targets.UNMET[target].get((soc, shape, dtype))
                    reason = f"{soc} {shape or 'step'} {dtype}: {miss} ({WHY})"
                    marks = [pytest.mark.xfail(strict=True, reason=reason)] if miss else []
                    cases.append(pytest.param(target, soc, shape, dtype, marks=marks,
                                              id=f"{target}-{soc}-{'x'.join(map(str, shape or ('step',)))}-{dtype}"))
    return cases


@pytest.mark.slow
@pytest.mark.parametrize("target,soc,shape,dtype", _target_cases())
def test_target(resnet_all, target, soc, shape, dtype):
    if target == perf_targets.STEP_TOTAL:
        r = next(t for t in ascend.totals(resnet_all) if t["soc"] == soc and t["dtype"] == dtype)
    else:
        r = next(r for r in resnet_all if r["soc"] == soc and tuple(r["shape"]) == shape and r["dtype"] == dtype)
    met, measured = perf_targets.check(target, r)
    assert met, measured


def test_unmet_rows_are_rows_of_the_model():
    """Every row the table lists names a SoC line, a ResNet-50 layer and a target that applies to it."""
    shapes = {s for s, _ in ascend.resnet50_shapes()}
    for target, rows in perf_targets.UNMET.items():
        assert target in perf_targets.TARGETS
        for soc, shape, dtype in rows:
            assert soc in SOCS and dtype in TARGET_DTYPES
            assert shape is None if target == perf_targets.STEP_TOTAL else shape in shapes


def test_packed_column_apply_and_phase_sums_on_ascend310p(lib):
    """ascend310p's 16-bit packed single pass: the apply takes twice the slab rows an instruction, a repeat per
    block column with a, k and b read from rows 0 of their slabs (ColumnApply: no row fills of those slabs, half
    the apply's instructions), the first rows of dy cast while the scalar unit takes the sums, and a 14x14
    sub-group's sums are folds and two ReduceDataBlocks (PhaseSums), not a ReduceSum per channel and sum. So the
    14x14 layers' combines are within issue 27's 5% (were 6.5-7.1%), under 300 ns a sub-group of four channels
    (was about 417), the 7x7 ones below 6.5% (were 6.4 / 7.6%), and each layer within 1.21x of its bound (the
    16-bit 7x7 (32, 512) was 1.215x)."""
    for shape in ((32, 256, 14, 14), (32, 512, 14, 14), (32, 1024, 14, 14), (32, 512, 7, 7), (32, 2048, 7, 7)):
        r = ascend_model.run(lib, "ascend310p", shape, "float16")
        t = r.tiling
        assert r.strategy == "single_pass" and t.used_cores == 8
        assert r.modeled_us <= 1.21 * r.bound_us, (shape, r.modeled_us / r.bound_us)
        if shape[2] == 7:
            assert r.combine_share < 0.065, (shape, r.combine_share)
            continue
        sub_groups = shape[1] // t.used_cores // t.sp_channels
        assert r.combine_share <= 0.05 and r.combine_us * 1e3 / sub_groups < 300, (shape, r.combine_share)


def test_packed_float32_apply_takes_scalar_operands_on_ascend910(lib):
    """ascend910's float32 7x7 single pass (packed slices, lanes summed by the scalar unit, no mul_add): the
    apply takes each channel's a, k and b as the scalar operands of masked repeats over the sub-group's rows
    (a Muls / Adds per channel, a repeat per row), not slabs of a masked Duplicate per channel and value, and
    the scalar unit forms k and b with the sums while the vector unit scales dy by a. So (32, 2048, 7, 7)
    takes at most 11 vector instructions per channel (about 13.4 before), both layers' combines stay within
    5% of their time (were 10.5% and 14.2%), and (32, 512, 7, 7) is within 1.33x of its bound (was 1.37x)."""
    runs = {c: ascend_model.run(lib, "ascend910", (32, c, 7, 7), "float32") for c in (512, 2048)}
    for c, r in runs.items():
        assert r.strategy == "single_pass" and r.tiling.used_cores == 32
        assert r.combine_share <= 0.05, (c, r.combine_share)
    wide = runs[2048]
    per_channel = max(k.vector_instrs for k in wide.cores) / (2048 / wide.tiling.used_cores)
    assert per_channel <= 11, per_channel
    assert runs[512].modeled_us <= 1.33 * runs[512].bound_us, runs[512].modeled_us / runs[512].bound_us


def test_packed_float32_wide_channels_apply_takes_scalar_operands_on_ascend910(lib):
    """ascend910's float32 14x14 single pass (runs of two channels, each wider than a repeat, no mul_add): the
    apply's a, k and b are scalar operands too, a masked repeat per row and piece of a channel (WithSpanValue),
    so no slabs of k and b are written in the combine; the core's last sub-group, whose stores nothing else
    overlaps, keeps slabs (fewer instructions a chunk) in the same order of operations. So every layer's
    combine is within 5% of its time (the slabs of k and b took it above), and (32, 256, 14, 14) stays within
    1.03x of its bound."""
    runs = {c: ascend_model.run(lib, "ascend910", (32, c, 14, 14), "float32") for c in (256, 512, 1024)}
    for c, r in runs.items():
        assert r.strategy == "single_pass" and r.tiling.sp_channels == 2
        assert r.combine_share <= 0.05, (c, r.combine_share)
    assert runs[256].modeled_us <= 1.03 * runs[256].bound_us, runs[256].modeled_us / runs[256].bound_us


def test_packed_float32_last_sub_group_after_its_loads_on_ascend910(lib):
    """ascend910's float32 7x7 single pass in two buffers: after a core's last loads land, what is left is the
    reduce of their chunk, the hand-over of the last sub-group's sums, its apply and its stores, which nothing
    else overlaps. That chunk is one instruction's rows (tiling spLastRows), a's slab is filled at the start of
    the group, k and b channel by channel as the scalar unit forms them, and the sub-group is applied from slabs
    with a store per instruction's rows (not eight masked repeats per channel and value a chunk), so its stores
    begin sooner and the vector unit keeps up with them. So (32, 512, 7, 7) is within issue 27's 1.25x of its
    bound (was 1.32x), (32, 2048, 7, 7) stays at its bound, and both combines within 5% of their time."""
    runs = {c: ascend_model.run(lib, "ascend910", (32, c, 7, 7), "float32") for c in (512, 2048)}
    for c, r in runs.items():
        assert r.strategy == "single_pass" and r.tiling.used_cores == 32 and r.tiling.sp_channels == 8
        assert r.combine_share <= 0.05, (c, r.combine_share)
        assert r.activation_accesses == 3 and r.min_burst >= 512, c
    assert runs[512].modeled_us <= 1.25 * runs[512].bound_us, runs[512].modeled_us / runs[512].bound_us
    assert runs[2048].modeled_us <= 1.01 * runs[2048].bound_us, runs[2048].modeled_us / runs[2048].bound_us


def test_packed_16bit_keeps_x_minus_mean_on_ascend910(lib):
    """ascend910's 16-bit packed single pass (14x14 and 7x7 runs, no mul_add): the float copy of x - mean stays in
    UB over all rows from the reduce to the apply (tiling spWhole 2), so the apply casts dy and grad_input but not
    x again, and k and b are the scalar operands of masked repeats per channel, applied channel by channel as the
    scalar unit forms them in the hand-over of the sums (ShiftChannel), not slabs broadcast in the combine. So
    every such layer's combine is within issue 27's 5% of its time (were 8.7-12.8%), and the 7x7 layers, whose
    slabs took a masked Duplicate per channel and value, are within 2.45x and 2.05x of their bounds (were 2.69x
    and 2.28x)."""
    ratios = {(32, 512, 7, 7): 2.45, (32, 2048, 7, 7): 2.05}
    for shape in ((32, 256, 14, 14), (32, 512, 14, 14), (32, 1024, 14, 14), (32, 512, 7, 7), (32, 2048, 7, 7)):
        r = ascend_model.run(lib, "ascend910", shape, "float16")
        assert r.strategy == "single_pass" and r.tiling.sp_channels in (4, 16), shape
        assert r.combine_share <= 0.05, (shape, r.combine_share)
        if shape in ratios:
            assert r.modeled_us <= ratios[shape] * r.bound_us, (shape, r.modeled_us / r.bound_us)


def test_16bit_one_channel_ring_and_wide_apply_on_ascend910(lib):
    """ascend910's 16-bit 28x28 single pass (one channel per sub-group, no mul_add): its per-channel values are
    scalar operands and dy * (x - mean) goes over dy's float copy, so no slab of mean, a or the product is laid
    out and a spare chunk slot fits: the resident buffer is a ring of chunk slots, and the next channel's first
    rows load while this one is applied, where they waited for its stores. The apply takes twice the rows an
    instruction, its float rows in the two sums' slabs (free until the next reduce) and the two cast slabs. So
    the vector unit, the busiest pipe, no longer waits for loads between channels ((32, 512, 28, 28), whose
    launch no software SyncAll ends, takes within 6% of its vector unit's busy time, was 11%), it issues at
    most 54 instructions a channel (about 63 before), and the layers are within 1.45x / 1.59x / 1.78x of their
    bounds (were 1.59x / 1.70x / 1.86x), three accesses and the same bursts as before."""
    ratios = {512: 1.45, 256: 1.59, 128: 1.78}
    for c, ratio in ratios.items():
        r = ascend_model.run(lib, "ascend910", (32, c, 28, 28), "float16")
        assert r.strategy == "single_pass" and r.tiling.sp_channels == 1 and r.tiling.used_cores == 32, c
        assert r.activation_accesses == 3 and r.min_burst == 28 * 28 * 2, c
        assert r.modeled_us <= ratio * r.bound_us, (c, r.modeled_us / r.bound_us)
        per_channel = max(k.vector_instrs for k in r.cores) / (c / r.tiling.used_cores)
        assert per_channel <= 54, (c, per_channel)
        if c == 512:
            assert r.modeled_us <= 1.06 * r.busy_us("v"), r.modeled_us / r.busy_us("v")
