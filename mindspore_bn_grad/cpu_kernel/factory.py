"""MindSpore's CPU kernel factory: our kernels as MindSpore's own BatchNormExt / BatchNormGradExt.

The native route's second mechanism (docs/native_route.md), beside the op plugin
(``plugin.py``): a small library (``csrc/factory_kernels.cpp``) adds two
``NativeCpuKernelMod`` classes to MindSpore's CPU kernel factory, and MindSpore then
creates them as it creates its own CPU kernels, with its own C++ autograd. Unlike the op
plugin it sets no ``MS_OP_PLUGIN_PATH``, so MindSpore keeps making strided views dense
before every CPU kernel (the op plugin makes it stop: docs/native_route.md), and it can
be loaded after MindSpore has run CPU operators.

The library uses MindSpore's C++ classes, so it is compiled on this machine against the
INSTALLED MindSpore's own headers (``ms_compat.CPU_KERNEL_FACTORY``) and linked against
its libraries and our kernel library: the class layouts are those of the release that
loads it. It is cached like the kernel library (build.py: private directory,
digest-checked before loading), under a key made of the MindSpore version, the path and
a digest of every header the build includes (found by following the includes, no
compiler needed), the flags, our sources and the kernel library it links.

When it loads (``MS_BN_GRAD_NATIVE_KERNELS``, read at ``import mindspore_bn_grad``):
unset (the default), the import registers our ``BatchNormExt`` / ``BatchNormGradExt``, which
plain MindSpore lacks on CPU (so ``mint``'s BatchNorm works; nothing that ran before changes),
when MindSpore is installed, its device target is CPU and no op plugin is named; our kernels
stand in for MindSpore's legacy ``BatchNorm`` / ``BatchNormGrad`` / ``BatchNormGradGrad`` only
from the first conversion on (that does change what every ``nn.BatchNorm*`` runs). ``factory``:
both at import. ``off``: never. A build needed at import happens once, with a progress line;
``enable_at_import`` never raises, and what it did and why is in ``state()``.
``status()`` is the proof, as the op plugin's: on first call it launches
``BatchNormExt`` once on a tiny tensor and checks, through a launch counter the library
keeps, that our kernel ran and returned the reference's numbers; when not, one warning
says why and everything keeps working on the Cell route.
"""
import ctypes
import hashlib
import os
import re
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .build import (CSRC, FACTORY_FIRST_RELEASE, FACTORY_INCLUDE, FACTORY_SOURCE, KernelBuildError, LIB_STEM,
                    _BuildLock, _compile, _private_dir, _remove_stale_temps, _verified, cache_dir, find_compiler,
                    flags, installed_release)

SWITCH = "MS_BN_GRAD_NATIVE_KERNELS"
VALUE = "factory"  # at import
OFF = "off"        # never: converted networks take the Cell route
WHY_OFF = f"{SWITCH}={OFF}"


@dataclass
class _State:
    registered: bool = False        # our kernels are in MindSpore's factory
    reason: str = ""                # why not, when they are not
    library: Optional[str] = None   # the loaded factory library
    checked: Optional[bool] = None  # the self-test's verdict (None: not run yet)
    legacy: bool = False            # our kernels stand in for MindSpore's CPU BatchNorm / BatchNormGrad
    legacy_reason: str = ""         # why not, when they do not
    legacy_checked: Optional[bool] = None  # the legacy self-test's verdict
    warned: bool = False


_STATE = _State()
_LOCK = threading.Lock()
_IMPORT_DONE = False  # enable_at_import has run: a later registration may find MindSpore's kernels made
_HANDLE = []  # the loaded library: kept for the process's lifetime (MindSpore holds its kernel creators)


def requested() -> bool:
    """Whether this process may use the kernel-factory route: MS_BN_GRAD_NATIVE_KERNELS unset (the
    default: mint's kernels at import, the legacy ones at the first conversion) or ``factory`` (all
    at import)."""
    return os.environ.get(SWITCH, "").strip() != OFF


