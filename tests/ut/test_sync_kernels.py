"""BatchNormReduceBackward / BatchNormElemtBackward (the SyncBatchNorm steps) vs float64 NumPy.

Kernel-level through the direct ctypes entries; then through MindSpore
(ops.Custom, both modes, every dtype) and the infer-time rejections. The
oracle is tests/reference.py (sync_reduce_ref / sync_elemt_ref), written from the
aclnnBatchNorm{Reduce,Elemt}Backward formulas.
"""
import numpy as np
import pytest

from _harness import bf16_bits_to_f64, to_bf16_bits
from reference import sync_elemt_ref, sync_reduce_ref
from mindspore_bn_grad.cpu_kernel import native
from mindspore_bn_grad import sync_backward as so
from mindspore_bn_grad.cpu_kernel import native


def layout(channel_last):
    return "NHWC" if channel_last else "NCHW"


def make(shape, channel_last, seed=0):
    rng = np.random.default_rng(seed)
    c = shape[-1] if channel_last else shape[1]
    x = rng.standard_normal(shape) * 2 + 1
    dy = rng.standard_normal(shape)
    mean = rng.standard_normal(c) * 0.1 + 1
    invstd = rng.uniform(0.4, 0.6, c)
    weight = rng.uniform(0.5, 1.5, c)
    return dy, x, mean, invstd, weight


def scale(a):
    return 1.0 + np.abs(a)


SHAPES = [((4, 3), False), ((3, 5, 7), False), ((2, 4, 3, 5), False), ((2, 3, 2, 2, 3), False),
          ((2, 3, 4, 5), True), ((3, 2, 2, 2, 4), True), ((0, 3, 2, 2), False), ((2, 3, 0, 4), False)]


@pytest.mark.parametrize("shape,cl", SHAPES)
@pytest.mark.parametrize("dt,tol", [(np.float64, 1e-12), (np.float32, 1e-5), (np.float16, 2e-3)])
def test_direct_values(shape, cl, dt, tol):
    dy, x, mean, invstd, w = make(shape, cl)
    dy, x = dy.astype(dt), x.astype(dt)
    out = native.reduce_direct(dy, x, mean.astype(dt), invstd.astype(dt), w.astype(dt), channel_last=cl)
    want = sync_reduce_ref(dy, x, mean.astype(dt), invstd.astype(dt), layout(cl))
    n = max(1, dy.size // (shape[-1] if cl else shape[1]))
    for got, exp in zip(out, want):
        assert got.dtype == dt
        assert np.all(np.abs(got - exp) <= tol * n ** 0.5 * scale(exp) * 4), (got, exp)
    count = np.array([n, 7], np.int32)
    gi = native.elemt_direct(dy, x, mean.astype(dt), invstd.astype(dt), w.astype(dt), want[0].astype(dt),
                         want[1].astype(dt), count, channel_last=cl)
    exp = sync_elemt_ref(dy, x, mean.astype(dt), invstd.astype(dt), w.astype(dt), want[0].astype(dt),
                         want[1].astype(dt), count, layout(cl))
    assert gi.dtype == dt and gi.shape == dy.shape
    assert np.all(np.abs(gi - exp) <= tol * 4 * scale(exp))


@pytest.mark.parametrize("cl", [False, True])
def test_direct_bfloat16(cl):
    dy, x, mean, invstd, w = make((3, 4, 5, 6) if not cl else (3, 5, 6, 4), cl)
    bdy, bx = to_bf16_bits(dy), to_bf16_bits(x)
    qdy, qx = bf16_bits_to_f64(bdy), bf16_bits_to_f64(bx)
    m32, i32, w32 = mean.astype(np.float32), invstd.astype(np.float32), w.astype(np.float32)
    out = native.reduce_direct(bdy, bx, m32, i32, w32, channel_last=cl, bf16=True)
    want = sync_reduce_ref(qdy, qx, m32, i32, layout(cl))
    for got, exp in zip(out, want):
        np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-4)
    count = np.array([90.0], np.float32)
    gi = native.elemt_direct(bdy, bx, m32, i32, w32, want[0].astype(np.float32), want[1].astype(np.float32), count,
                         channel_last=cl, bf16=True)
    exp = sync_elemt_ref(qdy, qx, m32, i32, w32, want[0].astype(np.float32), want[1].astype(np.float32), count,
                         layout(cl))
    assert np.all(np.abs(bf16_bits_to_f64(gi) - exp) <= 2.0 ** -8 * scale(exp))


@pytest.mark.parametrize("flags", [(True, False, False), (False, True, False), (False, False, True),
                                   (False, False, False)])
