import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import simlib  # noqa: E402


@pytest.fixture(scope="session")
def sim():
    """The CPU build of the kernel, compiled once per session (cached by source hash)."""
    return simlib.build()
