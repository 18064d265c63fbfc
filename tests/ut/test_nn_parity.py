"""mindspore_bn_grad.nn against MindSpore's own nn.BatchNorm*: training, eval, layouts, IR.

Every comparison is against the built-in cell (same initial values, same
data) or the float64 reference; both modes where it matters.
"""
import glob
import os

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn

import mindspore_bn_grad as mbg
from _harness import builtin_kernels, copy_parameter_values, launched_backward_ops
from reference import batch_norm_backward_ref

MODES = {"pynative": ms.PYNATIVE_MODE, "graph": ms.GRAPH_MODE}


@pytest.fixture(params=sorted(MODES))
def ms_mode(request):
    ms.set_context(mode=MODES[request.param])
    yield request.param
    ms.set_context(mode=ms.PYNATIVE_MODE)


class ConvNet(nn.Cell):
    """Two conv + BatchNorm2d blocks, a Dense + BatchNorm1d (2-D input) and a BatchNorm1d on (N, C, L)."""

    def __init__(self, affine=True):
        super().__init__()
        he = "he_uniform"
        self.c1 = nn.Conv2d(3, 8, 3, has_bias=False, weight_init=he)
        self.b1 = nn.BatchNorm2d(8, affine=affine)
        self.c2 = nn.Conv2d(8, 8, 3, stride=2, has_bias=False, weight_init=he)
        self.b2 = nn.BatchNorm2d(8, momentum=0.7, eps=1e-3)
        self.b3 = nn.BatchNorm1d(8)  # on (N, C, L)
        self.d1 = nn.Dense(8 * 16, 16, weight_init=he)
        self.b4 = nn.BatchNorm1d(16)  # on (N, C)
        self.d2 = nn.Dense(16, 5, weight_init=he)
        self.relu = nn.ReLU()
        self.flat = nn.Flatten()
        self.reshape = ms.ops.Reshape()

    def construct(self, x):
        x = self.relu(self.b1(self.c1(x)))
        x = self.relu(self.b2(self.c2(x)))               # (N, 8, 4, 4)
        x = self.b3(self.reshape(x, (x.shape[0], 8, 16)))  # (N, 8, 16)
        x = self.relu(self.b4(self.d1(self.flat(x))))
        return self.d2(x)


class WeightedSum(nn.Cell):
    """sum(cell(x) * w): a scalar loss with a known, non-uniform output gradient w."""

    def __init__(self, cell, w):
        super().__init__(auto_prefix=False)
        self.cell = cell
        self.w = ms.Tensor(w)

    def construct(self, x):
        return (self.cell(x) * self.w).sum()


def twin_nets(build):
    """(built-in net, converted net) with identical Parameter values."""
    ms.set_seed(3)
    ref, ours = build(), build()
    copy_parameter_values(ref, ours)
    return ref, mbg.convert_batchnorm(ours)


def train_record(net, x, y, steps, train=True, lr=0.1):
    """Loss, input grad and parameter grads of each step; parameters and moving stats at the end."""
    net.set_train(train)
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), lr, 0.9)
    fn = ms.value_and_grad(nn.WithLossCell(net, loss_fn), grad_position=0, weights=opt.parameters)
    rec = []
    for _ in range(steps):
        with builtin_kernels(net):  # MindSpore's own kernels for a network of its own cells
            loss, (dx, dw) = fn(ms.Tensor(x), ms.Tensor(y))
            opt(dw)
            rec.append({"loss": loss.asnumpy(), "dx": dx.asnumpy(),
                        **{"d/" + p.name: g.asnumpy() for p, g in zip(opt.parameters, dw)}})
    final = {p.name: p.asnumpy() for p in net.get_parameters()}
    return rec, final


def assert_close_dicts(ours, ref, rtol=1e-4, what=""):
    assert ours.keys() == ref.keys()
    for k in ref:
        scale = max(float(np.abs(ref[k]).max()), 1e-3)
        np.testing.assert_allclose(ours[k], ref[k], rtol=rtol, atol=rtol * scale, err_msg=f"{what} {k}")


def data(n=6, shape=(3, 8, 8), classes=5, seed=0):
    rs = np.random.RandomState(seed)
    return rs.randn(n, *shape).astype(np.float32), rs.randint(0, classes, n).astype(np.int32)


