"""Cases of the native route that every mechanism must pass (the op plugin, tests/ut/test_op_plugin.py;
the kernel factory, tests/ut/test_factory_route.py, which runs them in fresh processes): MindSpore's
mint BatchNorms and functional batch_norm against the float64 references, with the mechanism's launch
counter (`launches`, a function) proving our kernels ran. GRAPH mode parses these functions' source, so
they live in a file."""
import numpy as np
import mindspore as ms
from mindspore import mint, nn

from reference import batch_norm_backward_ref, batch_norm_forward_ref


class FunctionalNet(nn.Cell):
    """mint.nn.functional.batch_norm on the cell's own Parameters (optionally absent)."""

    def __init__(self, c, training, affine=True, stats=True, momentum=0.1, eps=1e-5, seed=0):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.training_flag, self.momentum, self.eps = training, momentum, eps
        self.affine, self.stats = affine, stats
        self.w = ms.Parameter(ms.Tensor(rng.uniform(0.5, 1.5, c).astype(np.float32)), name="w")
        self.b = ms.Parameter(ms.Tensor(rng.normal(size=c).astype(np.float32)), name="b")
        self.rm = ms.Parameter(ms.Tensor(rng.normal(size=c).astype(np.float32)), name="rm", requires_grad=False)
        self.rv = ms.Parameter(ms.Tensor(rng.uniform(0.5, 2, c).astype(np.float32)), name="rv",
                               requires_grad=False)

    def construct(self, x):
        w = self.w if self.affine else None
        b = self.b if self.affine else None
        rm = self.rm if self.stats else None
        rv = self.rv if self.stats else None
        return mint.nn.functional.batch_norm(x, rm, rv, w, b, self.training_flag, self.momentum, self.eps)


