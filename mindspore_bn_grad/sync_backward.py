"""The two SyncBatchNorm backward steps as MindSpore primitives.

    batch_norm_reduce_backward(grad_out, input, mean, invstd, weight=None,
                               input_g=True, weight_g=True, bias_g=True, data_format="NCHW")
        -> (sum_dy, sum_dy_xmu, grad_weight, grad_bias)          (aclnnBatchNormReduceBackward)
    batch_norm_elemt_backward(grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu,
                              counter, data_format="NCHW")
        -> grad_input                                            (aclnnBatchNormElemtBackward)

Prototypes: op_def/batch_norm_reduce_backward.yaml and
op_def/batch_norm_elemt_backward.yaml; the primitives are built by
primitives.Primitive from them. On CPU the kernels are the aot entries of
csrc/bn_sync_entry.cpp (cpu_kernel.native.reduce_direct / elemt_direct run
them on NumPy arrays). Neither step is differentiated (no second-order
gradients through SyncBatchNorm in training).
"""
import functools

from .checks import check_tensor_args, normalize_op_attrs
from .primitives import Primitive, not_differentiable
from .spec import ELEMT_YAML, REDUCE_YAML, load_opdef


def _no_second_order(opdef, _attrs):
    return not_differentiable(opdef, "second-order gradients are not supported through it (SyncBatchNorm in "
                                     "training); BatchNorm cells converted by convert_batchnorm, and "
                                     "SyncBatchNorm in eval mode, support them")


def normalize_attrs(filename, **given) -> dict:
    return normalize_op_attrs(load_opdef(filename), given)


class BatchNormReduceBackward(Primitive):
    """Primitive: (grad_out, input, mean, invstd, weight) -> (sum_dy, sum_dy_xmu, grad_weight, grad_bias)."""

    def __init__(self, input_g=True, weight_g=True, bias_g=True, data_format="NCHW"):
        attrs = normalize_attrs(REDUCE_YAML, input_g=input_g, weight_g=weight_g, bias_g=bias_g,
                                data_format=data_format)
        super().__init__(REDUCE_YAML, attrs, make_bprop=_no_second_order)


class BatchNormElemtBackward(Primitive):
    """Primitive: (grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu, counter) -> grad_input."""

    def __init__(self, data_format="NCHW"):
        attrs = normalize_attrs(ELEMT_YAML, data_format=data_format)
        super().__init__(ELEMT_YAML, attrs, make_bprop=_no_second_order)


@functools.lru_cache(maxsize=64)
def _reduce_op(input_g, weight_g, bias_g, data_format):
    return BatchNormReduceBackward(input_g, weight_g, bias_g, data_format)


@functools.lru_cache(maxsize=16)
def _elemt_op(data_format):
    return BatchNormElemtBackward(data_format)


def batch_norm_reduce_backward(grad_out, input, mean, invstd, weight=None, input_g=True, weight_g=True,
                               bias_g=True, data_format="NCHW"):
    """Per-rank step 1 of the SyncBatchNorm backward; returns (sum_dy, sum_dy_xmu, grad_weight, grad_bias).

    A flag that is False leaves its outputs zero-filled (input_g: sum_dy and sum_dy_xmu).
    """
    tensors = (grad_out, input, mean, invstd, weight)
    check_tensor_args(load_opdef(REDUCE_YAML), tensors)
    a = normalize_attrs(REDUCE_YAML, input_g=input_g, weight_g=weight_g, bias_g=bias_g,
                        data_format=data_format)
    return _reduce_op(a["input_g"], a["weight_g"], a["bias_g"], a["data_format"])(*tensors)


def batch_norm_elemt_backward(grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu, counter,
                              data_format="NCHW"):
    """Step 2: the input gradient from group-wide sums; `counter` holds each rank's count per channel."""
    tensors = (grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu, counter)
    check_tensor_args(load_opdef(ELEMT_YAML), tensors)
    a = normalize_attrs(ELEMT_YAML, data_format=data_format)
    return _elemt_op(a["data_format"])(*tensors)
