"""Double backward (second-order gradients through BatchNorm), spec section 7.

1. The float64 reference batch_norm_double_backward_ref against finite
   differences of the composed function (forward statistics + backward).
2. The fused CPU kernel (called directly) against the reference: every dtype,
   both layouts, every output mask, training and inference, empty tensors,
   1 and 2 threads bitwise equal, bad calls rejected.
3. BatchNormBackward differentiated by MindSpore (GRAPH and PYNATIVE), and the
   composed route used on Ascend (run here on CPU), against the reference.
4. Gradient penalties through converted networks against MindSpore's own
   BatchNorm2d and against float64 finite differences; SyncBatchNorm in
   training raises a clear error.
"""
import itertools

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn, ops

import mindspore_bn_grad as mbg
from _harness import (NAMES, assert_close_at_scale, bf16_bits_to_f64, builtin_kernels, copy_parameter_values, encode,
                      make_arrays, ms_tensor, quantize)
from mindspore_bn_grad import double_backward
from mindspore_bn_grad.cpu_kernel import native
from reference import batch_norm_backward_ref, batch_norm_double_backward_ref

UP = ("grad_grad_input", "grad_grad_weight", "grad_grad_bias")
ALL_MASKS = list(itertools.product([True, False], repeat=3))
MODES = {"pynative": ms.PYNATIVE_MODE, "graph": ms.GRAPH_MODE}


def channel_axes(ndim, data_format):
    axis = ndim - 1 if data_format in ("NHWC", "NDHWC") else 1
    return axis, tuple(i for i in range(ndim) if i != axis)


def make_case(shape, data_format="NCHW", seed=0, weight=True):
    """BatchNormBackward inputs (saved statistics of the data itself) plus upstream gradients."""
    arrays = make_arrays(shape, data_format, seed=seed, weight=weight)
    rng = np.random.default_rng(seed + 100)
    c = shape[channel_axes(len(shape), data_format)[0]]
    arrays["grad_grad_input"] = rng.standard_normal(shape)
    arrays["grad_grad_weight"] = rng.standard_normal(c)
    arrays["grad_grad_bias"] = rng.standard_normal(c)
    return arrays


def reference(q, **attrs):
    return batch_norm_double_backward_ref(*(q.get(n) for n in NAMES + UP), **attrs)


def test_reference_ignores_masked_upstream():
    arrays = make_case((3, 2, 4), seed=3)
    clean = reference(arrays, output_mask=(True, False, True))
    arrays["grad_grad_weight"] = np.full(2, np.nan)
    for a, b in zip(clean, reference(arrays, output_mask=(True, False, True))):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------ 1. the reference vs finite differences

def _composed_loss(arrays, training, eps, output_mask, data_format):
    """L(grad_out, input, weight) = sum(ggI*gI) + ggW.gW + ggB.gB with the forward statistics of input."""
    _, axes = channel_axes(arrays["input"].ndim, data_format)
    up = [arrays[n] for n in UP]

    def loss(dy, x, w):
        saved = dict(save_mean=x.mean(axis=axes), save_invstd=1.0 / np.sqrt(x.var(axis=axes) + eps))
        outs = batch_norm_backward_ref(dy, x, w, arrays["running_mean"], arrays["running_var"], **saved,
                                       training=training, eps=eps, output_mask=output_mask,
                                       data_format=data_format)
        return sum((u * o).sum() for u, o in zip(up, outs))

    return loss


