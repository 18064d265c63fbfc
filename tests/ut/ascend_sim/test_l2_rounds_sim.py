"""The two-pass L2 rounds of the Ascend C kernel (tiling l2Rounds) in the CPU build: with a small L2
the tiling sizes channel groups to a third of it and the kernel runs both passes group by group
across all cores; values against the float64 reference, and the same bits for any core count."""
import numpy as np
import pytest

import simlib
from test_kernel_sim import ALL_MASKS, check, make_inputs

pytestmark = pytest.mark.ascend_sim
L2 = 64 * 1024  # a round's grad_out + input: at most ~21 KiB


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
    for other in outs[1:]:
        for x, y in zip(outs[0], other):
            assert np.array_equal(x, y)
