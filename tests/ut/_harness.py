"""The shared test harness: runners, the bfloat16 codec and the tolerance model.

`run(mode, arrays, dtypes, **attrs)`: PYNATIVE goes through the public
function batch_norm_backward(); GRAPH goes through the BatchNormBackward
primitive inside a compiled Cell. `direct_outputs(arrays, dtypes, attrs)`
runs the compiled kernel without MindSpore. Values are checked against the
independent float64 reference (tests/reference.py) with one tolerance model
(`assert_close`): the rounding of the stored dtype plus the computation's
error relative to the magnitude of what an output combines.

bfloat16 without MindSpore travels as uint16 bit patterns: `to_bf16_bits`
and `bf16_bits_to_f64` are the one codec of the tests (the Ascend C
simulation uses them too).
"""
import numpy as np

from reference import CHANNEL_LAST, batch_norm_backward_ref

NAMES = ("grad_out", "input", "weight", "running_mean", "running_var", "save_mean", "save_invstd")
OUTPUTS = ("grad_input", "grad_weight", "grad_bias")

# Rounding of the stored result (relative), per output dtype.
OUT_RTOL = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -22, "float64": 1e-13}
# Error of the computation relative to the magnitude of what it combines:
# accumulation is in float32 (or wider) for 16- and 32-bit data, double for float64.
COMPUTE_RTOL = {"float16": 2e-6, "bfloat16": 2e-6, "float32": 2e-6, "float64": 1e-11}


def ms_tensor(a, dtype):
    import mindspore as ms
    if a is None:
        return None
    t = ms.Tensor(np.asarray(a, dtype=np.float64 if dtype == "float64" else np.float32))
    return t.astype(getattr(ms, dtype)) if dtype not in ("float32", "float64") else t


def builtin_kernels(net=None):
    """A context in which MindSpore's own BatchNorm / BatchNormGrad CPU kernels run: once the default
    route has put ours in their place (cpu_kernel/factory.py), a network of MindSpore's own BatchNorm
    cells would otherwise run our kernels too, and a comparison with "the built-in" would compare ours
    with ours. With ``net``: only when it holds none of our cells (a converted network runs as it is)."""
    import contextlib
    from mindspore_bn_grad.cpu_kernel import factory
    if not factory.state().legacy:
        return contextlib.nullcontext()
    if net is not None:
        from mindspore_bn_grad.nn._layers import OurBatchNorm
        if any(isinstance(c, OurBatchNorm) or getattr(c, "bn_native", "") for _, c in net.cells_and_names()):
            return contextlib.nullcontext()
    return factory.use_mindspore_kernels()


def copy_parameter_values(src, dst):
    """dst's Parameters take src's values, in order (the names must match).

    Through NumPy, not ``Tensor.copy()``: in MindSpore 2.10 a ``Tensor.copy()`` made while the
    context is in GRAPH mode leaves every later PYNATIVE launch of the pyboost operators (Add,
    Rsqrt, Mul, ...) in the process waiting for the whole queue; test_pynative_waits saw that
    in later tests.
    """
    import mindspore as ms
    for p, q in zip(src.get_parameters(), dst.get_parameters()):
        assert p.name == q.name, (p.name, q.name)
        q.set_data(ms.Tensor(p.asnumpy()))


def record_backward_ops(monkeypatch, module):
    """Lists every primitive ``module.backward_op`` hands out from now on (the test's monkeypatch undoes it)."""
    handed_out = []
    real = module.backward_op

    def spy(*args, **kw):
        op = real(*args, **kw)
        handed_out.append(op)
        return op

    monkeypatch.setattr(module, "backward_op", spy)
    return handed_out


def launched_backward_ops(monkeypatch):
    """Lists every BatchNormBackward primitive PYNATIVE launches from now on."""
    from mindspore.ops import primitive
    from mindspore_bn_grad.backward import BatchNormBackward
    launched, real = [], primitive._run_op

    def spy(obj, name, args):
        if isinstance(obj, BatchNormBackward):
            launched.append(obj)
        return real(obj, name, args)
    monkeypatch.setattr(primitive, "_run_op", spy)
    return launched


