"""Hardening (issue 17): the kernel cache under attack, thread-count limits, late errors made early.

Cache: a library is handed to dlopen only after its SHA-256 matches the
digest written by the build, and only from a private directory, owned by
this user, with files owned by this user. Damaged libraries (truncated,
garbage, empty) are rebuilt, never loaded (a truncated one used to kill the
process with SIGBUS inside ctypes.CDLL). Planted libraries (another owner,
writable by others) are replaced unloaded: their constructor never runs.
Most of these tests build with a stand-in compiler (MS_BN_GRAD_CXX, a shell
script) that copies the real library, so a rebuild costs nothing and the
number of builds can be counted.

Threads: one parser (Python) for MS_BN_GRAD_NUM_THREADS and set_num_threads;
C++ never reads the environment; a cap of 4 threads per usable CPU that
both sides agree on; a thread the OS refuses is a Python exception.
"""
import hashlib
import os
import stat
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OTHER_UID = 12345  # not this user: as root a test can give files away


def _py(code, env_extra=None, env_drop=(), timeout=600):
    env = {k: v for k, v in os.environ.items() if k not in env_drop}
    env["MS_BN_GRAD_NATIVE_KERNELS"] = "off"  # the kernel build, not the import's registration (test_legacy_kernels)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=ROOT)


# A small direct call whose values are known: grad_weight = sum(dy * x) per channel, grad_bias = sum(dy).
_DIRECT = """
import numpy as np
from mindspore_bn_grad.cpu_kernel import native
x = np.arange(8, dtype=np.float32).reshape(1, 2, 4)
gi, gw, gb = native.direct(x, x, np.ones(2, np.float32), None, None,
                            np.zeros(2, np.float32), np.ones(2, np.float32))
print("OK", gw.tolist(), gb.tolist())
"""
_DIRECT_OK = "OK [14.0, 126.0] [6.0, 22.0]"


@pytest.fixture(scope="module")
def real_lib():
    from mindspore_bn_grad.cpu_kernel import build as cpu_build
    return cpu_build.library_path()


