"""Numerics: NaN / Inf propagation, float16 overflow, accuracy of long reductions, eps.

NaN and Inf
    NaN and +/-Inf in any input propagate exactly as the float64 reference
    formulas propagate them (docs/operator.md, section 1): the same elements are NaN, the
    same elements are +Inf and -Inf, the finite ones are close. Inputs are
    never sanitised, and masked outputs stay zero-filled. Checked for every
    dtype, both kernel paths (row: channel-first with long spatial runs;
    column: channel-last / short runs), training and inference, through the
    direct kernel and through MindSpore PYNATIVE.

float16 overflow (also in the README)
    Accumulation is float32 (or wider) and only the final store rounds to
    the output dtype. So a float16 result behaves like the float32
    computation rounded to float16: a magnitude at or above 65520 (half-way
    past the largest float16, 65504) becomes +/-Inf; 65504 <= |v| < 65520
    rounds down to 65504; nothing wraps or saturates silently. This applies
    to grad_input and, when the weight (and so grad_weight / grad_bias) is
    float16, to the per-channel sums, even though their float32 accumulation
    did not overflow. A float32 weight (CPU and Atlas 350) keeps
    grad_weight / grad_bias finite. bfloat16 has float32's range, so it
    overflows only where float32 would.

Long reductions
    A channel with 10^7 elements is reduced with float32 tiles combined in
    double: the sums stay within 1e-6 of sum(|terms|) of the float64 result
    (naive float32 running sums are off by several percent at this length).
"""
import zlib

import numpy as np
import pytest

from _harness import NAMES, assert_close, assert_close_to_scale, check, decode, direct_outputs, encode
from reference import batch_norm_backward_ref

DTYPES = ("float16", "bfloat16", "float32", "float64")
# (shape, data_format): the row path (inner >= 32) and the column path.
PATHS = {"row": ((3, 4, 40), "NCHW"), "col": ((5, 6, 4), "NHWC"), "nc": ((40, 3), "NCHW")}
# Finite elements next to NaN / Inf: relative to the largest finite reference value (see _harness).
FINITE_RTOL = {"float16": 2e-2, "bfloat16": 5e-2, "float32": 1e-4, "float64": 1e-9}


def assert_same_specials(name, got, want, dtype):
    """NaN positions, +Inf and -Inf positions identical; finite elements close."""
    for what, f in (("NaN", np.isnan), ("+Inf", np.isposinf), ("-Inf", np.isneginf)):
        bad = f(got) != f(want)
        assert not bad.any(), (f"{name}: {what} differs at {np.argwhere(bad)[:5].tolist()} "
                               f"(got {got[bad][:5]}, want {want[bad][:5]})")
    assert_close_to_scale(name, got, want, FINITE_RTOL[dtype])


def _base(shape, fmt, seed):
    rng = np.random.default_rng(seed)
    axis = len(shape) - 1 if fmt == "NHWC" else 1
    c = shape[axis]
    return {"grad_out": rng.standard_normal(shape), "input": rng.standard_normal(shape) + 0.3,
            "weight": rng.uniform(0.5, 1.5, c) * rng.choice([-1.0, 1.0], c),
            "running_mean": rng.standard_normal(c) * 0.1, "running_var": rng.uniform(0.5, 2.0, c),
            "save_mean": rng.standard_normal(c) * 0.1, "save_invstd": rng.uniform(0.5, 2.0, c)}, c


def _inject(arrays, where, rng):
    """Puts NaN / +Inf / -Inf into the named inputs at random positions."""
    for name, values in where.items():
        flat = arrays[name].reshape(-1)
        pos = rng.choice(flat.size, size=len(values), replace=False)
        flat[pos] = values