def quantize(a, dtype):
    """The values a tensor of `dtype` holds, as float64 (what the reference must see)."""
    if a is None:
        return None
    return ms_tensor(a, dtype).astype(__import__("mindspore").float64).asnumpy()


def call_op(mode, tensors, **attrs):
    """The 7 inputs (MindSpore tensors, None, or anything a test wants to pass) through
    batch_norm_backward() (PYNATIVE) or the primitive in a compiled Cell (GRAPH)."""
    import mindspore as ms
    import mindspore_bn_grad as mbg

    if mode != "graph":
        ms.set_context(mode=ms.PYNATIVE_MODE)
        return list(mbg.batch_norm_backward(*tensors, **attrs))
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        op = mbg.BatchNormBackward(**attrs)

        class Call(ms.nn.Cell):
            def __init__(self):
                super().__init__()
                self.op = op

            def construct(self, dy, x, w, rm, rv, sm, si):
                return self.op(dy, x, w, rm, rv, sm, si)

        return list(Call()(*tensors))
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


def run(mode, arrays, dtypes, **attrs):
    """arrays: name -> np.ndarray or None; dtypes: name -> dtype name. Returns MindSpore outputs."""
    return call_op(mode, [ms_tensor(arrays.get(n), dtypes.get(n, "float32")) for n in NAMES], **attrs)


# bfloat16 without MindSpore (the direct kernel path): uint16 bit patterns.

