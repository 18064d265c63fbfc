"""Builds the CPU kernel library from the C++ source shipped in csrc/.

Built on first use and cached on disk, keyed by a hash of the sources, the
flags, the CPU (the build uses -march=native) and the installed MindSpore's
AotExtra header:
  $MS_BN_GRAD_CACHE_DIR, else $XDG_CACHE_HOME/mindspore_bn_grad, else
  ~/.cache/mindspore_bn_grad.
The compiler is not part of the key and is looked up only when a build is
needed: a valid cached library loads on a machine without a compiler (a cache
shipped in an image), and MS_BN_GRAD_CXX naming a missing compiler is an error
only then. Which compiler built a library is recorded beside it, in
<library>.json (with the flags and the build time); to rebuild with another
compiler, point MS_BN_GRAD_CACHE_DIR at a new directory.
The build runs one compiler process per C++ file, as many at once as this
process may use CPUs, then links; it says so on stderr when it starts and how
long it took when it ends. Loading from the cache prints nothing.
Several processes may build at once: one holds a file lock while it compiles
into a temporary file that is renamed into place atomically; the others wait
for the lock and then find the finished library.

What is loaded is checked first, since loading a library runs its code:
  - the cache directory must be owned by this user and not writable by group
    or others, and every directory above it owned by this user or root and not
    writable by group or others (unless sticky, like /tmp): otherwise a clear
    error;
  - the library and its digest (<library>.sha256, written by the build) must
    be regular files owned by this user, not writable by others, and the
    library's SHA-256 must match the digest; otherwise the library is rebuilt
    in place (a truncated or damaged file is never handed to dlopen);
  - the lock file is opened without following a symbolic link or truncating.
The compiler runs in its own process group, killed when this process dies;
temporary files of builds killed earlier are removed by the next build.

Environment:
  MS_BN_GRAD_CXX       C++ compiler (else $CXX, else g++, c++, clang++ on PATH);
                       a compiler named here or in $CXX must exist
  MS_BN_GRAD_CXXFLAGS  extra flags (e.g. sanitizers; shell syntax), part of the
                       cache key, given to every compile and to the link
  MS_BN_GRAD_CACHE_DIR cache directory (no ':' in it: MindSpore splits its
                       'library:function' argument at ':')
"""
import ctypes
import errno
import fcntl
import hashlib
import hmac
import importlib.metadata
import importlib.util
import os
import re
import json
import platform
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CSRC = Path(__file__).resolve().parent.parent / "csrc"
LIB_STEM = "libms_bn_grad"
DIGEST_SUFFIX = ".sha256"

# -D_GLIBCXX_USE_CXX11_ABI=0: MindSpore's ABI (std::string crosses AotExtra).
BASE_FLAGS = ("-std=c++17", "-O3", "-fPIC", "-shared", "-pthread", "-march=native",
              "-fno-math-errno", "-D_GLIBCXX_USE_CXX11_ABI=0", "-Wall", "-Wextra")


# csrc/ms_aot_compat.h includes the installed MindSpore's own AotExtra header
# (<site-packages>/mindspore/include/...), with its internal includes resolved
# in csrc/ms_internal/ (see there).
MS_AOT_HEADER = "mindspore/ccsrc/utils/custom_aot_extra.h"
# MindSpore's CPU op plugin interface (std-only), for csrc/op_plugin.cpp: where each release ships
# it, newest first, as (first release, path); the first entry the installed release reaches whose file
# exists is used (ms_compat, "CPU op plugin"). 2.7.x have only earlier forms: 2.7.2's
# (kernel/cpu/custom/kernel_mod_impl/, float scalars) compiles, but MindSpore 2.7.2 refuses or
# mis-feeds the entry points (tried: scripts/test_matrix.sh, docs/mindspore_versions.md); 2.7.0 and
# 2.7.1 have incompatible ones. No plugin entry points on 2.7.x.
MS_PLUGIN_HEADERS = (
    ((2, 8, 0), "mindspore/ops/kernel/cpu/op_plugin/custom_kernel_input_info.h"),
)
# The first release whose CPU kernel factory the kernel-factory library joins (ms_compat's module
# docstring, "CPU kernel factory"): known here, without importing MindSpore, so that the import of the
# package need not import MindSpore on a release without the route.
FACTORY_FIRST_RELEASE = (2, 7, 1)


