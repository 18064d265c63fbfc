"""convert_batchnorm on mint.nn.BatchNorm1d/2d/3d (nn/_mint.py).

A converted mint cell keeps its object, Parameters and names, and runs mint's construct on
``bn_train`` / ``bn_infer``: on the default route MindSpore's own ops.BatchNorm primitives on our
kernels (so second order works, which MindSpore's BatchNormGradExt bprop cannot do on CPU), with
``route="cell"`` our cells with a bprop. Cells ops.BatchNorm cannot express keep BatchNormExt,
which runs our kernels too. Every case runs in a fresh process and checks values against the
float64 references of tests/reference.py.
"""
import pytest

from test_factory_route import NEEDS_FACTORY, run_python

DEFAULT = {}  # MS_BN_GRAD_NATIVE_KERNELS unset: mint's kernels at import, the legacy ones at the first conversion

PRELUDE = """
import mindspore as ms
from mindspore import mint, nn
import mindspore_bn_grad as mbg
from mindspore_bn_grad.cpu_kernel import factory
from mindspore_bn_grad.nn import _mint
from _native_cases import MINT_CELL_CASES, mint_cell_train_and_eval
warnings.simplefilter("error", RuntimeWarning)
"""


def _mode(mode):
    return f"ms.set_context(mode=ms.{'GRAPH' if mode == 'graph' else 'PYNATIVE'}_MODE)\n"


@NEEDS_FACTORY
@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_converted_mint_cells_train_on_mindspores_primitives(mode):
    """Each mint BatchNorm converted on the default route: our class, MindSpore's ops.BatchNorm primitives,
    two training steps (output, gradients, running statistics, num_batches_tracked) and eval against
    float64, our legacy kernels counted; parameter names unchanged."""
    run_python(PRELUDE + _mode(mode) + """
def convert(bn):
    names = [p.name for p in bn.get_parameters()]
    assert mbg.convert_batchnorm(bn) is bn
    assert type(bn).__module__ == _mint.__name__ and _mint.is_mint_batchnorm(bn)
    assert bn.bn_route == "native" and bn.bn_native == "legacy"
    assert type(bn.bn_train).__name__ == "BatchNorm" and bn.bn_train.is_training
    assert [p.name for p in bn.get_parameters()] == names

for cls, shape in MINT_CELL_CASES:
    mint_cell_train_and_eval(cls, shape, factory.legacy_launches, convert=convert)
print("OK")
""", env_extra=DEFAULT)


@NEEDS_FACTORY
@pytest.mark.parametrize("mode", ["pynative", "graph"])
@pytest.mark.parametrize("route", ["auto", "cell"])
def test_converted_mint_cell_without_affine(mode, route):
    """mint.nn.BatchNorm2d(affine=False) on both routes: no trainable Parameters, the output and the input
    gradient of a training step against float64, then eval on the running statistics."""
    run_python(PRELUDE + _mode(mode) + f"""
from mindspore_bn_grad.nn import BatchNormTrainCell
rng = np.random.default_rng(4)
bn = mint.nn.BatchNorm2d(3, affine=False)
mbg.convert_batchnorm(bn, route={route!r})
assert bn.bn_route == ("cell" if {route!r} == "cell" else "native")
assert isinstance(bn.bn_train, BatchNormTrainCell) == ({route!r} == "cell")
assert bn.trainable_params() == []
x = rng.normal(size=(4, 3, 2, 5)).astype(np.float32)
dy = rng.normal(size=x.shape).astype(np.float32)
bn.set_train(True)
y = bn(ms.Tensor(x)).asnumpy()
y_ref, mean, invstd, rm, rv = batch_norm_forward_ref(x, None, None, np.zeros(3), np.ones(3), True, 0.1, 1e-5)
np.testing.assert_allclose(y, y_ref, rtol=2e-5, atol=2e-5)
np.testing.assert_allclose(bn.running_var.asnumpy(), rv, rtol=2e-5, atol=2e-6)
def loss(t):
    return (bn(t) * ms.Tensor(dy)).sum()
gx = ms.grad(loss)(ms.Tensor(x)).asnumpy()
want = batch_norm_backward_ref(dy, x, np.ones(3), save_mean=mean, save_invstd=invstd)[0]
np.testing.assert_allclose(gx, want, rtol=5e-5, atol=5e-5)
_, _, _, rm, rv = batch_norm_forward_ref(x, None, None, rm, rv, True, 0.1, 1e-5)  # the grad's forward
bn.set_train(False)
np.testing.assert_allclose(bn(ms.Tensor(x)).asnumpy(), batch_norm_forward_ref(x, None, None, rm, rv, False)[0],
                           rtol=2e-5, atol=2e-5)
print("OK")
""", env_extra=DEFAULT)


