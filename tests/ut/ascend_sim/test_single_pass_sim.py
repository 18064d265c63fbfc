"""The single-pass strategy of the Ascend C kernel (batch_norm_kernel_single_pass.h) in the CPU build:
the tiling picks it where a channel's N x inner slices fit in UB, its values match the float64
reference, and its results do not depend on the number of cores or of resident channels."""
import numpy as np
import pytest

import simlib
from test_kernel_sim import ALL_MASKS, check, make_inputs

pytestmark = pytest.mark.ascend_sim
SINGLE = simlib.STRATEGIES["single_pass"]


def assert_same_bits(outs):
    """Every run's outputs bit for bit those of the first."""
    for other in outs[1:]:
        for x, y in zip(outs[0], other):
            assert np.array_equal(x, y)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("training", [True, False])
def test_resnet_like_7x7_picks_single_pass(sim, dtype, training):
    info = check(sim, (4, 40, 7, 7), False, dtype, training, cores=8)
    assert info.strategy == SINGLE and info.cross_core == 0 and info.units == 0
    assert info.used_cores == 8 and info.groups == 8  # 40 channels, 5 per core (balanced groups)


@pytest.mark.parametrize("ub_kib,shape", [(40, (6, 19, 14, 14)), (12, (9, 11, 5, 9)), (16, (3, 33, 40))])
def test_sub_groups_and_chunks(sim, ub_kib, shape):
    """A small UB: a core's group takes several sub-groups of resident channels, rows in chunks."""
    info = check(sim, shape, False, "float32", True, ub_bytes=ub_kib * 1024, cores=3)
    assert info.strategy == SINGLE and info.sp_channels < -(-shape[1] // 3)
    check(sim, shape, False, "float16", True, ub_bytes=ub_kib * 1024, cores=3, seed=2)


@pytest.mark.parametrize("mask", ALL_MASKS)
@pytest.mark.parametrize("training", [True, False])
def test_masks(sim, mask, training):
    info = check(sim, (5, 6, 3, 7), False, "float16", training, mask, cores=4)
    assert info.strategy == SINGLE


NO_PAD_SOCS = ("ascend910", "ascend310p")  # Atlas training / inference: no DataCopyPad


@pytest.mark.parametrize("soc", simlib.SOCS)
def test_every_soc(sim, soc):
    """Atlas training / inference (no DataCopyPad): slices of whole blocks go single pass as they are,
    others packed, in runs of adjacent channels that are whole blocks together (8 at 7x7 float32), and
    only when the channels are whole runs."""
    info = check(sim, (4, 24, 8, 8), False, "float16", True, soc=soc, cores=4)
    assert info.strategy == SINGLE and info.sp_quantum == 0
    info = check(sim, (4, 24, 7, 7), False, "float32", True, soc=soc, cores=4)
    assert info.strategy == SINGLE and info.sp_quantum == (8 if soc in NO_PAD_SOCS else 0)
    info = check(sim, (4, 20, 7, 7), False, "float32", True, soc=soc, cores=4)
    assert info.strategy == (SINGLE if soc not in NO_PAD_SOCS else simlib.STRATEGIES["two_pass"])


# (shape, dtype, runs of channels): inner * element bytes not whole blocks.
PACKED = [((3, 16, 14, 14), "float32", 2), ((4, 32, 7, 7), "float16", 16), ((3, 24, 5, 5), "float32", 8),
          ((2, 32, 3, 7), "float16", 16), ((5, 48, 14, 14), "float16", 4), ((3, 16, 6, 6), "float32", 2),
          ((4, 32, 6, 6), "float16", 4), ((3, 48, 5, 5), "float16", 16)]
# Slices of 3 to 6 whole float blocks and 1, 2 or 4 floats more (tiling spLaneSums): lane partials by
# block-strided masked Adds, then ReduceRepeat where the SoC has it on float (ascend310p), else the scalar unit.
LANE_SUMS = {(7, 7): True, (5, 5): True, (6, 6): True, (14, 14): False, (3, 7): False}


@pytest.mark.parametrize("soc", NO_PAD_SOCS)
@pytest.mark.parametrize("shape,dtype,runs", PACKED)
@pytest.mark.parametrize("training", [True, False])
def test_packed_slices_without_data_copy_pad(sim, soc, shape, dtype, runs, training):
    info = check(sim, shape, False, dtype, training, soc=soc, cores=3)
    assert info.strategy == SINGLE and info.sp_quantum == runs and info.sp_channels % runs == 0
    assert info.groups * runs <= shape[1] and info.used_cores == info.groups
    lanes = {"ascend910": 1, "ascend310p": 2}[soc] if LANE_SUMS[shape[2:]] else 0
    assert info.sp_lane_sums == lanes


@pytest.mark.parametrize("soc", NO_PAD_SOCS)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_lane_sums_of_long_sub_groups(sim, soc, dtype):
    """One core, 7x7 sub-groups whose rows are more than 255 blocks (the masked Duplicates a call per row),
    several runs per sub-group (a repeat per run), against the reference, and the same bits on 5 cores."""
    shape = (2, 320, 7, 7)
    args = make_inputs(shape, False, dtype, seed=7)
    runs = []
    for cores in (1, 5):
        info = check(sim, shape, False, dtype, True, soc=soc, cores=cores, seed=7)
        assert info.strategy == SINGLE and info.sp_lane_sums > 0
        got, info = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                               args["save_invstd"], dtype=dtype, soc=soc, cores=cores)
        runs.append((got, info.sp_channels))
    assert runs[0][1] * 49 // 8 > 255
    for x, y in zip(runs[0][0], runs[1][0]):
        assert np.array_equal(x, y)


