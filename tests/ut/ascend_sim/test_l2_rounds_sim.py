"""The two-pass L2 rounds of the Ascend C kernel (tiling l2Rounds) in the CPU build: with a small L2
the tiling sizes rounds of channel groups to a third of it (half with the software SyncAll) and the
kernel runs both passes round by round across all cores, phase 2 of a round beside phase 1 of the
next; values against the float64 reference, and the same bits for any core count.
Without SyncAll (tiling l2Channels): both passes a few channels of a core's group at a time."""
import numpy as np
import pytest

import simlib
from test_kernel_sim import ALL_MASKS, check, make_inputs

pytestmark = pytest.mark.ascend_sim
L2 = 64 * 1024  # a round's grad_out + input: at most 32 KiB


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("soc", ["ascend910b", "ascend950"])
def test_rounds_values(sim, dtype, soc):
    info = check(sim, (3, 5, 3000), False, dtype, True, soc=soc, cores=8, ub_bytes=24 * 1024, l2_bytes=L2)
    assert info.l2_rounds >= 1 and info.strategy == simlib.STRATEGIES["two_pass"] and info.groups == 5


@pytest.mark.parametrize("mask", ALL_MASKS)
def test_rounds_masks(sim, mask):
    """Only training with grad_input wanted takes the rounds; every mask still matches the reference."""
    check(sim, (2, 6, 2500), False, "float32", True, mask, cores=4, ub_bytes=24 * 1024, l2_bytes=L2)
    check(sim, (2, 6, 2500), False, "float16", False, mask, cores=4, ub_bytes=24 * 1024, l2_bytes=L2)


def test_rounds_deterministic_for_any_core_count(sim):
    args = make_inputs((3, 7, 2999), False, "float32")
    outs = []
    for cores in (2, 3, 8):
        got, info = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                               args["save_invstd"], cores=cores, ub_bytes=24 * 1024, l2_bytes=L2)
        assert info.l2_rounds >= 1 and info.used_cores == cores
        outs.append(got)
    assert_same_bits(outs)


# Rounds of 8 channels on 7 cores, each core's units of a round across two channels (Interleaved takes
# each channel's scalars ahead); on 2 cores whole channels per core, no rounds.
SEVERAL = (4, 18, 1200)


def several_l2(dtype):
    return 3 * 9 * 2 * 4 * 1200 * (4 if dtype == "float32" else 2)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_rounds_interleaved_several_channels_per_core(sim, dtype):
    info = check(sim, SEVERAL, False, dtype, True, soc="ascend910b", cores=7, ub_bytes=24 * 1024,
                 l2_bytes=several_l2(dtype))
    assert info.l2_rounds >= 1 and info.groups > info.l2_rounds and info.units > info.used_cores


def test_rounds_interleaved_deterministic_for_any_core_count(sim):
    args = make_inputs(SEVERAL, False, "float16")
    outs = []
    for cores in (2, 7, 8):
        got, info = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                               args["save_invstd"], cores=cores, ub_bytes=24 * 1024, l2_bytes=several_l2("float16"),
                               dtype="float16")
        assert (info.l2_rounds >= 1) == (cores > 2) and info.used_cores == cores
        outs.append(got)
    assert_same_bits(outs)


# Without SyncAll (whole groups per core): (shape, ub_bytes, l2_bytes, dtype) whose groups of 8 / 16
# channels exceed half of L2 on two cores but a few channels do not (tiling l2Channels); the second
# keeps more than one batch of partials per step (they go through the workspace).
CHANNEL_STEPS = [((4, 32, 12, 12), 0, 83000, "float32"), ((40, 16, 24, 24), 20000, 1474560, "float32"),
                 ((4, 48, 12, 12), 0, 60000, "float16")]


