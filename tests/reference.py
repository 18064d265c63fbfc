"""Independent float64 NumPy references of the operators (docs/operator.md).

Written from the formulas alone; they share no code with the package, so a
test that compares against them can fail. Inputs are NumPy arrays (any float
dtype, converted to float64 here); absent tensors are None.

- batch_norm_backward_ref: BatchNormBackward (section 1);
- sync_reduce_ref / sync_elemt_ref: the two SyncBatchNorm backward steps
  (section 7);
- batch_norm_train_ref: a whole training-mode BatchNorm over one batch
  (forward, backward, running-statistics update), the oracle of SyncBatchNorm;
- batch_norm_forward_ref: BatchNormForward (docs/forward.md).
"""
import numpy as np

CHANNEL_LAST = ("NHWC", "NDHWC")


def _frame(a, data_format):
    """(channels, reduction axes, broadcast shape, chan) of an activation `a` in data_format;
    chan(v, default) is a per-channel vector in float64, `default` everywhere when v is absent
    (None, or empty while there are channels)."""
    axis = a.ndim - 1 if data_format in CHANNEL_LAST else 1
    c = a.shape[axis]
    bshape = [1] * a.ndim
    bshape[axis] = c

    def chan(v, default):
        if v is None or np.asarray(v).size == 0 and c != 0:
            return np.full(c, default, dtype=np.float64)
        return np.asarray(v, dtype=np.float64).reshape(c)
    return c, tuple(i for i in range(a.ndim) if i != axis), bshape, chan


