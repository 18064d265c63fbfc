"""BatchNormBackward: the primitive, and batch_norm_backward(), the function to call in PYNATIVE code.

The primitive is primitives.Primitive of op_def/batch_norm_backward.yaml;
what it adds is its bprop (the double backward, for second-order gradients)
and the attribute names of aclnnBatchNormBackward as constructor arguments.
``backward_op(...)`` hands out one primitive per attribute set (the BatchNorm
cells of nn/ use it).
"""
import functools
import struct

from . import ms_compat  # noqa: F401  (first: refuses an unsupported MindSpore release)
from .checks import check_tensor_args, normalize_attrs
from .double_backward import bprop_for
from .launch import LOCK, compiling
from .primitives import Primitive
from .spec import BACKWARD_YAML, load_opdef


class BatchNormBackward(Primitive):
    """BatchNormBackward with aclnnBatchNormBackward semantics, as a MindSpore primitive.

    Usable in PYNATIVE code and inside a GRAPH_MODE ``Cell.construct``::

        op = BatchNormBackward(training=True, eps=1e-5, output_mask=(True, True, True))
        grad_input, grad_weight, grad_bias = op(grad_out, input, weight, running_mean,
                                                running_var, save_mean, save_invstd)

    Optional tensors may be None. Attributes are checked here; tensors are
    checked while MindSpore builds the graph (before any kernel runs).

    Differentiable (second-order gradients through BatchNorm): its bprop is
    BatchNormDoubleBackward, a fused kernel on CPU and composed from MindSpore
    ops on Ascend (see double_backward.py).
    """

    def __init__(self, training=True, eps=1e-5, output_mask=(True, True, True), data_format="NCHW"):
        attrs = normalize_attrs(training=training, eps=eps, output_mask=output_mask, data_format=data_format)
        super().__init__(BACKWARD_YAML, attrs, make_bprop=lambda _opdef, attrs: bprop_for(attrs))


@functools.lru_cache(maxsize=256)
def backward_op(training, eps, output_mask, data_format):
    """The BatchNormBackward of these (normalized, hashable) attributes, made once."""
    return BatchNormBackward(training, eps, output_mask, data_format)


def batch_norm_backward(grad_out, input, weight=None, running_mean=None, running_var=None,
                        save_mean=None, save_invstd=None, training=True, eps=1e-5,
                        output_mask=(True, True, True), data_format="NCHW"):
    """BatchNorm backward; returns (grad_input, grad_weight, grad_bias) MindSpore Tensors.

    Semantics of aclnnBatchNormBackward (see the README): training uses
    save_mean / save_invstd, inference uses running_mean / running_var and
    eps. Outputs whose output_mask bit is False are not computed and come back
    zero-filled.
    """
    if compiling():  # inside @ms.jit or a GRAPH construct (see launch.compiling)
        return BatchNormBackward(training, eps, output_mask, data_format)(
            grad_out, input, weight, running_mean, running_var, save_mean, save_invstd)
    tensors = (grad_out, input, weight, running_mean, running_var, save_mean, save_invstd)
    check_tensor_args(load_opdef(), tensors)
    key = _fast_key(training, eps, output_mask, data_format)
    with LOCK:  # PYNATIVE launches from several threads: see launch.py
        op = _ops_seen.get(key)
        if op is None:
            attrs = normalize_attrs(training=training, eps=eps, output_mask=output_mask,
                                    data_format=data_format)
            op = backward_op(attrs["training"], attrs["eps"], attrs["output_mask"], attrs["data_format"])
            if key is not None and len(_ops_seen) < 128:
                _ops_seen[key] = op
        return op(*tensors)


# PYNATIVE calls batch_norm_backward at every step: attribute values seen
# before, of exactly these Python types (bool, float, tuple of 3 bools, str),
# skip normalize_attrs. Anything else (lists, NumPy scalars, bad values) takes
# the checked path. eps is keyed by its bits, so -0.0 and 0.0 stay apart.
_ops_seen = {}


def _fast_key(training, eps, output_mask, data_format):
    if (type(training) is bool and type(eps) is float and type(data_format) is str
            and type(output_mask) is tuple and len(output_mask) == 3
            and type(output_mask[0]) is bool and type(output_mask[1]) is bool
            and type(output_mask[2]) is bool):
        return (training, struct.pack("<d", eps), output_mask, data_format)
    return None
