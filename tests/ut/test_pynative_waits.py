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
import inspect

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


@pytest.mark.parametrize("route", [pytest.param("native", marks=pytest.mark.native_route, id="native-op-plugin"),
                                   pytest.param("native", id="native-default"), "cell"])
def test_converted_backward_never_waits(count_waits, route, request):
    from mindspore_bn_grad.cpu_kernel import factory
    if request.node.callspec.id == "native-default" and not factory.legacy_status():
        # MindSpore 2.7.0: no native route, the Cell route is the default (tested as "cell")
        pytest.skip(f"no kernel-factory route here: {factory.state().legacy_reason or factory.state().reason}")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    x = ms.Tensor(np.random.default_rng(0).standard_normal((2, 4, 6, 6)).astype(np.float32))
    original = _Net()
    converted = convert_batchnorm(_Net(), route=route)
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
    bn = bn_nn.BatchNorm2d(3, route="cell")
    bn.beta.requires_grad = False
    count_waits.waits.clear()
    assert bn.bn_train.output_mask == (True, True, False)
    assert count_waits.waits == []


# ---------------------------------------------------------------- a gated queue
#
# The counters above see the waits Python asks for. MindSpore can also wait on
# its own, inside a launch: in MindSpore 2.10 an operator on its older op path
# (ops.ZerosLike, an aot Custom op) waits for the previous launch of the same
# operator and shapes to finish. Here a gate kernel, launched just before our
# cell's backward launches, holds the queue shut; when they have been launched the
# gate is opened. A launch that waited for the queue finds it shut and returns
# only once the gate gives up (after GATE_SECONDS), which the gate records.
#
# What is gated is the launch of our kernel and what leads to it. The two zero
# gradients of the moving statistics that end each bprop are not: the second
# ZerosLike waits for our kernel on purpose (nn/_cells.py says why, and
# docs/performance.md gives the measurements). Not tested here because it is
# MindSpore's, not ours: MindSpore 2.10 itself drains the queue before it calls
# any Python bprop (a Cell's, or an ops.Custom's).

GATE_SECONDS = 8

_GATE_SOURCE = r"""
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

static std::atomic<int> g_open{1};
static std::atomic<int> g_forced{0};

extern "C" void gate_open() { g_open.store(1); }
extern "C" void gate_close() { g_open.store(0); g_forced.store(0); }
extern "C" int gate_forced() { return g_forced.load(); }

// float32 in, the same float32 out; returns once the gate is open
extern "C" int Gate(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                    void *stream, void *extra) {
  if (nparam != 2) return 1;
  const auto start = std::chrono::steady_clock::now();
  while (!g_open.load()) {
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(GATE_SECONDS)) {
      g_forced.store(1);
      g_open.store(1);
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  int64_t n = 1;
  for (int i = 0; i < ndims[0]; ++i) n *= shapes[0][i];
  std::memcpy(params[1], params[0], static_cast<size_t>(n) * sizeof(float));
  return 0;
}
"""


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    """(handle, run): ``run(fn, *args)`` calls fn with the queue gated; returns (fn's result, forced)."""
    import ctypes
    import os
    import shutil
    import subprocess
    from mindspore import ops
    cxx = shutil.which(os.environ.get("CXX", "g++"))
    if cxx is None:
        pytest.fail("no C++ compiler: the CPU kernel needs one too (set CXX)")
    d = tmp_path_factory.mktemp("gate")
    src, lib = d / "gate.cpp", d / "libgate.so"
    src.write_text(_GATE_SOURCE)
    subprocess.run([cxx, "-O1", "-shared", "-fPIC", "-std=c++17", "-D_GLIBCXX_USE_CXX11_ABI=0",
                    f"-DGATE_SECONDS={GATE_SECONDS}", str(src), "-o", str(lib)], check=True)
    handle = ctypes.CDLL(str(lib))
    handle.gate_forced.restype = ctypes.c_int
    gate_op = ops.Custom(f"{lib}:Gate", out_shape=lambda s: s, out_dtype=lambda t: t, func_type="aot")
    token = ms.Tensor(np.ones(4, np.float32))
    last = [gate_op(token)]  # built and launched once, open

    def shut():
        # The previous gate launch must have run before the gate shuts (else a gate launch waits
        # for the one before it, the very wait this looks for), so wait for it first.
        last[0].asnumpy()
        handle.gate_close()
        last[0] = gate_op(token)

    def reopen():
        """Opens the gate; True if a launch since shut() had found it shut and forced it open."""
        forced = handle.gate_forced()
        handle.gate_open()
        return bool(forced)

    def run(fn, *args):
        shut()
        try:
            result = fn(*args)
        finally:
            forced = reopen()
        return result, forced

    return _Gate(handle, run, shut, reopen)


