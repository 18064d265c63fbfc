"""MindSpore's CPU op plugin: our kernels as MindSpore's own BatchNormExt / BatchNormGradExt.

MindSpore (2.8.0 and later, in the form used here) reads ``MS_OP_PLUGIN_PATH`` once per process,
when it creates its first CPU kernel, and from then on launches the
primitives the library named there registers through that library, with its
own C++ autograd (no Python bprop). Our kernel library is such a library
(``csrc/op_plugin.cpp``): ``mint.nn.BatchNorm*``, ``mint.nn.functional.batch_norm``
and the native route of converted networks (``nn/_native.py``) run our
forward and backward kernels.

Opt-in (``MS_BN_GRAD_OP_PLUGIN=1``), because MindSpore 2.10 changes behaviour for
every operator once any op plugin is loaded: on CPU it stops making strided views
contiguous before a kernel runs (``ValueConverter::ContiguousTensorValue`` skips the
copy when ``GetOpPluginHandle()`` is non-null), and its own CPU kernels read a
transposed tensor as if it were dense, so ``x.transpose(...) * y`` is silently wrong
in PYNATIVE (tests/native/test_op_plugin.py pins it). Enabling it is safe for programs
whose PYNATIVE code passes no strided view to MindSpore's operators.

``enable_at_import()`` is the package's one import-time side effect, when opted in:
while ``MS_OP_PLUGIN_PATH`` is unset and no MindSpore CPU kernel can have been
created, it makes sure the kernel library exists (building it once, with a
progress line) and points the variable at it. It never raises; what it did
and why is in ``state()``.

``status()`` is the proof: on first call (lazily, never at import) it
launches ``BatchNormExt`` once on a tiny tensor and checks, through a launch
counter the library keeps, that our kernel ran. When it did not (MindSpore
had already created CPU kernels, the variable names another library, the
release has no plugin interface we use (2.7.x: then the variable is left
alone), ``MS_BN_GRAD_OP_PLUGIN=0``), everything keeps
working on the Cell route and one warning says why and what to do.

A user's own plugin in ``MS_OP_PLUGIN_PATH`` is chained, not replaced: a small
library is built that needs theirs and ours (``csrc/op_plugin_chain``), lists
both registries, and lets the dynamic linker find each primitive in ours
first, then theirs.
"""
import ctypes
import os
import sys
import threading
import warnings
from dataclasses import dataclass
from typing import Optional

ENV = "MS_OP_PLUGIN_PATH"
SWITCH = "MS_BN_GRAD_OP_PLUGIN"  # "1": enable the op plugin at import; "0" or unset: do not
WHY_OFF = (f"it is off by default: MindSpore 2.10 computes wrong results on strided views in PYNATIVE while "
           f"any op plugin is loaded (docs/native_route.md); {SWITCH}=1 enables it")


def primitives():
    """MindSpore's primitives the library serves (csrc/op_plugin.cpp; the prototypes' mindspore_primitive)."""
    from ..spec import BACKWARD_YAML, FORWARD_YAML, load_opdef
    return tuple(load_opdef(f).mindspore_primitive.name for f in (FORWARD_YAML, BACKWARD_YAML))


@dataclass
class _State:
    enabled_at_import: bool = False  # we set MS_OP_PLUGIN_PATH
    reason: str = ""                 # why not, when we did not
    library: Optional[str] = None    # the library MS_OP_PLUGIN_PATH names (ours or the chain)
    chained: Optional[str] = None    # the user's own plugin we chained
    checked: Optional[bool] = None   # the self-test's verdict (None: not run yet)
    release_lacks_interface: bool = False  # the installed MindSpore has no op plugin interface we use
    warned: bool = False


_STATE = _State()
_LOCK = threading.Lock()


def _mindspore_may_have_kernels() -> bool:
    """False when MindSpore certainly has not created a CPU kernel yet in this process."""
    return "mindspore" in sys.modules and "mindspore._c_expression" in sys.modules


