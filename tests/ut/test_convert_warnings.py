"""What convert_batchnorm leaves with MindSpore's backward is never silent: a ConversionWarning each."""
import warnings

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn, ops

import mindspore_bn_grad as mbg
from mindspore_bn_grad.nn import ConversionWarning
from mindspore_bn_grad.nn import _cells
from mindspore_bn_grad import ms_compat
from mindspore_bn_grad.cpu_kernel import factory
from mindspore_bn_grad.nn._native import is_native

from _harness import record_backward_ops


def _convert(net):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        mbg.convert_batchnorm(net)
    return [str(w.message) for w in seen if issubclass(w.category, ConversionWarning)]


class Functional(nn.Cell):
    def __init__(self):
        super().__init__()
        self.gamma = ms.Parameter(ms.Tensor(np.ones(4, np.float32)))
        self.beta = ms.Parameter(ms.Tensor(np.zeros(4, np.float32)))

    def construct(self, x, mean, var):
        return ops.batch_norm(x, mean, var, self.gamma, self.beta, training=True)


class HoldsPrimitive(nn.Cell):
    def __init__(self):
        super().__init__()
        self.norm = ops.BatchNorm(is_training=True)

    def construct(self, x, g, b, m, v):
        return self.norm(x, g, b, m, v)[0]


def test_a_plain_network_converts_without_warnings():
    ms.set_context(mode=ms.PYNATIVE_MODE)
    assert _convert(nn.SequentialCell(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())) == []


def test_mindspore_sync_batchnorm_is_named_with_what_to_use():
    ms.set_context(mode=ms.PYNATIVE_MODE)
    net = nn.SequentialCell(nn.Conv2d(3, 4, 3), nn.SyncBatchNorm(4), nn.BatchNorm2d(4))
    (msg,) = _convert(net)
    assert msg == ("convert_batchnorm: 1 (mindspore.nn.layer.normalization.SyncBatchNorm) is not converted: "
                   "use mindspore_bn_grad.nn.SyncBatchNorm in its place (same arguments) for "
                   "BatchNormBackward across devices")
    assert not _cells.is_installed(net[1]) and not is_native(net[1])
    assert _cells.is_installed(net[2]) or is_native(net[2])


@pytest.mark.parametrize("cell, what", [(Functional, "calls ops.batch_norm in construct"),
                                        (HoldsPrimitive, "holds an ops.BatchNorm primitive (norm)")])
def test_a_cell_running_batch_norm_itself_is_named(cell, what):
    ms.set_context(mode=ms.PYNATIVE_MODE)
    net = nn.SequentialCell(cell(), nn.ReLU())
    (msg,) = _convert(net)
    assert msg.startswith(f"convert_batchnorm: 0 ({__name__}.{cell.__name__}) {what}, which "
                          "convert_batchnorm cannot convert"), msg


@pytest.mark.skipif(not ms_compat.COMPILE_PHASE_ON_EVERY_CELL,
                    reason="MindSpore 2.7.0 records the compile phase on the top cell only (ms_compat, "
                           "'Compile phase'): a cell inside a compiled graph cannot be told apart there")
def test_converting_after_graph_compile_warns_and_a_new_train_cell_uses_ours(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        x = ms.Tensor(np.random.RandomState(0).randn(2, 3, 6, 6).astype(np.float32))
        y = ms.Tensor(np.zeros((2, 4, 6, 6), np.float32))
        net = nn.SequentialCell(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))

        def train_cell():
            return nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.SGD(net.trainable_params()))

        loaded_before = factory.state().legacy  # our kernels already stand in for MindSpore's everywhere
        old = train_cell()
        old(x, y)
        handed_out = record_backward_ops(monkeypatch, _cells)
        (msg,) = _convert(net)
        assert msg.startswith("convert_batchnorm: SequentialCell was already compiled into a GRAPH-mode "
                              "graph ('train."), msg
        legacy = net[1].bn_native == "legacy"  # the native route: MindSpore's primitives on our kernels
        before = factory.legacy_launches()
        old(x, y)
        # the compiled graph kept MindSpore's backward (on MindSpore's kernels unless ours were loaded
        # before it compiled), as the warning says
        assert handed_out == [] and (factory.legacy_launches() > before) == loaded_before
        train_cell()(x, y)
        if legacy:
            assert factory.legacy_launches() >= before + 2, "a new training cell compiles with our kernels"
        else:
            assert handed_out, "a new training cell compiles with our backward"
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
