"""The compiled CPU kernel called directly (no MindSpore) against the float64 reference.

Covers both paths of csrc/bn_backward_cpu.cpp (row path: channel-first with
inner >= 32; column path: channel-last and short inner), every dtype, masks,
absent and mixed-dtype parameters, tails, empty tensors, NaN/Inf, float16 /
bfloat16 rounding, accuracy on a 1e7-element channel, and determinism across
thread counts.
"""
import itertools

import numpy as np
import pytest

from _harness import assert_close, decode, encode, make_arrays
from reference import batch_norm_backward_ref

from mindspore_bn_grad import _native

NAMES = ("grad_out", "input", "weight", "running_mean", "running_var", "save_mean", "save_invstd")
ALL_MASKS = list(itertools.product([True, False], repeat=3))


# ----------------------------------------------------------------- helpers

def run_direct(arrays, dtypes=None, data_format="NCHW", training=True, eps=1e-5,
               output_mask=(True, True, True)):
    """Runs the kernel; returns (outputs as float64, reference outputs, quantized inputs, out dtypes)."""
    dtypes = dtypes or {}
    act = dtypes.get("grad_out", "float32")
    enc, q, bf16 = {}, {}, set()
    for n in NAMES:
        dt = act if n == "input" else dtypes.get(n, act)
        enc[n], q[n] = encode(arrays.get(n), dt)
        if dt == "bfloat16" and arrays.get(n) is not None:
            bf16.add(n)
    pdt = dtypes.get("weight", act) if arrays.get("weight") is not None else act
    if pdt == "bfloat16":
        bf16.add("param_grads")
    channel_last = data_format in ("NHWC", "NDHWC")
    outs = _native.direct(*(enc[n] for n in NAMES), training=training, eps=eps,
                          output_mask=output_mask, channel_last=channel_last,
                          param_grad_dtype=np.uint16 if pdt == "bfloat16" else np.dtype(pdt),
                          bf16=tuple(bf16))
    got = [decode(o, dt) for o, dt in zip(outs, (act, pdt, pdt))]
    want = batch_norm_backward_ref(*(q[n] for n in NAMES), training=training, eps=eps,
                                   output_mask=output_mask, data_format=data_format)
    return got, want, q, (act, pdt, pdt), outs


def check_direct(arrays, dtypes=None, data_format="NCHW", **attrs):
    got, want, q, odt, raw = run_direct(arrays, dtypes, data_format, **attrs)
    act = (dtypes or {}).get("grad_out", "float32")
    a = dict(attrs, data_format=data_format)
    for name, g, w, dt in zip(("grad_input", "grad_weight", "grad_bias"), got, want, odt):
        assert g.shape == w.shape, (name, g.shape, w.shape)
        assert_close(name, g, w, dt, act, q, a)
    for g, keep in zip(got, attrs.get("output_mask", (True, True, True))):
        if not keep:
            assert not np.any(g), "masked output must be zero-filled"
    return raw


@pytest.fixture(autouse=True)
def _restore_settings():
    threads = _native.get_num_threads()
    yield
    _native.set_num_threads(threads)


# Shapes that reach each path: row path (inner >= 32) with vector tails and
# tile splits, column path (inner < 32) with partial column blocks.
SHAPES = {
    "row": ((3, 5, 7, 9), "NCHW"),          # inner 63: 7 vectors + tail
    "row_tiles": ((5, 2, 61, 67), "NCHW"),  # inner 4087 > one tile per channel boundary
    "col_nhwc": ((3, 5, 7, 13), "NHWC"),     # L = 13 columns, rows of 105
    "col_short": ((4, 37, 5), "NCHW"),       # NCL, inner 5: column path, L = 185
    "nc": ((9, 300), "NCHW"),                # NC: inner 1, a partial column block
    "ndhwc": ((2, 3, 4, 5, 11), "NDHWC"),
}


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("case", sorted(SHAPES))
@pytest.mark.parametrize("training", [True, False])
def test_values(dtype, case, training):
    shape, fmt = SHAPES[case]
    arrays = make_arrays(shape, fmt, seed=sorted(SHAPES).index(case))
    check_direct(arrays, {"grad_out": dtype}, fmt, training=training)


@pytest.mark.parametrize("mask", ALL_MASKS)
@pytest.mark.parametrize("case", ["row", "col_nhwc"])
@pytest.mark.parametrize("training", [True, False])
def test_masks(mask, case, training):
    shape, fmt = SHAPES[case]
    check_direct(make_arrays(shape, fmt, seed=3), None, fmt, training=training, output_mask=mask)


@pytest.mark.parametrize("case", ["row", "col_nhwc"])
@pytest.mark.parametrize("training", [True, False])
def test_absent_params(case, training):
    shape, fmt = SHAPES[case]
    arrays = make_arrays(shape, fmt, seed=4, weight=False, running=False)
    if not training:
        arrays.pop("save_mean")
        arrays.pop("save_invstd")
    check_direct(arrays, None, fmt, training=training)


@pytest.mark.parametrize("act,param", [("float16", "float32"), ("bfloat16", "float32"),
                                       ("float32", "float64"), ("float16", "bfloat16")])
