"""Cases of the 2-worker SyncBatchNorm test, shared by the worker and the checker.

Each case is one full batch (x, and the weights W of the loss sum(y * W))
split along the batch axis between rank 0 and rank 1. Data come from a
seeded generator, so both sides rebuild the same arrays.
"""
import numpy as np

EPS = 1e-5
MOMENTUM = 0.9        # mindspore.nn convention: moving = 0.9 * moving + 0.1 * batch
GAMMA_SEED, BETA_SEED = 11, 12

# name: (full shape, rows of rank 0 (rank 1 gets the rest), data_format, process_groups)
CASES = {
    "even_nchw": ((8, 3, 4, 5), 4, "NCHW", None),
    "uneven_nc": ((7, 4), 5, "NCHW", None),
    "empty_rank1": ((6, 3, 2, 3), 6, "NCHW", None),
    "nhwc_groups": ((5, 3, 2, 4), 2, "NHWC", [[0, 1]]),
    "local_groups": ((6, 2, 3), 4, "NCHW", [[0], [1]]),   # no sync: each rank is its own group
}


def data(name):
    shape, split, fmt, groups = CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    x = (rng.standard_normal(shape) * 2.0 + 3.0).astype(np.float32)
    w = rng.standard_normal(shape).astype(np.float32)
    c = shape[-1] if fmt == "NHWC" else shape[1]
    gamma = np.random.default_rng(GAMMA_SEED).uniform(0.5, 1.5, c).astype(np.float32)
    beta = np.random.default_rng(BETA_SEED).uniform(-1, 1, c).astype(np.float32)
    return x, w, gamma, beta, split, fmt, groups


def rank_slice(rank, split, n):
    return slice(0, split) if rank == 0 else slice(split, n)