# What to poison, and where: activations (both) and per-channel tensors.
SPECIALS = {
    "dy_nan": {"grad_out": [np.nan]},
    "dy_inf": {"grad_out": [np.inf]},
    "dy_neg_inf": {"grad_out": [-np.inf]},
    "dy_both_inf": {"grad_out": [np.inf, -np.inf]},
    "x_nan": {"input": [np.nan]},
    "x_inf": {"input": [np.inf, -np.inf]},
    "mixed": {"grad_out": [np.nan, np.inf], "input": [-np.inf]},
    "weight_nan": {"weight": [np.nan]},
    "weight_inf": {"weight": [np.inf, -np.inf]},
    "mean_nan": {"save_mean": [np.nan], "running_mean": [np.nan]},
    "mean_inf": {"save_mean": [np.inf, -np.inf], "running_mean": [-np.inf, np.inf]},
    "var_inf": {"running_var": [np.inf]},
    "var_negative": {"running_var": [-4.0]},  # invstd NaN in inference
    "invstd_inf": {"save_invstd": [np.inf, -np.inf]},
    "invstd_nan": {"save_invstd": [np.nan]},
    "invstd_zero": {"save_invstd": [0.0]},
}

# The references are evaluated on the specials themselves (and float16 overflows on purpose):
# NumPy's "invalid value" and "overflow" RuntimeWarnings are what this file is about, so they are
# not reported.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", sorted(SPECIALS))
def test_nan_inf_propagate_like_reference(kind, dtype, path, training):
    shape, fmt = PATHS[path]
    rng = np.random.default_rng(zlib.crc32(f"{kind}/{path}".encode()))
    arrays, _ = _base(shape, fmt, seed=1)
    _inject(arrays, SPECIALS[kind], rng)
    attrs = dict(training=training, eps=1e-5, output_mask=(True, True, True), data_format=fmt)
    dtypes = {n: dtype for n in NAMES}
    got, q, odt, _ = direct_outputs(arrays, dtypes, attrs)
    want = batch_norm_backward_ref(*(q[n] for n in NAMES), **attrs)
    for name, g, w in zip(("grad_input", "grad_weight", "grad_bias"), got, want):
        assert_same_specials(name, g, w, dtype)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_infinite_invstd_poisons_only_its_channel(path):
    """save_invstd = Inf (a variance of exactly 0 with eps 0). The formula's
    sum of dy * ((x - mean) * invstd) is then NaN or +/-Inf by the signs of its
    terms, and the kernel gives exactly that (not (sum of dy * (x - mean)) *
    invstd, torch's order, whose NaN / Inf differ); the other channels are
    exactly as in the reference (no cross-channel contamination)."""
    shape, fmt = PATHS[path]
    arrays, c = _base(shape, fmt, seed=5)
    arrays["save_invstd"][0] = np.inf
    attrs = dict(training=True, eps=1e-5, output_mask=(True, True, True), data_format=fmt)
    got, q, *_ = direct_outputs(arrays, {n: "float32" for n in NAMES}, attrs)
    want = batch_norm_backward_ref(*(q[n] for n in NAMES), **attrs)
    axis = len(shape) - 1 if fmt == "NHWC" else 1
    gi, wi = np.moveaxis(got[0], axis, 0), np.moveaxis(want[0], axis, 0)
    assert not np.isfinite(gi[0]).any() and not np.isfinite(got[1][0])
    assert_same_specials("grad_input", gi, wi, "float32")
    assert_same_specials("grad_weight", got[1], want[1], "float32")
    assert_same_specials("grad_bias", got[2], want[2], "float32")


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("fmt, shape", [("NCHW", (0, 3, 5)), ("NHWC", (0, 5, 3)), ("NCHW", (4, 3, 0))])
def test_empty_channel_sums_are_zero_whatever_the_statistics(fmt, shape, training):
    """A sum over nothing is 0: with no elements per channel grad_weight and grad_bias are 0, also for
    a NaN or infinite mean / invstd / variance (0 * Inf would be NaN)."""
    c = 3
    arrays = {"grad_out": np.zeros(shape), "input": np.zeros(shape), "weight": np.array([1.0, np.inf, 2.0]),
              "running_mean": np.array([np.nan, 0.0, np.inf]), "running_var": np.array([-1.0, 0.0, np.nan]),
              "save_mean": np.array([np.nan, 0.0, -np.inf]), "save_invstd": np.array([np.inf, np.nan, 1.0])}
    attrs = dict(training=training, eps=0.0, output_mask=(True, True, True), data_format=fmt)
    got, q, *_ = direct_outputs(arrays, {n: "float32" for n in NAMES}, attrs)
    want = batch_norm_backward_ref(*(q[n] for n in NAMES), **attrs)
    assert got[0].shape == shape and want[0].shape == shape
    for name, g, w in zip(("grad_weight", "grad_bias"), got[1:], want[1:]):
        assert np.array_equal(w, np.zeros(c)), (name, w)  # the reference (docs/operator.md) says 0
        assert np.array_equal(g, np.zeros(c)), (name, g)