def to_bf16_bits(a):
    """float64 -> bfloat16 bit patterns (uint16), round to nearest even, NaN kept quiet."""
    f = np.asarray(a, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    nan = np.isnan(f)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    r[nan] = ((u[nan] | 0x400000) >> 16).astype(np.uint16)
    return r


def bf16_bits_to_f64(b):
    return (np.asarray(b, dtype=np.uint32) << 16).view(np.float32).astype(np.float64)


def encode(a, dtype):
    """(array handed to the direct kernel, the float64 values it holds)."""
    if a is None:
        return None, None
    if dtype == "bfloat16":
        bits = to_bf16_bits(a)
        return bits, bf16_bits_to_f64(bits)
    arr = np.asarray(a, dtype=np.dtype(dtype))
    return arr, arr.astype(np.float64)


def decode(a, dtype):
    return bf16_bits_to_f64(a) if dtype == "bfloat16" else np.asarray(a).astype(np.float64)


def direct_outputs(arrays, dtypes, attrs):
    """Runs the compiled kernel through native.direct (no MindSpore).

    arrays: name -> np.ndarray or None; dtypes: name -> dtype name (input takes
    grad_out's); attrs: training, eps, output_mask, data_format. Returns
    (float64 outputs, the float64 values the inputs hold, output dtypes, raw outputs).
    """
    from mindspore_bn_grad.cpu_kernel import native
    act = dtypes.get("grad_out", "float32")
    enc, q, bf16 = {}, {}, set()
    for n in NAMES:
        dt = act if n in ("grad_out", "input") else dtypes.get(n, act)
        enc[n], q[n] = encode(arrays.get(n), dt)
        if dt == "bfloat16" and arrays.get(n) is not None:
            bf16.add(n)
    pdt = dtypes.get("weight", act) if arrays.get("weight") is not None else act
    if pdt == "bfloat16":
        bf16.add("param_grads")
    outs = native.direct(*(enc[n] for n in NAMES), training=attrs.get("training", True),
                          eps=attrs.get("eps", 1e-5), output_mask=attrs.get("output_mask", (True, True, True)),
                          channel_last=attrs.get("data_format", "NCHW") in CHANNEL_LAST,
                          param_grad_dtype=np.uint16 if pdt == "bfloat16" else np.dtype(pdt),
                          bf16=tuple(bf16))
    odt = (act, pdt, pdt)
    return [decode(o, dt) for o, dt in zip(outs, odt)], q, odt, outs


def check_direct(arrays, dtypes=None, **attrs):
    """direct_outputs() against the reference: shapes, values, zero-filled masked outputs.
    Returns the raw outputs."""
    dtypes = dtypes or {}
    attrs = {"data_format": "NCHW", **attrs}
    got, q, odt, raw = direct_outputs(arrays, dtypes, attrs)
    want = batch_norm_backward_ref(*(q[n] for n in NAMES), **attrs)
    act = dtypes.get("grad_out", "float32")
    for name, g, w, dt in zip(OUTPUTS, got, want, odt):
        assert g.shape == w.shape, (name, g.shape, w.shape)
        assert_close(name, g, w, dt, act, q, attrs)
    for name, g, keep in zip(OUTPUTS, got, attrs.get("output_mask", (True, True, True))):
        if not keep:
            assert not np.any(g), f"{name} is masked and must be zero-filled"
    return raw


def expected(arrays, dtypes, **attrs):
    q = {n: quantize(arrays.get(n), dtypes.get(n, "float32")) for n in NAMES}
    return batch_norm_backward_ref(*(q[n] for n in NAMES), **attrs), q


def out_dtypes(arrays, dtypes):
    gi = dtypes.get("grad_out", "float32")
    p = dtypes.get("weight", "float32") if arrays.get("weight") is not None else gi
    return gi, p, p


def check(mode, arrays, dtypes, **attrs):
    """Runs and compares all three outputs; returns the MindSpore outputs."""
    import mindspore as ms
    outs = run(mode, arrays, dtypes, **attrs)
    (want, q) = expected(arrays, dtypes, **attrs)
    odt = out_dtypes(arrays, dtypes)
    for name, o, w, dt in zip(OUTPUTS, outs, want, odt):
        assert str(o.dtype).lower().replace("mindspore.", "") == dt, (name, o.dtype, dt)
        assert tuple(o.shape) == w.shape, (name, o.shape, w.shape)
        got = o.astype(ms.float64).asnumpy()
        assert_close(name, got, w, dt, dtypes.get("grad_out", "float32"), q, attrs)
    mask = attrs.get("output_mask", (True, True, True))
    for o, keep in zip(outs, mask):
        if not keep:
            assert not np.any(o.astype(ms.float64).asnumpy()), "masked output must be zero-filled"
    return outs


def magnitude(q, attrs, name):
    """Scale of the terms an output combines (for the computation error bound)."""
    dy = q["grad_out"]
    if dy.size == 0:
        return 0.0
    fmt = attrs.get("data_format", "NCHW")
    axis = dy.ndim - 1 if fmt in CHANNEL_LAST else 1
    axes = tuple(i for i in range(dy.ndim) if i != axis)
    sum_abs_dy = np.abs(dy).sum(axis=axes).max() if dy.shape[axis] else 0.0
    x = q["input"]
    xmu = np.abs(x).max() + (np.abs(q["save_mean"]).max() if q.get("save_mean") is not None
                             and q["save_mean"].size else 0.0)
    invstd = 1.0
    for k in ("save_invstd", "running_var"):
        if q.get(k) is not None and q[k].size:
            invstd = max(invstd, np.abs(q[k]).max(), 1.0 / np.sqrt(np.abs(q[k]).min() + 1e-12))
    w = np.abs(q["weight"]).max() if q.get("weight") is not None and q["weight"].size else 1.0
    red = sum_abs_dy * max(1.0, xmu * invstd)
    if name == "grad_input":
        return w * invstd * (np.abs(dy).max() * 2 + xmu * invstd * red / max(1, dy.size // dy.shape[axis]))
    return red


# ----------------------------------------------------------------- tolerances
# The model (assert_close): an output element may differ from the float64
# reference by
#     OUT_RTOL[stored dtype] * |want|  +  COMPUTE_RTOL[compute dtype] * magnitude
# where magnitude() is the scale of the terms the output combines. Every CPU
# path uses it: the direct kernel, MindSpore in both modes, the fuzzing.
#
# Where that magnitude is not finite (inputs holding NaN / Inf, test_numerics)
# or not known (the SyncBatchNorm steps of the Ascend C simulation), the bound
# is relative to the largest reference value instead: assert_close_to_scale.
# The double backward (test_double_backward), whose terms the magnitude does
# not model, keeps the model's output rounding and takes the largest reference
# value as the magnitude, with the compute error of its route:
# assert_close_at_scale.
#
# The Ascend C kernel on the CPU build of the Ascend C API (ascend_sim/
# test_kernel_sim.py) keeps its own (rtol, atol) per dtype: measured on every
# case there, the model would allow up to 300x more error for float32
# grad_input and 2.4x more for the float32 sums, so adopting it would weaken
# those tests.


def assert_close_to_scale(what, got, want, rtol, floor=0.0):
    """Finite outputs within rtol * max(max|want|, floor) of the reference (elements where want is finite);
    floor: the magnitude of terms the output cancels, where that exceeds the result's."""
    fin = np.isfinite(want)
    if not fin.any():
        return
    scale = max(float(np.abs(want[fin]).max()), floor, 1e-30)
    err = float(np.abs(got[fin] - want[fin]).max())
    assert np.all(np.isfinite(got[fin])), f"{what}: non-finite output where the reference is finite"
    assert err <= rtol * scale, f"{what}: max error {err:.3g} > {rtol} * max|reference| ({scale:.3g})"


def assert_close_at_scale(name, got, want, out_dtype, compute_rtol=1e-9):
    """The model with max|want| as the magnitude: OUT_RTOL[out_dtype] * |want| + compute_rtol * max|want|."""
    assert got.shape == want.shape, (name, got.shape, want.shape)
    if want.size == 0:
        return
    scale = np.abs(want).max()
    tol = OUT_RTOL[out_dtype] * np.abs(want) + compute_rtol * scale + 1e-300
    err = np.abs(got - want)
    bad = ~(err <= tol)
    assert not bad.any(), f"{name} ({out_dtype}): {bad.sum()} of {got.size} off; worst {err.max():.3g} (scale {scale:.3g})"


def assert_close(name, got, want, out_dtype, compute_dtype, q, attrs):
    if got.size == 0:
        return
    tol = OUT_RTOL[out_dtype] * np.abs(want) + COMPUTE_RTOL[compute_dtype] * magnitude(q, attrs, name) + 1e-300
    err = np.abs(got - want)
    bad = ~(err <= tol) & ~(np.isnan(got) & np.isnan(want))
    assert not bad.any(), (f"{name} ({out_dtype}): {bad.sum()} of {got.size} off; worst err "
                           f"{err[bad].max():.3g} vs tol {tol[bad].min():.3g}")


def channel_axis(ndim, data_format):
    return ndim - 1 if data_format in CHANNEL_LAST else 1


def make_arrays(shape, data_format="NCHW", seed=0, weight=True, running=True, saved=True):
    """Random activations with saved statistics taken from the data itself."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 2.0 + 0.5
    dy = rng.standard_normal(shape)
    axis = min(channel_axis(len(shape), data_format), len(shape) - 1)
    c = shape[axis]
    axes = tuple(i for i in range(len(shape)) if i != axis)
    if x.size:
        mean, var = x.mean(axis=axes), x.var(axis=axes)
    else:
        mean, var = np.zeros(c), np.ones(c)
    arrays = {"grad_out": dy, "input": x}
    if weight:
        arrays["weight"] = rng.uniform(0.5, 1.5, c) * rng.choice([-1.0, 1.0], c)
    if running:
        arrays["running_mean"] = rng.standard_normal(c) * 0.1
        arrays["running_var"] = rng.uniform(0.5, 2.0, c)
    if saved:
        arrays["save_mean"] = mean
        arrays["save_invstd"] = 1.0 / np.sqrt(var + 1e-5)
    return arrays