@pytest.mark.parametrize("affine", [True, False])
def test_training_matches_builtin(ms_mode, affine):
    ref, ours = twin_nets(lambda: ConvNet(affine=affine))
    x, y = data()
    rec_ref, fin_ref = train_record(ref, x, y, steps=3)
    rec_ours, fin_ours = train_record(ours, x, y, steps=3)
    for step, (a, b) in enumerate(zip(rec_ours, rec_ref)):
        assert_close_dicts(a, b, what=f"{ms_mode} step {step}")
    assert_close_dicts(fin_ours, fin_ref, what=f"{ms_mode} after training")
    # running statistics really moved (in place, in both modes)
    assert not np.allclose(fin_ours["b1.moving_mean"], 0.0)
    assert not np.allclose(fin_ours["b4.moving_variance"], 1.0)


def test_eval_mode_matches_builtin(ms_mode):
    """Eval: running statistics in forward and backward (inference formula), nothing updated."""
    ref, ours = twin_nets(ConvNet)
    x, y = data(seed=1)
    train_record(ref, x, y, steps=1)  # move the running stats away from 0 / 1
    train_record(ours, x, y, steps=1)
    rec_ref, fin_ref = train_record(ref, x, y, steps=2, train=False)
    rec_ours, fin_ours = train_record(ours, x, y, steps=2, train=False)
    for a, b in zip(rec_ours, rec_ref):
        assert_close_dicts(a, b, what=f"{ms_mode} eval")
    assert_close_dicts(fin_ours, fin_ref)


@pytest.mark.parametrize("use_batch_statistics", [True, False])
def test_use_batch_statistics(ms_mode, use_batch_statistics):
    """True: batch stats + update even in eval; False: running stats, no update, even in training."""
    rs = np.random.RandomState(5)
    x = rs.randn(4, 3, 5, 5).astype(np.float32) * 2 + 1
    w = rs.randn(4, 3, 5, 5).astype(np.float32)
    init = dict(moving_mean_init=ms.Tensor(rs.randn(3).astype(np.float32)),
                moving_var_init=ms.Tensor(rs.rand(3).astype(np.float32) + 0.5),
                gamma_init=ms.Tensor(rs.rand(3).astype(np.float32) + 0.5),
                use_batch_statistics=use_batch_statistics)
    results = []
    for cls in (nn.BatchNorm2d, mbg.nn.BatchNorm2d):
        for train in (True, False):
            bn = cls(3, **init)
            bn.set_train(train)
            fn = ms.value_and_grad(WeightedSum(bn, w), 0, bn.trainable_params())
            out, (dx, (dg, db)) = fn(ms.Tensor(x))
            results.append([out.asnumpy(), dx.asnumpy(), dg.asnumpy(), db.asnumpy(),
                            bn.moving_mean.asnumpy(), bn.moving_variance.asnumpy()])
    for a, b in zip(results[2:], results[:2]):
        for u, v in zip(a, b):
            np.testing.assert_allclose(u, v, rtol=1e-4, atol=1e-4)
    moved = not np.allclose(results[2][4], init["moving_mean_init"].asnumpy())
    assert moved == use_batch_statistics


