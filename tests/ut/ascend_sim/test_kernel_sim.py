"""The unchanged Ascend C kernel and host tiling, run core by core on the CPU
build of the Ascend C API, against the float64 reference (tests/reference.py).
"""
import itertools

import numpy as np
import pytest

import simlib
from reference import batch_norm_backward_ref

pytestmark = pytest.mark.ascend_sim

ALL_MASKS = list(itertools.product([True, False], repeat=3))
# (rtol, atol) per dtype for the element-wise output; reductions add an
# accumulation term that grows with the number of reduced elements. Tighter
# here than the harness's model for float32 (why: tests/ut/_harness.py).
TOL = {"float32": (1e-4, 1e-5), "float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2)}


def make_inputs(shape, channel_last, dtype, seed=0, training=True, param_float32=(), with_weight=True,
                with_running=True):
    rng = np.random.default_rng(seed)
    c = shape[-1] if channel_last else shape[1]
    q = lambda a, name=None: simlib.quantize(a, "float32" if name in param_float32 else dtype)  # noqa: E731
    args = dict(
        grad_out=q(rng.standard_normal(shape)),
        x=q(rng.standard_normal(shape) * 2 + 0.5),
        weight=q(rng.uniform(0.5, 1.5, c), "weight") if with_weight else None,
        running_mean=q(rng.standard_normal(c) * 0.3, "running_mean") if with_running else None,
        running_var=q(rng.uniform(0.5, 2.0, c), "running_var") if with_running else None,
        save_mean=q(rng.standard_normal(c) * 0.3, "save_mean"),
        save_invstd=q(rng.uniform(0.5, 1.5, c), "save_invstd"),
    )
    return args


def check(sim, shape, channel_last=False, dtype="float32", training=True, mask=(True, True, True), soc="ascend910b",
          ub_bytes=0, cores=0, param_float32=(), grad_param_float32=False, seed=0, two_pass=None, l2_bytes=0, **kw):
    """Values against the float64 reference. two_pass=None: the tiling's own choice and, where that is
    the single pass, the two-pass strategy as well (both checked); True / False: that one run."""
    if two_pass is None:
        info = check(sim, shape, channel_last, dtype, training, mask, soc, ub_bytes, cores, param_float32,
                     grad_param_float32, seed, two_pass=False, l2_bytes=l2_bytes, **kw)
        if info.strategy == simlib.STRATEGIES["single_pass"]:
            check(sim, shape, channel_last, dtype, training, mask, soc, ub_bytes, cores, param_float32,
                  grad_param_float32, seed, two_pass=True, l2_bytes=l2_bytes, **kw)
        return info
    args = make_inputs(shape, channel_last, dtype, seed, training, param_float32, **kw)
    outs, info = simlib.run(sim, args["grad_out"], args["x"], args["weight"], args["running_mean"],
                            args["running_var"], args["save_mean"], args["save_invstd"], training=training,
                            output_mask=mask, channel_last=channel_last, dtype=dtype, soc=soc, ub_bytes=ub_bytes,
                            cores=cores, param_float32=param_float32, grad_param_float32=grad_param_float32,
                            two_pass=two_pass, l2_bytes=l2_bytes)
    refs = batch_norm_backward_ref(args["grad_out"], args["x"], args["weight"], args["running_mean"],
                                   args["running_var"], args["save_mean"], args["save_invstd"], training=training,
                                   eps=1e-5, output_mask=mask, data_format="NHWC" if channel_last else "NCHW")
    c = shape[-1] if channel_last else shape[1]
    n = int(np.prod(shape)) // c if c else 0
    gdt = "float32" if grad_param_float32 else dtype
    for i, (got, ref) in enumerate(zip(outs, refs)):
        rtol, atol = TOL[dtype if i == 0 else gdt]
        if i > 0:
            atol += 2e-6 * n * (1 + np.abs(args["x"]).max() if n else 1)  # float32 accumulation over n terms
        if not mask[i]:
            assert np.array_equal(got, np.zeros_like(ref)), f"output {i} masked but not zero-filled"
        np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, err_msg=f"output {i} ({info.layout=})")
    return info


