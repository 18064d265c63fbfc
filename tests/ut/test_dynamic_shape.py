"""Dynamic shapes (issue 2 item 6): GRAPH mode with Cell.set_inputs and unknown dims or rank.

One compiled cell runs on successive calls with different sizes (the kernel
sees the actual shapes, MindSpore re-infers the output shapes in C++ through
BatchNormBackwardInferShape), values are checked against the float64
reference, and what is known at compile is still checked by the Python infer.
"""
import ctypes
import re

import numpy as np
import pytest

from _harness import NAMES, assert_close, expected, make_arrays, ms_tensor, out_dtypes, launched_backward_ops


def _graph_cell(op, set_inputs):
    import mindspore as ms

    class Call(ms.nn.Cell):
        def __init__(self):
            super().__init__()
            self.op = op

        def construct(self, dy, x, w, rm, rv, sm, si):
            return self.op(dy, x, w, rm, rv, sm, si)

    cell = Call()
    cell.set_inputs(*set_inputs)
    return cell


@pytest.fixture
def graph_mode():
    import mindspore as ms
    from mindspore.context import _context, ms_ctx_param
    ctx = _context()
    old_cfg, old_level = dict(ms.get_context("jit_config") or {}), ctx.get_param(ms_ctx_param.jit_level)
    ms.set_context(mode=ms.GRAPH_MODE)
    yield ms
    ms.set_context(mode=ms.PYNATIVE_MODE)
    # set_context cannot put jit_level back to "unset" (""), which other tests run with.
    ctx.set_param(ms_ctx_param.jit_level, old_level)
    ctx.jit_config = old_cfg


def _dyn(shape, dtype="float32"):
    import mindspore as ms
    return ms.Tensor(shape=shape, dtype=getattr(ms, dtype))


def _set_inputs(full_shape, present, chan_shape=(None,), dtype="float32"):
    """Placeholders for the seven inputs: full tensors get `full_shape`, present per-channel ones `chan_shape`."""
    out = []
    for n in NAMES:
        if n in ("grad_out", "input"):
            out.append(_dyn(None if full_shape is None else list(full_shape), dtype))
        elif n in present:
            out.append(_dyn(list(chan_shape), dtype))
        else:
            out.append(None)
    return out


def _run_and_check(cell, arrays, dtype, attrs):
    dtypes = {n: dtype for n in NAMES}
    outs = cell(*[ms_tensor(arrays.get(n), dtype) for n in NAMES])
    want, q = expected(arrays, dtypes, **attrs)
    import mindspore as ms
    for name, o, w, dt in zip(("grad_input", "grad_weight", "grad_bias"), outs, want,
                              out_dtypes(arrays, dtypes)):
        assert tuple(o.shape) == w.shape, (name, o.shape, w.shape)
        assert_close(name, o.astype(ms.float64).asnumpy(), w, dt, dtype, q, attrs)
    for o, keep in zip(outs, attrs.get("output_mask", (True, True, True))):
        if not keep:
            assert not np.any(o.astype(ms.float64).asnumpy())


@pytest.mark.parametrize("jit_level", ["O0", "O1", "O2"])
@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
def test_unknown_dims_several_shapes_one_cell(graph_mode, jit_level, data_format):
    import mindspore_bn_grad as mbg
    graph_mode.set_context(jit_config={"jit_level": jit_level})
    attrs = dict(training=True, eps=1e-5, output_mask=(True, True, True), data_format=data_format)
    present = ("weight", "save_mean", "save_invstd")
    full = [None, 3, None, None] if data_format == "NCHW" else [None, None, None, 3]
    cell = _graph_cell(mbg.BatchNormBackward(**attrs), _set_inputs(full, present, (3,)))
    shapes = [(2, 3, 4, 5), (1, 3, 1, 7), (5, 3, 2, 2)] if data_format == "NCHW" else \
        [(2, 4, 5, 3), (1, 1, 7, 3), (5, 2, 2, 3)]
    for seed, shape in enumerate(shapes):
        arrays = make_arrays(shape, data_format, seed=seed, running=False)
        _run_and_check(cell, arrays, "float32", attrs)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_unknown_rank_several_ranks_one_cell(graph_mode, dtype):
    import mindspore_bn_grad as mbg
    attrs = dict(training=True, eps=1e-5, output_mask=(True, True, True), data_format="NCHW")
    present = ("weight", "save_mean", "save_invstd")
    cell = _graph_cell(mbg.BatchNormBackward(**attrs), _set_inputs(None, present, dtype=dtype))
    for seed, shape in enumerate([(4, 6), (2, 3, 5), (2, 2, 3, 3), (1, 2, 1, 2, 3), (3, 0, 2)]):
        arrays = make_arrays(shape, seed=seed, running=False)
        _run_and_check(cell, arrays, dtype, attrs)