def test_nhwc_trains_like_nchw(ms_mode):
    """data_format='NHWC' on CPU: outputs, gradients and running stats equal the NCHW computation."""
    rs = np.random.RandomState(7)
    x = (rs.randn(4, 6, 5, 3) * 3 + 2).astype(np.float32)   # NHWC
    w = rs.randn(4, 6, 5, 3).astype(np.float32)
    to_nchw = (0, 3, 1, 2)
    runs = {}
    for fmt in ("NHWC", "NCHW"):
        ms.set_seed(0)
        bn = (mbg.nn.BatchNorm2d(3, data_format="NHWC") if fmt == "NHWC" else nn.BatchNorm2d(3))
        bn.set_train()
        xt, wt = (x, w) if fmt == "NHWC" else (x.transpose(to_nchw), w.transpose(to_nchw))
        opt = nn.SGD(bn.trainable_params(), 0.5)
        fn = ms.value_and_grad(WeightedSum(bn, wt), 0, opt.parameters)
        rec = []
        for _ in range(3):
            loss, (dx, grads) = fn(ms.Tensor(xt))
            opt(grads)
            dx = dx.asnumpy()
            rec.append([loss.asnumpy(), dx if fmt == "NCHW" else dx.transpose(to_nchw)]
                       + [g.asnumpy() for g in grads])
        rec.append([p.asnumpy() for p in bn.get_parameters()])
        runs[fmt] = rec
    for a, b in zip(runs["NHWC"], runs["NCHW"]):
        for u, v in zip(a, b):
            np.testing.assert_allclose(u, v, rtol=1e-4, atol=1e-4)
    # and the first step's gradients against the float64 reference, channel-last
    mean = x.reshape(-1, 3).astype(np.float64).mean(0)
    var = x.reshape(-1, 3).astype(np.float64).var(0)
    gx, gg, gb = batch_norm_backward_ref(w, x, np.ones(3), save_mean=mean,
                                         save_invstd=1 / np.sqrt(var + 1e-5), data_format="NHWC")
    np.testing.assert_allclose(runs["NHWC"][0][1], gx.transpose(to_nchw), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(runs["NHWC"][0][2], gg, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(runs["NHWC"][0][3], gb, rtol=1e-4, atol=1e-3)


def test_batchnorm3d_matches_builtin(ms_mode):
    rs = np.random.RandomState(11)
    x = rs.randn(3, 4, 2, 3, 5).astype(np.float32)
    w = rs.randn(3, 4, 2, 3, 5).astype(np.float32)
    res = []
    for cls in (nn.BatchNorm3d, mbg.nn.BatchNorm3d):
        bn = cls(4, momentum=0.8)
        bn.set_train()
        opt = nn.SGD(bn.trainable_params(), 0.1)
        fn = ms.value_and_grad(WeightedSum(bn, w), 0, opt.parameters)
        rec = []
        for _ in range(2):
            loss, (dx, grads) = fn(ms.Tensor(x))
            opt(grads)
            rec += [loss.asnumpy(), dx.asnumpy()] + [g.asnumpy() for g in grads]
        rec += [p.asnumpy() for p in bn.get_parameters()]
        res.append((rec, [p.name for p in bn.get_parameters()]))
    assert res[0][1] == res[1][1] == ["bn2d.moving_mean", "bn2d.moving_variance", "bn2d.gamma", "bn2d.beta"]
    for u, v in zip(res[1][0], res[0][0]):
        np.testing.assert_allclose(u, v, rtol=1e-4, atol=1e-4)


def test_output_mask_follows_requires_grad():
    """The Cell route's mask (the native route's is MindSpore's own, from the autograd graph)."""
    ms.set_context(mode=ms.PYNATIVE_MODE)
    bn = mbg.nn.BatchNorm2d(3, affine=False, route="cell")
    assert bn.bn_train.output_mask == (True, False, False)
    assert bn.bn_train.grad_op.op_attrs["output_mask"] == (True, False, False)
    assert bn.bn_infer.grad_op.op_attrs["output_mask"] == (True, False, False)
    bn = mbg.nn.BatchNorm2d(3, route="cell")
    assert bn.bn_train.grad_op.op_attrs["output_mask"] == (True, True, True)
    bn.gamma.requires_grad = False  # PYNATIVE re-reads the flags at every backward
    assert bn.bn_train.grad_op.op_attrs["output_mask"] == (True, False, True)
    # with gamma frozen, beta's and the input's gradients are still right
    rs = np.random.RandomState(2)
    x, w = rs.randn(4, 3, 2, 2).astype(np.float32), rs.randn(4, 3, 2, 2).astype(np.float32)
    bn.set_train()
    ref = nn.BatchNorm2d(3)
    ref.set_train()
    got = ms.grad(lambda t: (bn(t) * ms.Tensor(w)).sum(), 0, [bn.beta])(ms.Tensor(x))
    want = ms.grad(lambda t: (ref(t) * ms.Tensor(w)).sum(), 0, [ref.beta])(ms.Tensor(x))
    np.testing.assert_allclose(got[0].asnumpy(), want[0].asnumpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[1][0].asnumpy(), want[1][0].asnumpy(), rtol=1e-4, atol=1e-5)


def test_graph_mode_reads_the_flags_when_it_compiles(monkeypatch):
    """GRAPH mode picks the backward primitive while the graph compiles: a flag changed after
    conversion but before the first step is followed, and the gradients still match MindSpore's."""
    from mindspore_bn_grad.nn import _cells
    masks, pynative = [], []
    real = _cells.backward_op

    def spy(training, eps, output_mask, data_format, **kw):
        masks.append(tuple(output_mask))
        pynative.append(kw.get("pynative", False))
        return real(training, eps, output_mask, data_format, **kw)

    monkeypatch.setattr(_cells, "backward_op", spy)
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        rs = np.random.RandomState(5)
        x, w = rs.randn(4, 3, 2, 2).astype(np.float32), rs.randn(4, 3, 2, 2).astype(np.float32)
        grads = []
        for ours in (True, False):
            bn = mbg.nn.BatchNorm2d(3, route="cell") if ours else nn.BatchNorm2d(3)
            bn.gamma.requires_grad = False  # after conversion, before anything compiles
            bn.set_train()
            net = WeightedSum(bn, w)
            fn = ms.jit(ms.grad(net, 0, [bn.beta]))
            dx, (dbeta,) = fn(ms.Tensor(x))
            grads.append((dx.asnumpy(), dbeta.asnumpy()))
        assert masks and set(masks) == {(True, False, True)}, masks
        assert not any(pynative), "a graph got the PYNATIVE-only primitive (no unknown dims)"
        for got, want in zip(grads[0], grads[1]):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


def _subclass_bprop_cells(bn):
    """Installs subclasses of our two cells whose bprops are a user's own (the same formulas, written
    again): what reaches the backward from a bprop we did not write."""
    from mindspore import ops
    from mindspore_bn_grad.nn import _cells

    class MyTrainCell(_cells.BatchNormTrainCell):
        def bprop(self, x, gamma, beta, moving_mean, moving_variance, out, dout):
            dx, dgamma, dbeta = self.grad_op(dout[0], x, gamma, None, None, out[3], ops.rsqrt(out[4] + self.eps))
            return dx, dgamma, dbeta, ops.zeros_like(moving_mean), ops.zeros_like(moving_variance)

    bn.bn_train = MyTrainCell(bn.eps, bn.momentum, bn.format, owner=bn)
    return bn


@pytest.mark.parametrize("bprop", ["ours", "a subclass's own"])
def test_pynative_backward_launches_the_static_shape_primitive(monkeypatch, bprop):
    """PYNATIVE launches a primitive without the C++ shape infer (MindSpore would dlopen our library for
    it at every launch), whoever's bprop calls it; the gradients are MindSpore's and the float64
    reference's."""
    from mindspore_bn_grad.backward import BatchNormBackward
    launched = launched_backward_ops(monkeypatch)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    rs = np.random.RandomState(8)
    x, w = rs.randn(5, 3, 4, 2).astype(np.float32), rs.randn(5, 3, 4, 2).astype(np.float32)
    grads = []
    for ours in (True, False):
        bn = mbg.nn.BatchNorm2d(3, route="cell") if ours else nn.BatchNorm2d(3)
        if ours and bprop != "ours":
            _subclass_bprop_cells(bn)
        bn.set_train()
        dx, (dg, db) = ms.grad(WeightedSum(bn, w), 0, [bn.gamma, bn.beta])(ms.Tensor(x))
        grads.append((dx.asnumpy(), dg.asnumpy(), db.asnumpy()))
    assert launched and all(isinstance(op, BatchNormBackward) for op in launched)
    assert all(op.static_shapes and "cpp_infer_shape" not in op.attrs for op in launched)
    x64 = x.astype(np.float64)
    mean, var = x64.mean(axis=(0, 2, 3)), x64.var(axis=(0, 2, 3))
    want = batch_norm_backward_ref(w, x64, np.ones(3), save_mean=mean, save_invstd=1 / np.sqrt(var + 1e-5))
    for got, builtin, ref in zip(grads[0], grads[1], want):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got, builtin, rtol=1e-4, atol=1e-5)


def test_the_cells_choose_no_primitive_by_their_caller():
    """grad_op is the same primitive whoever reads it (no caller-frame inspection); that primitive
    supports unknown dims (the graph needs it) and launches in PYNATIVE through its static twin."""
    import inspect
    from mindspore_bn_grad.nn import _cells
    bn = mbg.nn.BatchNorm2d(3, route="cell")
    direct = bn.bn_train.grad_op

    def from_a_bprop_like_frame():
        return bn.bn_train.grad_op
    assert from_a_bprop_like_frame() is direct
    assert direct.dynamic_shape and "cpp_infer_shape" in direct.attrs
    assert "_getframe" not in inspect.getsource(_cells)


@pytest.mark.parametrize("route", [pytest.param("native", marks=pytest.mark.native_route), "cell"])
def test_graph_with_unknown_dims_trains_a_converted_batchnorm(route):
    """A graph compiled with unknown batch and height (set_inputs with None) runs a converted BatchNorm's
    backward on two sizes: the graph got the primitive that supports unknown dims."""
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        bn = mbg.nn.BatchNorm2d(3, route=route)
        bn.set_train()

        class Grads(nn.Cell):
            def __init__(self):
                super().__init__()
                self.params = ms.ParameterTuple([bn.gamma, bn.beta])
                self.net = WeightedSumOf(bn)
                self.grad = ms.ops.GradOperation(get_all=True, get_by_list=True)

            def construct(self, x, w):
                return self.grad(self.net, self.params)(x, w)

        cell = Grads()
        dyn = ms.Tensor(shape=[None, 3, None, 4], dtype=ms.float32)
        cell.set_inputs(dyn, dyn)
        for n, h in ((4, 2), (6, 3)):
            rs = np.random.RandomState(n)
            x, w = rs.randn(n, 3, h, 4).astype(np.float32), rs.randn(n, 3, h, 4).astype(np.float32)
            (dx, _), (dg, db) = cell(ms.Tensor(x), ms.Tensor(w))
            x64 = x.astype(np.float64)
            mean, var = x64.mean(axis=(0, 2, 3)), x64.var(axis=(0, 2, 3))
            want = batch_norm_backward_ref(w, x64, np.ones(3), save_mean=mean,
                                           save_invstd=1 / np.sqrt(var + 1e-5))
            for got, ref in zip((dx, dg, db), want):
                np.testing.assert_allclose(got.asnumpy(), ref, rtol=1e-4, atol=1e-5)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


class WeightedSumOf(nn.Cell):
    """sum(cell(x) * w) with w an input."""

    def __init__(self, cell):
        super().__init__(auto_prefix=False)
        self.cell = cell

    def construct(self, x, w):
        return (self.cell(x) * w).sum()


def _ir_text(path):
    texts = []
    for f in glob.glob(os.path.join(path, "**", "*.ir"), recursive=True):
        with open(f, encoding="utf-8", errors="replace") as fh:
            texts.append((os.path.basename(f), fh.read()))
    return texts


def _executed_ir(tmp_path, route):
    """The executed GRAPH (IR text) of one training gradient of a two-BatchNorm network on ``route``."""
    ms.set_context(mode=ms.GRAPH_MODE, save_graphs=1, save_graphs_path=str(tmp_path))
    try:
        net = mbg.convert_batchnorm(nn.SequentialCell([nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, affine=False),
                                                       nn.Conv2d(4, 4, 3), nn.BatchNorm2d(4)]), route=route)
        net.set_train()
        x = ms.Tensor(np.random.RandomState(0).randn(2, 3, 6, 6).astype(np.float32))
        ms.grad(net, grad_position=0, weights=net.trainable_params())(x)
    finally:
        ms.set_context(save_graphs=0, mode=ms.PYNATIVE_MODE)
    texts = _ir_text(str(tmp_path))
    assert texts, "no IR files were saved"
    return [t for name, t in texts if "execute" in name] or [t for _, t in texts]


