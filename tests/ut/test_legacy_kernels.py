"""Our kernels as MindSpore's CPU BatchNorm / BatchNormGrad (the kernel-factory route, the default).

MindSpore's nn.BatchNorm* cells call its legacy ``ops.BatchNorm``, whose C++ bprop is
``BatchNormGrad`` and whose second order is MindSpore's own ``BatchNormGradGrad``. The
kernel-factory library puts our kernels in place of MindSpore's CPU kernels of the first two
(csrc/factory_kernels.cpp), each keeping MindSpore's own, which ``use_mindspore_kernels()``
runs instead. Every case runs in a fresh process (the registration lasts for the process),
compares with the float64 references of tests/reference.py and proves through the library's
launch counters which kernel ran.
"""
import pytest

from test_factory_route import NEEDS_FACTORY, ON, run_python
from mindspore_bn_grad.cpu_kernel import factory

DEFAULT = {}  # MS_BN_GRAD_NATIVE_KERNELS unset: mint's kernels at import, the legacy ones at the first conversion

CASES = """
import mindspore as ms
from mindspore import nn
from mindspore_bn_grad.cpu_kernel import factory
from reference import batch_norm_train_ref

def one_step(cls, shape, c, seed, momentum=0.9, eps=1e-5):
    '''One training step of MindSpore's own cell: output, input and weight gradients, moving
    statistics (float32 numpy), then eval: output and input gradient.'''
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    g = rng.standard_normal(c).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    bn = cls(c, eps=eps, momentum=momentum, gamma_init=ms.Tensor(g), beta_init=ms.Tensor(b))

    class Loss(nn.Cell):
        def __init__(self):
            super().__init__()
            self.bn = bn
            self.dy = ms.Tensor(dy)

        def construct(self, t):
            return (self.bn(t) * self.dy).sum()

    bn.set_train(True)
    f = ms.value_and_grad(Loss(), grad_position=0, weights=bn.trainable_params())
    _, (gx, (gg, gb)) = f(ms.Tensor(x))
    stats = getattr(bn, "bn2d", bn)  # BatchNorm3d keeps them in its BatchNorm2d
    train = [gx.asnumpy(), gg.asnumpy(), gb.asnumpy(), stats.moving_mean.asnumpy().copy(),
             stats.moving_variance.asnumpy().copy()]
    bn.set_train(False)
    y_eval = bn(ms.Tensor(x)).asnumpy()
    gx_eval = ms.grad(Loss(), grad_position=0)(ms.Tensor(x)).asnumpy()
    return x, dy, g, b, train, y_eval, gx_eval

def check(shape, train, y_eval, gx_eval, x, dy, g, b, momentum=0.9, eps=1e-5, tol=5e-5):
    _, rgx, rgg, rgb, rmm, rmv = batch_norm_train_ref(x, dy, g, b, eps=eps, momentum=momentum)
    for name, got, want in zip(["dx", "dgamma", "dbeta", "moving_mean", "moving_variance"], train,
                               [rgx, rgg, rgb, rmm, rmv]):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"{shape} {name}")
    axes = tuple(i for i in range(x.ndim) if i != 1)
    bshape = [1] * x.ndim
    bshape[1] = -1
    invstd = 1 / np.sqrt(rmv.astype(np.float64) + eps)
    y_ref = (x - rmm.reshape(bshape)) * (invstd * g).reshape(bshape) + b.reshape(bshape)
    np.testing.assert_allclose(y_eval, y_ref, rtol=tol, atol=tol, err_msg=f"{shape} eval output")
    np.testing.assert_allclose(gx_eval, dy * (invstd * g).reshape(bshape), rtol=tol, atol=tol,
                               err_msg=f"{shape} eval dx")

SHAPES = [(nn.BatchNorm2d, (4, 3, 5, 5), 3), (nn.BatchNorm1d, (8, 6), 6), (nn.BatchNorm1d, (4, 3, 7), 3),
          (nn.BatchNorm3d, (2, 3, 2, 3, 4), 3), (nn.BatchNorm2d, (16, 32, 1, 1), 32)]
"""


