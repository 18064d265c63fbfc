"""Property tests: random cases against the float64 reference.

Random ranks 2..8; shapes with 1s, 0s, primes, many channels over a tiny
spatial extent and the reverse; both layouts (and the rank-5 format names);
float16 / bfloat16 / float32 / float64 activations with matching or mixed
per-channel dtypes; every output mask; absent weight / running statistics /
saved statistics ((0,) or None in inference); training and inference; several
eps; value regimes (large mean offset, small variance, sparse gradients).
See _fuzz_cases.py for the generator.

Profiles (hypothesis settings):
  default         - derandomized (the same cases on every run, so CI is
                    reproducible), a few hundred direct-kernel cases, a few
                    dozen through MindSpore PYNATIVE and a few in GRAPH mode
                    (each compiles a graph), well under a minute.
  MS_BN_GRAD_FUZZ=long - 10,000 direct-kernel cases (plus 500 PYNATIVE and
                    200 GRAPH), random unless MS_BN_GRAD_FUZZ_SEED is set;
                    prints the number of cases run.
A failure prints the shrunk case (shape, dtypes, attributes, seed); it
replays with `run_direct_case(Case(...))`.
"""
import os
import time

import pytest
from hypothesis import HealthCheck, given, seed, settings

from _fuzz_cases import cases, run_direct_case, run_pynative_case

LONG = os.environ.get("MS_BN_GRAD_FUZZ", "").lower() == "long"
_COMMON = dict(deadline=None, database=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.filter_too_much])
if LONG:
    DIRECT = settings(max_examples=10_000, derandomize="MS_BN_GRAD_FUZZ_SEED" not in os.environ, **_COMMON)
    PYNATIVE = settings(max_examples=500, derandomize="MS_BN_GRAD_FUZZ_SEED" not in os.environ, **_COMMON)
    GRAPH = settings(max_examples=200, derandomize="MS_BN_GRAD_FUZZ_SEED" not in os.environ, **_COMMON)
    MAX_ELEMS = 60_000
else:
    DIRECT = settings(max_examples=250, derandomize=True, **_COMMON)
    PYNATIVE = settings(max_examples=30, derandomize=True, **_COMMON)
    GRAPH = settings(max_examples=5, derandomize=True, **_COMMON)
    MAX_ELEMS = 20_000

_SEED = int(os.environ.get("MS_BN_GRAD_FUZZ_SEED", "0"))
_counts = {"direct": 0, "pynative": 0, "graph": 0}


def _maybe_seed(fn):
    return seed(_SEED)(fn) if "MS_BN_GRAD_FUZZ_SEED" in os.environ else fn


@pytest.fixture(scope="module", autouse=True)
def _report():
    t0 = time.time()
    yield
    if LONG:
        print(f"\n[fuzz] long profile: {_counts['direct']} direct cases, {_counts['pynative']} "
              f"PYNATIVE cases, {_counts['graph']} GRAPH cases, {time.time() - t0:.0f} s")


@pytest.fixture(scope="module", autouse=True)
def _kernel_settings():
    from mindspore_bn_grad.cpu_kernel import native
    threads = native.get_num_threads()
    yield
    native.set_num_threads(threads)


@_maybe_seed
@DIRECT
@given(case=cases(max_elems=MAX_ELEMS))
def test_direct_kernel_matches_reference(case):
    _counts["direct"] += 1
    run_direct_case(case)


@_maybe_seed
@settings(DIRECT, max_examples=max(40, DIRECT.max_examples // 10))
@given(case=cases(max_elems=MAX_ELEMS, act_dtypes=("float16", "bfloat16")))
def test_direct_kernel_half_precision(case):
    """More weight on the 16-bit paths (conversion in registers, store rounding)."""
    _counts["direct"] += 1
    run_direct_case(case)


@_maybe_seed
@PYNATIVE
@given(case=cases(max_elems=4000))
def test_pynative_matches_reference(case):
    """The same properties through MindSpore (infer step, dtype plumbing, masks, None inputs)."""
    _counts["pynative"] += 1
    run_pynative_case(case)


@_maybe_seed
@GRAPH
@given(case=cases(max_elems=4000))
def test_graph_matches_reference(case):
    """The same properties through the primitive in a compiled GRAPH-mode Cell."""
    _counts["graph"] += 1
    run_pynative_case(case, mode="graph")
