"""A script that converts and trains a network ends cleanly: no ``Cell.__del__`` (or any other)
traceback at interpreter exit, and nothing left in its working directory.

MindSpore's ``Cell.__del__`` reads module globals (``cells_compile_cache``, ``Cell``,
``_cell_graph_executor``); a cell still alive when the interpreter clears those modules (for example
in a reference cycle) prints "Exception ignored in: <function Cell.__del__ ...>" with a traceback.
Our two cells per converted BatchNorm hold their owner through a weak reference
(``nn/_cells.py`` ``_OwnerRef``), so converting adds no cycle. The script keeps its networks in
module globals, as scripts do, trains them in both modes, and keeps a deep copy too.
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_SCRIPT = textwrap.dedent("""
    import copy
    import numpy as np
    import mindspore as ms
    from mindspore import nn
    import mindspore_bn_grad as mbg

    ms.set_context(mode=ms.{mode}_MODE)
    ms.set_seed(0)  # the initial weights: unseeded, 3 steps at this learning rate raised the loss now and then
    net = nn.SequentialCell([nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 4, 3),
                             nn.BatchNorm2d(4), nn.Flatten(), nn.Dense(4 * 6 * 6, 3), nn.BatchNorm1d(3)])
    net = mbg.nn.convert_batchnorm(net)
    twin = copy.deepcopy(net)
    x = ms.Tensor(np.random.RandomState(0).randn(2, 3, 6, 6).astype(np.float32))
    y = ms.Tensor(np.random.RandomState(1).randn(2, 3).astype(np.float32))
    for model in (net, twin):
        step = nn.TrainOneStepCell(nn.WithLossCell(model, nn.MSELoss()), nn.Momentum(model.trainable_params(), 0.1, 0.9))
        step.set_train()
        losses = [float(step(x, y).asnumpy()) for _ in range(3)]
        print("LOSSES", *losses)
""")


@pytest.mark.parametrize("mode", ["PYNATIVE", "GRAPH"])
def test_a_training_script_exits_without_tracebacks(tmp_path, mode):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", _SCRIPT.format(mode=mode)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Exception ignored" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    runs = [[float(v) for v in line.split()[1:]] for line in proc.stdout.splitlines() if line.startswith("LOSSES")]
    assert len(runs) == 2 and all(len(r) == 3 and np.all(np.isfinite(r)) for r in runs)
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-5)  # the deep copy trains as the original
    assert runs[0][2] < runs[0][0]  # it trains
    assert os.listdir(tmp_path) == []
