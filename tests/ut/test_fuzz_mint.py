"""Property tests through MindSpore's own mint API: `mint.nn.functional.batch_norm` (BatchNormExt, and its
C++ bprop BatchNormGradExt) on our kernels, which `import mindspore_bn_grad` registers on CPU, against the
float64 references of tests/reference.py.

Random ranks 2..8 (channel axis 1, as mint has it), shapes with 1s and primes; float32 / float16 / bfloat16 /
float64 activations with float32 or matching parameters; training and inference; weight / bias and running
statistics present or absent; momentum 0..1; several eps; a large mean offset. Checked: the output, the
running statistics updated in place, and the gradients of input, weight and bias (a random upstream
gradient), each within a per-dtype tolerance of the reference's magnitude; the library's launch counter
proves our kernels ran.

Profiles: default derandomized (the same cases every run), 40 PYNATIVE cases and 6 GRAPH ones (each compiles
a graph); MS_BN_GRAD_FUZZ=long: 400 and 60 (MS_BN_GRAD_FUZZ_SEED=n: a seeded random draw instead).
"""
import os
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from reference import batch_norm_backward_ref, batch_norm_forward_ref
from _harness import assert_close_to_scale

ms = pytest.importorskip("mindspore")
from mindspore import mint, nn  # noqa: E402  pylint: disable=wrong-import-position

from mindspore_bn_grad.cpu_kernel import factory  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.skipif(not factory.status(), reason=f"mint has no kernel of ours here: "
                                f"{factory.state().reason}")

LONG = os.environ.get("MS_BN_GRAD_FUZZ", "").lower() == "long"
_COMMON = dict(deadline=None, database=None, print_blob=True,
               derandomize=not LONG or "MS_BN_GRAD_FUZZ_SEED" not in os.environ,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture])
PYNATIVE = settings(max_examples=400 if LONG else 40, **_COMMON)
GRAPH = settings(max_examples=60 if LONG else 6, **_COMMON)
MAX_ELEMS = 40_000 if LONG else 6_000
DTYPES = {"float32": ms.float32, "float16": ms.float16, "bfloat16": ms.bfloat16, "float64": ms.float64}
# max error / max |reference| per activation dtype (outputs rounded to it; computed in float32 or wider)
RTOL = {"float64": 1e-9, "float32": 2e-4, "float16": 1e-2, "bfloat16": 4e-2}


@dataclass
class Case:
    shape: tuple
    dtype: str
    param_dtype: str
    training: bool
    affine: bool
    stats: bool
    momentum: float
    eps: float
    offset: float
    seed: int


@st.composite
def cases(draw):
    rank = draw(st.integers(2, 8))
    dims = [draw(st.sampled_from([1, 2, 3, 5, 7])) for _ in range(rank)]
    dims[1] = draw(st.integers(1, 9))
    while int(np.prod(dims)) > MAX_ELEMS:
        dims[int(np.argmax(dims))] //= 2
    dtype = draw(st.sampled_from(["float32", "float32", "float16", "bfloat16", "float64"]))
    training = draw(st.booleans())
    return Case(shape=tuple(dims), dtype=dtype, param_dtype=draw(st.sampled_from(["float32", dtype])),
                training=training, affine=draw(st.booleans()),
                stats=True if not training else draw(st.booleans()),  # inference needs the running statistics
                momentum=draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]) | st.floats(0.0, 1.0)),
                eps=draw(st.sampled_from([1e-5, 1e-3, 0.5])),
                offset=draw(st.sampled_from([0.0, 0.0, 30.0])) if dtype in ("float32", "float64") else 0.0,
                seed=draw(st.integers(0, 2 ** 16)))


class Functional(nn.Cell):
    """mint.nn.functional.batch_norm on the cell's Parameters; the loss sum(y * dy) in float32 (MindSpore's
    CPU ReduceSum has no bfloat16 kernel)."""

    def __init__(self, case, w, b, rm, rv, dy):
        super().__init__()
        pdt = DTYPES[case.param_dtype]
        self.w = ms.Parameter(ms.Tensor(w).astype(pdt), name="w")
        self.b = ms.Parameter(ms.Tensor(b).astype(pdt), name="b")
        self.rm = ms.Parameter(ms.Tensor(rm).astype(pdt), name="rm", requires_grad=False)
        self.rv = ms.Parameter(ms.Tensor(rv).astype(pdt), name="rv", requires_grad=False)
        self.dy = ms.Tensor(dy)
        self.affine, self.stats, self.training_flag = case.affine, case.stats, case.training
        self.momentum, self.eps = case.momentum, case.eps

    def forward(self, x):
        return mint.nn.functional.batch_norm(x, self.rm if self.stats else None, self.rv if self.stats else None,
                                             self.w if self.affine else None, self.b if self.affine else None,
                                             self.training_flag, self.momentum, self.eps)

    def construct(self, x):
        return (self.forward(x).astype(ms.float32) * self.dy).sum()


class Forward(nn.Cell):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def construct(self, x):
        return self.net.forward(x)


def _rounded(a, dtype):
    """a as the dtype holds it, back in float64 (the reference sees what the kernel sees)."""
    return ms.Tensor(a.astype(np.float32)).astype(DTYPES[dtype]).astype(ms.float64).asnumpy() \
        if dtype != "float64" else a


