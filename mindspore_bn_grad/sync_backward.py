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
import struct

import numpy as np

from .checks import check_device_target, check_tensor_args, normalize_op_attrs
from .infer import make_infer
from .spec import load_opdef

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
    from . import ascend as _ascend
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
    from .cpu_kernel import native as _native
    _native.lib()  # build on first use, apply the thread setting
    return {"func": f"{_native.library_path()}:{opdef.op_name}"}


def _make_primitive(filename, attrs, bprop=None):
    """ops.Custom of the prototype `filename` with checked `attrs` (also BatchNormDoubleBackward's).

    Without `bprop` the primitive's bprop raises a clear error: these
    backward steps are not differentiated (no second-order gradients).
    """
    from mindspore import ops
    infer_shape, infer_dtype = make_infer(attrs, load_opdef(filename))
    prim = ops.Custom(out_shape=infer_shape, out_dtype=infer_dtype, func_type="aot",
                      bprop=bprop or _not_differentiable(filename), **_kernel_kwargs(filename))
    for a in load_opdef(filename).attrs:
        value = attrs[a.name]
        # The aot Init reads a bool tuple as an int vector; a float also goes exactly, as int64 bits.
        prim.add_prim_attr(a.kernel_attr, [int(b) for b in value] if a.type == "bool_tuple" else value)
        if a.kernel_bits_name:
            prim.add_prim_attr(a.kernel_bits_name, struct.unpack("<q", struct.pack("<d", value))[0])
    prim.sync_attrs = attrs
    return prim


_SYNC_NO_SECOND_ORDER = ("second-order gradients are not supported through it (SyncBatchNorm in training); "
                         "BatchNorm cells converted by convert_batchnorm, and SyncBatchNorm in eval mode, "
                         "support them")
_NOT_DIFFERENTIABLE = {REDUCE_YAML: _SYNC_NO_SECOND_ORDER, ELEMT_YAML: _SYNC_NO_SECOND_ORDER}


def _not_differentiable(filename):
    """A bprop that raises (in GRAPH mode: while the graph compiles) why the op has no derivative."""
    opdef = load_opdef(filename)
    why = _NOT_DIFFERENTIABLE.get(filename, "it is not differentiable (third-order gradients of BatchNorm "
                                            "are not supported)")
    msg = f"{opdef.op_name}: {why}"

    # GRAPH mode wants the bprop's parameters spelled out: the inputs, out, dout.
    def bprop5(a, b, c, d, e, out, dout):
        raise RuntimeError(msg)

    def bprop8(a, b, c, d, e, f, g, h, out, dout):
        raise RuntimeError(msg)

    def bprop10(a, b, c, d, e, f, g, h, i, j, out, dout):
        raise RuntimeError(msg)

    return {5: bprop5, 8: bprop8, 10: bprop10}[len(opdef.inputs)]


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

@functools.lru_cache(maxsize=None)
def _np_names():
    """NumPy dtype -> prototype dtype name, for the dtypes NumPy has (bfloat16 travels as uint16 bits)."""
    names = set(load_opdef().dtypes) | set(load_opdef(ELEMT_YAML).input("counter").allowed_dtypes("CPU"))
    return {np.dtype(n): n for n in names if hasattr(np, n)}


@functools.lru_cache(maxsize=None)
def _lib():
    from .cpu_kernel import native as _native
    handle = _native.lib()
    common = [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int),
              ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)), ctypes.POINTER(ctypes.c_char_p)]
    handle.MsBnSyncReduceDirect.restype = ctypes.c_int
    handle.MsBnSyncReduceDirect.argtypes = common + [ctypes.c_int] * 4
    handle.MsBnSyncElemtDirect.restype = ctypes.c_int
    handle.MsBnSyncElemtDirect.argtypes = common + [ctypes.c_int]
    return handle


def _call(fn, arrays, names, *extra):
    from .cpu_kernel.native import check_rc, marshal
    check_rc(fn(*marshal(arrays, names).args, *extra), op="BatchNormSync")


def _name(a, bf16=False):
    if a is None:
        return "none"
    if bf16 and a.dtype == np.uint16:
        return "bfloat16"
    return _np_names()[a.dtype]


def reduce_direct(grad_out, input, mean, invstd, weight=None, *, input_g=True, weight_g=True, bias_g=True,
                  channel_last=False, bf16=False):
    """Reduce kernel on NumPy arrays (bf16=True: activations are uint16 bfloat16 bits)."""
    opdef = load_opdef(REDUCE_YAML)
    given = dict(zip(opdef.input_names, (grad_out, input, mean, invstd, weight)))
    ins = [None if given[n] is None else np.ascontiguousarray(given[n]) for n in opdef.input_names]
    c = given["grad_out"].shape[-1 if channel_last else 1]
    # each output in the dtype of the first present input of its dtype_from
    outs = [np.full(c, np.nan, next(given[s].dtype for s in o.dtype_from if given[s] is not None))
            for o in opdef.outputs]
    full = {a.name for a in opdef.inputs if a.shape == "full"}
    names = [_name(a, bf16 and n in full) for n, a in zip(opdef.input_names, ins)] + [_name(o) for o in outs]
    _call(_lib().MsBnSyncReduceDirect, ins + outs, names, int(input_g), int(weight_g), int(bias_g),
          int(channel_last))
    return tuple(outs)


def elemt_direct(grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu, counter, *, channel_last=False,
                 bf16=False):
    """Elementwise kernel on NumPy arrays; returns grad_input (grad_out's dtype)."""
    opdef = load_opdef(ELEMT_YAML)
    given = dict(zip(opdef.input_names, (grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu, counter)))
    ins = [None if given[n] is None else np.ascontiguousarray(given[n]) for n in opdef.input_names]
    out = np.full_like(ins[opdef.input_names.index("grad_out")], 0x7fff if bf16 else np.nan)
    full = {a.name for a in opdef.inputs if a.shape == "full"}
    names = [_name(a, bf16 and n in full) for n, a in zip(opdef.input_names, ins)] + [_name(out, bf16)]
    _call(_lib().MsBnSyncElemtDirect, ins + [out], names, int(channel_last))
    return out