class _Gate:
    def __init__(self, handle, run, shut, reopen):
        self.handle, self.run, self.shut, self.reopen = handle, run, shut, reopen

    def __iter__(self):  # handle, run = gate
        return iter((self.handle, self.run))


@pytest.fixture
def gated_bprops(gate, monkeypatch):
    """Gates our BatchNorm cells' bprops from their start up to and including the launch of our
    kernel (the add, rsqrt and cast before it too); yields (cell class name, forced) per bprop."""
    from mindspore_bn_grad.nn import _cells
    seen = []

    def gate_bprop(cls):
        real_bprop, real_grad_op = cls.bprop, inspect.getattr_static(cls, "grad_op")

        def bprop(self, *args):
            gate.shut()
            self._gate_open = True
            try:
                return real_bprop(self, *args)
            finally:
                if self._gate_open:  # our kernel was never launched: still record the bprop
                    seen.append((cls.__name__, gate.reopen()))

        def launch_then_reopen(self):
            op = real_grad_op.fget(self)  # the primitive our bprop, running in PYNATIVE, gets

            def call(*inputs):
                result = op(*inputs)
                self._gate_open = False
                seen.append((cls.__name__, gate.reopen()))
                return result
            return call

        monkeypatch.setattr(cls, "bprop", bprop)
        monkeypatch.setattr(cls, "grad_op", property(launch_then_reopen))

    gate_bprop(_cells.BatchNormTrainCell)
    gate_bprop(_cells.BatchNormInferCell)
    return seen


class _SameShapes(nn.Cell):
    """Three same-shaped Conv-BN-ReLU blocks (same-shaped launches in a row), an affine=False one,
    and a BatchNorm1d head (nn's, or mint's for "mint"; or a second Dense)."""

    def __init__(self, bn1d=True):
        super().__init__()
        self.blocks = nn.SequentialCell([_Block(4, nn.BatchNorm2d(4)) for _ in range(3)]
                                        + [_Block(4, nn.BatchNorm2d(4, affine=False))])
        self.head = nn.Dense(4, 3)
        if bn1d == "mint":
            self.bn1d = ms.mint.nn.BatchNorm1d(3)
        else:
            self.bn1d = nn.BatchNorm1d(3) if bn1d else nn.Dense(3, 3)

    def construct(self, x):
        return self.bn1d(self.head(self.blocks(x).mean(axis=(2, 3)))).sum()


def _assert_mindspore_launches_do_not_wait(gate):
    """The control: MindSpore's own Add and Rsqrt, launched with the queue gated outside any bprop,
    must not wait. If they do, the process is in a state where every such launch waits and the
    test below would blame our cells for it (MindSpore 2.10 gets there after a Tensor.copy() in
    GRAPH mode, for one: see _harness.copy_parameter_values)."""
    a = ms.Tensor(np.ones(4, np.float32))
    _, forced = gate.run(lambda: ms.ops.rsqrt(a + 1.0))
    assert not forced, ("MindSpore's own Add/Rsqrt waited for the queue in this process before any "
                        "BatchNorm ran: an earlier test left MindSpore in that state")


@pytest.mark.parametrize("train, bn1d", [
    pytest.param(True, True, id="train"),
    pytest.param(False, False, id="eval-no-bn1d"),
    # eval-bn1d: MindSpore's BatchNorm1d makes (N, C) 4-D around bn_infer in eval; the Reshape views
    # it handed the bprop made our launch wait, until our BatchNorm1d stopped making them
    # (docs/performance.md, "The eval BatchNorm1d wait"). eval-mint-bn1d: the same for mint's.
    pytest.param(False, True, id="eval-bn1d"),
    pytest.param(False, "mint", id="eval-mint-bn1d"),
])
def test_our_backward_launch_never_waits_for_the_queue(gate, gated_bprops, train, bn1d):
    ms.set_context(mode=ms.PYNATIVE_MODE)
    _assert_mindspore_launches_do_not_wait(gate)
    x = ms.Tensor(np.random.default_rng(1).standard_normal((2, 4, 6, 6)).astype(np.float32))
    net = convert_batchnorm(_SameShapes(bn1d), route="cell")  # the gated bprops are the Cell route's
    net.set_train(train)
    opt = nn.Momentum(net.trainable_params(), 0.01, 0.9)
    grad_fn = ms.value_and_grad(net, None, opt.parameters)
    for _ in range(3):
        _, grads = grad_fn(x)
        opt(grads)
    grads[0].asnumpy()
    kind = "BatchNormTrainCell" if train else "BatchNormInferCell"
    assert [k for k, _ in gated_bprops] == [kind] * (15 if bn1d else 12)  # BatchNorms x 3 steps, all gated
    waited = [k for k, forced in gated_bprops if forced]
    assert waited == [], f"{len(waited)} of our backward launches waited for the queue (the gate was forced open)"


