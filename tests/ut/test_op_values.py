"""Values of BatchNormBackward against the float64 reference, in both modes."""
import itertools

import numpy as np
import pytest

from _harness import check, make_arrays, run

ALL_MASKS = list(itertools.product([True, False], repeat=3))


def test_worked_example(mode):
    """The aclnn sample program (docs/operator.md, section 6), worked out by hand."""
    x = np.arange(8, dtype=np.float64).reshape(1, 2, 4)
    arrays = {"grad_out": x, "input": x, "weight": np.ones(2), "running_mean": np.zeros(2),
              "running_var": np.ones(2), "save_mean": np.zeros(2), "save_invstd": np.ones(2)}
    outs = check(mode, arrays, {}, training=True, eps=1e-5)
    # channel c: n = 4, sum_dy = sum(x), sum_dy_xhat = sum(x^2); gi = (4x - sum_dy - x*sum_x2) / 4
    want_gi = [[[(4 * v - 6 - v * 14) / 4 for v in range(4)],
                [(4 * v - 22 - v * 126) / 4 for v in range(4, 8)]]]
    np.testing.assert_allclose(outs[0].asnumpy(), want_gi, rtol=1e-6)
    np.testing.assert_allclose(outs[1].asnumpy(), [14.0, 126.0], rtol=1e-6)
    np.testing.assert_allclose(outs[2].asnumpy(), [6.0, 22.0], rtol=1e-6)


RANK_SHAPES = {2: (6, 5), 3: (3, 4, 7), 4: (2, 3, 5, 4), 5: (2, 3, 2, 3, 5), 6: (2, 3, 2, 1, 3, 2),
               7: (2, 2, 1, 3, 2, 1, 3), 8: (1, 3, 2, 1, 2, 1, 3, 2)}


@pytest.mark.parametrize("rank", sorted(RANK_SHAPES))
@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
@pytest.mark.parametrize("training", [True, False])
def test_every_rank_both_layouts(mode, rank, data_format, training):
    shape = RANK_SHAPES[rank]
    check(mode, make_arrays(shape, data_format, seed=rank), {}, training=training, eps=1e-3,
          data_format=data_format)


@pytest.mark.parametrize("data_format", ["NCDHW", "NDHWC"])
def test_rank5_format_names(mode, data_format):
    check(mode, make_arrays((2, 3, 2, 3, 4), data_format), {}, data_format=data_format)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
def test_every_dtype(mode, dtype, training, data_format):
    arrays = make_arrays((4, 5, 6, 7), data_format, seed=3)
    dtypes = {n: dtype for n in arrays}
    check(mode, arrays, dtypes, training=training, data_format=data_format)


@pytest.mark.parametrize("act,param", [("float16", "float32"), ("bfloat16", "float32"),
                                       ("float32", "float16"), ("float64", "float32"),
                                       ("float16", "bfloat16")])
def test_mixed_param_dtypes(mode, act, param):
    """CPU accepts any mix; grad_weight/grad_bias take weight's dtype."""
    arrays = make_arrays((3, 4, 5, 5), seed=4)
    dtypes = {n: (act if n in ("grad_out", "input") else param) for n in arrays}
    check(mode, arrays, dtypes)


def test_param_grads_follow_grad_out_without_weight(mode):
    arrays = make_arrays((3, 4, 5), weight=False)
    check(mode, arrays, {"grad_out": "float16", "input": "float16", "save_mean": "float32",
                         "save_invstd": "float32"})


@pytest.mark.parametrize("mask", ALL_MASKS)
@pytest.mark.parametrize("training", [True, False])
def test_all_masks(mode, mask, training):
    check(mode, make_arrays((3, 4, 3, 5), seed=7), {}, training=training, output_mask=mask)


@pytest.mark.parametrize("absent", [("weight",), ("running_mean",), ("running_var",),
                                    ("running_mean", "running_var", "weight")])
def test_absent_optional_inference(mode, absent):
    """Absent weight is 1, absent running mean 0 and running variance 1."""
    arrays = make_arrays((2, 3, 4), seed=8)
    for name in absent:
        arrays[name] = None
    arrays["save_mean"] = arrays["save_invstd"] = None
    check(mode, arrays, {}, training=False, eps=0.25)


def test_empty_saved_stats_in_inference(mode):
    arrays = make_arrays((2, 3, 4))
    arrays["save_mean"] = np.zeros(0)
    arrays["save_invstd"] = np.zeros(0)
    check(mode, arrays, {}, training=False)


def test_running_stats_ignored_in_training(mode):
    a = make_arrays((2, 3, 4), seed=9)
    b = dict(a, running_mean=None, running_var=None)
    ra = run(mode, a, {})
    rb = run(mode, b, {})
    for x, y in zip(ra, rb):
        np.testing.assert_array_equal(x.asnumpy(), y.asnumpy())


def test_eps_reaches_the_kernel(mode):
    """Inference uses eps; two eps values give the reference's two answers."""
    arrays = make_arrays((2, 3, 4), seed=10)
    for eps in (1e-5, 0.5, 3.0):
        check(mode, arrays, {}, training=False, eps=eps)


@pytest.mark.parametrize("shape,data_format", [
    ((0, 3, 4), "NCHW"), ((2, 3, 0), "NCHW"), ((2, 0, 4), "NCHW"), ((0, 3), "NCHW"),
    ((0, 2, 3), "NHWC"), ((2, 4, 0), "NHWC"), ((2, 0, 3, 3), "NCHW"),
])
@pytest.mark.parametrize("training", [True, False])
def test_empty_tensors(mode, shape, data_format, training):
    arrays = make_arrays(shape, data_format)
    outs = check(mode, arrays, {}, training=training, data_format=data_format)
    assert not np.any(outs[1].asnumpy()) and not np.any(outs[2].asnumpy())


@pytest.mark.parametrize("shape,data_format", [((1, 3), "NCHW"), ((1, 4, 1, 1), "NCHW"),
                                               ((1, 1, 5), "NHWC")])
def test_one_element_per_channel(mode, shape, data_format):
    check(mode, make_arrays(shape, data_format, seed=11), {}, data_format=data_format)


@pytest.mark.parametrize("shape,data_format", [
    ((2, 4099, 1), "NCHW"),        # large C, tiny spatial
    ((3, 2, 10007), "NCHW"),       # small C, long spatial (prime)
    ((4, 1, 257, 129), "NCHW"),    # one channel
    ((5003, 3), "NHWC"),           # channel-last, few channels
    ((3, 2, 2053), "NHWC"),        # channel-last, many channels
])
def test_extreme_aspect(mode, shape, data_format):
    for dtype in ("float32", "float16"):
        arrays = make_arrays(shape, data_format, seed=12)
        check(mode, arrays, {"grad_out": dtype, "input": dtype}, data_format=data_format)


def test_channel_last_equals_channel_first(mode):
    """NHWC of the transposed tensors gives the transposed NCHW result, bit for bit close."""
    a = make_arrays((2, 5, 3, 4), seed=13)
    b = dict(a, grad_out=np.moveaxis(a["grad_out"], 1, -1), input=np.moveaxis(a["input"], 1, -1))
    first = run(mode, a, {})
    last = run(mode, b, {}, data_format="NHWC")
    np.testing.assert_allclose(np.moveaxis(last[0].asnumpy(), -1, 1), first[0].asnumpy(), rtol=1e-5, atol=1e-6)
    for i in (1, 2):
        np.testing.assert_allclose(last[i].asnumpy(), first[i].asnumpy(), rtol=1e-5, atol=1e-5)