@pytest.mark.parametrize("soc", NO_PAD_SOCS)
@pytest.mark.parametrize("mask", ALL_MASKS)
@pytest.mark.parametrize("training", [True, False])
def test_packed_masks(sim, soc, mask, training):
    info = check(sim, (3, 32, 7, 7), False, "float32", training, mask, soc=soc, cores=2)
    assert info.strategy == SINGLE and info.sp_quantum == 8
    info = check(sim, (3, 32, 7, 7), False, "float16", training, mask, soc=soc, cores=2, seed=3)
    assert info.strategy == SINGLE and info.sp_quantum == 16


@pytest.mark.parametrize("ub_kib,shape,dtype", [(40, (6, 48, 7, 7), "float32"), (32, (5, 32, 14, 14), "float32"),
                                                (48, (4, 64, 7, 7), "float16")])
def test_packed_sub_groups_and_chunks(sim, ub_kib, shape, dtype):
    """A small UB: a core's group of packed channels in several sub-groups of whole runs."""
    info = check(sim, shape, False, dtype, True, soc="ascend910", ub_bytes=ub_kib * 1024, cores=2)
    assert info.strategy == SINGLE and info.sp_quantum > 0 and info.sp_channels < shape[1] // 2


# Segmented sums and per-block broadcasts (tiling spSegSum): a slice of at most one float repeat, not
# packed, on the SoC lines with float ReduceRepeat, Brcb and the masked Copy.
# In training, a slice of a whole float repeat (16-bit 7x7, 8x8) takes compact slabs (SP_SEG_COMPACT, 2):
# a block per slice of mean, a, k and b, read with block stride 0 by the repeat forms.
@pytest.mark.parametrize("soc,shape,dtype,training,seg", [
    ("ascend910b", (4, 40, 7, 7), "float32", True, 2), ("ascend910_93", (4, 40, 8, 8), "float16", True, 2),
    ("ascend950", (3, 24, 7, 7), "bfloat16", True, 2), ("ascend910b", (4, 19, 14, 14), "float32", True, 0),
    ("ascend910", (4, 48, 7, 7), "float32", True, 0), ("ascend310p", (4, 16, 8, 8), "float32", True, 0),
    ("ascend910b", (4, 40, 8, 8), "float32", True, 2), ("ascend910b", (4, 40, 7, 7), "float16", False, 1),
])
def test_segmented_sums_where_the_soc_has_them(sim, soc, shape, dtype, training, seg):
    info = check(sim, shape, False, dtype, training, soc=soc, cores=3)
    assert info.strategy == SINGLE and info.sp_seg_sum == seg


@pytest.mark.parametrize("soc,dtype", [("ascend910b", "float16"), ("ascend950", "float32"),
                                       ("ascend910_93", "bfloat16")])
def test_compact_slabs_masks_and_cores(sim, soc, dtype):
    """Compact slabs (SP_SEG_COMPACT): every mask against the reference, then the same bits on 1, 3 and 7
    cores (sub-groups of other sizes, off a block of lanes)."""
    shape = (6, 45, 8, 8)
    for mask in ALL_MASKS:
        info = check(sim, shape, False, dtype, True, mask, soc=soc, cores=2, seed=3)
        assert info.strategy == SINGLE and info.sp_seg_sum == 2
    args = make_inputs(shape, False, dtype, seed=3)
    runs = []
    for cores in (1, 3, 7):
        got, info = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                               args["save_invstd"], dtype=dtype, soc=soc, cores=cores)
        assert info.sp_seg_sum == 2
        runs.append(got)
    for got in runs[1:]:
        for x, y in zip(runs[0], got):
            assert np.array_equal(x, y)


# UB sizes that change the resident channels but keep 4 rows per vector instruction (fewer rows, where one
# run of channels would not fit UB otherwise, sum in another order).
DETERMINISM = [("ascend910b", (6, 37, 7, 7), ((1, 0), (3, 0), (8, 0), (5, 24 * 1024), (2, 40 * 1024))),
               ("ascend910", (6, 96, 7, 7), ((1, 0), (3, 0), (5, 0), (4, 128 * 1024), (2, 160 * 1024))),
               ("ascend310p", (6, 96, 7, 7), ((1, 0), (3, 0), (5, 0), (4, 128 * 1024), (2, 160 * 1024)))]