@pytest.mark.parametrize("mechanism", [pytest.param("ext", marks=pytest.mark.native_route), "legacy"])
@pytest.mark.parametrize("train", [True, False])
def test_native_route_training_step_waits_no_more_than_mindspores_own(gate, train, mechanism):
    """The native route has no Python bprop: a whole PYNATIVE training step (forward, MindSpore's C++
    backward on our kernel: BatchNormGradExt through the op plugin ("ext"), or BatchNormGrad from the
    kernel factory, the default ("legacy")), queued behind the shut gate, waits for the queue exactly
    when the same step of the unconverted network does (MindSpore's own waits), while the Cell route's
    Python bprop always drains it first, which is what the native route removes."""
    from mindspore_bn_grad.cpu_kernel import factory, plugin
    from mindspore_bn_grad.nn._native import native_mechanism
    if mechanism == "ext":
        assert plugin.status()
    elif not factory.legacy_status():
        pytest.skip(f"no kernel-factory route here: {factory.state().legacy_reason or factory.state().reason}")
    assert native_mechanism() == mechanism
    ms.set_context(mode=ms.PYNATIVE_MODE)
    _assert_mindspore_launches_do_not_wait(gate)
    x = ms.Tensor(np.random.default_rng(1).standard_normal((2, 4, 6, 6)).astype(np.float32))
    forced = {}
    for route in ("original", "native", "cell"):
        net = _SameShapes(True)
        if route != "original":
            net = convert_batchnorm(net, route=route)
        net.set_train(train)
        opt = nn.Momentum(net.trainable_params(), 0.01, 0.9)
        grad_fn = ms.value_and_grad(net, None, opt.parameters)

        def step():
            _, grads = grad_fn(x)
            opt(grads)
            return grads
        step()[0].asnumpy()  # warm: the first step builds the kernels
        grads, forced[route] = gate.run(step)
        grads[0].asnumpy()
    assert forced["native"] == forced["original"], forced
    assert forced["cell"], "the control: the Cell route's Python bprop drains the queue"


def test_the_gate_sees_a_waiting_launch(gate):
    """The gated test can fail: two ZerosLike of the same shape in a bprop wait (MindSpore 2.10).
    (This is also the wait that ends our bprops, on purpose.)"""
    _, run = gate
    ms.set_context(mode=ms.PYNATIVE_MODE)
    zeros_like = ms.ops.ZerosLike()
    seen = []

    class TwoZerosLike(nn.Cell):
        def construct(self, x):
            return x * 2

        def bprop(self, x, out, dout):
            def body():
                return (dout * 2 + zeros_like(x) + zeros_like(x),)
            result, forced = run(body)
            seen.append(forced)
            return result

    x = ms.Tensor(np.ones((2, 3), np.float32))
    dx = ms.grad(TwoZerosLike(), 0)(x).asnumpy()
    np.testing.assert_array_equal(dx, np.full((2, 3), 2.0, np.float32))
    assert seen == [1]


@pytest.mark.parametrize("view", [True, False], ids=["reshape-view", "fresh"])
def test_the_gate_sees_a_launch_on_a_view_wait(gate, view):
    """Why eval BatchNorm1d's bprop must get no Reshape views (the eval-bn1d case above): in
    MindSpore 2.10 our backward, launched on a tensor that is a view, waits for the queue, even
    outside any bprop and when the view's data was computed long before; on a fresh tensor of the
    same shape and values it does not. If the view case stops waiting, MindSpore has changed and
    docs/performance.md ("The eval BatchNorm1d wait") should say so."""
    from mindspore_bn_grad.backward import backward_op
    ms.set_context(mode=ms.PYNATIVE_MODE)
    values = np.random.default_rng(2).standard_normal((2, 3)).astype(np.float32)
    t = ms.ops.reshape(ms.Tensor(values), (2, 3, 1, 1)) if view else ms.Tensor(values.reshape(2, 3, 1, 1))
    t.asnumpy()  # computed
    ones, zeros = ms.Tensor(np.ones(3, np.float32)), ms.Tensor(np.zeros(3, np.float32))
    op = backward_op(False, 1e-5, (True, True, True), "NCHW")
    op(t, t, ones, zeros, ones, None, None)[0].asnumpy()  # built and launched once, open
    result, forced = gate.run(lambda: op(t, t, ones, zeros, ones, None, None))
    result[0].asnumpy()
    assert forced == view