def test_graph_ir_contains_our_op(tmp_path):
    """The compiled GRAPH of a Cell-route network runs our Custom op, not the built-in BatchNormGrad."""
    final = _executed_ir(tmp_path, "cell")
    ours = [line for t in final for line in t.splitlines()
            if "= Custom(" in line and ":BatchNormBackward" in line]
    assert len(ours) >= 2, "BatchNormBackward Custom op missing from the executed graph"
    assert any("output_mask: [1, 0, 0]" in line for line in ours)  # affine=False layer
    assert any("output_mask: [1, 1, 1]" in line for line in ours)
    assert not any("BatchNormGrad" in t for t in final)


@pytest.mark.native_route
def test_graph_ir_of_the_native_route(tmp_path):
    """The compiled GRAPH of a native-route network runs BatchNormExt / BatchNormGradExt (ours, through the op
    plugin), with no Custom op and none of MindSpore's legacy BatchNorm / BatchNormGrad."""
    lines = [line for t in _executed_ir(tmp_path, "native") for line in t.splitlines()]
    assert sum("BatchNormExt(" in line for line in lines) >= 2
    assert sum("BatchNormGradExt(" in line for line in lines) >= 2
    assert not any("= Custom(" in line or "BatchNormGrad(" in line for line in lines)


def test_amp_o2_keeps_batchnorm_float32_and_matches(ms_mode):
    """auto_mixed_precision O2 (float16 convs, BatchNorm kept in float32 by isinstance): same gradients."""
    x = ms.Tensor(np.random.RandomState(0).randn(4, 3, 6, 6).astype(np.float32))
    res = []
    for convert in (False, True):
        ms.set_seed(0)
        net = nn.SequentialCell([nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 2, 3)])
        if convert:
            mbg.convert_batchnorm(net)
        net = ms.amp.auto_mixed_precision(net, "O2")
        net.set_train()
        dx, dw = ms.grad(net, 0, net.trainable_params())(x)
        res.append([dx.asnumpy()] + [g.asnumpy() for g in dw])
    for u, v in zip(res[1], res[0]):
        assert u.dtype == v.dtype
        scale = max(float(np.abs(v).max()), 1e-3)
        np.testing.assert_allclose(u.astype(np.float32), v.astype(np.float32), rtol=1e-2, atol=2e-3 * scale)


