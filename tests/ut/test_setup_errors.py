"""Kernel set-up faults give the same clear error in GRAPH as in PYNATIVE mode, for a converted network.

Each fault runs in a fresh process (the loaded kernel is cached per process) from an empty
working directory, which must stay empty: MindSpore writes rank_0/om/analyze_fail.ir there
when a graph fails to compile, which is what happened before the kernel was made ready when
the cell is converted.
"""
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_SCRIPT = textwrap.dedent("""
    import numpy as np
    import mindspore as ms
    from mindspore import nn
    from mindspore_bn_grad.nn import convert_batchnorm

    for mode in (ms.GRAPH_MODE, ms.PYNATIVE_MODE):
        ms.set_context(mode=mode)
        net = nn.SequentialCell(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
        try:
            convert_batchnorm(net)
            ms.grad(net)(ms.Tensor(np.ones((2, 3, 6, 6), np.float32)))
            print("NO ERROR")
        except Exception as e:  # the message, on one line
            print("ERR", type(e).__name__, " ".join(str(e).split()))
""")


def _faults(tmp):
    empty_bin = tmp / "bin"
    empty_bin.mkdir()
    group_writable = tmp / "shared"
    group_writable.mkdir()
    os.chmod(group_writable, 0o775)
    return {
        "no compiler": ({"PATH": str(empty_bin), "MS_BN_GRAD_CACHE_DIR": str(tmp / "empty_cache")},
                        "KernelBuildError BatchNormBackward: no C++ compiler found"),
        "colon in cache path": ({"MS_BN_GRAD_CACHE_DIR": str(tmp / "a:b")},
                                "KernelBuildError BatchNormBackward: the kernel cache directory"),
        "group-writable cache": ({"MS_BN_GRAD_CACHE_DIR": str(group_writable)},
                                 "is writable by group or others (mode 775)"),
        "bad thread count": ({"MS_BN_GRAD_NUM_THREADS": "abc"},
                             "ValueError BatchNormBackward: MS_BN_GRAD_NUM_THREADS expected a positive "
                             "integer, got 'abc'"),
    }


@pytest.mark.parametrize("fault", ["no compiler", "colon in cache path", "group-writable cache",
                                   "bad thread count"])
def test_graph_mode_setup_error_is_the_pynative_one(tmp_path, fault):
    env_extra, expected = _faults(tmp_path)[fault]
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("CXX", "MS_BN_GRAD_CXX")}
    env["MS_BN_GRAD_NATIVE_KERNELS"] = "off"  # the kernel build, not the import's registration (test_legacy_kernels)
    env.update(env_extra, PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env,
                       cwd=cwd, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    graph, pynative = r.stdout.strip().splitlines()[-2:]
    assert graph == pynative, (graph, pynative)
    assert graph.startswith("ERR ") and expected in graph, graph
    assert "grad_op" not in graph
    assert sorted(os.listdir(cwd)) == [], "written to the working directory"