@pytest.mark.parametrize("soc", ["ascend910", "ascend310p"])
@pytest.mark.parametrize("shape,ub,l2,dtype", CHANNEL_STEPS)
@pytest.mark.parametrize("training", [True, False])
def test_channels_in_l2_without_sync_all(sim, soc, shape, ub, l2, dtype, training):
    """Both passes a few channels of a group at a time: values against the reference, and the same
    bits as the whole group at once (the same sums in the same order)."""
    info = check(sim, shape, False, dtype, training, soc=soc, cores=2, ub_bytes=ub, l2_bytes=l2, two_pass=True)
    assert info.strategy == simlib.STRATEGIES["two_pass"] and info.cross_core == 0
    assert 0 < info.l2_channels < shape[1] // info.groups
    args = make_inputs(shape, False, dtype, training=training)
    runs = []
    for l2_bytes in (l2, 0):
        got, info = simlib.run(sim, args["grad_out"], args["x"], args["weight"], args["running_mean"],
                               args["running_var"], args["save_mean"], args["save_invstd"], training=training,
                               dtype=dtype, soc=soc, cores=2, ub_bytes=ub, l2_bytes=l2_bytes, two_pass=True)
        runs.append((got, info.l2_channels))
    assert runs[0][1] > 0 and runs[1][1] == 0
    for x, y in zip(runs[0][0], runs[1][0]):
        assert np.array_equal(x, y)


@pytest.mark.parametrize("mask", ALL_MASKS)
def test_channels_in_l2_masks(sim, mask):
    for training in (True, False):
        info = check(sim, (4, 32, 12, 12), False, "float32", training, mask, soc="ascend910", cores=2, l2_bytes=83000,
                     two_pass=True)
        assert info.l2_channels > 0


def assert_same_bits(runs):
    """Every run's outputs bit for bit those of the first."""
    for other in runs[1:]:
        for x, y in zip(runs[0], other):
            assert np.array_equal(x, y)


def same_bits_over_cores(sim, shape, dtype, ub, l2, cores):
    """ascend310p: the same bits on each of `cores` core counts."""
    args = make_inputs(shape, False, dtype, seed=2)
    assert_same_bits([simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                                 args["save_invstd"], dtype=dtype, soc="ascend310p", cores=c, ub_bytes=ub,
                                 l2_bytes=l2)[0] for c in cores])


def check_every_mask(sim, shape, dtype, ub, l2):
    """ascend310p on 2 cores: values against the reference under every mask, training and not."""
    for mask in ALL_MASKS:
        for training in (True, False):
            check(sim, shape, False, dtype, training, mask, soc="ascend310p", cores=2, ub_bytes=ub, l2_bytes=l2,
                  seed=1)


# Atlas inference (ascend310p: no DataCopyPad, mul_add), whole groups per core, one channel per core within
# half of L2 but not two (TailPipelineInL2): the channels partly pipelined (tiling plTail / plAhead, the last
# phase-2 units of a channel beside the next one's first phase-1 units). (shape, ub_bytes, l2_bytes, dtype)
TAIL_PIPELINED = [((8, 16, 24, 24), 12000, 150000, "float32"), ((8, 32, 24, 24), 12000, 75000, "float16")]


@pytest.mark.parametrize("shape,ub,l2,dtype", TAIL_PIPELINED)
def test_tail_pipeline(sim, shape, ub, l2, dtype):
    """Values against the reference (every mask, training and not), and the same bits as the plain channel
    pipeline (an L2 that holds two channels per core) and as the whole group at once (no L2)."""
    info = check(sim, shape, False, dtype, True, soc="ascend310p", cores=2, ub_bytes=ub, l2_bytes=l2)
    assert info.strategy == simlib.STRATEGIES["two_pass"] and info.cross_core == 0 and info.l2_channels == 0
    units = info.units // shape[1]
    assert 0 < info.pl_ahead < info.pl_tail < units
    check_every_mask(sim, shape, dtype, ub, l2)
    args = make_inputs(shape, False, dtype, seed=2)
    runs = []
    for l2_bytes in (l2, 4 * l2, 0):
        got, ri = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                             args["save_invstd"], dtype=dtype, soc="ascend310p", cores=2, ub_bytes=ub,
                             l2_bytes=l2_bytes)
        assert ri.strategy == simlib.STRATEGIES["two_pass"] and ri.cross_core == 0 and ri.l2_channels == 0
        assert (ri.pl_tail > 0) == (l2_bytes == l2)
        runs.append(got)
    assert_same_bits(runs)


