"""A test run leaves nothing in the checkout: MindSpore's files go to the scratch working directory."""
import os
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


def test_tests_run_outside_the_checkout():
    cwd = Path.cwd().resolve()
    assert cwd != ROOT and ROOT not in cwd.parents, cwd


def test_a_failing_graph_writes_its_ir_into_the_scratch_directory():
    import mindspore as ms
    from _harness import call_op

    before = (ROOT / "rank_0").exists() and sorted(p.stat().st_mtime for p in (ROOT / "rank_0").rglob("*"))
    x = ms.Tensor(np.ones((2, 3, 4), np.float32))
    with pytest.raises(ValueError, match="BatchNormBackward: weight expected"):
        call_op("graph", [x, x, ms.Tensor(np.ones(5, np.float32)), None, None,
                          ms.Tensor(np.zeros(3, np.float32)), ms.Tensor(np.ones(3, np.float32))])
    assert (Path.cwd() / "rank_0" / "om" / "analyze_fail.ir").is_file()  # where MindSpore put it
    after = (ROOT / "rank_0").exists() and sorted(p.stat().st_mtime for p in (ROOT / "rank_0").rglob("*"))
    assert after == before, "written into the checkout"