@pytest.mark.parametrize("soc,shape,configs", DETERMINISM, ids=[d[0] for d in DETERMINISM])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_deterministic_for_any_core_count_and_sub_group(sim, dtype, soc, shape, configs):
    """ascend910 / ascend310p: packed slices, whose lane partials and their sums are the same whatever the
    cores and the resident channels."""
    args = make_inputs(shape, False, dtype)
    runs = []
    for cores, ub in configs:
        got, info = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                               args["save_invstd"], dtype=dtype, ub_bytes=ub, cores=cores, soc=soc)
        assert info.strategy == SINGLE and (info.sp_quantum > 0) == (soc in NO_PAD_SOCS)
        assert (info.sp_seg_sum > 0) == (soc == "ascend910b")  # 7x7: the segmented sums on 910B
        runs.append((got, info.sp_channels))
    assert len({sp for _, sp in runs}) > 1  # the runs differ in resident channels, not only in cores
    for got, _ in runs[1:]:
        for x, y in zip(runs[0][0], got):
            assert np.array_equal(x, y)


@pytest.mark.parametrize("soc", NO_PAD_SOCS)
@pytest.mark.parametrize("dtype,vectors_float,groups", [("float32", False, 4), ("float16", True, 4),
                                                        ("float16", False, 2)])
def test_groups_of_one_block_of_per_channel_values(sim, soc, dtype, vectors_float, groups):
    """Without DataCopyPad a group holds at least one block of its narrowest per-channel vector in GM:
    8 channels when weight, the statistics and grad_weight / grad_bias are all float32, else 16 (both
    strategies)."""
    params = ("weight", "save_mean", "save_invstd") if vectors_float else ()
    info = check(sim, (3, 32, 14, 14), False, dtype, True, soc=soc, cores=4, param_float32=params,
                 grad_param_float32=vectors_float)
    assert info.strategy == SINGLE and info.groups == groups and info.used_cores == groups
    # the two-pass strategy's groups too (each group's units on one core: no SyncAll on these SoCs)
    info = check(sim, (3, 32, 14, 14), False, dtype, True, soc=soc, cores=4, param_float32=params,
                 grad_param_float32=vectors_float, two_pass=True)
    assert info.strategy == simlib.STRATEGIES["two_pass"] and info.groups == groups and info.used_cores == groups


# 16-bit types double-buffer their sub-groups where one buffer cannot hold the core's whole group; a whole
# group that fits one buffer keeps it. (cores, UB KiB: 0 the SoC's) of a (8, 24, 14, 14) layer, with the
# buffers and channels per sub-group they give.
DOUBLE_16 = [(3, 64, 2, 1), (3, 96, 2, 2), (2, 0, 2, 3), (12, 0, 1, 2), (1, 36, 1, 1)]