# Atlas inference, whole channels per core pipelined, UB with room for a third input buffer (TryLoadsTwoAhead):
# each step issues the loads of the step two ahead. (shape, ub_bytes, l2_bytes, dtype, grad_input buffers):
# the tail pipeline (plTail) and the full one, with the third grad_input buffer where it fits too.
TWO_AHEAD = [((6, 16, 32, 32), 20000, 300000, "float32", 2), ((6, 16, 32, 32), 56000, 10 ** 7, "float32", 3),
             ((10, 16, 24, 24), 44000, 10 ** 7, "float16", 3)]


@pytest.mark.parametrize("shape,ub,l2,dtype,out", TWO_AHEAD)
def test_loads_two_ahead(sim, shape, ub, l2, dtype, out):
    """Values against the reference (every mask, training and not), and the same bits for any core count."""
    info = check(sim, shape, False, dtype, True, soc="ascend310p", cores=2, ub_bytes=ub, l2_bytes=l2)
    assert info.strategy == simlib.STRATEGIES["two_pass"] and info.cross_core == 0
    assert info.in_buffers == 3 and info.out_buffers == out, info
    assert (info.pl_tail > 0) == (l2 == 300000)
    check_every_mask(sim, shape, dtype, ub, l2)
    same_bits_over_cores(sim, shape, dtype, ub, l2, (1, 2, 3))


# Atlas inference, the software SyncAll's L2 rounds across the cores with UB room for the input queues' third
# buffer (TryLoadsTwoAhead): each step of a round's phase 2 and the next round's phase-1 units beside it issues
# the loads of the step two ahead; serial rounds (plTail) and interleaved ones (ilRounds: plTail 0).
# (shape, ub_bytes, l2_bytes, dtype, grad_input buffers, serial); (16, 8, 48, 48): float32 rounds of enough
# units a core (on 2 and 3 cores) that the next phase 2's first tile is loaded before the last phase-1 units'
# and held aside (AheadTileLead), the same bits as on 8 cores, where it is not.
ROUNDS_TWO_AHEAD = [((16, 8, 24, 24), 64000, 64 * 1024, "float32", 3, True),
                    ((16, 8, 48, 48), 64000, 256 * 1024, "float32", 3, True),
                    ((16, 8, 24, 24), 32000, 64 * 1024, "float32", 2, True),
                    ((8, 16, 32, 32), 48000, 64 * 1024, "float16", 3, True),
                    ((8, 16, 32, 32), 48000, 256 * 1024, "float16", 2, False)]


@pytest.mark.parametrize("shape,ub,l2,dtype,out,serial", ROUNDS_TWO_AHEAD)
def test_rounds_loads_two_ahead(sim, shape, ub, l2, dtype, out, serial):
    """Values against the reference (every mask, training and not), and the same bits for any core count."""
    info = check(sim, shape, False, dtype, True, soc="ascend310p", cores=8, ub_bytes=ub, l2_bytes=l2)
    assert info.strategy == simlib.STRATEGIES["two_pass"] and info.cross_core == 1 and info.soft_sync == 1
    assert info.l2_rounds > 0 and info.in_buffers == 3 and info.out_buffers == out, info
    assert (info.pl_tail > 0) == serial
    check_every_mask(sim, shape, dtype, ub, l2)
    same_bits_over_cores(sim, shape, dtype, ub, l2, (2, 3, 8))


def test_interleaved_rounds_scalar_coefs_same_bits_as_one_core(sim):
    """ascend310p float16 interleaved rounds: after each SyncAll the scalar unit forms phase 2's scalars
    channel by channel from the partials (OwnChannelScalars; on 5 and 8 cores some cores' units span two
    channels), where one core (no rounds) takes them from the vector unit's coefficients: the same bits."""
    same_bits_over_cores(sim, (8, 16, 32, 32), "float16", 48000, 256 * 1024, (1, 5, 8))
