"""The compiled CPU kernel called directly (no MindSpore) against the float64 reference.

Covers both walks of the kernel (csrc/bn_row_path.cpp: channel-first with
inner >= 32; csrc/bn_column_path.cpp: channel-last and short inner), every dtype, masks,
absent and mixed-dtype parameters, tails, empty tensors, bfloat16 bit
patterns, masked outputs zeroed in the sums sweep, and determinism across
thread counts. NaN / Inf, the rounding of half-precision stores and the
accuracy of long reductions are in test_numerics.py.
"""
import itertools

import numpy as np
import pytest

from _harness import bf16_bits_to_f64, check_direct, direct_outputs, encode, make_arrays
from reference import batch_norm_backward_ref

from mindspore_bn_grad.cpu_kernel import native

ALL_MASKS = list(itertools.product([True, False], repeat=3))


@pytest.fixture(autouse=True)
def _restore_settings():
    threads = native.get_num_threads()
    yield
    native.set_num_threads(threads)


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
    check_direct(arrays, {"grad_out": dtype}, data_format=fmt, training=training)


@pytest.mark.parametrize("mask", ALL_MASKS)
@pytest.mark.parametrize("case", ["row", "col_nhwc"])
@pytest.mark.parametrize("training", [True, False])
def test_masks(mask, case, training):
    shape, fmt = SHAPES[case]
    check_direct(make_arrays(shape, fmt, seed=3), None, data_format=fmt, training=training, output_mask=mask)


@pytest.mark.parametrize("case", ["row", "col_nhwc"])
@pytest.mark.parametrize("training", [True, False])
def test_absent_params(case, training):
    shape, fmt = SHAPES[case]
    arrays = make_arrays(shape, fmt, seed=4, weight=False, running=False)
    if not training:
        arrays.pop("save_mean")
        arrays.pop("save_invstd")
    check_direct(arrays, None, data_format=fmt, training=training)


@pytest.mark.parametrize("act,param", [("float16", "float32"), ("bfloat16", "float32"),
                                       ("float32", "float64"), ("float16", "bfloat16")])
@pytest.mark.parametrize("case", ["row", "col_nhwc"])
def test_mixed_param_dtypes(act, param, case):
    shape, fmt = SHAPES[case]
    dtypes = {"grad_out": act, "weight": param, "save_mean": param, "save_invstd": "float32",
              "running_mean": act, "running_var": param}
    for training in (True, False):
        check_direct(make_arrays(shape, fmt, seed=5), dtypes, data_format=fmt, training=training)


@pytest.mark.parametrize("shape,fmt", [((4, 1, 300, 300), "NCHW"), ((60000, 1), "NCHW"),
                                       ((3, 5000, 2, 2), "NCHW"), ((2, 4096), "NCHW"),
                                       ((2, 3, 3, 2000), "NHWC"), ((3, 4, 100, 100), "NCHW")])
def test_extreme_shapes(shape, fmt):
    check_direct(make_arrays(shape, fmt, seed=6), None, data_format=fmt, training=True)


@pytest.mark.parametrize("shape,fmt", [((0, 3, 4, 4), "NCHW"), ((2, 3, 0, 5), "NCHW"),
                                       ((0, 4, 4, 3), "NHWC"), ((2, 3, 0), "NCHW")])
@pytest.mark.parametrize("training", [True, False])
def test_empty(shape, fmt, training):
    raw = check_direct(make_arrays(shape, fmt, seed=7), None, data_format=fmt, training=training)
    c = shape[-1 if fmt == "NHWC" else 1]
    assert raw[1].shape == (c,) and raw[2].shape == (c,)


DET_SHAPES = [((4, 1, 300, 300), "NCHW"), ((3, 12, 70, 70), "NCHW"), ((16, 64, 14, 14), "NCHW"),
              ((32, 14, 14, 64), "NHWC"), ((128, 1000), "NCHW"), ((2, 3, 3, 2000), "NHWC"),
              ((31, 8, 8, 1100), "NHWC")]  # float32: 8.7 MB, the column path's wide tiles


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape,fmt", DET_SHAPES)
def test_deterministic_across_threads(shape, fmt, dtype):
    arrays = make_arrays(shape, fmt, seed=11)
    results = []
    for threads in (1, 2, 3, 1):
        native.set_num_threads(threads)
        for _ in range(2):
            raw = direct_outputs(arrays, {"grad_out": dtype}, dict(data_format=fmt, training=True))[3]
            results.append([np.array(r, copy=True).view(np.uint8) for r in raw])
    for r in results[1:]:
        for a, b in zip(results[0], r):
            np.testing.assert_array_equal(a, b)


