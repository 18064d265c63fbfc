"""The supported MindSpore range: stated once, checked at import of the MindSpore parts only."""
import configparser
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_installed_mindspore_is_supported():
    import mindspore
    from mindspore_bn_grad import ms_compat
    ms_compat.check_version(mindspore.__version__)  # raises otherwise


def test_set_device_exists():
    """ms_compat says every supported release has mindspore.set_device: checked on each by the matrix."""
    import mindspore
    assert callable(mindspore.set_device)


@pytest.mark.parametrize("version", ["2.7.0", "2.7.1", "2.7.2", "2.8.0", "2.9.0", "2.10.0", "2.10.1"])
def test_supported_releases_pass(version):
    from mindspore_bn_grad import ms_compat
    ms_compat.check_version(version)


@pytest.mark.parametrize("version", ["2.6.0", "2.5.0", "2.11.0", "2.11.0rc1", "3.0.0", "1.10.1", "",
                                     "unknown"])
def test_unsupported_release_is_a_clear_error(version):
    from mindspore_bn_grad import ms_compat
    with pytest.raises(ImportError) as e:
        ms_compat.check_version(version)
    assert isinstance(e.value, ms_compat.UnsupportedMindSporeError)
    msg = str(e.value)
    assert msg.startswith("mindspore-bn-grad supports MindSpore >=2.7.0,<2.11 (2.7.0 to 2.10.x), "
                          f"found MindSpore {version};")
    assert "pip install 'mindspore>=2.7.0,<2.11'" in msg


def test_setup_cfg_states_the_same_range():
    from mindspore_bn_grad import ms_compat
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "setup.cfg"))
    reqs = [r.strip() for r in cfg["options"]["install_requires"].splitlines() if r.strip()]
    assert ms_compat.SUPPORTED in reqs
    assert ms_compat.SUPPORTED == "mindspore>={}.{}.{},<{}.{}".format(*ms_compat.MINIMUM, *ms_compat.BELOW)


def test_unsupported_installed_release_fails_at_the_mindspore_parts_only(tmp_path):
    """With MindSpore 2.6.0 installed: the package imports, the MindSpore parts name the range."""
    fake = tmp_path / "site" / "mindspore"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("__version__ = '2.6.0'\n")
    code = textwrap.dedent("""
        import mindspore_bn_grad, mindspore_bn_grad.nn
        print("package imports")
        for name in ("mindspore_bn_grad.batch_norm_backward", "mindspore_bn_grad.nn.BatchNorm2d",
                     "mindspore_bn_grad.nn.SyncBatchNorm"):
            module, attr = name.rsplit(".", 1)
            try:
                getattr(__import__(module, fromlist=[attr]), attr)
                print(name, "imported")
            except ImportError as e:
                print(name, type(e).__name__, e)
    """)
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "package imports"
    assert len(lines) == 4
    for line in lines[1:]:
        assert " UnsupportedMindSporeError mindspore-bn-grad supports MindSpore >=2.7.0,<2.11 " \
               "(2.7.0 to 2.10.x), found MindSpore 2.6.0;" in line, line


def test_world_group_only_release_maps_or_refuses_cpu_process_groups(monkeypatch):
    """On a release whose CPU collectives run on the world group only (2.7): a group of every rank
    becomes the world group, a smaller multi-rank group is refused by name (ms_compat docstring)."""
    import mindspore.communication as comm
    from mindspore_bn_grad import ms_compat
    from mindspore_bn_grad.nn import _sync
    monkeypatch.setattr(ms_compat, "CPU_COLLECTIVES_WORLD_GROUP_ONLY", True)
    monkeypatch.setattr(_sync, "_is_initialized", lambda: True)
    monkeypatch.setattr(comm, "get_rank", lambda *a: 1)
    monkeypatch.setattr(comm, "get_group_size", lambda *a: 3)
    monkeypatch.setattr(comm, "create_group", lambda *a: pytest.fail("no group may be created"))
    assert _sync.resolve_group([[2, 1, 0]]) == (comm.GlobalComm.WORLD_COMM_GROUP, 3, 1)
    assert _sync.resolve_group([[0], [1], [2]]) == (None, 1, 0)
    with pytest.raises(ValueError, match=r"^SyncBatchNorm: process_groups expected, on CPU with MindSpore "
                                         r"\S+, groups of all 3 ranks or of one rank .* got \[\[0, 1\], \[2\]\]$"):
        _sync.resolve_group([[0, 1], [2]])