def _numeric_grad(f, a, h=1e-6):
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        ap, am = a.copy(), a.copy()
        ap[i] += h
        am[i] -= h
        g[i] = (f(ap) - f(am)) / (2 * h)
    return g


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("data_format,shape", [("NCHW", (3, 2, 4)), ("NHWC", (2, 3, 3)), ("NCHW", (5, 3))])
@pytest.mark.parametrize("term", ["ggI", "ggW", "ggB", "all"])
def test_reference_matches_finite_differences(training, data_format, shape, term):
    """Each upstream term alone (and all together): d/d grad_out, d/d input, d/d weight."""
    eps = 1e-2  # large, so that an eps mistake (mean(xhat^2) taken as 1) would show
    arrays = make_case(shape, data_format, seed=7)
    keep = {"ggI": "grad_grad_input", "ggW": "grad_grad_weight", "ggB": "grad_grad_bias"}
    for k, n in keep.items():
        if term not in (k, "all"):
            arrays[n] = np.zeros_like(arrays[n])
    _, axes = channel_axes(len(shape), data_format)
    x = arrays["input"]
    arrays["save_mean"], arrays["save_invstd"] = x.mean(axis=axes), 1.0 / np.sqrt(x.var(axis=axes) + eps)
    loss = _composed_loss(arrays, training, eps, (True, True, True), data_format)
    dy, w = arrays["grad_out"], arrays["weight"]
    numeric = (_numeric_grad(lambda a: loss(a, x, w), dy), _numeric_grad(lambda a: loss(dy, a, w), x),
               _numeric_grad(lambda a: loss(dy, x, a), w))
    analytic = reference(arrays, training=training, eps=eps, data_format=data_format)
    for name, a, n in zip(("grad_grad_out", "grad_input", "grad_weight"), analytic, numeric):
        np.testing.assert_allclose(a, n, rtol=1e-6, atol=1e-7 * max(1.0, np.abs(n).max()), err_msg=name)