@pytest.mark.parametrize("soc", ["ascend910b", "ascend950"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_double_buffered_16_bit_sub_groups(sim, soc, dtype):
    shape = (8, 24, 14, 14)
    for cores, ub_kib, buffers, channels in DOUBLE_16[:3]:
        info = check(sim, shape, False, dtype, True, soc=soc, ub_bytes=ub_kib * 1024, cores=cores, two_pass=False,
                     seed=cores)
        assert info.strategy == SINGLE and (info.sp_buffers, info.sp_channels) == (buffers, channels)
    check(sim, shape, False, dtype, True, (True, False, True), soc=soc, ub_bytes=96 * 1024, cores=3,
          two_pass=False, param_float32=("save_invstd",))  # a mask, a float32 statistic beside 16-bit ones
    check(sim, shape, False, dtype, True, soc=soc, ub_bytes=64 * 1024, cores=3, two_pass=False, with_weight=False)
    # the same bits whatever the cores, buffers and sub-groups
    args = make_inputs(shape, False, dtype, seed=3)
    runs = []
    for cores, ub_kib, buffers, channels in DOUBLE_16:
        got, info = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                               args["save_invstd"], dtype=dtype, ub_bytes=ub_kib * 1024, cores=cores, soc=soc)
        assert info.strategy == SINGLE and (info.sp_buffers, info.sp_channels) == (buffers, channels)
        runs.append(got)
    for got in runs[1:]:
        for x, y in zip(runs[0], got):
            assert np.array_equal(x, y)


@pytest.mark.parametrize("soc", ["ascend910b", "ascend950"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_short_sub_group_first_16_bit(sim, soc, dtype):
    """16-bit types, double-buffered: a group that is not whole sub-groups takes its short one first (5
    channels per core in sub-groups of 2: 1, 2, 2), the next longer sub-group in that buffer after all of
    the short one's chunks are released; values against the reference, and the same bits as one buffer."""
    shape = (8, 24, 14, 14)
    args = make_inputs(shape, False, dtype, seed=4)
    runs = []
    for cores, ub_kib, buffers, channels in ((5, 96, 2, 2), (12, 0, 1, 2), (3, 96, 2, 2)):
        info = check(sim, shape, False, dtype, True, soc=soc, ub_bytes=ub_kib * 1024, cores=cores, two_pass=False,
                     seed=4)
        assert info.strategy == SINGLE and (info.sp_buffers, info.sp_channels) == (buffers, channels)
        got, _ = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                            args["save_invstd"], dtype=dtype, ub_bytes=ub_kib * 1024, cores=cores, soc=soc)
        runs.append(got)
    for got in runs[1:]:
        for x, y in zip(runs[0], got):
            assert np.array_equal(x, y)


@pytest.mark.parametrize("soc", ["ascend910b", "ascend950"])
def test_few_sub_groups_half_rows_float32(sim, soc):
    """float32 segmented sums (7x7): a group of at least 12 channels is cut into three double-buffered
    sub-groups at half the rows per vector instruction, the sums keeping their accumulator rows, so the
    bits are those of the sub-groups at the full rows (16 cores: 3 channels per core, one buffer)."""
    shape, dtype = (8, 48, 7, 7), "float32"
    args = make_inputs(shape, False, dtype, seed=7)
    runs = []
    for cores, buffers, channels, rows in ((1, 2, 16, 2), (4, 2, 4, 2), (16, 1, 3, 4)):
        info = check(sim, shape, False, dtype, True, soc=soc, cores=cores, seed=7)
        assert info.strategy == SINGLE and info.sp_seg_sum == 2
        assert (info.sp_buffers, info.sp_channels, info.sp_slab_rows) == (buffers, channels, rows)
        got, _ = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                            args["save_invstd"], dtype=dtype, cores=cores, soc=soc)
        runs.append(got)
    for got in runs[1:]:
        for x, y in zip(runs[0], got):
            assert np.array_equal(x, y)


def test_half_rows_double_buffered_sub_groups(sim):
    """A tensor of many sub-groups that one buffer holds one at a time (here one 28x28 channel in a small UB,
    128 channels), on a SoC with mul_add: 16-bit types double-buffer them at half the rows per vector
    instruction; the decision depends on the shape and the SoC only, so the sums' order, and the bits, are
    the same whatever the cores."""
    shape, ub, dtype = (8, 128, 28, 28), 104 * 1024, "float16"
    args = make_inputs(shape, False, dtype, seed=5)
    runs = []
    for cores in (1, 3, 8):
        info = check(sim, shape, False, dtype, True, soc="ascend310p", ub_bytes=ub, cores=cores, seed=5)
        assert info.strategy == SINGLE and info.sp_channels == 1
        assert info.sp_buffers == 2 and info.sp_slab_rows == 1
        got, _ = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                            args["save_invstd"], dtype=dtype, ub_bytes=ub, cores=cores, soc="ascend310p")
        runs.append(got)
    for got in runs[1:]:
        for x, y in zip(runs[0], got):
            assert np.array_equal(x, y)


# Tiling spWhole (16-bit types where the SoC has DataCopyPad and mul_add, a channel of at least
# SP_WHOLE_MIN_ELEMS elements whose float copies fit UB): one channel per sub-group, its x - mean and dy kept
# as float from the reduce to the apply, every per-channel value a scalar operand. Shapes with N a multiple
# of the accumulator rows, N not, and N below two of them (its dy sums seeded by a copy).
WHOLE = [(24, 10, 14, 14), (21, 7, 14, 14), (12, 5, 20, 20)]
# (cores, UB KiB: 0 the SoC's) of a (24, 10, 14, 14) layer and the resident buffers they give.
WHOLE_BUFFERS = [(1, 0, 3), (4, 0, 3), (7, 0, 3), (3, 112, 2), (2, 96, 1)]