@pytest.mark.parametrize("mask", [(False, True, True), (True, False, False), (False, False, True)])
def test_masked_outputs_stay_zero_with_nan_inputs(mask):
    shape, fmt = PATHS["row"]
    arrays, _ = _base(shape, fmt, seed=2)
    arrays["grad_out"][0, 0, :3] = [np.nan, np.inf, -np.inf]
    arrays["input"][1, 2, 5] = np.nan
    attrs = dict(training=True, eps=1e-5, output_mask=mask, data_format=fmt)
    got, q, *_ = direct_outputs(arrays, {n: "float32" for n in NAMES}, attrs)
    want = batch_norm_backward_ref(*(q[n] for n in NAMES), **attrs)
    for name, g, w, keep in zip(("grad_input", "grad_weight", "grad_bias"), got, want, mask):
        if keep:
            assert_same_specials(name, g, w, "float32")
        else:
            assert np.array_equal(g, np.zeros_like(g)), f"masked {name} must be exactly zero"


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("training", [True, False])
def test_nan_inf_through_mindspore(dtype, training):
    """The same through batch_norm_backward (PYNATIVE): MindSpore passes specials untouched."""
    import mindspore as ms
    from _harness import quantize, run
    shape, fmt = PATHS["col"]
    arrays, _ = _base(shape, fmt, seed=3)
    _inject(arrays, SPECIALS["mixed"], np.random.default_rng(4))
    arrays["weight"][1] = np.nan
    dtypes = {n: dtype for n in NAMES}
    attrs = dict(training=training, eps=1e-5, output_mask=(True, True, True), data_format=fmt)
    outs = run("pynative", arrays, dtypes, **attrs)
    q = {n: quantize(arrays[n], dtype) for n in NAMES}
    want = batch_norm_backward_ref(*(q[n] for n in NAMES), **attrs)
    for name, o, w in zip(("grad_input", "grad_weight", "grad_bias"), outs, want):
        assert_same_specials(name, o.astype(ms.float64).asnumpy(), w, dtype)


# --------------------------------------------------------- float16 overflow

def _f16_of_f32(v):
    """A float32 computation rounded to float16 (what the kernel promises)."""
    return np.asarray(v, dtype=np.float32).astype(np.float16).astype(np.float64)


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_float16_grad_input_overflow_is_inf_like_float32_rounded(fmt):
    """Inference: grad_input = dy * invstd * w, exact in float32 here; stored
    as float16 it must equal float32 -> float16 rounding: |v| >= 65520 -> Inf."""
    vals = np.array([60000.0, 65504.0, 32760.0, 32752.0, -60000.0, 1000.0, -32760.0, 30000.0])
    c = 2
    w = np.array([2.0, 1.0])
    shape = (4, c, 40) if fmt == "NCHW" else (4, 40, c)
    dy = np.resize(vals, int(np.prod(shape))).reshape(shape)
    arrays = {"grad_out": dy, "input": np.zeros(shape), "weight": w,
              "running_mean": np.zeros(c), "running_var": np.ones(c)}
    dtypes = {"grad_out": "float16", "weight": "float32", "running_mean": "float32", "running_var": "float32"}
    attrs = dict(training=False, eps=0.0, output_mask=(True, False, False), data_format=fmt)
    got, q, *_ = direct_outputs(arrays, dtypes, attrs)
    axis = 1 if fmt == "NCHW" else 2
    bshape = [1, 1, 1]
    bshape[axis] = c
    expect = _f16_of_f32(q["grad_out"] * w.reshape(bshape))
    assert np.isinf(expect).any() and np.isfinite(expect).any()
    np.testing.assert_array_equal(got[0], expect)
    # the signs of the infinities follow the value
    assert (np.isposinf(got[0]) == (np.isinf(expect) & (expect > 0))).all()
    assert (np.isneginf(got[0]) == (np.isinf(expect) & (expect < 0))).all()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_half_store_rounding(dtype, fmt):
    """dx = dy * scale is exact in float32 here, so the stored bits must be the
    round-to-nearest-even of the exact value (NaN stays NaN, Inf stays Inf,
    subnormals round like any other value)."""
    rng = np.random.default_rng(9)
    shape = (3, 4, 41) if fmt == "NCHW" else (3, 41, 4)
    vals = rng.standard_normal(shape) * 4
    if dtype == "float16":
        vals.reshape(-1)[:6] = [np.nan, np.inf, -np.inf, 6e-8, -3e-6, 65000.0]
    else:
        vals.reshape(-1)[:4] = [np.nan, np.inf, -np.inf, 1e-38]
    scale = np.array([1.0, 1.0 + 2.0 ** -9, 1.0 - 2.0 ** -12, 1.5 + 2.0 ** -11])
    arrays = {"grad_out": vals, "input": vals, "weight": scale,
              "running_mean": np.zeros(4), "running_var": np.ones(4)}
    dtypes = {"grad_out": dtype, "weight": "float64", "running_mean": "float32", "running_var": "float32"}
    attrs = dict(training=False, eps=0.0, output_mask=(True, True, True), data_format=fmt)
    got, q, *_ = direct_outputs(arrays, dtypes, attrs)
    want = batch_norm_backward_ref(*(q[n] for n in NAMES), **attrs)
    _, want_rounded = encode(want[0], dtype)
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(want[0]))
    ok = ~np.isnan(want[0])
    np.testing.assert_array_equal(got[0][ok], want_rounded[ok])