def test_spec_worked_example(sim):
    dy = np.arange(8, dtype=np.float64).reshape(1, 2, 4)
    ones, zeros = np.ones(2), np.zeros(2)
    (gi, gw, gb), _ = simlib.run(sim, dy, dy, ones, zeros, ones, zeros, ones)
    ref = batch_norm_backward_ref(dy, dy, ones, zeros, ones, zeros, ones)
    np.testing.assert_allclose(gi, ref[0], atol=1e-5)
    np.testing.assert_allclose(gw, [14, 126])
    np.testing.assert_allclose(gb, [6, 22])


SHAPES = [
    ((4, 3, 5, 7), False),             # channel-first, tails everywhere
    ((2, 70, 9), False),               # two parameter groups
    ((6, 5), False),                   # NC: channel-last in memory
    ((3, 4, 5, 6), True),              # NHWC
    ((2, 3, 4, 5, 19), True),          # NDHWC, odd C
    ((2, 3, 1, 2, 1, 2, 1, 3), False),  # rank 8
    ((2, 16, 8, 8), False),            # whole blocks everywhere (no DataCopyPad)
]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape,channel_last", SHAPES)
def test_shapes_dtypes_modes(sim, shape, channel_last, dtype, training):
    check(sim, shape, channel_last, dtype, training)


@pytest.mark.parametrize("mask", ALL_MASKS)
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("channel_last", [False, True])
def test_all_masks(sim, mask, training, channel_last):
    check(sim, (3, 5, 6, 7) if not channel_last else (3, 6, 7, 5), channel_last, "float16", training, mask)


@pytest.mark.parametrize("training", [True, False])
def test_absent_optional_inputs(sim, training):
    check(sim, (2, 6, 11), False, "float32", training, with_weight=False, with_running=False)
    check(sim, (5, 9), True, "float16", training, with_weight=False, with_running=False)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_mixed_precision_params(sim, dtype):
    """Atlas 350 style: float32 statistics and gradients beside 16-bit activations."""
    params = ("weight", "running_mean", "running_var", "save_mean", "save_invstd")
    for training in (True, False):
        check(sim, (2, 7, 13), False, dtype, training, soc="ascend950", param_float32=params,
              grad_param_float32=True)
        check(sim, (4, 3, 10), True, dtype, training, soc="ascend950", param_float32=("weight",),
              grad_param_float32=True)


def test_small_c_splits_rows_over_cores(sim):
    """C=2 with a small UB: each channel's reduction spans many units on many cores."""
    info = check(sim, (3, 2, 3000), False, "float32", True, ub_bytes=24 * 1024, cores=8)
    assert info.used_cores == 8 and info.units >= 16 and info.layout == 0
    info = check(sim, (4000, 3), True, "float16", True, ub_bytes=24 * 1024, cores=8)
    assert info.used_cores == 8 and info.row_blocks >= 2


def test_large_c_splits_channels_over_cores(sim):
    info = check(sim, (2, 300, 3), False, "float16", True, cores=8, two_pass=True)
    assert info.used_cores == 8 and info.units == 300 and info.groups == 4  # last group takes the remainder


def test_tiny_ub_many_tiles(sim):
    info = check(sim, (5, 3, 2000), False, "bfloat16", True, ub_bytes=16 * 1024, cores=3)
    assert info.col_blocks > 1 and info.tile_cols < 2000
    info = check(sim, (50, 700), True, "float32", False, ub_bytes=16 * 1024, cores=3)
    assert info.col_blocks > 1 and info.row_blocks > 1


@pytest.mark.parametrize("soc", simlib.SOCS)
def test_each_soc_ub_size(sim, soc):
    """Whole-block shapes run on every SoC with its own UB; the tile grows with the UB."""
    dtype = "float16"
    info = check(sim, (64, 32, 512), False, dtype, True, soc=soc, cores=4, two_pass=True)
    assert info.use_pad == 0
    ub = {"ascend910b": 192, "ascend910_93": 192}.get(soc, 256) * 1024
    assert info.tile_rows * info.tile_cols * 2 * 6 < ub  # six 16-bit tile buffers fit
    assert info.tile_rows * info.tile_cols > 2000  # and the tile is not trivially small