@NEEDS_FACTORY
@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_mindspores_own_cells_run_our_kernels(mode):
    """MindSpore's nn.BatchNorm1d/2d/3d (training step, then eval) on our kernels: gradients, moving
    statistics, eval output and gradient against float64; then the same steps on MindSpore's own kernels
    (use_mindspore_kernels) against the same reference: each counter proves which kernel ran."""
    run_python(CASES + f"""
import mindspore_bn_grad
ms.set_context(mode=ms.{'GRAPH' if mode == 'graph' else 'PYNATIVE'}_MODE)
assert factory.legacy_status(), factory.state().legacy_reason
for k, (cls, shape, c) in enumerate(SHAPES):
    ours, theirs = factory.legacy_launches(), factory.legacy_launches(mindspore=True)
    x, dy, g, b, train, y_eval, gx_eval = one_step(cls, shape, c, seed=k)
    check(shape, train, y_eval, gx_eval, x, dy, g, b)
    assert factory.legacy_launches() >= ours + 4 and factory.legacy_launches(mindspore=True) == theirs
    with factory.use_mindspore_kernels():
        got = one_step(cls, shape, c, seed=k)
    check(shape, *got[4:], *got[:4], tol=1e-4)
    assert factory.legacy_launches(mindspore=True) >= theirs + 4
print("OK")
""")


@NEEDS_FACTORY
def test_default_route_loads_at_the_first_conversion():
    """MS_BN_GRAD_NATIVE_KERNELS unset: the import registers only the mint kernels (plain MindSpore has
    none on CPU), so mint's BatchNorm trains on ours (float64) while nn.BatchNorm* still runs
    MindSpore's own kernel; the first conversion puts ours in place of MindSpore's, the converted
    cells call MindSpore's own ops.BatchNorm and train on our kernels, without a warning."""
    run_python(CASES + """
warnings.simplefilter("error")
import mindspore_bn_grad as mbg
from mindspore import mint
from reference import batch_norm_backward_ref, batch_norm_forward_ref
ms.set_context(mode=ms.PYNATIVE_MODE)
st = factory.state()
assert st.registered and not st.legacy and not st.legacy_reason and st.library, st
# mint, without a conversion: our BatchNormExt / BatchNormGradExt
rng = np.random.default_rng(4)
x = (rng.standard_normal((4, 3, 5, 5)) * 2 + 1).astype(np.float32)
dy = rng.standard_normal(x.shape).astype(np.float32)
before = factory._launch_count()
bn = mint.nn.BatchNorm2d(3)
bn.set_train(True)
y = bn(ms.Tensor(x)).asnumpy()
gx = ms.grad(lambda t: (bn(t) * ms.Tensor(dy)).sum())(ms.Tensor(x)).asnumpy()
ry, mean, invstd, _, _ = batch_norm_forward_ref(x, training=True)
np.testing.assert_allclose(y, ry, rtol=5e-5, atol=5e-5)
np.testing.assert_allclose(gx, batch_norm_backward_ref(dy, x, save_mean=mean, save_invstd=invstd)[0],
                           rtol=5e-5, atol=5e-5)
assert factory._launch_count() >= before + 3, (before, factory._launch_count())
# MindSpore's own nn.BatchNorm2d still runs MindSpore's kernel
shape = (4, 3, 5, 5)
got = one_step(nn.BatchNorm2d, shape, 3, 1)
check(shape, *got[4:], *got[:4], tol=1e-4)
assert factory.legacy_launches() == 0 and not factory.state().legacy
# the first conversion
net = nn.SequentialCell([nn.BatchNorm2d(3)])
mbg.convert_batchnorm(net)
assert factory.state().legacy
bn = net[0]
assert isinstance(bn, mbg.nn.BatchNorm2d) and bn.bn_route == "native" and bn.bn_native == "legacy"
assert type(bn.bn_train).__name__ == "BatchNorm" and bn.bn_train.is_training and not bn.bn_infer.is_training
from _native_cases import converted_layer_trains
before = factory.legacy_launches()
converted_layer_trains(net)
assert factory.legacy_launches() >= before + 2
print("OK")
""", env_extra=DEFAULT)


@NEEDS_FACTORY
@pytest.mark.parametrize("case", ["ascend_target", "op_plugin_named"])
def test_default_import_registers_nothing_off_cpu_or_beside_an_op_plugin(case, tmp_path):
    """The default's import-time registration needs device target CPU (on Ascend mint has MindSpore's
    aclnn kernels) and no op plugin named (MindSpore would prefer it): otherwise the import loads no
    library of ours, and a conversion later loads the route as before."""
    # No Ascend here: MindSpore refuses device_target='Ascend', so its answer is stood in for.
    prelude = ("import mindspore as ms\n_get = ms.get_context\n"
               "ms.get_context = lambda k, *a: 'Ascend' if k == 'device_target' else _get(k, *a)\n"
               if case == "ascend_target" else "")
    env = dict(DEFAULT)
    if case == "op_plugin_named":
        env["MS_OP_PLUGIN_PATH"] = str(tmp_path / "someone_elses_plugin.so")  # never opened: no CPU op runs
    run_python(prelude + """
import mindspore_bn_grad
from mindspore_bn_grad.cpu_kernel import factory
st = factory.state()
assert not st.registered and st.library is None and not st.reason, st
print("OK")
""", env_extra=env)


