"""convert_batchnorm, the opt-in patch and checkpoints between built-in and converted networks."""
import os
import subprocess
import sys

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn

import mindspore_bn_grad as mbg
from mindspore_bn_grad.cpu_kernel import plugin
from mindspore_bn_grad.nn import BatchNormInferCell, BatchNormTrainCell
from mindspore_bn_grad.nn._cells import is_installed
from mindspore_bn_grad.nn._native import NativeBatchNormCell, is_native, native_mechanism

from _harness import builtin_kernels, copy_parameter_values


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.features = nn.SequentialCell([nn.Conv2d(3, 4, 3, has_bias=False), nn.BatchNorm2d(4), nn.ReLU()])
        self.blocks = nn.CellList([nn.BatchNorm2d(4, affine=False)])
        self.bn3 = nn.BatchNorm3d(4)
        self.head = nn.Dense(4 * 64, 3)
        self.bn1 = nn.BatchNorm1d(3)
        self.flat = nn.Flatten()

    def construct(self, x):
        x = self.blocks[0](self.features(x))                       # (N, 4, 8, 8)
        x = self.bn3(x.reshape(x.shape[0], 4, 2, 4, 8)).reshape(x.shape[0], 4, 8, 8)
        return self.bn1(self.head(self.flat(x)))


def bn_cells(net):
    return [(n, c) for n, c in net.cells_and_names() if isinstance(c, nn.layer.normalization._BatchNorm)]


class UserBatchNorm(nn.BatchNorm2d):
    """A user's subclass: keeps its class; its bn_train / bn_infer become ours."""


@pytest.mark.parametrize("route", ["cell", pytest.param("native", marks=pytest.mark.native_route)])
def test_convert_keeps_parameters_and_names(route):
    ms.set_context(mode=ms.PYNATIVE_MODE)
    if route == "native":
        assert plugin.status(), "the native-route session runs with the op plugin on"
    net = Net()
    net.user = UserBatchNorm(4)
    before = [(p.name, id(p), p.requires_grad) for p in net.get_parameters()]
    cells_before = dict((n, id(c)) for n, c in net.cells_and_names())
    assert mbg.convert_batchnorm(net, route=route) is net
    assert [(p.name, id(p), p.requires_grad) for p in net.get_parameters()] == before
    cells_after = dict((n, id(c)) for n, c in net.cells_and_names())
    assert {n: cells_after.get(n) for n in cells_before} == cells_before  # same objects, same places
    assert isinstance(net.features[1], mbg.nn.BatchNorm2d)
    assert isinstance(net.blocks[0], mbg.nn.BatchNorm2d)
    assert isinstance(net.bn1, mbg.nn.BatchNorm1d)
    assert isinstance(net.bn3, mbg.nn.BatchNorm3d) and isinstance(net.bn3.bn2d, mbg.nn.BatchNorm2d)
    assert type(net.user) is UserBatchNorm  # pylint: disable=unidiomatic-typecheck
    for name, c in bn_cells(net):
        if name == "bn3":  # its bn2d does the work
            continue
        if route == "cell":
            assert isinstance(c.bn_train, BatchNormTrainCell) and isinstance(c.bn_infer, BatchNormInferCell)
            assert "bn_train" not in c._primitives  # pylint: disable=protected-access
        else:
            assert getattr(c, "bn_route", "native") == "native", name
            if c.bn_native == "legacy":  # MindSpore's own primitives, on our kernels (the kernel factory)
                assert isinstance(c.bn_train, ms.ops.BatchNorm) and isinstance(c.bn_infer, ms.ops.BatchNorm)
                assert c.bn_train.name == c.bn_infer.name == "BatchNorm"  # MindSpore's own primitive
                assert c.bn_train.is_training and not c.bn_infer.is_training
                assert c.bn_train.momentum == pytest.approx(c.momentum) and c.bn_train.epsilon == c.eps
            else:  # BatchNormExt cells (the op plugin)
                assert isinstance(c.bn_train, NativeBatchNormCell) and isinstance(c.bn_infer, NativeBatchNormCell)
                assert c.bn_train.training_flag and not c.bn_infer.training_flag
                assert "bn_train" not in c._primitives  # pylint: disable=protected-access
    if route == "cell":
        assert net.blocks[0].bn_train.output_mask == (True, False, False)
    # still MindSpore's classes for isinstance users (e.g. AMP keeps BatchNorm in float32)
    assert isinstance(net.features[1], nn.BatchNorm2d)
    # idempotent
    mbg.convert_batchnorm(net)
    assert [(p.name, id(p)) for p in net.get_parameters()] == [(n, i) for n, i, _ in before]


