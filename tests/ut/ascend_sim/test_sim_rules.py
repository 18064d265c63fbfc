"""The CPU build refuses what the hardware refuses, and the tiling refuses
what a SoC cannot run."""
import numpy as np
import pytest

import simlib

pytestmark = pytest.mark.ascend_sim


def test_legal_program_runs_clean(sim):
    assert simlib.misuse(sim, "ok") is None


@pytest.mark.parametrize("case,words", [
    ("unaligned_datacopy", "multiple of 32"),
    ("unaligned_ub_address", "aligned"),
    ("ub_overflow", "UB overflow"),
    ("use_after_free", "after FreeTensor"),
    ("queue_depth", "depth"),
    ("alloc_beyond_buffers", "in use"),
    ("gm_out_of_bounds", "beyond the buffer"),
])
def test_misuse_is_refused(sim, case, words):
    msg = simlib.misuse(sim, case)
    assert msg is not None and words in msg


@pytest.mark.parametrize("soc,available", [("ascend910", False), ("ascend310p", False), ("ascend910b", True),
                                           ("ascend950", True)])
def test_datacopypad_only_where_it_exists(sim, soc, available):
    msg = simlib.misuse(sim, "datacopypad", soc)
    assert (msg is None) == available
    if not available:
        assert soc in msg


@pytest.mark.parametrize("case", ["sync_all", "dcci"])
@pytest.mark.parametrize("soc,available", [("ascend910", False), ("ascend310p", False), ("ascend910b", True),
                                           ("ascend910_93", True), ("ascend950", True)])
def test_sync_and_cache_flush_only_where_they_exist(sim, case, soc, available):
    msg = simlib.misuse(sim, case, soc)
    assert (msg is None) == available, msg
    if not available:
        assert soc in msg


def test_hardware_sync_all_needs_mix_kernel_type(sim):
    msg = simlib.misuse(sim, "sync_all_without_kernel_type")
    assert msg is not None and "KERNEL_TYPE_MIX_AIV_1_0" in msg


def test_ub_too_small_is_a_tiling_error(sim):
    x = np.ones((2, 3, 5))
    with pytest.raises(simlib.TilingError, match="too small"):
        simlib.run(sim, x, x, ub_bytes=1024)