@pytest.fixture
def fake_cxx(tmp_path, real_lib):
    """A stand-in compiler: copies the real library to the -o argument of the link and counts the
    links (one per build; the compiles of the translation units, -c, write an empty object)."""
    log = tmp_path / "builds.log"
    script = tmp_path / "fakecxx"
    script.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        out=""; all=" $* "
        while [ $# -gt 0 ]; do
          if [ "$1" = "-o" ]; then out="$2"; fi
          shift
        done
        [ -n "$out" ] || exit 0   # --version
        case "$all" in *" -c "*) : > "$out"; exit 0;; esac
        echo build >> '{log}'
        cp '{real_lib}' "$out"
        """))
    script.chmod(0o755)
    cache = tmp_path / "cache"

    class Fake:
        env = {"MS_BN_GRAD_CXX": str(script), "MS_BN_GRAD_CACHE_DIR": str(cache)}
        dir = cache

        @staticmethod
        def builds():
            return len(log.read_text().splitlines()) if log.exists() else 0

        @staticmethod
        def lib():
            libs = sorted(cache.glob("libms_bn_grad_*.so"))
            assert len(libs) == 1, libs
            return libs[0]

    return Fake


def _run_direct(fake):
    r = _py(_DIRECT, fake.env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == _DIRECT_OK, r.stdout + r.stderr[-3000:]


def _digest(path):
    return path.with_name(path.name + ".sha256")


# ------------------------------------------------------------- damaged library

@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "no_digest", "digest_garbage"])
def test_damaged_library_is_rebuilt_not_loaded(fake_cxx, damage):
    _run_direct(fake_cxx)
    lib = fake_cxx.lib()
    good = lib.read_bytes()
    if damage == "truncated":  # used to end the process with SIGBUS inside ctypes.CDLL
        lib.write_bytes(good[:1000])
    elif damage == "garbage":
        lib.write_bytes(os.urandom(len(good)))
    elif damage == "empty":
        lib.write_bytes(b"")
    elif damage == "no_digest":
        _digest(lib).unlink()
    else:
        _digest(lib).write_text("0" * 64 + "\n")
    _run_direct(fake_cxx)
    assert fake_cxx.builds() == 2
    assert lib.read_bytes() == good
    assert _digest(lib).read_text().strip() == hashlib.sha256(good).hexdigest()


def test_undamaged_library_is_not_rebuilt(fake_cxx):
    _run_direct(fake_cxx)
    _run_direct(fake_cxx)
    assert fake_cxx.builds() == 1


def test_library_that_matches_its_digest_but_does_not_load_is_a_clear_error(fake_cxx):
    """The digest stops accidents, not a user damaging both files: still a clear error, no crash."""
    _run_direct(fake_cxx)
    lib = fake_cxx.lib()
    junk = b"\x7fELF" + b"\0" * 60
    lib.write_bytes(junk)
    _digest(lib).write_text(hashlib.sha256(junk).hexdigest() + "\n")
    r = _py(_DIRECT, fake_cxx.env)
    assert r.returncode == 1, r.stdout + r.stderr[-2000:]
    assert f"KernelBuildError: BatchNormBackward: cannot load the CPU kernel library {lib}" in r.stderr
    assert "delete it to have it rebuilt" in r.stderr


# ------------------------------------------------------------- planted library

def _planted_lib(tmp_path, marker):
    """A library whose constructor writes `marker`: proof that it was loaded."""
    src = tmp_path / "evil.c"
    src.write_text(f'#include <stdio.h>\n__attribute__((constructor)) static void f(void) {{\n'
                   f'  FILE *m = fopen("{marker}", "w"); if (m) fclose(m);\n}}\n')
    out = tmp_path / "evil.so"
    subprocess.run(["gcc", "-shared", "-fPIC", str(src), "-o", str(out)], check=True, capture_output=True)
    return out.read_bytes()


@pytest.mark.parametrize("how", ["other_owner", "writable_by_others", "symlink"])
def test_planted_library_is_never_loaded(fake_cxx, tmp_path, how):
    _run_direct(fake_cxx)
    lib = fake_cxx.lib()
    marker = tmp_path / "constructor_ran"
    evil = _planted_lib(tmp_path, marker)
    if how == "symlink":
        target = tmp_path / "elsewhere.so"
        target.write_bytes(evil)
        lib.unlink()
        lib.symlink_to(target)
    else:
        lib.write_bytes(evil)
    _digest(lib).write_text(hashlib.sha256(evil).hexdigest() + "\n")  # even with a matching digest
    if how == "other_owner":
        os.chown(lib, OTHER_UID, OTHER_UID)
        os.chown(_digest(lib), OTHER_UID, OTHER_UID)
    elif how == "writable_by_others":
        lib.chmod(0o777)
    _run_direct(fake_cxx)
    assert not marker.exists(), "the planted library's constructor ran"
    assert fake_cxx.builds() == 2
    st = os.lstat(lib)
    assert stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


# ------------------------------------------------------------- cache directory

_BUILD = """
from mindspore_bn_grad.cpu_kernel import build as cpu_build
try:
    print("OK", cpu_build.library_path())
except cpu_build.KernelBuildError as e:
    print("ERR", e)