def test_direct_flags_zero_fill(flags):
    dy, x, mean, invstd, w = make((2, 3, 4), False)
    out = native.reduce_direct(dy, x, mean, invstd, w, input_g=flags[0], weight_g=flags[1], bias_g=flags[2])
    want = sync_reduce_ref(dy, x, mean, invstd)
    on = [flags[0], flags[0], flags[1], flags[2]]
    for got, exp, keep in zip(out, want, on):
        np.testing.assert_allclose(got, exp if keep else np.zeros_like(exp), rtol=1e-12, atol=1e-12)


def test_direct_without_weight_and_float_counter():
    dy, x, mean, invstd, _ = make((4, 3, 5), False)
    out = native.reduce_direct(dy, x, mean, invstd, None)
    want = sync_reduce_ref(dy, x, mean, invstd)
    np.testing.assert_allclose(out[2], want[2], rtol=1e-12)
    count = np.array([20.0, 13.0, 0.0])
    gi = native.elemt_direct(dy, x, mean, invstd, None, want[0], want[1], count)
    np.testing.assert_allclose(gi, sync_elemt_ref(dy, x, mean, invstd, None, want[0], want[1], count), rtol=1e-12,
                               atol=1e-14)


@pytest.mark.parametrize("cl", [False, True])
def test_direct_deterministic_for_any_thread_count(cl):
    dy, x, mean, invstd, w = make((16, 8, 64, 40) if not cl else (16, 64, 40, 8), cl, seed=3)
    dy, x = dy.astype(np.float32), x.astype(np.float32)
    args = (dy, x, mean.astype(np.float32), invstd.astype(np.float32), w.astype(np.float32))
    before = native.get_num_threads()
    try:
        results = []
        for n in (1, 2, 3):
            native.set_num_threads(n)
            r = native.reduce_direct(*args, channel_last=cl)
            gi = native.elemt_direct(*args, r[0], r[1], np.array([dy.size // 8], np.int64), channel_last=cl)
            results.append([a.tobytes() for a in r] + [gi.tobytes()])
        assert results[0] == results[1] == results[2]
    finally:
        native.set_num_threads(before)
    want = sync_reduce_ref(*args[:4], layout(cl))
    np.testing.assert_allclose(np.frombuffer(results[0][0], np.float32), want[0], rtol=1e-5, atol=1e-2)


def test_direct_rejects_mismatched_shapes():
    dy, x, mean, invstd, w = make((2, 3, 4), False)
    with pytest.raises(RuntimeError, match="shapes do not fit"):
        native.reduce_direct(dy, x[:, :, :3], mean, invstd, w)
    with pytest.raises(RuntimeError, match="shapes do not fit"):
        native.elemt_direct(dy, x, mean[:2], invstd, w, mean, mean, np.array([8]))


# --- through MindSpore --------------------------------------------------------------------

MODES = ["pynative", "graph"]


def _run(mode, fn_name, *args, **attrs):
    import mindspore as ms
    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)
    if mode == "pynative":
        return getattr(so, fn_name)(*args, **attrs)
    prim = so.BatchNormReduceBackward(**attrs) if fn_name == "batch_norm_reduce_backward" \
        else so.BatchNormElemtBackward(**attrs)

    class Net(ms.nn.Cell):
        def __init__(self):
            super().__init__()
            self.op = prim

        def construct(self, *xs):
            return self.op(*xs)

    return Net()(*args)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype,tol", [("float32", 1e-5), ("float16", 3e-3), ("bfloat16", 2e-2),
                                       ("float64", 1e-12)])
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_mindspore_values(mode, dtype, tol, fmt):
    import mindspore as ms
    from mindspore import Tensor
    cl = fmt == "NHWC"
    dy, x, mean, invstd, w = make((3, 4, 5, 6) if not cl else (3, 5, 6, 4), cl, seed=5)
    t = lambda a: Tensor(a.astype(np.float64 if dtype == "float64" else np.float32)).astype(getattr(ms, dtype))  # noqa
    q = lambda a: t(a).astype(ms.float64).asnumpy()  # noqa: E731  (the values the tensor holds)
    pdt = "float64" if dtype == "float64" else "float32"
    p = lambda a: Tensor(a.astype(pdt))  # noqa: E731
    out = _run(mode, "batch_norm_reduce_backward", t(dy), t(x), p(mean), p(invstd), p(w), data_format=fmt)
    want = sync_reduce_ref(q(dy), q(x), mean, invstd, fmt)
    for got, exp in zip(out, want):
        assert str(got.dtype).lower() == pdt
        np.testing.assert_allclose(got.asnumpy(), exp, rtol=1e-5 if pdt == "float32" else 1e-12, atol=1e-3)
    counts = Tensor(np.array([90, 0], np.int32))
    gi = _run(mode, "batch_norm_elemt_backward", t(dy), t(x), p(mean), p(invstd), p(w), out[0], out[1], counts,
              data_format=fmt)
    assert gi.shape == dy.shape and gi.dtype == getattr(ms, dtype)
    exp = sync_elemt_ref(q(dy), q(x), mean, invstd, w, out[0].asnumpy(), out[1].asnumpy(), [90], fmt)
    got = gi.astype(ms.float64).asnumpy()
    assert np.all(np.abs(got - exp) <= tol * scale(exp)), np.max(np.abs(got - exp))


