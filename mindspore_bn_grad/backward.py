"""Public entry points: batch_norm_backward() and the BatchNormBackward primitive."""
import functools
import struct

from . import ms_compat  # noqa: F401  (first: refuses an unsupported MindSpore release)
import mindspore as ms
from mindspore import ops

from .checks import check_device_target, check_tensor_args, fail, normalize_attrs
from .double_backward import bprop_for
from .infer import make_infer
from .launch import LOCK, _compiling, _probe
from .spec import load_opdef


def _kernel_kwargs(attrs) -> dict:
    """func / reg_info of ops.Custom for the current device target."""
    check_device_target()
    if ms.get_context("device_target") == "Ascend":
        from .ascend import ascend_custom_kwargs
        return ascend_custom_kwargs(attrs)
    from .cpu_kernel import native as _native
    _native.lib()  # build (first use) and apply the thread setting
    return {"func": _native.aot_func()}


class BatchNormBackward(ops.Custom):
    """BatchNormBackward with aclnnBatchNormBackward semantics, as a MindSpore primitive.

    Usable in PYNATIVE code and inside a GRAPH_MODE ``Cell.construct``::

        op = BatchNormBackward(training=True, eps=1e-5, output_mask=(True, True, True))
        grad_input, grad_weight, grad_bias = op(grad_out, input, weight, running_mean,
                                                running_var, save_mean, save_invstd)

    Optional tensors may be None. Attributes are checked here; tensors are
    checked while MindSpore builds the graph (before any kernel runs).

    Differentiable (second-order gradients through BatchNorm): its bprop is
    BatchNormDoubleBackward, a fused kernel on CPU and composed from MindSpore
    ops on Ascend (see _double.py).
    """

    def __init__(self, training=True, eps=1e-5, output_mask=(True, True, True), data_format="NCHW"):
        attrs = normalize_attrs(training=training, eps=eps, output_mask=output_mask,
                                data_format=data_format)
        infer_shape, infer_dtype = make_infer(attrs)
        kernel = _kernel_kwargs(attrs)  # first: it checks the device target
        # bprop: the double backward (second-order gradients), see _double.py
        super().__init__(out_shape=infer_shape, out_dtype=infer_dtype, func_type="aot",
                         bprop=bprop_for(attrs), **kernel)
        for a in load_opdef().attrs:
            value = attrs[a.name]
            # The aot Init reads output_mask as an int vector (a bool tuple fails there).
            self.add_prim_attr(a.kernel_attr, [int(b) for b in value] if a.type == "bool_tuple" else value)
            if a.kernel_bits_name and not self.is_ascend_c:
                self.add_prim_attr(a.kernel_bits_name, struct.unpack("<q", struct.pack("<d", value))[0])
        if not self.is_ascend_c:
            _enable_dynamic_shape(self, load_opdef().op_name)
        self.bn_attrs = attrs

    def __infer__(self, *args):
        # GRAPH mode hands non-Tensor arguments (lists, NumPy arrays, Python
        # scalars) to the infer step as nested shapes or scalar types: reject
        # them by name before the shape checks misread them.
        inputs = load_opdef().inputs
        if len(args) != len(inputs):  # else a missing one reads as None, an extra one reaches the kernel
            fail(TypeError, "inputs", f"{len(inputs)} tensors ({', '.join(a.name for a in inputs)}; "
                 "None for an absent optional one)", f"{len(args)}")
        for arg, given in zip(inputs, args):
            _check_tensor_arg(arg, given.get("dtype"))
        if not self.is_ascend_c and any(_is_tensor(g.get("dtype")) and min(g["shape"], default=0) < 0
                                        for g in args):
            self._note_present([int(_is_tensor(g.get("dtype"))) for g in args])
        return super().__infer__(*args)

    def _note_present(self, present):
        """With unknown dims, tells the C++ infer which inputs its shape list holds (None ones are left
        out): from then on it checks each launch's shapes (csrc/aot_entry.cpp CheckShapes), which only
        it sees. Set only then, since it runs before this infer and would preempt its errors. One
        primitive used with two None patterns gets [-1]: then only grad_out and input are checked."""
        seen = getattr(self, "_present", None)
        if seen == present or seen == [-1]:
            return
        self._present = present if seen is None else [-1]
        self.add_prim_attr("input_present", self._present)


def _is_tensor(dtype):
    from mindspore.common import dtype as mstype
    return isinstance(dtype, mstype.TensorType)


def _check_tensor_arg(arg, dtype):
    from mindspore.common import dtype as mstype
    if isinstance(dtype, mstype.TensorType):
        return
    if dtype is None or isinstance(dtype, type(mstype.type_none)):
        if arg.optional:
            return
        fail(TypeError, arg.name, "a mindspore.Tensor", "NoneType")  # as batch_norm_backward() says
    got = type(dtype).__name__ if isinstance(dtype, (list, tuple)) else f"a non-Tensor value of type {dtype}"
    fail(TypeError, arg.name, "a mindspore.Tensor" + (" or None" if arg.optional else ""), got)


def _enable_dynamic_shape(op, op_name):
    """Lets the aot op run in GRAPH mode with unknown dims (Cell.set_inputs with None).

    With dynamic shapes MindSpore 2.10 infers the output shapes again before
    every launch, in C++, on a primitive that is no longer the Python one: a
    Python out_shape cannot run there ("The prim is not a PrimitivePy"). So:
    - cpp_infer_shape: output shapes come from BatchNormBackwardInferShape in
      the kernel library (grad_out's shape and its channel dim), at compile
      and at each launch. MindSpore still calls the Python infer at compile
      (for the dtypes), which runs every check on the known dims and raises.
    - multi_output: the C++ infer returns a tuple of three shapes.
    - reg_op_name: read by the C++ infer (its absence is the
      "The pointer[value] is null" error); set by reg_info, which we do not use.
    """
    op.add_prim_attr("reg_op_name", op_name)
    op.add_prim_attr("cpp_infer_shape", True)
    op.multi_output = True
    op.add_prim_attr("multi_output", True)


@functools.lru_cache(maxsize=128)
def _cached_op(training, eps, output_mask, data_format):
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
    if _compiling(_probe):  # inside @ms.jit or a GRAPH construct (see _launch.compiling)
        return BatchNormBackward(training, eps, output_mask, data_format)(
            grad_out, input, weight, running_mean, running_var, save_mean, save_invstd)
    tensors = (grad_out, input, weight, running_mean, running_var, save_mean, save_invstd)
    check_tensor_args(load_opdef(), tensors)
    key = _fast_key(training, eps, output_mask, data_format)
    with LOCK:  # PYNATIVE launches from several threads: see _launch.py
        op = _ops_seen.get(key)
        if op is None:
            attrs = normalize_attrs(training=training, eps=eps, output_mask=output_mask,
                                    data_format=data_format)
            op = _cached_op(attrs["training"], attrs["eps"], attrs["output_mask"], attrs["data_format"])
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