def functional_forward_backward_and_running_stats(training, shape, launches):
    """mint.nn.functional.batch_norm with weights and running statistics: output, running statistics,
    gradients of input, weight and bias."""
    rng = np.random.default_rng(1)
    c = shape[1]
    x = rng.normal(size=shape).astype(np.float32)
    dy = rng.normal(size=shape).astype(np.float32)
    net = FunctionalNet(c, training)
    w, b, rm, rv = (p.asnumpy().copy() for p in (net.w, net.b, net.rm, net.rv))
    before = launches()

    def loss(x):
        return (net(x) * ms.Tensor(dy)).sum()

    y = net(ms.Tensor(x)).asnumpy()
    y_ref, mean, invstd, rm_ref, rv_ref = batch_norm_forward_ref(x, w, b, rm, rv, training, 0.1, 1e-5)
    np.testing.assert_allclose(y, y_ref, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(net.rm.asnumpy(), rm_ref, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(net.rv.asnumpy(), rv_ref, rtol=2e-6, atol=2e-6)

    grads = ms.value_and_grad(loss, grad_position=0, weights=[net.w, net.b])(ms.Tensor(x))[1]
    # the statistics the backward used: the batch's in training (the running ones moved once more)
    use = dict(save_mean=mean, save_invstd=invstd) if training else dict(running_mean=rm, running_var=rv)
    gx, gw, gb = batch_norm_backward_ref(dy, x, w, training=training, eps=1e-5, **use)
    np.testing.assert_allclose(grads[0].asnumpy(), gx, rtol=5e-5, atol=5e-5)
    np.testing.assert_allclose(grads[1][0].asnumpy(), gw, rtol=5e-5, atol=5e-4)
    np.testing.assert_allclose(grads[1][1].asnumpy(), gb, rtol=5e-5, atol=5e-4)
    assert launches() >= before + 3  # forward twice (call, grad) and the backward: ours


ABSENT_CASES = [(False, True), (True, False), (False, False)]  # (affine, stats)


def functional_absent_tensors(affine, stats):
    """mint.nn.functional.batch_norm without weight/bias and/or running statistics (training)."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 4, 2, 2)).astype(np.float32)
    dy = rng.normal(size=x.shape).astype(np.float32)
    net = FunctionalNet(4, True, affine=affine, stats=stats)
    w = net.w.asnumpy() if affine else None
    b = net.b.asnumpy() if affine else None
    y_ref, mean, invstd, _, _ = batch_norm_forward_ref(x, w, b, training=True)
    np.testing.assert_allclose(net(ms.Tensor(x)).asnumpy(), y_ref, rtol=2e-5, atol=2e-5)

    def loss(t):
        return (net(t) * ms.Tensor(dy)).sum()

    gx = ms.grad(loss)(ms.Tensor(x)).asnumpy()
    gx_ref = batch_norm_backward_ref(dy, x, w, save_mean=mean, save_invstd=invstd, training=True)[0]
    np.testing.assert_allclose(gx, gx_ref, rtol=5e-5, atol=5e-5)


MINT_CELL_CASES = [(mint.nn.BatchNorm1d, (8, 4)), (mint.nn.BatchNorm1d, (4, 4, 6)),
                   (mint.nn.BatchNorm2d, (4, 4, 3, 3)), (mint.nn.BatchNorm3d, (2, 4, 2, 3, 2))]


def mint_cell_train_and_eval(cls, shape, launches, convert=None):
    """A mint.nn.BatchNorm*: two training steps (running statistics, num_batches_tracked), then eval,
    against float64. convert: applied to the new cell first (e.g. convert_batchnorm)."""
    rng = np.random.default_rng(3)
    bn = cls(shape[1], momentum=0.2)
    if convert is not None:
        convert(bn)
    rm, rv = np.zeros(shape[1]), np.ones(shape[1])
    for step in range(2):
        x = rng.normal(loc=step, size=shape).astype(np.float32)
        dy = rng.normal(size=shape).astype(np.float32)
        bn.set_train(True)
        before = launches()
        y = bn(ms.Tensor(x)).asnumpy()
        y_ref, mean, invstd, rm, rv = batch_norm_forward_ref(x, None, None, rm, rv, True, 0.2, 1e-5)
        np.testing.assert_allclose(y, y_ref, rtol=2e-5, atol=2e-5)
        gx, gw, gb = batch_norm_backward_ref(dy, x, np.ones(shape[1]), save_mean=mean, save_invstd=invstd)

        def loss(t):
            return (bn(t) * ms.Tensor(dy)).sum()

        grads = ms.value_and_grad(loss, grad_position=0, weights=bn.trainable_params())(ms.Tensor(x))[1]
        np.testing.assert_allclose(grads[0].asnumpy(), gx, rtol=5e-5, atol=5e-5)
        np.testing.assert_allclose(grads[1][0].asnumpy(), gw, rtol=5e-5, atol=5e-4)
        np.testing.assert_allclose(grads[1][1].asnumpy(), gb, rtol=5e-5, atol=5e-4)
        # the grad call ran the forward once more: the running statistics moved twice this step
        _, _, _, rm, rv = batch_norm_forward_ref(x, None, None, rm, rv, True, 0.2, 1e-5)
        np.testing.assert_allclose(bn.running_mean.asnumpy(), rm, rtol=2e-5, atol=2e-6)
        np.testing.assert_allclose(bn.running_var.asnumpy(), rv, rtol=2e-5, atol=2e-6)
        assert launches() >= before + 3, (before, launches())  # two forwards and the backward: ours
        assert int(bn.num_batches_tracked.asnumpy()) == 2 * (step + 1)  # each training forward counts
    bn.set_train(False)
    x = rng.normal(size=shape).astype(np.float32)
    y_ref = batch_norm_forward_ref(x, None, None, rm, rv, False)[0]
    np.testing.assert_allclose(bn(ms.Tensor(x)).asnumpy(), y_ref, rtol=2e-5, atol=2e-5)


def converted_layer_trains(net):
    """A converted nn.BatchNorm2d(3) (identity affine) trains: its input gradient is the float64 reference's."""
    rng = np.random.default_rng(8)
    x = rng.normal(size=(4, 3, 2, 2)).astype(np.float32)
    dy = rng.normal(size=x.shape).astype(np.float32)
    net.set_train()
    gx = ms.grad(lambda t: (net(t) * ms.Tensor(dy)).sum())(ms.Tensor(x)).asnumpy()
    _, mean, invstd, _, _ = batch_norm_forward_ref(x, training=True)
    want = batch_norm_backward_ref(dy, x, np.ones(3), save_mean=mean, save_invstd=invstd)[0]
    np.testing.assert_allclose(gx, want, rtol=5e-5, atol=5e-5)


def gradient_penalty(net, x):
    """(the cell 0.5 * |d net(t) / d t|^2, its gradient at x as float64) for a network in training: a
    second-order gradient through the network's BatchNorms."""
    net.set_train()
    grad_x = ms.grad(net, grad_position=0)

    class Penalty(nn.Cell):
        def __init__(self):
            super().__init__()
            self.net = net

        def construct(self, t):
            d = grad_x(t)
            return 0.5 * (d * d).sum()

    pen = Penalty()
    return pen, ms.grad(pen, grad_position=0)(ms.Tensor(x.astype(np.float32))).asnumpy().astype(np.float64)
