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