@NEEDS_FACTORY
@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_second_order_through_a_converted_mint_cell(mode):
    """A gradient penalty through Conv-mint.nn.BatchNorm2d, converted (default route): equal to the same
    network with nn.BatchNorm2d converted (test_legacy_kernels checks that one against central
    differences) and to float64 central differences of the penalty at a few points."""
    run_python(PRELUDE + _mode(mode) + """
rng = np.random.default_rng(5)
x = rng.standard_normal((4, 2, 3, 3))
w = rng.standard_normal((2, 2, 1, 1)).astype(np.float32)
g = (rng.standard_normal(2) + 1.5).astype(np.float32)

class Net(nn.Cell):
    def __init__(self, bn):
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 1, weight_init=ms.Tensor(w), has_bias=False)
        self.bn = bn

    def construct(self, t):
        return (self.bn(self.conv(t)) ** 3).sum()

from _native_cases import gradient_penalty

def penalty(bn):
    return gradient_penalty(mbg.convert_batchnorm(Net(bn)), x)

m = mint.nn.BatchNorm2d(2)
m.weight.set_data(ms.Tensor(g))
before = factory.legacy_launches()
pen, got = penalty(m)
assert pen.net.bn.bn_native == "legacy" and factory.legacy_launches() > before
_, want = penalty(nn.BatchNorm2d(2, gamma_init=ms.Tensor(g)))
np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
h = 1e-2
for i in [(0, 0, 0, 0), (1, 1, 2, 1), (3, 0, 1, 2)]:
    fd = 0.0
    for s in (1, -1):
        xp = x.copy(); xp[i] += s * h
        fd += s * float(pen(ms.Tensor(xp.astype(np.float32))).asnumpy()) / (2 * h)
    np.testing.assert_allclose(got[i], fd, rtol=2e-2, atol=2e-2, err_msg=str(i))
print("OK")
""", env_extra=DEFAULT)


@NEEDS_FACTORY
@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_mint_cells_ops_batchnorm_cannot_express_keep_batch_norm_ext(mode):
    """momentum=None (a cumulative average) and track_running_stats=False stay mint's own cells, on
    BatchNormExt, which runs our kernels on the default route: no warning, values against float64."""
    run_python(PRELUDE + _mode(mode) + """
rng = np.random.default_rng(6)
x = rng.normal(loc=1.0, size=(6, 3, 2, 2)).astype(np.float32)
for kw in ({"momentum": None}, {"track_running_stats": False}):
    bn = mint.nn.BatchNorm2d(3, **kw)
    mbg.convert_batchnorm(bn)
    assert type(bn) is mint.nn.BatchNorm2d, kw
    before = factory._launch_count()
    bn.set_train(True)
    y = bn(ms.Tensor(x)).asnumpy()
    y_ref, _, _, rm, rv = batch_norm_forward_ref(x, None, None, np.zeros(3), np.ones(3), True, 1.0, 1e-5)
    np.testing.assert_allclose(y, y_ref, rtol=2e-5, atol=2e-5)
    assert factory._launch_count() > before, kw
    if kw.get("momentum", 0.1) is None:  # the first batch's factor is 1 / 1: its own statistics
        np.testing.assert_allclose(bn.running_mean.asnumpy(), rm, rtol=2e-5, atol=2e-6)
        np.testing.assert_allclose(bn.running_var.asnumpy(), rv, rtol=2e-5, atol=2e-6)
print("OK")
""", env_extra=DEFAULT)