# ------------------------------------------------- the MindSpore internals, all behind ms_compat
# Run on every supported release by scripts/test_matrix.sh: a release that moves one fails here,
# by name, rather than somewhere inside a network.

def test_internal_batchnorm_base():
    from mindspore import nn
    from mindspore_bn_grad import ms_compat
    base = ms_compat.batchnorm_base()
    assert all(issubclass(c, base) for c in (nn.BatchNorm1d, nn.BatchNorm2d, nn.SyncBatchNorm))


def test_internal_cell_primitives_and_drop_primitive():
    from mindspore import nn, ops
    from mindspore_bn_grad import ms_compat
    bn = nn.BatchNorm2d(2)
    prims = ms_compat.cell_primitives(bn)
    assert isinstance(prims["bn_train"], ops.BatchNorm) and isinstance(prims["bn_infer"], ops.BatchNorm)
    ms_compat.drop_primitive(bn, "bn_train")
    assert "bn_train" not in ms_compat.cell_primitives(bn) and "bn_infer" in ms_compat.cell_primitives(bn)


def test_internal_compile_phase(tmp_path, monkeypatch):
    import mindspore as ms
    import numpy as np
    from mindspore import nn
    from mindspore_bn_grad import ms_compat
    monkeypatch.chdir(tmp_path)
    net = nn.SequentialCell(nn.Dense(3, 2), nn.ReLU())
    assert ms_compat.compile_phase(net) is None and ms_compat.compile_phase(net[0]) is None
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        net(ms.Tensor(np.ones((1, 3), np.float32)))
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    assert isinstance(ms_compat.compile_phase(net), str)
    # the cells inside the graph: from 2.7.1 on they carry the phase too (2.7.0 only the top cell)
    assert bool(ms_compat.compile_phase(net[0])) == ms_compat.COMPILE_PHASE_ON_EVERY_CELL


def test_internal_rewrite_black_list():
    from mindspore_bn_grad import ms_compat
    from mindspore_bn_grad.nn import BatchNormTrainCell  # noqa: F401  (registers our cells)
    from mindspore_bn_grad.nn._cells import _BatchNormCell
    assert _BatchNormCell in ms_compat.rewrite_black_list()


def test_internal_context_params():
    import mindspore as ms
    from mindspore_bn_grad import ms_compat
    assert ms_compat.context_param("device_target") == ms.get_context("device_target")
    assert ms_compat.context_param("no_such_parameter") is None
    from mindspore._c_expression import MSContext  # what ascend_soc_version reads
    assert callable(MSContext.get_instance().get_ascend_soc_version)


def test_internal_builtin_batchnorm_grads():
    from mindspore.ops.primitive import Primitive
    from mindspore_bn_grad import ms_compat
    grad, gradgrad = ms_compat.builtin_batchnorm_grads()
    assert grad.__name__ == "BatchNormGrad" and gradgrad.__name__ == "BatchNormGradGrad"
    assert issubclass(grad, Primitive) and issubclass(gradgrad, Primitive)


def test_internal_communication():
    from mindspore_bn_grad import ms_compat
    comm = ms_compat.global_comm()
    assert isinstance(comm.INITED, bool) and isinstance(comm.WORLD_COMM_GROUP, str)
    assert isinstance(ms_compat.syncbatchnorm_group_registry(), dict)