class KernelBuildError(RuntimeError):
    """The CPU kernel could not be built (no compiler, compile error, cache not writable)."""


# The kernel-factory library's own files (cpu_kernel/factory.py builds them, against MindSpore's C++
# headers): not part of the kernel library.
FACTORY_SOURCE = CSRC / "factory_kernels.cpp"
FACTORY_INCLUDE = CSRC / "ms_factory_internal"


def sources():
    """The kernel library's C++ files (not the kernel-factory library's)."""
    return sorted(p for p in CSRC.rglob("*") if p.suffix in (".cpp", ".h")
                  and p != FACTORY_SOURCE and FACTORY_INCLUDE not in p.parents)


def find_compiler() -> str:
    for var in ("MS_BN_GRAD_CXX", "CXX"):
        named = os.environ.get(var)
        if named:  # a compiler the user named: that one or an error, never another
            path = shutil.which(named)
            if path is None:
                raise KernelBuildError(
                    f"BatchNormBackward: no C++ compiler found at {var}={named!r} (no executable "
                    f"of that name on PATH or at that path); point {var} at an installed compiler "
                    "or unset it")
            return path
    for cand in ("g++", "c++", "clang++"):
        path = shutil.which(cand)
        if path:
            return path
    raise KernelBuildError(
        "BatchNormBackward: no C++ compiler found to build the CPU kernel; install one "
        "(Debian/Ubuntu: apt-get install g++) or point MS_BN_GRAD_CXX at it")


def flags():
    extra = os.environ.get("MS_BN_GRAD_CXXFLAGS", "")
    try:
        return list(BASE_FLAGS) + shlex.split(extra)
    except ValueError as e:  # "No closing quotation", "No escaped character"
        raise KernelBuildError(f"BatchNormBackward: MS_BN_GRAD_CXXFLAGS expected compiler flags in "
                               f"shell syntax, got {extra!r} ({e})") from e


def _include_roots():
    """The include/ directories of the installed MindSpore package, found without importing it."""
    spec = importlib.util.find_spec("mindspore")
    return [Path(p) / "include" for p in (spec.submodule_search_locations or [])] if spec else []


def installed_release():
    """(major, minor, patch) of the installed MindSpore distribution, read without importing it."""
    try:
        version = importlib.metadata.version("mindspore")
    except importlib.metadata.PackageNotFoundError:
        return None
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    return tuple(int(g or 0) for g in m.groups()) if m else None


def plugin_interface_header(include_root=None):
    """The installed MindSpore's op plugin interface header (MS_PLUGIN_HEADERS), found without
    importing MindSpore; None on a release without one we use, where the library exports no plugin
    entry points and the package never enables the op plugin."""
    rel = installed_release()
    roots = [Path(include_root)] if include_root is not None else _include_roots()
    for first, path in MS_PLUGIN_HEADERS:
        if rel is not None and rel >= first:
            found = next(((r / path).resolve() for r in roots if (r / path).is_file()), None)
            if found is not None:
                return found
    return None


def mindspore_headers(include_root=None):
    """(compiler flags, cache-key part) for the installed MindSpore's AotExtra header,
    found from the installed package without importing it."""
    if include_root is None:
        roots = _include_roots()
        include_root = next((r for r in roots if (r / MS_AOT_HEADER).is_file()), None)
        if include_root is None:
            raise KernelBuildError(f"BatchNormBackward: the CPU kernel is built against the installed "
                                   f"MindSpore's {MS_AOT_HEADER}, not found in {[str(r) for r in roots]}")
    header = (Path(include_root) / MS_AOT_HEADER).resolve()
    flags = [f"-I{CSRC / 'ms_internal'}", f'-DMS_BN_GRAD_MS_AOT_HEADER="{header}"']
    key = str(header).encode() + b"\0" + header.read_bytes()
    # The op plugin's KernelInputInfo interface (csrc/op_plugin.cpp): without it (a release
    # that lacks the mechanism) the library exports no plugin entry points.
    plugin_header = plugin_interface_header(include_root)
    if plugin_header is not None:
        flags.append(f'-DMS_BN_GRAD_MS_PLUGIN_HEADER="{plugin_header}"')
        key += b"\0" + str(plugin_header).encode() + b"\0" + plugin_header.read_bytes()
    return flags, key