@pytest.mark.parametrize("cores", [2, 3, 8])
def test_deterministic_for_any_core_count(sim, cores):
    args = make_inputs((4, 3, 999), False, "float32")
    run = lambda n: simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None,  # noqa: E731
                               args["save_mean"], args["save_invstd"], ub_bytes=20 * 1024, cores=n)
    (a, info1), (b, info2) = run(1), run(cores)
    assert info1.used_cores == 1 and info2.used_cores == cores
    for x, y in zip(a, b):
        assert np.array_equal(x, y)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape,ub_kib,l2_bytes", [
    ((4, 9, 999), 20, 0),           # one group per core, its partials combined from UB
    ((4, 24, 999), 20, 1 << 19),    # a small L2: several groups per core, both passes group by group
    ((2, 6, 9000), 16, 0),          # more units per group than one batch of partials: combined from GM
])
def test_whole_channels_per_core(sim, shape, ub_kib, l2_bytes, dtype):
    """Two passes, channels within 12.5% of an even split over the cores: whole channels per core, nothing
    crosses cores (no SyncAll); values against the reference, the same bits as one core and as the
    cross-core split of a core count that is not even."""
    info = check(sim, shape, False, dtype, True, cores=3, ub_bytes=ub_kib * 1024, l2_bytes=l2_bytes)
    assert info.strategy == simlib.STRATEGIES["two_pass"] and info.cross_core == 0 and info.used_cores == 3
    assert info.l2_rounds == 0 and (info.groups > 3) == (l2_bytes > 0)
    # partials of a group of at most one batch (SLOTS_PER_LOAD = 32 units) are combined from UB, else from GM
    c = shape[1]
    per_group = -(-c // info.groups) * (info.units // c)
    assert per_group > 32 if shape == (2, 6, 9000) else shape != (4, 9, 999) or per_group <= 32
    args = make_inputs(shape, False, dtype)
    outs = []
    for cores, cross in ((1, 1), (3, 0), (7, 1)):
        got, ri = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                             args["save_invstd"], dtype=dtype, ub_bytes=ub_kib * 1024, cores=cores,
                             l2_bytes=l2_bytes)
        assert ri.cross_core == cross and ri.used_cores == cores
        outs.append(got)
    for other in outs[1:]:
        for x, y in zip(outs[0], other):
            assert np.array_equal(x, y)


# Whole channels per core with several channels per group and at most one batch of partials per channel
# (SLOTS_PER_LOAD = 32 units): the channel pipeline (ChannelPipeline), its partials in a one-batch ring.
# (shape, dtype, UB KiB, units per channel): 9 units (float32 runs of 4, 4, 1; 9 channels of 9 wrap the
# ring), 22 (a channel straddles the ring's end), 16 (16-bit types alternate unit by unit), 42.
PIPELINED = [((4, 27, 999), "float32", 20, 9), ((4, 27, 999), "float32", 12, 22),
             ((4, 27, 999), "float16", 12, 16), ((3, 30, 4000), "bfloat16", 16, 42)]


@pytest.mark.parametrize("shape,dtype,ub_kib,per_channel", PIPELINED)
def test_channel_pipeline(sim, shape, dtype, ub_kib, per_channel):
    """Values against the reference (training, every mask, no weight), and the same bits as the paths
    that do not pipeline: one core (channels split across cores), no grad_input (the group's units one
    phase after the other)."""
    info = check(sim, shape, False, dtype, True, cores=3, ub_bytes=ub_kib * 1024)
    assert info.strategy == simlib.STRATEGIES["two_pass"] and info.cross_core == 0 and info.groups == 3
    assert info.units // shape[1] == per_channel and shape[1] // 3 * per_channel > 32
    for mask in ALL_MASKS:
        check(sim, shape, False, dtype, True, mask, cores=3, ub_bytes=ub_kib * 1024, seed=1)
    check(sim, shape, False, dtype, True, cores=3, ub_bytes=ub_kib * 1024, seed=2, with_weight=False)
    args = make_inputs(shape, False, dtype, seed=3)
    runs = []
    for cores, mask in ((3, (True, True, True)), (1, (True, True, True)), (3, (False, True, True))):
        got, ri = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                             args["save_invstd"], output_mask=mask, dtype=dtype, ub_bytes=ub_kib * 1024,
                             cores=cores)
        assert ri.cross_core == (cores == 1)
        runs.append(got)
    for other, mask in zip(runs[1:], ((True, True, True), (False, True, True))):
        for x, y, wanted in zip(runs[0], other, mask):
            if wanted:
                assert np.array_equal(x, y)