@pytest.mark.parametrize("mask", ALL_MASKS)
def test_reference_masked_outputs_contribute_nothing(mask):
    """A masked first-backward output is zero whatever its upstream gradient says."""
    arrays = make_case((4, 3, 5), seed=2)
    eps = 1e-5
    loss = _composed_loss(arrays, True, eps, mask, "NCHW")
    x, dy, w = arrays["input"], arrays["grad_out"], arrays["weight"]
    got = reference(arrays, training=True, eps=eps, output_mask=mask)
    numeric = _numeric_grad(lambda a: loss(a, x, w), dy)
    np.testing.assert_allclose(got[0], numeric, rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------- 2. the kernel, directly

def run_kernel(arrays, dtype="float32", param_dtype=None, data_format="NCHW", **attrs):
    """Direct kernel call; returns (outputs as float64, float64 reference on the quantized inputs, dtypes)."""
    bf16 = dtype == "bfloat16"
    pdt = param_dtype or ("float32" if bf16 else dtype)
    enc, q = {}, {}
    for n in NAMES + UP:
        full = n in ("grad_out", "input", "grad_grad_input")
        enc[n], q[n] = encode(arrays.get(n), dtype if full else pdt)
    wdt = pdt if arrays.get("weight") is not None else ("float32" if bf16 else dtype)
    outs = native.double_direct(*(enc[n] for n in NAMES + UP), channel_last=data_format in ("NHWC", "NDHWC"),
                                 bf16=bf16, weight_grad_dtype=np.dtype(wdt), **attrs)
    dec = [bf16_bits_to_f64(o) if bf16 and i < 2 else o.astype(np.float64) for i, o in enumerate(outs)]
    want = reference(q, data_format=data_format, **attrs)
    return dec, want, (dtype, dtype, wdt)


def check_kernel(arrays, dtype="float32", **kw):
    got, want, odt = run_kernel(arrays, dtype, **kw)
    for name, g, w, dt in zip(("grad_grad_out", "grad_input", "grad_weight"), got, want, odt):
        assert_close_at_scale(name, g, w, dt)
    return got


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("data_format,shape", [("NCHW", (4, 3, 5, 6)), ("NHWC", (4, 5, 6, 3)),
                                               ("NCHW", (9, 4)), ("NCHW", (2, 3, 40)),
                                               ("NCHW", (2, 3, 700)), ("NHWC", (3, 2, 300))])  # > 256: blocks
@pytest.mark.parametrize("training", [True, False])
def test_kernel_every_dtype_and_layout(dtype, data_format, shape, training):
    check_kernel(make_case(shape, data_format, seed=1), dtype, data_format=data_format, training=training,
                 eps=1e-3)


@pytest.mark.parametrize("mask", ALL_MASKS)
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
def test_kernel_every_mask(mask, training, data_format):
    """A masked output's upstream gradient is ignored: NaN there changes nothing."""
    shape = (3, 4, 5, 2) if data_format == "NCHW" else (3, 5, 2, 4)
    arrays = make_case(shape, data_format, seed=4)
    for keep, name in zip(mask, UP):
        if not keep:
            arrays[name] = np.full_like(arrays[name], np.nan)
    check_kernel(arrays, data_format=data_format, training=training, output_mask=mask)


@pytest.mark.parametrize("training", [True, False])
def test_kernel_absent_and_mixed_parameters(training):
    """weight absent (1), running stats absent (0, 1), (0,) saved stats in inference, upstream absent (0)."""
    arrays = make_case((3, 4, 6), seed=5, weight=False)
    check_kernel(arrays, training=training)
    arrays = make_case((3, 4, 6), seed=5)
    for n in ("running_mean", "running_var", "grad_grad_weight"):
        arrays[n] = None
    if not training:
        arrays["save_mean"] = arrays["save_invstd"] = np.zeros(0)
    check_kernel(arrays, training=training)
    check_kernel(make_case((3, 4, 6), seed=6), "float16", param_dtype="float32", training=training)
    check_kernel(make_case((3, 4, 6), seed=6), "float32", param_dtype="float64", training=training)


@pytest.mark.parametrize("shape,data_format", [((0, 3, 4), "NCHW"), ((2, 3, 0), "NCHW"), ((0, 3), "NCHW"),
                                               ((0, 4, 3), "NHWC"), ((2, 0, 4), "NCHW")])
@pytest.mark.parametrize("training", [True, False])
def test_kernel_empty(shape, data_format, training):
    """Empty activations: empty outputs, grad_weight zero (none written for C = 0)."""
    arrays = make_case(shape, data_format)
    got = check_kernel(arrays, data_format=data_format, training=training)
    assert not np.any(got[2])


@pytest.mark.parametrize("data_format,shape", [("NCHW", (16, 8, 33, 31)), ("NHWC", (16, 33, 31, 8)),
                                               ("NHWC", (160, 8, 300))])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_kernel_threads_bitwise_equal(data_format, shape, dtype):
    """Large enough to be split over threads; 1 and 2 threads give the same bits."""
    arrays = {k: (None if v is None else v.astype(dtype)) for k, v in make_case(shape, data_format).items()}
    before = native.get_num_threads()
    try:
        runs = []
        for threads in (1, 2, 1):
            native.set_num_threads(threads)
            runs.append(native.double_direct(*(arrays[n] for n in NAMES + UP),
                                              channel_last=data_format == "NHWC"))
    finally:
        native.set_num_threads(before)
    for a, b, c in zip(*runs):
        assert a.tobytes() == b.tobytes() == c.tobytes()


def test_kernel_rejects_calls_that_do_not_fit():
    arrays = {k: (None if v is None else v.astype(np.float32)) for k, v in make_case((2, 3, 4)).items()}
    args = [arrays[n] for n in NAMES + UP]
    bad_ggi = list(args)
    bad_ggi[7] = np.zeros((2, 3, 5), np.float32)
    bad_w = list(args)
    bad_w[2] = np.zeros(4, np.float32)
    no_saved = list(args)
    no_saved[6] = None
    for call, code in ((bad_ggi, 4), (bad_w, 4), (no_saved, 5)):
        with pytest.raises(RuntimeError, match=f"BatchNormDoubleBackward: kernel returned {code}"):
            native.double_direct(*call)


# ------------------------------------- 3. BatchNormBackward differentiated by MindSpore

class _Fwd(nn.Cell):
    def __init__(self, op):
        super().__init__()
        self.op = op

    def construct(self, dy, x, w, rm, rv, sm, si):
        return self.op(dy, x, w, rm, rv, sm, si)


class _VJP(nn.Cell):
    """Gradients of every input of the op, for given output cotangents."""

    def __init__(self, op):
        super().__init__()
        self.fwd = _Fwd(op)
        self.grad = ops.GradOperation(get_all=True, sens_param=True)

    def construct(self, dy, x, w, rm, rv, sm, si, sens):
        return self.grad(self.fwd)(dy, x, w, rm, rv, sm, si, sens)


def op_vjp(mode, arrays, dtype="float32", param_dtype=None, **attrs):
    """Runs BatchNormBackward's bprop in `mode`; returns (grads as float64 arrays or None, reference, grads)."""
    pdt = param_dtype or dtype
    t = {n: ms_tensor(arrays.get(n), dtype if n in ("grad_out", "input", "grad_grad_input") else pdt)
         for n in NAMES + UP}
    q = {n: quantize(arrays.get(n), dtype if n in ("grad_out", "input", "grad_grad_input") else pdt)
         for n in NAMES + UP}
    ms.set_context(mode=MODES[mode])
    try:
        grads = _VJP(mbg.BatchNormBackward(**attrs))(*(t[n] for n in NAMES), tuple(t[n] for n in UP))
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    return grads, reference(q, **attrs)


def _f64(t):
    return t.astype(ms.float64).asnumpy()


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("data_format,shape", [("NCHW", (4, 3, 5, 5)), ("NHWC", (4, 5, 5, 3))])
def test_op_grad_both_modes(mode, training, data_format, shape):
    arrays = make_case(shape, data_format, seed=8)
    grads, want = op_vjp(mode, arrays, training=training, data_format=data_format)
    for name, g, w in zip(("grad_out", "input", "weight"), grads[:3], want):
        assert g.dtype == ms.float32, (name, g.dtype)
        assert_close_at_scale(name, _f64(g), w, "float32", compute_rtol=1e-6)
    for name, g in zip(NAMES[3:], grads[3:]):  # statistics: zero gradients
        assert g is None or not np.any(_f64(g)), name


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("dtype,param_dtype", [("float16", "float16"), ("bfloat16", "float32"),
                                               ("float64", "float64"), ("float16", "float32")])
def test_op_grad_every_dtype(mode, dtype, param_dtype):
    arrays = make_case((4, 3, 4, 4), seed=9)
    grads, want = op_vjp(mode, arrays, dtype, param_dtype, training=True)
    for name, g, w, dt in zip(("grad_out", "input", "weight"), grads[:3], want, (dtype, dtype, param_dtype)):
        assert str(g.dtype).lower() == dt, (name, g.dtype, dt)
        assert_close_at_scale(name, _f64(g), w, dt, compute_rtol=1e-6)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("mask", [(True, False, False), (False, True, True), (False, False, False)])
@pytest.mark.parametrize("training", [True, False])
def test_op_grad_masks_and_absent_weight(mode, mask, training):
    arrays = make_case((3, 4, 6), seed=10, weight=False)
    grads, want = op_vjp(mode, arrays, training=training, output_mask=mask)
    for name, g, w in zip(("grad_out", "input"), grads[:2], want):
        assert_close_at_scale(name, _f64(g), w, "float32", compute_rtol=1e-6)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
def test_composed_route_matches_reference(mode, training, data_format):
    """The route BatchNormBackward's bprop takes on Ascend (MindSpore ops), run on CPU."""
    shape = (4, 3, 5) if data_format == "NCHW" else (4, 5, 3)
    arrays = make_case(shape, data_format, seed=11)
    arrays["grad_grad_bias"][:] = np.nan  # masked out: ignored
    attrs = dict(training=training, eps=1e-5, output_mask=(True, True, False), data_format=data_format)
    fn = double_backward.composed_double_backward(attrs)

    class Call(nn.Cell):
        def construct(self, *args):
            return fn(*args)

    t = [ms_tensor(arrays.get(n), "float32") for n in NAMES + UP]
    ms.set_context(mode=MODES[mode])
    try:
        got = Call()(*t)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    want = reference({n: quantize(arrays.get(n), "float32") for n in NAMES + UP}, **attrs)
    for name, g, w in zip(("grad_grad_out", "grad_input", "grad_weight"), got, want):
        assert_close_at_scale(name, _f64(g), w, "float32", compute_rtol=2e-6)


# --------------------------------------------- 4. whole networks, second order

class ConvBnRelu(nn.Cell):
    """conv + BatchNorm2d + relu, read out by a fixed weighting (sum(y * v)).

    No Dense head: in PYNATIVE, MindSpore 2.10 returns a zero second-order gradient for a
    Dense weight (ms.grad of a function of ms.grad), with or without BatchNorm in the
    network, while GRAPH mode returns the right one.
    """

    def __init__(self, affine=True):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, has_bias=False, weight_init="he_uniform")
        self.bn = nn.BatchNorm2d(6, momentum=0.8, affine=affine)
        self.relu = nn.ReLU()
        self.v = ms.Tensor(np.random.default_rng(1).standard_normal((5, 6, 8, 8)).astype(np.float32))

    def construct(self, x):
        return (self.relu(self.bn(self.conv(x))) * self.v).sum()