@pytest.mark.parametrize("route", ["cell", pytest.param("native", marks=pytest.mark.native_route)])
def test_converted_net_trains_like_builtin_both_modes(route):
    """A converted Net with a SequentialCell, CellList and BatchNorm3d inside: several optimizer steps."""
    x = ms.Tensor(np.random.RandomState(0).randn(5, 3, 8, 8).astype(np.float32))
    y = ms.Tensor(np.random.RandomState(1).randint(0, 3, 5).astype(np.int32))
    for mode in (ms.PYNATIVE_MODE, ms.GRAPH_MODE):
        ms.set_context(mode=mode)
        ms.set_seed(0)
        runs = []
        for convert in (False, True):
            ms.set_seed(0)
            net = Net()
            if runs:
                for p, v in zip(net.get_parameters(), runs[0][0]):
                    p.set_data(ms.Tensor(v))
            values0 = [p.asnumpy().copy() for p in net.get_parameters()]
            if convert:
                mbg.convert_batchnorm(net, route=route)
            net.set_train()
            opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)  # linear in the gradients (Adam amplifies noise)
            loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
            fn = ms.value_and_grad(nn.WithLossCell(net, loss_fn), 0, opt.parameters)
            rec = []
            with builtin_kernels(net):  # the unconverted Net on MindSpore's own kernels
                for _ in range(3):
                    loss, (dx, grads) = fn(x, y)
                    opt(grads)
                    rec += [loss.asnumpy(), dx.asnumpy()] + [g.asnumpy() for g in grads]
            rec += [p.asnumpy() for p in net.get_parameters()]
            runs.append((values0, rec))
        for u, v in zip(runs[1][1], runs[0][1]):
            np.testing.assert_allclose(u, v, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(v).max())))
    ms.set_context(mode=ms.PYNATIVE_MODE)


def test_checkpoint_both_ways(tmp_path):
    ms.set_context(mode=ms.PYNATIVE_MODE)
    builtin, converted = Net(), mbg.convert_batchnorm(Net())
    rs = np.random.RandomState(4)
    for src, dst in ((builtin, converted), (converted, builtin)):
        for p in src.get_parameters():
            p.set_data(ms.Tensor(rs.randn(*p.shape).astype(np.float32)))
        path = str(tmp_path / f"{type(src.features[1]).__module__}.ckpt")
        ms.save_checkpoint(src, path)
        not_loaded = ms.load_param_into_net(dst, ms.load_checkpoint(path))
        assert not any(not_loaded) if isinstance(not_loaded, tuple) else not not_loaded
        src_p = {p.name: p.asnumpy() for p in src.get_parameters()}
        dst_p = {p.name: p.asnumpy() for p in dst.get_parameters()}
        assert src_p.keys() == dst_p.keys()
        assert "bn3.bn2d.moving_variance" in dst_p and "features.1.gamma" in dst_p
        for k, v in src_p.items():
            np.testing.assert_array_equal(dst_p[k], v, err_msg=k)


def _ours(c):
    """Whether a BatchNorm cell was put on one of our routes (the native route's 'legacy' cells keep
    MindSpore's own primitives: their mark is bn_native)."""
    return is_installed(c) or is_native(c)


def test_patch_is_opt_in_and_reversible():
    ms.set_context(mode=ms.PYNATIVE_MODE)
    assert "__init__" not in vars(nn.BatchNorm2d)  # importing did nothing
    assert not _ours(nn.BatchNorm2d(2))
    with mbg.batchnorm_patched():
        assert mbg.nn.is_batchnorm_patched()
        net = Net()
        bn_nhwc = nn.BatchNorm2d(3, data_format="NHWC")  # refused by MindSpore on CPU, fine while patched
    assert "__init__" not in vars(nn.BatchNorm2d) and "__init__" not in vars(nn.BatchNorm1d)
    for _, c in bn_cells(net):
        # route "auto": the native route where a mechanism is active (by default the kernel factory)
        assert is_native(c) == bool(native_mechanism()) and _ours(c), c
        assert type(c) in (nn.BatchNorm1d, nn.BatchNorm2d)  # MindSpore's class, our kernels
    assert bn_nhwc.format == "NHWC" and isinstance(bn_nhwc.bn_train, BatchNormTrainCell)  # channel-last: cell
    with mbg.batchnorm_patched(route="cell"):
        assert isinstance(nn.BatchNorm2d(2).bn_train, BatchNormTrainCell)
    later = nn.BatchNorm2d(2)
    assert not _ours(later)
    with pytest.raises(ValueError):
        nn.BatchNorm2d(3, data_format="NHWC")
    # explicit calls, nested with the context manager
    mbg.patch_batchnorm()
    try:
        with mbg.batchnorm_patched():
            pass
        assert _ours(nn.BatchNorm1d(2))  # still patched
    finally:
        mbg.unpatch_batchnorm()
    assert not mbg.nn.is_batchnorm_patched()
    # the patched cells compute our gradients, equal to the built-in's
    ms.set_seed(0)
    ref = Net()
    copy_parameter_values(ref, net)
    x = ms.Tensor(np.random.RandomState(0).randn(4, 3, 8, 8).astype(np.float32))
    grads = []
    for n in (ref, net):
        n.set_train()
        with builtin_kernels(n):  # ref on MindSpore's own kernels (the patched cells' route is process-wide)
            dx, dw = ms.grad(lambda t, n=n: (n(t) ** 2).sum(), 0, n.trainable_params())(x)
            grads.append([dx.asnumpy()] + [g.asnumpy() for g in dw])
    for u, v in zip(grads[1], grads[0]):
        np.testing.assert_allclose(u, v, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(v).max())))