def test_internal_shield_from_mixed_precision():
    """The cell's own mixed_precision_type is what PYNATIVE pushes for its call; NOTSET pushes no cast."""
    import inspect
    from mindspore import nn
    from mindspore._c_expression import MixedPrecisionType
    from mindspore_bn_grad import ms_compat
    cell = nn.ReLU()
    assert cell.mixed_precision_type is None
    ms_compat.shield_from_mixed_precision(cell)
    assert cell.mixed_precision_type == MixedPrecisionType.NOTSET and bool(cell.mixed_precision_type)
    pre = inspect.getsource(nn.Cell._call_pre_process)
    assert "set_mixed_precision_type(self.mixed_precision_type)" in pre


def test_internal_requires_grad_nowait():
    import mindspore as ms
    import numpy as np
    from mindspore_bn_grad import ms_compat
    p = ms.Parameter(ms.Tensor(np.ones(2, np.float32)), requires_grad=False)
    assert getattr(p, "_param_info", None) is not None  # else the fast path is gone
    assert ms_compat.requires_grad_nowait(p) is False
    p.requires_grad = True
    assert ms_compat.requires_grad_nowait(p) is True


# What only ms_compat may use: MindSpore's private modules and the private attributes we read.
PRIVATE_ATTRS = {"_primitives", "_compile_phase", "_param_info", "_subtree_black_list", "_BatchNorm",
                 "_syncbatchnorm_group_dict", "_pynative_executor", "_grad_ops", "_c_expression"}


def _internals_used(tree):
    import ast
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "mindspore":
            private = [p for p in node.module.split(".") if p.startswith("_")]
            private += [a.name for a in node.names if a.name.startswith("_")]
            if private:
                yield node.lineno, f"from {node.module} import ..."
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "mindspore" and any(p.startswith("_") for p in a.name.split(".")):
                    yield node.lineno, f"import {a.name}"
        elif isinstance(node, ast.Attribute) and node.attr in PRIVATE_ATTRS:
            yield node.lineno, f".{node.attr}"


def test_only_ms_compat_touches_mindspore_internals():
    import ast
    from pathlib import Path
    root = Path(ROOT)
    shipped = sorted(root.glob("mindspore_bn_grad/**/*.py")) + sorted(root.glob("bench/*.py"))
    assert len(shipped) > 20
    offenders = [f"{path.relative_to(root)}:{n}: {what}" for path in shipped if path.name != "ms_compat.py"
                 for n, what in _internals_used(ast.parse(path.read_text()))]
    assert offenders == [], "MindSpore internals outside ms_compat.py:\n" + "\n".join(offenders)


def test_the_internals_guard_finds_them():
    import ast
    code = ("from mindspore._c_expression import MSContext\nimport mindspore.ops.operations._grad_ops\n"
            "from mindspore.nn.layer.normalization import _BatchNorm\ncell._primitives.pop('x')\n")
    assert [n for n, _ in _internals_used(ast.parse(code))] == [1, 2, 3, 4]


def test_internal_vmap_rules_getters():
    """vmap.py registers our rule where ops.vmap looks rules up (this release: a registry holding MindSpore's
    own BatchNormGrad rule)."""
    from mindspore_bn_grad import ms_compat
    getters = ms_compat.vmap_rules_getters()
    assert getters is not None and getters.get("BatchNormGrad", None) is not None


def test_internal_batch_norm_grad_ext_pynative():
    from mindspore_bn_grad import ms_compat
    impl = ms_compat.batch_norm_grad_ext_pynative()
    import inspect
    assert list(inspect.signature(impl.__call__).parameters) == [
        "dout", "input", "weight", "running_mean", "running_var", "saved_mean", "saved_rstd", "training", "eps",
        "output_mask"]


def test_cpu_op_plugin_interface_is_found_on_the_releases_that_have_it():
    """ms_compat, "CPU op plugin": 2.8.0 and later ship the op plugin interface the library is built
    against (where: cpu_kernel/build.py); 2.7.x do not."""
    from mindspore_bn_grad import ms_compat
    from mindspore_bn_grad.cpu_kernel import build
    assert (build.plugin_interface_header() is not None) == (ms_compat.release(ms_compat.VERSION) >= (2, 8, 0)), \
        ms_compat.VERSION