def cache_dir() -> Path:
    env = os.environ.get("MS_BN_GRAD_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mindspore_bn_grad"


def _cpu_signature() -> str:
    # -march=native: a cache shared between machines must not hand a library
    # built for one CPU to another.
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return line
    except OSError:
        pass
    return platform.processor()


def _compiler_version(compiler: str) -> str:
    try:
        return subprocess.run([compiler, "--version"], capture_output=True, text=True,
                              timeout=60).stdout.strip().split("\n")[0]
    except (OSError, subprocess.SubprocessError):
        return ""


def build_key(cxxflags, ms_key: bytes = b"") -> str:
    """The cache key: sources, flags, CPU and MindSpore header; nothing that needs the compiler."""
    h = hashlib.sha256(ms_key + b"\0")
    for part in (" ".join(cxxflags), platform.machine(), _cpu_signature()):
        h.update(part.encode() + b"\0")
    for src in sources():
        h.update(str(src.relative_to(CSRC)).encode() + b"\0" + src.read_bytes() + b"\0")
    return h.hexdigest()[:20]


def library_path() -> Path:
    """Path of the built library, checked against its digest (building it if needed)."""
    ms_inc, ms_key = mindspore_headers()
    cxxflags = flags() + ms_inc
    key = build_key(cxxflags, ms_key)
    directory = _private_dir(cache_dir())
    lib = directory / f"{LIB_STEM}_{key}.so"
    if _verified(lib):
        return lib
    compiler = find_compiler()  # only now: a cached library needs none
    with _BuildLock(directory, key):
        if _verified(lib):  # another process built it while we waited
            return lib
        _remove_stale_temps(directory, key)
        _compile(compiler, cxxflags, directory, key, lib)
    return lib


def _cache_error(directory, what):
    return KernelBuildError(f"BatchNormBackward: cannot write the kernel cache directory {directory} "
                            f"({what}); set MS_BN_GRAD_CACHE_DIR to a writable directory")


def _private_dir(directory: Path) -> Path:
    """`directory`, created if missing, after checking nobody else can place files in it."""
    if ":" in str(directory):
        raise KernelBuildError(
            f"BatchNormBackward: the kernel cache directory {directory} contains ':', which "
            "MindSpore cannot load a kernel from (it splits ops.Custom's 'library:function' at "
            "':'); set MS_BN_GRAD_CACHE_DIR to a path without ':'")
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        real = directory.resolve(strict=True)
        st = os.stat(real)
    except OSError as e:
        raise _cache_error(directory, e) from e
    uid = os.geteuid()
    fix = (f"; the CPU kernel is loaded from there, so only you may write to it: run "
           f"`chmod go-w {real}` or set MS_BN_GRAD_CACHE_DIR to a directory of your own")
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
        raise KernelBuildError(f"BatchNormBackward: the kernel cache directory {real} is not a "
                               f"directory owned by you (uid {uid}; owner uid {st.st_uid}){fix}")
    if st.st_mode & 0o022:
        raise KernelBuildError(f"BatchNormBackward: the kernel cache directory {real} is writable "
                               f"by group or others (mode {stat.S_IMODE(st.st_mode):o}){fix}")
    for parent in real.parents:  # whoever may rename a parent may swap the whole directory
        pst = os.stat(parent)
        if pst.st_uid not in (uid, 0) or (pst.st_mode & 0o022 and not pst.st_mode & stat.S_ISVTX):
            raise KernelBuildError(
                f"BatchNormBackward: the kernel cache directory {real} lies in {parent}, which "
                f"another user may change (owner uid {pst.st_uid}, mode {stat.S_IMODE(pst.st_mode):o}); "
                "set MS_BN_GRAD_CACHE_DIR to a directory of your own")
    return directory


def _open_private(path: Path):
    """A binary file object for `path` if it is a regular file of ours that only we may write, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:  # missing, a symbolic link (ELOOP), unreadable
        return None
    f = os.fdopen(fd, "rb")
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        f.close()
        return None
    return f


def _sha256(f) -> str:
    h = hashlib.sha256()
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
    return h.hexdigest()


def _verified(lib: Path) -> bool:
    """True when `lib` and its digest are private files of ours and the digest matches."""
    f = _open_private(lib)
    if f is None:
        return False
    with f:
        got = _sha256(f)
    d = _open_private(lib.with_name(lib.name + DIGEST_SUFFIX))
    if d is None:
        return False
    with d:
        want = d.read(200).decode("ascii", "replace").strip()
    return hmac.compare_digest(got, want)


class _BuildLock:
    """The build lock of one key: an exclusive flock on <stem>_<key>.lock in the cache directory.

    Opened without following a symbolic link and without truncating (a
    planted link could otherwise truncate the file it points to)."""

    def __init__(self, directory, key):
        path = directory / f"{LIB_STEM}_{key}.lock"
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise KernelBuildError(f"BatchNormBackward: the kernel build lock {path} is a symbolic "
                                       "link; remove it (the cache directory holds only files this "
                                       "package writes)") from e
            raise _cache_error(directory, e) from e
        st = os.fstat(self.fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            os.close(self.fd)
            raise KernelBuildError(f"BatchNormBackward: the kernel build lock {path} is not a regular "
                                   "file of yours; remove it")

    def __enter__(self):
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        os.close(self.fd)  # releases the lock


_OBJ_SUFFIX = ".objs"  # a build's temporary directory of object files
_MANIFEST_SUFFIX = ".json"
_TEMP_SUFFIXES = (".so", DIGEST_SUFFIX, _MANIFEST_SUFFIX, _OBJ_SUFFIX)


def _remove_stale_temps(directory: Path, key: str) -> None:
    """Removes temporary files of builds that were killed: ours (we hold the key's lock) and any
    other key's whose lock nobody holds."""
    prefix = f".{LIB_STEM}_"
    for p in directory.iterdir():
        if not (p.name.startswith(prefix) and p.name.endswith(_TEMP_SUFFIXES)):
            continue
        other = p.name[len(prefix):].split(".", 1)[0]
        if other != key and _build_in_progress(directory, other):
            continue
        try:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
        except OSError:
            pass


def _build_in_progress(directory: Path, key: str) -> bool:
    try:
        fd = os.open(directory / f"{LIB_STEM}_{key}.lock", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False  # a builder creates its lock before its temporary files
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


# Runs the compiler as "$@" in a process group of its own whose leader kills
# the whole group (compiler driver, cc1plus, as, ld) when it gets SIGTERM,
# which _die_with_parent asks the kernel to send when this process dies.
_GROUP_GUARD = 'trap "kill -KILL 0" TERM HUP; "$@" & wait $!'
_PR_SET_PDEATHSIG = 1


def _die_with_parent(libc, parent):
    def preexec():  # in the child, between fork and exec: no Python objects beyond these
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)
    return preexec


def _progress(message: str) -> None:
    print(f"mindspore_bn_grad: {message}", file=sys.stderr, flush=True)


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask), as the C++ side counts them."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _start(cmd, err_path):
    with open(err_path, "wb") as err:  # a file, not a pipe: a chatty compiler never blocks on it
        return subprocess.Popen(["/bin/sh", "-c", _GROUP_GUARD, "sh", *cmd], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
                                preexec_fn=_die_with_parent(ctypes.CDLL(None), os.getpid()))


def _run_all(cmds, jobs: int, logdir: Path, timeout=600, what="the CPU kernel") -> None:
    """Runs the commands, at most `jobs` at once; the first failure kills the others and raises
    with its command and compiler output. All of them are killed on a timeout or an exception."""
    pending = list(enumerate(cmds))
    running = {}  # Popen -> (index, cmd)
    deadline = time.monotonic() + timeout
    try:
        while pending or running:
            while pending and len(running) < jobs:
                i, cmd = pending.pop(0)
                running[_start(cmd, logdir / f"{i}.err")] = (i, cmd)
            done = [p for p in running if p.poll() is not None]
            if not done:
                if time.monotonic() > deadline:
                    raise KernelBuildError(f"BatchNormBackward: building {what} took more than "
                                           f"{timeout} s; stopped")
                time.sleep(0.02)
                continue
            for proc in done:
                i, cmd = running.pop(proc)
                if proc.returncode != 0:
                    err = (logdir / f"{i}.err").read_text(errors="replace")
                    raise KernelBuildError(
                        f"BatchNormBackward: building {what} failed:\n  "
                        + " ".join(shlex.quote(c) for c in cmd) + "\n" + err[-4000:])
    finally:
        for proc in running:  # a failure, timeout or KeyboardInterrupt: take the compilers down with us
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _compile(compiler, cxxflags, directory: Path, key: str, lib: Path, units=None, link=(),
             what="the CPU kernel") -> None:
    """Compiles each translation unit on its own (in parallel), links them (and `link`: libraries) into
    `lib`, writes its digest and manifest; every file appears under its final name only when complete.
    `units`: the kernel library's by default."""
    stem = f".{LIB_STEM}_{key}."
    units = [s for s in sources() if s.suffix == ".cpp"] if units is None else list(units)
    jobs = max(1, min(len(units), usable_cpus()))
    started = time.monotonic()
    _progress(f"building {what} ({len(units)} C++ files, {jobs} at a time, with {compiler}) "
              f"into {directory}; only on first use")
    tmps = []
    for suffix in (".so", DIGEST_SUFFIX, _MANIFEST_SUFFIX):
        fd, t = tempfile.mkstemp(prefix=stem, suffix=suffix, dir=directory)
        os.close(fd)
        tmps.append(t)
    tmp, dtmp, mtmp = tmps
    compile_flags = [f for f in cxxflags if f != "-shared"]
    try:
        with tempfile.TemporaryDirectory(prefix=stem, suffix=_OBJ_SUFFIX, dir=directory) as objdir:
            objdir = Path(objdir)
            objs = [str(objdir / f"{i}_{u.stem}.o") for i, u in enumerate(units)]
            _run_all([[compiler, *compile_flags, "-c", str(u), "-o", o] for u, o in zip(units, objs)],
                     jobs, objdir, what=what)
            _run_all([[compiler, *cxxflags, *objs, *link, "-o", tmp]], 1, objdir, what=what)
        os.chmod(tmp, 0o755)
        with open(tmp, "rb") as f:
            digest = _sha256(f)
        seconds = time.monotonic() - started
        for path, text in ((dtmp, digest + "\n"), (mtmp, _manifest(compiler, cxxflags, digest, seconds))):
            with open(path, "w", encoding="utf-8") as out:
                out.write(text)
            os.chmod(path, 0o644)
        os.replace(tmp, lib)
        os.replace(dtmp, lib.with_name(lib.name + DIGEST_SUFFIX))
        os.replace(mtmp, lib.with_name(lib.name + _MANIFEST_SUFFIX))
    finally:
        for t in tmps:
            if os.path.exists(t):
                os.unlink(t)
    _progress(f"built {what} in {seconds:.1f} s: {lib}")


def _manifest(compiler, cxxflags, digest, seconds) -> str:
    """What built the library (for the record; loading never reads it)."""
    return json.dumps({"sha256": digest, "compiler": compiler, "compiler_version": _compiler_version(compiler),
                       "flags": list(cxxflags), "machine": platform.machine(), "build_seconds": round(seconds, 1),
                       "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=1) + "\n"