@pytest.mark.parametrize("case", ["row", "col_nhwc"])
def test_mixed_param_dtypes(act, param, case):
    shape, fmt = SHAPES[case]
    dtypes = {"grad_out": act, "weight": param, "save_mean": param, "save_invstd": "float32",
              "running_mean": act, "running_var": param}
    for training in (True, False):
        check_direct(make_arrays(shape, fmt, seed=5), dtypes, fmt, training=training)


@pytest.mark.parametrize("shape,fmt", [((4, 1, 300, 300), "NCHW"), ((60000, 1), "NCHW"),
                                       ((3, 5000, 2, 2), "NCHW"), ((2, 4096), "NCHW"),
                                       ((2, 3, 3, 2000), "NHWC"), ((3, 4, 100, 100), "NCHW")])
def test_extreme_shapes(shape, fmt):
    check_direct(make_arrays(shape, fmt, seed=6), None, fmt, training=True)


@pytest.mark.parametrize("shape,fmt", [((0, 3, 4, 4), "NCHW"), ((2, 3, 0, 5), "NCHW"),
                                       ((0, 4, 4, 3), "NHWC"), ((2, 3, 0), "NCHW")])
@pytest.mark.parametrize("training", [True, False])
def test_empty(shape, fmt, training):
    raw = check_direct(make_arrays(shape, fmt, seed=7), None, fmt, training=training)
    c = shape[-1 if fmt == "NHWC" else 1]
    assert raw[1].shape == (c,) and raw[2].shape == (c,)


def test_nan_inf_propagate():
    for shape, fmt in (SHAPES["row"], SHAPES["col_nhwc"]):
        arrays = make_arrays(shape, fmt, seed=8)
        dy = arrays["grad_out"]
        flat = dy.reshape(-1)
        flat[5] = np.nan
        flat[17] = np.inf
        arrays["input"].reshape(-1)[40] = -np.inf
        for training in (True, False):
            got, want, *_ = run_direct(arrays, None, fmt, training=training)
            for g, w in zip(got, want):
                np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
                np.testing.assert_array_equal(np.isinf(g), np.isinf(w))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_half_store_rounding(dtype, fmt):
    """dx = dy * scale is exact in float32 here, so the stored bits must be the
    round-to-nearest-even of the exact value (NaN stays NaN, Inf stays Inf)."""
    rng = np.random.default_rng(9)
    shape = (3, 4, 41) if fmt == "NCHW" else (3, 41, 4)
    vals = rng.standard_normal(shape) * 4
    if dtype == "float16":
        vals.reshape(-1)[:6] = [np.nan, np.inf, -np.inf, 6e-8, -3e-6, 65000.0]
    else:
        vals.reshape(-1)[:4] = [np.nan, np.inf, -np.inf, 1e-38]
    dy_in, dy_q = encode(vals, dtype)
    scale = np.array([1.0, 1.0 + 2.0 ** -9, 1.0 - 2.0 ** -12, 1.5 + 2.0 ** -11])
    arrays = {"grad_out": vals, "input": vals, "weight": scale,
              "running_mean": np.zeros(4), "running_var": np.ones(4)}
    got, want, *_, raw = run_direct(arrays, {"grad_out": dtype, "weight": "float64",
                                             "running_mean": "float32", "running_var": "float32"},
                                    fmt, training=False, eps=0.0)
    _, want_bits_q = encode(want[0], dtype)
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(want[0]))
    ok = ~np.isnan(want[0])
    np.testing.assert_array_equal(got[0][ok], want_bits_q[ok])


def test_accuracy_one_channel_1e7():
    """float32 data, 1e7 elements in one channel, mean far from 0: the sums
    must stay close to float64 (blocked float32 accumulation, double combine)."""
    rng = np.random.default_rng(10)
    n = 10_000_000
    x = (rng.standard_normal(n) + 100.0).astype(np.float32).reshape(1, 1, n)
    dy = (rng.standard_normal(n) + 0.25).astype(np.float32).reshape(1, 1, n)
    mean = np.array([x.astype(np.float64).mean()], np.float32)
    invstd = np.array([1.0], np.float32)
    gi, gw, gb = _native.direct(dy, x, None, None, None, mean, invstd, training=True,
                                output_mask=(False, True, True))
    _, rw, rb = batch_norm_backward_ref(dy, x, None, None, None, mean, invstd, training=True)
    s_abs = np.abs(dy.astype(np.float64)).sum()
    assert abs(gb[0] - rb[0]) <= 1e-6 * s_abs, (gb[0], rb[0])
    s_abs_w = (np.abs(dy.astype(np.float64)) * np.abs(x.astype(np.float64) - mean[0])).sum()
    assert abs(gw[0] - rw[0]) <= 1e-6 * s_abs_w, (gw[0], rw[0])


DET_SHAPES = [((4, 1, 300, 300), "NCHW"), ((3, 12, 70, 70), "NCHW"), ((16, 64, 14, 14), "NCHW"),
              ((32, 14, 14, 64), "NHWC"), ((128, 1000), "NCHW"), ((2, 3, 3, 2000), "NHWC")]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape,fmt", DET_SHAPES)
