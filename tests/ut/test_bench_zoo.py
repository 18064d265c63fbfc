"""bench --zoo (bench/zoo.py): its float64 BatchNorm gradients, its comparisons, and what it does
without mindcv (not a dependency of this project). The run itself needs mindcv: bench/RESULTS_ZOO.md."""
import sys

import numpy as np
import pytest
from reference import batch_norm_backward_ref

from mindspore_bn_grad.cli import bench
from mindspore_bn_grad_bench import zoo


@pytest.mark.parametrize("shape", [(4, 3, 5, 6), (16, 7), (2, 5, 3, 2, 2)])
def test_reference_grads_match_the_test_reference(shape):
    rng = np.random.default_rng(3)
    x, dy = rng.standard_normal(shape) * 2 + 0.5, rng.standard_normal(shape)
    gamma = rng.uniform(0.5, 1.5, shape[1])
    axes = (0,) + tuple(range(2, len(shape)))
    mean, invstd = x.mean(axis=axes), 1 / np.sqrt(x.var(axis=axes) + 1e-5)
    want = batch_norm_backward_ref(dy, x, gamma, save_mean=mean, save_invstd=invstd, training=True, eps=1e-5)
    for got, w in zip(zoo.reference_grads(x, dy, gamma, 1e-5), want):
        np.testing.assert_allclose(got, w, rtol=1e-10, atol=1e-12)


def test_comparisons():
    want = [np.array([1.0, -2.0]), np.array([1e-9, 0.0])]
    whole, worst = zoo.compare_grads(want, [np.array([1.0, -2.0]), np.array([2e-9, 0.0])])
    assert whole == pytest.approx(1e-9 / np.sqrt(5.0), rel=1e-6)
    assert worst == pytest.approx(1e-9 / (zoo.GRAD_FLOOR * 2.0))  # a rounding-size gradient, on the floor
    assert zoo.compare_grads(want, [w + 0.0 for w in want]) == (0.0, 0.0)
    assert zoo.stats_error({"m": np.array([0.0, 3.0])}, {"m": np.array([1e-6, 3.0 + 4e-6])}) == pytest.approx(1e-6)


def test_without_mindcv_it_says_what_to_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "mindcv", None)  # import mindcv raises ImportError
    assert bench.main(["--zoo", "--models", "resnet50"]) == 2
    assert "pip install mindcv==0.3.0" in capsys.readouterr().err


@pytest.mark.parametrize("argv,msg", [(["--modes", "eager"], "--modes expected"),
                                      (["--rounds", "0"], "--rounds expected")])
def test_bad_options_are_refused(argv, msg):
    with pytest.raises(SystemExit, match=msg):
        zoo.parse_args(argv)
