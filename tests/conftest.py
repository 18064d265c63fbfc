"""Shared fixtures: the execution modes, and the target SoC reset after every test.

Helpers (reference.py, ut/_harness.py, ...) are imported by name: their folders
are on pytest's `pythonpath` (setup.cfg)."""
import pytest

# First, before any test module can run a MindSpore operator: importing the package enables
# MindSpore's CPU op plugin (our kernels as BatchNormExt / BatchNormGradExt), which MindSpore
# reads once per process, when it creates its first CPU kernel (docs/native_route.md).
import mindspore_bn_grad  # noqa: E402,F401

MODES = ("pynative", "graph")


@pytest.fixture(autouse=True)
def _reset_target_soc():
    yield
    try:
        from mindspore_bn_grad import target
        target.set_target_soc(None)
    except Exception:  # pragma: no cover - only when the package is broken
        pass


@pytest.fixture(params=MODES)
def mode(request):
    return request.param