def test_inference_none_inputs_and_mask_unknown_dims(graph_mode):
    """Inference with running stats, no weight, no saved stats, one output masked."""
    import mindspore_bn_grad as mbg
    attrs = dict(training=False, eps=1e-3, output_mask=(True, False, True), data_format="NHWC")
    present = ("running_mean", "running_var")
    cell = _graph_cell(mbg.BatchNormBackward(**attrs), _set_inputs([None, None, None], present))
    for seed, shape in enumerate([(2, 5, 4), (3, 1, 7), (1, 6, 2)]):
        arrays = make_arrays(shape, "NHWC", seed=seed, weight=False, saved=False)
        _run_and_check(cell, arrays, "float32", attrs)


def test_static_and_dynamic_cells_share_one_primitive(graph_mode):
    """The same primitive instance in a static cell and a dynamic cell, then PYNATIVE."""
    import mindspore_bn_grad as mbg
    attrs = dict(training=True, eps=1e-5, output_mask=(True, True, True), data_format="NCHW")
    op = mbg.BatchNormBackward(**attrs)
    present = ("weight", "save_mean", "save_invstd")
    dyn = _graph_cell(op, _set_inputs([None, None], present))
    arrays = make_arrays((4, 3), seed=1, running=False)
    _run_and_check(dyn, arrays, "float32", attrs)

    class Static(graph_mode.nn.Cell):
        def __init__(self):
            super().__init__()
            self.op = op

        def construct(self, dy, x, w, rm, rv, sm, si):
            return self.op(dy, x, w, rm, rv, sm, si)

    arrays = make_arrays((2, 5, 3), seed=2, running=False)
    _run_and_check(Static(), arrays, "float32", attrs)
    graph_mode.set_context(mode=graph_mode.PYNATIVE_MODE)
    _run_and_check(op, make_arrays((3, 4, 2), seed=3, running=False), "float32", attrs)


def test_pynative_function_launches_without_the_cpp_infer(monkeypatch):
    """batch_norm_backward() in PYNATIVE launches a primitive without the C++ shape infer (which
    MindSpore 2.10 would run, dlopen-ing our library, at every launch), with the right values;
    the public primitive keeps it for graphs with unknown dims."""
    import mindspore as ms
    import mindspore_bn_grad as mbg
    from mindspore_bn_grad import backward
    launched = launched_backward_ops(monkeypatch)
    monkeypatch.setattr(backward, "_ops_seen", {})
    ms.set_context(mode=ms.PYNATIVE_MODE)
    attrs = dict(training=True, eps=1e-3, output_mask=(True, True, False), data_format="NCHW")
    arrays = make_arrays((3, 4, 2), seed=7, running=False)
    _run_and_check(lambda *t: mbg.batch_norm_backward(*t, **attrs), arrays, "float32", attrs)
    assert len(launched) == 1 and "cpp_infer_shape" not in launched[0].attrs
    assert "cpp_infer_shape" in mbg.BatchNormBackward(**attrs).attrs


# --- compile-time rejection of what is known -------------------------------------------

def test_rejects_known_channel_mismatch_at_compile(graph_mode):
    import mindspore_bn_grad as mbg
    cell = _graph_cell(mbg.BatchNormBackward(), _set_inputs([None, 3, None], ("weight", "save_mean", "save_invstd"),
                                                           (4,)))
    arrays = make_arrays((2, 3, 5), running=False)
    for n in ("weight", "save_mean", "save_invstd"):  # what the placeholders say: (4,)
        arrays[n] = np.ones(4)
    with pytest.raises(ValueError, match=r"BatchNormBackward: weight expected length 3 .*got length 4"):
        cell(*[ms_tensor(arrays.get(n), "float32") for n in NAMES])


