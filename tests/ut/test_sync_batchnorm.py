"""nn.SyncBatchNorm in one process (no distributed init: group size 1) vs float64 NumPy
and vs MindSpore's own BatchNorm2d, in both modes. The 2-process tests are in
tests/st/syncbn (msrun)."""

import numpy as np
import pytest

from reference import batch_norm_train_ref


def _step(mode, bn, x, w):
    import mindspore as ms
    from mindspore import Tensor
    from sum_loss import WeightedSumLoss
    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)
    net = WeightedSumLoss(bn)
    step = ms.value_and_grad(net, grad_position=0, weights=net.trainable_params(), has_aux=True)
    (_, y), (gx, (gg, gb)) = step(Tensor(x), Tensor(w))
    return [a.asnumpy() for a in (y, gx, gg, gb)] + [bn.moving_mean.asnumpy(), bn.moving_variance.asnumpy()]


@pytest.mark.parametrize("mode", ["pynative", "graph"])
@pytest.mark.parametrize("shape,fmt", [((6, 3, 4, 5), "NCHW"), ((9, 4), "NCHW"), ((4, 5, 3, 2), "NHWC")])
def test_single_process_equals_full_batch_batchnorm(mode, shape, fmt):
    from mindspore import Tensor
    from mindspore_bn_grad.nn._sync import SyncBatchNorm
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(shape) * 3 + 2).astype(np.float32)
    w = rng.standard_normal(shape).astype(np.float32)
    c = shape[-1] if fmt == "NHWC" else shape[1]
    gamma = rng.uniform(0.5, 1.5, c).astype(np.float32)
    beta = rng.uniform(-1, 1, c).astype(np.float32)
    bn = SyncBatchNorm(c, gamma_init=Tensor(gamma), beta_init=Tensor(beta), data_format=fmt)
    assert not bn.is_global and bn.group_device_num == 1
    bn.set_train()
    got = _step(mode, bn, x, w)
    want = batch_norm_train_ref(x, w, gamma, beta, fmt)  # SyncBatchNorm's default eps and momentum
    for name, g, e in zip(("y", "gx", "gg", "gb", "mm", "mv"), got, want):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_matches_mindspore_batchnorm2d_and_eval(mode):
    import mindspore as ms
    from mindspore import Tensor, nn
    from mindspore_bn_grad.nn._sync import SyncBatchNorm
    rng = np.random.default_rng(8)
    x = rng.standard_normal((4, 3, 5, 2)).astype(np.float32)
    w = rng.standard_normal(x.shape).astype(np.float32)
    ours, theirs = SyncBatchNorm(3, momentum=0.8), nn.BatchNorm2d(3, momentum=0.8)
    for bn in (ours, theirs):
        bn.set_train()
    a, b = _step(mode, ours, x, w), _step(mode, theirs, x, w)
    for name, g, e in zip(("y", "gx", "gg", "gb", "mm", "mv"), a, b):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5, err_msg=name)
    ours.set_train(False)
    theirs.set_train(False)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    np.testing.assert_allclose(ours(Tensor(x)).asnumpy(), theirs(Tensor(x)).asnumpy(), rtol=1e-5, atol=1e-5)


def test_constructor_checks_and_parameters():
    from mindspore_bn_grad.nn._sync import SyncBatchNorm
    bn = SyncBatchNorm(4)
    assert [p.name for p in bn.get_parameters()] == ["mean", "variance", "gamma", "beta"]
    with pytest.raises(ValueError, match="data_format"):
        SyncBatchNorm(4, data_format="NCL")
    with pytest.raises(ValueError):
        SyncBatchNorm(0)


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_empty_batch_keeps_running_statistics_finite(mode):
    """Steps on x, an empty batch (every rank empty: here the only one), x. The empty step takes batch
    mean and variance 0 (MindSpore's BatchNorm does so when its CPU kernel's scratch memory happens to
    be zero; otherwise it leaves whatever that memory held, so it is not the oracle here): the running
    statistics decay by the momentum and stay finite; the other steps equal MindSpore's BatchNorm2d
    (training outputs do not depend on the running statistics)."""
    from mindspore import nn
    from mindspore_bn_grad.nn._sync import SyncBatchNorm
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((5, 3, 4, 2)) * 2 + 1).astype(np.float32)
    ours = SyncBatchNorm(3, momentum=0.7)
    ours.set_train()
    mean = x.astype(np.float64).mean((0, 2, 3))
    uvar = x.astype(np.float64).var((0, 2, 3), ddof=1)
    mm, mv = np.zeros(3), np.ones(3)
    for batch in (x, np.zeros((0, 3, 4, 2), np.float32), x):
        got = _step(mode, ours, batch, batch)
        got = [g.copy() for g in got]  # asnumpy of a Parameter may share its memory
        empty = batch.shape[0] == 0
        mm = 0.7 * mm + 0.3 * (0.0 if empty else mean)
        mv = 0.7 * mv + 0.3 * (0.0 if empty else uvar)
        for name, g in zip(("y", "gx", "gg", "gb", "mm", "mv"), got):
            assert np.isfinite(g).all(), name
        np.testing.assert_allclose(got[4], mm, rtol=1e-5, atol=1e-6, err_msg="moving_mean")
        np.testing.assert_allclose(got[5], mv, rtol=1e-5, atol=1e-6, err_msg="moving_variance")
        if empty:
            assert got[0].shape == batch.shape and got[1].shape == batch.shape
            np.testing.assert_array_equal(got[2], 0)
            np.testing.assert_array_equal(got[3], 0)
        else:
            theirs = nn.BatchNorm2d(3, momentum=0.7)
            theirs.set_train()
            want = _step(mode, theirs, batch, batch)
            for name, g, e in zip(("y", "gx", "gg", "gb"), got, want):
                np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5, err_msg=name)
