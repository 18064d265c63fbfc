import pytest

import simlib  # tests/ut/ascend_sim is on pytest's pythonpath (setup.cfg)


@pytest.fixture(scope="session")
def sim():
    """The CPU build of the kernel, compiled once per session (cached by source hash)."""
    return simlib.build()
