"""The software SyncAll (SyncAll(gmWorkspace, ubWorkspace, usedCores), SyncAll.md 软同步) in the CPU
build and the launches that use it (tiling softSync): on Atlas training / inference (ascend910,
ascend310p), which lack the hardware SyncAll, BatchNormBackward in training splits channels across
cores like the lines that have it. Each documented rule refuses a bad call; the flags order GM
accesses across cores; a kernel that does not zero the flags fails; values against the float64
reference with channels split across cores (with and without the L2 rounds), and the same bits for
any core count."""
import shutil

import numpy as np
import pytest

import simlib
from test_kernel_sim import ALL_MASKS, check, make_inputs

pytestmark = pytest.mark.ascend_sim

PROBES = simlib.HERE / "sim_rule_probes.cpp"
LEGACY = ["ascend910", "ascend310p"]

REFUSED = [
    # case, cores, words the message must hold
    ("soft_sync_race", 2, ["DataCopy UB->GM", "cross-core GM race"]),
    ("soft_sync_not_zeroed", 1, ["gmWorkspace not zero before its first use", "holds 1515870810"]),
    ("soft_sync_gm_small", 2, ["gmWorkspace of 32 bytes", "at least cores x 32 = 64"]),
    ("soft_sync_ub_small", 2, ["ubWorkspace of 32 bytes", "at least cores x 32 = 64"]),
    ("soft_sync_ub_position", 2, ["ubWorkspace must be in VECIN, VECCALC or VECOUT"]),
    ("soft_sync_used_cores", 2, ["usedCores 3 exceeds the launch's block dim 2"]),
]


@pytest.mark.parametrize("soc", LEGACY)
@pytest.mark.parametrize("case,cores,words", REFUSED, ids=[c[0] for c in REFUSED])
def test_soft_sync_rule_fires_with_its_source_line(sim, soc, case, cores, words):
    msg = simlib.rule_probe(sim, case, soc=soc, cores=cores)
    assert msg is not None, f"{case} ran clean"
    for w in words:
        assert w in msg, (w, msg)
    assert msg.endswith(f"sim_rule_probes.cpp:{simlib.probe_line(PROBES, case)}"), msg


@pytest.mark.parametrize("soc", simlib.SOCS)
def test_soft_sync_orders_gm_across_cores(sim, soc):
    """Zeroed by every core, two calls in one launch: a write before the call and a read after it on
    another core do not race (the hardware form is refused on Atlas training / inference)."""
    assert simlib.rule_probe(sim, "soft_sync_orders_gm_ok", soc=soc, cores=2) is None


def _same_bits_over_cores(sim, soc, shape, dtype, core_counts, strategy, **kw):
    """The same bits on every core count; the first (one core) without the sync, the last with it."""
    args = make_inputs(shape, False, dtype)
    outs, soft = [], []
    for cores in core_counts:
        got, info = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                               args["save_invstd"], dtype=dtype, soc=soc, cores=cores, **kw)
        assert info.strategy == simlib.STRATEGIES[strategy]
        outs.append(got)
        soft.append(info.soft_sync)
    assert soft[0] == 0 and soft[-1] == 1
    for other in outs[1:]:
        for x, y in zip(outs[0], other):
            assert np.array_equal(x, y)


def _soft_info(info, cores):
    assert info.soft_sync == 1 and info.cross_core == 1 and info.used_cores == cores, info
    return info


# (shape, l2_bytes): channels split across 8 cores; with an L2 the rounds (one software SyncAll each).
SPLITS = [((4, 16, 32, 32), 0), ((4, 16, 32, 32), 64 * 1024), ((2, 20, 16, 64), 0), ((2, 20, 16, 64), 96 * 1024)]


