"""Float64 NumPy oracle of the 2-worker SyncBatchNorm test: full-batch BatchNorm.

Independent of the package: forward statistics and running-stat update from
the BatchNorm definition, gradients from tests/reference.py.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from cases import EPS, MOMENTUM, data, rank_slice  # noqa: E402
from reference import batch_norm_backward_ref  # noqa: E402


def full_batch(x, w, gamma, beta, fmt):
    """y, grad_x, grad_gamma, grad_beta, moving_mean, moving_var of BatchNorm over the whole batch."""
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    axis = x.ndim - 1 if fmt == "NHWC" else 1
    axes = tuple(i for i in range(x.ndim) if i != axis)
    bshape = [1] * x.ndim
    bshape[axis] = -1
    n = x.size // x.shape[axis]
    mean = x.mean(axis=axes)
    var = x.var(axis=axes)
    invstd = 1.0 / np.sqrt(var + EPS)
    y = (x - mean.reshape(bshape)) * invstd.reshape(bshape) * gamma.reshape(bshape) + beta.reshape(bshape)
    gx, gg, gb = batch_norm_backward_ref(w, x, gamma, save_mean=mean, save_invstd=invstd, training=True,
                                         data_format=fmt)
    mom = 1.0 - MOMENTUM
    mm = mom * mean
    mv = (1.0 - mom) * 1.0 + mom * var * n / (n - 1)
    return y, gx, gg, gb, mm, mv


def expected(name, rank):
    """What rank `rank` must report for case `name` (its slice for y / grad_x; summed over
    the group for gamma/beta gradients: a rank's own share when groups are single ranks)."""
    x, w, gamma, beta, split, fmt, groups = data(name)
    local = groups is not None and all(len(g) == 1 for g in groups)
    part = rank_slice(rank, split, x.shape[0])
    if local:  # no synchronisation: BatchNorm of this rank's batch alone
        return full_batch(x[part], w[part], gamma, beta, fmt), slice(None)
    return full_batch(x, w, gamma, beta, fmt), part


def check(out_dir, mode, name, world=2):
    """Asserts the saved results of every rank against the oracle; returns the max errors."""
    res = [dict(np.load(os.path.join(out_dir, f"{mode}_{name}_rank{r}.npz"))) for r in range(world)]
    x, w, gamma, beta, split, fmt, groups = data(name)
    local = groups is not None and all(len(g) == 1 for g in groups)
    errs = {}
    gg_sum = sum(r["gg"].astype(np.float64) for r in res)
    gb_sum = sum(r["gb"].astype(np.float64) for r in res)
    for rank, r in enumerate(res):
        (y, gx, gg, gb, mm, mv), part = expected(name, rank)
        pairs = {"y": (r["y"], y[part]), "gx": (r["gx"], gx[part]), "mm": (r["mm"], mm), "mv": (r["mv"], mv)}
        if local:
            pairs.update(gg=(r["gg"], gg), gb=(r["gb"], gb))
        for key, (got, want) in pairs.items():
            assert got.shape == want.shape, (mode, name, rank, key, got.shape, want.shape)
            err = float(np.max(np.abs(got - want) / (1.0 + np.abs(want)))) if want.size else 0.0
            errs[f"{key}{rank}"] = err
            tol = 1e-4 if key in ("y", "gx", "mm", "mv") else 1e-3
            assert err < tol, f"{mode} {name} rank {rank} {key}: error {err:.3g}\ngot {got}\nwant {want}"
    if not local:
        (_, _, gg, gb, _, _), _ = expected(name, 0)
        for key, got, want in (("gg_sum", gg_sum, gg), ("gb_sum", gb_sum, gb)):
            err = float(np.max(np.abs(got - want) / (1.0 + np.abs(want))))
            errs[key] = err
            assert err < 1e-3, f"{mode} {name} {key}: error {err:.3g}\ngot {got}\nwant {want}"
    return errs
