"""The two SyncBatchNorm backward steps as MindSpore primitives.

    batch_norm_reduce_backward(grad_out, input, mean, invstd, weight=None,
                               input_g=True, weight_g=True, bias_g=True, data_format="NCHW")
        -> (sum_dy, sum_dy_xmu, grad_weight, grad_bias)          (aclnnBatchNormReduceBackward)
    batch_norm_elemt_backward(grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu,
                              counter, data_format="NCHW")
        -> grad_input                                            (aclnnBatchNormElemtBackward)

Prototypes: op_def/batch_norm_reduce_backward.yaml and
op_def/batch_norm_elemt_backward.yaml. The infer functions and the attribute
checks below are driven by them; on CPU the kernels are the aot entries of
csrc/bn_sync_entry.cpp. `reduce_direct` / `elemt_direct` run the same
kernels on NumPy arrays without MindSpore (tests, benchmarks).
"""
import ctypes
import functools

import numpy as np

from ._infer import UNKNOWN_DIM, UNKNOWN_RANK, _fmt_shape, dtype_name, ms_dtype
from ._opdef import load_opdef, load_yaml

REDUCE_YAML = "batch_norm_reduce_backward.yaml"
ELEMT_YAML = "batch_norm_elemt_backward.yaml"


def _raw(filename):
    (_, raw), = load_yaml(filename).items()
    return raw


def fail(op, exc_type, arg, expected, got):
    raise exc_type(f"{op}: {arg} expected {expected}, got {got}")


# --- attributes ------------------------------------------------------------

def normalize_attrs(filename, **given) -> dict:
    """Checks attributes against the prototype; returns the complete dict."""
    opdef = load_opdef(filename)
    out = {}
    for a in opdef.attrs:
        v = given.pop(a.name, a.default)
        if a.type == "bool":
            if not isinstance(v, (bool, np.bool_)):
                fail(opdef.op_name, TypeError, a.name, "a bool", repr(v))
            v = bool(v)
        elif a.type == "str":
            if not isinstance(v, str):
                fail(opdef.op_name, TypeError, a.name, f"one of {list(a.values)}", repr(v))
            if a.values and v not in a.values:
                fail(opdef.op_name, ValueError, a.name, f"one of {list(a.values)}", repr(v))
        else:  # pragma: no cover - the prototypes use bool and str only
            raise NotImplementedError(a.type)
        out[a.name] = v
    if given:
        raise TypeError(f"{opdef.op_name}: unexpected argument(s) {sorted(given)}")
    return out


# --- infer (shape and dtype), from the prototype ------------------------------

def infer_shapes(filename, shapes: dict, attrs: dict):
    """shapes: input name -> list of dims or None. Returns one shape per output."""
    opdef = load_opdef(filename)
    op = opdef.op_name
    for arg in opdef.inputs:
        if shapes.get(arg.name) is None and not arg.optional:
            fail(op, ValueError, arg.name, "a tensor", "None")
    fmt = opdef.data_formats[attrs["data_format"]]
    full, first = None, None
    for arg in opdef.inputs:
        shape = shapes.get(arg.name)
        if arg.shape != "full" or shape is None or UNKNOWN_RANK in shape:
            continue
        shape = [int(d) for d in shape]
        if full is None:
            full, first = shape, arg.name
            rank = len(shape)
            if not opdef.min_rank <= rank <= opdef.max_rank:
                fail(op, ValueError, arg.name, f"rank {opdef.min_rank}..{opdef.max_rank}", f"rank {rank}")
            if rank not in fmt.ranks:
                fits = ", ".join(n for n, f in opdef.data_formats.items() if rank in f.ranks)
                fail(op, ValueError, "data_format", f"a format that fits rank {rank} ({fits})", repr(fmt.name))
            continue
        if len(shape) != len(full):
            fail(op, ValueError, arg.name, f"the shape of {first} {_fmt_shape(full)}", _fmt_shape(shape))
        merged = []
        for i, (a, b) in enumerate(zip(full, shape)):
            if a != UNKNOWN_DIM and b != UNKNOWN_DIM and a != b:
                fail(op, ValueError, arg.name, f"the shape of {first} {_fmt_shape(full)}", _fmt_shape(shape))
            merged.append(b if a == UNKNOWN_DIM else a)
        full = merged
    channels = UNKNOWN_DIM if full is None else full[len(full) - 1 if fmt.channel_last else 1]
    for arg in opdef.inputs:
        shape = shapes.get(arg.name)
        if arg.shape == "full" or shape is None or UNKNOWN_RANK in shape:
            continue
        shape = [int(d) for d in shape]
        if len(shape) != 1:
            what = "a 1-D (C,) tensor" if arg.shape == "channel" else "a 1-D tensor (one count per rank)"
            fail(op, ValueError, arg.name, what, f"shape {_fmt_shape(shape)}")
        if arg.shape != "channel":
            continue
        n = shape[0]
        if n != UNKNOWN_DIM and channels != UNKNOWN_DIM and n != channels:
            fail(op, ValueError, arg.name, f"length {channels} (the channel count of {first})", f"length {n}")
        if channels == UNKNOWN_DIM:
            channels = n
    return [(list(full) if full is not None else [UNKNOWN_RANK]) if o.shape == "full" else [channels]
            for o in opdef.outputs]


