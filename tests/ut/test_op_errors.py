"""Bad input is a clear Python exception raised before any kernel runs.

Each case runs through the public function (PYNATIVE: the infer step of the
call) and through the primitive inside a GRAPH_MODE cell (compile time).
"""
import numpy as np
import pytest

from _harness import make_arrays, run


def _err(mode, exc, match, arrays, dtypes=None, **attrs):
    with pytest.raises(exc, match=match):
        outs = run(mode, arrays, dtypes or {}, **attrs)
        [o.asnumpy() for o in outs]


def base(shape=(2, 3, 4), **kw):
    return make_arrays(shape, **kw)


@pytest.mark.parametrize("shape", [(5,), (2, 3, 1, 1, 1, 1, 1, 1, 1)])
def test_rank_outside_2_to_8(mode, shape):
    _err(mode, ValueError, r"BatchNormBackward: grad_out expected rank 2\.\.8, got rank", base(shape))


def test_input_shape_differs(mode):
    a = base()
    a["input"] = np.zeros((2, 3, 5))
    _err(mode, ValueError, r"BatchNormBackward: input expected the shape of grad_out", a)


def test_input_rank_differs(mode):
    a = base()
    a["input"] = np.zeros((2, 3, 4, 1))
    _err(mode, ValueError, r"BatchNormBackward: input expected the shape of grad_out", a)


@pytest.mark.parametrize("name", ["weight", "running_mean", "running_var", "save_mean", "save_invstd"])
def test_channel_length_mismatch(mode, name):
    a = base()
    a[name] = np.ones(4)
    _err(mode, ValueError, rf"BatchNormBackward: {name} expected length 3 \(the channel count of input\), got length 4",
         a, training=name.startswith("save") or name == "weight")


def test_channel_tensor_not_1d(mode):
    a = base()
    a["weight"] = np.ones((3, 1))
    _err(mode, ValueError, r"BatchNormBackward: weight expected a 1-D \(C,\) tensor, got shape \(3, 1\)", a)


def test_channel_length_follows_layout(mode):
    a = base((2, 3, 4), data_format="NHWC")  # C = 4 channel-last
    a["weight"] = np.ones(3)
    _err(mode, ValueError, r"weight expected length 4", a, data_format="NHWC")


@pytest.mark.parametrize("name", ["save_mean", "save_invstd"])
def test_training_needs_saved_stats(mode, name):
    a = base()
    a[name] = None
    _err(mode, ValueError, rf"BatchNormBackward: {name} expected a \(C,\) tensor when training=True, got None", a)


def test_empty_saved_stats_rejected_in_training(mode):
    a = base()
    a["save_mean"] = np.zeros(0)
    _err(mode, ValueError, r"save_mean expected length 3", a, training=True)


@pytest.mark.parametrize("name", ["input", "weight", "save_invstd"])
def test_integer_dtype_rejected(mode, name):
    import mindspore as ms
    from mindspore_bn_grad import batch_norm_backward
    a = base()
    tensors = {k: (None if v is None else ms.Tensor(v.astype(np.float32))) for k, v in a.items()}
    tensors[name] = tensors[name].astype(ms.int32)
    if mode == "pynative":
        with pytest.raises(TypeError, match=rf"BatchNormBackward: {name} expected "):
            batch_norm_backward(**{"grad_out": tensors["grad_out"], "input": tensors["input"],
                                   **{k: v for k, v in tensors.items() if k not in ("grad_out", "input")}})
    else:
        dtypes = {name: "float32"}
        with pytest.raises(TypeError, match=rf"BatchNormBackward: {name} expected "):
            _graph_call(tensors)


def _graph_call(tensors):
    import mindspore as ms
    import mindspore_bn_grad as mbg
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        class Call(ms.nn.Cell):
            def __init__(self):
                super().__init__()
                self.op = mbg.BatchNormBackward()

            def construct(self, dy, x, w, rm, rv, sm, si):
                return self.op(dy, x, w, rm, rv, sm, si)

        names = ("grad_out", "input", "weight", "running_mean", "running_var", "save_mean", "save_invstd")
        return Call()(*(tensors.get(n) for n in names))
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


def test_bool_tensor_rejected(mode):
    import mindspore as ms
    a = base()
    tensors = {k: ms.Tensor(v.astype(np.float32)) for k, v in a.items()}
    tensors["grad_out"] = tensors["grad_out"] > 0
    tensors["input"] = tensors["input"] > 0
    if mode == "graph":
        with pytest.raises(TypeError, match=r"BatchNormBackward: grad_out expected .*float16.*float32.*, got bool"):
            _graph_call(tensors)
    else:
        from mindspore_bn_grad import batch_norm_backward
        with pytest.raises(TypeError, match=r"BatchNormBackward: grad_out expected .*float16.*float32.*, got bool"):
            batch_norm_backward(**tensors)