# Column-path tensors of 8 MB and more walk tiles up to 1024 columns wide (whole rows up to
# that width); below, 256: channel-last with a partial second block, NC, short runs (inner 5).
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("sample,fmt", [((8, 8, 1100), "NHWC"), ((1030,), "NCHW"), ((700, 5), "NCHW")])
@pytest.mark.parametrize("training", [True, False])
def test_wide_column_tiles(dtype, sample, fmt, training):
    per_sample = int(np.prod(sample)) * np.dtype(dtype).itemsize
    shape = (-(-(8 << 20) // per_sample) + 3,) + sample
    check_direct(make_arrays(shape, fmt, seed=19), {"grad_out": dtype}, data_format=fmt, training=training)


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
    (dy, dyd), (x, xd) = encode(dy32, dtype), encode(x32, dtype)
    bf16, gi_dtype = (("grad_out",), np.uint16) if dtype == "bfloat16" else ((), np.dtype(dtype))
    gi = np.full(shape, 0xFFFF if dtype == "bfloat16" else np.nan, gi_dtype)  # NaN in every dtype
    out = (gi, np.full(c, np.nan, np.float32), np.full(c, np.nan, np.float32))
    native.set_num_threads(threads)
    try:
        native.direct(dy, x, None, None, None, mean, invstd, output_mask=mask, channel_last=channel_last,
                       param_grad_dtype=np.float32, bf16=bf16, out=out)
    finally:
        native.set_num_threads(native._default_threads())
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


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape,channel_last", [((16, 17, 31, 300), True),   # column path, whole rows (float32:
                                                                             # wide tiles), part rows (bfloat16)
                                                ((4, 9, 16, 4100), True),    # column path, part rows
                                                ((4, 64, 64, 130), False)])  # row path
def test_streamed_grad_input_does_not_depend_on_its_alignment(dtype, shape, channel_last):
    """dx of >= 4 MB is stored around the cache where its alignment allows: the same bits at
    any offset of grad_input, streamed or not, and the reference's values."""
    rng = np.random.default_rng(17)
    c = shape[-1] if channel_last else shape[1]
    dy32, x32 = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape).astype(np.float32)
    w = rng.uniform(0.5, 1.5, c).astype(np.float32)
    mean = rng.standard_normal(c).astype(np.float32) * 0.1
    invstd = rng.uniform(0.5, 2.0, c).astype(np.float32)
    (dy, dyd), (x, xd) = encode(dy32, dtype), encode(x32, dtype)
    bf16, store = (("grad_out",), np.uint16) if dtype == "bfloat16" else ((), np.dtype(dtype))
    results = []
    for offset in (0, 2, 6, 18, 30):
        n = dy.nbytes
        buf = np.empty(n + 128, np.uint8)
        start = (-buf.ctypes.data) % 64 + offset
        gi = buf[start:start + n].view(store).reshape(shape)
        gi.fill(0)
        out = (gi, np.full(c, np.nan, np.float32), np.full(c, np.nan, np.float32))
        native.direct(dy, x, w, None, None, mean, invstd, output_mask=(True, True, True),
                      channel_last=channel_last, param_grad_dtype=np.float32, bf16=bf16, out=out)
        results.append(gi.tobytes())
    assert all(r == results[0] for r in results[1:])
    assert dy.nbytes >= 4 << 20  # the kernel's stream threshold for dx
    want = batch_norm_backward_ref(dyd, xd, w.astype(np.float64), save_mean=mean.astype(np.float64),
                                   save_invstd=invstd.astype(np.float64), training=True,
                                   data_format="NHWC" if channel_last else "NCHW")[0]
    got = np.frombuffer(results[0], store).reshape(shape)
    got = bf16_bits_to_f64(got) if dtype == "bfloat16" else got.astype(np.float64)
    tol = 1.6e-2 if dtype == "bfloat16" else 2e-5
    assert np.max(np.abs(got - want)) <= tol * max(1.0, float(np.max(np.abs(want))))