@NEEDS_FACTORY
@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_converted_mint_cell_under_amp(mode):
    """Conv2d-mint.nn.BatchNorm2d-ReLU converted, then auto_mixed_precision O1 / O2 / O3: a training step's
    output and running mean against float64 (float16 convolutions: a float16 tolerance). (Unconverted,
    MindSpore 2.10's O1 rewrite of a mint BatchNorm makes it normalise with the running statistics in
    training: the output is x / sqrt(1 + eps).)"""
    run_python(PRELUDE + _mode(mode) + """
rng = np.random.default_rng(7)
xn = rng.standard_normal((4, 3, 5, 5)).astype(np.float32)
for level in ("O1", "O2", "O3"):
    ms.set_seed(1)
    net = nn.SequentialCell([nn.Conv2d(3, 4, 3, weight_init="normal", pad_mode="valid"), mint.nn.BatchNorm2d(4),
                             nn.ReLU()])
    w = net[0].weight.asnumpy().astype(np.float64)
    mbg.convert_batchnorm(net)
    bn = net[1]
    assert type(bn).__module__ == _mint.__name__
    net = ms.amp.auto_mixed_precision(net, level)
    net.set_train(True)
    y = net(ms.Tensor(xn)).astype(ms.float32).asnumpy()
    conv = sum(np.einsum("nchw,oc->nohw", xn[:, :, i:i + 3, j:j + 3].astype(np.float64), w[:, :, i, j])
               for i in range(3) for j in range(3))
    mean = conv.mean(axis=(0, 2, 3), keepdims=True)
    ref = np.maximum((conv - mean) / np.sqrt(conv.var(axis=(0, 2, 3), keepdims=True) + 1e-5), 0)
    np.testing.assert_allclose(y, ref, rtol=5e-3, atol=5e-3, err_msg=level)
    np.testing.assert_allclose(bn.running_mean.asnumpy(), 0.1 * mean.ravel(), rtol=5e-3, atol=1e-4, err_msg=level)
print("OK")
""", env_extra=DEFAULT)


@NEEDS_FACTORY
@pytest.mark.parametrize("route", ["auto", "cell"])
def test_converted_mint_cell_counts_batches_in_place(route):
    """PYNATIVE: mint's own construct counts a training batch with `num_batches_tracked += 1`, a new
    tensor that MindSpore then sets the Parameter to (Parameter.set_data: about 1 ms per layer and
    step). A converted cell adds to the Parameter in place: no set_data, the same object, the same
    count, and the same running statistics as float64."""
    run_python(PRELUDE + _mode("pynative") + f"""
from reference import batch_norm_forward_ref
set_data = ms.Parameter.set_data
calls = []
def spy(self, *args, **kwargs):
    calls.append(self.name)
    return set_data(self, *args, **kwargs)
ms.Parameter.set_data = spy
rng = np.random.default_rng(8)
x = rng.normal(size=(4, 3, 5, 5)).astype(np.float32)
plain = mint.nn.BatchNorm2d(3)
plain.set_train(True)
plain(ms.Tensor(x))
assert calls == ["num_batches_tracked"], calls  # what mint's construct does (the case this avoids)
calls.clear()
bn = mbg.convert_batchnorm(mint.nn.BatchNorm2d(3, momentum=0.2), route={route!r})
bn.set_train(True)
counter = bn.num_batches_tracked
rm, rv = np.zeros(3), np.ones(3)
for step in range(3):
    bn(ms.Tensor(x * (step + 1)))
    _, _, _, rm, rv = batch_norm_forward_ref(x * (step + 1), running_mean=rm, running_var=rv, training=True,
                                             momentum=0.2)
assert calls == [], calls
assert bn.num_batches_tracked is counter and int(counter.asnumpy()) == 3
np.testing.assert_allclose(bn.running_mean.asnumpy(), rm, rtol=1e-5, atol=1e-6)
np.testing.assert_allclose(bn.running_var.asnumpy(), rv, rtol=1e-5, atol=1e-6)
print("OK")
""", env_extra=DEFAULT)