@pytest.mark.parametrize("soc", ["ascend910b", "ascend950"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_whole_channel_float_copies(sim, soc, dtype):
    for i, shape in enumerate(WHOLE):
        info = check(sim, shape, False, dtype, True, soc=soc, cores=3, seed=i)
        assert info.strategy == SINGLE and info.sp_whole == 1 and info.sp_channels == 1
    for training in (True, False):
        for mask in ALL_MASKS:
            info = check(sim, WHOLE[1], False, dtype, training, mask, soc=soc, cores=2, two_pass=False)
            assert info.sp_whole == 1
    check(sim, WHOLE[0], False, dtype, True, soc=soc, cores=3, two_pass=False, param_float32=("save_invstd",))
    check(sim, WHOLE[0], False, dtype, True, soc=soc, cores=3, two_pass=False, with_weight=False)
    # not for float32, nor for a channel below SP_WHOLE_MIN_ELEMS
    assert check(sim, WHOLE[0], False, "float32", True, soc=soc, cores=3, two_pass=False).sp_whole == 0
    assert check(sim, (8, 10, 14, 14), False, dtype, True, soc=soc, cores=3, two_pass=False).sp_whole == 0
    # the same bits whatever the cores and buffers
    args = make_inputs(WHOLE[0], False, dtype, seed=4)
    runs = []
    for cores, ub_kib, buffers in WHOLE_BUFFERS:
        got, info = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                               args["save_invstd"], dtype=dtype, ub_bytes=ub_kib * 1024, cores=cores, soc=soc)
        assert info.strategy == SINGLE and info.sp_whole == 1 and info.sp_buffers == buffers
        runs.append(got)
    for got in runs[1:]:
        for x, y in zip(runs[0], got):
            assert np.array_equal(x, y)


@pytest.mark.parametrize("soc", NO_PAD_SOCS)
def test_no_whole_channel_float_copies_without_data_copy_pad(sim, soc):
    info = check(sim, (24, 16, 14, 14), False, "float16", True, soc=soc, cores=3, two_pass=False)
    # no sub-groups of one channel with both float copies (spWhole 1); ascend910 keeps x - mean's alone (2)
    assert info.strategy == SINGLE and info.sp_quantum > 0 and info.sp_whole == (2 if soc == "ascend910" else 0)


@pytest.mark.parametrize("shape,dtype", [((3, 40, 14, 14), "float32"), ((3, 40, 14, 14), "float16"),
                                         ((2, 12, 28, 28), "float32"), ((2, 20, 3, 7), "float16")])
def test_tree_sums_same_bits_any_cores(sim, shape, dtype):
    """ascend910 (no float ReduceSum): the sums' trees of Adds over several sums at once (a repeat per sum:
    both sums of a channel, or every sum of a sub-group where the bodies are equally spaced), against the
    reference, and the same bits on 1, 3 and 7 cores."""
    args = make_inputs(shape, False, dtype, seed=11)
    outs = []
    for cores in (1, 3, 7):
        check(sim, shape, False, dtype, True, soc="ascend910", cores=cores, seed=11)
        got, _ = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                            args["save_invstd"], dtype=dtype, soc="ascend910", cores=cores)
        outs.append(got)
    assert_same_bits(outs)


@pytest.mark.parametrize("shape,dtype", [((3, 40, 14, 14), "float32"), ((5, 48, 14, 14), "float16"),
                                         ((9, 24, 14, 14), "float16")])
def test_phase_sums_and_column_apply_same_bits_any_cores(sim, shape, dtype):
    """ascend310p's packed 14x14 single pass, 16-bit: each sum's body folded to a repeat by Adds and summed by
    two ReduceDataBlocks for all sums of a sub-group (PhaseSums), the apply a repeat per block column of twice
    the slab rows (ColumnApply, N not a multiple of them too); float32 (runs of two channels) keeps a ReduceSum
    per sum: against the reference, and the same bits on 1, 3 and 7 cores (other sub-groups, short ones
    included)."""
    args = make_inputs(shape, False, dtype, seed=13)
    outs = []
    for cores in (1, 3, 7):
        info = check(sim, shape, False, dtype, True, soc="ascend310p", cores=cores, seed=13, two_pass=False)
        assert info.strategy == SINGLE and info.sp_quantum > 0 and info.sp_lane_sums == 0
        got, _ = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                            args["save_invstd"], dtype=dtype, soc="ascend310p", cores=cores)
        outs.append(got)
    assert_same_bits(outs)


def test_wide_rows_same_bits_any_cores_and_rows(sim):
    """ascend910 16-bit (no mul_add, vector-bound): the sums keep SP_WIDE_SLAB_ROWS accumulator rows, decided
    from the shape and the SoC, and the instructions cover as many rows where they fit (else SP_SLAB_ROWS):
    against the reference, and the same bits on 1, 2 and 5 cores and at either rows per instruction (N not
    a multiple of them)."""
    shape, dtype = (12, 6, 28, 28), "float16"
    args = make_inputs(shape, False, dtype, seed=5)
    outs = []
    for cores, ub_kib, rows in ((1, 0, 8), (2, 0, 8), (5, 0, 8), (2, 120, 4), (5, 120, 4)):
        check(sim, shape, False, dtype, True, soc="ascend910", cores=cores, seed=5,
              **({"ub_bytes": ub_kib * 1024} if ub_kib else {}))
        got, info = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                               args["save_invstd"], dtype=dtype, soc="ascend910", cores=cores, ub_bytes=ub_kib * 1024)
        assert info.strategy == SINGLE and info.sp_slab_rows == rows, (cores, ub_kib, info.sp_slab_rows)
        outs.append(got)
    assert_same_bits(outs)
    # float32 keeps SP_SLAB_ROWS
    assert check(sim, shape, False, "float32", True, soc="ascend910", cores=2).sp_slab_rows == 4


@pytest.mark.parametrize("shape,dtype,cores", [((16, 44, 14, 14), "float32", 2), ((8, 40, 14, 14), "float16", 1),
                                               ((16, 24, 14, 14), "float16", 4), ((16, 24, 14, 14), "float32", 4)])
