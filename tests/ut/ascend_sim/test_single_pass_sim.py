"""The single-pass strategy of the Ascend C kernel (batch_norm_kernel_single_pass.h) in the CPU build:
the tiling picks it where a channel's N x inner slices fit in UB, its values match the float64
reference, and its results do not depend on the number of cores or of resident channels."""
import numpy as np
import pytest

import simlib
from test_kernel_sim import ALL_MASKS, check, make_inputs

pytestmark = pytest.mark.ascend_sim
SINGLE = simlib.STRATEGIES["single_pass"]


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


@pytest.mark.parametrize("soc", simlib.SOCS)
def test_every_soc(sim, soc):
    """Atlas training / inference (no DataCopyPad): only slices of whole blocks go single pass."""
    info = check(sim, (4, 24, 8, 8), False, "float16", True, soc=soc, cores=4)
    assert info.strategy == SINGLE
    info = check(sim, (4, 24, 7, 7), False, "float32", True, soc=soc, cores=4)
    assert info.strategy == (SINGLE if soc not in ("ascend910", "ascend310p") else simlib.STRATEGIES["two_pass"])


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_deterministic_for_any_core_count_and_sub_group(sim, dtype):
    args = make_inputs((6, 37, 7, 7), False, dtype)
    runs = []
    for cores, ub in ((1, 0), (3, 0), (8, 0), (5, 24 * 1024), (2, 40 * 1024)):
        got, info = simlib.run(sim, args["grad_out"], args["x"], args["weight"], None, None, args["save_mean"],
                               args["save_invstd"], dtype=dtype, ub_bytes=ub, cores=cores)
        assert info.strategy == SINGLE
        runs.append((got, info.sp_channels))
    assert len({sp for _, sp in runs}) > 1  # the runs differ in resident channels, not only in cores
    for got, _ in runs[1:]:
        for x, y in zip(runs[0][0], got):
            assert np.array_equal(x, y)