def gradient_penalty(net):
    """value_and_grad of 0.5 * |d net(x) / dx|^2, w.r.t. x and every trainable Parameter."""
    grad_x = ms.grad(net, grad_position=0)

    def penalty(x):
        g = grad_x(x)
        return 0.5 * (g * g).sum()

    return ms.value_and_grad(penalty, grad_position=0, weights=net.trainable_params())


def twin(build):
    ms.set_seed(5)
    ref, ours = build(), build()
    copy_parameter_values(ref, ours)
    return ref, mbg.convert_batchnorm(ours, route="cell")  # second order: the Cell route


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_network_gradient_penalty_matches_mindspore(mode, train, affine, tmp_path, monkeypatch):
    """conv + BatchNorm2d + relu: second-order gradients equal MindSpore's built-in BatchNorm's.

    affine=False: gamma/beta take no gradient, so the first backward's output_mask is (True, False, False).
    The built-in network always runs in GRAPH mode: in PYNATIVE, MindSpore 2.10's own BatchNorm
    double backward on CPU fails now and then after earlier such steps ("BatchNormGradGrad:
    'reserve_space_2' must be no less than zero", or a segfault), without this package loaded.
    """
    monkeypatch.chdir(tmp_path)  # MindSpore may write .ir files on a GRAPH error
    ref, ours = twin(lambda: ConvBnRelu(affine))
    x = ms.Tensor(np.random.default_rng(2).standard_normal((5, 3, 8, 8)).astype(np.float32))
    try:
        results = []
        for net, net_mode in ((ref, ms.GRAPH_MODE), (ours, MODES[mode])):
            ms.set_context(mode=net_mode)
            net.set_train(train)
            with builtin_kernels(net):  # the built-in network on MindSpore's own kernels
                (loss, (gx, gparams)) = gradient_penalty(net)(x)
            results.append((loss, gx, gparams, [p.asnumpy().copy() for p in (net.bn.moving_mean,
                                                                             net.bn.moving_variance)]))
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    (l0, gx0, gp0, st0), (l1, gx1, gp1, st1) = results
    np.testing.assert_allclose(l1.asnumpy(), l0.asnumpy(), rtol=1e-5)
    np.testing.assert_allclose(gx1.asnumpy(), gx0.asnumpy(), rtol=1e-4, atol=1e-4 * np.abs(gx0.asnumpy()).max())
    names = [p.name for p in ref.trainable_params()]
    assert any(n.endswith("gamma") for n in names) == affine
    for name, a, b in zip(names, gp0, gp1):
        a, b = a.asnumpy(), b.asnumpy()  # reductions over the batch: a looser bound
        np.testing.assert_allclose(b, a, rtol=2e-4, atol=2e-4 * max(np.abs(a).max(), 1e-6), err_msg=name)
    for a, b in zip(st0, st1):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)