def test_rejects_known_shape_mismatch_between_full_tensors_at_compile(graph_mode):
    import mindspore_bn_grad as mbg
    ph = _set_inputs([None, 3, None], ("weight", "save_mean", "save_invstd"))
    ph[1] = _dyn([None, 4, None])
    cell = _graph_cell(mbg.BatchNormBackward(), ph)
    arrays = make_arrays((2, 3, 5), running=False)
    arrays["input"] = np.zeros((2, 4, 5))
    with pytest.raises(ValueError, match=r"BatchNormBackward: input expected the shape of grad_out"):
        cell(*[ms_tensor(arrays.get(n), "float32") for n in NAMES])


def test_rejects_known_rank_at_compile(graph_mode):
    import mindspore_bn_grad as mbg
    cell = _graph_cell(mbg.BatchNormBackward(), _set_inputs([None], ("weight", "save_mean", "save_invstd")))
    arrays = make_arrays((3, 1), running=False)
    arrays["grad_out"] = arrays["input"] = np.zeros(3)
    with pytest.raises(ValueError, match=r"BatchNormBackward: .*rank"):
        cell(*[ms_tensor(arrays.get(n), "float32") for n in NAMES])


def test_rejects_missing_saved_stats_with_unknown_rank_at_compile(graph_mode):
    import mindspore_bn_grad as mbg
    cell = _graph_cell(mbg.BatchNormBackward(training=True), _set_inputs(None, ("weight",)))
    arrays = make_arrays((2, 3), saved=False, running=False)
    with pytest.raises(ValueError, match=r"BatchNormBackward: save_mean expected"):
        cell(*[ms_tensor(arrays.get(n), "float32") for n in NAMES])


# --- the infer functions on their own -----------------------------------------------------

@pytest.mark.parametrize("shapes,fmt,want", [
    ({"grad_out": [-1, 3, -1], "input": [-1, -1, 7], "weight": [-1]}, "NCHW", [[-1, 3, 7], [3], [3]]),
    ({"grad_out": [-1, -1], "input": [-1, -1], "weight": [5]}, "NCHW", [[-1, -1], [5], [5]]),
    ({"grad_out": [-1, -1, -1], "input": [-2]}, "NHWC", [[-1, -1, -1], [-1], [-1]]),
    ({"grad_out": [-2], "input": [-2], "weight": [6]}, "NCHW", [[-2], [6], [6]]),
    ({"grad_out": [-2], "input": [-2]}, "NHWC", [[-2], [-1], [-1]]),
])
def test_python_infer_propagates_unknown(shapes, fmt, want):
    from mindspore_bn_grad.infer import infer_shapes
    attrs = dict(training=False, eps=1e-5, output_mask=(True, True, True), data_format=fmt)
    assert infer_shapes(shapes, attrs) == want


@pytest.mark.parametrize("shapes,msg", [
    ({"grad_out": [-1, 3, -1], "input": [-1, 4, -1]}, "input expected the shape of grad_out"),
    ({"grad_out": [-1, 3], "input": [-2], "weight": [4]}, "weight expected length 3"),
    ({"grad_out": [-1], "input": [-2]}, "rank"),
    ({"grad_out": [-2], "input": [-2], "weight": [-1, 2]}, "weight expected a 1-D"),
])
def test_python_infer_checks_what_is_known(shapes, msg):
    from mindspore_bn_grad.infer import infer_shapes
    attrs = dict(training=False, eps=1e-5, output_mask=(True, True, True), data_format="NCHW")
    with pytest.raises(ValueError, match=msg):
        infer_shapes(shapes, attrs)


def _cpp_infer(shape, channel_last):
    from mindspore_bn_grad.cpu_kernel import native
    f = native.lib().MsBnGradInferShape
    f.restype = None
    n = len(shape)
    buf = (ctypes.c_int64 * max(n, 1))(*shape)
    out = (ctypes.c_int64 * max(n, 1))()
    rank, chan = ctypes.c_int(), ctypes.c_int64()
    f(n, buf, int(channel_last), out, ctypes.byref(rank), ctypes.byref(chan))
    return [list(out[:rank.value]), [chan.value], [chan.value]]


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 0, 4), (1, 2, 1, 2, 1, 2, 1, 2), (0, 5, 2),
                                   (-1, 3, -1), (-1, -1), (-2,), (3, -1, 4, -1)])
