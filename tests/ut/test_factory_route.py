"""The native route's kernel-factory mechanism (MS_BN_GRAD_NATIVE_KERNELS=factory, cpu_kernel/factory.py).

Our BatchNormExt / BatchNormGradExt registered in MindSpore's CPU kernel factory from a library
built against the installed MindSpore's headers. Each case runs in a fresh process (the
registration lasts for the process), compares with the float64 references of tests/reference.py,
and proves through the library's launch counter that the kernel that ran is ours.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from mindspore_bn_grad import ms_compat
from mindspore_bn_grad.cpu_kernel import build, factory

TESTS = Path(__file__).resolve().parents[1]
ON = {"MS_BN_GRAD_NATIVE_KERNELS": "factory"}


def _why_not_buildable():
    if ms_compat.CPU_KERNEL_FACTORY is None:
        return factory.release_lacks_route(ms_compat.VERSION)
    try:
        build.find_compiler()
        factory._build_plan()  # pylint: disable=protected-access
    except build.KernelBuildError as e:
        return str(e)
    return ""


NEEDS_FACTORY = pytest.mark.skipif(bool(_why_not_buildable()), reason=_why_not_buildable() or "buildable")

PRELUDE = f"""
import sys, warnings
sys.path[:0] = [{str(TESTS)!r}, {str(TESTS / 'ut')!r}]
import numpy as np
from reference import batch_norm_backward_ref, batch_norm_forward_ref
"""


def run_python(code, env_extra=None):
    env = {k: v for k, v in os.environ.items()
           if k not in ("MS_OP_PLUGIN_PATH", "MS_BN_GRAD_OP_PLUGIN", factory.SWITCH)}
    env.update(ON if env_extra is None else env_extra)
    with tempfile.TemporaryDirectory() as tmp:  # a file: GRAPH mode parses the source of what it compiles
        script = Path(tmp) / "case.py"
        script.write_text(PRELUDE + textwrap.dedent(code), encoding="utf-8")
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=900,
                              cwd=tmp)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert "OK" in proc.stdout, proc.stdout
    return proc


LAUNCHES = """
from mindspore_bn_grad.cpu_kernel import factory
def launches():
    return factory._launch_count()
"""


@NEEDS_FACTORY
@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_mint_cells_and_functional_train_and_eval(mode):
    """mint.nn.BatchNorm1d/2d/3d (two training steps, then eval) and mint.nn.functional.batch_norm
    with weights and running statistics (ranks 2-5) and without them: outputs, running statistics and
    gradients against float64."""
    run_python(LAUNCHES + f"""
import mindspore_bn_grad
import mindspore as ms
ms.set_context(mode=ms.{'GRAPH' if mode == 'graph' else 'PYNATIVE'}_MODE)
assert factory.status(), factory.state().reason
assert "MS_OP_PLUGIN_PATH" not in __import__("os").environ
from _native_cases import (ABSENT_CASES, MINT_CELL_CASES, functional_absent_tensors,
                           functional_forward_backward_and_running_stats, mint_cell_train_and_eval)
for affine, stats in ABSENT_CASES:
    functional_absent_tensors(affine, stats)
for cls, shape in MINT_CELL_CASES:
    mint_cell_train_and_eval(cls, shape, launches)
for training in (True, False):
    for shape in [(4, 3), (4, 3, 5), (2, 3, 4, 5), (2, 3, 2, 3, 2)]:
        functional_forward_backward_and_running_stats(training, shape, launches)
print("OK")
""")


@NEEDS_FACTORY
@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_a_dtype_the_kernels_do_not_take_is_named_before_anything_runs(mode):
    """MindSpore's infer of BatchNormExt leaves dtypes to the kernel: ours refuses an integer input or
    running statistic when MindSpore creates it (GRAPH: while compiling), with a message naming the
    argument, what it takes and what it got, and the kernel never runs."""
    run_python(LAUNCHES + f"""