@pytest.mark.parametrize("soc", LEGACY)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape,l2", SPLITS)
def test_split_channels_values(sim, soc, dtype, shape, l2):
    info = check(sim, shape, False, dtype, True, soc=soc, cores=8, two_pass=True, l2_bytes=l2)
    _soft_info(info, 8)
    assert (info.l2_rounds > 0) == (l2 > 0)
    # ascend310p (mul_add, no DataCopyPad), rounds one after the other (here those of (4, 16, 32, 32); the
    # 16-bit rounds of (2, 20, 16, 64) interleave): each core's last phase-2 units of a round beside its
    # first phase-1 units of the next (plTail)
    if soc != "ascend310p" or l2 == 0:
        assert info.pl_tail == 0
    elif shape == (4, 16, 32, 32):
        assert info.pl_tail > 0


@pytest.mark.parametrize("soc", LEGACY)
@pytest.mark.parametrize("params", [dict(param_float32=("weight", "save_mean", "save_invstd")),
                                    dict(grad_param_float32=True),
                                    dict(param_float32=("save_invstd",), grad_param_float32=True)])
def test_split_channels_mixed_parameter_types(sim, soc, params):
    for l2 in (0, 64 * 1024):
        _soft_info(check(sim, (4, 16, 32, 32), False, "float16", True, soc=soc, cores=8, two_pass=True, l2_bytes=l2,
                         **params), 8)


@pytest.mark.parametrize("soc", LEGACY)
@pytest.mark.parametrize("mask", ALL_MASKS)
@pytest.mark.parametrize("training", [True, False])
def test_every_mask_and_mode(sim, soc, mask, training):
    """Training with grad_input splits channels across cores; every other case keeps whole groups
    per core; all match the reference."""
    info = check(sim, (4, 16, 32, 32), False, "float32", training, mask, soc=soc, cores=8, two_pass=True,
                 l2_bytes=64 * 1024)
    assert info.soft_sync == int(training and mask[0])


@pytest.mark.parametrize("soc", LEGACY)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("l2", [0, 64 * 1024])
def test_same_bits_for_any_core_count(sim, soc, dtype, l2):
    """The sums are formed in unit order whatever the cores: 1 core (whole groups, no sync), 2, 3, 5
    and 8 cores (channels split, the software SyncAll) give the same bits."""
    _same_bits_over_cores(sim, soc, (4, 16, 32, 32), dtype, (1, 2, 3, 5, 8), "two_pass", two_pass=True, l2_bytes=l2)


def test_round_balanced_tiles_same_bits_for_any_core_count(sim):
    """ascend910 float32 in L2 rounds of 5 channels of 112x112 (N 32): the largest tile, 4 x 1792, gives a
    channel 56 units (a round 280), so the tiling takes 4 x 1568 (64, a round 320); chosen from the shape
    and the SoC, not the cores, so 1, 3 and 32 cores give the same bits, and the values match the
    reference."""
    shape = (32, 16, 112, 112)
    l2 = 2 * 5 * 2 * 32 * 112 * 112 * 4 + 4096  # rounds of 5 channels' x + dy
    for cores in (3, 32):
        info = _soft_info(check(sim, shape, False, "float32", True, soc="ascend910", cores=cores, two_pass=True,
                                l2_bytes=l2), cores)
        assert info.l2_rounds >= 1 and (info.tile_rows, info.tile_cols) == (4, 1568), info
    _same_bits_over_cores(sim, "ascend910", shape, "float32", (1, 3, 32), "two_pass", two_pass=True, l2_bytes=l2)


def test_kernel_without_the_zeroing_fails(tmp_path):
    """A copy of the kernel whose launch does not zero the flags is refused by its first SyncAll (the
    workspace the launcher hands over holds garbage, as the framework's does)."""
    kdir = tmp_path / "op_kernel"
    shutil.copytree(simlib.ROOT / "ascend_impl" / "op_kernel", kdir)
    state = kdir / "batch_norm_kernel_state.h"
    src = state.read_text()
    zeroing = "AscendC::DataCopy(syncGm, syncUb, ints);"
    assert src.count(zeroing) == 1
    state.write_text(src.replace(zeroing, ""))
    lib = simlib.build(cache_dir=tmp_path / "cache", kernel_dir=kdir, units=[simlib.HERE / "sim_launch.cpp"],
                       opt="-O1")
    args = make_inputs((4, 16, 32, 32), False, "float32")
    with pytest.raises(simlib.SimError, match="gmWorkspace not zero before its first use"):
        simlib.run(lib, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                   args["save_invstd"], soc="ascend910", cores=8, two_pass=True)


