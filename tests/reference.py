"""Independent float64 NumPy reference of BatchNormBackward (docs/operator.md, section 1).

Written from the formulas alone; it shares no code with the package, so a
test that compares against it can fail. Inputs are NumPy arrays (any float
dtype, converted to float64 here); absent tensors are None.
"""
import numpy as np

CHANNEL_LAST = ("NHWC", "NDHWC")


def batch_norm_backward_ref(grad_out, x, weight=None, running_mean=None, running_var=None,
                            save_mean=None, save_invstd=None, training=True, eps=1e-5,
                            output_mask=(True, True, True), data_format="NCHW"):
    """Returns (grad_input, grad_weight, grad_bias) as float64 arrays.

    Masked outputs are zeros of their normal shape, as the operator returns them.
    """
    dy = np.asarray(grad_out, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    axis = dy.ndim - 1 if data_format in CHANNEL_LAST else 1
    c = dy.shape[axis]
    reduce_axes = tuple(i for i in range(dy.ndim) if i != axis)
    bshape = [1] * dy.ndim
    bshape[axis] = c

    def chan(v, default):
        if v is None or np.asarray(v).size == 0 and c != 0:
            return np.full(c, default, dtype=np.float64)
        return np.asarray(v, dtype=np.float64).reshape(c)

    w = chan(weight, 1.0)
    if training:
        mean, invstd = chan(save_mean, 0.0), chan(save_invstd, 1.0)
    else:
        mean = chan(running_mean, 0.0)
        invstd = 1.0 / np.sqrt(chan(running_var, 1.0) + eps)
    n = dy.size // c if c else 0
    xhat = (x - mean.reshape(bshape)) * invstd.reshape(bshape)
    sum_dy = dy.sum(axis=reduce_axes)
    sum_dy_xhat = (dy * xhat).sum(axis=reduce_axes)
    if training:
        if n > 0:
            gi = (w * invstd / n).reshape(bshape) * (
                n * dy - sum_dy.reshape(bshape) - xhat * sum_dy_xhat.reshape(bshape))
        else:
            gi = np.zeros_like(dy)
    else:
        gi = dy * (invstd * w).reshape(bshape)
    outs = [gi, sum_dy_xhat, sum_dy]
    return tuple(o if keep else np.zeros_like(o) for o, keep in zip(outs, output_mask))