import mindspore_bn_grad
import mindspore as ms
from mindspore import mint, nn
ms.set_context(mode=ms.{'GRAPH' if mode == 'graph' else 'PYNATIVE'}_MODE)
assert factory.status(), factory.state().reason

class Net(nn.Cell):
    def construct(self, x, rm, rv):
        return mint.nn.functional.batch_norm(x, rm, rv, None, None, True)

x = ms.Tensor(np.ones((4, 3, 2, 2), np.float32))
stats = (ms.Tensor(np.zeros(3, np.float32)), ms.Tensor(np.ones(3, np.float32)))
for name, args in (("input", (x.astype(ms.int32),) + stats),
                   ("running_mean", (x, stats[0].astype(ms.int32), stats[1]))):
    before = launches()
    try:
        Net()(*args).asnumpy()
        raise AssertionError(name + ": no error")
    except RuntimeError as e:
        msg = str(e)
    assert (f"For 'BatchNormExt' (mindspore_bn_grad's CPU kernel), {{name}} expected a tensor of "
            "float16, bfloat16, float32, float64, got int32") in msg, msg[:800]
    assert launches() == before, "the kernel ran"
y = Net()(x, *stats)  # and the next call runs
assert np.allclose(y.asnumpy(), 0.0, atol=1e-3)
print("OK")
""")


@NEEDS_FACTORY
def test_strided_views_stay_correct():
    """With our kernels in the factory (no op plugin), MindSpore still makes strided views dense:
    its own CPU ops compute a transposed tensor right (the case test_op_plugin.py pins as wrong
    while an op plugin is loaded), and our kernel, which refuses a view, gets dense inputs."""
    run_python(LAUNCHES + """
import mindspore_bn_grad
import mindspore as ms
from mindspore import mint
ms.set_context(mode=ms.PYNATIVE_MODE)
assert factory.status(), factory.state().reason
rng = np.random.default_rng(6)
a = rng.normal(size=(2, 3, 4, 5)).astype(np.float32)
w = rng.normal(size=(2, 4, 5, 3)).astype(np.float32)
view = mint.transpose(mint.transpose(ms.Tensor(a), 1, 3), 1, 2)  # (2, 4, 5, 3), strided
np.testing.assert_allclose((view * ms.Tensor(w)).asnumpy(), a.transpose(0, 2, 3, 1) * w, rtol=1e-6, atol=1e-6)
np.testing.assert_allclose(mint.nn.functional.relu(view).asnumpy(), np.maximum(a.transpose(0, 2, 3, 1), 0))

base = rng.normal(size=(3, 6, 4, 2)).astype(np.float32)  # (C, N, H, W) storage
x = base.transpose(1, 0, 2, 3)
before = launches()
y = mint.nn.functional.batch_norm(mint.transpose(ms.Tensor(base), 0, 1), None, None, training=True).asnumpy()
np.testing.assert_allclose(y, batch_norm_forward_ref(x, training=True)[0], rtol=2e-5, atol=2e-5)
big = rng.normal(size=(7, 3, 2, 2)).astype(np.float32)
y = mint.nn.functional.batch_norm(ms.Tensor(big)[2:], None, None, training=True).asnumpy()  # offset view
np.testing.assert_allclose(y, batch_norm_forward_ref(big[2:], training=True)[0], rtol=2e-5, atol=2e-5)
dy = rng.normal(size=x.shape).astype(np.float32)
gx = ms.grad(lambda t: (mint.nn.functional.batch_norm(mint.transpose(t, 0, 1), None, None, training=True)
                        * ms.Tensor(dy)).sum())(ms.Tensor(base)).asnumpy()
_, mean, invstd, _, _ = batch_norm_forward_ref(x, training=True)
gx_ref = batch_norm_backward_ref(dy, x, save_mean=mean, save_invstd=invstd)[0].transpose(1, 0, 2, 3)
np.testing.assert_allclose(gx, gx_ref, rtol=5e-5, atol=5e-5)
assert launches() >= before + 4, (before, launches())
print("OK")
""")


@NEEDS_FACTORY
def test_loaded_after_other_cpu_ops_ran():
    """Unlike the op plugin, the factory route can be enabled after MindSpore ran CPU operators; repeated
    launches start no thread."""
    run_python(LAUNCHES + """