@pytest.mark.parametrize("mode", MODES)
def test_mindspore_rejections(mode):
    from mindspore import Tensor
    dy, x, mean, invstd, w = make((2, 3, 4), False)
    f = lambda a: Tensor(a.astype(np.float32))  # noqa: E731
    with pytest.raises(ValueError, match=r"BatchNormReduceBackward: mean expected length 3 .*got length 2"):
        _run(mode, "batch_norm_reduce_backward", f(dy), f(x), f(mean[:2]), f(invstd), f(w))
    with pytest.raises(TypeError, match=r"BatchNormReduceBackward: input expected the dtype of grad_out"):
        _run(mode, "batch_norm_reduce_backward", f(dy), Tensor(x), f(mean), f(invstd), f(w))
    with pytest.raises(ValueError, match=r"BatchNormElemtBackward: counter expected a 1-D tensor"):
        _run(mode, "batch_norm_elemt_backward", f(dy), f(x), f(mean), f(invstd), f(w), f(mean), f(mean),
             Tensor(np.ones((1, 2), np.int32)))
    with pytest.raises(TypeError, match=r"BatchNormElemtBackward: counter expected a float or integer dtype"):
        _run(mode, "batch_norm_elemt_backward", f(dy), f(x), f(mean), f(invstd), f(w), f(mean), f(mean),
             Tensor(np.ones(2, np.bool_)))


def test_counter_dtypes_are_the_yaml_ones_on_every_target():
    """`counter` dtypes come from op_def/batch_norm_elemt_backward.yaml, per device: the infer step
    and the Ascend registration rows agree (float16 / bfloat16 counters are rejected everywhere,
    float64 only off the CPU)."""
    from mindspore import Tensor
    from mindspore_bn_grad import support_rules, target
    from mindspore_bn_grad.spec import load_opdef
    from mindspore_bn_grad.support_rules import combinations
    counter = load_opdef("batch_norm_elemt_backward.yaml").input("counter")
    assert counter.allowed_dtypes("Ascend") == ("float32", "int32", "int64")
    assert counter.allowed_dtypes("CPU") == ("float32", "float64", "int32", "int64")
    elemt = load_opdef("batch_norm_elemt_backward.yaml")
    for soc in support_rules.targets(device="Ascend"):
        assert {c["counter"] for c in combinations(soc, elemt)} == set(counter.allowed_dtypes("Ascend"))
    dy, x, mean, invstd, w = make((2, 3, 4), False)
    f = lambda a: Tensor(a.astype(np.float32))  # noqa: E731
    args = (f(dy), f(x), f(mean), f(invstd), f(w), f(mean), f(mean))
    for dt in (np.float16, np.float64):
        cnt = Tensor(np.array([8, 0], dt))
        if dt == np.float64:  # accepted on the CPU: the counts of a float64 SyncBatchNorm
            gi = so.batch_norm_elemt_backward(*args, cnt)
            assert gi.shape == dy.shape
        else:
            with pytest.raises(TypeError, match=r"BatchNormElemtBackward: counter expected a float or integer "
                                                r"dtype \(float32, float64, int32, int64\), got float16 on cpu"):
                so.batch_norm_elemt_backward(*args, cnt)
    with target.target_soc("ascend910b"):
        with pytest.raises(TypeError, match=r"counter expected a float or integer dtype \(float32, int32, int64\), "
                                            r"got float64 on ascend910b"):
            so.batch_norm_elemt_backward(*args, Tensor(np.array([8, 0], np.float64)))


def test_attribute_checks():
    with pytest.raises(ValueError, match=r"BatchNormReduceBackward: data_format expected one of"):
        so.BatchNormReduceBackward(data_format="NWC")
    with pytest.raises(TypeError, match=r"BatchNormReduceBackward: input_g expected a bool, got 1"):
        so.BatchNormReduceBackward(input_g=1)
    with pytest.raises(TypeError, match=r"BatchNormElemtBackward: grad_out expected a mindspore.Tensor"):
        so.batch_norm_elemt_backward(np.ones((2, 3)), None, None, None, None, None, None, None)