def run_case(case, mode):
    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)
    rng = np.random.default_rng(case.seed)
    c = case.shape[1]
    x = _rounded(rng.standard_normal(case.shape) * rng.uniform(0.2, 3.0) + case.offset, case.dtype)
    dy = rng.standard_normal(case.shape).astype(np.float32)
    w = _rounded(rng.uniform(0.5, 1.5, c) * rng.choice([-1.0, 1.0], c), case.param_dtype)
    b = _rounded(rng.standard_normal(c), case.param_dtype)
    rm = _rounded(rng.standard_normal(c) * 0.5 + case.offset, case.param_dtype)
    rv = _rounded(rng.uniform(0.5, 2.0, c), case.param_dtype)
    net = Functional(case, w, b, rm, rv, dy)
    tensor_x = ms.Tensor(x).astype(DTYPES[case.dtype])
    before = factory._launch_count()  # pylint: disable=protected-access

    y = Forward(net)(tensor_x).astype(ms.float64).asnumpy()
    kw = dict(weight=w if case.affine else None, bias=b if case.affine else None,
              running_mean=rm if case.stats else None, running_var=rv if case.stats else None)
    y_ref, mean, invstd, rm_ref, rv_ref = batch_norm_forward_ref(x, training=case.training, momentum=case.momentum,
                                                                 eps=case.eps, **kw)
    # float64 activations with float32 parameters: the statistics are float32's
    rtol = 1e-6 if (case.dtype, case.param_dtype) == ("float64", "float32") else RTOL[case.dtype]
    assert_close_to_scale(f"{case} output", y, y_ref, rtol)
    if case.stats:  # updated in place in training, unchanged in inference (in the parameters' dtype)
        prtol = max(RTOL[case.param_dtype], 1e-6, rtol)
        assert_close_to_scale(f"{case} running_mean", net.rm.astype(ms.float64).asnumpy(), rm_ref, prtol)
        got_rv = net.rv.astype(ms.float64).asnumpy()
        assert np.array_equal(np.isnan(got_rv), np.isnan(rv_ref)), (case, got_rv, rv_ref)
        assert_close_to_scale(f"{case} running_var", got_rv, rv_ref, prtol)
        rm_now = net.rm.astype(ms.float64).asnumpy()
        rv_now = net.rv.astype(ms.float64).asnumpy()
    else:
        rm_now = rv_now = None

    weights = [net.w, net.b] if case.affine else []
    grads = ms.grad(net, grad_position=0, weights=weights)(tensor_x)
    gx = grads[0].astype(ms.float64).asnumpy()
    if case.training and "float64" not in (case.dtype, case.param_dtype) or case.dtype != case.param_dtype:
        # the saved statistics the backward reads are float32 unless everything is float64
        mean, invstd = mean.astype(np.float32).astype(np.float64), invstd.astype(np.float32).astype(np.float64)
    use = (dict(save_mean=mean, save_invstd=invstd) if case.training
           else dict(running_mean=rm_now, running_var=rv_now))
    gx_ref, gw_ref, gb_ref = batch_norm_backward_ref(dy, x, w if case.affine else None, training=case.training,
                                                     eps=case.eps, **use)
    # The gradients cancel terms (exactly to 0 with one element per channel): the tolerance scales with
    # the terms' magnitude, not only the result's.
    axes = tuple(i for i in range(x.ndim) if i != 1)
    bshape = [1] * x.ndim
    bshape[1] = c
    inv = invstd if case.training else 1.0 / np.sqrt(rv_now + case.eps)
    centre = mean if case.training else rm_now
    w_abs = np.abs(w) if case.affine else np.ones(c)
    xhat_abs = np.abs((x - centre.reshape(bshape)) * inv.reshape(bshape))
    _close(f"{case} grad_input", gx, gx_ref, rtol, float(np.abs(dy).max() * (inv * w_abs).max()) if x.size else 0.0)
    if case.affine:
        _close(f"{case} grad_weight", grads[1][0].astype(ms.float64).asnumpy(), gw_ref, rtol,
               float(np.abs(dy * xhat_abs).sum(axis=axes).max()) if x.size else 0.0)
        _close(f"{case} grad_bias", grads[1][1].astype(ms.float64).asnumpy(), gb_ref, rtol,
               float(np.abs(dy).sum(axis=axes).max()) if x.size else 0.0)
    # the forward alone, the forward again inside the gradient, the backward: all ours
    assert factory._launch_count() >= before + 3, (case, before, factory._launch_count())  # pylint: disable=protected-access


def _close(what, got, want, rtol, terms):
    """Same shape, finite, within rtol of the larger of max|want| and the magnitude of the terms it sums."""
    assert got.shape == want.shape, (what, got.shape, want.shape)
    assert np.all(np.isfinite(got)) and np.all(np.isfinite(want)), f"{what}: non-finite output or reference"
    assert_close_to_scale(what, got, want, rtol, floor=terms)


def _maybe_seed(fn):
    return seed(int(os.environ["MS_BN_GRAD_FUZZ_SEED"]))(fn) if "MS_BN_GRAD_FUZZ_SEED" in os.environ else fn


@_maybe_seed
@PYNATIVE
@given(case=cases())
def test_mint_functional_batch_norm_pynative(case):
    run_case(case, "pynative")


@_maybe_seed
@GRAPH
@given(case=cases())
def test_mint_functional_batch_norm_graph(case):
    run_case(case, "graph")