import mindspore as ms
from mindspore import nn
ms.set_context(mode=ms.PYNATIVE_MODE)
(ms.Tensor(np.ones(3, np.float32)) + ms.Tensor(np.ones(3, np.float32))).asnumpy()
bn = nn.BatchNorm2d(3)
bn.set_train()
bn(ms.Tensor(np.ones((2, 3, 2, 2), np.float32))).asnumpy()  # MindSpore's own BatchNorm kernel
import mindspore_bn_grad
from mindspore import mint
with warnings.catch_warnings():
    warnings.simplefilter("error")
    assert factory.status(), factory.state().reason
rng = np.random.default_rng(9)
x = rng.normal(size=(4, 3, 2, 2)).astype(np.float32)
dy = rng.normal(size=x.shape).astype(np.float32)
before = launches()
gx = ms.grad(lambda t: (mint.nn.functional.batch_norm(t, None, None, training=True) * ms.Tensor(dy)).sum())(
    ms.Tensor(x)).asnumpy()
_, mean, invstd, _, _ = batch_norm_forward_ref(x, training=True)
np.testing.assert_allclose(gx, batch_norm_backward_ref(dy, x, save_mean=mean, save_invstd=invstd)[0],
                           rtol=5e-5, atol=5e-5)
assert launches() >= before + 2
# MindSpore's device thread runs our kernels on the kernel library's persistent pool: no thread per call
threads = len(__import__("os").listdir("/proc/self/task"))
before = launches()
for _ in range(10):
    ms.grad(lambda t: (mint.nn.functional.batch_norm(t, None, None, training=True) * ms.Tensor(dy)).sum())(
        ms.Tensor(x)).asnumpy()
assert launches() >= before + 20, (before, launches())
assert len(__import__("os").listdir("/proc/self/task")) == threads
print("OK")
""")


@NEEDS_FACTORY
@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_converted_network_takes_the_native_route(mode):
    """convert_batchnorm with the factory route: the native route (no Python bprop), the gradients of
    input and every gamma / beta and the moving statistics against float64 (two BatchNorms in a row)."""
    run_python(LAUNCHES + f"""
import mindspore_bn_grad
import mindspore as ms
from mindspore import nn
ms.set_context(mode=ms.{'GRAPH' if mode == 'graph' else 'PYNATIVE'}_MODE)
rng = np.random.default_rng(11)
net = nn.SequentialCell([nn.BatchNorm2d(3, momentum=0.8), nn.BatchNorm2d(3, momentum=0.8)])
for bn in net.cells():
    bn.gamma.set_data(ms.Tensor(rng.uniform(0.5, 1.5, 3).astype(np.float32)))
    bn.beta.set_data(ms.Tensor(rng.normal(size=3).astype(np.float32)))
net = mindspore_bn_grad.convert_batchnorm(net)
assert [c.bn_route for c in net.cells()] == ["native", "native"], [c.bn_route for c in net.cells()]
assert [c.bn_native for c in net.cells()] == ["legacy", "legacy"]  # MindSpore's ops.BatchNorm on our kernels
net.set_train()
g = [(c.gamma.asnumpy().astype(np.float64), c.beta.asnumpy().astype(np.float64)) for c in net.cells()]
x = rng.normal(size=(4, 3, 3, 2)).astype(np.float32)
dy = rng.normal(size=x.shape).astype(np.float32)
before = factory.legacy_launches()
def loss(t):
    return (net(t) * ms.Tensor(dy)).sum()