def test_float16_store_rounding_threshold():
    """65519.99... rounds to 65504, 65520 to Inf (round to nearest even, float32 first)."""
    c = 3
    dy = np.full((1, c, 32), 1.0)
    w = np.array([65504.0, 65519.0, 65520.0])
    arrays = {"grad_out": dy, "input": np.zeros_like(dy), "weight": w,
              "running_mean": np.zeros(c), "running_var": np.ones(c)}
    dtypes = {"grad_out": "float16", "weight": "float32", "running_mean": "float32", "running_var": "float32"}
    got, *_ = direct_outputs(arrays, dtypes, dict(training=False, eps=0.0, output_mask=(True, False, False),
                                                    data_format="NCHW"))
    assert (got[0][0, 0] == 65504.0).all() and (got[0][0, 1] == 65504.0).all()
    assert np.isposinf(got[0][0, 2]).all()


@pytest.mark.parametrize("param_dtype", ["float16", "float32"])
def test_float16_param_grad_overflow(param_dtype):
    """grad_bias = sum(dy): 4096 * 30 = 122880 overflows float16 but not the
    float32 accumulator. Stored as float16 it is Inf (the float32 sum rounded);
    with a float32 weight the gradients are float32 and exact."""
    n, c = 4096, 2
    dy = np.full((1, c, n), 30.0)
    dy[0, 1] = -30.0
    x = np.ones_like(dy) * 0.5
    arrays = {"grad_out": dy, "input": x, "weight": np.ones(c), "save_mean": np.zeros(c),
              "save_invstd": np.ones(c)}
    dtypes = {"grad_out": "float16", "weight": param_dtype, "save_mean": "float32", "save_invstd": "float32"}
    got, q, odt, _ = direct_outputs(arrays, dtypes, dict(training=True, eps=1e-5, output_mask=(False, True, True),
                                                      data_format="NCHW"))
    assert odt[1] == param_dtype
    want_gb = np.array([30.0 * n, -30.0 * n])
    want_gw = want_gb * 0.5
    if param_dtype == "float16":
        np.testing.assert_array_equal(got[2], _f16_of_f32(want_gb))   # [+inf, -inf]
        assert np.isposinf(got[2][0]) and np.isneginf(got[2][1])
        np.testing.assert_array_equal(got[1], _f16_of_f32(want_gw))   # 61440: finite
    else:
        np.testing.assert_array_equal(got[2], want_gb)
        np.testing.assert_array_equal(got[1], want_gw)


