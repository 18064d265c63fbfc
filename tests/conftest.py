"""Shared test helpers: the float64 reference, modes, and per-dtype tolerances."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from reference import batch_norm_backward_ref  # noqa: E402,F401

MODES = ("pynative", "graph")


@pytest.fixture(autouse=True)
def _reset_target_soc():
    yield
    try:
        from mindspore_bn_grad import _soc
        _soc.set_target_soc(None)
    except Exception:  # pragma: no cover - only when the package is broken
        pass


@pytest.fixture(params=MODES)
def mode(request):
    return request.param