grads = ms.value_and_grad(loss, grad_position=0, weights=net.trainable_params())(ms.Tensor(x))[1]
h, m1, i1, rm1, rv1 = batch_norm_forward_ref(x, g[0][0], g[0][1], np.zeros(3), np.ones(3), True, 0.2)
_, m2, i2, rm2, rv2 = batch_norm_forward_ref(h, g[1][0], g[1][1], np.zeros(3), np.ones(3), True, 0.2)
dh, dg2, db2 = batch_norm_backward_ref(dy, h, g[1][0], save_mean=m2, save_invstd=i2)
dx, dg1, db1 = batch_norm_backward_ref(dh, x, g[0][0], save_mean=m1, save_invstd=i1)
np.testing.assert_allclose(grads[0].asnumpy(), dx, rtol=2e-4, atol=2e-4)
for got, want in zip(grads[1], (dg1, db1, dg2, db2)):
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-4, atol=1e-3)
cells = list(net.cells())
np.testing.assert_allclose(cells[0].moving_mean.asnumpy(), rm1, rtol=1e-5, atol=1e-5)
np.testing.assert_allclose(cells[1].moving_variance.asnumpy(), rv2, rtol=1e-4, atol=1e-4)
assert factory.legacy_launches() >= before + 4, (before, factory.legacy_launches())
print("OK")
""")


COPY_KERNEL = """
import os, shutil
from pathlib import Path
from mindspore_bn_grad.cpu_kernel import build, factory
def copy_cache(src, cache, names):
    cache.mkdir(mode=0o700, exist_ok=True)
    for name, new in names:
        for suffix in ("", build.DIGEST_SUFFIX):
            shutil.copy2(src / (name + suffix), cache / (new + suffix))
kernel = build.library_path()
"""


@NEEDS_FACTORY
def test_a_tampered_library_is_never_loaded(tmp_path):
    """The factory library goes through the kernel cache's checks: intact, it is loaded as it is; with a
    changed byte it is rebuilt, never handed to dlopen (here the rebuild is stopped, to see it asked for)."""
    run_python(COPY_KERNEL + f"""
lib = factory.library_path()
assert build._verified(lib) and lib.name.startswith("libms_bn_grad_factory_"), lib
cache = Path({str(tmp_path / 'cache')!r})
copy_cache(kernel.parent, cache, [(kernel.name, kernel.name)])
os.environ["MS_BN_GRAD_CACHE_DIR"] = str(cache)
incs, libs, version, header = factory._build_plan()
name = "libms_bn_grad_" + factory.cache_key(incs, libs, version, header, build.library_path()) + ".so"
copy_cache(lib.parent, cache, [(lib.name, name)])
asked = []
def refuse(*args, **kwargs):
    asked.append(kwargs.get("what"))
    raise RuntimeError("rebuild asked for")
