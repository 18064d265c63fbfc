"""The backward of a converted network never makes PYNATIVE wait for its queue.

PYNATIVE runs kernels asynchronously: Python queues them and goes on. Anything
that needs a result on the host (``Tensor.asnumpy``, ``bool(tensor)``,
``float(tensor)``) or reads a Parameter property through ``param_info``
(``requires_grad``, ``name``...) first drains the whole queue, and the waiting
Python thread spins on a core that the queued kernels need. One such read per
BatchNorm per step made converted networks several times slower than the
original, so here every way into a wait is counted while converted networks
train, and none may come from our cells.
"""
import importlib

import numpy as np
import pytest

import mindspore as ms
from mindspore import nn

# (mindspore.common exports functions named `parameter`/`tensor`: take the modules)
ms_parameter = importlib.import_module("mindspore.common.parameter")
ms_tensor = importlib.import_module("mindspore.common.tensor")

from mindspore_bn_grad import convert_batchnorm


class _Counter:
    def __init__(self):
        self.waits = []

    def hit(self, what):
        self.waits.append(what)


@pytest.fixture
def count_waits(monkeypatch):
    """Counts Parameter pipeline waits, asnumpy and tensor->scalar reads while active."""
    counter = _Counter()
    real_tensor_py = ms_parameter.Tensor_

    class CountingTensorPy(real_tensor_py):  # parameter.py calls Tensor_.wait_pipeline(self)
        @staticmethod
        def wait_pipeline(t):
            counter.hit("Parameter wait_pipeline")
            return real_tensor_py.wait_pipeline(t)

    monkeypatch.setattr(ms_parameter, "Tensor_", CountingTensorPy)
    real_asnumpy_owner = ms_tensor.TensorPy_

    class CountingAsnumpy(real_asnumpy_owner):  # tensor.py calls TensorPy_.asnumpy(self)
        @staticmethod
        def asnumpy(t):
            counter.hit("asnumpy")
            return real_asnumpy_owner.asnumpy(t)

    monkeypatch.setattr(ms_tensor, "TensorPy_", CountingAsnumpy)
    real_item = ms_tensor.Tensor._item

    def counting_item(self):
        counter.hit("tensor to scalar")
        return real_item(self)

    monkeypatch.setattr(ms_tensor.Tensor, "_item", counting_item)
    return counter


class _Block(nn.Cell):
    def __init__(self, channels, bn):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, pad_mode="same")
        self.bn = bn
        self.relu = nn.ReLU()

    def construct(self, x):
        return self.relu(self.bn(self.conv(x)))


class _Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.b1 = _Block(4, nn.BatchNorm2d(4))
        self.b2 = _Block(4, nn.BatchNorm2d(4, affine=False))
        self.head = nn.Dense(4, 3)
        self.bn1d = nn.BatchNorm1d(3)

    def construct(self, x):
        y = self.b2(self.b1(x)).mean(axis=(2, 3))
        return self.bn1d(self.head(y)).sum()


def _waits_during_training(net, count_waits, x):
    net.set_train()
    opt = nn.Momentum(net.trainable_params(), 0.01, 0.9)
    grad_fn = ms.value_and_grad(net, None, opt.parameters)

    def step():
        _, grads = grad_fn(x)
        opt(grads)

    step()  # warm: a first call may set things up (and read anything)
    count_waits.waits.clear()
    for _ in range(3):
        step()
    seen = list(count_waits.waits)
    count_waits.waits.clear()
    return seen


def test_converted_backward_never_waits(count_waits):
    ms.set_context(mode=ms.PYNATIVE_MODE)
    x = ms.Tensor(np.random.default_rng(0).standard_normal((2, 4, 6, 6)).astype(np.float32))
    original = _Net()
    converted = convert_batchnorm(_Net())
    waits_original = _waits_during_training(original, count_waits, x)
    waits_converted = _waits_during_training(converted, count_waits, x)
    # MindSpore's own training step does not wait; neither may ours.
    assert waits_original == []
    assert waits_converted == []


def test_the_counter_sees_a_parameter_read(count_waits):
    """The fixture above can fail: a requires_grad read is one wait, asnumpy another."""
    bn = nn.BatchNorm2d(3)
    count_waits.waits.clear()
    assert bn.gamma.requires_grad
    assert "Parameter wait_pipeline" in count_waits.waits
    count_waits.waits.clear()
    ms.Tensor(np.ones(2, np.float32)).asnumpy()
    assert count_waits.waits == ["asnumpy"]
    count_waits.waits.clear()
    bool(ms.Tensor(np.ones(1, np.float32)))
    assert count_waits.waits == ["tensor to scalar"]


def test_output_mask_reads_the_flag_without_waiting(count_waits):
    from mindspore_bn_grad import nn as bn_nn
    bn = bn_nn.BatchNorm2d(3)
    bn.beta.requires_grad = False
    count_waits.waits.clear()
    assert bn.bn_train.output_mask == (True, True, False)
    assert count_waits.waits == []