class BnSin(nn.Cell):
    """sum(v * sin(BatchNorm2d(x))): smooth, so finite differences of its gradient penalty are meaningful."""

    def __init__(self, c, data_format, v):
        super().__init__()
        self.bn = mbg.nn.BatchNorm2d(c, data_format=data_format, gamma_init="normal", beta_init="normal",
                                     route="cell")
        self.v = ms.Tensor(v)

    def construct(self, x):
        return (ops.sin(self.bn(x)) * self.v).sum()


def _bn_sin_penalty_f64(x, gamma, beta, v, eps, data_format):
    """float64 NumPy: P = sum((d net / dx)^2) for net = sum(v * sin(BN_train(x)))."""
    _, axes = channel_axes(x.ndim, data_format)
    axis = channel_axes(x.ndim, data_format)[0]
    bshape = [1] * x.ndim
    bshape[axis] = -1
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    invstd = 1.0 / np.sqrt(var + eps)
    y = (x - mean.reshape(bshape)) * invstd.reshape(bshape) * gamma.reshape(bshape) + beta.reshape(bshape)
    dy = v * np.cos(y)
    gi = batch_norm_backward_ref(dy, x, gamma, None, None, mean, invstd, training=True, eps=eps,
                                 data_format=data_format)[0]
    return (gi * gi).sum()


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
def test_network_gradient_penalty_matches_float64_finite_differences(mode, data_format):
    shape = (3, 2, 3, 2) if data_format == "NCHW" else (3, 3, 2, 2)
    rng = np.random.default_rng(12)
    x = rng.standard_normal(shape)
    v = rng.standard_normal(shape).astype(np.float32)
    ms.set_seed(4)
    net = BnSin(2, data_format, v)
    net.set_train(True)
    gamma, beta = net.bn.gamma.asnumpy().astype(np.float64), net.bn.beta.asnumpy().astype(np.float64)
    x32 = x.astype(np.float32)
    grad_x = ms.grad(net, grad_position=0)

    def penalty(x):
        g = grad_x(x)
        return (g * g).sum()

    ms.set_context(mode=MODES[mode])
    try:
        gx, (ggamma, gbeta) = ms.grad(penalty, grad_position=0, weights=[net.bn.gamma, net.bn.beta])(ms.Tensor(x32))
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    xq, v64, eps = x32.astype(np.float64), v.astype(np.float64), net.bn.eps
    numeric = (_numeric_grad(lambda a: _bn_sin_penalty_f64(a, gamma, beta, v64, eps, data_format), xq),
               _numeric_grad(lambda a: _bn_sin_penalty_f64(xq, a, beta, v64, eps, data_format), gamma),
               _numeric_grad(lambda a: _bn_sin_penalty_f64(xq, gamma, a, v64, eps, data_format), beta))
    for name, got, want in zip(("x", "gamma", "beta"), (gx, ggamma, gbeta), numeric):
        np.testing.assert_allclose(got.asnumpy(), want, rtol=2e-4, atol=2e-4 * np.abs(want).max(), err_msg=name)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_sync_batchnorm_training_second_order_is_a_clear_error(mode, tmp_path, monkeypatch):
    """SyncBatchNorm's backward steps are not differentiable: a clear error, not MindSpore's 'bprop not defined'."""
    monkeypatch.chdir(tmp_path)  # a GRAPH compile error writes rank_0/om/analyze_fail.ir
    from mindspore_bn_grad.nn import SyncBatchNorm

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.bn = SyncBatchNorm(3)

        def construct(self, x):
            return ops.sin(self.bn(x)).sum()

    net = Net()
    net.set_train(True)
    x = ms.Tensor(np.random.default_rng(0).standard_normal((4, 3, 2, 2)).astype(np.float32))
    grad_x = ms.grad(net)

    def penalty(x):
        g = grad_x(x)
        return (g * g).sum()

    ms.set_context(mode=MODES[mode])
    try:
        assert grad_x(x).shape == x.shape  # first order works
        with pytest.raises(RuntimeError, match="second-order gradients are not supported"):
            ms.grad(penalty)(x).asnumpy()
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("training", [True, False])
def test_builtin_batch_norm_grad_grad_agrees_with_reference(mode, training):
    """MindSpore's own BatchNormGradGrad (CPU, float32, NCHW) follows the same convention as our reference."""
    from mindspore.ops.operations import _grad_ops
    arrays = make_case((4, 3, 5, 5), seed=13)
    q = {n: quantize(arrays.get(n), "float32") for n in NAMES + UP}
    x = q["input"]
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    q["save_mean"], q["save_invstd"] = mean, 1.0 / np.sqrt(var + 1e-5)
    if not training:
        mean, var = q["running_mean"], q["running_var"]
    t = {n: ms_tensor(v, "float32") for n, v in q.items()}
    op = _grad_ops.BatchNormGradGrad(is_training=training, epsilon=1e-5)
    ms.set_context(mode=MODES[mode])
    try:
        dx, ddy, dscale = _cell_call(op, t["input"], t["grad_out"], t["weight"], ms_tensor(mean, "float32"),
                                     ms_tensor(var, "float32"), *(t[n] for n in UP))
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    want = reference(q, training=training, eps=1e-5)
    for name, g, w in zip(("grad_grad_out", "grad_input", "grad_weight"), (ddy, dx, dscale), want):
        assert_close_at_scale(name, _f64(g), w, "float32", compute_rtol=1e-5)


