"""64-bit index arithmetic.

Default run (cheap): shapes whose element products do not fit int32 (or
int64) but that allocate nothing, because a dim is 0, go through the direct
C entry: the per-channel outputs are exactly 0 and nothing else is touched;
products that overflow int64 return error 6 rather than wrapping.

Opt-in (MS_BN_GRAD_BIG=1, ~13 GiB of RAM, minutes): a float16 tensor with
2 * (2^30 + 3) > 2^31 elements, channel-first (1, 2, 2^30+3) (row path:
channel 1 lies entirely past flat index 2^31) and channel-last
(2^30+3, 2) (column path). The data is periodic (two coprime periods for
dy and x), so the float64 sums are computed exactly from one period, and
every element of grad_input (initialised to NaN, so an element the kernel
skipped or wrote twice elsewhere cannot pass) is compared chunk by chunk
against the float64 formula.
"""
import ctypes
import gc
import math
import os

import numpy as np
import pytest

from mindspore_bn_grad.cpu_kernel import native

BIG = os.environ.get("MS_BN_GRAD_BIG") == "1"


class _Raw:
    """MsBnGradDirect with explicit shapes (the data pointers may be tiny or null)."""

    def __init__(self, shape, channel_last=False, training=True, dtype="float32"):
        self.shape = list(shape)
        c = shape[-1] if channel_last else shape[1]
        self.c = c
        npdt = np.float32 if dtype == "float32" else np.float16
        self.act = [np.zeros(1, npdt) for _ in range(3)]          # grad_out, input, grad_input
        self.chan = [np.full(max(c, 1), v, npdt) for v in (1.0, 0.0, 1.0, 0.0, 1.0)]
        self.grads = [np.full(max(c, 1), 777.0, npdt) for _ in range(2)]
        self.dtype, self.training, self.channel_last = dtype, training, channel_last

    def run(self):
        arrays = self.act[:2] + self.chan + [self.act[2]] + self.grads
        shapes = [self.shape, self.shape] + [[self.c]] * 5 + [self.shape, [self.c], [self.c]]
        n = 10
        params = (ctypes.c_void_p * n)(*[a.ctypes.data for a in arrays])
        ndims = (ctypes.c_int * n)(*[len(s) for s in shapes])
        bufs = [(ctypes.c_int64 * len(s))(*s) for s in shapes]
        sp = (ctypes.POINTER(ctypes.c_int64) * n)(*[ctypes.cast(b, ctypes.POINTER(ctypes.c_int64)) for b in bufs])
        dts = (ctypes.c_char_p * n)(*[self.dtype.encode()] * n)
        return native.lib().MsBnGradDirect(n, params, ndims, sp, dts, int(self.training), 1e-5, 1, 1, 1,
                                            int(self.channel_last))


E31, E40 = 2 ** 31, 2 ** 40


@pytest.mark.parametrize("shape,channel_last", [
    ((0, 3, E40), False),            # N = 0: inner 2^40
    ((E40, 3, 0), False),            # inner = 0, outer 2^40
    ((0, 3, E31 + 1, 4), False),     # inner > 2^33
    ((E31 + 7, 0, 3), True),         # channel-last, outer = (2^31+7) * 0
    ((0, E31, 3), True),             # channel-last, outer 0 * 2^31
    ((3, 2, 0, E31, E31), False),    # rank 5, inner 0 * 2^62
])
@pytest.mark.parametrize("training", [True, False])
def test_empty_tensors_with_huge_dims(shape, channel_last, training):
    r = _Raw(shape, channel_last, training)
    assert r.run() == 0
    assert np.all(r.grads[0][:r.c] == 0.0) and np.all(r.grads[1][:r.c] == 0.0)
    assert r.act[2][0] == 0.0  # grad_input (empty) untouched


@pytest.mark.parametrize("shape,channel_last", [
    ((2 ** 32, 3, 2 ** 32), False),      # 3 * 2^64
    ((0, 3, 2 ** 62, 4), False),         # empty, but inner = 2^64 does not fit: refused, not wrapped
    ((2 ** 62, 2 ** 3, 1, 3), True),     # channel-last outer 2^65
])
def test_products_overflowing_int64_are_refused(shape, channel_last):
    r = _Raw(shape, channel_last)
    assert r.run() == 6
    assert np.all(r.grads[0] == 777.0) and np.all(r.grads[1] == 777.0)


# ------------------------------------------------------------------ opt-in

P_DY, P_X = 4099, 4093  # coprime periods
N_PER_CHANNEL = 2 ** 30 + 3
CHUNK = 2 ** 25


def _patterns(c):
    rng = np.random.default_rng(99)
    dyb = [rng.standard_normal(P_DY).astype(np.float16) for _ in range(c)]
    xb = [(rng.standard_normal(P_X) * (1 + k) + 0.5 * k).astype(np.float16) for k in range(c)]
    return dyb, xb


def _periodic_sum(values_of_index, period, n):
    """sum of f(i) for i < n, f periodic with `period` (given on one period, float64)."""
    q, r = divmod(n, period)
    return q * values_of_index.sum() + values_of_index[:r].sum()


