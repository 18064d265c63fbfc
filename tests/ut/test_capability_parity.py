"""A converted network keeps every capability of MindSpore's BatchNorm (issue 14), both modes.

One small network (Conv2d -> BatchNorm2d -> ReLU -> Dense -> BatchNorm1d ->
ReLU -> Dense), built twice from the same NumPy weights: once as MindSpore
builds it, once converted with ``convert_batchnorm``. Each row of the issue's
table runs on both and compares values with the unconverted network (and
with the float64 reference where one exists):

- mixed precision: AMP O1 / O2 / O3 through ``auto_mixed_precision`` (loss,
  every gradient's dtype and value, running statistics), through
  ``build_train_network`` (losses and every Parameter after two steps) and
  ``Model(amp_level=...)``; nothing of ours is written to the working directory;
- ``batch_norm_backward`` inside ``@ms.jit`` and a GRAPH ``construct``;
- 8 Python threads (PYNATIVE): see also test_concurrency.py;
- SyncBatchNorm on an empty batch;
- a GPU device target: a clear error.

- second-order gradients (a gradient penalty through both BatchNorms), and
  in depth in test_double_backward.py.
"""
import os

import numpy as np
import pytest
from mindspore import Tensor, nn

from reference import batch_norm_backward_ref
from _harness import builtin_kernels

LEVELS = ("O1", "O2", "O3")
F16 = dict(rtol=2e-2)  # AMP runs in float16: values agree to its precision


def _set_mode(mode):
    import mindspore as ms
    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)


def _weights():
    rng = np.random.default_rng(14)
    return {"conv": (rng.standard_normal((4, 3, 3, 3)) * 0.4).astype(np.float32),
            "g2": rng.uniform(0.5, 1.5, 4).astype(np.float32), "b2": rng.uniform(-0.5, 0.5, 4).astype(np.float32),
            "fc1": (rng.standard_normal((8, 4 * 5 * 5)) * 0.2).astype(np.float32),
            "fc1b": (rng.standard_normal(8) * 0.1).astype(np.float32),
            "g1": rng.uniform(0.5, 1.5, 8).astype(np.float32), "b1": rng.uniform(-0.5, 0.5, 8).astype(np.float32),
            "fc2": (rng.standard_normal((3, 8)) * 0.5).astype(np.float32),
            "fc2b": (rng.standard_normal(3) * 0.1).astype(np.float32)}


def _data():
    rng = np.random.default_rng(15)
    return (rng.standard_normal((6, 3, 5, 5)) * 2 + 0.5).astype(np.float32), np.int32([0, 1, 2, 1, 0, 2])


def _net(converted, route="auto"):
    import mindspore_bn_grad as mbg
    net = _Net(_weights())
    if converted:
        mbg.convert_batchnorm(net, route=route)
        assert isinstance(net.bn2, mbg.nn.BatchNorm2d) and isinstance(net.bn1, mbg.nn.BatchNorm1d)
    net.set_train()
    return net


class _Net(nn.Cell):
    """At module level: AMP O1 re-imports the network's class from its file."""

    def __init__(self, w):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, pad_mode="pad", padding=1, weight_init=Tensor(w["conv"]))
        self.bn2 = nn.BatchNorm2d(4, momentum=0.8, gamma_init=Tensor(w["g2"]), beta_init=Tensor(w["b2"]))
        self.relu = nn.ReLU()
        self.flat = nn.Flatten()
        self.fc1 = nn.Dense(100, 8, weight_init=Tensor(w["fc1"]), bias_init=Tensor(w["fc1b"]))
        self.bn1 = nn.BatchNorm1d(8, momentum=0.8, gamma_init=Tensor(w["g1"]), beta_init=Tensor(w["b1"]))
        self.fc2 = nn.Dense(8, 3, weight_init=Tensor(w["fc2"]), bias_init=Tensor(w["fc2b"]))

    def construct(self, x):
        h = self.flat(self.relu(self.bn2(self.conv(x))))
        return self.fc2(self.relu(self.bn1(self.fc1(h))))