def infer_dtypes(filename, dtypes: dict):
    """dtypes: input name -> dtype name or None. Returns one dtype name per output."""
    opdef = load_opdef(filename)
    op = opdef.op_name
    floats = list(opdef.dtypes)
    counts = floats + list(_raw(filename).get("count_dtypes", ()))
    for arg in opdef.inputs:
        d = dtypes.get(arg.name)
        if d is None:
            if not arg.optional:
                fail(op, ValueError, arg.name, "a tensor", "None")
            continue
        allowed = counts if arg.shape == "counts" else floats
        if d not in allowed:
            kind = "a float or integer dtype" if arg.shape == "counts" else "a floating dtype"
            fail(op, TypeError, arg.name, f"{kind} ({', '.join(allowed)})", d)
        if arg.like and d != dtypes[arg.like]:
            fail(op, TypeError, arg.name, f"the dtype of {arg.like} ({dtypes[arg.like]})", d)
    return [next(dtypes[s] for s in o.dtype_from if dtypes.get(s) is not None) for o in opdef.outputs]


def make_infer(filename, attrs):
    names = load_opdef(filename).input_names

    single = len(load_opdef(filename).outputs) == 1  # one output: a bare shape / dtype, not a list

    def infer_shape(*shapes):
        out = infer_shapes(filename, dict(zip(names, shapes)), attrs)
        return out[0] if single else out

    def infer_dtype(*types):
        out = [ms_dtype(n) for n in infer_dtypes(filename, dict(zip(names, map(dtype_name, types))))]
        return out[0] if single else out

    return infer_shape, infer_dtype


# --- primitives ------------------------------------------------------------------

def _custom_base():
    from mindspore import ops
    return ops.Custom


def _kernel_kwargs(filename):
    import mindspore as ms
    opdef = load_opdef(filename)
    if ms.get_context("device_target") == "Ascend":  # pragma: no cover - no Ascend here
        raise NotImplementedError(f"{opdef.op_name}: the Ascend kernel is not registered yet "
                                  f"(it is registered like BatchNormBackward, from {filename})")
    from . import _native
    _native.lib()  # build on first use, apply the thread setting
    return {"func": f"{_native.library_path()}:{opdef.op_name}"}


def _make_primitive(filename, attrs):
    from mindspore import ops
    infer_shape, infer_dtype = make_infer(filename, attrs)
    prim = ops.Custom(out_shape=infer_shape, out_dtype=infer_dtype, func_type="aot",
                      **_kernel_kwargs(filename))
    for a in load_opdef(filename).attrs:
        prim.add_prim_attr(a.kernel_attr, attrs[a.name])
    prim.sync_attrs = attrs
    return prim


def BatchNormReduceBackward(input_g=True, weight_g=True, bias_g=True, data_format="NCHW"):
    """Primitive: (grad_out, input, mean, invstd, weight) -> (sum_dy, sum_dy_xmu, grad_weight, grad_bias)."""
    attrs = normalize_attrs(REDUCE_YAML, input_g=input_g, weight_g=weight_g, bias_g=bias_g,
                            data_format=data_format)
    return _make_primitive(REDUCE_YAML, attrs)


def BatchNormElemtBackward(data_format="NCHW"):
    """Primitive: (grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu, counter) -> grad_input."""
    attrs = normalize_attrs(ELEMT_YAML, data_format=data_format)
    return _make_primitive(ELEMT_YAML, attrs)


@functools.lru_cache(maxsize=64)
def _reduce_op(input_g, weight_g, bias_g, data_format):
    return BatchNormReduceBackward(input_g, weight_g, bias_g, data_format)


@functools.lru_cache(maxsize=16)
def _elemt_op(data_format):
    return BatchNormElemtBackward(data_format)


def _check_tensors(filename, tensors):
    import mindspore as ms
    opdef = load_opdef(filename)
    for arg, t in zip(opdef.inputs, tensors):
        if t is None and arg.optional:
            continue
        if not isinstance(t, ms.Tensor):
            what = "a mindspore.Tensor" + (" or None" if arg.optional else "")
            fail(opdef.op_name, TypeError, arg.name, what, type(t).__name__)


