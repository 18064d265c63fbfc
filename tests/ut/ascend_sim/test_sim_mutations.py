"""Mutations of our own kernel (a barrier removed, a copy grown by one block, a
UB view shifted by one block) must be caught by the simulator's checks
(tests/ut/ascend_sim/mutations.py patches a copy; the shipped source is never
edited). One build of the patched copy runs every mutation."""
import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest

import mutations
import simlib

pytestmark = pytest.mark.ascend_sim

# Small cases that between them reach every path the mutations touch: with and
# without DataCopyPad / SyncAll, channel-first / channel-last / flat, 32- and
# 16-bit, training and inference, several tiles and cores.
CASES = [
    dict(shape=(4, 3, 999), channel_last=False, dtype="float32", soc="ascend910b", ub_bytes=20 * 1024, cores=3),
    dict(shape=(4, 3, 999), channel_last=False, dtype="float16", soc="ascend910b", ub_bytes=20 * 1024, cores=3,
         training=False),
    dict(shape=(50, 701), channel_last=True, dtype="float32", soc="ascend910b", ub_bytes=16 * 1024, cores=3),
    dict(shape=(4, 3, 999), channel_last=False, dtype="float32", soc="ascend910", ub_bytes=20 * 1024, cores=3),
    dict(shape=(50, 701), channel_last=True, dtype="float16", soc="ascend310p", ub_bytes=16 * 1024, cores=3),
    dict(shape=(9, 7, 3), channel_last=False, dtype="bfloat16", soc="ascend910b", cores=2),
    dict(shape=(3, 130, 5), channel_last=False, dtype="float32", soc="ascend910", ub_bytes=20 * 1024, cores=8),
    dict(shape=(2, 5), channel_last=True, dtype="float32", soc="ascend910", cores=2, training=False),
    # the single pass's deferred statistics tails (DeferredStatTail), float32 and 16-bit statistics
    dict(shape=(8, 44, 14, 14), channel_last=False, dtype="float32", soc="ascend910", cores=2),
    dict(shape=(8, 40, 14, 14), channel_last=False, dtype="float16", soc="ascend910", cores=1),
]

# Most barriers of the kernel are doubled by a neighbour (the next function
# starts with its own PipeBarrier, SyncAll runs PipeBarrier<PIPE_ALL> itself,
# a TQue hand-over orders the same pipes), so removing one of those is not a
# hazard and cannot be caught; at least this share of the removals the cases
# reach must be.
MIN_CAUGHT_BARRIER_SHARE = 0.5
# A view shifted by one block inside a buffer larger than any access to it
# (the ReduceSum scratch, the staging vector) is still legal, hence not caught.
MIN_CAUGHT_SHIFT_SHARE = 0.8

def _run(lib, case):
    rng = np.random.default_rng(7)
    shape, cl = case["shape"], case["channel_last"]
    c = shape[-1] if cl else shape[1]
    dy, x = rng.standard_normal(shape), rng.standard_normal(shape)
    kw = {k: v for k, v in case.items() if k not in ("shape",)}
    simlib.run(lib, dy, x, rng.standard_normal(c), rng.standard_normal(c), rng.random(c) + 0.5,
               rng.standard_normal(c), rng.random(c) + 0.5, **kw)


@pytest.fixture(scope="module")
def mutated():
    # A fixed place per kernel version, so the build is cached across runs like simlib.build's.
    h = hashlib.sha256(Path(mutations.__file__).read_bytes())
    for f in sorted(mutations.KERNEL.glob("*")):
        h.update(f.name.encode() + f.read_bytes())
    kdir = Path(tempfile.gettempdir()) / "bnb_ascend_sim_mutated" / h.hexdigest()[:16] / "op_kernel"
    sites = mutations.patch(kdir)
    lib = simlib.build(kernel_dir=kdir, units=[simlib.HERE / "sim_launch.cpp"], opt="-O1")
    return lib, sites


def _outcome(lib, site):
    """(reached, message of the first refusal or None) with `site` mutated."""
    os.environ["BNB_MUTATION"] = str(site.id)
    reached = False
    try:
        for case in CASES:
            msg = None
            try:
                _run(lib, case)
            except simlib.SimError as e:
                msg = str(e)
            hits = lib.bnb_mutation_hits()
            reached = reached or hits > 0
            if msg is not None:
                assert hits > 0, f"refused without reaching the mutation: {msg}"
                return True, msg
    finally:
        del os.environ["BNB_MUTATION"]
    return reached, None


def test_unmutated_copy_runs_clean(mutated):
    lib, _ = mutated
    for case in CASES:
        _run(lib, case)  # raises on any refusal
    assert lib.bnb_mutation_hits() == 0


@pytest.mark.parametrize("kind", ["barrier", "grow", "shift"])
def test_reached_mutations_are_caught(mutated, kind):
    lib, sites = mutated
    sites = [s for s in sites if s.kind == kind]
    assert sites, f"no {kind} site found in the kernel"
    caught, missed = [], []
    for s in sites:
        hit, msg = _outcome(lib, s)
        if msg is not None:
            assert " at " in msg and ".h:" in msg, msg  # names the kernel source line
            caught.append(s)
        elif hit:
            missed.append(f"{s.file}:{s.line} {s.text}")
    reached = len(caught) + len(missed)
    assert reached >= len(sites) // 2, f"the cases reach only {reached} of {len(sites)} {kind} sites"
    share = {"barrier": MIN_CAUGHT_BARRIER_SHARE, "shift": MIN_CAUGHT_SHIFT_SHARE}.get(kind)
    if share is not None:
        assert len(caught) >= share * reached, f"{kind} mutations not caught:\n" + "\n".join(missed)
    else:
        assert not missed, f"{kind} mutations not caught:\n" + "\n".join(missed)