def _channel_sums(dyb, xb, mean, n):
    """Exact float64 sum(dy), sum(dy * (x - mean)), sum|dy|, sum|dy (x - mean)| over n elements."""
    lcm = P_DY * P_X
    i = np.arange(lcm)
    dy = dyb.astype(np.float64)[i % P_DY]
    xm = xb.astype(np.float64)[i % P_X] - mean
    s_dy = _periodic_sum(dyb.astype(np.float64), P_DY, n)
    s_abs = _periodic_sum(np.abs(dyb.astype(np.float64)), P_DY, n)
    prod = dy * xm
    return s_dy, _periodic_sum(prod, lcm, n), s_abs, _periodic_sum(np.abs(prod), lcm, n)


@pytest.mark.skipif(not BIG, reason="opt-in: MS_BN_GRAD_BIG=1 (needs ~13 GiB of RAM and minutes)")
@pytest.mark.parametrize("channel_last", [False, True])
def test_tensor_over_2_31_elements(channel_last):
    c, n = 2, N_PER_CHANNEL
    assert c * n > 2 ** 31
    shape = (n, c) if channel_last else (1, c, n)
    dyb, xb = _patterns(c)
    dy = np.empty(shape, np.float16)
    x = np.empty(shape, np.float16)
    for k in range(c):
        view_dy = dy[:, k] if channel_last else dy[0, k]
        view_x = x[:, k] if channel_last else x[0, k]
        for s in range(0, n, CHUNK):
            e = min(n, s + CHUNK)
            view_dy[s:e] = dyb[k][np.arange(s, e) % P_DY]
            view_x[s:e] = xb[k][np.arange(s, e) % P_X]
    mean = np.array([_periodic_sum(xb[k].astype(np.float64), P_X, n) / n for k in range(c)], np.float32)
    invstd = np.array([1.0 / (1 + k) for k in range(c)], np.float32)
    weight = np.array([1.5, -0.75], np.float32)
    gi = np.full(shape, np.nan, np.float16)
    out = (gi, np.full(c, np.nan, np.float32), np.full(c, np.nan, np.float32))
    native.direct(dy, x, weight, None, None, mean, invstd, training=True, channel_last=channel_last,
                   out=out)
    gw, gb = out[1], out[2]
    for k in range(c):
        m = float(mean[k])
        s_dy, s_dyx, s_abs, s_abs_x = _channel_sums(dyb[k], xb[k], m, n)
        assert abs(gb[k] - s_dy) <= 1e-6 * s_abs, (k, gb[k], s_dy)
        assert abs(gw[k] - s_dyx * invstd[k]) <= 1e-6 * s_abs_x * invstd[k], (k, gw[k], s_dyx * invstd[k])
        # grad_input, every element, from the exact sums
        w, iv = float(weight[k]), float(invstd[k])
        view_gi = gi[:, k] if channel_last else gi[0, k]
        view_dy = dy[:, k] if channel_last else dy[0, k]
        view_x = x[:, k] if channel_last else x[0, k]
        for s in range(0, n, CHUNK):
            e = min(n, s + CHUNK)
            d = view_dy[s:e].astype(np.float64)
            xm = view_x[s:e].astype(np.float64) - m
            want = w * iv * (d - s_dy / n - xm * iv * iv * s_dyx / n)
            got = view_gi[s:e].astype(np.float64)
            tol = 2.0 ** -10 * np.abs(want) + 1e-5 * abs(w) * iv * (np.abs(d) + 1 + np.abs(xm) * iv * iv)
            bad = ~(np.abs(got - want) <= tol)
            assert not bad.any(), (f"channel {k}, elements {s + np.flatnonzero(bad)[:5]}: "
                                   f"got {got[bad][:5]}, want {want[bad][:5]}")
    del dy, x, gi
    gc.collect()
    assert math.isfinite(float(gw.sum()))


