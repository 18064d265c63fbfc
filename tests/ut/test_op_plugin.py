"""MindSpore's CPU op plugin: our kernels as its BatchNormExt / BatchNormGradExt.

What runs through it (``mint.nn.BatchNorm*``, ``mint.nn.functional.batch_norm``, the
native route of converted networks) is compared with the float64 references; the launch
counter of the library proves the kernel that ran is ours. How it is enabled (at import,
chained with a user's plugin, not at all) is checked in fresh processes, since MindSpore
reads ``MS_OP_PLUGIN_PATH`` once per process.
"""
import ctypes
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import mindspore_bn_grad  # noqa: F401  (enables the op plugin before MindSpore runs anything)
import mindspore as ms
from mindspore import mint, nn

from mindspore_bn_grad.cpu_kernel import build, native, plugin
from reference import batch_norm_backward_ref, batch_norm_forward_ref
from _native_cases import (ABSENT_CASES, MINT_CELL_CASES, functional_absent_tensors,
                           functional_forward_backward_and_running_stats,
                           mint_cell_train_and_eval)



def launches():
    fn = native.lib().MsBnGradPluginLaunches
    fn.restype = ctypes.c_int64
    return fn()


def set_mode(mode):
    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)


def tol(dtype):
    return {np.float32: (2e-5, 2e-5), np.float16: (2e-3, 2e-3)}[dtype]


@pytest.mark.native_route
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(4, 3), (4, 3, 5), (2, 3, 4, 5), (2, 3, 2, 3, 2)])
def test_mint_functional_forward_backward_and_running_stats(mode, training, shape):
    set_mode(mode)
    functional_forward_backward_and_running_stats(training, shape, launches)


@pytest.mark.native_route
@pytest.mark.parametrize("affine,stats", ABSENT_CASES)
def test_mint_functional_absent_tensors(mode, affine, stats):
    set_mode(mode)
    functional_absent_tensors(affine, stats)


@pytest.mark.parametrize("cls,shape", MINT_CELL_CASES)
@pytest.mark.native_route
def test_mint_cells_train_and_eval(mode, cls, shape):
    """mint.nn.BatchNorm*: two training steps (running statistics), then eval, against float64."""
    set_mode(mode)
    mint_cell_train_and_eval(cls, shape, launches)


@pytest.mark.native_route
def test_float16_input():
    set_mode("pynative")
    rng = np.random.default_rng(4)
    x = rng.normal(size=(4, 3, 4, 4)).astype(np.float16)
    y = mint.nn.functional.batch_norm(ms.Tensor(x), None, None, training=True)
    assert y.dtype == ms.float16
    y_ref = batch_norm_forward_ref(x, training=True)[0]
    np.testing.assert_allclose(y.asnumpy().astype(np.float64), y_ref, rtol=2e-3, atol=2e-3)


@pytest.mark.native_route
def test_strided_views_are_read_as_they_are():
    """PYNATIVE hands the plugin strided views (a transpose, an offset slice): same values."""
    set_mode("pynative")
    rng = np.random.default_rng(5)
    base = rng.normal(size=(3, 6, 4, 2)).astype(np.float32)  # (C, N, H, W) storage
    view = mint.transpose(ms.Tensor(base), 0, 1)  # (N, C, H, W), not contiguous
    x = base.transpose(1, 0, 2, 3)
    y = mint.nn.functional.batch_norm(view, None, None, training=True).asnumpy()
    np.testing.assert_allclose(y, batch_norm_forward_ref(x, training=True)[0], rtol=2e-5, atol=2e-5)
    big = rng.normal(size=(7, 3, 2, 2)).astype(np.float32)
    sliced = ms.Tensor(big)[2:]  # offset into its storage
    y = mint.nn.functional.batch_norm(sliced, None, None, training=True).asnumpy()
    np.testing.assert_allclose(y, batch_norm_forward_ref(big[2:], training=True)[0], rtol=2e-5, atol=2e-5)
    dy = rng.normal(size=x.shape).astype(np.float32)
    def loss(t):
        return (mint.nn.functional.batch_norm(mint.transpose(t, 0, 1), None, None, training=True)
                * ms.Tensor(dy)).sum()

    gx = ms.grad(loss)(ms.Tensor(base)).asnumpy()
    _, mean, invstd, _, _ = batch_norm_forward_ref(x, training=True)
    gx_ref = batch_norm_backward_ref(dy, x, save_mean=mean, save_invstd=invstd)[0].transpose(1, 0, 2, 3)
    np.testing.assert_allclose(gx, gx_ref, rtol=5e-5, atol=5e-5)


