"""Cases of the multi-host SyncBatchNorm test, for any world size and process_groups split.

Shared by the worker (mh_worker.py) and the oracle (mh_oracle.py): both
rebuild the same seeded data. A case trains a lone SyncBatchNorm for a few
steps on the loss sum(y * W); every step brings a new full batch whose rows
are split between the ranks by `counts(case, world)`, and the parameters move
by plain SGD on the gradient averaged over the world (a data-parallel reducer):
    p <- p - LR * sum_over_ranks(grad_p) / world
"""
import numpy as np

EPS = 1e-5
MOMENTUM = 0.9        # mindspore.nn convention: moving = 0.9 * moving + 0.1 * batch
LR = 0.1
CHANNELS = 3
STEPS = 2
RESUME_STEPS = 4      # the checkpoint/restart case runs longer

# name: (data_format, spatial shape, whether it uses the harness's process_groups, empty rule)
CASES = {
    "world_uneven": ("NCHW", (2, 3), False, None),
    "world_empty": ("NCHW", (3,), False, "one_rank"),
    "split_uneven_nhwc": ("NHWC", (2, 2), True, None),
    "split_empty": ("NCHW", (2, 2), True, "one_rank_and_last_group"),
}
RESUME_CASE = "resume"
ALL = dict(CASES, resume=("NCHW", (2, 3), True, None))
# A GRAPH compile costs 10-30 s on a busy machine: GRAPH runs the case that has everything (a
# process_groups split, uneven batches, an empty rank and an empty group); PYNATIVE runs them all.
MODE_CASES = {"pynative": list(CASES) + [RESUME_CASE], "graph": ["split_empty"]}


def groups_of(case, groups):
    """The process_groups the case passes to SyncBatchNorm."""
    return groups if ALL[case][2] else None


def sync_sets(case, groups, world):
    """The sets of ranks that share statistics (ranks outside every listed group are alone)."""
    g = groups_of(case, groups)
    if g is None:
        return [list(range(world))]
    listed = [list(s) for s in g]
    seen = {r for s in listed for r in s}
    return listed + [[r] for r in range(world) if r not in seen]


def counts(case, world, groups, step):
    """Rows of each rank in `step` (uneven; some empty by the case's rule)."""
    c = [1 + (3 * r + step) % 4 for r in range(world)]
    rule = ALL[case][3]
    if rule in ("one_rank", "one_rank_and_last_group"):
        c[1 % world] = 0
    if rule == "one_rank_and_last_group":
        sets = sync_sets(case, groups, world)
        if len(sets) > 1:
            for r in sets[-1]:
                c[r] = 0
    return c


def full_batch(case, world, groups, step):
    """(x, w, row offsets per rank) of one step: x and w over all ranks' rows."""
    fmt, spatial, _, _ = ALL[case]
    n = counts(case, world, groups, step)
    shape = (sum(n), *spatial, CHANNELS) if fmt == "NHWC" else (sum(n), CHANNELS, *spatial)
    rng = np.random.default_rng([sum(map(ord, case)), step, world])
    x = (rng.standard_normal(shape) * 2.0 + 3.0).astype(np.float32)
    w = rng.standard_normal(shape).astype(np.float32)
    return x, w, np.concatenate([[0], np.cumsum(n)]).astype(int)


def rank_rows(case, world, groups, step, rank):
    x, w, off = full_batch(case, world, groups, step)
    return x[off[rank]:off[rank + 1]], w[off[rank]:off[rank + 1]]


def initial_params():
    gamma = np.random.default_rng(11).uniform(0.5, 1.5, CHANNELS).astype(np.float32)
    beta = np.random.default_rng(12).uniform(-1, 1, CHANNELS).astype(np.float32)
    return gamma, beta


def steps_of(case):
    return RESUME_STEPS if case == RESUME_CASE else STEPS