@pytest.mark.parametrize("shape,channel_last", [((0, 3, 4), False), ((2, 3, 0), False), ((0, 5), True),
                                                ((2, 0, 4), False)])
def test_empty(sim, shape, channel_last):
    check(sim, shape, channel_last, "float32", True)
    check(sim, shape, channel_last, "float16", False, mask=(True, False, True))


def test_large(sim):
    check(sim, (8, 4, 96, 97), False, "float32", True, cores=8)


# ---- SoCs without DataCopyPad / SyncAll (ascend910, ascend310p): tails with whole blocks ----
NO_PAD = ("ascend910", "ascend310p")
ODD_SHAPES = [
    ((2, 3, 5), False),          # C = 3, spatial 5: rows shorter than one block (flat regions)
    ((3, 17, 7), False),         # C = 17, spatial 7
    ((4, 17, 1), False),         # spatial 1: [N, C] in memory, odd C
    ((2, 3, 5, 7), False),       # spatial 35: row tails
    ((3, 130, 5), False),        # several parameter groups, spatial 5
    ((1, 2, 3), False),          # tensor smaller than one block
    ((2, 3), False),             # NC smaller than one block
    ((5, 4, 3, 17), True),       # channel-last, odd C >= one block
    ((7, 3), True),              # channel-last, C = 3
    ((2, 2, 2, 5), True),        # channel-last, odd C < one block
]


@pytest.mark.parametrize("soc", NO_PAD)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape,channel_last", ODD_SHAPES)
def test_odd_shapes_without_datacopypad(sim, soc, dtype, shape, channel_last):
    info = check(sim, shape, channel_last, dtype, True, soc=soc, cores=4)
    assert info.use_pad == 0 and info.cross_core == 0
    check(sim, shape, channel_last, dtype, False, (True, False, True), soc=soc, cores=4, seed=1)


@pytest.mark.parametrize("mask", ALL_MASKS)
def test_masks_without_datacopypad(sim, mask):
    check(sim, (3, 5, 7), False, "float16", True, mask, soc="ascend910", cores=3)
    check(sim, (6, 19), True, "float32", False, mask, soc="ascend310p", cores=3)


def test_ragged_chunks_without_datacopypad(sim):
    """Small UB: the last column chunk is moved back to end at the row end."""
    info = check(sim, (5, 3, 2001), False, "float16", True, soc="ascend910", ub_bytes=16 * 1024, cores=3)
    assert info.col_blocks > 1 and info.shift_last == 1
    info = check(sim, (50, 701), True, "float32", True, soc="ascend310p", ub_bytes=16 * 1024, cores=3)
    assert info.col_blocks > 1 and info.shift_last == 1
    check(sim, (50, 701), True, "float32", False, soc="ascend310p", ub_bytes=16 * 1024, cores=3)


@pytest.mark.parametrize("shape,channel_last", [((4, 3, 999), False), ((3, 130, 5), False), ((50, 701), True),
                                                ((9, 7, 3), False)])
def test_deterministic_for_any_core_count_without_datacopypad(sim, shape, channel_last):
    args = make_inputs(shape, channel_last, "float32")
    outs = []
    for n in (1, 2, 3, 8):
        got, _ = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                            args["save_invstd"], channel_last=channel_last, soc="ascend910", ub_bytes=20 * 1024,
                            cores=n)
        outs.append(got)
    for other in outs[1:]:
        for x, y in zip(outs[0], other):
            assert np.array_equal(x, y)


@pytest.mark.parametrize("soc", ["ascend910b", "ascend950"])
def test_cross_core_combine_uses_hardware_sync(sim, soc):
    info = check(sim, (3, 2, 3000), False, "float32", True, soc=soc, ub_bytes=24 * 1024, cores=8)
    assert info.cross_core == 1 and info.used_cores == 8