@NEEDS_FACTORY
def test_off_keeps_the_cell_route():
    """MS_BN_GRAD_NATIVE_KERNELS=off: no library is loaded, conversion takes the Cell route, no warning."""
    run_python(CASES + """
warnings.simplefilter("error")
import mindspore_bn_grad as mbg
ms.set_context(mode=ms.PYNATIVE_MODE)
net = nn.SequentialCell([nn.BatchNorm2d(3)])
mbg.convert_batchnorm(net)
assert net[0].bn_route == "cell" and factory.state().library is None
from _native_cases import converted_layer_trains
converted_layer_trains(net)
print("OK")
""", env_extra={factory.SWITCH: factory.OFF})


@NEEDS_FACTORY
@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_second_order_on_the_default_route(mode):
    """A gradient penalty through a converted Conv-BatchNorm2d on the default (native) route: MindSpore's
    bprops BatchNorm -> BatchNormGrad -> BatchNormGradGrad, all three on our kernels. Against float64
    central differences of the penalty, the Cell route (our BatchNormDoubleBackward through a Python
    bprop) and, in GRAPH mode, MindSpore's own three kernels."""
    run_python(f"""
import mindspore_bn_grad as mbg
import mindspore as ms
from mindspore import nn
from mindspore_bn_grad.cpu_kernel import factory
ms.set_context(mode=ms.{'GRAPH' if mode == 'graph' else 'PYNATIVE'}_MODE)
rng = np.random.default_rng(5)
x = rng.standard_normal((4, 2, 3, 3))
w = rng.standard_normal((2, 2, 1, 1)).astype(np.float32)
g = (rng.standard_normal(2) + 1.5).astype(np.float32)

class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 1, weight_init=ms.Tensor(w), has_bias=False)
        self.bn = nn.BatchNorm2d(2, gamma_init=ms.Tensor(g))

    def construct(self, t):
        return (self.bn(self.conv(t)) ** 3).sum()

from _native_cases import gradient_penalty

def penalty_grad(route):
    return gradient_penalty(mbg.convert_batchnorm(Net(), route=route), x)

before = factory.legacy_launches()
pen, got = penalty_grad("auto")
assert pen.net.bn.bn_native == "legacy" and factory.legacy_launches() > before
_, cell = penalty_grad("cell")
np.testing.assert_allclose(got, cell, rtol=1e-3, atol=1e-3)
if {mode == 'graph'}:  # MindSpore's own three kernels (its BatchNormGradGrad fails now and then in PYNATIVE)
    theirs = factory.legacy_launches(mindspore=True)
    with factory.use_mindspore_kernels():
        _, builtin = penalty_grad("auto")
    assert factory.legacy_launches(mindspore=True) >= theirs + 3
    np.testing.assert_allclose(got, builtin, rtol=1e-3, atol=1e-3)
# central differences of the penalty (float32 network, so a coarse step and tolerance)
h, fd = 1e-2, np.zeros_like(x)
for i in [(0, 0, 0, 0), (1, 1, 2, 1), (3, 0, 1, 2), (2, 1, 0, 0)]:
    for s in (1, -1):
        xp = x.copy(); xp[i] += s * h
        fd[i] += s * float(pen(ms.Tensor(xp.astype(np.float32))).asnumpy()) / (2 * h)
    np.testing.assert_allclose(got[i], fd[i], rtol=2e-2, atol=2e-2, err_msg=str(i))
print("OK")
""", env_extra=DEFAULT)