def ensure_loaded() -> bool:
    """Loads the whole route if it may be used and is not yet (the default's first conversion: the
    legacy kernels join the mint kernels the import registered); never raises. True when our kernels
    are registered."""
    with _LOCK:
        if not _STATE.registered and not _STATE.reason and requested():
            _try_load()
        elif _STATE.registered and not _STATE.legacy and not _STATE.legacy_reason:
            _register_legacy()
        return _STATE.registered


# ------------------------------------------------------------------------------------------ build

_INCLUDE = re.compile(rb'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def header_closure(source: Path, include_dirs) -> list:
    """Every header `source` includes, directly or not, found in `include_dirs` (or, for a quoted
    include, beside the including file); system headers (not found there) are left out. Conditional
    includes count too (the closure is a superset of what the compiler reads)."""
    seen, todo = {}, [Path(source)]
    while todo:
        f = todo.pop()
        for kind, name in _INCLUDE.findall(f.read_bytes()):
            name = name.decode("utf-8", "replace")
            dirs = ([f.parent] if kind == b'"' else []) + list(include_dirs)
            found = next((d / name for d in dirs if (d / name).is_file()), None)
            if found is not None:
                found = found.resolve()
                if found not in seen:
                    seen[found] = True
                    todo.append(found)
    return sorted(seen)


def release_lacks_route(version) -> str:
    return (f"MindSpore {version} does not run CPU kernels of its kernel factory in PYNATIVE mode "
            "(the kernel-factory route needs MindSpore 2.7.1 or later)")


def _build_plan():
    """(include dirs, MindSpore libraries, release, cpu_kernel.h) from ms_compat, checked to exist."""
    from .. import ms_compat
    facts = ms_compat.CPU_KERNEL_FACTORY
    if facts is None:
        raise KernelBuildError(f"mindspore_bn_grad: {release_lacks_route(ms_compat.VERSION)}")
    root = Path(ms_compat.package_dir())
    incs = [root / d for d in facts["include_dirs"]]
    header = next((d / facts["header"] for d in incs if (d / facts["header"]).is_file()), None)
    if header is None:
        raise KernelBuildError(f"mindspore_bn_grad: the installed MindSpore ({root}) ships no "
                               f"{facts['header']} to build the kernel-factory library against")
    libs = [root / lib for lib in facts["libraries"]]
    missing = [str(lib) for lib in libs if not lib.is_file()]
    if missing:
        raise KernelBuildError(f"mindspore_bn_grad: the kernel-factory library links {missing}, not found")
    return [FACTORY_INCLUDE] + incs, libs, ms_compat.VERSION, header.resolve()


def _cxxflags(incs, header):
    from .. import ms_compat
    return (flags() + [f"-I{d}" for d in incs] + [f"-D{m}" for m in ms_compat.CPU_KERNEL_FACTORY["defines"]]
            + [f'-DMS_BN_GRAD_MS_CPU_KERNEL_HEADER="{header}"'])


def cache_key(incs, libs, version: str, header, kernel) -> str:
    """The factory library's cache key: MindSpore's version, the flags (with the include directories),
    the libraries it links (ours included, whose name holds its own key), our source and every header
    the build includes (path and contents). Needs no compiler."""
    h = hashlib.sha256(f"factory\0{version}\0{' '.join(_cxxflags(incs, header))}\0{kernel}\0".encode())
    for lib in libs:
        h.update(str(lib).encode() + b"\0")
    closure = sorted(set(header_closure(FACTORY_SOURCE, [CSRC] + list(incs)) + [Path(header)]
                         + header_closure(header, list(incs))))
    for f in [FACTORY_SOURCE] + closure:
        h.update(str(f).encode() + b"\0" + f.read_bytes() + b"\0")
    return "factory_" + h.hexdigest()[:20]


def library_path() -> Path:
    """Path of the kernel-factory library for the installed MindSpore, digest-checked (built if needed)."""
    from .build import library_path as kernel_library
    incs, libs, version, header = _build_plan()
    kernel = kernel_library()
    cxxflags = _cxxflags(incs, header)
    key = cache_key(incs, libs, version, header, kernel)
    directory = _private_dir(cache_dir())
    lib = directory / f"{LIB_STEM}_{key}.so"
    if _verified(lib):
        return lib
    compiler = find_compiler()
    link = ["-Wl,--no-undefined", "-Wl,--no-as-needed", str(kernel), *map(str, libs),
            f"-Wl,-rpath,{libs[0].parent}" if libs else ""]
    with _BuildLock(directory, key):
        if not _verified(lib):
            _remove_stale_temps(directory, key)
            _compile(compiler, cxxflags, directory, key, lib, units=[FACTORY_SOURCE], link=[x for x in link if x],
                     what=f"the kernel-factory library for MindSpore {version}")
    return lib


# ------------------------------------------------------------------------------------------ enabling

def enable_at_import() -> None:
    """At ``import mindspore_bn_grad``: ``factory`` builds (once), loads and registers all our kernels;
    unset registers the mint kernels where that is additive (``_mint_at_import``); ``off`` nothing.
    Never raises."""
    value = os.environ.get(SWITCH, "").strip()
    if value == OFF:
        _STATE.reason = WHY_OFF
    elif value and value != VALUE:
        _STATE.reason = f"{SWITCH} expected {VALUE!r}, {OFF!r} or unset, got {value!r}"
    elif value == VALUE:
        _try_load()
    elif _mint_at_import():
        _try_load(legacy=False)
    global _IMPORT_DONE  # pylint: disable=global-statement
    _IMPORT_DONE = True


def _mint_at_import() -> bool:
    """The default registers BatchNormExt / BatchNormGradExt at import when MindSpore is installed and
    has the route, its device target is CPU (on Ascend mint has MindSpore's aclnn kernels) and no op
    plugin is named or asked for (MindSpore prefers a plugin's kernels: ours with MS_BN_GRAD_OP_PLUGIN=1,
    which on a release without the interface only warns, or the user's, which the conversion then
    chains). Reading the device target needs ``import mindspore``, which a program using this package
    does anyway; a release without the route (read from its metadata) is not imported for it."""
    import importlib.util
    from . import plugin
    if (os.environ.get("MS_OP_PLUGIN_PATH") or plugin.requested() or _running_our_command_line()
            or importlib.util.find_spec("mindspore") is None):
        return False
    release = installed_release()
    if release is None or release < FACTORY_FIRST_RELEASE:  # no route: MindSpore is not imported for it
        return False
    try:
        from .. import ms_compat
        if ms_compat.CPU_KERNEL_FACTORY is None:
            return False
        import mindspore as ms
        return ms.get_context("device_target") == "CPU"
    except Exception:  # pylint: disable=broad-except  # import must never fail on this
        return False


def _running_our_command_line() -> bool:
    """``python -m mindspore_bn_grad ...``: each command loads what it needs (``plugin-path`` and
    ``bench --ascend`` need neither MindSpore nor this library)."""
    import sys
    argv = list(getattr(sys, "orig_argv", []))
    return any(a == "-m" and i + 1 < len(argv) and argv[i + 1].split(".")[0] == "mindspore_bn_grad"
               for i, a in enumerate(argv))


def _try_load(legacy: bool = True) -> None:
    try:
        _load(legacy)
    except Exception as e:  # pylint: disable=broad-except  # import must never fail on this
        lines = str(e).strip().splitlines()
        first = lines[0] if lines else type(e).__name__
        # a failed build: its first line ends with "failed:"; the compiler's first error says why
        error = next((l.strip() for l in lines[1:] if "error" in l), "")
        _STATE.reason = f"the kernel-factory library could not be prepared ({first}{' ' + error if error else ''})"


_REGISTER_RESULTS = {
    1: "MindSpore already has a CPU kernel named BatchNormExt or BatchNormGradExt",
    2: "MindSpore's kernel factory refused the registration",
}
_LEGACY_RESULTS = {
    1: "MindSpore has no CPU kernel named BatchNorm, BatchNormGrad or BatchNormGradGrad to stand in for",
    2: "MindSpore's kernel factory refused the registration",
}


def _load(legacy: bool = True) -> None:
    import importlib.util
    if importlib.util.find_spec("mindspore") is None:
        _STATE.reason = "MindSpore is not installed"
        return
    from .. import ms_compat
    if ms_compat.CPU_KERNEL_FACTORY is None:
        _STATE.reason = release_lacks_route(ms_compat.VERSION)
        return
    from . import native
    native.lib()  # first: the factory library needs this very instance (thread pool, thread count)
    path = library_path()
    handle = ctypes.CDLL(str(path))
    _HANDLE.append(handle)
    _STATE.library = str(path)
    rc = handle.MsBnGradFactoryRegister()
    if rc != 0:
        _STATE.reason = _REGISTER_RESULTS.get(rc, f"registration returned {rc}")
        return
    _STATE.registered = True
    if legacy:
        _register_legacy()


def _register_legacy() -> None:
    """Our kernels in place of MindSpore's CPU BatchNorm / BatchNormGrad / BatchNormGradGrad. After the
    import MindSpore may already hold kernels of its own for them (an unconverted network ran), which
    PYNATIVE would keep using: it is made to create them anew."""
    rc = _HANDLE[0].MsBnGradFactoryRegisterLegacy()
    if rc != 0:
        _STATE.legacy_reason = _LEGACY_RESULTS.get(rc, f"registration returned {rc}")
        return
    _STATE.legacy = True
    if _IMPORT_DONE:
        from .. import ms_compat
        ms_compat.pynative_forget_kernels()


def _launch_count() -> int:
    fn = _HANDLE[0].MsBnGradFactoryLaunches
    fn.restype = ctypes.c_int64
    return int(fn())


def status() -> bool:
    """True when MindSpore runs our kernels from its CPU kernel factory for BatchNormExt / BatchNormGradExt.

    Runs the self-test once (a MindSpore CPU launch) when asked for; on False, warns once why (not
    when the route was simply not asked for)."""
    from .plugin import self_test
    ensure_loaded()
    with _LOCK:
        if _STATE.checked is None:
            if not requested():
                why = _STATE.reason or WHY_OFF
            elif not _STATE.registered:
                why = _STATE.reason or "the kernels are not registered"
            else:
                why = self_test(_launch_count, "the kernel factory")
                if why.endswith("not ours") and os.environ.get("MS_OP_PLUGIN_PATH"):
                    why = ("MindSpore launches BatchNormExt through the op plugin MS_OP_PLUGIN_PATH names, which "
                           "it prefers to its kernel factory")
            _STATE.checked = not why
            if why:
                _STATE.reason = why
        if not _STATE.checked and not _STATE.warned and _worth_a_warning():
            _STATE.warned = True
            warnings.warn(f"mindspore_bn_grad: MindSpore's CPU kernel factory route is not active "
                          f"({_STATE.reason}); converted BatchNorm layers use the Cell route (a Python bprop) "
                          f"and mint.nn.BatchNorm* has no CPU kernel. {SWITCH}={OFF} chooses that without "
                          "this warning.", RuntimeWarning, stacklevel=3)
        return _STATE.checked


def _worth_a_warning() -> bool:
    """A route that is not active says why once, unless it was simply not asked for: off, or the default
    on a MindSpore release without it (2.7.0, docs/mindspore_versions.md), where the Cell route is the
    route."""
    if not requested():
        return False
    from .. import ms_compat
    return os.environ.get(SWITCH, "").strip() == VALUE or ms_compat.CPU_KERNEL_FACTORY is not None


def legacy_status() -> bool:
    """True when MindSpore's CPU BatchNorm / BatchNormGrad (nn.BatchNorm*'s primitives) run our kernels:
    the route is loaded, and one ops.BatchNorm launch on a tiny tensor ran ours (the
    library's launch counter) and gave the float64 reference's numbers. Runs that once; never raises."""
    if not ensure_loaded():
        return False
    with _LOCK:
        if _STATE.legacy_checked is None:
            why = _STATE.legacy_reason if not _STATE.legacy else _legacy_self_test()
            _STATE.legacy_checked = not why
            if why:
                _STATE.legacy_reason = why
            if why and not _STATE.warned and _worth_a_warning():
                _STATE.warned = True
                warnings.warn(f"mindspore_bn_grad: our kernels do not stand in for MindSpore's CPU BatchNorm "
                              f"({why}); converted nn.BatchNorm* layers take the route through BatchNormExt, "
                              "whose second-order gradients MindSpore gets wrong (docs/native_route.md).",
                              RuntimeWarning, stacklevel=3)
        return _STATE.legacy_checked


def _legacy_self_test() -> str:
    import numpy as np
    import mindspore as ms
    from mindspore import ops
    from .plugin import self_test

    def launch(x):
        mean = ms.Parameter(ms.Tensor(np.zeros(2, np.float32)), name="mindspore_bn_grad_self_test_mean")
        var = ms.Parameter(ms.Tensor(np.ones(2, np.float32)), name="mindspore_bn_grad_self_test_var")
        one = ms.Tensor(np.ones(2, np.float32))
        return ops.BatchNorm(is_training=True)(x, one, one * 0, mean, var)[0]
    return self_test(legacy_launches, "the kernel factory", op="BatchNorm", launch=launch)


def state() -> _State:
    return _STATE


# ------------------------------------------------------------------------------------------ legacy kernels

def legacy_launches(mindspore: bool = False) -> int:
    """Launches of our BatchNorm / BatchNormGrad kernels in this process (MindSpore's own under
    ``use_mindspore_kernels`` with ``mindspore=True``); 0 when the library is not loaded."""
    if not _HANDLE:
        return 0
    fn = _HANDLE[0].MsBnGradFactoryLegacyLaunches
    fn.restype = ctypes.c_int64
    return int(fn(1 if mindspore else 0))


class use_mindspore_kernels:  # pylint: disable=invalid-name  # used as a context manager, like a function
    """``with use_mindspore_kernels():`` MindSpore's legacy BatchNorm / BatchNormGrad run MindSpore's own
    CPU kernels again (each of ours keeps MindSpore's, prepared beside it): benchmarks and tests compare
    the two in one process. PYNATIVE's queue is drained on entry and exit, so every launch runs the
    kernel chosen when it was queued. Where MindSpore's kernel cannot run (channel-last, rank above 4)
    a launch inside the block fails rather than run ours."""

    def __init__(self, on: bool = True):
        self.on = bool(on)

    def __enter__(self):
        set_mindspore_kernels(self.on)
        return self

    def __exit__(self, *exc):
        set_mindspore_kernels(False)
        return False


def set_mindspore_kernels(on: bool) -> None:
    """``use_mindspore_kernels`` without the block (the benchmark's interleaved rounds switch per contestant)."""
    if not (_HANDLE and _STATE.legacy):
        raise RuntimeError("mindspore_bn_grad: our kernels do not stand in for MindSpore's BatchNorm here "
                           f"({_STATE.legacy_reason or _STATE.reason or 'the kernel-factory route is not loaded'})")
    from .. import ms_compat
    ms_compat.pynative_sync()
    _HANDLE[0].MsBnGradFactoryUseMindSporeKernels(1 if on else 0)
