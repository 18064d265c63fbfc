"""Bad input, at both layers: a clear Python exception before any kernel runs, and an error code from
the compiled kernel for a call that bypasses the Python checks.

1. Python (the public API and the primitive):

The table below covers every rejection of docs/operator.md section 4 as
this project applies it, plus non-Tensor arguments, integer / bool / complex
tensors, rank 0, 1 and 9, bad eps / output_mask / data_format / training
values, channel-length and dtype mismatches, and the per-SoC rules (a sample
per rule; test_soc_rules.py enumerates them). Each case runs
  - PYNATIVE through batch_norm_backward() (the infer step of the call), and
  - GRAPH through the BatchNormBackward primitive inside a compiled Cell
    (attribute errors at construction, tensor errors at compile).
Each must raise the stated exception type with a message
`BatchNormBackward: <arg> expected ..., got ...`, raised by the package's
own check (the innermost frame is checks.fail), so it comes from the
argument checks and not from a kernel's error code.

Rejections that cannot occur here, and why:
  - "a mask bit True while its output is missing": the outputs are always
    allocated by MindSpore (a masked one comes back zero-filled);
  - "input, gradOut, gradInput with different formats": one data_format
    attribute describes all three; gradInput's dtype/shape/format are derived.

2. The compiled kernel (the direct C entry MsBnGradDirect, used without
   MindSpore): inconsistent shapes, ranks, dtypes and null pointers each return
   the error code of op_def/batch_norm_backward.yaml and leave every output
   buffer untouched (no out-of-bounds access: scripts/run_sanitizers.sh runs
   test_direct_entry_inconsistent_shapes under ASan).
"""
import ctypes
import re

import numpy as np
import pytest

from _harness import NAMES, call_op, make_arrays

X_SHAPE = (2, 3, 4)


def _t(a, dtype="float32"):
    import mindspore as ms
    t = ms.Tensor(np.asarray(a, dtype=np.float32))
    return t if dtype == "float32" else t.astype(getattr(ms, dtype))


def _good(shape=X_SHAPE, c=None):
    c = shape[1] if c is None else c
    x = np.random.default_rng(0).standard_normal(shape)
    return {"grad_out": _t(x), "input": _t(x), "weight": _t(np.ones(c)), "running_mean": _t(np.zeros(c)),
            "running_var": _t(np.ones(c)), "save_mean": _t(np.zeros(c)), "save_invstd": _t(np.ones(c))}


def _with(**over):
    """A builder: the good arguments with some replaced (values may be callables making them)."""
    def build():
        args = _good()
        for k, v in over.items():
            args[k] = v() if callable(v) else v
        return args
    return build


def _shape(shape, **kw):
    return lambda: {**_good(shape, **kw)}


def _retype(name, dtype):
    def build():
        args = _good()
        args[name] = args[name].astype(dtype())
        if name == "grad_out":
            args["input"] = args["input"].astype(dtype())
        return args
    return build


def _ms(name):
    return lambda: getattr(__import__("mindspore"), name)


TE, VE = TypeError, ValueError
FLOATS = r"float16, bfloat16, float32, float64"