def test_deferred_stat_tails(sim, shape, dtype, cores):
    """ascend910 (no DataCopyPad): the last group's statistics whose last block would reach past the vector's
    end in GM (DeferredStatTail: lands beside the group's lanes, moved by the scalar unit; 16-bit statistics
    through their staging and cast after), with whole blocks before the tail or without, float32 and 16-bit
    statistics, against the reference."""
    info = check(sim, shape, False, dtype, True, soc="ascend910", cores=cores, two_pass=False)
    assert info.strategy == SINGLE
    check(sim, shape, False, dtype, True, soc="ascend910", cores=cores, two_pass=False,
          param_float32=("weight", "save_invstd"))
# Tiling spSpare (ascend310p, 16-bit types, one resident buffer): the buffer is a ring of chunk slots with
# spare ones, the next sub-group's first chunks loading into slots the current one does not use. (cores, UB)
# where the ring is taken with several sub-groups per group.
RING = [((8, 48, 14, 14), 3, 128 * 1024, 1), ((6, 96, 7, 7), 2, 64 * 1024, 2), ((12, 64, 7, 7), 3, 128 * 1024, 2)]


@pytest.mark.parametrize("shape,cores,ub,spare", RING, ids=[str(r[0]) for r in RING])
def test_ring_of_chunk_slots_16_bit(sim, shape, cores, ub, spare):
    """Values against the reference (and the hazard checks) with the ring, with a mask and a float32
    statistic too; the same bits as double buffering where the rows per instruction are the same."""
    info = check(sim, shape, False, "float16", True, soc="ascend310p", ub_bytes=ub, cores=cores, two_pass=False,
                 seed=6)
    per_group = -(-shape[1] // info.groups)
    assert info.strategy == SINGLE and info.sp_buffers == 1 and info.sp_spare == spare
    assert per_group > info.sp_channels  # several sub-groups per group
    check(sim, shape, False, "float16", True, (True, False, True), soc="ascend310p", ub_bytes=ub, cores=cores,
          two_pass=False, param_float32=("save_invstd",), seed=7)
    if shape == (12, 64, 7, 7):
        for mask in ALL_MASKS:
            assert check(sim, shape, False, "float16", True, mask, soc="ascend310p", ub_bytes=ub, cores=cores,
                         two_pass=False, seed=2).sp_spare == spare
    if shape == (8, 48, 14, 14):
        args = make_inputs(shape, False, "float16", seed=3)
        runs = []
        for c, u in ((cores, ub), (1, 0)):
            got, info = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                                   args["save_invstd"], dtype="float16", ub_bytes=u, cores=c, soc="ascend310p")
            runs.append((got, info.sp_spare, info.sp_buffers, info.sp_slab_rows))
        assert [r[1:] for r in runs] == [(1, 1, 4), (0, 2, 4)]
        for x, y in zip(runs[0][0], runs[1][0]):
            assert np.array_equal(x, y)


def test_ring_instead_of_half_rows(sim):
    """Where a spare chunk slot fits beside one buffer at the full rows (decided, as the half rows are, with
    a one-core launch's plan), the ring of chunk slots is taken instead of double buffering at half the
    rows (here 4 rows per instruction, not 2; 132 KiB of UB still halves them): values against the
    reference, and the same bits whatever the cores."""
    shape, dtype = (8, 128, 28, 28), "float16"
    args = make_inputs(shape, False, dtype, seed=5)
    runs = []
    for cores in (1, 3, 8):
        info = check(sim, shape, False, dtype, True, soc="ascend310p", ub_bytes=136 * 1024, cores=cores, seed=5,
                     two_pass=False)
        assert info.strategy == SINGLE and (info.sp_buffers, info.sp_slab_rows, info.sp_spare) == (1, 4, 1)
        got, _ = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                            args["save_invstd"], dtype=dtype, ub_bytes=136 * 1024, cores=cores, soc="ascend310p")
        runs.append(got)
    info = check(sim, shape, False, dtype, True, soc="ascend310p", ub_bytes=132 * 1024, cores=3, seed=5,
                 two_pass=False)
    assert (info.sp_buffers, info.sp_slab_rows, info.sp_spare) == (2, 2, 0)
    for got in runs[1:]:
        for x, y in zip(runs[0], got):
            assert np.array_equal(x, y)