def test_float16_overflow_through_mindspore():
    import mindspore as ms
    from _harness import run
    shape = (2, 2, 8)
    dy = np.full(shape, 40000.0)
    dy[:, 1] = -40000.0
    arrays = {"grad_out": dy, "input": np.zeros(shape), "weight": np.array([2.0, 2.0]),
              "running_mean": np.zeros(2), "running_var": np.ones(2)}
    dtypes = {"grad_out": "float16", "input": "float16", "weight": "float32", "running_mean": "float32",
              "running_var": "float32"}
    gi, gw, gb = run("pynative", arrays, dtypes, training=False, eps=0.0)
    gi = gi.astype(ms.float64).asnumpy()
    assert np.isposinf(gi[:, 0]).all() and np.isneginf(gi[:, 1]).all()
    np.testing.assert_array_equal(gb.asnumpy(), [40000.0 * 16, -40000.0 * 16])  # float32: finite


# ------------------------------------------------------------ long reduction

@pytest.mark.parametrize("fmt,dtype", [("NCHW", "float32"), ("NHWC", "float32"), ("NCHW", "float16"),
                                       ("NHWC", "bfloat16")])
def test_accuracy_channel_of_1e7_elements(fmt, dtype):
    """One channel of 10^7 elements, mean far from 0: grad_weight, grad_bias
    within 1e-6 * sum(|terms|) of float64, grad_input within the rounding of
    its dtype plus the same relative error through the sums."""
    n = 10_000_000
    rng = np.random.default_rng(12)
    shape = (1, 1, n) if fmt == "NCHW" else (n, 1)
    x = (rng.standard_normal(n, dtype=np.float32) + 100.0).reshape(shape)
    dy = (rng.standard_normal(n, dtype=np.float32) + 0.25).reshape(shape)
    xq = decode(encode(x, dtype)[0], dtype)
    mean = np.array([xq.mean()])
    arrays = {"grad_out": dy, "input": x, "save_mean": mean, "save_invstd": np.array([0.5]),
              "weight": np.array([1.5])}
    # float32 statistics, as a network with these activations has them (a
    # float64 mean would be rounded to the float32 compute type, an error of
    # eps32 * |mean| * sum(dy) that is not the accumulation's)
    mean = mean.astype(np.float32).astype(np.float64)
    arrays["save_mean"] = mean
    dtypes = {"grad_out": dtype, "weight": "float32", "save_mean": "float32", "save_invstd": "float32"}
    attrs = dict(training=True, eps=1e-5, output_mask=(True, True, True), data_format=fmt)
    got, q, *_ = direct_outputs(arrays, dtypes, attrs)
    want = batch_norm_backward_ref(*(q[k] for k in NAMES), **attrs)
    ady = np.abs(q["grad_out"])
    s_abs_b = ady.sum()
    s_abs_w = (ady * np.abs(q["input"] - mean[0])).sum() * 0.5
    assert abs(got[2][0] - want[2][0]) <= 1e-6 * s_abs_b, (got[2][0], want[2][0])
    assert abs(got[1][0] - want[1][0]) <= 1e-6 * s_abs_w, (got[1][0], want[1][0])
    # naive float32 summation would fail the bound above by orders of magnitude
    naive = np.cumsum(q["grad_out"].reshape(-1).astype(np.float32), dtype=np.float32)[-1]
    assert abs(naive - want[2][0]) > 1e-6 * s_abs_b or dtype != "float32"
    # grad_input: the harness's per-dtype bound (rounding of the dtype plus
    # float32 computation relative to the magnitude of what it combines)
    assert_close("grad_input", got[0], want[0], dtype, dtype, q, attrs)


# --------------------------------------------------------------------- eps

@pytest.mark.parametrize("mode", ["pynative", "graph"])
@pytest.mark.parametrize("eps", [0.1, 0.3, 1e-300])
def test_eps_reaches_the_kernel_exactly(mode, eps):
    """float64 inference uses eps as given (MindSpore's float attributes are
    float32: 0.1 would arrive as 0.10000000149, off by 1.5e-8 relative)."""
    from _harness import make_arrays
    a = make_arrays((4, 3, 5), seed=1)
    a["running_var"] = np.full(3, 0.01)
    dtypes = {n: "float64" for n in NAMES}
    check(mode, a, dtypes, training=False, eps=eps)