def test_input_dtype_differs(mode):
    _err(mode, TypeError, r"BatchNormBackward: input expected .*float32.*grad_out.*, got float16",
         base(), {"input": "float16"})


@pytest.mark.parametrize("fmt,shape", [("NCDHW", (2, 3, 4, 5)), ("NDHWC", (2, 3, 4))])
def test_data_format_not_fitting_rank(mode, fmt, shape):
    _err(mode, ValueError, rf"BatchNormBackward: data_format expected a format that fits rank {len(shape)}",
         base(shape), data_format=fmt)


@pytest.mark.parametrize("kwargs,exc,match", [
    ({"data_format": "NCWH"}, ValueError, r"data_format expected one of \['NCHW', 'NCDHW', 'NHWC', 'NDHWC'\], got 'NCWH'"),
    ({"data_format": 1}, TypeError, r"data_format expected one of"),
    ({"output_mask": (True, True)}, ValueError, r"output_mask expected 3 bools, got length 2"),
    ({"output_mask": (True, True, True, True)}, ValueError, r"output_mask expected 3 bools, got length 4"),
    ({"output_mask": (1, 0, 1)}, TypeError, r"output_mask expected a tuple of 3 bools"),
    ({"output_mask": "TTT"}, TypeError, r"output_mask expected a tuple of 3 bools"),
    ({"eps": -1.0}, ValueError, r"eps expected a finite float >= 0.0, got -1.0"),
    ({"eps": float("nan")}, ValueError, r"eps expected a finite float >= 0.0, got nan"),
    ({"eps": float("inf")}, ValueError, r"eps expected a finite float"),
    ({"eps": "1e-5"}, TypeError, r"eps expected a float, got '1e-5'"),
    ({"eps": True}, TypeError, r"eps expected a float, got True"),
    ({"training": 1}, TypeError, r"training expected a bool, got 1"),
])
def test_bad_attributes(mode, kwargs, exc, match):
    _err(mode, exc, "BatchNormBackward: " + match, base(), **kwargs)


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
    from mindspore_bn_grad import _op
    arrays = base()
    x = ms.Tensor(arrays["grad_out"])
    c = ms.Tensor(arrays["weight"])
    good = dict(training=True, eps=1e-5, output_mask=(True, True, True), data_format="NCHW")
    first = [o.asnumpy() for o in batch_norm_backward(x, x, c, None, None, c, c, **good)]
    op = _op._ops_seen[_op._fast_key(**good)]
    for _ in range(2):  # and again once the good values are remembered
        with pytest.raises(exc, match="BatchNormBackward: " + match):
            batch_norm_backward(x, x, c, None, None, c, c, **{**good, **kwargs})
        again = [o.asnumpy() for o in batch_norm_backward(x, x, c, None, None, c, c, **good)]
        assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert _op._ops_seen[_op._fast_key(**good)] is op
    # NumPy bools and a list mask are valid (the checked path) and give the same op.
    np_mask = (np.bool_(True),) * 3
    assert _op._fast_key(**{**good, "output_mask": np_mask}) is None
    again = batch_norm_backward(x, x, c, None, None, c, c, **{**good, "output_mask": list(np_mask)})
    assert all(np.array_equal(a, b.asnumpy()) for a, b in zip(first, again))
    # eps is keyed by its bits: -0.0 is not 0.0 (their kernel attributes differ).
    assert _op._fast_key(True, -0.0, (True,) * 3, "NCHW") != _op._fast_key(True, 0.0, (True,) * 3, "NCHW")


@pytest.mark.parametrize("value", [[1.0, 2.0], np.ones((2, 3, 4), np.float32), 3.0])
def test_non_tensor_arguments(value):
    import mindspore as ms
    from mindspore_bn_grad import batch_norm_backward
    x = ms.Tensor(np.ones((2, 3, 4), np.float32))
    c = ms.Tensor(np.ones(3, np.float32))
    with pytest.raises(TypeError, match=r"BatchNormBackward: grad_out expected a mindspore.Tensor, got "):
        batch_norm_backward(value, x, c, None, None, c, c)
    with pytest.raises(TypeError, match=r"BatchNormBackward: weight expected a mindspore.Tensor or None, got "):
        batch_norm_backward(x, x, value, None, None, c, c)


def test_missing_required_input():
    import mindspore as ms
    from mindspore_bn_grad import batch_norm_backward
    x = ms.Tensor(np.ones((2, 3, 4), np.float32))
    with pytest.raises(TypeError, match=r"BatchNormBackward: input expected a mindspore.Tensor, got NoneType"):
        batch_norm_backward(x, None)


def test_graph_rejection_happens_at_compile():
    """The infer step raises while the graph compiles, so no kernel is launched."""
    import mindspore as ms
    a = base()
    tensors = {k: ms.Tensor(v.astype(np.float32)) for k, v in a.items()}
    tensors["weight"] = ms.Tensor(np.ones(5, np.float32))
    with pytest.raises(ValueError, match="weight expected length 3"):
        _graph_call(tensors)
