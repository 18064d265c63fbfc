"""Float64 oracle of the multi-host test: each sync set's BatchNorm over all its ranks' rows.

Independent of the package: batch_norm_train_ref (tests/reference.py) gives y,
the input gradient and one update of the running statistics from 0 / 1; the
batch mean and unbiased variance are read back from that update and carried
over the steps here, with the SGD step of mh_cases.py.
"""
import numpy as np

import mh_cases as C
from reference import batch_norm_train_ref


def _channel_axis(fmt, ndim):
    return ndim - 1 if fmt == "NHWC" else 1


def expected(case, world, groups):
    """{step: {rank: {"y", "gx", "gg", "gb", "mm", "mv", "gamma", "beta"}}} for steps 1 .. steps_of(case)."""
    fmt = C.ALL[case][0]
    gamma, beta = (p.astype(np.float64) for p in C.initial_params())
    sets = C.sync_sets(case, groups, world)
    running = {tuple(s): (np.zeros(C.CHANNELS), np.ones(C.CHANNELS)) for s in sets}
    m = C.MOMENTUM
    result = {}
    for step in range(1, C.steps_of(case) + 1):
        x, w, off = C.full_batch(case, world, groups, step)
        x, w = x.astype(np.float64), w.astype(np.float64)
        per_rank, gg_total, gb_total = {}, np.zeros(C.CHANNELS), np.zeros(C.CHANNELS)
        for s in sets:
            rows = np.concatenate([np.arange(off[r], off[r + 1]) for r in s]).astype(int)
            xs, ws = x[rows], w[rows]
            axis = _channel_axis(fmt, x.ndim)
            axes = tuple(i for i in range(x.ndim) if i != axis)
            n = xs.size // C.CHANNELS
            mm, mv = running[tuple(s)]
            if n > 0:
                y, gx, _, _, rm, rv = batch_norm_train_ref(xs, ws, gamma, beta, fmt, eps=C.EPS, momentum=m)
                bmean, bvar_u = rm / (1 - m), (rv - m) / (1 - m)   # the batch statistics behind one update
                mean, invstd = xs.mean(axis=axes), 1.0 / np.sqrt(xs.var(axis=axes) + C.EPS)
            else:   # every rank of the set empty: statistics taken as 0 (MindSpore's BatchNorm)
                y, gx = xs, xs
                bmean = bvar_u = mean = np.zeros(C.CHANNELS)
                invstd = np.full(C.CHANNELS, 1.0 / np.sqrt(C.EPS))
            running[tuple(s)] = (m * mm + (1 - m) * bmean, m * mv + (1 - m) * bvar_u)
            shape = [1] * x.ndim
            shape[axis] = C.CHANNELS
            start = 0
            for r in s:
                k = off[r + 1] - off[r]
                xr, wr = x[off[r]:off[r + 1]], w[off[r]:off[r + 1]]
                xhat = (xr - mean.reshape(shape)) * invstd.reshape(shape)
                gg, gb = (wr * xhat).sum(axis=axes), wr.sum(axis=axes)
                gg_total += gg
                gb_total += gb
                per_rank[r] = {"y": y[start:start + k], "gx": gx[start:start + k], "gg": gg, "gb": gb,
                               "mm": running[tuple(s)][0], "mv": running[tuple(s)][1]}
                start += k
        gamma = gamma - C.LR * gg_total / world
        beta = beta - C.LR * gb_total / world
        for r in per_rank:
            per_rank[r].update(gamma=gamma.copy(), beta=beta.copy())
        result[step] = per_rank
    return result
