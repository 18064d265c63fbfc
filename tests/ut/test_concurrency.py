"""Concurrency and the kernel cache under adverse conditions.

- Several Python threads calling batch_norm_backward (PYNATIVE) at once, and
  several calling native.direct at once (ctypes releases the GIL, so these
  really run in parallel; the kernel's thread pool runs a second concurrent
  caller's job on that caller's thread) get results equal to the reference,
  and bitwise equal to the same call made alone.
- First build racing: test_build.py::test_concurrent_first_build has two
  processes; here three processes are released at the same instant onto an
  empty cache and must all succeed, load the same single library and leave
  no temporary files.
- The cache directory missing (created), under a regular file (clear
  error, see also test_build.py), read-only (a read-only bind mount: clear
  error when nothing is built, and a prebuilt library there is used as is),
  and a missing compiler with and without a prebuilt library.
"""
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from _harness import NAMES, check, direct_outputs, make_arrays
from reference import batch_norm_backward_ref

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run_threads(n, target):
    errors, barrier = [], threading.Barrier(n)

    def body(i):
        try:
            barrier.wait(timeout=60)
            target(i)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append((i, e))

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert not errors, errors


# Work that takes the multithreaded paths (>= 2^15 elements) and the serial one.
THREAD_CASES = [((8, 16, 33, 17), "NCHW", "float32", True), ((16, 9, 9, 64), "NHWC", "float32", False),
                ((4, 3, 70, 70), "NCHW", "bfloat16", True), ((300, 7), "NCHW", "float16", True),
                ((2, 5, 9), "NCHW", "float64", False), ((64, 1, 1000), "NCHW", "float32", True)]


def test_threads_direct():
    """8 threads x 6 calls on the direct entry; each result equals the same call run alone, bit for bit."""
    from mindspore_bn_grad.cpu_kernel import native
    jobs = []
    for k, (shape, fmt, dtype, training) in enumerate(THREAD_CASES):
        arrays = make_arrays(shape, fmt, seed=20 + k)
        attrs = dict(training=training, eps=1e-5, output_mask=(True, True, True), data_format=fmt)
        dtypes = {n: dtype for n in NAMES}
        alone, q, *_ = direct_outputs(arrays, dtypes, attrs)
        want = batch_norm_backward_ref(*(q[n] for n in NAMES), **attrs)
        for g, w in zip(alone, want):  # sanity: the serial result is right
            np.testing.assert_allclose(g, w, rtol=2e-2, atol=2e-2 * (np.abs(w).max() + 1))
        jobs.append((arrays, dtypes, attrs, alone))

    def work(i):
        for r in range(6):
            arrays, dtypes, attrs, alone = jobs[(i + r) % len(jobs)]
            got, *_ = direct_outputs(arrays, dtypes, attrs)
            for g, a in zip(got, alone):
                np.testing.assert_array_equal(g, a)

    _run_threads(8, work)


def test_threads_pynative():
    """4 threads calling batch_norm_backward at once, each result checked against the reference.

    Our launches are serialised by the package (launch.LOCK). The test's own MindSpore calls around
    them (making the input tensors, Cast and asnumpy of the outputs) take the same lock: MindSpore
    2.10's own operators launched from several Python threads at once can abort the process inside
    MindSpore (std::terminate in runtime::AsyncRQueue::Push, seen in CI under load) or hang it, with
    or without this package (docs/capabilities.md), which is not what this test is about."""
    import mindspore as ms
    import mindspore_bn_grad as mbg
    from _harness import OUTPUTS, assert_close, expected, ms_tensor, out_dtypes
    ms.set_context(mode=ms.PYNATIVE_MODE)
    cases = [((4, 6, 40), "NCHW", "float32", dict(training=True)),
             ((3, 5, 4, 8), "NHWC", "float32", dict(training=False, output_mask=(True, False, True))),
             ((2, 3, 4), "NCHW", "float16", dict(training=True)),
             ((64, 8, 64), "NCHW", "float32", dict(training=True))]
    prepared = [(make_arrays(shape, fmt, seed=30 + k), dtype, dict(attrs, data_format=fmt))
                for k, (shape, fmt, dtype, attrs) in enumerate(cases)]
    check("pynative", *_args(prepared[0]))  # warm: build and first op outside the race
    from mindspore_bn_grad.launch import LOCK as mindspore_calls  # an RLock

    def work(i):
        for r in range(5):
            arrays, dtype, attrs = prepared[(i + r) % len(prepared)]
            dtypes = {n: dtype for n in NAMES}
            with mindspore_calls:
                tensors = [ms_tensor(arrays.get(n), dtype) for n in NAMES]
            outs = mbg.batch_norm_backward(*tensors, **attrs)  # the launches that race
            with mindspore_calls:
                got = [o.astype(ms.float64).asnumpy() for o in outs]
                want, q = expected(arrays, dtypes, **attrs)
            for name, g, w, dt in zip(OUTPUTS, got, want, out_dtypes(arrays, dtypes)):
                assert g.shape == w.shape, (name, g.shape, w.shape)
                assert_close(name, g, w, dt, dtype, q, attrs)
            for g, keep in zip(got, attrs.get("output_mask", (True, True, True))):
                if not keep:
                    assert not np.any(g), "masked output must be zero-filled"

    _run_threads(4, work)


