"""Float64 NumPy oracle of the 2-worker SyncBatchNorm test: full-batch BatchNorm.

Independent of the package: batch_norm_train_ref (tests/reference.py) gives
the forward, the gradients and the running-statistics update of BatchNorm
over the whole batch.
"""
import os

import numpy as np

from cases import EPS, MOMENTUM, data, rank_slice
from reference import batch_norm_train_ref


def full_batch(x, w, gamma, beta, fmt):
    """y, grad_x, grad_gamma, grad_beta, moving_mean, moving_var of BatchNorm over the whole batch."""
    return batch_norm_train_ref(x, w, gamma, beta, fmt, eps=EPS, momentum=MOMENTUM)


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
