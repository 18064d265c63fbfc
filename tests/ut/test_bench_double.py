"""bench --double times MindSpore's own kernels against ours, never ours against ours.

Once the native route is loaded (the first conversion), MindSpore's BatchNorm, BatchNormGrad and
BatchNormGradGrad primitives run our kernels everywhere in the process; the benchmark's MindSpore
contestants must switch MindSpore's own kernels back in. Each contestant runs once here and the
two launch counters of the kernel-factory library say whose kernels ran.
"""
import pytest

from mindspore_bn_grad.cpu_kernel import factory
from mindspore_bn_grad_bench import double as double_bench
from mindspore_bn_grad_bench import kernel as bench


@pytest.fixture(scope="module")
def native_route():
    if not factory.legacy_status():
        pytest.skip(f"no kernel-factory route here: {factory.state().legacy_reason or factory.state().reason}")


def _launches_of(timed):
    """(our launches, MindSpore's launches) of one run of a contestant, as the benchmark runs it."""
    ours, theirs = factory.legacy_launches(), factory.legacy_launches(mindspore=True)
    try:
        timed.prepare()
        timed.run_once()
    finally:
        bench.select_kernels("ours")
    return factory.legacy_launches() - ours, factory.legacy_launches(mindspore=True) - theirs


def _check(contestants, mindspore_names):
    for name, timed in contestants.items():
        ours, theirs = _launches_of(timed)
        if name in mindspore_names:
            assert ours == 0 and theirs > 0, (name, ours, theirs)
        elif not name.endswith("direct"):  # the kernel called directly goes through no MindSpore kernel
            assert theirs == 0, (name, ours, theirs)


def test_gradient_penalty_contestants_run_their_own_kernels(native_route):
    con = double_bench.penalty_contestants((2, 4, 6, 6))
    _check(con, {"MindSpore GRAPH"})
    assert _launches_of(con["ours GRAPH"])[0] >= 3  # BatchNorm, BatchNormGrad, BatchNormGradGrad: ours


def test_op_contestants_time_mindspores_batchnormgradgrad(native_route):
    _check(double_bench.op_contestants((4, 8, 6, 6)), {"MindSpore PYNATIVE", "MindSpore GRAPH"})