def test_deterministic_across_threads(shape, fmt, dtype):
    arrays = make_arrays(shape, fmt, seed=11)
    results = []
    for threads in (1, 2, 3, 1):
        _native.set_num_threads(threads)
        for _ in range(2):
            *_, raw = run_direct(arrays, {"grad_out": dtype}, fmt, training=True)
            results.append([np.array(r, copy=True).view(np.uint8) for r in raw])
    for r in results[1:]:
        for a, b in zip(results[0], r):
            np.testing.assert_array_equal(a, b)


# The kernel zeroes a masked grad_input in the sweep that reads x and dy for
# grad_weight / grad_bias: every walk (row blocks, row split, column tiles with
# whole and partial rows), streamed and not, every dtype, 1 and 2 threads.
@pytest.mark.parametrize("shape,channel_last", [
    ((8, 64, 33, 65), False),     # row path, channel blocks, 4.4 MB: streamed
    ((2, 64, 9, 40), False),      # row path, channel blocks, small: normal stores
    ((3, 2, 300, 1001), False),   # row path, few channels: tiles split between threads
    ((4, 33, 65, 24), True),      # column path, one tile spans whole rows
    ((2, 17, 31, 300), True),     # column path, tiles of part of a row
    ((5, 300, 7), False),         # column path (short inner)
])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("mask", [(False, True, True), (False, True, False), (False, False, True)])
@pytest.mark.parametrize("threads", [1, 2])
def test_masked_grad_input_zeroed_in_the_sums_sweep(shape, channel_last, dtype, mask, threads):
    rng = np.random.default_rng(7)
    c = shape[-1] if channel_last else shape[1]
    dy32 = rng.standard_normal(shape).astype(np.float32)
    x32 = rng.standard_normal(shape).astype(np.float32)
    mean = rng.standard_normal(c).astype(np.float32) * 0.1
    invstd = rng.uniform(0.5, 2.0, c).astype(np.float32)
    if dtype == "bfloat16":
        bits = lambda a: ((a.view(np.uint32) + 0x7FFF + ((a.view(np.uint32) >> 16) & 1)) >> 16).astype(np.uint16)
        dy, x, bf16, gi_dtype = bits(dy32), bits(x32), ("grad_out",), np.uint16
        dyd = (dy.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        xd = (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    else:
        dy, x, bf16, gi_dtype = dy32.astype(dtype), x32.astype(dtype), (), np.dtype(dtype)
        dyd, xd = dy.astype(np.float64), x.astype(np.float64)
    gi = np.full(shape, 0xFFFF if dtype == "bfloat16" else np.nan, gi_dtype)  # NaN in every dtype
    out = (gi, np.full(c, np.nan, np.float32), np.full(c, np.nan, np.float32))
    _native.set_num_threads(threads)
    try:
        _native.direct(dy, x, None, None, None, mean, invstd, output_mask=mask, channel_last=channel_last,
                       param_grad_dtype=np.float32, bf16=bf16, out=out)
    finally:
        _native.set_num_threads(_native._default_threads())
    assert not gi.view(np.uint8).any(), "a masked grad_input must come back all zero bits"
    axes = tuple(range(len(shape) - 1)) if channel_last else (0,) + tuple(range(2, len(shape)))
    cshape = (1,) * (len(shape) - 1) + (c,) if channel_last else (1, c) + (1,) * (len(shape) - 2)
    want_gb = dyd.sum(axis=axes)
    want_gw = (dyd * (xd - mean.astype(np.float64).reshape(cshape))).sum(axis=axes) * invstd
    for got, want, keep in ((out[1], want_gw, mask[1]), (out[2], want_gb, mask[2])):
        if keep:
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3 * np.sqrt(dyd.size / c))
        else:
            assert not got.view(np.uint8).any()


@pytest.mark.parametrize("threads", [1, 2])
def test_large_masked_grad_input_is_zero_filled(threads):
    """A dx-sized zero-fill (split over threads above 4 MB) covers every element."""
    rng = np.random.default_rng(21)
    shape = (4, 3, 257, 1031)  # 12.7 MB float32, not a multiple of the fill chunk
    dy = rng.standard_normal(shape).astype(np.float32)
    x = rng.standard_normal(shape).astype(np.float32)
    c = np.ones(3, np.float32)
    out = (np.full(shape, np.nan, np.float32), np.full(3, np.nan, np.float32), np.full(3, np.nan, np.float32))
    _native.set_num_threads(threads)
    try:
        gi, gw, gb = _native.direct(dy, x, c, None, None, np.zeros(3, np.float32), c,
                                    output_mask=(False, True, True), out=out)
    finally:
        _native.set_num_threads(_native._default_threads())
    assert not np.any(gi) and not np.isnan(gi).any()
    np.testing.assert_allclose(gb, dy.sum(axis=(0, 2, 3), dtype=np.float64), rtol=1e-5)
    np.testing.assert_allclose(gw, (dy.astype(np.float64) * x).sum(axis=(0, 2, 3)), rtol=1e-5, atol=1e-2)