def _chunks(outer, chunk_rows, last_rows=0):
    """Chunks of a sub-group's rows: chunk_rows each, and (tiling spLastRows) a last one of last_rows."""
    return -(-(outer - last_rows) // chunk_rows) + (1 if last_rows else 0)


@pytest.mark.parametrize("shape,dtype,buffers,training,mask", [
    ((32, 16, 8, 8), "float32", 2, True, 7), ((64, 8, 8, 8), "float16", 1, True, 7),
    ((32, 2, 28, 28), "float32", 1, True, 7), ((32, 32, 7, 7), "float32", 2, True, 7),
    ((32, 16, 8, 8), "float32", 2, False, 1), ((32, 2, 28, 28), "float32", 1, True, 6),
])
def test_ascend910_single_pass_event_ids_within_que_max_event(sim, shape, dtype, buffers, training, mask):
    """dav-c100's TPipe has 4 event ids per HardEvent (kernel_macros.h QUE_MAX_EVENT; op_def event_ids). The
    single pass used to give chunk c of buffer b the ids b x chunks + c (MTE2_V, V_MTE2, V_MTE3, MTE3_MTE2)
    and take 8 / buffers chunks whatever the SoC: ids up to 7 here, which SetFlag refuses. Now its ids are
    sets of one id a chunk (MTE2_V: one set where the loads are reduced, else one a buffer; the releases one
    set up to two buffers) and the tiling keeps chunks x sets within the SoC's ids; the results are the
    reference's (also with nothing reduced: grad_input alone, in inference)."""
    info = check(sim, shape, False, dtype, training, tuple(bool(mask >> i & 1) for i in range(3)), soc="ascend910",
                 cores=2)
    assert info.strategy == SINGLE and info.sp_buffers == buffers and info.sp_spare == 0
    outer, slab_rows = shape[0], info.sp_slab_rows
    old_rows = -(-(-(-outer // min(8 // buffers, outer))) // slab_rows) * slab_rows  # the old tiling's chunk rows
    assert buffers * _chunks(outer, old_rows) > 4  # the old ids reached past the 4
    reduces = bool(mask & 6) or (training and mask & 1)
    sets = 1 if reduces else buffers
    assert 0 < sets * _chunks(outer, info.sp_chunk_rows, info.sp_last_rows) <= 4
    assert info.sp_chunk_rows % slab_rows == 0  # chunks start on whole instructions (the sums keep their order)


def test_ascend910_float32_7x7_last_sub_group_after_its_loads(sim):
    """ascend910 float32 7x7, two buffers (tiling spLastRows): a sub-group's last chunk is one instruction's rows
    (12, 12, 4 and 4 of 32 rows), a has a slab of its own, filled for the core's last sub-group at the start of
    its group, and that sub-group is applied from slabs, k and b filled channel by channel in the scalar
    hand-over, a store per instruction's rows: against the float64 reference under every mask and both modes
    (spLastRows only in training with grad_input), and the same bits as launches whose last sub-group is
    another (other cores), whose chunks are even (a sub-group a core; a UB without room for a's own slab)."""
    shape = (32, 32, 7, 7)
    for mask in ALL_MASKS:
        for training in (True, False):
            info = check(sim, shape, False, "float32", training, mask, soc="ascend910", cores=2, seed=9)
            assert info.strategy == SINGLE and info.sp_buffers == 2
            assert info.sp_last_rows == (info.sp_slab_rows if training and mask[0] else 0), (mask, training)
            if training and all(mask):
                assert (info.sp_chunk_rows, info.sp_last_rows) == (12, 4)
                assert _chunks(shape[0], info.sp_chunk_rows, info.sp_last_rows) == 4  # the event ids' chunks
    args = make_inputs(shape, False, "float32", seed=9)
    outs, last_rows = [], set()
    for cores, ub_kib in ((2, 0), (1, 0), (3, 0), (4, 0), (2, 232)):
        got, info = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                               args["save_invstd"], dtype="float32", soc="ascend910", cores=cores,
                               ub_bytes=ub_kib * 1024)
        assert info.strategy == SINGLE
        last_rows.add(info.sp_last_rows)
        outs.append(got)
    assert last_rows == {0, 4}  # both chunkings are compared
    assert_same_bits(outs)


@pytest.mark.parametrize("soc,dtype,ub_kib", [("ascend910b", "float32", 40), ("ascend910b", "float16", 64),
                                              ("ascend950", "float32", 40)])
def test_even_sub_groups_keep_copies_long(sim, soc, dtype, ub_kib):
    """Tiling spEven (SP_MIN_BURST_BYTES): where whole sub-groups and a short one would leave that one a
    copy of a channel or two of a 7x7 slice, a group's sub-groups take even sizes (the same count, differing
    by a channel at most): against the float64 reference under every mask and both modes, and the same bits
    as launches whose sub-groups are cut otherwise (other cores and UB sizes)."""
    shape = (6, 26, 7, 7)
    for mask in ALL_MASKS:
        for training in (True, False):
            info = check(sim, shape, False, dtype, training, mask, soc=soc, cores=1, seed=3,
                         ub_bytes=ub_kib * 1024, two_pass=False)
            assert info.strategy == SINGLE and info.sp_even == 1, (mask, training, info.sp_even)
    # each sub-group at least SP_MIN_BURST_BYTES a row: 26 channels in sub-groups of at most spChannels
    subs = -(-26 // info.sp_channels)
    assert 26 // subs * 7 * 7 * (4 if dtype == "float32" else 2) >= 512
    args = make_inputs(shape, False, dtype, seed=3)
    outs, evens = [], set()
    for cores, ub in ((1, ub_kib), (2, ub_kib), (3, 0), (1, 0), (5, ub_kib)):
        got, info = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                               args["save_invstd"], dtype=dtype, soc=soc, cores=cores, ub_bytes=ub * 1024)
        assert info.strategy == SINGLE
        evens.add(info.sp_even)
        outs.append(got)
    assert evens == {0, 1}  # both ways of cutting are compared
    assert_same_bits(outs)


def test_wide_packed_channels_scalar_operands_any_core_count(sim):
    """ascend910 float32 14x14: runs of two channels each wider than a repeat, whose apply takes a, k and b as
    the scalar operands of a masked repeat per piece of a channel, but in a core's last sub-group from slabs,
    in the same order of operations: against the reference (with and without grad_weight / grad_bias), and
    the same bits whichever sub-group is a core's last (cores, resident channels)."""
    shape = (4, 24, 14, 14)
    check(sim, shape, False, "float32", True, (True, False, False), soc="ascend910", cores=3, seed=5)
    args = make_inputs(shape, False, "float32", seed=5)
    runs = []
    for cores, ub_kib in ((1, 0), (1, 48), (3, 0), (5, 64)):
        info = check(sim, shape, False, "float32", True, soc="ascend910", ub_bytes=ub_kib * 1024, cores=cores,
                     seed=5)
        assert info.strategy == SINGLE and info.sp_quantum == 2
        got, info = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                               args["save_invstd"], dtype="float32", soc="ascend910", ub_bytes=ub_kib * 1024,
                               cores=cores)
        runs.append((got, info.sp_channels))
    assert len({sp for _, sp in runs}) > 1
    for got, _ in runs[1:]:
        for x, y in zip(runs[0][0], got):
            assert np.array_equal(x, y)


@pytest.mark.parametrize("shape", [(12, 32, 7, 7), (12, 16, 14, 14)])
def test_kept_x_minus_mean_same_bits_as_its_slabs(sim, shape):
    """ascend910's 16-bit packed single pass in training (no mul_add): grad_input is (k * (x - mean) + b) + a *
    dy. Where the float copy of x - mean over all rows fits (spWhole 2) it is kept from the reduce to the apply,
    k and b scalar operands; with a smaller UB the apply recomputes x - mean from slabs in the same order. Both
    against the reference, and the same bits (also on 1 and 3 cores)."""
    dtype = "float16"
    args = make_inputs(shape, False, dtype, seed=5)
    outs = []
    for ub_kib, cores, whole in ((0, 1, 2), (0, 3, 2), (120, 1, 0)):
        info = check(sim, shape, False, dtype, True, soc="ascend910", ub_bytes=ub_kib * 1024, cores=cores, seed=5)
        assert info.strategy == SINGLE and info.sp_quantum > 1 and info.sp_whole == whole, (ub_kib, info.sp_whole)
        assert info.sp_slab_rows == 4
        got, _ = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                            args["save_invstd"], dtype=dtype, soc="ascend910", ub_bytes=ub_kib * 1024, cores=cores)
        outs.append(got)
    assert_same_bits(outs)


def test_ascend910_16bit_one_channel_ring_of_chunk_slots(sim):
    """ascend910's 16-bit single pass of one channel per sub-group (28x28 slices, no mul_add): the per-channel
    values are scalar operands, so no slab of mean or a is laid out, and dy * (x - mean) goes over dy's float
    copy once dy's sum has read it, so no product's slab either; that UB holds a spare chunk slot, so the
    resident buffer is a ring of chunk slots (spSpare) and the next sub-group's first rows load while this one
    is applied, where with one buffer they waited for its stores; the apply takes twice the rows an instruction
    (its float rows in the sums' slabs and both cast slabs). Values against the reference (every mask, a float32
    statistic, N not a multiple of the apply's rows: 28 rows in chunks of 16 and 12), and the same bits as one
    buffer without the ring (a smaller UB, the same rows per instruction) and on two cores."""
    shape, dtype = (32, 8, 28, 28), "float16"
    for mask in ALL_MASKS:
        info = check(sim, shape, False, dtype, True, mask, soc="ascend910", cores=1, two_pass=False, seed=4)
        assert info.strategy == SINGLE and info.sp_channels == 1 and info.sp_spare == 1, mask
    info = check(sim, (28, 4, 28, 28), False, dtype, True, soc="ascend910", cores=1, two_pass=False, seed=3)
    assert (info.sp_channels, info.sp_slab_rows, info.sp_spare, info.sp_chunk_rows) == (1, 8, 1, 16)
    check(sim, shape, False, dtype, True, soc="ascend910", cores=1, two_pass=False, seed=5,
          param_float32=("save_invstd",))
    shape = (32, 32, 28, 28)  # two groups of a block of the per-channel vectors: two cores
    args = make_inputs(shape, False, dtype, seed=6)
    runs = []
    for ub_kib, cores, spare in ((0, 1, 1), (0, 2, 1), (220, 2, 0)):
        got, info = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                               args["save_invstd"], dtype=dtype, soc="ascend910", ub_bytes=ub_kib * 1024,
                               cores=cores)
        assert (info.sp_channels, info.sp_slab_rows, info.sp_spare, info.used_cores) == (1, 8, spare, cores), ub_kib
        runs.append(got)
    assert_same_bits(runs)