def _cell_call(op, *args):
    class Call(nn.Cell):
        def __init__(self):
            super().__init__()
            self.op = op

        def construct(self, *a):
            return self.op(*a)

    return Call()(*args)


def test_bench_double_runs(monkeypatch, capsys):
    """`python -m mindspore_bn_grad bench --double` on tiny shapes prints its table (no timing asserted)."""
    from mindspore_bn_grad.cli import bench
    from mindspore_bn_grad_bench import double
    monkeypatch.setattr(double, "SHAPES", [(4, 3, 5, 5)])
    monkeypatch.setattr(double, "PENALTY_SHAPE", (2, 3, 4, 4))
    before = native.get_num_threads()
    try:
        assert bench.main(["--double", "--reps", "1"]) == 0
    finally:
        native.set_num_threads(before)
        ms.set_context(mode=ms.PYNATIVE_MODE)
    out = capsys.readouterr().out
    assert "BatchNormDoubleBackward vs BatchNormGradGrad" in out and "gradient penalty" in out


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("training", [True, False])
def test_bprop_takes_the_composed_route_on_ascend(mode, training, monkeypatch):
    """With the target taken for Ascend, the bprop composes MindSpore ops instead of calling the CPU kernel."""
    monkeypatch.setattr(double_backward, "_on_ascend", lambda: True)
    monkeypatch.setattr(double_backward, "BatchNormDoubleBackward", None)  # the kernel route would fail loudly
    arrays = make_case((3, 4, 5), seed=14)
    grads, want = op_vjp(mode, arrays, training=training, output_mask=(True, False, True))
    for name, g, w in zip(("grad_out", "input", "weight"), grads[:3], want):
        assert_close_at_scale(name, _f64(g), w, "float32", compute_rtol=2e-6)