factory._compile = refuse
assert factory.library_path() == cache / name and not asked  # intact: taken as it is
data = bytearray((cache / name).read_bytes())
data[len(data) // 2] ^= 0xFF
(cache / name).write_bytes(bytes(data))
try:
    factory.library_path()
    raise AssertionError("the tampered library was accepted")
except RuntimeError as e:
    assert "rebuild asked for" in str(e), e
assert asked and "kernel-factory library" in asked[0], asked
print("OK")
""", {})


@NEEDS_FACTORY
def test_the_key_follows_the_mindspore_version_and_headers(tmp_path):
    """The cache key changes with the MindSpore version and with any header the build includes."""
    incs, libs, version, header = factory._build_plan()
    key = factory.cache_key(incs, libs, version, header, "k")
    assert factory.cache_key(incs, libs, "2.0.0", header, "k") != key
    deep = next(h for h in factory.header_closure(header, incs) if h.name == "kernel_tensor.h")
    rel = min((Path(deep).relative_to(d) for d in incs if Path(deep).is_relative_to(d)),
              key=lambda r: len(r.parts))  # as it is included
    shadow = tmp_path / rel  # found before the installed one: the same include list, one header changed
    shadow.parent.mkdir(parents=True)
    shadow.write_bytes(Path(deep).read_bytes())
    assert shadow in factory.header_closure(header, [tmp_path, *incs])
    same = factory.cache_key([tmp_path, *incs], libs, version, header, "k")
    assert factory.cache_key([tmp_path, *incs], libs, version, header, "k") == same
    shadow.write_bytes(Path(deep).read_bytes() + b"\n// changed\n")
    assert factory.cache_key([tmp_path, *incs], libs, version, header, "k") != same


@pytest.mark.skipif(ms_compat.CPU_KERNEL_FACTORY is None, reason=_why_not_buildable() or "no build plan")
def test_the_build_plan_matches_the_installed_wheel():
    """ms_compat.CPU_KERNEL_FACTORY against the installed MindSpore: its cpu_kernel.h is found, its
    libraries exist, and the fast hash table is on exactly when the wheel's core library was built
    with it (robin_hood in its exported names): the layouts of the classes holding a HashMap agree."""
    incs, libs, _, header = factory._build_plan()  # raises when the header or a library is missing
    assert header.name == "cpu_kernel.h" and all(lib.is_file() for lib in libs)
    core = next(lib for lib in libs if lib.name == "libmindspore_core.so")
    defines = ms_compat.CPU_KERNEL_FACTORY["defines"]
    assert (b"robin_hood" in core.read_bytes()) == ("ENABLE_FAST_HASH_TABLE=1" in defines), defines
    robin = [d for d in incs if (d / "include" / "robin_hood.h").is_file()]
    assert robin, "hash_map.h includes \"include/robin_hood.h\": its directory must be on the list"


def test_without_a_compiler_it_says_why_and_keeps_the_cell_route(tmp_path):
    """No compiler (and no factory library cached): the import does not fail, one warning says why, and a
    converted layer trains on the Cell route with the reference's gradients."""
    kernel = build.library_path()
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    for suffix in ("", build.DIGEST_SUFFIX):  # the kernel library, not the factory's
        shutil.copy2(kernel.parent / (kernel.name + suffix), cache / (kernel.name + suffix))
    run_python("""
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    import mindspore_bn_grad
    import mindspore as ms
    from mindspore import nn
    from mindspore_bn_grad.cpu_kernel import factory
    assert not factory.status()
    net = mindspore_bn_grad.convert_batchnorm(nn.BatchNorm2d(3))
msgs = [str(x.message) for x in w if "kernel factory" in str(x.message)]
assert len(msgs) == 1, msgs
assert ("could not be prepared" in msgs[0] and "no C++ compiler" in msgs[0]) or "2.7.1 or later" in msgs[0], msgs[0]
print("REASON", factory.state().reason)
assert net.bn_route == "cell", net.bn_route
from _native_cases import converted_layer_trains
converted_layer_trains(net)
print("OK")
""", {**ON, "MS_BN_GRAD_CACHE_DIR": str(cache), "MS_BN_GRAD_CXX": str(tmp_path / "no-such-compiler")})


def test_a_failed_build_says_what_the_compiler_said(monkeypatch):
    """When the kernel-factory library does not compile, the route's reason (which its one warning
    shows) carries the compiler's first error, not only the line that says the build failed."""
    def failing_load(legacy):
        raise build.KernelBuildError(
            "BatchNormBackward: building the kernel-factory library for MindSpore 9.9 failed:\n  g++ -c x.cpp\n"
            "In file included from cpu_kernel.h:3:\nx.cpp:12:3: error: 'KernelTensor' has no member named 'foo'\n")
    monkeypatch.setattr(factory, "_load", failing_load)
    monkeypatch.setattr(factory._STATE, "reason", factory._STATE.reason)  # restored afterwards
    factory._try_load()
    assert factory._STATE.reason == (
        "the kernel-factory library could not be prepared (BatchNormBackward: building the kernel-factory "
        "library for MindSpore 9.9 failed: x.cpp:12:3: error: 'KernelTensor' has no member named 'foo')")