@NEEDS_FACTORY
def test_mindspores_kernel_refuses_what_it_cannot_run():
    """use_mindspore_kernels() around a launch MindSpore's own kernel was not written for (rank 5, which
    nn.BatchNorm3d never passes it): the launch fails, it never silently runs ours."""
    run_python("""
import mindspore_bn_grad
import mindspore as ms
from mindspore import ops
from mindspore_bn_grad.cpu_kernel import factory
ms.set_context(mode=ms.PYNATIVE_MODE)
assert factory.legacy_status(), factory.state().legacy_reason
x = ms.Tensor(np.random.default_rng(0).standard_normal((2, 3, 2, 2, 2)).astype(np.float32))
one = ms.Tensor(np.ones(3, np.float32))
mean = ms.Parameter(ms.Tensor(np.zeros(3, np.float32)), name="m")
var = ms.Parameter(ms.Tensor(np.ones(3, np.float32)), name="v")
bn = ops.BatchNorm(is_training=True)
try:
    y = bn(x, one, one * 0, mean, var)[0].asnumpy()  # ours: rank 5 is fine
except (RuntimeError, ValueError) as e:
    print("MindSpore refuses rank 5 before any kernel:", str(e).splitlines()[0])
    print("OK")
    raise SystemExit
want = batch_norm_forward_ref(x.asnumpy(), training=True)[0]
np.testing.assert_allclose(y, want, rtol=2e-5, atol=2e-5)
before = factory.legacy_launches(mindspore=True)
failed = False
try:
    with factory.use_mindspore_kernels():
        bn(x, one, one * 0, mean, var)[0].asnumpy()
except RuntimeError:
    failed = True
assert failed and factory.legacy_launches(mindspore=True) == before
print("OK")
""")


@NEEDS_FACTORY
@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_grad_grad_saved_variance_keeps_full_precision(mode):
    """MindSpore's BatchNormGradGrad (training) hands over the batch's variance; our kernel works from
    1 / sqrt(variance + eps). Rounded to float32, that invstd put its rounding into every term, which
    is all that is left where the terms cancel: two samples per channel (xhat = +-1), where the second
    derivative in x is 0 (MindSpore's own test: tests/st/ops/gpu/test_batchnorm_grad_grad_op.py, NC
    case, np.allclose against 0) gave 3.6e-7 and 2.4e-8 for dscale. Against float64 with
    variance + eps rounded as MindSpore's kernels round it (float32), float16 and float32 data,
    tight tolerances, and against MindSpore's own kernel; a random NCHW case too."""
    run_python(f"""
import mindspore_bn_grad
import mindspore as ms
from mindspore import nn
from mindspore.ops.operations._grad_ops import BatchNormGradGrad
from mindspore_bn_grad.cpu_kernel import factory
from reference import batch_norm_double_backward_ref
ms.set_context(mode=ms.{'GRAPH' if mode == 'graph' else 'PYNATIVE'}_MODE)
assert factory.legacy_status(), factory.state().legacy_reason

class Net(nn.Cell):
    def __init__(self, eps):
        super().__init__()
        self.op = BatchNormGradGrad(is_training=True, epsilon=eps, data_format="NCHW")

    def construct(self, x, dy, scale, mean, var, ddx, dds, ddb):
        return self.op(x, dy, scale, mean, var, ddx, dds, ddb)

def check(x, dy, ddx, scale, dds, ddb, eps, zero_dx):
    f32 = np.float32
    axes = tuple(i for i in range(x.ndim) if i != 1)
    mean = x.astype(np.float64).mean(axis=axes).astype(f32)
    var = x.astype(np.float64).var(axis=axes).astype(f32)
    invstd = 1 / np.sqrt((var + f32(eps)).astype(np.float64))  # var + eps in float32, as MindSpore's kernels
    r_ddy, r_dx, r_ds = batch_norm_double_backward_ref(dy, x, scale, save_mean=mean, save_invstd=invstd,
                                                       grad_grad_input=ddx, grad_grad_weight=dds,
                                                       grad_grad_bias=ddb, training=True, eps=eps)
    args = [ms.Tensor(v) for v in (x, dy, scale, mean, var, ddx, dds, ddb)]
    before = factory.legacy_launches()
    dx, ddy, ds = [o.asnumpy() for o in Net(eps)(*args)]
    assert factory.legacy_launches() == before + 1
    tol = 2e-3 if x.dtype == np.float16 else 1e-6
    scale_of = lambda r: tol * max(1.0, float(np.abs(r).max()))
    np.testing.assert_allclose(ddy, r_ddy, rtol=0, atol=scale_of(r_ddy), err_msg=str(x.dtype) + " ddy")
    np.testing.assert_allclose(dx, r_dx, rtol=0, atol=scale_of(r_dx), err_msg=str(x.dtype) + " dx")
    np.testing.assert_allclose(ds, r_ds, rtol=0, atol=scale_of(r_ds), err_msg=str(x.dtype) + " dscale")
    if zero_dx:  # what MindSpore's own test asserts (np.allclose against 0: atol 1e-8)
        assert np.abs(r_dx).max() < 1e-9 and np.abs(r_ds).max() < 1e-9
        assert np.abs(dx).max() <= 1e-8 and np.abs(ds).max() <= 1e-8, (dx, ds)
    with factory.use_mindspore_kernels():
        mdx, mddy, mds = [o.asnumpy() for o in Net(eps)(*args)]
    np.testing.assert_allclose(dx, mdx, rtol=0, atol=10 * scale_of(r_dx))
    np.testing.assert_allclose(ddy, mddy, rtol=0, atol=10 * scale_of(r_ddy))

for t in (np.float16, np.float32):
    check(np.array([[1., 6.], [2., 11.]], t), np.array([[1., 3.], [1., 5.]], t), np.array([[10., 5.], [1., 3.]], t),
          np.array([5., 10.], np.float32), np.array([10., 20.], np.float32), np.array([10., 15.], np.float32),
          eps=1e-10, zero_dx=True)
    rng = np.random.default_rng(3)
    x, dy, ddx = [rng.standard_normal((3, 4, 2, 5)).astype(t) for _ in range(3)]
    check(x * 3 + 1, dy, ddx, *[rng.standard_normal(4).astype(np.float32) for _ in range(3)], eps=1e-5,
          zero_dx=False)
print("OK")
""")