@pytest.mark.parametrize("threads", [1, 2])
def test_large_masked_grad_input_is_zero_filled(threads):
    """A dx-sized zero-fill (split over threads above 4 MB) covers every element."""
    rng = np.random.default_rng(21)
    shape = (4, 3, 257, 1031)  # 12.7 MB float32, not a multiple of the fill chunk
    dy = rng.standard_normal(shape).astype(np.float32)
    x = rng.standard_normal(shape).astype(np.float32)
    c = np.ones(3, np.float32)
    out = (np.full(shape, np.nan, np.float32), np.full(3, np.nan, np.float32), np.full(3, np.nan, np.float32))
    native.set_num_threads(threads)
    try:
        gi, gw, gb = native.direct(dy, x, c, None, None, np.zeros(3, np.float32), c,
                                    output_mask=(False, True, True), out=out)
    finally:
        native.set_num_threads(native._default_threads())
    assert not np.any(gi) and not np.isnan(gi).any()
    np.testing.assert_allclose(gb, dy.sum(axis=(0, 2, 3), dtype=np.float64), rtol=1e-5)
    np.testing.assert_allclose(gw, (dy.astype(np.float64) * x).sum(axis=(0, 2, 3)), rtol=1e-5, atol=1e-2)


# (shape, layout, threads a parallel loop of the call may take with 2 set): channel-first runs of 2..31
# elements (spatial 2x2 .. 5x5) stay on one thread below 2**18 elements; runs of one element
# (channel-last, NC) and of 32 and more from 2**15 (csrc/bn_forward_cpu.cpp, bn_backward_cpu.cpp).
PARALLEL_RULES = [
    ((8, 1024, 2, 2), "NCHW", 1),    # 32768, runs of 4
    ((32, 256, 5, 5), "NCHW", 1),    # 204800, runs of 25
    ((32, 512, 4, 4), "NCHW", 2),    # 262144, runs of 16
    ((64, 1024), "NCHW", 2),         # 65536, NC
    ((16, 8, 8, 128), "NHWC", 2),    # 131072, channel-last
    ((8, 64, 8, 64), "NCHW", 2),     # 262144, runs of 512: the row path
    ((4, 1024, 2, 2), "NCHW", 1),    # below 2**15
]


@pytest.mark.parametrize("shape,fmt,want", PARALLEL_RULES)
def test_small_spatial_channel_first_stays_on_one_thread(shape, fmt, want):
    """With 2 threads set, the widest parallel loop of a forward and of a backward call follows the
    one-thread rules; the values are the float64 reference's either way."""
    from reference import batch_norm_forward_ref
    native.set_num_threads(2)
    lib = native.lib()
    rng = np.random.default_rng(11)
    channel_last = fmt == "NHWC"
    x = rng.standard_normal(shape).astype(np.float32)
    c = shape[-1] if channel_last else shape[1]
    w, b = rng.uniform(0.5, 1.5, c).astype(np.float32), rng.standard_normal(c).astype(np.float32)
    y, mean, invstd, _, _ = native.forward_direct(x, w, b, training=True, channel_last=channel_last)
    assert lib.MsBnGradLastCallParallel() == want
    y_ref, mean_ref, invstd_ref, _, _ = batch_norm_forward_ref(x, w, b, training=True, data_format=fmt)
    np.testing.assert_allclose(y, y_ref, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(invstd, invstd_ref, rtol=2e-5)
    dy = rng.standard_normal(shape).astype(np.float32)
    got = native.direct(dy, x, w, None, None, mean, invstd, training=True, channel_last=channel_last)
    assert lib.MsBnGradLastCallParallel() == want
    want_vals = batch_norm_backward_ref(dy, x, w, save_mean=mean, save_invstd=invstd, data_format=fmt)
    for g, r in zip(got, want_vals):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=2e-4)