# The column paths cap their partial sums at 2^21 (chunks x columns): past that the row chunks
# grow. (81921, 1024) float16 (84M elements, 168 MB) walks wide tiles of 32 rows, which would be
# 2561 chunks against a cap of 2048: 41 rows each, and chunks of 41 rows cover M with 1999, so the
# cap's 2048 would leave 49 empty chunks (a masked grad_input's zero-fill of a negative count
# crashed there). The data repeats every 37 rows, so the references come from one period.
@pytest.mark.parametrize("mask", [(True, True, True), (False, True, True)])
def test_column_path_at_the_partial_sums_cap(mask):
    m_rows, cols, period = 81921, 1024, 37
    rng = np.random.default_rng(23)
    xb = (rng.standard_normal((period, cols)) + rng.uniform(-2, 2, cols)).astype(np.float16)
    dyb = rng.standard_normal((period, cols)).astype(np.float16)
    reps = -(-m_rows // period)
    x = np.tile(xb, (reps, 1))[:m_rows]
    dy = np.tile(dyb, (reps, 1))[:m_rows]
    q, r = divmod(m_rows, period)
    weights = np.full(period, q, np.float64)
    weights[:r] += 1  # how often each row of the period occurs
    x64, dy64 = xb.astype(np.float64), dyb.astype(np.float64)
    mean = weights @ x64 / m_rows
    var = weights @ (x64 - mean) ** 2 / m_rows
    ones, zeros = np.ones(cols, np.float32), np.zeros(cols, np.float32)  # statistics stored in float32
    y, save_mean, save_invstd = native.forward_direct(x, ones, zeros, zeros.copy(), ones.copy(), training=True)[:3]
    np.testing.assert_allclose(save_mean, mean, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(save_invstd, 1.0 / np.sqrt(var + 1e-5), rtol=1e-6)
    y_period = (x64 - mean) / np.sqrt(var + 1e-5)
    for s in range(0, m_rows, 8192):  # every element of y, against its row of the period
        e = min(m_rows, s + 8192)
        np.testing.assert_allclose(y[s:e], y_period[np.arange(s, e) % period], rtol=2e-3, atol=2e-3)
    del y
    mean32, invstd32 = mean.astype(np.float32), (1.0 / np.sqrt(var + 1e-5)).astype(np.float32)
    gi = np.full(x.shape, np.nan, np.float16)
    out = (gi, np.full(cols, np.nan, np.float32), np.full(cols, np.nan, np.float32))
    native.direct(dy, x, np.ones(cols, np.float32), None, None, mean32, invstd32, training=True,
                  output_mask=mask, param_grad_dtype=np.float32, out=out)
    xm = x64 - mean32.astype(np.float64)
    s_dy, s_dyx = weights @ dy64, weights @ (dy64 * xm)
    scale = weights @ np.abs(dy64 * xm) + 1.0
    np.testing.assert_allclose(out[2], s_dy, rtol=1e-6, atol=1e-6 * (weights @ np.abs(dy64)).max())
    np.testing.assert_allclose(out[1], s_dyx * invstd32, rtol=1e-6, atol=1e-6 * scale.max())
    if not mask[0]:
        assert not gi.view(np.uint16).any(), "a masked grad_input must come back all zero bits"
        return
    iv = invstd32.astype(np.float64)
    dx_period = iv * (dy64 - s_dy / m_rows - xm * iv * iv * s_dyx / m_rows)
    for s in range(0, m_rows, 8192):
        e = min(m_rows, s + 8192)
        np.testing.assert_allclose(gi[s:e], dx_period[np.arange(s, e) % period], rtol=2e-3, atol=2e-3)


@pytest.mark.skipif(not BIG, reason="opt-in: MS_BN_GRAD_BIG=1 (needs ~13 GiB of RAM and minutes)")
def test_column_path_with_more_columns_than_the_partial_sums_cap():
    """(129, 2^21 + 24) float16: more columns than partial sums allowed, so one chunk of every row;
    with the wide tiles of a large tensor that chunk is walked as wide tiles, never as the fused
    walk's narrower ones (which would leave the columns past them out)."""
    rows, cols = 129, (1 << 21) + 24
    rng = np.random.default_rng(29)
    x = np.empty((rows, cols), np.float16)
    dy = np.empty((rows, cols), np.float16)
    for r in range(rows):
        x[r] = rng.standard_normal(cols, dtype=np.float32) + 1.0
        dy[r] = rng.standard_normal(cols, dtype=np.float32)
    ones, zeros = np.ones(cols, np.float32), np.zeros(cols, np.float32)
    y, save_mean, save_invstd = native.forward_direct(x, ones, zeros, zeros.copy(), ones.copy(), training=True)[:3]
    gi = np.full(x.shape, np.nan, np.float16)
    out = (gi, np.full(cols, np.nan, np.float32), np.full(cols, np.nan, np.float32))
    native.direct(dy, x, ones, None, None, save_mean, save_invstd, training=True, param_grad_dtype=np.float32,
                  out=out)
    step = 1 << 18
    for s in range(0, cols, step):
        e = min(cols, s + step)
        xs, ds = x[:, s:e].astype(np.float64), dy[:, s:e].astype(np.float64)
        mean, var = xs.mean(axis=0), xs.var(axis=0)
        np.testing.assert_allclose(save_mean[s:e], mean, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(save_invstd[s:e], 1.0 / np.sqrt(var + 1e-5), rtol=1e-5)
        np.testing.assert_allclose(y[:, s:e], (xs - mean) / np.sqrt(var + 1e-5), rtol=2e-3, atol=4e-3)
        iv = save_invstd[s:e].astype(np.float64)
        xm = xs - save_mean[s:e].astype(np.float64)
        s_dy, s_dyx = ds.sum(axis=0), (ds * xm).sum(axis=0)
        np.testing.assert_allclose(out[2][s:e], s_dy, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(out[1][s:e], s_dyx * iv, rtol=1e-5, atol=1e-4)
        want = iv * (ds - s_dy / rows - xm * iv * iv * s_dyx / rows)
        np.testing.assert_allclose(gi[:, s:e], want, rtol=2e-3, atol=4e-3)
