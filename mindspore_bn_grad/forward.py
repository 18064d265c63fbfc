"""BatchNormForward: the BatchNorm forward with aclnnBatchNorm semantics, as a MindSpore primitive.

    batch_norm_forward(input, weight=None, bias=None, running_mean=None, running_var=None,
                       training=False, momentum=0.1, eps=1e-5, data_format="NCHW")
        -> (output, save_mean, save_invstd, running_mean_out, running_var_out)

Prototype: op_def/batch_norm_forward.yaml (formulas there and in
docs/forward.md); the primitive is primitives.Primitive of it, the kernel the
aot entry of csrc/bn_forward_entry.cpp (cpu_kernel.native.forward_direct runs
it on NumPy arrays). CPU only: on Ascend, MindSpore's own BatchNormExt is
aclnnBatchNorm.

ops.Custom cannot update an input in place, so the updated running
statistics come back as the last two outputs (in inference: the running
statistics unchanged); assign them to the Parameters yourself
(``ops.assign(running_mean, running_mean_out)``). The lead's CPU op plugin
calls the same kernel in place for MindSpore's BatchNormExt.
"""
import functools

from . import ms_compat  # noqa: F401  (first: refuses an unsupported MindSpore release)
from . import target
from .checks import check_tensor_args, normalize_op_attrs
from .launch import LOCK, compiling
from .primitives import Primitive, not_differentiable
from .spec import FORWARD_YAML, load_opdef


def normalize_attrs(**given) -> dict:
    return normalize_op_attrs(load_opdef(FORWARD_YAML), given)


def _no_bprop(opdef, _attrs):
    return not_differentiable(opdef, "it has no bprop of its own; for gradients use mint.nn.functional.batch_norm "
                                     "or the cells of mindspore_bn_grad.nn (their backward is BatchNormBackward)")


class BatchNormForward(Primitive):
    """Primitive: (input, weight, bias, running_mean, running_var)
    -> (output, save_mean, save_invstd, running_mean_out, running_var_out).

    Optional tensors may be None. Attributes are checked here; tensors while
    MindSpore builds the graph (before any kernel runs).
    """

    def __init__(self, training=False, momentum=0.1, eps=1e-5, data_format="NCHW"):
        attrs = normalize_attrs(training=training, momentum=momentum, eps=eps, data_format=data_format)
        op = load_opdef(FORWARD_YAML).op_name
        if target.device_target() == "Ascend":
            raise RuntimeError(f"{op}: device_target expected 'CPU', got 'Ascend' (no Ascend kernel: there "
                               "MindSpore's own BatchNormExt, mint.nn.functional.batch_norm, is aclnnBatchNorm)")
        super().__init__(FORWARD_YAML, attrs, make_bprop=_no_bprop)


@functools.lru_cache(maxsize=64)
def forward_op(training, momentum, eps, data_format):
    """The BatchNormForward of these (normalized, hashable) attributes, made once."""
    return BatchNormForward(training, momentum, eps, data_format)


def batch_norm_forward(input, weight=None, bias=None, running_mean=None, running_var=None, training=False,
                       momentum=0.1, eps=1e-5, data_format="NCHW"):
    """BatchNorm forward; returns (output, save_mean, save_invstd, running_mean_out, running_var_out).

    training: batch statistics, the running ones updated with momentum
    (unbiased variance); inference: the running statistics (absent: 0 and 1).
    """
    tensors = (input, weight, bias, running_mean, running_var)
    if compiling():  # inside @ms.jit or a GRAPH construct (see launch.compiling)
        return BatchNormForward(training, momentum, eps, data_format)(*tensors)
    check_tensor_args(load_opdef(FORWARD_YAML), tensors)
    a = normalize_attrs(training=training, momentum=momentum, eps=eps, data_format=data_format)
    with LOCK:  # PYNATIVE launches from several threads: see launch.py
        return forward_op(a["training"], a["momentum"], a["eps"], a["data_format"])(*tensors)