# (id, builder of the tensor arguments, attributes, exception, message regex, SoC or None)
CASES = [
    # --- spec 4, NULLPTR: gradOut or input missing
    ("grad_out_missing", _with(grad_out=None), {}, TE, r"grad_out expected a mindspore\.Tensor, got NoneType", None),
    ("input_missing", _with(input=None), {}, TE, r"input expected a mindspore\.Tensor, got NoneType", None),
    # --- spec 4, INVALID: gradOut / input dtype outside the supported set
    ("grad_out_int32", _retype("grad_out", _ms("int32")), {}, TE, rf"grad_out expected one of {FLOATS}, got int32", None),
    ("grad_out_int64", _retype("grad_out", _ms("int64")), {}, TE, rf"grad_out expected one of {FLOATS}, got int64", None),
    ("grad_out_uint8", _retype("grad_out", _ms("uint8")), {}, TE, rf"grad_out expected one of {FLOATS}, got uint8", None),
    ("grad_out_bool", _retype("grad_out", _ms("bool_")), {}, TE, rf"grad_out expected one of {FLOATS}, got bool", None),
    ("grad_out_complex", _retype("grad_out", _ms("complex64")), {}, TE, r"grad_out expected one of .*, got complex64", None),
    ("input_int32", _retype("input", _ms("int32")), {}, TE, r"input expected .*, got int32", None),
    # --- per-channel tensors with an unsupported dtype
    ("weight_int32", _retype("weight", _ms("int32")), {}, TE, rf"weight expected one of {FLOATS}, got int32", None),
    ("weight_bool", _retype("weight", _ms("bool_")), {}, TE, rf"weight expected one of {FLOATS}, got bool", None),
    ("running_mean_int64", _retype("running_mean", _ms("int64")), {"training": False}, TE,
     r"running_mean expected one of .*, got int64", None),
    ("running_var_int8", _retype("running_var", _ms("int8")), {"training": False}, TE,
     r"running_var expected one of .*, got int8", None),
    ("save_mean_int32", _retype("save_mean", _ms("int32")), {}, TE, r"save_mean expected one of .*, got int32", None),
    ("save_invstd_bool", _retype("save_invstd", _ms("bool_")), {}, TE, r"save_invstd expected one of .*, got bool", None),
    ("save_invstd_int32", _retype("save_invstd", _ms("int32")), {}, TE, r"save_invstd expected one of .*, got int32", None),
    # --- per-channel tensors with an unsupported shape (rank)
    ("weight_2d", _with(weight=lambda: _t(np.ones((3, 1)))), {}, VE, r"weight expected a 1-D \(C,\) tensor, got shape \(3, 1\)", None),
    ("weight_rank0", _with(weight=lambda: _t(1.0)), {}, VE, r"weight expected a 1-D \(C,\) tensor, got shape \(\)", None),
    ("save_invstd_2d", _with(save_invstd=lambda: _t(np.ones((1, 3)))), {}, VE, r"save_invstd expected a 1-D", None),
    # --- lengths differing from the channel count (each per-channel tensor)
    *[(f"{n}_length", _with(**{n: lambda: _t(np.ones(4))}), {"training": n != "running_mean" and n != "running_var"},
       VE, rf"{n} expected length 3 \(the channel count of input\), got length 4", None)
      for n in ("weight", "running_mean", "running_var", "save_mean", "save_invstd")],
    ("weight_length_channel_last", _with(weight=lambda: _t(np.ones(3))), {"data_format": "NHWC"}, VE,
     r"weight expected length 4 \(the channel count of input\), got length 3", None),
    ("save_mean_empty_training", _with(save_mean=lambda: _t(np.zeros(0))), {"training": True}, VE,
     r"save_mean expected length 3", None),
    ("save_invstd_missing_training", _with(save_invstd=None), {"training": True}, VE,
     r"save_invstd expected a \(C,\) tensor when training=True, got None", None),
    ("save_mean_missing_training", _with(save_mean=None), {"training": True}, VE,
     r"save_mean expected a \(C,\) tensor when training=True, got None", None),
    # --- input, gradOut with different dtypes / shapes; rank outside 2..8
    ("input_dtype_differs", _with(input=lambda: _good()["input"].astype(__import__("mindspore").float16)), {}, TE,
     r"input expected float32 \(the dtype of grad_out\), got float16", None),
    ("input_f64_vs_f32", _with(input=lambda: _good()["input"].astype(__import__("mindspore").float64)), {}, TE,
     r"input expected float32 \(the dtype of grad_out\), got float64", None),
    ("input_shape_differs", _with(input=lambda: _t(np.ones((2, 3, 5)))), {}, VE,
     r"input expected the shape of grad_out", None),
    ("input_rank_differs", _with(input=lambda: _t(np.ones((2, 3, 4, 1)))), {}, VE,
     r"input expected the shape of grad_out", None),
    ("rank0", lambda: {**_good(), "grad_out": _t(1.0), "input": _t(1.0)}, {}, VE, r"grad_out expected rank 2\.\.8, got rank 0", None),
    ("rank1", lambda: {**_good(), "grad_out": _t(np.ones(3)), "input": _t(np.ones(3))}, {}, VE,
     r"grad_out expected rank 2\.\.8, got rank 1", None),
    ("rank9", _shape((1, 3) + (1,) * 7), {}, VE, r"grad_out expected rank 2\.\.8, got rank 9", None),
    # --- data_format unknown or not fitting the rank
    ("data_format_unknown", _with(), {"data_format": "NCWH"}, VE,
     r"data_format expected one of \['NCHW', 'NCDHW', 'NHWC', 'NDHWC'\], got 'NCWH'", None),
    ("data_format_lowercase", _with(), {"data_format": "nchw"}, VE, r"data_format expected one of .*, got 'nchw'", None),
    ("data_format_int", _with(), {"data_format": 1}, TE, r"data_format expected one of .*, got 1", None),
    ("data_format_ncdhw_rank3", _with(), {"data_format": "NCDHW"}, VE,
     r"data_format expected a format that fits rank 3 \(NCHW, NHWC\), got 'NCDHW'", None),
    ("data_format_ndhwc_rank4", _shape((2, 3, 4, 5)), {"data_format": "NDHWC"}, VE,
     r"data_format expected a format that fits rank 4", None),
    ("data_format_ncdhw_rank4", _shape((2, 3, 4, 5)), {"data_format": "NCDHW"}, VE,
     r"data_format expected a format that fits rank 4 \(NCHW, NHWC\), got 'NCDHW'", None),
    ("data_format_ndhwc_rank3", _with(), {"data_format": "NDHWC"}, VE,
     r"data_format expected a format that fits rank 3 \(NCHW, NHWC\), got 'NDHWC'", None),
    # --- outputMask whose length is not 3, or not bools
    ("mask_len2", _with(), {"output_mask": (True, True)}, VE, r"output_mask expected 3 bools, got length 2", None),
    ("mask_len4", _with(), {"output_mask": (True,) * 4}, VE, r"output_mask expected 3 bools, got length 4", None),
    ("mask_empty", _with(), {"output_mask": ()}, VE, r"output_mask expected 3 bools, got length 0", None),
    ("mask_ints", _with(), {"output_mask": (1, 0, 1)}, TE, r"output_mask expected a tuple of 3 bools, got \(1, 0, 1\)", None),
    ("mask_str", _with(), {"output_mask": "TTT"}, TE, r"output_mask expected a tuple of 3 bools, got 'TTT'", None),
    ("mask_none", _with(), {"output_mask": None}, TE, r"output_mask expected a tuple of 3 bools, got None", None),
    ("mask_bool", _with(), {"output_mask": True}, TE, r"output_mask expected a tuple of 3 bools, got True", None),
    ("mask_ndarray", _with(), {"output_mask": np.array([True, True, True])}, TE,
     r"output_mask expected a tuple of 3 bools, got array", None),
    # --- eps negative, NaN, infinite, wrong type
    ("eps_negative", _with(), {"eps": -1e-5}, VE, r"eps expected a finite float >= 0\.0, got -1e-05", None),
    ("eps_minus_one", _with(), {"eps": -1.0}, VE, r"eps expected a finite float >= 0\.0, got -1\.0", None),
    ("eps_nan", _with(), {"eps": float("nan")}, VE, r"eps expected a finite float >= 0\.0, got nan", None),
    ("eps_inf", _with(), {"eps": float("inf")}, VE, r"eps expected a finite float >= 0\.0, got inf", None),
    ("eps_neg_inf", _with(), {"eps": -float("inf")}, VE, r"eps expected a finite float >= 0\.0, got -inf", None),
    ("eps_str", _with(), {"eps": "1e-5"}, TE, r"eps expected a float, got '1e-5'", None),
    ("eps_none", _with(), {"eps": None}, TE, r"eps expected a float, got None", None),
    ("eps_bool", _with(), {"eps": True}, TE, r"eps expected a float, got True", None),
    ("eps_complex", _with(), {"eps": 1e-5j}, TE, r"eps expected a float, got 1e-05j", None),
    ("eps_list", _with(), {"eps": [1e-5]}, TE, r"eps expected a float, got \[1e-05\]", None),
    # --- training of the wrong type
    ("training_int", _with(), {"training": 1}, TE, r"training expected a bool, got 1", None),
    ("training_none", _with(), {"training": None}, TE, r"training expected a bool, got None", None),
    ("training_str", _with(), {"training": "True"}, TE, r"training expected a bool, got 'True'", None),
    # --- per-SoC rules (dtype, format, mixed precision) name the SoC
    ("soc910_bfloat16", _retype("grad_out", _ms("bfloat16")), {}, TE, r"grad_out expected .*, got bfloat16 on ascend910", "ascend910"),
    ("soc910b_nhwc", _shape((2, 3, 4, 5)), {"data_format": "NHWC"}, VE, r"grad_out format expected one of NC, NCL, NCHW, NCDHW, ND, got NHWC on ascend910b", "ascend910b"),
    ("soc910b_mixed_weight", _retype("weight", _ms("float16")), {}, TE, r"weight expected .*float32.*, got float16 on ascend910b",
     "ascend910b"),
    ("soc310p_float64", _retype("grad_out", _ms("float64")), {}, TE, r"grad_out expected .*, got float64 on ascend310p", "ascend310p"),
    ("soc950_f32_with_f16_param", _retype("save_mean", _ms("float16")), {}, TE, r"save_mean expected .*, got float16 on ascend950",
     "ascend950"),
]