# Single pass: without DataCopyPad a group was at least one block of the per-channel vectors (8 float32 /
# 16 16-bit channels), so these ran on 1-2 of 4 cores; with the software SyncAll every core takes a group
# (packed runs of channels too), the groups' totals go through the workspace and each core writes its
# whole blocks of grad_weight / grad_bias after the SyncAll. (shape, dtype): big enough that the sync's
# traffic stays within 1 / 256 of the activations' (the tiling's rule).
SINGLE = [((16, 16, 16, 16), "float32"), ((16, 24, 14, 14), "float32"), ((24, 20, 8, 16), "float32"),
          ((16, 32, 16, 16), "float16"), ((16, 24, 14, 14), "float16"), ((24, 20, 8, 16), "float16")]


@pytest.mark.parametrize("soc", LEGACY)
@pytest.mark.parametrize("shape,dtype", SINGLE)
@pytest.mark.parametrize("training", [True, False])
def test_single_pass_split_groups_values(sim, soc, shape, dtype, training):
    info = check(sim, shape, False, dtype, training, soc=soc, cores=4, two_pass=False)
    assert info.strategy == simlib.STRATEGIES["single_pass"] and info.soft_sync == 1 and info.used_cores == 4


@pytest.mark.parametrize("soc", LEGACY)
@pytest.mark.parametrize("mask", ALL_MASKS)
def test_single_pass_split_groups_masks(sim, soc, mask):
    for dtype, kw in (("float32", {}), ("float16", dict(grad_param_float32=True)),
                      ("float16", dict(param_float32=("weight", "save_invstd")))):
        info = check(sim, (16, 24, 14, 14), False, dtype, True, mask, soc=soc, cores=4, two_pass=False, **kw)
        assert info.soft_sync == 1


@pytest.mark.parametrize("soc", LEGACY)
@pytest.mark.parametrize("shape,dtype", [((16, 24, 14, 14), "float32"), ((16, 32, 16, 16), "float16")])
def test_single_pass_same_bits_for_any_core_count(sim, soc, shape, dtype):
    _same_bits_over_cores(sim, soc, shape, dtype, (1, 2, 3, 4), "single_pass")


def test_single_pass_keeps_block_groups_where_the_sync_costs_too_much(sim):
    """A small tensor: the software SyncAll's traffic would exceed 1 / 256 of the activations', so the
    groups stay whole blocks of channels (fewer cores, no sync)."""
    info = check(sim, (4, 16, 8, 8), False, "float32", True, soc="ascend910", cores=8, two_pass=False)
    assert info.strategy == simlib.STRATEGIES["single_pass"] and info.soft_sync == 0 and info.used_cores == 2


# 40 channels of 32 KiB (x + dy, float32) and an L2 whose half holds 10 of them: the serial rounds take
# groups as wide as the channel vectors hold (10, not the plan's 8), so 4 rounds instead of 5 (ascend910:
# ascend310p interleaves rounds of this size, ilRounds).
WIDE = ((4, 40, 32, 32), 2 * 10 * 2 * 4 * 1024 * 4)


def test_serial_rounds_take_wider_groups(sim):
    soc = "ascend910"
    shape, l2 = WIDE
    info = _soft_info(check(sim, shape, False, "float32", True, soc=soc, cores=8, two_pass=True, l2_bytes=l2), 8)
    assert info.l2_rounds == 1 and info.groups == 4, info
    _same_bits_over_cores(sim, soc, shape, "float32", (1, 3, 8), "two_pass", two_pass=True, l2_bytes=l2)


