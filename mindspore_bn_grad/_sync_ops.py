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

from ._checks import check_device_target, check_tensor_args, normalize_op_attrs
from ._infer import make_infer
from ._opdef import load_opdef

REDUCE_YAML = "batch_norm_reduce_backward.yaml"
ELEMT_YAML = "batch_norm_elemt_backward.yaml"


def normalize_attrs(filename, **given) -> dict:
    return normalize_op_attrs(load_opdef(filename), given)


# --- primitives ------------------------------------------------------------------

def _custom_base():
    from mindspore import ops
    return ops.Custom


def _ascend_kwargs(filename):
    """func / reg_info of the Ascend C op (ascend_impl/op_kernel/batch_norm_{reduce,elemt}_backward.cpp)."""
    from . import _ascend
    from ._reg import ascend_reg_info
    op_type = load_opdef(filename).op_name
    if _ascend.installed_package(op_type) is None:
        raise RuntimeError(f"{op_type}: the Ascend C op package providing it is not installed; {_ascend.BUILD_HINT}")
    return {"func": op_type, "reg_info": ascend_reg_info(filename=filename)}


def _kernel_kwargs(filename):
    import mindspore as ms
    opdef = load_opdef(filename)
    check_device_target(opdef.op_name)
    if ms.get_context("device_target") == "Ascend":
        return _ascend_kwargs(filename)
    from . import _native
    _native.lib()  # build on first use, apply the thread setting
    return {"func": f"{_native.library_path()}:{opdef.op_name}"}


def _make_primitive(filename, attrs):
    from mindspore import ops
    infer_shape, infer_dtype = make_infer(attrs, load_opdef(filename))
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
    check_tensor_args(load_opdef(filename), tensors)


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
    from ._native import check_rc, marshal
    check_rc(fn(*marshal(arrays, names).args, *extra), op="BatchNormSync")


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