def batch_norm_backward_ref(grad_out, x, weight=None, running_mean=None, running_var=None,
                            save_mean=None, save_invstd=None, training=True, eps=1e-5,
                            output_mask=(True, True, True), data_format="NCHW"):
    """Returns (grad_input, grad_weight, grad_bias) as float64 arrays.

    Masked outputs are zeros of their normal shape, as the operator returns them.
    """
    dy = np.asarray(grad_out, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    c, reduce_axes, bshape, chan = _frame(dy, data_format)
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


def _layout(dy, data_format):
    _, axes, bshape, _ = _frame(dy, data_format)
    return axes, bshape


def sync_reduce_ref(grad_out, x, mean, invstd, data_format="NCHW"):
    """(sum_dy, sum_dy_xmu, grad_weight, grad_bias) of one rank, float64."""
    dy, x = np.asarray(grad_out, np.float64), np.asarray(x, np.float64)
    axes, bshape = _layout(dy, data_format)
    mean, invstd = np.asarray(mean, np.float64), np.asarray(invstd, np.float64)
    sum_dy = dy.sum(axis=axes)
    sum_dy_xmu = (dy * (x - mean.reshape(bshape))).sum(axis=axes)
    return sum_dy, sum_dy_xmu, sum_dy_xmu * invstd, sum_dy


def sync_elemt_ref(grad_out, x, mean, invstd, weight, sum_dy, sum_dy_xmu, counter, data_format="NCHW"):
    """grad_input from the group-wide sums; N = sum(counter); an absent weight is 1."""
    dy, x = np.asarray(grad_out, np.float64), np.asarray(x, np.float64)
    _, bshape = _layout(dy, data_format)
    n = float(np.sum(np.asarray(counter, np.float64)))
    r = lambda v: np.asarray(v, np.float64).reshape(bshape)  # noqa: E731
    w = np.ones_like(np.asarray(mean, np.float64)) if weight is None else weight
    return (dy - r(sum_dy) / n - (x - r(mean)) * r(invstd) ** 2 * r(sum_dy_xmu) / n) * r(invstd) * r(w)


def batch_norm_train_ref(x, grad_y, gamma, beta, data_format="NCHW", eps=1e-5, momentum=0.9):
    """Training-mode BatchNorm over the whole batch: (y, grad_x, grad_gamma, grad_beta,
    moving_mean, moving_var), the moving statistics updated once from 0 / 1 with
    MindSpore's convention (moving = momentum * moving + (1 - momentum) * batch,
    unbiased batch variance)."""
    x, grad_y = np.asarray(x, np.float64), np.asarray(grad_y, np.float64)
    axes, bshape = _layout(x, data_format)
    n = x.size // x.shape[len(x.shape) - 1 if data_format in CHANNEL_LAST else 1]
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    invstd = 1.0 / np.sqrt(var + eps)
    gamma, beta = np.asarray(gamma, np.float64), np.asarray(beta, np.float64)
    y = (x - mean.reshape(bshape)) * invstd.reshape(bshape) * gamma.reshape(bshape) + beta.reshape(bshape)
    gx, gg, gb = batch_norm_backward_ref(grad_y, x, gamma, save_mean=mean, save_invstd=invstd, training=True,
                                         data_format=data_format)
    moving_mean = (1.0 - momentum) * mean
    moving_var = momentum * 1.0 + (1.0 - momentum) * var * n / (n - 1)
    return y, gx, gg, gb, moving_mean, moving_var


def batch_norm_double_backward_ref(grad_out, x, weight=None, running_mean=None, running_var=None,
                                   save_mean=None, save_invstd=None, grad_grad_input=None,
                                   grad_grad_weight=None, grad_grad_bias=None, training=True, eps=1e-5,
                                   output_mask=(True, True, True), data_format="NCHW"):
    """Derivative of batch_norm_backward (spec section 7), float64.

    The upstream gradients ggI, ggW, ggB are those of grad_input, grad_weight
    and grad_bias; an absent one, or one whose output_mask bit is False, counts
    as zero. Returns (grad of grad_out, grad of input, grad of weight).

    Training: save_mean / save_invstd are the batch statistics of x (biased
    variance + eps), so the input gradient includes their dependence on x:
        mean  = mean(x),   d mean / dx_i   = 1/n
        invstd = (var + eps)^(-1/2),   d invstd / dx_i = -invstd^2 * xhat_i / n
    With L = sum(ggI * gI) + ggW * gW + ggB * gB, gI = w*s*(dy - mean(dy) - xhat*mean(dy*xhat)),
    gW = sum(dy*xhat), gB = sum(dy), the chain rule through s and xhat gives (per channel)
        dL/ds      = w * (sum(ggI*dy) - n*mean(ggI)*mean(dy) - n*mean(ggI*xhat)*mean(dy*xhat))
        dL/dxhat_j = ggW*dy_j - w*s*(mean(dy*xhat)*ggI_j + mean(ggI*xhat)*dy_j)      (= G_j)
        dL/dx_i    = dL/ds * (-s^2 xhat_i / n) + s * (G_i - mean(G) - xhat_i * mean(G*xhat))
    where dxhat_j/dx_i = s * (delta_ij - 1/n - xhat_i*xhat_j/n) was used.
    mean(xhat^2) is not 1 (eps), and nothing here assumes it.
    """
    dy = np.asarray(grad_out, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    c, axes, bshape, chan = _frame(dy, data_format)

    def b(v):  # per-channel vector broadcast against the activations
        return v.reshape(bshape)

    m0, m1, m2 = (bool(v) for v in output_mask)
    ggi = np.asarray(grad_grad_input, dtype=np.float64) if (m0 and grad_grad_input is not None) \
        else np.zeros_like(dy)
    ggw = chan(grad_grad_weight, 0.0) if m1 else np.zeros(c)
    ggb = chan(grad_grad_bias, 0.0) if m2 else np.zeros(c)
    w = chan(weight, 1.0)
    if training:
        mean, s = chan(save_mean, 0.0), chan(save_invstd, 1.0)
    else:
        mean = chan(running_mean, 0.0)
        s = 1.0 / np.sqrt(chan(running_var, 1.0) + eps)
    xhat = (x - b(mean)) * b(s)
    n = dy.size // c if c else 0
    if not training:
        g_dy = ggi * b(w * s) + b(ggw) * xhat + b(ggb)
        g_x = b(ggw * s) * dy
        g_w = (ggi * dy).sum(axis=axes) * s
        return g_dy, g_x, g_w
    if n == 0:
        return np.zeros_like(dy), np.zeros_like(x), np.zeros(c)

    def avg(v):
        return v.mean(axis=axes)

    m_dy, m_dyx = avg(dy), avg(dy * xhat)
    m_gi, m_gix = avg(ggi), avg(ggi * xhat)
    m_gidy = avg(ggi * dy)
    g_dy = b(w * s) * (ggi - b(m_gi) - xhat * b(m_gix)) + b(ggw) * xhat + b(ggb)
    g_w = n * s * (m_gidy - m_gi * m_dy - m_gix * m_dyx)
    dl_ds = w * n * (m_gidy - m_gi * m_dy - m_gix * m_dyx)
    g = b(ggw) * dy - b(w * s) * (b(m_dyx) * ggi + b(m_gix) * dy)
    g_x = b(dl_ds) * (-b(s * s) * xhat / n) + b(s) * (g - b(avg(g)) - xhat * b(avg(g * xhat)))
    return g_dy, g_x, g_w


def batch_norm_forward_ref(x, weight=None, bias=None, running_mean=None, running_var=None, training=False,
                           momentum=0.1, eps=1e-5, data_format="NCHW"):
    """Returns (output, save_mean, save_invstd, running_mean_out, running_var_out) as float64 arrays.

    Absent weight / bias / running statistics count as 1 / 0 / 0 / 1. Training:
    biased batch variance for the output, unbiased (n / (n - 1)) for the running
    update (n == 1: NaN, as PyTorch); an empty batch: mean 0, variance 0, the
    running statistics unchanged. Inference: the running statistics, which
    come back unchanged.
    """
    x = np.asarray(x, dtype=np.float64)
    c, axes, bshape, chan = _frame(x, data_format)

    rm, rv = chan(running_mean, 0.0), chan(running_var, 1.0)
    n = x.size // c if c else 0
    if not training:
        mean, var, rm_out, rv_out = rm, rv, rm, rv
    elif n == 0:
        mean, var, rm_out, rv_out = np.zeros(c), np.zeros(c), rm, rv
    else:
        mean = x.mean(axis=axes)
        dev2 = ((x - mean.reshape(bshape)) ** 2).sum(axis=axes)
        var = dev2 / n
        with np.errstate(invalid="ignore", divide="ignore"):
            unbiased = dev2 / (n - 1) if n > 1 else np.full(c, np.nan)
        rm_out = (1 - momentum) * rm + momentum * mean
        rv_out = (1 - momentum) * rv + momentum * unbiased
    invstd = 1.0 / np.sqrt(var + eps)
    y = (x - mean.reshape(bshape)) * (invstd * chan(weight, 1.0)).reshape(bshape) + chan(bias, 0.0).reshape(bshape)
    return y, mean, invstd, rm_out, rv_out