def plugin_path() -> str:
    """Path of the op plugin library for ``export MS_OP_PLUGIN_PATH=...`` (built if needed)."""
    from .build import library_path
    return str(library_path())


def enable_at_import() -> None:
    """Points MS_OP_PLUGIN_PATH at our library when that can still take effect. Never raises."""
    try:
        _enable()
    except Exception as e:  # pylint: disable=broad-except  # import must never fail on this
        _STATE.reason = f"the kernel library could not be prepared ({e})"


def requested() -> bool:
    """Whether this process asked for the op plugin: MS_BN_GRAD_OP_PLUGIN=1, or MS_OP_PLUGIN_PATH
    naming our library (the export that plugin-path prints)."""
    switch = os.environ.get(SWITCH, "").strip()
    return switch == "1" or (switch != "0" and _is_ours(os.environ.get(ENV, "")))


def _enable() -> None:
    switch = os.environ.get(SWITCH, "").strip()
    if switch == "0":
        _STATE.reason = f"{SWITCH}=0 is set"
        return
    current = os.environ.get(ENV)
    if current:
        # Set before Python started (for example by the export plugin-path prints): that library
        # is what MindSpore will load; status() checks whether ours is in it.
        _STATE.library = current
        if _is_ours(current):
            return
        if switch == "1":
            if not release_has_interface():
                return
            _chain(current)
        else:
            _STATE.reason = f"{ENV} names another op plugin ({current}); {SWITCH}=1 chains ours with it"
        return
    if switch != "1":
        _STATE.reason = WHY_OFF
        return
    import importlib.util
    if importlib.util.find_spec("mindspore") is None:
        _STATE.reason = "MindSpore is not installed"
        return
    if not release_has_interface():
        return
    from .build import library_path
    path = str(library_path())
    os.environ[ENV] = path
    _STATE.library = path
    _STATE.enabled_at_import = True


def release_has_interface() -> bool:
    """Whether the installed MindSpore has the op plugin interface the library is built against
    (2.8.0 and later; ms_compat); if not, says why in the state and MS_OP_PLUGIN_PATH stays as it is."""
    from .build import plugin_interface_header
    if plugin_interface_header() is not None:
        return True
    import importlib.metadata
    try:
        version = importlib.metadata.version("mindspore")
    except importlib.metadata.PackageNotFoundError:
        version = "(version unknown)"
    _STATE.release_lacks_interface = True
    _STATE.reason = (f"MindSpore {version} has no CPU op plugin interface this package can use "
                     "(MindSpore 2.8.0 and later have it)")
    return False


def _is_ours(path: str) -> bool:
    if not path:
        return False
    try:
        from .build import cache_dir, LIB_STEM
        real = os.path.realpath(path)
        return (os.path.dirname(real) == os.path.realpath(cache_dir())
                and os.path.basename(real).startswith(LIB_STEM))
    except Exception:  # pylint: disable=broad-except
        return False


def _chain(user_path: str) -> None:
    """Replaces a user's MS_OP_PLUGIN_PATH by a library that serves theirs and ours."""
    from .chain import chain_library
    if _mindspore_may_have_kernels():
        _STATE.reason = (f"{ENV} names another op plugin ({user_path}) and MindSpore may already "
                         "have loaded it")
        return
    path = chain_library(user_path)
    os.environ[ENV] = path
    _STATE.library = path
    _STATE.chained = user_path
    _STATE.enabled_at_import = True


def _launch_count(handle) -> int:
    fn = handle.MsBnGradPluginLaunches
    fn.restype = ctypes.c_int64
    return int(fn())