# Non-Tensor arguments: (id, argument, value, expected message fragment per mode)
NON_TENSORS = [
    ("list", [[1.0] * 4] * 3), ("tuple", (1.0, 2.0, 3.0)), ("ndarray", np.ones(X_SHAPE, np.float32)),
    ("float", 3.0), ("int", 3), ("bool", True), ("str", "x"),
]


def _call(mode, args, attrs):
    return [o.asnumpy() for o in call_op(mode, [args.get(n) for n in NAMES], **attrs)]


def _assert_rejected(mode, exc, pattern, args, attrs):
    with pytest.raises(Exception) as info:
        _call(mode, args, attrs)
    e = info.value
    assert type(e) is exc, f"{type(e).__name__}: {e}"
    msg = str(e)
    assert re.search(r"BatchNormBackward: \w+( format)? expected .+, got ", msg), msg
    assert re.search("BatchNormBackward: " + pattern, msg), msg
    # Raised by the package's own check, not from a kernel's return code.
    frames = [f.name for f in __import__("traceback").extract_tb(e.__traceback__)]
    assert frames[-1] == "fail", frames


@pytest.fixture
def target():
    from mindspore_bn_grad.target import set_target_soc
    yield set_target_soc
    set_target_soc(None)


@pytest.mark.parametrize("mode", ["pynative", "graph"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_rejected_before_any_kernel(mode, case, target):
    _, build, attrs, exc, pattern, soc = case
    target(soc)
    _assert_rejected(mode, exc, pattern, build(), attrs)


@pytest.mark.parametrize("mode", ["pynative", "graph"])
@pytest.mark.parametrize("name", ["grad_out", "weight", "save_invstd"])
@pytest.mark.parametrize("kind,value", NON_TENSORS, ids=[k for k, _ in NON_TENSORS])
def test_non_tensor_arguments(mode, name, kind, value):
    args = _good()
    args[name] = value
    optional = name != "grad_out"
    what = r"a mindspore\.Tensor" + (" or None" if optional else "")
    _assert_rejected(mode, TypeError, rf"{name} expected {what}, got ", args, {})


def test_rejection_leaves_the_process_usable():
    """After a burst of rejections the operator still computes correct values."""
    from _harness import check, make_arrays
    for case in CASES[:10]:
        _, build, attrs, exc, _, soc = case
        if soc is None:
            with pytest.raises(exc):
                _call("pynative", build(), attrs)
    check("pynative", make_arrays(X_SHAPE, seed=1), {})


@pytest.mark.parametrize("kwargs,exc,match", [
    ({"output_mask": (1, True, True)}, TypeError, r"output_mask expected a tuple of 3 bools"),
    ({"output_mask": (True, True)}, ValueError, r"output_mask expected 3 bools"),
    ({"eps": float("nan")}, ValueError, r"eps expected a finite float"),
    ({"eps": -1e-5}, ValueError, r"eps expected a finite float >= 0.0"),
    ({"training": 1}, TypeError, r"training expected a bool, got 1"),
    ({"data_format": "NCWH"}, ValueError, r"data_format expected one of"),
])
def test_bad_attributes_after_good_ones(kwargs, exc, match):
    """PYNATIVE remembers attribute values it has seen: a bad value equal to a good one
    (1 == True, -1e-5 vs 1e-5 ...) must still be checked, every time."""
    import mindspore as ms
    from mindspore_bn_grad import batch_norm_backward
    from mindspore_bn_grad import backward
    arrays = make_arrays((2, 3, 4))
    x = ms.Tensor(arrays["grad_out"])
    c = ms.Tensor(arrays["weight"])
    good = dict(training=True, eps=1e-5, output_mask=(True, True, True), data_format="NCHW")
    first = [o.asnumpy() for o in batch_norm_backward(x, x, c, None, None, c, c, **good)]
    op = backward._ops_seen[backward._fast_key(**good)]
    for _ in range(2):  # and again once the good values are remembered
        with pytest.raises(exc, match="BatchNormBackward: " + match):
            batch_norm_backward(x, x, c, None, None, c, c, **{**good, **kwargs})
        again = [o.asnumpy() for o in batch_norm_backward(x, x, c, None, None, c, c, **good)]
        assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert backward._ops_seen[backward._fast_key(**good)] is op
    # NumPy bools and a list mask are valid (the checked path) and give the same op.
    np_mask = (np.bool_(True),) * 3
    assert backward._fast_key(**{**good, "output_mask": np_mask}) is None
    again = batch_norm_backward(x, x, c, None, None, c, c, **{**good, "output_mask": list(np_mask)})
    assert all(np.array_equal(a, b.asnumpy()) for a, b in zip(first, again))
    # eps is keyed by its bits: -0.0 is not 0.0 (their kernel attributes differ).
    assert backward._fast_key(True, -0.0, (True,) * 3, "NCHW") != backward._fast_key(True, 0.0, (True,) * 3, "NCHW")


# --------------------------------------------------------- 2. the compiled kernel's direct C entry

def _lib():
    from mindspore_bn_grad.cpu_kernel import native
    return native.lib()


class Call:
    """A raw MsBnGradDirect call whose shapes, ranks, dtypes and pointers can lie."""
    SENTINEL = 12345.0

    def __init__(self, shape=(2, 3, 4), c=None, dtype="float32"):
        c = shape[1] if c is None else c
        np_dt = {"float32": np.float32, "float64": np.float64, "float16": np.float16}[dtype]
        size = max(1, int(np.prod(shape)))
        rng = np.random.default_rng(0)
        self.bufs = [rng.standard_normal(size).astype(np_dt), rng.standard_normal(size).astype(np_dt)]
        self.bufs += [np.ones(max(c, 1), np_dt) for _ in range(5)]
        self.bufs += [np.full(size, self.SENTINEL, np_dt), np.full(max(c, 1), self.SENTINEL, np_dt),
                      np.full(max(c, 1), self.SENTINEL, np_dt)]
        self.ptrs = [b.ctypes.data for b in self.bufs]
        self.shapes = [list(shape), list(shape)] + [[c]] * 5 + [list(shape), [c], [c]]
        self.dtypes = [dtype] * 10
        self.nparam = 10
        self.training = 1
        self.mask = (1, 1, 1)
        self.channel_last = 0

    def run(self):
        n = len(self.shapes)
        params = (ctypes.c_void_p * n)(*self.ptrs)
        ndims = (ctypes.c_int * n)(*[len(s) for s in self.shapes])
        bufs = [(ctypes.c_int64 * max(1, len(s)))(*s) for s in self.shapes]
        shapes = (ctypes.POINTER(ctypes.c_int64) * n)(*[ctypes.cast(b, ctypes.POINTER(ctypes.c_int64)) for b in bufs])
        dtypes = (ctypes.c_char_p * n)(*[d.encode() if d is not None else None for d in self.dtypes])
        return _lib().MsBnGradDirect(self.nparam, params, ndims, shapes, dtypes, self.training, 1e-5,
                                     *self.mask, self.channel_last)

    def outputs_untouched(self):
        return all(np.all(b == self.SENTINEL) for b in self.bufs[7:])


def _set(**kw):
    def f(call):
        for k, v in kw.items():
            if k.startswith("shape_"):
                call.shapes[int(k[6:])] = v
            elif k.startswith("dtype_"):
                call.dtypes[int(k[6:])] = v
            elif k.startswith("null_"):
                call.ptrs[int(k[5:])] = None
            else:
                setattr(call, k, v)
    return f


BIG = 2 ** 40
# (id, mutation, expected error code) -- codes from native.ERRORS
DIRECT_BAD = [
    ("nparam_9", _set(nparam=9), 1),
    ("rank1", _set(shape_0=[24], shape_1=[24], shape_7=[24]), 3),
    ("rank9", _set(shape_0=[2, 3, 4] + [1] * 6, shape_1=[2, 3, 4] + [1] * 6, shape_7=[2, 3, 4] + [1] * 6), 3),
    ("input_shape_differs", _set(shape_1=[2, 3, 5]), 4),
    ("input_bigger_than_buffer", _set(shape_0=[2, 3, 5], shape_7=[2, 3, 5]), 4),
    ("grad_input_shape_differs", _set(shape_7=[2, 3, 3]), 4),
    ("grad_input_rank_differs", _set(shape_7=[2, 3, 4, 1]), 4),
    ("weight_length", _set(shape_2=[4]), 4),
    ("weight_2d", _set(shape_2=[3, 1]), 3),
    ("save_invstd_length", _set(shape_6=[2]), 4),
    ("running_var_length", _set(shape_4=[5]), 4),
    ("grad_weight_length", _set(shape_8=[2]), 4),
    ("grad_bias_length", _set(shape_9=[4]), 4),
    ("grad_bias_rank0", _set(shape_9=[]), 4),
    ("negative_dim", _set(shape_0=[2, -3, 4], shape_1=[2, -3, 4], shape_7=[2, -3, 4]), 6),
    ("numel_overflow", _set(shape_0=[BIG, 3, BIG], shape_1=[BIG, 3, BIG], shape_7=[BIG, 3, BIG]), 6),
    ("dtype_int32", _set(dtype_0="int32", dtype_1="int32", dtype_7="int32"), 2),
    ("dtype_input_differs", _set(dtype_1="float16"), 2),
    ("dtype_grad_input_differs", _set(dtype_7="float64"), 2),
    ("dtype_weight_bool", _set(dtype_2="bool"), 2),
    ("dtype_grad_weight_none", _set(dtype_8="none"), 2),
    ("dtype_grad_weight_vs_bias", _set(dtype_9="float64"), 2),
    ("null_grad_out", _set(null_0=True), 5),
    ("null_grad_input", _set(null_7=True), 5),
    ("null_grad_weight", _set(null_8=True), 5),
    ("training_without_save_mean", _set(null_5=True, shape_5=[], dtype_5="none"), 5),
    ("training_empty_save_invstd", _set(shape_6=[0]), 4),
]


@pytest.mark.parametrize("mutate,code", [c[1:] for c in DIRECT_BAD], ids=[c[0] for c in DIRECT_BAD])
def test_direct_entry_inconsistent_shapes(mutate, code):
    call = Call()
    mutate(call)
    assert call.run() == code
    assert call.outputs_untouched(), "an output was written on a rejected call"
    # and a consistent call still works afterwards
    good = Call()
    assert good.run() == 0 and not good.outputs_untouched()


def test_direct_entry_null_arrays():
    """Null ndims / shapes / dtypes / params: an error code, no dereference."""
    lib = _lib()
    assert lib.MsBnGradDirect(10, None, None, None, None, 1, 1e-5, 1, 1, 1, 0) != 0


def test_direct_python_wrapper_rejects_bad_arrays():
    from mindspore_bn_grad.cpu_kernel import native
    x = np.ones(X_SHAPE, np.float32)
    with pytest.raises(TypeError, match="BatchNormBackward: direct call expected float16/float32/float64"):
        native.direct(x.astype(np.int32), x.astype(np.int32), None, None, None, np.zeros(3, np.float32),
                       np.ones(3, np.float32))
    with pytest.raises(RuntimeError, match=r"kernel returned 4 \(shapes do not fit together\)"):
        native.direct(x, x, np.ones(4, np.float32), None, None, np.zeros(3, np.float32), np.ones(3, np.float32))
