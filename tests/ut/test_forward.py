"""BatchNormForward (op_def/batch_norm_forward.yaml, docs/forward.md) against the float64 reference.

1. The compiled kernel called directly (cpu_kernel.native.forward_direct):
   both walks (csrc/bn_forward_row.cpp: per channel, blocks, split tiles;
   csrc/bn_forward_column.cpp: fused, chunked), every
   dtype, ranks 2..8, training and inference, absent and mixed-dtype
   parameters, empty batches, n == 1, running statistics updated in place,
   accuracy with a large mean, bitwise determinism across thread counts, and
   the error codes of a call that does not fit.
2. The primitive and batch_norm_forward() in PYNATIVE and GRAPH mode, its
   rejections (before any kernel), and MindSpore's nn.BatchNorm2d as a second
   oracle (forward output and running statistics).
"""
import re
import traceback

import numpy as np
import pytest

from _harness import bf16_bits_to_f64, encode
from reference import batch_norm_forward_ref

from mindspore_bn_grad.cpu_kernel import native

# (shape, data_format): the row path (inner >= 32) with tails and several tiles
# per channel, the split mode (few channels), and the column path.
SHAPES = {
    "row": ((3, 5, 7, 9), "NCHW"),               # inner 63: vectors + tail
    "row_tiles": ((5, 2, 61, 67), "NCHW"),       # 2 channels: threads split the tiles
    "row_blocks": ((2, 64, 7, 7), "NCHW"),        # blocks of channels, 8-lane groups straddling two
    "col_nhwc": ((3, 5, 7, 13), "NHWC"),          # 13 columns, every row in one tile (fused)
    "col_nhwc_chunks": ((16, 16, 16, 24), "NHWC"),  # 4096 rows: chunks of rows, combined
    "col_short": ((4, 37, 5), "NCHW"),            # NCL, inner 5: column path over 185 columns
    "nc": ((9, 300), "NCHW"),                     # NC: a partial column block
    "ndhwc": ((2, 3, 4, 5, 11), "NDHWC"),
    "rank8": ((2, 3, 2, 2, 3, 2, 2, 5), "NCHW"),  # inner 240
    "rank8_last": ((2, 2, 2, 3, 2, 2, 3, 6), "NHWC"),
}
# Relative tolerances of the output by its dtype (its rounding, twice), and of the
# statistics by the dtype they are stored in (float64 inputs compute in double).
RTOL = {"float64": 1e-12, "float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2}
STATS_RTOL = {"float64": 1e-12, "float32": 2e-6, "float16": 1e-3, "bfloat16": 8e-3}


def stats_rtol(x_dtype, p_dtype):
    return max(STATS_RTOL[p_dtype], 0.0 if x_dtype == "float64" else STATS_RTOL["float32"])
OUT_NAMES = ("output", "save_mean", "save_invstd", "running_mean_out", "running_var_out")


@pytest.fixture(autouse=True)
def _restore_threads():
    threads = native.get_num_threads()
    yield
    native.set_num_threads(threads)


def make(shape, fmt="NCHW", seed=0, offset=0.5):
    rng = np.random.default_rng(seed)
    c = shape[-1 if fmt in ("NHWC", "NDHWC") else 1]
    return {"input": rng.standard_normal(shape) * 2.0 + offset,
            "weight": rng.uniform(0.5, 1.5, c) * rng.choice([-1.0, 1.0], c),
            "bias": rng.standard_normal(c),
            "running_mean": rng.standard_normal(c) * 0.1,
            "running_var": rng.uniform(0.5, 2.0, c)}


def run_direct(arrays, x_dtype="float32", p_dtype=None, **attrs):
    """(kernel outputs as float64, reference outputs) for arrays (name -> float64 or None)."""
    p_dtype = p_dtype or ("float32" if x_dtype == "bfloat16" else x_dtype)
    x, xq = encode(arrays["input"], x_dtype)
    ps, pq = {}, {}
    for n in ("weight", "bias", "running_mean", "running_var"):
        ps[n], pq[n] = encode(arrays.get(n), p_dtype)
    fmt = attrs.pop("data_format", "NCHW")
    outs = native.forward_direct(x, ps["weight"], ps["bias"], ps["running_mean"], ps["running_var"],
                                 channel_last=fmt in ("NHWC", "NDHWC"), bf16=x_dtype == "bfloat16", **attrs)
    got = [bf16_bits_to_f64(outs[0]) if x_dtype == "bfloat16" else outs[0].astype(np.float64)]
    got += [None if o is None else o.astype(np.float64) for o in outs[1:]]
    want = batch_norm_forward_ref(xq, pq["weight"], pq["bias"], pq["running_mean"], pq["running_var"],
                                  data_format=fmt, **attrs)
    return got, want


def assert_matches(got, want, rtol_out, rtol_stats, skip_running=False):
    for name, g, w in zip(OUT_NAMES, got, want):
        if name.startswith("running") and (skip_running or g is None):
            continue
        rtol = rtol_out if name == "output" else rtol_stats
        assert g.shape == w.shape, name
        assert np.array_equal(np.isnan(g), np.isnan(w)), f"{name}: NaN where the reference has none, or not"
        ok = ~np.isnan(w)
        scale = max(1.0, float(np.max(np.abs(w[ok]), initial=0.0)))
        err = float(np.max(np.abs(g[ok] - w[ok]), initial=0.0))
        assert err <= rtol * scale, f"{name}: max error {err:.3g} > {rtol:.1g} x {scale:.3g}"


# ---------------------------------------------------------------- the kernel

@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("case", sorted(SHAPES))
@pytest.mark.parametrize("training", [True, False])
def test_values(dtype, case, training):
    shape, fmt = SHAPES[case]
    got, want = run_direct(make(shape, fmt, seed=len(case)), dtype, training=training, momentum=0.3,
                           data_format=fmt)
    assert_matches(got, want, RTOL[dtype], stats_rtol(dtype, "float32" if dtype == "bfloat16" else dtype))


@pytest.mark.parametrize("absent", [("weight",), ("bias",), ("weight", "bias"), ("running_mean", "running_var"),
                                    ("weight", "bias", "running_mean", "running_var")])
@pytest.mark.parametrize("training", [True, False])
def test_absent_inputs_take_their_defaults(absent, training):
    arrays = make((4, 3, 40), seed=3)
    for n in absent:
        arrays[n] = None
    got, want = run_direct(arrays, training=training)
    assert_matches(got, want, RTOL["float32"], STATS_RTOL["float32"])
    if "running_mean" in absent:  # nothing to update: no running outputs
        assert got[3] is None and got[4] is None


@pytest.mark.parametrize("x_dtype,p_dtype", [("float16", "float32"), ("bfloat16", "float32"),
                                             ("float32", "float64"), ("float16", "float64"),
                                             ("bfloat16", "float16"), ("float64", "float32")])
@pytest.mark.parametrize("case", ["row", "col_nhwc"])
def test_mixed_dtypes(x_dtype, p_dtype, case):
    shape, fmt = SHAPES[case]
    got, want = run_direct(make(shape, fmt, seed=5), x_dtype, p_dtype, training=True, data_format=fmt)
    assert_matches(got, want, RTOL[x_dtype], stats_rtol(x_dtype, p_dtype))  # statistics in the parameters' dtype


@pytest.mark.parametrize("shape,fmt", [((0, 3, 4), "NCHW"), ((2, 3, 0), "NCHW"), ((0, 5), "NCHW"),
                                       ((0, 2, 2, 3), "NHWC")])
@pytest.mark.parametrize("training", [True, False])
def test_empty_batch(shape, fmt, training):
    """No NaN from 0 / 0: mean 0, variance 0, the running statistics unchanged."""
    arrays = make(shape, fmt, seed=1)
    got, want = run_direct(arrays, training=training, eps=1e-3, data_format=fmt)
    assert_matches(got, want, 0.0, 1e-7)
    assert np.array_equal(got[3], arrays["running_mean"].astype(np.float32))
    if training:
        assert np.all(got[1] == 0) and np.allclose(got[2], 1 / np.sqrt(1e-3))


def test_single_value_per_channel():
    """n == 1: output = bias, save_invstd = 1/sqrt(eps), running_var NaN (0 / 0), as PyTorch and ops.BatchNorm."""
    arrays = make((1, 4), seed=2)
    got, want = run_direct(arrays, training=True, momentum=0.25)
    assert_matches(got, want, RTOL["float32"], STATS_RTOL["float32"])
    assert np.all(np.isnan(got[4]))
    np.testing.assert_allclose(got[0][0], arrays["bias"].astype(np.float32), rtol=0, atol=1e-7)


def test_running_statistics_in_place():
    arrays = make((6, 4, 33), seed=4)
    x = arrays["input"].astype(np.float32)
    rm, rv = arrays["running_mean"].astype(np.float32), arrays["running_var"].astype(np.float32)
    _, want = run_direct(dict(arrays), training=True, momentum=0.2)
    outs = native.forward_direct(x, None, None, rm, rv, training=True, momentum=0.2, in_place=True)
    assert outs[3] is rm and outs[4] is rv
    np.testing.assert_allclose(rm, want[3], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(rv, want[4], rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_large_mean_keeps_the_variance(dtype):
    """Two passes per tile: a mean 1000 std away loses nothing to cancellation."""
    rng = np.random.default_rng(7)
    shape = (8, 3, 70000 // 8) if dtype == "float32" else (8, 3, 4000)
    offset = 1000.0 if dtype == "float32" else 100.0
    arrays = {"input": rng.standard_normal(shape) + offset, "weight": np.ones(3)}
    got, want = run_direct(arrays, dtype, "float32", training=True)  # statistics stored in float32
    np.testing.assert_allclose(got[2], want[2], rtol=2e-5)


@pytest.mark.parametrize("shape,fmt", [((8192, 8), "NCHW"), ((64, 16, 16, 8), "NHWC"), ((4, 8, 9000), "NCHW")])
def test_first_rows_far_from_the_mean(shape, fmt):
    """Both walks shift a tile's sums by the mean of its first values (the column path: its first
    32 rows; the row path: a channel's first 512 elements of the tile): with those far from the
    rest (and a mean 1000 std away) the column path's shifted sums would lose the variance to
    rounding (its two cases fail without the second pass around the first pass's mean); the row
    path's shift covers 1/32 of a tile, which bounds its loss, so its case checks the values."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal(shape) + 1000.0
    rows = x.reshape(-1, shape[-1]) if fmt == "NHWC" or len(shape) == 2 else None
    if rows is not None:
        rows[:32] += 60.0  # the first rows of the tensor (and so of its first tile)
    else:
        x[:, :, :512] += 60.0  # a channel's first elements in every row of the batch
    arrays = {"input": x, "weight": np.ones(shape[-1] if fmt == "NHWC" else shape[1])}
    got, want = run_direct(arrays, "float32", training=True, data_format=fmt)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-7)   # save_mean
    np.testing.assert_allclose(got[2], want[2], rtol=2e-6)   # save_invstd
    assert_matches(got, want, RTOL["float32"], STATS_RTOL["float32"])


@pytest.mark.parametrize("case", ["row", "row_tiles", "row_blocks", "col_nhwc", "col_nhwc_chunks", "col_short"])
@pytest.mark.parametrize("training", [True, False])
def test_bitwise_identical_for_any_thread_count(case, training):
    """Also across block sizes (they follow the thread count): row_blocks takes blocks of 16, 8, 5, 4."""
    shape, fmt = SHAPES[case]
    big = (shape[0] * 16,) + shape[1:]  # past the one-thread threshold
    arrays = make(big, fmt, seed=9)
    x = arrays["input"].astype(np.float32)
    params = [arrays[n].astype(np.float32) for n in ("weight", "bias", "running_mean", "running_var")]
    results = []
    for threads in (1, 2, 3, 4):
        native.set_num_threads(min(threads, native.max_threads()))
        results.append(native.forward_direct(x, *params, training=training, channel_last=fmt == "NHWC"))
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_second_pass_is_decided_per_channel(dtype):
    """The row path takes channels in blocks whose size follows the thread count; a channel's second
    pass (its shift far from its mean) must not depend on its neighbours, or the bits would depend on
    the thread count: one far channel (7) among 64, the same bits on 1-4 threads."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((128, 64, 40)) + 1000.0).astype(dtype)  # blocks of 12 / 8 / 5 / 4 channels (float32)
    x[:13, 7, :] += 60.0  # channel 7's first 512 elements of its first tile
    params = [np.ones(64, dtype), np.zeros(64, dtype), np.zeros(64, dtype), np.ones(64, dtype)]
    results = []
    for threads in (1, 2, 3, 4):
        native.set_num_threads(min(threads, native.max_threads()))
        results.append([o.tobytes() for o in native.forward_direct(x, *params, training=True)])
    assert all(r == results[0] for r in results[1:])
    got, want = run_direct({"input": x.astype(np.float64), "weight": np.ones(64)}, dtype, training=True)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-7)  # save_mean
    np.testing.assert_allclose(got[2], want[2], rtol=2e-6)  # save_invstd (y: x - mean rounds at 1000)


# Column-path tensors of 8 MB and more walk tiles up to 1024 columns wide (whole rows up to
# that width); below, 256. Samples: channel-last with a partial second block (1100 = 1024 + 76),
# NC with 1030 channels, and channel-first with short runs (inner 5, 3500 columns).
WIDE_SAMPLES = [((8, 8, 1100), "NHWC"), ((1030,), "NCHW"), ((700, 5), "NCHW")]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("sample,fmt", WIDE_SAMPLES)
@pytest.mark.parametrize("training", [True, False])
def test_wide_column_tiles(dtype, sample, fmt, training):
    """The wide tiles' values against the reference, the same bits on 1, 2 and 3 threads."""
    per_sample = int(np.prod(sample)) * np.dtype(dtype).itemsize
    shape = (-(-(8 << 20) // per_sample) + 3,) + sample  # past the wide-tile threshold, a partial chunk
    arrays = make(shape, fmt, seed=13, offset=3.0)
    got, want = run_direct(arrays, dtype, training=training, momentum=0.2, data_format=fmt)
    assert_matches(got, want, RTOL[dtype], stats_rtol(dtype, dtype))
    x = arrays["input"].astype(dtype)
    assert x.nbytes >= 8 << 20
    params = [arrays[n].astype(dtype) for n in ("weight", "bias", "running_mean", "running_var")]
    results = []
    for threads in (1, 2, 3):
        native.set_num_threads(min(threads, native.max_threads()))
        outs = native.forward_direct(x, *params, training=training, channel_last=fmt == "NHWC")
        results.append([o.tobytes() for o in outs if o is not None])
    assert all(r == results[0] for r in results[1:])


def _at_offset(shape, dtype, offset):
    """An uninitialised C-contiguous array whose data starts `offset` bytes past a 64-byte boundary."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    buf = np.empty(n + 128, np.uint8)
    start = (-buf.ctypes.data) % 64 + offset
    return buf[start:start + n].view(dtype).reshape(shape)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("sample,fmt", [((17, 31, 300), "NHWC"),    # column path, wide tiles of whole rows
                                        ((7, 3, 1096), "NHWC"),      # column path, tiles of part of a row
                                        ((9, 16, 8192), "NHWC"),     # column path, one tile spans a row
                                        ((129, 128, 130), "NCHW")])  # row path
def test_streamed_output_does_not_depend_on_its_alignment(dtype, sample, fmt):
    """Outputs of >= 16 MB are stored around the cache where their alignment allows (the row
    path peels each run's head; the column path streams aligned rows only): the same bits at
    any offset of y, streamed or not, and the reference's values."""
    per_sample = int(np.prod(sample)) * np.dtype(dtype).itemsize
    shape = (-(-(16 << 20) // per_sample),) + sample
    arrays = make(shape, fmt, seed=5)
    x = arrays["input"].astype(dtype)
    params = [arrays[n].astype(np.float32) for n in ("weight", "bias", "running_mean", "running_var")]
    assert x.nbytes >= 16 << 20  # the kernel's stream threshold
    itemsize = np.dtype(dtype).itemsize
    results = []
    for offset in (0, itemsize, 3 * itemsize, 16 + itemsize, 32 - itemsize):
        y = _at_offset(shape, dtype, offset)
        y.fill(np.nan)
        outs = native.forward_direct(x, *params, training=True, channel_last=fmt == "NHWC", output=y)
        assert outs[0] is y
        results.append(y.tobytes())
    assert all(r == results[0] for r in results[1:])
    want = batch_norm_forward_ref(x.astype(np.float64), *(p.astype(np.float64) for p in params), training=True,
                                  data_format=fmt)[0]
    got = np.frombuffer(results[0], dtype).reshape(shape).astype(np.float64)
    assert np.max(np.abs(got - want)) <= RTOL[dtype] * max(1.0, float(np.max(np.abs(want))))


def test_direct_output_must_fit():
    x = np.ones((2, 3, 4, 4), np.float32)
    with pytest.raises(ValueError, match="output expected a contiguous float32 array of shape"):
        native.forward_direct(x, training=True, output=np.empty((2, 3, 4, 5), np.float32))


def test_direct_entry_rejects_a_call_that_does_not_fit():
    """Error codes (op_def/batch_norm_backward.yaml kernel_errors) and untouched outputs."""
    from mindspore_bn_grad.spec import FORWARD_YAML, load_opdef

    x = np.ones((2, 3, 4), np.float32)
    good = [x, np.ones(3, np.float32), None, None, None]
    cases = {
        "bad_shape": (good[:1] + [np.ones(4, np.float32)] + good[2:], [np.empty_like(x)]),
        "bad_rank": ([np.ones(3, np.float32)] + good[1:], [np.empty(3, np.float32)]),
        "bad_dtype": ([x.astype(np.int32)] + good[1:], [np.empty_like(x)]),
    }
    codes = {e.name: e.code for e in load_opdef().kernel_errors}
    opdef = load_opdef(FORWARD_YAML)
    for name, (ins, out) in cases.items():
        saves = [np.full(3, -7.0, np.float32), np.full(3, -7.0, np.float32)]
        arrays = ins + out + saves + [None, None]
        names = ["int32" if a is not None and a.dtype == np.int32 else native._dtype_name(a, False) for a in arrays]
        m = native.marshal(arrays, names)
        rc = native._forward_lib().MsBnForwardDirect(*m.args, 1, 0.1, 1e-5, 0)
        assert rc == codes[name], (name, rc)
        assert np.all(saves[0] == -7.0) and np.all(saves[1] == -7.0), name
    assert len(opdef.inputs) + len(opdef.outputs) == len(good) + 5


# ---------------------------------------------------------------- through MindSpore

def _ms(a, dtype="float32"):
    import mindspore as ms
    return None if a is None else ms.Tensor(np.asarray(a, np.float32)).astype(getattr(ms, dtype))


def call(mode, tensors, **attrs):
    import mindspore as ms
    import mindspore_bn_grad as mbg

    if mode != "graph":
        ms.set_context(mode=ms.PYNATIVE_MODE)
        return list(mbg.batch_norm_forward(*tensors, **attrs))
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        op = mbg.BatchNormForward(**attrs)

        class Call(ms.nn.Cell):
            def __init__(self):
                super().__init__()
                self.op = op

            def construct(self, x, w, b, rm, rv):
                return self.op(x, w, b, rm, rv)

        return list(Call()(*tensors))
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


@pytest.mark.parametrize("case,dtype,absent", [("row", "float32", ()), ("col_nhwc", "float16", ()),
                                               ("nc", "float32", ("weight", "bias", "running_mean", "running_var"))])
@pytest.mark.parametrize("training", [True, False])
def test_primitive(mode, case, dtype, absent, training):
    import mindspore as ms

    shape, fmt = SHAPES[case]
    arrays = make(shape, fmt, seed=11)
    for n in absent:
        arrays[n] = None
    tensors = [_ms(arrays["input"], dtype)] + [_ms(arrays[n]) for n in ("weight", "bias", "running_mean",
                                                                        "running_var")]
    outs = call(mode, tensors, training=training, momentum=0.15, eps=1e-4, data_format=fmt)
    xq = tensors[0].astype(ms.float64).asnumpy()
    pq = [None if t is None else t.astype(ms.float64).asnumpy() for t in tensors[1:]]
    want = batch_norm_forward_ref(xq, *pq, training=training, momentum=0.15, eps=1e-4, data_format=fmt)
    stats_dtype = ms.float32 if "weight" not in absent else getattr(ms, dtype)  # BatchNormExt's rule
    assert outs[0].dtype == getattr(ms, dtype) and outs[1].dtype == stats_dtype
    assert_matches([o.astype(ms.float64).asnumpy() for o in outs], want, RTOL[dtype],
                   stats_rtol(dtype, "float32" if "weight" not in absent else dtype))


def test_matches_mindspore_batchnorm2d():
    """One training step of nn.BatchNorm2d (its momentum is ours' complement) and then eval."""
    import mindspore as ms
    import mindspore_bn_grad as mbg

    ms.set_context(mode=ms.PYNATIVE_MODE)
    arrays = make((4, 6, 5, 7), seed=13)
    bn = ms.nn.BatchNorm2d(6, momentum=0.8, gamma_init=ms.Tensor(arrays["weight"].astype(np.float32)),
                           beta_init=ms.Tensor(arrays["bias"].astype(np.float32)))
    x = _ms(arrays["input"])
    w, b, rm, rv = bn.gamma.value(), bn.beta.value(), bn.moving_mean.value(), bn.moving_variance.value()
    outs = mbg.batch_norm_forward(x, w, b, rm, rv, training=True, momentum=0.2)
    bn.set_train(True)
    y = bn(x).asnumpy()
    np.testing.assert_allclose(outs[0].asnumpy(), y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outs[3].asnumpy(), bn.moving_mean.asnumpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs[4].asnumpy(), bn.moving_variance.asnumpy(), rtol=1e-5, atol=1e-6)
    bn.set_train(False)
    ours = mbg.batch_norm_forward(x, w, b, outs[3], outs[4], training=False)
    np.testing.assert_allclose(ours[0].asnumpy(), bn(x).asnumpy(), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- rejections

def _good():
    a = make((2, 3, 4), seed=0)
    return {n: _ms(v) for n, v in a.items()}


def _with(**over):
    def build():
        args = _good()
        args.update({k: (v() if callable(v) else v) for k, v in over.items()})
        return args
    return build


TE, VE = TypeError, ValueError
# (id, builder of the tensor arguments, attributes, exception, message regex)
REJECTIONS = [
    ("input_missing", _with(input=None), {}, TE, r"input expected a mindspore\.Tensor, got NoneType"),
    ("input_int32", _with(input=lambda: _good()["input"].astype(__import__("mindspore").int32)), {}, TE,
     r"input expected a floating dtype \(float16, bfloat16, float32, float64\), got int32"),
    ("weight_bool", _with(weight=lambda: _good()["weight"].astype(__import__("mindspore").bool_)), {}, TE,
     r"weight expected a floating dtype .*, got bool"),
    ("bias_length", _with(bias=lambda: _ms(np.ones(4))), {}, VE,
     r"bias expected length 3 \(the channel count of input\), got length 4"),
    ("running_var_2d", _with(running_var=lambda: _ms(np.ones((3, 1)))), {}, VE,
     r"running_var expected a 1-D \(C,\) tensor, got shape \(3, 1\)"),
    ("weight_length_nhwc", _with(), {"data_format": "NHWC"}, VE,
     r"weight expected length 4 \(the channel count of input\), got length 3"),
    ("rank1", _with(input=lambda: _ms(np.ones(3))), {}, VE, r"input expected rank 2\.\.8, got rank 1"),
    ("rank9", _with(input=lambda: _ms(np.ones((1, 3) + (1,) * 7))), {}, VE, r"input expected rank 2\.\.8, got rank 9"),
    ("data_format_rank", _with(), {"data_format": "NCDHW"}, VE, r"data_format expected a format that fits rank 3"),
    ("momentum_negative", _with(), {"momentum": -0.1}, VE, r"momentum expected a finite float >= 0\.0, got -0\.1"),
    ("momentum_nan", _with(), {"momentum": float("nan")}, VE, r"momentum expected a finite float >= 0\.0, got nan"),
    ("momentum_str", _with(), {"momentum": "0.1"}, TE, r"momentum expected a float, got '0\.1'"),
    ("eps_negative", _with(), {"eps": -1.0}, VE, r"eps expected a finite float >= 0\.0, got -1\.0"),
    ("training_int", _with(), {"training": 1}, TE, r"training expected a bool, got 1"),
    ("input_ndarray", _with(input=np.ones((2, 3, 4), np.float32)), {}, TE, r"input expected a mindspore\.Tensor"),
]


@pytest.mark.parametrize("case", REJECTIONS, ids=[c[0] for c in REJECTIONS])
def test_rejections(mode, case):
    _, build, attrs, exc, pattern = case
    args = build()
    tensors = [args[n] for n in ("input", "weight", "bias", "running_mean", "running_var")]
    with pytest.raises(Exception) as info:
        [o.asnumpy() for o in call(mode, tensors, **attrs)]
    e = info.value
    assert type(e) is exc, f"{type(e).__name__}: {e}"
    assert re.search("^BatchNormForward: " + pattern, str(e)), str(e)
    # raised by the package's own check, not from a kernel's return code
    assert [f.name for f in traceback.extract_tb(e.__traceback__)][-1] == "fail"


def test_refused_on_ascend(monkeypatch):
    """No Ascend kernel: a clear error naming MindSpore's own BatchNormExt, before anything is built."""
    import mindspore_bn_grad as mbg
    from mindspore_bn_grad import target

    monkeypatch.setattr(target, "device_target", lambda: "Ascend")
    with pytest.raises(RuntimeError, match=r"^BatchNormForward: device_target expected 'CPU', got 'Ascend' .*"
                                           r"BatchNormExt"):
        mbg.BatchNormForward(training=True)


def test_functional_form_inside_a_graph():
    """batch_norm_forward() called in a GRAPH construct builds the primitive there."""
    import mindspore as ms
    import mindspore_bn_grad as mbg

    class Net(ms.nn.Cell):
        def construct(self, x, w, b, rm, rv):
            return mbg.batch_norm_forward(x, w, b, rm, rv, True, 0.3, 1e-5, "NHWC")

    shape, fmt = SHAPES["col_nhwc"]
    arrays = make(shape, fmt, seed=17)
    tensors = [_ms(arrays[n]) for n in ("input", "weight", "bias", "running_mean", "running_var")]
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        outs = [o.asnumpy().astype(np.float64) for o in Net()(*tensors)]
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    q = [t.asnumpy().astype(np.float64) for t in tensors]
    assert_matches(outs, batch_norm_forward_ref(*q, training=True, momentum=0.3, data_format=fmt),
                   RTOL["float32"], STATS_RTOL["float32"])