def test_primitive_rejects_bad_tensors_before_the_kernel():
    """The prototype's checks apply to BatchNormDoubleBackward as to every op of op_def/."""
    arrays = make_case((2, 3, 4), seed=15)
    t = {n: ms_tensor(arrays.get(n), "float32") for n in NAMES + UP}
    op = mbg.BatchNormDoubleBackward(training=True)
    args = [t[n] for n in NAMES + UP]
    bad_len = list(args)
    bad_len[8] = ms_tensor(np.zeros(4), "float32")
    with pytest.raises(ValueError, match="BatchNormDoubleBackward: grad_grad_weight expected length 3"):
        op(*bad_len)
    bad_dtype = list(args)
    bad_dtype[7] = ms_tensor(arrays["grad_grad_input"], "float16")
    with pytest.raises(TypeError, match="BatchNormDoubleBackward: grad_grad_input expected the dtype of grad_out"):
        op(*bad_dtype)
    no_saved = list(args)
    no_saved[5] = None
    with pytest.raises(ValueError, match="BatchNormDoubleBackward: save_mean expected"):
        op(*no_saved)
    with pytest.raises(ValueError, match="BatchNormDoubleBackward: data_format expected"):
        mbg.BatchNormDoubleBackward(data_format="NWC")


@pytest.mark.parametrize("training", [True, False])
def test_composed_route_empty_batch(training):
    arrays = make_case((0, 3, 4), seed=16)
    fn = double_backward.composed_double_backward(dict(training=training, eps=1e-5, output_mask=(True, True, True),
                                               data_format="NCHW"))
    got = fn(*(ms_tensor(arrays.get(n), "float32") for n in NAMES + UP))
    assert [tuple(g.shape) for g in got] == [(0, 3, 4), (0, 3, 4), (3,)]
    assert not np.any(got[2].asnumpy())


