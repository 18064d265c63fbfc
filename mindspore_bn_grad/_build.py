"""Builds the CPU kernel library from the C++ source shipped in csrc/.

Built on first use and cached on disk, keyed by a hash of the sources, the
compiler, the flags and the installed MindSpore's AotExtra header:
  $MS_BN_GRAD_CACHE_DIR, else $XDG_CACHE_HOME/mindspore_bn_grad, else
  ~/.cache/mindspore_bn_grad.
Several processes may build at once: one holds a file lock while it compiles
into a temporary file that is renamed into place atomically; the others wait
for the lock and then find the finished library.

Environment:
  MS_BN_GRAD_CXX       C++ compiler (else $CXX, else g++, c++, clang++ on PATH)
  MS_BN_GRAD_CXXFLAGS  extra flags (e.g. sanitizers), part of the cache key
  MS_BN_GRAD_CACHE_DIR cache directory
"""
import fcntl
import functools
import hashlib
import importlib.util
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

CSRC = Path(__file__).resolve().parent / "csrc"
LIB_STEM = "libms_bn_grad"

# -D_GLIBCXX_USE_CXX11_ABI=0: MindSpore's ABI (std::string crosses AotExtra).
BASE_FLAGS = ("-std=c++17", "-O3", "-fPIC", "-shared", "-pthread", "-march=native",
              "-fno-math-errno", "-D_GLIBCXX_USE_CXX11_ABI=0", "-Wall", "-Wextra")


# csrc/ms_aot_compat.h includes the installed MindSpore's own AotExtra header
# (<site-packages>/mindspore/include/...), with its internal includes resolved
# in csrc/ms_internal/ (see there).
MS_AOT_HEADER = "mindspore/ccsrc/utils/custom_aot_extra.h"


class KernelBuildError(RuntimeError):
    """The CPU kernel could not be built (no compiler, compile error, cache not writable)."""


def sources():
    return sorted(p for p in CSRC.rglob("*") if p.suffix in (".cpp", ".h"))


def find_compiler() -> str:
    for cand in (os.environ.get("MS_BN_GRAD_CXX"), os.environ.get("CXX"), "g++", "c++", "clang++"):
        if cand:
            path = shutil.which(cand)
            if path:
                return path
    raise KernelBuildError(
        "BatchNormBackward: no C++ compiler found to build the CPU kernel; install one "
        "(Debian/Ubuntu: apt-get install g++) or point MS_BN_GRAD_CXX at it")


def flags():
    return list(BASE_FLAGS) + shlex.split(os.environ.get("MS_BN_GRAD_CXXFLAGS", ""))


def mindspore_headers(include_root=None):
    """(compiler flags, cache-key part) for the installed MindSpore's AotExtra header,
    found from the installed package without importing it."""
    if include_root is None:
        spec = importlib.util.find_spec("mindspore")
        roots = [Path(p) / "include" for p in (spec.submodule_search_locations or [])] if spec else []
        include_root = next((r for r in roots if (r / MS_AOT_HEADER).is_file()), None)
        if include_root is None:
            raise KernelBuildError(f"BatchNormBackward: the CPU kernel is built against the installed "
                                   f"MindSpore's {MS_AOT_HEADER}, not found in {[str(r) for r in roots]}")
    header = (Path(include_root) / MS_AOT_HEADER).resolve()
    return ([f"-I{CSRC / 'ms_internal'}", f'-DMS_BN_GRAD_MS_AOT_HEADER="{header}"'],
            str(header).encode() + b"\0" + header.read_bytes())


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


@functools.lru_cache(maxsize=None)
def _compiler_version(compiler: str) -> str:
    try:
        return subprocess.run([compiler, "--version"], capture_output=True, text=True,
                              timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def build_key(compiler: str, cxxflags, ms_key: bytes = b"") -> str:
    h = hashlib.sha256(ms_key + b"\0")
    for part in (compiler, _compiler_version(compiler), " ".join(cxxflags), platform.machine(),
                 _cpu_signature()):
        h.update(part.encode() + b"\0")
    for src in sources():
        h.update(str(src.relative_to(CSRC)).encode() + b"\0" + src.read_bytes() + b"\0")
    return h.hexdigest()[:20]


def library_path() -> Path:
    """Path of the built library (building it if needed)."""
    compiler = find_compiler()
    ms_inc, ms_key = mindspore_headers()
    cxxflags = flags() + ms_inc
    key = build_key(compiler, cxxflags, ms_key)
    directory = cache_dir()
    lib = directory / f"{LIB_STEM}_{key}.so"
    if lib.exists():
        return lib
    try:
        directory.mkdir(parents=True, exist_ok=True)
        lock = open(directory / f"{LIB_STEM}_{key}.lock", "w")
    except OSError as e:
        raise KernelBuildError(
            f"BatchNormBackward: cannot write the kernel cache directory {directory} ({e}); "
            "set MS_BN_GRAD_CACHE_DIR to a writable directory") from e
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if lib.exists():  # another process built it while we waited
            return lib
        fd, tmp = tempfile.mkstemp(prefix=f".{LIB_STEM}_{key}.", suffix=".so", dir=directory)
        os.close(fd)
        cmd = [compiler, *cxxflags, *[str(s) for s in sources() if s.suffix == ".cpp"], "-o", tmp]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                raise KernelBuildError(
                    "BatchNormBackward: building the CPU kernel failed:\n  "
                    + " ".join(shlex.quote(c) for c in cmd) + "\n" + proc.stderr[-4000:])
            os.replace(tmp, lib)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return lib