@pytest.mark.parametrize("switch", [None, "1", "off"])
def test_import_has_no_side_effects_but_the_native_route(switch):
    """The import's one side effect is enabling the native route: by default the mint kernels' registration
    (it imports MindSpore to read the device target; nn cells, the environment and MindSpore's own nn
    BatchNorm kernels untouched); with MS_BN_GRAD_OP_PLUGIN=1 instead MS_OP_PLUGIN_PATH (on a release with
    MindSpore's op plugin interface; on 2.7.x the switch only warns), without importing MindSpore; with
    MS_BN_GRAD_NATIVE_KERNELS=off nothing."""
    from mindspore_bn_grad.cpu_kernel import build
    from mindspore_bn_grad import ms_compat
    want = "{'MS_OP_PLUGIN_PATH'}" if switch == "1" and build.plugin_interface_header() is not None else "set()"
    registers = switch is None and ms_compat.CPU_KERNEL_FACTORY is not None
    code = ("import os, sys; before = dict(os.environ); import mindspore_bn_grad, mindspore_bn_grad.nn; "
            f"assert ('mindspore' in sys.modules) == {registers}, 'mindspore imported or not'; "
            "changed = {k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k)}; "
            f"assert changed == {want}, changed; "
            "from mindspore_bn_grad.cpu_kernel import factory; st = factory.state(); "
            f"assert st.registered == {registers} and not st.legacy, st; "
            "import mindspore.nn as nn; assert '__init__' not in vars(nn.BatchNorm2d); print('ok')")
    env = {k: v for k, v in os.environ.items()
           if k not in ("MS_OP_PLUGIN_PATH", "MS_BN_GRAD_OP_PLUGIN", "MS_BN_GRAD_NATIVE_KERNELS")}
    if switch == "1":
        env["MS_BN_GRAD_OP_PLUGIN"] = switch
    if switch == "off":
        env["MS_BN_GRAD_NATIVE_KERNELS"] = switch
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-2000:]


def test_the_command_line_registers_nothing_at_import(tmp_path):
    """`python -m mindspore_bn_grad ...` skips the import's registration (its commands load what they need):
    a command that needs no MindSpore does not import it."""
    probe = tmp_path / "sitecustomize.py"  # runs at interpreter start-up, reports at exit
    probe.write_text("import atexit, sys\n"
                     "atexit.register(lambda: print('mindspore imported:', 'mindspore' in sys.modules))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("MS_OP_PLUGIN_PATH", "MS_BN_GRAD_OP_PLUGIN",
                                                            "MS_BN_GRAD_NATIVE_KERNELS")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-m", "mindspore_bn_grad", "plugin-path"], capture_output=True,
                         text=True, timeout=600, env=env)
    from mindspore_bn_grad.cpu_kernel import build
    if build.plugin_interface_header() is None:  # 2.7.x: the command says why it has no path for this release
        assert out.returncode == 1 and "has no CPU op plugin interface" in out.stderr, out.stderr[-2000:]
    else:
        assert out.returncode == 0, out.stderr[-2000:]
    assert "mindspore imported: False" in out.stdout, out.stdout


def test_deepcopy_follows_its_own_parameters():
    import copy
    ms.set_context(mode=ms.PYNATIVE_MODE)
    net = mbg.convert_batchnorm(Net(), route="cell")  # the output mask is the Cell route's
    dup = copy.deepcopy(net)
    dup.features[1].gamma.requires_grad = False
    assert dup.features[1].bn_train.output_mask == (True, False, True)
    assert net.features[1].bn_train.output_mask == (True, True, True)