def batch_norm_reduce_backward(grad_out, input, mean, invstd, weight=None, input_g=True, weight_g=True,
                               bias_g=True, data_format="NCHW"):
    """Per-rank step 1 of the SyncBatchNorm backward; returns (sum_dy, sum_dy_xmu, grad_weight, grad_bias).

    A flag that is False leaves its outputs zero-filled (input_g: sum_dy and sum_dy_xmu).
    """
    tensors = (grad_out, input, mean, invstd, weight)
    _check_tensors(REDUCE_YAML, tensors)
    a = normalize_attrs(REDUCE_YAML, input_g=input_g, weight_g=weight_g, bias_g=bias_g,
                        data_format=data_format)
    return _reduce_op(a["input_g"], a["weight_g"], a["bias_g"], a["data_format"])(*tensors)


def batch_norm_elemt_backward(grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu, counter,
                              data_format="NCHW"):
    """Step 2: the input gradient from group-wide sums; `counter` holds each rank's count per channel."""
    tensors = (grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu, counter)
    _check_tensors(ELEMT_YAML, tensors)
    a = normalize_attrs(ELEMT_YAML, data_format=data_format)
    return _elemt_op(a["data_format"])(*tensors)


# --- direct calls (NumPy, no MindSpore) -------------------------------------------

_NP_NAMES = {np.dtype(np.float16): "float16", np.dtype(np.float32): "float32",
             np.dtype(np.float64): "float64", np.dtype(np.int32): "int32", np.dtype(np.int64): "int64"}


@functools.lru_cache(maxsize=None)
def _lib():
    from . import _native
    handle = _native.lib()
    common = [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int),
              ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)), ctypes.POINTER(ctypes.c_char_p)]
    handle.MsBnSyncReduceDirect.restype = ctypes.c_int
    handle.MsBnSyncReduceDirect.argtypes = common + [ctypes.c_int] * 4
    handle.MsBnSyncElemtDirect.restype = ctypes.c_int
    handle.MsBnSyncElemtDirect.argtypes = common + [ctypes.c_int]
    return handle


def _call(fn, arrays, names, *extra):
    n = len(arrays)
    params = (ctypes.c_void_p * n)(*[None if a is None else a.ctypes.data for a in arrays])
    ndims = (ctypes.c_int * n)(*[0 if a is None else a.ndim for a in arrays])
    bufs = [(ctypes.c_int64 * max(1, 0 if a is None else a.ndim))(*(() if a is None else a.shape))
            for a in arrays]
    shapes = (ctypes.POINTER(ctypes.c_int64) * n)(*[ctypes.cast(b, ctypes.POINTER(ctypes.c_int64)) for b in bufs])
    dtypes = (ctypes.c_char_p * n)(*[d.encode() for d in names])
    rc = fn(n, params, ndims, shapes, dtypes, *extra)
    if rc != 0:
        from ._native import ERRORS
        raise RuntimeError(f"kernel returned {rc} ({ERRORS.get(rc, 'unknown')})")


def _name(a, bf16=False):
    if a is None:
        return "none"
    if bf16 and a.dtype == np.uint16:
        return "bfloat16"
    return _NP_NAMES[a.dtype]


def reduce_direct(grad_out, input, mean, invstd, weight=None, *, input_g=True, weight_g=True, bias_g=True,
                  channel_last=False, bf16=False):
    """Reduce kernel on NumPy arrays (bf16=True: activations are uint16 bfloat16 bits)."""
    ins = [None if a is None else np.ascontiguousarray(a) for a in (grad_out, input, mean, invstd, weight)]
    c = ins[0].shape[-1 if channel_last else 1]
    sdt = ins[2].dtype
    pdt = ins[4].dtype if ins[4] is not None else sdt
    outs = [np.full(c, np.nan, sdt), np.full(c, np.nan, sdt), np.full(c, np.nan, pdt), np.full(c, np.nan, pdt)]
    names = [_name(a, bf16 and i < 2) for i, a in enumerate(ins)] + [_name(o) for o in outs]
    _call(_lib().MsBnSyncReduceDirect, ins + outs, names, int(input_g), int(weight_g), int(bias_g),
          int(channel_last))
    return tuple(outs)


def elemt_direct(grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu, counter, *, channel_last=False,
                 bf16=False):
    """Elementwise kernel on NumPy arrays; returns grad_input (grad_out's dtype)."""
    ins = [None if a is None else np.ascontiguousarray(a)
           for a in (grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu, counter)]
    out = np.full_like(ins[0], 0x7fff if bf16 else np.nan)
    names = [_name(a, bf16 and i < 2) for i, a in enumerate(ins)] + [_name(out, bf16)]
    _call(_lib().MsBnSyncElemtDirect, ins + [out], names, int(channel_last))
    return out