"""


def _build_result(env):
    r = _py(_BUILD, env)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.strip()


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o770, 0o757])
def test_cache_dir_writable_by_others_is_refused(fake_cxx, tmp_path, mode):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    out = _build_result({**fake_cxx.env, "MS_BN_GRAD_CACHE_DIR": str(shared)})
    assert out.startswith(f"ERR BatchNormBackward: the kernel cache directory {shared} is writable by "
                          f"group or others (mode {mode:o})"), out
    assert "chmod go-w" in out and "MS_BN_GRAD_CACHE_DIR" in out
    assert not list(shared.iterdir()) and fake_cxx.builds() == 0


def test_cache_dir_of_another_user_is_refused(fake_cxx, tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    out = _build_result({**fake_cxx.env, "MS_BN_GRAD_CACHE_DIR": str(theirs)})
    assert out.startswith(f"ERR BatchNormBackward: the kernel cache directory {theirs} is not a directory "
                          f"owned by you (uid {os.geteuid()}; owner uid {OTHER_UID})"), out
    assert fake_cxx.builds() == 0


@pytest.mark.parametrize("mode,owner", [(0o777, 0), (0o775, 0), (0o755, OTHER_UID)])
def test_cache_dir_under_a_directory_others_may_change_is_refused(fake_cxx, tmp_path, mode, owner):
    """Whoever may rename a parent may swap the whole cache; /tmp-like sticky parents are fine."""
    parent = tmp_path / "open"
    parent.mkdir()
    parent.chmod(mode)
    os.chown(parent, owner, owner)
    out = _build_result({**fake_cxx.env, "MS_BN_GRAD_CACHE_DIR": str(parent / "cache")})
    assert out.startswith(f"ERR BatchNormBackward: the kernel cache directory {parent / 'cache'} lies in "
                          f"{parent}, which another user may change (owner uid {owner}, mode {mode:o})"), out
    os.chown(parent, 0, 0)
    parent.chmod(0o1777)
    out = _build_result({**fake_cxx.env, "MS_BN_GRAD_CACHE_DIR": str(parent / "cache")})
    assert out.startswith("OK "), out
    assert stat.S_IMODE(os.stat(parent / "cache").st_mode) == 0o700


def test_lock_symlink_is_not_followed(fake_cxx, tmp_path):
    """A planted .lock symlink must not truncate (or even open) the file it points to."""
    _run_direct(fake_cxx)
    lib = fake_cxx.lib()
    lock = lib.with_suffix(".lock")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    lib.unlink()  # so that the next use takes the lock to build
    lock.unlink()
    lock.symlink_to(victim)
    out = _build_result(fake_cxx.env)
    assert out == f"ERR BatchNormBackward: the kernel build lock {lock} is a symbolic link; remove it " \
                  "(the cache directory holds only files this package writes)", out
    assert victim.read_text() == "precious"


def test_existing_lock_is_not_truncated(fake_cxx):
    fake_cxx.dir.mkdir(mode=0o700)
    _run_direct(fake_cxx)
    lock = fake_cxx.lib().with_suffix(".lock")
    lock.write_text("kept")
    fake_cxx.lib().unlink()
    _run_direct(fake_cxx)
    assert lock.read_text() == "kept"


def test_cache_path_with_a_colon_is_refused(fake_cxx, tmp_path):
    """MindSpore splits ops.Custom's 'library:function' at ':' ("couldn't find the AOT binary file")."""
    out = _build_result({**fake_cxx.env, "MS_BN_GRAD_CACHE_DIR": str(tmp_path / "a:b")})
    assert out.startswith(f"ERR BatchNormBackward: the kernel cache directory {tmp_path / 'a:b'} contains "
                          "':'"), out
    assert "MS_BN_GRAD_CACHE_DIR" in out
    assert not (tmp_path / "a:b").exists()


def test_mindspore_loads_the_library_that_was_checked():
    from mindspore_bn_grad.cpu_kernel import build as cpu_build, native
    path, func = native.aot_func().rsplit(":", 1)
    assert func == "BatchNormBackward" and path == native.lib()._name
    assert cpu_build._verified(cpu_build.Path(path))


# ------------------------------------------------------------- compiler

def test_named_compiler_that_does_not_exist_is_an_error_not_a_fallback(tmp_path):
    """g++ is on PATH, yet MS_BN_GRAD_CXX (or CXX) names a missing compiler: an error naming it."""
    for var in ("MS_BN_GRAD_CXX", "CXX"):
        env = {var: "/no/such/compiler", "MS_BN_GRAD_CACHE_DIR": str(tmp_path / var)}
        r = _py(_BUILD, env, env_drop=("MS_BN_GRAD_CXX", "CXX"))
        assert r.stdout.strip() == (f"ERR BatchNormBackward: no C++ compiler found at {var}='/no/such/compiler' "
                                    f"(no executable of that name on PATH or at that path); point {var} at an "
                                    "installed compiler or unset it"), r.stdout + r.stderr[-2000:]