@pytest.mark.parametrize("use_batch_statistics", [None, False])
def test_nhwc_eval_matches_nchw(ms_mode, use_batch_statistics):
    """Eval / running-statistics path in NHWC: output and gradients equal the built-in NCHW ones."""
    rs = np.random.RandomState(8)
    x = (rs.randn(3, 4, 5, 2) * 2 + 1).astype(np.float32)   # NHWC
    w = rs.randn(3, 4, 5, 2).astype(np.float32)
    init = dict(moving_mean_init=ms.Tensor(np.array([0.5, -1.0], np.float32)),
                moving_var_init=ms.Tensor(np.array([2.0, 0.25], np.float32)),
                gamma_init=ms.Tensor(np.array([1.5, 0.5], np.float32)),
                use_batch_statistics=use_batch_statistics)
    res = []
    for fmt in ("NHWC", "NCHW"):
        bn = mbg.nn.BatchNorm2d(2, data_format="NHWC", **init) if fmt == "NHWC" else nn.BatchNorm2d(2, **init)
        bn.set_train(use_batch_statistics is not None)  # None: eval mode; False: training, running stats
        xt, wt = (x, w) if fmt == "NHWC" else (x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2))
        out, (dx, (dg, db)) = ms.value_and_grad(WeightedSum(bn, wt), 0, bn.trainable_params())(ms.Tensor(xt))
        dx = dx.asnumpy()
        res.append([out.asnumpy(), dx.transpose(0, 3, 1, 2) if fmt == "NHWC" else dx, dg.asnumpy(),
                    db.asnumpy(), bn.moving_mean.asnumpy()])
    for u, v in zip(*res):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-5)


def test_batchnorm1d_refuses_channel_last():
    with pytest.raises(ValueError, match="BatchNorm1d"):
        mbg.nn.BatchNorm1d(4, data_format="NHWC")


def test_moving_statistics_get_zero_gradients(ms_mode):
    """Asking for every Parameter's gradient: moving stats get zeros (like MindSpore's), and still update."""
    x = ms.Tensor(np.random.RandomState(0).randn(4, 3, 2, 2).astype(np.float32) + 1)
    res = []
    for cls in (nn.BatchNorm2d, mbg.nn.BatchNorm2d):
        bn = cls(3)
        bn.set_train()
        params = list(bn.get_parameters())
        grads = ms.grad(WeightedSum(bn, np.arange(48, dtype=np.float32).reshape(4, 3, 2, 2)), None, params)(x)
        res.append({p.name: g.asnumpy() for p, g in zip(params, grads)})
        assert not np.allclose(bn.moving_mean.asnumpy(), 0.0)
    assert sorted(res[1]) == sorted(res[0]) == ["beta", "gamma", "mean", "variance"]
    for name in ("mean", "variance"):
        np.testing.assert_array_equal(res[1][name], np.zeros(3, np.float32))
    assert_close_dicts(res[1], res[0])