def _args(p):
    arrays, dtype, attrs = p
    return arrays, {n: dtype for n in NAMES}


# ------------------------------------------------------------ first build race

_FIRST_USE = """
import os, sys, time
go = sys.argv[1]
while not os.path.exists(go):
    time.sleep(0.001)
import numpy as np
from mindspore_bn_grad.cpu_kernel import build as cpu_build, native
x = np.arange(8, dtype=np.float32).reshape(1, 2, 4)
gi, gw, gb = native.direct(x, x, np.ones(2, np.float32), None, None,
                            np.zeros(2, np.float32), np.ones(2, np.float32))
print(cpu_build.library_path(), gw.tolist(), gb.tolist())
"""


def _env(**kw):
    env = dict(os.environ)
    env["MS_BN_GRAD_NATIVE_KERNELS"] = "off"  # the kernel build, not the import's registration (test_legacy_kernels)
    for k, v in kw.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def test_three_processes_first_build_released_together(tmp_path):
    cache, go = tmp_path / "cache", tmp_path / "go"
    env = _env(MS_BN_GRAD_CACHE_DIR=str(cache), MS_BN_GRAD_CXXFLAGS="-O0")  # a cold build; -O0 compiles 3x faster
    procs = [subprocess.Popen([sys.executable, "-c", _FIRST_USE, str(go)], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    time.sleep(1.0)  # all three started and polling
    go.write_text("go")
    outs = [p.communicate(timeout=900) for p in procs]
    paths = set()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
        path, rest = out.strip().split(" ", 1)
        assert rest == "[14.0, 126.0] [6.0, 22.0]", out
        paths.add(path)
    libs = list(cache.glob("*.so"))
    assert len(paths) == 1 and len(libs) == 1 and str(libs[0]) in paths
    assert not [p for p in cache.iterdir() if p.name.startswith(".")], "temporary files left behind"


# ----------------------------------------------------------- cache directory

_BUILD = """
from mindspore_bn_grad.cpu_kernel import build as cpu_build
try:
    print("OK", cpu_build.library_path())
except cpu_build.KernelBuildError as e:
    print("ERR", e)
"""


def _py(code, env, timeout=900):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=timeout)


def _prebuilt_cache(tmp_path):
    """A cache directory holding the library this environment builds and its digest (copied from
    the default cache)."""
    from mindspore_bn_grad.cpu_kernel import build as cpu_build
    src = cpu_build.library_path()
    cache = tmp_path / "prebuilt"
    cache.mkdir()
    for name in (src.name, src.name + cpu_build.DIGEST_SUFFIX):
        shutil.copy2(src.with_name(name), cache / name)
    return cache, src.name


def test_missing_cache_dir_is_created(tmp_path):
    cache = tmp_path / "does" / "not" / "exist"
    r = _py(_BUILD, _env(MS_BN_GRAD_CACHE_DIR=str(cache), MS_BN_GRAD_CXXFLAGS="-O0"))  # a cold build, 3x faster
    assert r.stdout.startswith("OK " + str(cache / "libms_bn_grad_")), r.stdout + r.stderr[-2000:]
    (built,) = cache.glob("libms_bn_grad_*.so")
    assert r.stdout.split()[1] == str(built)


def _ro_mount_prefix(directory):
    """argv prefix running a command with `directory` read-only (a private mount namespace)."""
    if shutil.which("unshare") is None:
        return None
    probe = subprocess.run(["unshare", "-rm", "sh", "-c",
                            f"mount --bind '{directory}' '{directory}' && "
                            f"mount -o remount,bind,ro '{directory}' && ! touch '{directory}/.w' 2>/dev/null"],
                           capture_output=True)
    if probe.returncode != 0:
        return None
    return ["unshare", "-rm", "sh", "-c",
            f"mount --bind '{directory}' '{directory}' && mount -o remount,bind,ro '{directory}' && "
            'exec "$0" "$@"']


def test_read_only_cache_dir_empty_is_a_clear_error(tmp_path):
    cache = tmp_path / "ro"
    cache.mkdir()
    prefix = _ro_mount_prefix(cache)
    if prefix is None:
        pytest.skip("no way to make a read-only directory here (root ignores chmod; unshare unavailable)")
    r = subprocess.run(prefix + [sys.executable, "-c", _BUILD], capture_output=True, text=True,
                       env=_env(MS_BN_GRAD_CACHE_DIR=str(cache)), cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("ERR BatchNormBackward: cannot write the kernel cache directory"), r.stdout
    assert "Read-only file system" in r.stdout and "MS_BN_GRAD_CACHE_DIR" in r.stdout


def test_read_only_cache_dir_with_prebuilt_library_is_used(tmp_path):
    """A read-only cache (e.g. baked into an image) that holds the build works without writing."""
    cache, name = _prebuilt_cache(tmp_path)
    prefix = _ro_mount_prefix(cache)
    if prefix is None:
        pytest.skip("no way to make a read-only directory here (root ignores chmod; unshare unavailable)")
    r = subprocess.run(prefix + [sys.executable, "-c", _FIRST_USE, "/"], capture_output=True, text=True,
                       env=_env(MS_BN_GRAD_CACHE_DIR=str(cache)), cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == f"{cache / name} [14.0, 126.0] [6.0, 22.0]"


def test_cache_dir_under_a_regular_file(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = _py(_BUILD, _env(MS_BN_GRAD_CACHE_DIR=str(blocker / "a" / "b")))
    assert r.stdout.startswith("ERR BatchNormBackward: cannot write the kernel cache directory"), r.stdout
    assert "Not a directory" in r.stdout


def test_missing_compiler_public_call_is_a_clear_error(tmp_path):
    """No compiler and nothing built: the public call raises KernelBuildError naming MS_BN_GRAD_CXX."""
    empty = tmp_path / "bin"
    empty.mkdir()
    code = """
        import numpy as np, mindspore as ms
        from mindspore_bn_grad import batch_norm_backward
        from mindspore_bn_grad.cpu_kernel import build as cpu_build
        x = ms.Tensor(np.ones((2, 3, 4), np.float32)); c = ms.Tensor(np.ones(3, np.float32))
        try:
            batch_norm_backward(x, x, c, None, None, c, c)
        except cpu_build.KernelBuildError as e:
            print("ERR", e)
    """
    env = _env(MS_BN_GRAD_CACHE_DIR=str(tmp_path / "c"), PATH=str(empty), CXX=None, MS_BN_GRAD_CXX=None)
    r = _py(code, env)
    assert "ERR BatchNormBackward: no C++ compiler found" in r.stdout, r.stdout + r.stderr[-2000:]
    assert "MS_BN_GRAD_CXX" in r.stdout


def test_missing_compiler_named_by_env_is_a_clear_error(tmp_path):
    r = _py(_BUILD, _env(MS_BN_GRAD_CACHE_DIR=str(tmp_path / "c"), MS_BN_GRAD_CXX="/no/such/compiler",
                         PATH=str(tmp_path), CXX=None))
    assert r.stdout.startswith("ERR BatchNormBackward: no C++ compiler found"), r.stdout + r.stderr[-2000:]


# ------------------------------------------------- many threads, cold and warm
#
# MindSpore 2.10's PYNATIVE launch path fails or crashes when several threads
# launch at once (see mindspore_bn_grad/launch.py), so each run is a fresh
# process: "cold" threads make the very first launches of the process
# together, a crash shows as a return code, and a wrong number as a failure.
# Each thread checks its results against the float64 reference: the public
# API against batch_norm_backward_ref, a converted network (its own, in
# training mode; MindSpore's BatchNorm updates its running statistics in
# place, so threads sharing one network in training would race by design)
# against a float64 BatchNorm forward and its running-statistics update.

_THREADS = """
import sys, threading
import numpy as np
sys.path.insert(0, sys.argv[5])
from reference import batch_norm_backward_ref
n, rounds, cold, what = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "cold", sys.argv[4]
import mindspore as ms
from mindspore import Tensor, nn
import mindspore_bn_grad as mbg
ms.set_context(mode=ms.PYNATIVE_MODE)
rng = np.random.default_rng(5)
shapes = [(4, 3, 8), (8, 16, 33, 17), (2, 5, 9), (6, 4, 5, 5)]
cases = []
for k, s in enumerate(shapes):
    c = s[1]
    a = [rng.standard_normal(s), rng.standard_normal(s), rng.uniform(0.5, 2, c), None, None,
         rng.standard_normal(c), rng.uniform(0.5, 2, c)]
    a = [None if v is None else v.astype(np.float32) for v in a]
    attrs = dict(training=True, eps=1e-5, output_mask=(True, k % 2 == 0, True))
    cases.append((a, attrs, batch_norm_backward_ref(*a, **attrs)))

def bn_forward(x, gamma, beta, eps=1e-5):
    x = x.astype(np.float64)
    axes = (0, 2, 3)
    m, v = x.mean(axes, keepdims=True), x.var(axes, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * gamma.reshape(1, -1, 1, 1) + beta.reshape(1, -1, 1, 1)

x_net = rng.standard_normal((4, 3, 5, 5)).astype(np.float32) * 2 + 1
nets = []
for i in range(n):
    net = nn.SequentialCell([nn.BatchNorm2d(3, gamma_init=Tensor(np.float32([1.5, 0.5, 1.0]))), nn.BatchNorm2d(3)])
    mbg.convert_batchnorm(net).set_train()
    nets.append(net)
want_net = bn_forward(bn_forward(x_net, np.float32([1.5, 0.5, 1.0]), np.zeros(3)), np.ones(3), np.zeros(3))

def run_api(i, r):
    a, attrs, want = cases[(i + r) % len(cases)]
    got = mbg.batch_norm_backward(*(None if v is None else Tensor(v) for v in a), **attrs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.asnumpy(), w, rtol=1e-4, atol=1e-4)

def run_net(i, r):
    y = nets[i](Tensor(x_net)).asnumpy()
    np.testing.assert_allclose(y, want_net, rtol=1e-4, atol=1e-4)

run = run_api if what == "api" else run_net
if not cold:
    for i in range(n):
        run(i, 0)
errors, barrier = [], threading.Barrier(n)

def body(i):
    try:
        barrier.wait(timeout=60)
        for r in range(rounds):
            run(i, r)
    except BaseException as e:
        errors.append(repr(e)[:300])

threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
if what == "net":  # every network took (rounds [+1 warm]) steps: the running mean equals the float64 update
    steps = rounds + (0 if cold else 1)
    batch_mean = x_net.astype(np.float64).mean((0, 2, 3))
    want_mm = batch_mean * (1 - 0.9 ** steps)
    for net in nets:
        np.testing.assert_allclose(net[0].moving_mean.asnumpy(), want_mm, rtol=1e-4, atol=1e-5)
print("errors:", errors)
"""


def _run_thread_script(n, rounds, start, what):
    r = subprocess.run([sys.executable, "-c", _THREADS, str(n), str(rounds), start, what,
                        os.path.join(ROOT, "tests")],
                       capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert r.returncode == 0, (r.returncode, r.stdout[-2000:], r.stderr[-3000:])
    assert "errors: []" in r.stdout, r.stdout[-3000:]


@pytest.mark.parametrize("n,start,what", [(8, "cold", "api"), (16, "warm", "api"), (16, "cold", "net")])
def test_many_threads_public_api_and_converted_network(n, start, what):
    """8 and 16 threads, cold (first launches of the process together) and warm, a few rounds each."""
    _run_thread_script(n, 4, start, what)


@pytest.mark.slow
@pytest.mark.parametrize("n", [8, 16])
@pytest.mark.parametrize("start", ["cold", "warm"])
@pytest.mark.parametrize("what", ["api", "net"])
def test_many_threads_many_rounds(n, start, what):
    """The same, 60 rounds and three fresh processes each (aborts used to show once in a few runs)."""
    for _ in range(3):
        _run_thread_script(n, 60, start, what)