def _params(net):
    return {p.name: p.asnumpy().astype(np.float64) for p in net.get_parameters()}


def _close(name, got, want, rtol):
    # floor: a gradient that is 0 in exact arithmetic (a bias before a BatchNorm) is float16 noise
    scale = max(float(np.abs(want).max()) if np.size(want) else 0.0, 1e-2)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, err_msg=name)


def _amp_value_and_grad(mode, level, converted):
    """auto_mixed_precision(net, level); two steps of value_and_grad; (losses, grads, params)."""
    import mindspore as ms
    _set_mode(mode)
    net = ms.amp.auto_mixed_precision(_net(converted), level)
    net.set_train()
    loss = nn.WithLossCell(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"))
    weights = net.trainable_params()
    step = ms.value_and_grad(loss, None, weights)
    x, y = _data()
    out = [step(Tensor(x), Tensor(y)) for _ in range(2)]
    names = [p.name for p in weights]
    grads = {n: (str(g.dtype), g.asnumpy().astype(np.float64)) for n, g in zip(names, out[-1][1])}
    return [float(l.asnumpy()) for l, _ in out], grads, _params(net)


@pytest.mark.parametrize("mode", ["pynative", "graph"])
@pytest.mark.parametrize("level", LEVELS)
def test_amp_auto_mixed_precision(mode, level, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # O1 writes MindSpore's rewritten_network/ here, not into the checkout
    want_loss, want_grads, want_params = _amp_value_and_grad(mode, level, False)
    got_loss, got_grads, got_params = _amp_value_and_grad(mode, level, True)
    np.testing.assert_allclose(got_loss, want_loss, **F16)
    assert got_grads.keys() == want_grads.keys()
    for name, (dtype, g) in got_grads.items():
        assert dtype == want_grads[name][0], (name, dtype, want_grads[name][0])  # gamma/beta float32 too
        _close(name, g, want_grads[name][1], 5e-2)
    assert got_params.keys() == want_params.keys()
    moving = [n for n in want_params if "moving_" in n]
    assert len(moving) == 4
    for name in moving:  # the running statistics moved, as MindSpore's did
        _close(name, got_params[name], want_params[name], 2e-2)
        assert not np.allclose(want_params[name], 0.0 if "mean" in name else 1.0)


def _amp_train_network(mode, level, converted):
    import mindspore as ms
    _set_mode(mode)
    net = _net(converted)
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    # On CPU only loss_scale_manager=None is accepted (O2 defaults to a dynamic one)
    train = ms.amp.build_train_network(net, opt, loss, level=level, loss_scale_manager=None)
    x, y = _data()
    losses = [float(train(Tensor(x), Tensor(y)).asnumpy()) for _ in range(2)]
    return losses, _params(net)


@pytest.mark.parametrize("mode", ["pynative", "graph"])
@pytest.mark.parametrize("level", LEVELS)
def test_amp_build_train_network(mode, level, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    want_loss, want_params = _amp_train_network(mode, level, False)
    got_loss, got_params = _amp_train_network(mode, level, True)
    np.testing.assert_allclose(got_loss, want_loss, **F16)
    assert got_params.keys() == want_params.keys()
    for name, want in want_params.items():  # weights after two optimizer steps, running statistics
        _close(name, got_params[name], want, 3e-2)
    for name in ("bn2.moving_mean", "bn1.moving_variance"):
        assert not np.allclose(got_params[name], 0.0 if "mean" in name else 1.0), name


def _amp_model(mode, level, converted):
    import mindspore as ms
    import mindspore.dataset as ds
    _set_mode(mode)
    net = _net(converted)
    x, y = _data()
    data = ds.NumpySlicesDataset({"x": np.concatenate([x, x[::-1]]), "y": np.concatenate([y, y[::-1]])},
                                 shuffle=False).batch(6)
    model = ms.Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                     nn.SGD(net.trainable_params(), 0.1), amp_level=level)
    model.train(1, data, dataset_sink_mode=False)
    return _params(net)


@pytest.mark.parametrize("mode", ["pynative", "graph"])
@pytest.mark.parametrize("level", ["O1", "O3"])  # Model's O2 asks for a dynamic loss scale, refused on CPU
def test_amp_model_amp_level(mode, level, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    want = _amp_model(mode, level, False)
    got = _amp_model(mode, level, True)
    assert got.keys() == want.keys()
    for name, w in want.items():
        _close(name, got[name], w, 3e-2)
    assert not np.allclose(got["bn2.moving_mean"], 0.0)


_O1_SCRIPT = """
import sys
import numpy as np
import mindspore as ms
from mindspore import Tensor, nn
import mindspore_bn_grad as mbg

class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(3)
        self.conv = nn.Conv2d(3, 4, 3, weight_init=Tensor(rng.standard_normal((4, 3, 3, 3)).astype(np.float32)))
        self.bn = nn.BatchNorm2d(4)
        self.flat = nn.Flatten()
        self.fc = nn.Dense(100, 3, weight_init=Tensor(rng.standard_normal((3, 100)).astype(np.float32)),
                           bias_init="zeros")

    def construct(self, x):
        return self.fc(self.flat(self.bn(self.conv(x))))

ms.set_context(mode=ms.GRAPH_MODE if sys.argv[1] == "graph" else ms.PYNATIVE_MODE)
net = Net()
if sys.argv[2] == "converted":
    mbg.convert_batchnorm(net)
amp = ms.amp.auto_mixed_precision(net, "O1")
amp.set_train()
loss = nn.WithLossCell(amp, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"))
x = Tensor(np.random.default_rng(4).standard_normal((6, 3, 5, 5)).astype(np.float32))
value, grads = ms.value_and_grad(loss, None, amp.trainable_params())(x, Tensor(np.int32([0, 1, 2, 0, 1, 2])))
stats = [p.asnumpy().tolist() for p in amp.get_parameters() if "moving" in p.name]
print("RESULT", repr([float(value.asnumpy()), [str(g.dtype) for g in grads], stats]))
"""


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_amp_o1_as_a_user_runs_it(mode, tmp_path):
    """A user's script run from its own directory (only that directory on sys.path, so MindSpore's
    rewrite re-imports classes by file name): O1 works converted, gives the unconverted numbers,
    and writes nothing but MindSpore's own rewritten_network/<Net>Opt_<id>.py."""
    import ast
    import subprocess
    import sys
    results, listings = {}, {}
    for variant in ("original", "converted"):
        cwd = tmp_path / variant
        cwd.mkdir()
        (cwd / "user_net.py").write_text(_O1_SCRIPT)
        r = subprocess.run([sys.executable, "user_net.py", mode, variant], cwd=cwd, capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")][-1]
        results[variant] = ast.literal_eval(line[len("RESULT "):])
        listings[variant] = sorted(str(p.relative_to(cwd)) for p in cwd.rglob("*")
                                   if p.is_file() and p.name != "user_net.py" and "__pycache__" not in p.parts)
    (loss, dtypes, stats), (want_loss, want_dtypes, want_stats) = results["converted"], results["original"]
    np.testing.assert_allclose(loss, want_loss, **F16)
    assert dtypes == want_dtypes
    np.testing.assert_allclose(np.array(stats), np.array(want_stats), rtol=2e-2, atol=1e-3)
    assert not np.allclose(stats[0], 0.0)  # the running mean moved
    assert len(listings["converted"]) == len(listings["original"]) == 1, listings
    written = listings["converted"][0]
    assert written.startswith(os.path.join("rewritten_network", "NetOpt_")), listings
    source = (tmp_path / "converted" / written).read_text()
    assert "mindspore_bn_grad" not in source and "_layers" not in source and "_cells" not in source


# ------------------------------------------------------- functional API in graphs

def _bnb_case():
    rng = np.random.default_rng(16)
    x = rng.standard_normal((4, 3, 6, 5)).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    w = rng.uniform(0.5, 1.5, 3).astype(np.float32)
    mean = x.mean((0, 2, 3)).astype(np.float32)
    invstd = (1 / np.sqrt(x.var((0, 2, 3)) + 1e-5)).astype(np.float32)
    rm, rv = rng.standard_normal(3).astype(np.float32), rng.uniform(0.5, 2, 3).astype(np.float32)
    return dy, x, w, rm, rv, mean, invstd


@pytest.mark.parametrize("mode", ["pynative", "graph"])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_backward_in_jit_and_graph_construct(mode, training):
    import mindspore as ms

    import mindspore_bn_grad as mbg
    _set_mode(mode)
    arrays = _bnb_case()
    mask = (True, False, True)
    want = batch_norm_backward_ref(*arrays, training=training, eps=1e-3, output_mask=mask)

    @ms.jit
    def in_jit(dy, x, w, rm, rv, m, iv):
        return mbg.batch_norm_backward(dy, x, w, rm, rv, m, iv, training=training, eps=1e-3, output_mask=mask)

    class InConstruct(nn.Cell):
        def construct(self, dy, x, w, rm, rv, m, iv):
            gi, gw, gb = mbg.batch_norm_backward(dy, x, w, running_mean=rm, running_var=rv, save_mean=m,
                                                 save_invstd=iv, training=training, eps=1e-3,
                                                 output_mask=mask)
            return gi * 2, gw, gb

    tensors = [Tensor(a) for a in arrays]
    got_jit = [g.asnumpy() for g in in_jit(*tensors)]
    got_cell = [g.asnumpy() for g in InConstruct()(*tensors)]
    got_cell[0] = got_cell[0] / 2
    for got in (got_jit, got_cell):
        for name, g, w in zip(("grad_input", "grad_weight", "grad_bias"), got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg=name)
    ms.set_context(mode=ms.PYNATIVE_MODE)  # and the plain PYNATIVE call gives the same numbers
    plain = mbg.batch_norm_backward(*tensors, training=training, eps=1e-3, output_mask=mask)
    for g, p in zip(got_jit, plain):
        np.testing.assert_allclose(g, p.asnumpy(), rtol=1e-6, atol=1e-6)


def test_batch_norm_backward_in_jit_rejects_bad_input_clearly(tmp_path, monkeypatch):
    import mindspore as ms
    monkeypatch.chdir(tmp_path)  # a failed compile writes rank_0/om/analyze_fail.ir into the working directory
    from mindspore import Tensor

    import mindspore_bn_grad as mbg
    _set_mode("pynative")
    dy, x, w, _, _, m, iv = (Tensor(a) for a in _bnb_case())

    @ms.jit
    def bad_eps(dy, x, w, m, iv):
        return mbg.batch_norm_backward(dy, x, w, None, None, m, iv, eps=-1.0)

    @ms.jit
    def bad_weight(dy, x, w, m, iv):
        return mbg.batch_norm_backward(dy, x, x, None, None, m, iv)

    with pytest.raises(ValueError, match="BatchNormBackward: eps expected"):
        bad_eps(dy, x, w, m, iv)
    with pytest.raises(ValueError, match="BatchNormBackward: weight expected"):
        bad_weight(dy, x, w, m, iv)


# ----------------------------------------------------------------------- threads

def test_threads_converted_network_and_public_api():
    """8 threads at once, cold (the first launches of a fresh process), PYNATIVE: no crash, right numbers."""
    from test_concurrency import _run_thread_script
    _run_thread_script(8, 3, "cold", "net")
    _run_thread_script(8, 3, "cold", "api")


# ----------------------------------------------------------- SyncBatchNorm, empty batch

@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_sync_batchnorm_empty_batch(mode):
    """Real batch, empty batch, real batch: the statistics stay finite and follow the float64 rule
    (an empty batch counts as mean 0, variance 0, as MindSpore's BatchNorm kernel takes it when its
    scratch memory is zero; MindSpore's own result there is whatever that memory held, so it is not
    the oracle); the real steps give what MindSpore's nn.SyncBatchNorm gives from the same state."""
    import mindspore as ms

    from mindspore_bn_grad.nn import SyncBatchNorm
    _set_mode(mode)
    rng = np.random.default_rng(17)
    x = (rng.standard_normal((5, 4, 3, 3)) + 1).astype(np.float32)
    ours = SyncBatchNorm(4, momentum=0.8)
    ours.set_train()
    step = ms.value_and_grad(ours, 0, ours.trainable_params())  # sensitivity ones: no reduction of empties
    mm, mv = np.zeros(4), np.ones(4)
    mean, uvar = x.astype(np.float64).mean((0, 2, 3)), x.astype(np.float64).var((0, 2, 3), ddof=1)
    for batch in (x, np.zeros((0, 4, 3, 3), np.float32), x):
        theirs = ms.nn.SyncBatchNorm(4, momentum=0.8, moving_mean_init=Tensor(mm.astype(np.float32)),
                                     moving_var_init=Tensor(mv.astype(np.float32)))
        theirs.set_train()
        y, (gx, (gg, gb)) = step(Tensor(batch))
        got = [y.asnumpy(), gx.asnumpy(), gg.asnumpy(), gb.asnumpy()]
        empty = batch.shape[0] == 0
        mm = 0.8 * mm + 0.2 * (0.0 if empty else mean)
        mv = 0.8 * mv + 0.2 * (0.0 if empty else uvar)
        np.testing.assert_allclose(ours.moving_mean.asnumpy(), mm, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ours.moving_variance.asnumpy(), mv, rtol=1e-5, atol=1e-6)
        if empty:
            assert got[0].shape == got[1].shape == batch.shape
            np.testing.assert_array_equal(got[2], 0)
            np.testing.assert_array_equal(got[3], 0)
            continue
        ty, (tgx, (tgg, tgb)) = ms.value_and_grad(theirs, 0, theirs.trainable_params())(Tensor(batch))
        for k, (g, w) in enumerate(zip(got, (ty, tgx, tgg, tgb))):
            np.testing.assert_allclose(g, w.asnumpy(), rtol=1e-4, atol=1e-5, err_msg=str(k))
        np.testing.assert_allclose(ours.moving_mean.asnumpy(), theirs.moving_mean.asnumpy(), rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------- device targets

def test_gpu_target_is_a_clear_error(monkeypatch):
    """No GPU here: the device-target lookup says GPU. Converting, building and calling all refuse,
    before the network changes."""
    import mindspore as ms
    from mindspore import Tensor

    import mindspore_bn_grad as mbg
    from mindspore_bn_grad import target
    _set_mode("pynative")
    net = _net(False)
    dy, x, w, _, _, m, iv = (Tensor(a) for a in _bnb_case())
    monkeypatch.setattr(target, "device_target", lambda: "GPU")
    msg = "device_target expected 'CPU' or 'Ascend', got 'GPU'"
    with pytest.raises(RuntimeError, match="convert_batchnorm: " + msg):
        mbg.convert_batchnorm(net)
    assert type(net.bn2) is ms.nn.BatchNorm2d  # untouched
    with pytest.raises(RuntimeError, match="BatchNorm2d: " + msg):
        mbg.nn.BatchNorm2d(4)
    with pytest.raises(RuntimeError, match="SyncBatchNorm: " + msg):
        mbg.nn.SyncBatchNorm(4)
    with pytest.raises(RuntimeError, match="patch_batchnorm: " + msg):
        mbg.patch_batchnorm()
    assert not mbg.nn.is_batchnorm_patched()
    with pytest.raises(RuntimeError, match="BatchNormBackward: " + msg):
        mbg.batch_norm_backward(dy, x, w, None, None, m, iv, eps=0.25)  # attributes never used before


# ------------------------------------------------------------ second order

def _penalty_grads(mode, converted, route="cell"):
    """Gradient penalty 0.5 * |d loss / dx|^2 of the network above: its value, its gradient
    w.r.t. x and w.r.t. every trainable Parameter (a second-order gradient through every
    BatchNorm), float64. Converted on `route`: the Cell route, or "auto" (by default the native
    route on MindSpore's own BatchNorm primitives). Not through BatchNormExt: MindSpore 2.10's own
    bprop of BatchNormGradExt is broken on CPU (docs/native_route.md;
    test_second_order_on_the_native_route_is_mindspores_bug)."""
    import mindspore as ms
    _set_mode(mode)
    net = _net(converted, route=route)
    x, _ = _data()

    def total(v):
        return net(v).sum()

    grad_x = ms.grad(total, grad_position=0)

    def penalty(v):
        g = grad_x(v)
        return 0.5 * (g * g).sum()

    with builtin_kernels(net):  # the original: on MindSpore's own kernels
        value, (gx, gw) = ms.value_and_grad(penalty, grad_position=0, weights=net.trainable_params())(Tensor(x))
    return (float(value.asnumpy()), gx.asnumpy().astype(np.float64),
            {p.name: g.asnumpy().astype(np.float64) for p, g in zip(net.trainable_params(), gw)})


@pytest.mark.parametrize("route", ["auto", "cell"])
@pytest.mark.parametrize("mode", ["graph", "pynative"])
def test_second_order_gradients(mode, route):
    """Converted vs original, second-order gradients of the same network, against MindSpore's
    own BatchNorm differentiated twice in GRAPH mode. In PYNATIVE MindSpore 2.10 cannot give a
    reference for this network: its BatchNormGradGrad crashes now and then on CPU, and its
    PYNATIVE second order through Dense layers is wrong without any BatchNorm (the weight
    gradient comes back zero and the input gradient changes). So the PYNATIVE row checks the
    penalty itself; second-order gradients in PYNATIVE are compared with MindSpore and float64
    finite differences on Conv-BatchNorm networks in test_double_backward.py."""
    want_value, want_gx, want_gw = _penalty_grads("graph", False)
    got_value, got_gx, got_gw = _penalty_grads(mode, True, route)
    assert np.isfinite(want_value) and want_value > 0
    np.testing.assert_allclose(got_value, want_value, rtol=1e-5)
    assert np.isfinite(got_gx).all() and all(np.isfinite(g).all() for g in got_gw.values())
    if mode == "graph":
        _close("d penalty / dx", got_gx, want_gx, 1e-4)
        assert got_gw.keys() == want_gw.keys()
        for name in want_gw:
            _close(name, got_gw[name], want_gw[name], 1e-4)


@pytest.mark.native_route
def test_second_order_on_the_native_route_is_mindspores_bug():
    """Why second order takes the Cell route (docs/native_route.md): MindSpore 2.10's C++ bprop of
    BatchNormGradExt returns one gradient fewer than the primitive has inputs, which PYNATIVE refuses.
    If a MindSpore release fixes it, this test fails and the native route can take second order too."""
    import mindspore as ms
    from mindspore import mint
    _set_mode("pynative")
    x = Tensor(np.random.default_rng(3).standard_normal((4, 3, 2, 2)).astype(np.float32))

    def loss(v):
        return (mint.nn.functional.batch_norm(v, None, None, training=True) ** 3).sum()

    def penalty(v):
        g = ms.grad(loss)(v)
        return (g * g).sum()

    # PYNATIVE refuses the bprop ("Fn gradient size should larger than next edges size, but got 9
    # vs 10"), or, in a process whose BatchNormGradGrad kernel was not selected before, fails to
    # select one for the saved inverse std it is handed as a variance
    with pytest.raises((RuntimeError, TypeError),
                       match="gradient size should larger than next edges size|Kernel select failed"):
        ms.grad(penalty)(x).asnumpy()