def _self_test() -> str:
    """'' when a BatchNormExt launch ran our kernel, else why not."""
    if not os.environ.get(ENV):
        return _STATE.reason or f"{ENV} is not set"
    from . import native
    handle = native.lib()  # the same file MindSpore loaded: one library instance, one counter
    if not hasattr(handle, "MsBnGradPluginLaunches"):
        _STATE.release_lacks_interface = True
        return "this MindSpore release has no CPU op plugin interface (the library was built without it)"
    if _STATE.library is not None and not _is_ours(_STATE.library) and _STATE.chained is None:
        return f"{ENV} names another library ({_STATE.library})"
    return self_test(lambda: _launch_count(handle), "the op plugin")


def self_test(launch_count, mechanism: str, op: str = "BatchNormExt", launch=None) -> str:
    """'' when one `op` launch on a tiny CPU tensor ran our kernel (``launch_count()``, the mechanism's
    counter, went up) and gave the float64 reference's numbers, else why not. ``launch(x)`` runs `op`
    in training on x (2, 2, 2) float32 without weight or bias and returns its output; by default
    BatchNormExt through mint.nn.functional.batch_norm."""
    import numpy as np
    import mindspore as ms
    from mindspore import mint
    target = ms.get_context("device_target")
    if target != "CPU":
        return f"the device target is {target} ({mechanism} serves MindSpore's CPU kernels)"
    if launch is None:
        def launch(x):
            return mint.nn.functional.batch_norm(x, None, None, training=True)
    before = launch_count()
    xs = np.arange(8, dtype=np.float64).reshape(2, 2, 2)
    try:
        got = launch(ms.Tensor(xs.astype(np.float32))).asnumpy()
    except Exception as e:  # pylint: disable=broad-except
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return f"MindSpore could not launch {op} through {mechanism} ({first})"
    if launch_count() <= before:
        return f"MindSpore ran its own {op}, not ours"
    mean = xs.mean(axis=(0, 2), keepdims=True)
    want = (xs - mean) / np.sqrt(xs.var(axis=(0, 2), keepdims=True) + 1e-5)
    if not np.allclose(got, want, rtol=1e-5, atol=1e-5):
        return f"{mechanism}'s {op} returned wrong values"
    return ""


def status() -> bool:
    """True when MindSpore launches our kernels for BatchNormExt / BatchNormGradExt on CPU.

    Runs the self-test once (a MindSpore CPU launch) when the plugin was asked for; on
    False, warns once why and what to do (not when it was simply left off)."""
    with _LOCK:
        if _STATE.checked is None:
            why = _self_test() if requested() else (_STATE.reason or WHY_OFF)
            _STATE.checked = not why
            if why:
                _STATE.reason = why
        if not _STATE.checked and not _STATE.warned and requested():
            _STATE.warned = True
            warnings.warn(fallback_message(), RuntimeWarning, stacklevel=3)
        return _STATE.checked


def op_plugin_active() -> bool:
    """Whether MindSpore runs our CPU kernels for its BatchNormExt / BatchNormGradExt
    (``mint.nn.BatchNorm*`` and the native route of converted networks).

    The first call launches BatchNormExt once on a tiny CPU tensor to find out; when
    the answer is False it warns once why and what to do."""
    return status()


def fallback_message() -> str:
    if _STATE.release_lacks_interface:
        return (f"mindspore_bn_grad: MindSpore's CPU op plugin cannot be used ({_STATE.reason}); converted "
                "BatchNorm layers use the Cell route (a Python bprop) and mint.nn.BatchNorm* has no CPU "
                "kernel. For the native route, install MindSpore 2.8.0 or later (docs/mindspore_versions.md).")
    return (f"mindspore_bn_grad: MindSpore's CPU op plugin is not active ({_STATE.reason}); "
            "converted BatchNorm layers use the Cell route (a Python bprop) and mint.nn.BatchNorm* "
            f"has no CPU kernel. To enable it, set {SWITCH}=1 and import mindspore_bn_grad before any "
            f"MindSpore operator runs, or start Python with `export {ENV}=$(python -m mindspore_bn_grad "
            "plugin-path)`.")


def state() -> _State:
    return _STATE
