"""Double backward: the derivative of BatchNormBackward, so second-order gradients work.

    BatchNormDoubleBackward(training, eps, output_mask, data_format)
        (grad_out, input, weight, running_mean, running_var, save_mean, save_invstd,
         grad_grad_input, grad_grad_weight, grad_grad_bias)
        -> (grad_grad_out, grad_input, grad_weight)

Prototype and formulas: op_def/batch_norm_double_backward.yaml (derivation:
tests/reference.py). Attributes are those of the BatchNormBackward being
differentiated; its output_mask says which upstream gradients count.
`bprop_for(attrs)` is the bprop BatchNormBackward is built with.

Routes:
- CPU: the fused aot kernel of csrc/bn_double_backward_*.cpp.
- Ascend: composed from MindSpore ops (`composed_double_backward`); there is
  no Ascend C kernel of the double backward.
cpu_kernel.native.double_direct runs the CPU kernel on NumPy arrays without MindSpore.
"""
import functools

from . import target
from .checks import normalize_op_attrs
from .primitives import Primitive
from .spec import DOUBLE_YAML, is_channel_last, load_opdef


def _on_ascend() -> bool:
    return target.device_target() == "Ascend"


class BatchNormDoubleBackward(Primitive):
    """Primitive of the fused CPU double backward (on Ascend: use composed_double_backward).

    Not differentiable itself (third-order gradients of BatchNorm are not supported).
    """

    def __init__(self, training=True, eps=1e-5, output_mask=(True, True, True), data_format="NCHW"):
        attrs = normalize_op_attrs(load_opdef(DOUBLE_YAML), dict(training=training, eps=eps,
                                                                 output_mask=output_mask, data_format=data_format))
        if _on_ascend():
            raise RuntimeError(f"{load_opdef(DOUBLE_YAML).op_name}: no Ascend kernel; on Ascend the double "
                               "backward of BatchNormBackward is composed from MindSpore ops "
                               "(mindspore_bn_grad.double_backward.composed_double_backward)")
        super().__init__(DOUBLE_YAML, attrs)


@functools.lru_cache(maxsize=128)
def _double_op(training, eps, output_mask, data_format):
    return BatchNormDoubleBackward(training, eps, output_mask, data_format)


def bprop_for(attrs):
    """bprop of a BatchNormBackward with these (normalized) attributes.

    Gradients of grad_out, input and weight from the double backward; zero
    for running_mean, running_var, save_mean and save_invstd (training:
    the saved statistics count as functions of input, and their path is
    inside the input gradient; inference: running statistics are constants).
    """
    key = (attrs["training"], attrs["eps"], attrs["output_mask"], attrs["data_format"])
    compute = composed_double_backward(attrs) if _on_ascend() else _double_op(*key)
    from mindspore import ops
    zeros_like = ops.ZerosLike()

    def bprop(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, out, dout):
        g_dy, g_x, g_w = compute(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd,
                                 dout[0], dout[1], dout[2])
        return (g_dy, g_x, _like(g_w, weight), _zeros(zeros_like, running_mean), _zeros(zeros_like, running_var),
                _zeros(zeros_like, save_mean), _zeros(zeros_like, save_invstd))

    return bprop


def _like(g, t):
    return None if t is None else g


def _zeros(zeros_like, t):
    return None if t is None else zeros_like(t)


# --- Ascend route: composed from MindSpore ops --------------------------------------

def composed_double_backward(attrs):
    """The double backward as a function of MindSpore tensors, from MindSpore ops (any target, both modes).

    Same inputs and outputs as BatchNormDoubleBackward; the arithmetic runs in
    float32 (float64 for float64 inputs) and results take the op's output dtypes.
    """
    from mindspore import ops
    import mindspore as ms

    training, eps, mask = attrs["training"], attrs["eps"], attrs["output_mask"]
    channel_last = is_channel_last(attrs["data_format"])

    def compute(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, ggi, ggw, ggb):
        rank = grad_out.ndim
        axis = rank - 1 if channel_last else 1
        axes = _reduce_axes(rank, axis)
        c = grad_out.shape[axis]
        bshape = _bcast_shape(rank, axis, c)
        ct = ms.float64 if grad_out.dtype == ms.float64 else ms.float32
        pdt = grad_out.dtype if weight is None else weight.dtype

        def chan(t, default):
            if t is None:
                return ops.fill(ct, (c,), default)
            return ops.cast(t, ct)

        dy, x = ops.cast(grad_out, ct), ops.cast(input, ct)
        w = chan(weight, 1.0)
        # a masked output's upstream gradient is ignored (even a NaN one)
        gw_up = chan(ggw, 0.0) if mask[1] else ops.zeros((c,), ct)
        gb_up = chan(ggb, 0.0) if mask[2] else ops.zeros((c,), ct)
        gi = ops.cast(ggi, ct) if mask[0] else ops.zeros_like(dy)
        if training:
            mean, s = chan(save_mean, 0.0), chan(save_invstd, 1.0)
        else:
            mean = chan(running_mean, 0.0)
            s = ops.rsqrt(chan(running_var, 1.0) + eps)
        xhat = (x - mean.reshape(bshape)) * s.reshape(bshape)
        ws = (w * s).reshape(bshape)
        n = x.size // c if c else 0
        if not training:
            g_dy = gi * ws + gw_up.reshape(bshape) * xhat + gb_up.reshape(bshape)
            g_x = (gw_up * s).reshape(bshape) * dy
            g_w = (gi * dy).sum(axis=axes) * s
        else:
            m_dy, m_dyx = dy.mean(axis=axes, keep_dims=True), (dy * xhat).mean(axis=axes, keep_dims=True)
            m_g, m_gx = gi.mean(axis=axes, keep_dims=True), (gi * xhat).mean(axis=axes, keep_dims=True)
            m_gdy = (gi * dy).mean(axis=axes, keep_dims=True)
            cov = m_gdy - m_g * m_dy - m_gx * m_dyx
            sb = s.reshape(bshape)
            g_dy = ws * (gi - m_g - xhat * m_gx) + gw_up.reshape(bshape) * xhat + gb_up.reshape(bshape)
            g_w = (cov * sb * n).reshape((c,))
            g = gw_up.reshape(bshape) * dy - ws * (m_dyx * gi + m_gx * dy)
            g_x = -(sb * sb) * w.reshape(bshape) * cov * xhat + sb * (g - g.mean(axis=axes, keep_dims=True)
                                                              - xhat * (g * xhat).mean(axis=axes, keep_dims=True))
        if not n:  # no elements: no gradient (and no reduction over nothing, which CPU leaves unwritten)
            g_w = ops.zeros((c,), ct)
        return ops.cast(g_dy, grad_out.dtype), ops.cast(g_x, input.dtype), ops.cast(g_w, pdt)

    return compute


def _reduce_axes(rank, axis):
    return tuple(i for i in range(rank) if i != axis)


def _bcast_shape(rank, axis, c):
    return tuple(c if i == axis else 1 for i in range(rank))
