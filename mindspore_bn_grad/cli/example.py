"""`python -m mindspore_bn_grad example`: the operator once, checked against NumPy.

Runs the worked example of docs/operator.md (section 6) and a random
NCHW case in PYNATIVE mode and prints the largest difference from a float64
NumPy computation of the same formulas.
"""
import argparse

import numpy as np


def _numpy_backward(dy, x, w, mean, invstd):
    axes = (0,) + tuple(range(2, x.ndim))
    b = (1, -1) + (1,) * (x.ndim - 2)
    n = x.size // x.shape[1]
    xhat = (x - mean.reshape(b)) * invstd.reshape(b)
    sdy, sdyx = dy.sum(axes), (dy * xhat).sum(axes)
    gi = (w * invstd / n).reshape(b) * (n * dy - sdy.reshape(b) - xhat * sdyx.reshape(b))
    return gi, sdyx, sdy


def main(argv=()):
    argparse.ArgumentParser(prog="python -m mindspore_bn_grad example",
                            description=__doc__.split("\n\n")[1].replace("\n", " ")).parse_args(list(argv))
    import mindspore as ms
    from mindspore_bn_grad import batch_norm_backward

    ms.set_device("CPU")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    T = ms.Tensor
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 4)
    ones, zeros = np.ones(2, np.float32), np.zeros(2, np.float32)
    gi, gw, gb = batch_norm_backward(T(x), T(x), T(ones), T(zeros), T(ones), T(zeros), T(ones),
                                     training=True, eps=1e-5)
    print("worked example (gradOut = input = [[[0..3],[4..7]]], saved stats 0 / 1):")
    print("  gradInput  =", gi.asnumpy().tolist())
    print("  gradWeight =", gw.asnumpy().tolist())
    print("  gradBias   =", gb.asnumpy().tolist())
    worst = 0.0
    cases = [(x, x, ones, zeros, ones)]
    rng = np.random.default_rng(0)
    xr = rng.standard_normal((4, 3, 5, 5)).astype(np.float32)
    dyr = rng.standard_normal(xr.shape).astype(np.float32)
    mean = xr.mean((0, 2, 3))
    invstd = (1 / np.sqrt(xr.var((0, 2, 3)) + 1e-5)).astype(np.float32)
    w = rng.standard_normal(3).astype(np.float32)
    cases.append((dyr, xr, w, mean, invstd))
    for dy, xx, ww, m, s in cases:
        got = batch_norm_backward(T(dy), T(xx), T(ww), None, None, T(m), T(s))
        want = _numpy_backward(*(a.astype(np.float64) for a in (dy, xx, ww, m, s)))
        worst = max(worst, max(float(np.abs(g.asnumpy() - w_).max()) for g, w_ in zip(got, want)))
    ok = worst < 1e-4
    print(f"max |ours - numpy float64| over {len(cases)} cases: {worst:.2e} -> {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1