# Atlas inference (ascend310p: no DataCopyPad, mul_add), 16-bit, two passes: whole groups of a block of the
# per-channel vectors (16 channels) would leave cores idle, but every core can take whole channels, two of
# them per core fit half of L2: one group of whole channels per core (groups narrower than a block,
# not on a block boundary, balanced: (8, 36, 24, 24) takes 4 and 5), pipelined, their totals stashed in the
# workspace and grad_weight / grad_bias written in whole blocks after the one software SyncAll
# (StashedTwoPass). (shape, ub_bytes, l2_bytes)
SOFT_WHOLE = [((8, 32, 24, 24), 13000, 600000), ((8, 36, 24, 24), 12000, 700000)]


def _soft_whole_info(info, cores):
    assert info.strategy == simlib.STRATEGIES["two_pass"], info
    assert info.soft_sync == 1 and info.cross_core == 0 and info.used_cores == cores == info.groups, info
    assert info.l2_rounds == 0 and info.l2_channels == 0 and info.pl_tail == 0, info
    return info


@pytest.mark.parametrize("shape,ub,l2", SOFT_WHOLE)
def test_soft_whole_channels_values(sim, shape, ub, l2):
    """Values against the reference: every mask in training (the whole channels only with grad_input),
    16-bit and float32 grad_weight / grad_bias, float32 statistics, and inference (whole blocks per core)."""
    _soft_whole_info(check(sim, shape, False, "float16", True, soc="ascend310p", cores=8, ub_bytes=ub,
                           l2_bytes=l2), 8)
    for mask in ALL_MASKS:
        for training in (True, False):
            info = check(sim, shape, False, "float16", training, mask, soc="ascend310p", cores=8, ub_bytes=ub,
                         l2_bytes=l2, seed=1)
            assert info.soft_sync == int(training and mask[0])
    for kw in (dict(grad_param_float32=True), dict(param_float32=("weight", "save_invstd"))):
        check(sim, shape, False, "float16", True, soc="ascend310p", cores=8, ub_bytes=ub, l2_bytes=l2, seed=2, **kw)


@pytest.mark.parametrize("shape,ub,l2", SOFT_WHOLE)
def test_soft_whole_channels_same_bits_for_any_core_count(sim, shape, ub, l2):
    """1 and 2 cores (whole blocks of channels per core, no sync) and 3, 5 and 8 (whole channels per core,
    the software SyncAll): the same bits."""
    args = make_inputs(shape, False, "float16")
    outs = []
    for cores in (1, 2, 3, 5, 8):
        got, info = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                               args["save_invstd"], dtype="float16", soc="ascend310p", cores=cores, ub_bytes=ub,
                               l2_bytes=l2)
        if cores >= 3:
            _soft_whole_info(info, cores)
        else:
            assert info.soft_sync == 0 and info.cross_core == 0
        outs.append(got)
    for other in outs[1:]:
        for x, y in zip(outs[0], other):
            assert np.array_equal(x, y)


@pytest.mark.parametrize("soc", LEGACY)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape,l2", [((4, 16, 32, 32), 0), ((4, 16, 32, 32), 64 * 1024), ((8, 16, 24, 24), 150000)])
def test_third_grad_input_buffer(sim, soc, dtype, shape, l2):
    """Two passes without DataCopyPad: a third grad_input buffer where the SoC's event ids hold it
    (ascend310p's 8 per HardEvent; not ascend910's 4) and UB has room; values against the reference and
    the same bits for any core count (the buffers carry grad_input only, not the sums)."""
    info = check(sim, shape, False, dtype, True, soc=soc, cores=8, two_pass=True, l2_bytes=l2)
    assert info.strategy == simlib.STRATEGIES["two_pass"]
    assert info.out_buffers == (3 if soc == "ascend310p" else 2), info
    args = make_inputs(shape, False, dtype, seed=1)
    outs = []
    for cores in (1, 3, 8):
        got, ri = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                             args["save_invstd"], dtype=dtype, soc=soc, cores=cores, two_pass=True, l2_bytes=l2)
        assert ri.out_buffers == info.out_buffers
        outs.append(got)
    for other in outs[1:]:
        for x, y in zip(outs[0], other):
            assert np.array_equal(x, y)