@pytest.mark.native_route
def test_refused_arguments_say_why(mode):
    """A launch our kernel refuses (an int32 running statistic: MindSpore's infer of BatchNormExt
    leaves dtypes to the kernel) raises MindSpore's RuntimeError with our reason, the argument dtypes
    and shapes; nothing is computed (the running statistics keep their values), and the next call
    runs and is right. Before, MindSpore said only "return code: 2"."""
    set_mode(mode)

    class Net(nn.Cell):
        def construct(self, x, rm, rv):
            return mint.nn.functional.batch_norm(x, rm, rv, None, None, True)

    rng = np.random.default_rng(9)
    x = rng.normal(size=(4, 3, 5, 5)).astype(np.float32)
    rm_int, rv = ms.Tensor(np.full(3, 7, np.int32)), ms.Tensor(np.ones(3, np.float32))
    with pytest.raises(RuntimeError) as err:
        Net()(ms.Tensor(x), rm_int, rv).asnumpy()
    msg = str(err.value)
    assert ("For 'BatchNormExt' (mindspore_bn_grad's CPU op plugin), the arguments were refused: "
            "unsupported dtype (error code 2); input float32 (4, 3, 5, 5), running_mean int32 (3,), "
            "running_var float32 (3,). Nothing was computed.") in msg, msg[:1000]
    assert "float16, bfloat16, float32, float64" in msg, msg[:1000]
    np.testing.assert_array_equal(rm_int.asnumpy(), np.full(3, 7, np.int32))
    np.testing.assert_array_equal(rv.asnumpy(), np.ones(3, np.float32))
    before = launches()
    rm = ms.Tensor(np.zeros(3, np.float32))
    y = Net()(ms.Tensor(x), rm, rv).asnumpy()
    assert launches() > before
    y_ref, mean, _, rm_ref, rv_ref = batch_norm_forward_ref(x, running_mean=np.zeros(3), running_var=np.ones(3),
                                                            training=True, momentum=0.1)
    np.testing.assert_allclose(y, y_ref, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(rm.asnumpy(), rm_ref, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(rv.asnumpy(), rv_ref, rtol=2e-6, atol=2e-6)


@pytest.mark.native_route
def test_mindspore_mishandles_strided_views_while_a_plugin_is_loaded():
    """Why the op plugin is opt-in (docs/native_route.md): with any op plugin loaded, MindSpore 2.10
    no longer makes strided views dense before its own CPU kernels run, which then read a transposed
    tensor as if it were dense. If a MindSpore release fixes this, this test fails, and the plugin
    can be enabled by default."""
    set_mode("pynative")
    rng = np.random.default_rng(6)
    a = rng.normal(size=(2, 3, 4, 5)).astype(np.float32)
    w = rng.normal(size=(2, 4, 5, 3)).astype(np.float32)
    view = mint.transpose(mint.transpose(ms.Tensor(a), 1, 3), 1, 2)  # (2, 4, 5, 3), strided
    got = (view * ms.Tensor(w)).asnumpy()
    want = a.transpose(0, 2, 3, 1) * w
    assert np.abs(got - want).max() > 0.1, "MindSpore multiplied the strided view correctly"


@pytest.mark.native_route
def test_registered_primitives_match_mindspore_signatures():
    """The argument order op_plugin.cpp assumes is MindSpore's (its primitives' Python signatures)."""
    from mindspore.ops.auto_generate import gen_ops_prim
    import inspect
    from mindspore_bn_grad.spec import BACKWARD_YAML, FORWARD_YAML, load_opdef

    def names(fn):
        return list(inspect.signature(fn).parameters)[1:]

    # the kernel gets the call's tensors, then the primitive's init arguments, then the rest of the call
    for yaml_file in (FORWARD_YAML, BACKWARD_YAML):
        mp = load_opdef(yaml_file).mindspore_primitive
        prim = getattr(gen_ops_prim, mp.name)
        call, init = names(prim.__call__), [n for n in names(prim.__init__) if n not in ("args", "kwargs")]
        tensors = [n for n in call if n not in init and n != "output_mask"]
        want = tensors + init + [n for n in call if n not in tensors and n not in init]
        theirs = [t for _, t in mp.arguments]
        assert theirs[:mp.outputs_from] == want, (mp.name, theirs, want)
    lib = native.lib()
    lib.GetRegisteredOpCount.restype = ctypes.c_int
    lib.GetAllRegisteredOps.restype = ctypes.POINTER(ctypes.c_char_p)
    names = lib.GetAllRegisteredOps()
    assert sorted(names[i].decode() for i in range(lib.GetRegisteredOpCount())) == sorted(plugin.primitives())


# ------------------------------------------------------------------ enabling, in fresh processes

def run_python(code, env_extra=None, drop=("MS_OP_PLUGIN_PATH", "MS_BN_GRAD_OP_PLUGIN")):
    """Runs `code` in a fresh process with the kernel-factory route off (MS_BN_GRAD_NATIVE_KERNELS=off,
    unless env_extra says otherwise): these cases are the op plugin's, and with the factory route on,
    converted nn.BatchNorm* cells take it (test_legacy_kernels.py)."""
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["MS_BN_GRAD_NATIVE_KERNELS"] = "off"
    env.update(env_extra or {})
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    return proc


ON = {"MS_BN_GRAD_OP_PLUGIN": "1"}
# MindSpore 2.7.x have no op plugin interface the package uses (ms_compat, "CPU op plugin").
NEEDS_INTERFACE = pytest.mark.skipif(build.plugin_interface_header() is None,
                                     reason="this MindSpore release has no CPU op plugin interface")


@NEEDS_INTERFACE
def test_import_enables_the_plugin_and_the_self_test_proves_it():
    proc = run_python("""
        import os, warnings
        warnings.simplefilter("error")
        import mindspore_bn_grad
        from mindspore_bn_grad.cpu_kernel import build, plugin
        path = os.environ["MS_OP_PLUGIN_PATH"]
        assert build._verified(__import__("pathlib").Path(path)), path
        assert mindspore_bn_grad.op_plugin_active()
        print("OK", path)
    """, ON)
    assert "OK" in proc.stdout


@NEEDS_INTERFACE
def test_too_late_falls_back_to_the_cell_route_with_one_warning():
    proc = run_python("""
        import warnings
        import numpy as np, mindspore as ms
        (ms.Tensor(np.ones(3, np.float32)) + ms.Tensor(np.ones(3, np.float32))).asnumpy()  # a CPU kernel
        import mindspore_bn_grad
        from mindspore import nn
        from mindspore_bn_grad import convert_batchnorm
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            net = convert_batchnorm(nn.SequentialCell([nn.BatchNorm2d(3), nn.BatchNorm2d(3)]))
            net.set_train()
            assert not mindspore_bn_grad.op_plugin_active()
        msgs = [str(x.message) for x in w if "op plugin" in str(x.message)]
        assert len(msgs) == 1, msgs
        assert "plugin-path" in msgs[0] and "import mindspore_bn_grad before" in msgs[0], msgs[0]
        assert all(c.bn_route == "cell" for c in net.cells()), [c.bn_route for c in net.cells()]
        x = np.random.default_rng(0).normal(size=(4, 3, 2, 2)).astype(np.float32)
        g = ms.grad(lambda t: net(t).sum())(ms.Tensor(x)).asnumpy()
        assert np.abs(g).max() < 1e-4, g  # d(sum of a normalised output)/dx = 0
        print("OK")
    """, ON)
    assert "OK" in proc.stdout


@pytest.mark.parametrize("switch", [None, "0"])
def test_off_by_default_and_with_zero(switch):
    """Unset (the default) or 0: nothing is set or built at import, the Cell route is used, and no
    warning (nobody asked for the plugin); the reason is available."""
    proc = run_python("""
        import os, warnings
        warnings.simplefilter("error")
        import mindspore_bn_grad
        from mindspore_bn_grad.cpu_kernel import plugin
        from mindspore import nn
        assert "MS_OP_PLUGIN_PATH" not in os.environ
        assert not mindspore_bn_grad.op_plugin_active()
        net = mindspore_bn_grad.convert_batchnorm(nn.BatchNorm2d(3))
        assert net.bn_route == "cell"
        print("REASON", plugin.state().reason)
    """, {} if switch is None else {"MS_BN_GRAD_OP_PLUGIN": switch}, drop=("MS_OP_PLUGIN_PATH", "MS_BN_GRAD_OP_PLUGIN"))
    if switch is None:
        assert "off by default" in proc.stdout and "strided views" in proc.stdout
    else:
        assert "MS_BN_GRAD_OP_PLUGIN=0 is set" in proc.stdout


@NEEDS_INTERFACE
def test_exported_plugin_path_works_before_import():
    path = subprocess.run([sys.executable, "-m", "mindspore_bn_grad", "plugin-path"], capture_output=True,
                          text=True, check=True, timeout=600).stdout.strip()
    assert os.path.isfile(path) and path == plugin.plugin_path()
    proc = run_python("""
        import numpy as np, mindspore as ms
        from mindspore import mint
        (ms.Tensor(np.ones(3, np.float32)) * 2).asnumpy()
        import mindspore_bn_grad
        assert mindspore_bn_grad.op_plugin_active()
        print("OK")
    """, {"MS_OP_PLUGIN_PATH": path})
    assert "OK" in proc.stdout


USER_PLUGIN = r"""
#include <cstdint>
#include <cstring>
static const char *kOps[] = {"BatchNormExt", "MsBnGradTestUserOp"};
extern "C" int GetRegisteredOpCount() { return 2; }
extern "C" const char **GetAllRegisteredOps() { return kOps; }
extern "C" int BatchNormExt(int, void **, int *, int64_t **, const char **, void *, void *) { return 77; }
extern "C" int MsBnGradTestUserOp(int, void **, int *, int64_t **, const char **, void *, void *) { return 5; }
"""


@NEEDS_INTERFACE
def test_a_users_plugin_is_chained_not_clobbered(tmp_path):
    src = tmp_path / "user_plugin.cpp"
    src.write_text(USER_PLUGIN)
    lib = tmp_path / "libuser_plugin.so"
    subprocess.run(["g++", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    proc = run_python(f"""
        import ctypes, os
        import mindspore_bn_grad
        path = os.environ["MS_OP_PLUGIN_PATH"]
        assert path != {str(lib)!r}, path
        chain = ctypes.CDLL(path)
        chain.GetAllRegisteredOps.restype = ctypes.POINTER(ctypes.c_char_p)
        names = [chain.GetAllRegisteredOps()[i].decode() for i in range(chain.GetRegisteredOpCount())]
        assert names == ["BatchNormExt", "BatchNormGradExt", "MsBnGradTestUserOp"], names
        assert chain.MsBnGradTestUserOp(0, None, None, None, None, None, None) == 5  # theirs, found through the chain
        assert mindspore_bn_grad.op_plugin_active()  # BatchNormExt: ours, not their 77
        print("OK")
    """, {"MS_OP_PLUGIN_PATH": str(lib), **ON})
    assert "OK" in proc.stdout


@pytest.mark.skipif(build.plugin_interface_header() is not None, reason="this release has the op plugin interface")
def test_a_release_without_the_interface_says_no_and_keeps_the_cell_route():
    """2.7.x (ms_compat, "CPU op plugin"): MS_BN_GRAD_OP_PLUGIN=1 leaves MS_OP_PLUGIN_PATH alone, one
    warning says why, and a converted layer trains on the Cell route with the reference's gradients."""
    proc = run_python(f"""
        import os, sys, warnings
        sys.path.insert(0, {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))!r})
        import numpy as np
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            import mindspore_bn_grad
            import mindspore as ms
            from mindspore import nn
            assert "MS_OP_PLUGIN_PATH" not in os.environ
            assert not mindspore_bn_grad.op_plugin_active()
            net = mindspore_bn_grad.convert_batchnorm(nn.BatchNorm2d(3))
        msgs = [str(x.message) for x in w if "op plugin" in str(x.message)]
        assert len(msgs) == 1 and "no CPU op plugin interface" in msgs[0] and "2.8.0 or later" in msgs[0], msgs
        assert net.bn_route == "cell", net.bn_route
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        from _native_cases import converted_layer_trains
        converted_layer_trains(net)
        print("OK")
    """, ON)
    assert "OK" in proc.stdout
    # and plugin-path prints no path MindSpore could not use
    path = subprocess.run([sys.executable, "-m", "mindspore_bn_grad", "plugin-path"], capture_output=True,
                          text=True, timeout=600)
    assert path.returncode == 1 and path.stdout == "", path.stdout
    assert "no CPU op plugin interface" in path.stderr, path.stderr


@pytest.mark.native_route
@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_native_route_amp_o3_updates_the_moving_statistics(mode):
    """AMP O3 casts the network's input to float16 and flags every cell: BatchNormExt still updates the
    cell's own float32 moving statistics in place (in PYNATIVE the flagged cell used to cast them to a
    float16 copy first), and the input gradient is the float64 reference's on the float16 input."""
    import mindspore_bn_grad as mbg
    set_mode(mode)
    rng = np.random.default_rng(7)
    x = rng.normal(loc=1.0, size=(4, 3, 4, 4)).astype(np.float32)
    dy = rng.normal(size=x.shape).astype(np.float32)
    bn = nn.BatchNorm2d(3, momentum=0.8)
    net = ms.amp.auto_mixed_precision(mbg.convert_batchnorm(nn.SequentialCell([bn]), route="native"), "O3")
    net.set_train()
    before = launches()

    class Loss(nn.Cell):
        def __init__(self):
            super().__init__()
            self.net, self.dy = net, ms.Tensor(dy)

        def construct(self, t):
            return (self.net(t) * self.dy).sum()
    gx = ms.grad(Loss(), 0)(ms.Tensor(x)).asnumpy()
    assert launches() > before  # our kernels ran
    x16 = x.astype(np.float16).astype(np.float64)
    mean, var = x16.mean(axis=(0, 2, 3)), x16.var(axis=(0, 2, 3))
    n = x.size // 3
    np.testing.assert_allclose(bn.moving_mean.asnumpy(), 0.2 * mean, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(bn.moving_variance.asnumpy(), 0.8 + 0.2 * var * n / (n - 1), rtol=2e-3, atol=2e-3)
    assert bn.moving_mean.dtype == ms.float32
    dy16 = dy.astype(np.float16).astype(np.float64)  # O3's output cast back to float32: dy reaches it in float16
    want = batch_norm_backward_ref(dy16, x16, np.ones(3), save_mean=mean, save_invstd=1 / np.sqrt(var + 1e-5))[0]
    np.testing.assert_allclose(gx, want, rtol=1e-2, atol=1e-2)