def test_third_order_is_a_clear_error():
    arrays = make_case((2, 3, 4), seed=17)
    t = [ms_tensor(arrays.get(n), "float32") for n in NAMES + UP]
    op = mbg.BatchNormDoubleBackward(training=True)

    def f(dy, x):
        return op(dy, x, *t[2:])[1].sum()

    with pytest.raises(RuntimeError, match="BatchNormDoubleBackward: it is not differentiable"):
        ms.grad(f, grad_position=(0, 1))(t[0], t[1])


def test_public_function_is_differentiable():
    """batch_norm_backward() (PYNATIVE) under ms.grad: the same double backward."""
    arrays = make_case((4, 3, 6), seed=18)
    t = {n: ms_tensor(arrays.get(n), "float32") for n in NAMES + UP}

    def loss(dy, x, w):
        outs = mbg.batch_norm_backward(dy, x, w, None, None, t["save_mean"], t["save_invstd"])
        return sum((o * t[u]).sum() for o, u in zip(outs, UP))

    got = ms.grad(loss, grad_position=(0, 1, 2))(t["grad_out"], t["input"], t["weight"])
    q = {n: quantize(arrays.get(n), "float32") for n in NAMES + UP}
    q["running_mean"] = q["running_var"] = None
    for name, g, w in zip(("grad_out", "input", "weight"), got, reference(q, training=True)):
        assert_close_at_scale(name, _f64(g), w, "float32", compute_rtol=2e-6)


@pytest.mark.parametrize("train", [True, False])
def test_network_with_batchnorm1d_matches_mindspore(train, tmp_path, monkeypatch):
    """The nn parity ConvNet (BatchNorm2d, BatchNorm1d on (N, C, L) and on (N, C), Dense layers), GRAPH mode.

    GRAPH only: in PYNATIVE, MindSpore gives other second-order gradients for Dense layers
    (with its own BatchNorm as with ours) and its own BatchNorm crashes now and then.
    """
    from test_nn_parity import ConvNet, twin_nets
    monkeypatch.chdir(tmp_path)
    ref, ours = twin_nets(ConvNet)
    x = ms.Tensor(np.random.default_rng(3).standard_normal((6, 3, 8, 8)).astype(np.float32))
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        results = []
        for net in (ref, ours):
            net.set_train(train)
            (_, (gx, gparams)) = gradient_penalty(net)(x)
            results.append([gx.asnumpy()] + [p.asnumpy() for p in gparams])
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    names = ["x"] + [p.name for p in ref.trainable_params()]
    scale = max(np.abs(a).max() for a in results[0])
    for name, a, b in zip(names, *results):
        np.testing.assert_allclose(b, a, rtol=2e-4, atol=2e-6 * scale, err_msg=name)