@NEEDS_FACTORY
def test_op_plugin_too_late_still_takes_the_native_route():
    """MS_BN_GRAD_OP_PLUGIN=1 after a CPU kernel ran (too late for the op plugin, test_op_plugin.py):
    converted nn cells take the kernel-factory route, which can be loaded late: our kernels, float64."""
    run_python(CASES + """
(ms.Tensor(np.ones(3, np.float32)) + ms.Tensor(np.ones(3, np.float32))).asnumpy()  # a CPU kernel first
import mindspore_bn_grad as mbg
net = mbg.convert_batchnorm(nn.SequentialCell([nn.BatchNorm2d(3)]))
assert net[0].bn_route == "native" and net[0].bn_native == "legacy"
from _native_cases import converted_layer_trains
before = factory.legacy_launches()
converted_layer_trains(net)
assert factory.legacy_launches() >= before + 2
print("OK")
""", env_extra={"MS_BN_GRAD_OP_PLUGIN": "1"})


@NEEDS_FACTORY
def test_bench_nn_route_step_contestants_compute_what_they_time():
    """bench/kernel.py's nn-route GRAPH step contestants: on our kernels and on MindSpore's, the forward's
    output and the step's three gradients against float64, the launch counters saying whose kernels ran."""
    run_python("""
import mindspore as ms
from mindspore_bn_grad.cpu_kernel import factory
from mindspore_bn_grad_bench import kernel as bench
case = bench.Case((4, 3, 5, 5))
con = bench.nn_route_step_contestants(case)
assert sorted(con) == sorted(f"legacy_step_{p}_{k}" for p in ("fwd_bwd", "fwd") for k in ("ours", "mindspore"))
x, dy, p = case.arrays()
bias = p["save_mean"]
y_ref, mean, invstd, _, _ = batch_norm_forward_ref(x, p["weight"], bias, training=True, eps=1e-5)
want = batch_norm_backward_ref(dy, x, p["weight"], training=True, eps=1e-5, save_mean=mean, save_invstd=invstd)
for kernels in ("ours", "mindspore"):
    counts = factory.legacy_launches(), factory.legacy_launches(mindspore=True)
    fwd, step = con[f"legacy_step_fwd_{kernels}"], con[f"legacy_step_fwd_bwd_{kernels}"]
    fwd.prepare()
    np.testing.assert_allclose(fwd.fn().asnumpy(), y_ref, rtol=5e-5, atol=5e-5)
    step.prepare()
    for got, ref, name in zip(step.fn(), want, ("dx", "dweight", "dbias")):
        np.testing.assert_allclose(got.asnumpy(), ref, rtol=1e-4, atol=1e-4, err_msg=f"{kernels} {name}")
    bench.select_kernels("ours")
    moved = factory.legacy_launches() - counts[0], factory.legacy_launches(mindspore=True) - counts[1]
    assert (moved[0] >= 3 and moved[1] == 0) if kernels == "ours" else (moved[0] == 0 and moved[1] >= 3), moved
print("OK")
""", env_extra=DEFAULT)