def _proc_state(pid):
    """None once the process is gone (a zombie counts as gone: it runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None
    return None if state in ("Z", "X") else state


def test_compiler_dies_with_its_parent_and_leftovers_are_removed(tmp_path, fake_cxx):
    """SIGKILL of the building process takes the compiler (and its children) down; the next build
    removes the temporary files the killed one left."""
    pids = tmp_path / "pids"
    slow = tmp_path / "slowcxx"
    slow.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        [ "$1" = "--version" ] && exit 0
        sleep 600 &
        echo $$ $! > '{pids}'
        wait
        """))
    slow.chmod(0o755)
    env = {**fake_cxx.env, "MS_BN_GRAD_CXX": str(slow)}
    env = {**os.environ, "MS_BN_GRAD_NATIVE_KERNELS": "off", **env}
    builder = subprocess.Popen([sys.executable, "-c", _BUILD], env=env, cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            if pids.exists() and len(pids.read_text().split()) == 2:
                break
            time.sleep(0.1)
        compiler, child = map(int, pids.read_text().split())
        assert _proc_state(compiler) and _proc_state(child)
    finally:
        builder.kill()
        builder.wait()
    for _ in range(300):
        if _proc_state(compiler) is None and _proc_state(child) is None:
            break
        time.sleep(0.1)
    assert _proc_state(compiler) is None, "the compiler outlived the process that started it"
    assert _proc_state(child) is None, "the compiler's child outlived the process that started it"
    leftovers = [p.name for p in fake_cxx.dir.iterdir() if p.name.startswith(".")]
    assert leftovers, "expected the killed build's temporary files"
    _run_direct(fake_cxx)  # the next build (the stand-in compiler again)
    assert not [p for p in fake_cxx.dir.iterdir() if p.name.startswith(".")]


def test_stale_temp_files_of_a_build_in_progress_are_kept(fake_cxx):
    """Another key's temporary file is removed only when nobody holds that key's lock."""
    import fcntl
    fake_cxx.dir.mkdir(mode=0o700)
    busy_lock = fake_cxx.dir / "libms_bn_grad_busy.lock"
    busy_tmp = fake_cxx.dir / ".libms_bn_grad_busy.abc123.so"
    idle_tmp = fake_cxx.dir / ".libms_bn_grad_idle.def456.so"
    idle_lock = fake_cxx.dir / "libms_bn_grad_idle.lock"
    for p in (busy_lock, busy_tmp, idle_tmp, idle_lock):
        p.write_bytes(b"")
    fd = os.open(busy_lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _run_direct(fake_cxx)
    finally:
        os.close(fd)
    assert busy_tmp.exists() and not idle_tmp.exists()


# ------------------------------------------------------------- thread count

@pytest.fixture
def native():
    from mindspore_bn_grad.cpu_kernel import native
    before = native.get_num_threads()
    yield native
    native.set_num_threads(before)


@pytest.mark.parametrize("n", [np.int64(2), np.int32(1), np.uint8(3), 2])
def test_set_num_threads_accepts_integers_of_any_kind(native, n):
    native.set_num_threads(n)
    assert native.get_num_threads() == int(n) == native.lib().MsBnGradGetNumThreads()


@pytest.mark.parametrize("n", [0, -1, 2 ** 32 + 1, 99999999999, 100000, np.int64(2 ** 40)])
def test_set_num_threads_out_of_range_is_refused(native, n):
    before = native.lib().MsBnGradGetNumThreads()
    cap = 4 * len(os.sched_getaffinity(0))
    with pytest.raises(ValueError, match=rf"BatchNormBackward: num_threads expected an integer in 1\.\.{cap} "
                                         rf"\(at most 4 threads for each of the .* CPUs .*\), got {int(n)}$"):
        native.set_num_threads(n)
    assert native.lib().MsBnGradGetNumThreads() == before


@pytest.mark.parametrize("n", [1.0, 2.5, True, np.bool_(True), "4", None])
def test_set_num_threads_non_integer_is_refused(native, n):
    with pytest.raises(TypeError, match=r"BatchNormBackward: num_threads expected a positive int, got "):
        native.set_num_threads(n)


def test_cap_agrees_between_python_and_cpp(native):
    lib = native.lib()
    assert lib.MsBnGradMaxThreads() == native.max_threads() == 4 * len(os.sched_getaffinity(0))
    # The C++ entry checks the same range itself (code 8) for callers other than native.
    assert lib.MsBnGradSetNumThreads(native.max_threads() + 1) == 8
    assert lib.MsBnGradSetNumThreads(0) == 8
    assert lib.MsBnGradSetNumThreads(native.max_threads()) == 0
    assert lib.MsBnGradGetNumThreads() == native.max_threads()


@pytest.mark.parametrize("value,want", [
    ("3", "3"), (" 2 ", "2"), ("+1", "1"), ("", "CPUS"),
    ("abc", "ValueError: BatchNormBackward: MS_BN_GRAD_NUM_THREADS expected a positive integer, got 'abc'"),
    ("4x", "ValueError: BatchNormBackward: MS_BN_GRAD_NUM_THREADS expected a positive integer, got '4x'"),
    ("-2", "ValueError: BatchNormBackward: MS_BN_GRAD_NUM_THREADS expected a positive integer, got '-2'"),
    ("0", "ValueError: BatchNormBackward: MS_BN_GRAD_NUM_THREADS expected an integer in 1..CAP"),
    ("100000", "ValueError: BatchNormBackward: MS_BN_GRAD_NUM_THREADS expected an integer in 1..CAP"),
    ("99999999999", "ValueError: BatchNormBackward: MS_BN_GRAD_NUM_THREADS expected an integer in 1..CAP"),
])
def test_env_thread_count_one_parser(value, want):
    """Python parses the variable and hands C++ the number (garbage used to be atoi'd to 0 there)."""
    cpus = len(os.sched_getaffinity(0))
    want = want.replace("CPUS", str(cpus)).replace("CAP", str(4 * cpus))
    r = _py("""
        from mindspore_bn_grad.cpu_kernel import native
        try:
            print(native.lib().MsBnGradGetNumThreads())
        except ValueError as e:
            print("ValueError:", e)
    """, {"MS_BN_GRAD_NUM_THREADS": value})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().startswith(want), r.stdout


def test_cpp_does_not_read_the_environment(real_lib):
    """Loaded without cpu_kernel.native, the library starts at the CPU count whatever the variable says."""
    r = _py(f"""
        import ctypes
        print(ctypes.CDLL({str(real_lib)!r}).MsBnGradGetNumThreads())
    """, {"MS_BN_GRAD_NUM_THREADS": "3"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert int(r.stdout) == len(os.sched_getaffinity(0))


_NO_THREADS = """
import os, resource, numpy as np
from mindspore_bn_grad.cpu_kernel import native
lib = native.lib()
def limit_memory():  # no room for more thread stacks
    vm = int([l for l in open("/proc/self/status") if l.startswith("VmSize")][0].split()[1]) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (vm + (8 << 20), resource.RLIM_INFINITY))
x = np.random.default_rng(0).standard_normal((4, 3, 64, 64)).astype(np.float32)
want = x.astype(np.float64).sum(axis=(0, 2, 3))
def run():
    gi, gw, gb = native.direct(x, x, None, None, None, np.zeros(3, np.float32), np.ones(3, np.float32))
    return bool(np.allclose(gb, want, rtol=1e-5))
"""


def test_thread_the_os_refuses_is_a_python_exception(real_lib):
    r = _py(_NO_THREADS + """
limit_memory()
try:
    native.set_num_threads(native.max_threads())
except RuntimeError as e:
    print("ERR", e)
print(native.get_num_threads(), lib.MsBnGradGetNumThreads(), run())
""", {"MS_BN_GRAD_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-2000:]
    err, state = r.stdout.strip().splitlines()
    assert err.startswith(f"ERR BatchNormBackward: num_threads expected a thread count the system can start, "
                          f"got {4 * len(os.sched_getaffinity(0))}: the OS refused to start a thread"), err
    assert "the previous setting, 1, stays" in err
    assert state == "1 1 True"


def test_kernel_goes_on_with_the_threads_it_has():
    """A forked child starts a fresh pool; when the OS refuses its threads the call still computes
    (serially), instead of std::terminate."""
    r = _py(_NO_THREADS + """
native.set_num_threads(2)
pid = os.fork()
if pid == 0:
    limit_memory()
    os._exit(0 if run() else 3)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
""")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "child 0", r.stdout + r.stderr[-2000:]


# ------------------------------------------------------------- tensor count

@pytest.mark.parametrize("mode", ["pynative", "graph"])
@pytest.mark.parametrize("count", [2, 6, 8])
def test_wrong_number_of_tensors_is_named(mode, count):
    import mindspore as ms
    import mindspore_bn_grad as mbg
    x = ms.Tensor(np.ones((2, 3, 4), np.float32))
    c = ms.Tensor(np.ones(3, np.float32))
    args = ([x, x] + [c] * 6)[:count]
    op = mbg.BatchNormBackward()

    class Net(ms.nn.Cell):
        def __init__(self):
            super().__init__()
            self.op = op

        def construct(self, *a):
            return self.op(*a)

    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)
    try:
        with pytest.raises(TypeError) as info:
            out = (Net() if mode == "graph" else op)(*args)
            [o.asnumpy() for o in out]
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    assert str(info.value) == ("BatchNormBackward: inputs expected 7 tensors (grad_out, input, weight, "
                               "running_mean, running_var, save_mean, save_invstd; None for an absent "
                               f"optional one), got {count}")


def test_no_deterministic_switch():
    """The kernel is always deterministic (test_kernel_direct.py checks bitwise equality across
    thread counts): there is no switch to document or to forget."""
    import mindspore_bn_grad as mbg
    from mindspore_bn_grad.cpu_kernel import native
    for name in ("set_deterministic", "get_deterministic"):
        assert name not in mbg.__all__ and not hasattr(native, name)
        with pytest.raises(AttributeError):
            getattr(mbg, name)
    assert not hasattr(native.lib(), "MsBnGradSetDeterministic")