def test_cpp_infer_agrees_with_yaml_infer(shape, fmt):
    """The C++ shape rule MindSpore uses at run time gives what the YAML-built infer gives
    from grad_out's shape (the Python infer may know more when other inputs fix a dim)."""
    from mindspore_bn_grad.infer import infer_shapes
    attrs = dict(training=False, eps=1e-5, output_mask=(True, True, True), data_format=fmt)
    py = infer_shapes({"grad_out": list(shape), "input": [-2]}, attrs)
    assert _cpp_infer(list(shape), fmt == "NHWC") == py


# --- run-time rejection: shapes that only a launch reveals ------------------------------------

def _launch_error(cell, arrays):
    with pytest.raises(RuntimeError) as info:
        outs = cell(*[ms_tensor(arrays.get(n), "float32") for n in NAMES])
        [o.asnumpy() for o in outs]
    return str(info.value)


@pytest.mark.parametrize("jit_level", ["O0", "O2"])
@pytest.mark.parametrize("name,shape,msg", [
    ("input", (2, 3, 5), r"input expected the shape of grad_out \(2, 3, 4\), got \(2, 3, 5\)"),
    ("input", (2, 3, 4, 1), r"input expected the shape of grad_out \(2, 3, 4\), got \(2, 3, 4, 1\)"),
    ("weight", (4,), r"weight expected length 3 \(the channel count of input\), got length 4"),
    ("save_invstd", (2,), r"save_invstd expected length 3 \(the channel count of input\), got length 2"),
    ("grad_out", (2, 3, 4) + (1,) * 6, r"grad_out expected rank 2\.\.8, got rank 9"),
])
def test_run_time_shape_mismatch_is_a_clear_error_before_the_kernel(graph_mode, jit_level, name, shape, msg):
    """With unknown dims, a call whose shapes do not fit is rejected by the C++ infer that runs
    before every launch, with the Python infer's words, naming the argument; never by the
    kernel's error code. MindSpore then refuses later calls of that graph (README); a new cell
    over the same primitive works."""
    import mindspore_bn_grad as mbg
    graph_mode.set_context(jit_config={"jit_level": jit_level})
    op = mbg.BatchNormBackward()
    present = ("weight", "save_mean", "save_invstd")

    def placeholders():
        ph = _set_inputs(None if name == "grad_out" else [None, None, None], present)
        if name == "input":
            ph[1] = _dyn(None)
        return ph

    cell = _graph_cell(op, placeholders())
    good = make_arrays((2, 3, 4), seed=1, running=False)
    _run_and_check(cell, good, "float32", dict(training=True))
    bad = dict(good)
    bad[name] = np.ones(shape)
    if name == "grad_out":
        bad["input"] = np.ones(shape)
    err = _launch_error(cell, bad)
    assert re.search("BatchNormBackward: " + msg, err), err
    assert "Return value from CPU AOT kernel" not in err
    _run_and_check(_graph_cell(op, placeholders()), good, "float32", dict(training=True))


def test_run_time_check_with_none_inputs_and_empty_saved_stats(graph_mode):
    """Which inputs are None decides which shape is which: inference without weight, (0,) saved stats."""
    import mindspore_bn_grad as mbg
    attrs = dict(training=False, eps=1e-5, output_mask=(True, True, True), data_format="NCHW")
    op = mbg.BatchNormBackward(**attrs)
    present = ("running_mean", "running_var", "save_mean", "save_invstd")
    cell = _graph_cell(op, _set_inputs([None, None, None], present))
    arrays = make_arrays((2, 5, 3), seed=4, weight=False)
    arrays["save_mean"] = arrays["save_invstd"] = np.zeros(0)
    _run_and_check(cell, arrays, "float32", attrs)
    arrays["running_var"] = np.ones(4)
    err = _launch_error(cell, arrays)
    assert "BatchNormBackward: running_var expected length 5 (the channel count of input), got length 4" in err
