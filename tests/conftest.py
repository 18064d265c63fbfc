"""Shared fixtures: the execution modes, and the target SoC reset after every test.

Helpers (reference.py, ut/_harness.py, ...) are imported by name: their folders
are on pytest's `pythonpath` (setup.cfg)."""
import os

import pytest

# First, before any test module can run a MindSpore operator: with MS_BN_GRAD_OP_PLUGIN=1
# (the native-route session, tests/ut/test_native_route_session.py) importing the package
# enables MindSpore's CPU op plugin, which MindSpore reads once per process, when it creates
# its first CPU kernel (docs/native_route.md).
import mindspore_bn_grad  # noqa: E402,F401
from mindspore_bn_grad.cpu_kernel import build as _build, plugin as _plugin  # noqa: E402


def pytest_collection_modifyitems(config, items):
    """slow tests run only when asked for (`-m slow`). native_route tests need the op plugin: in the
    default session (plugin off, the package's default) they are left to the native-route session,
    which runs exactly them."""
    if "slow" not in (config.getoption("markexpr") or ""):
        slow = pytest.mark.skip(reason="slow: opt-in, run with -m slow (docs/testing.md)")
        for item in items:
            if item.get_closest_marker("slow"):
                item.add_marker(slow)
    if not _plugin.requested():
        skip = pytest.mark.skip(reason="native_route: run by tests/ut/test_native_route_session.py")
    elif _build.plugin_interface_header() is None:
        skip = pytest.mark.skip(reason="native_route: this MindSpore release has no CPU op plugin interface "
                                "(the Cell route is used; docs/mindspore_versions.md)")
    else:
        return
    for item in items:
        if "native_route" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: pytest without it must still start
def pytest_xdist_auto_num_workers(config):
    """`-n auto` (setup.cfg): a worker per core, at most 4 (each holds a MindSpore, about 1 GB);
    PYTEST_XDIST_AUTO_NUM_WORKERS overrides it."""
    env = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if env:
        return int(env)
    return max(1, min(len(os.sched_getaffinity(0)), 4))


MODES = ("pynative", "graph")


@pytest.fixture(autouse=True, scope="session")
def _scratch_working_directory(tmp_path_factory):
    """The tests run in a scratch directory, so that the checkout stays clean: MindSpore writes into the
    working directory (rank_0/om/analyze_fail.ir for every graph that fails to compile, as the GRAPH
    rejection tests make them on purpose; rewritten_network/ for AMP O1), whatever save_graphs_path
    says. Tests name their files by absolute paths; subprocesses inherit this directory."""
    checkout = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("cwd"))
    yield
    os.chdir(checkout)


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
