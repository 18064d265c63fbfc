"""Which device and which SoC the operators are checked for.

* ``set_target_soc(name)`` / ``get_target_soc()`` / ``with target_soc(name):``
  a dry-run override of the SoC (None = detect).
* ``active_target()``: the override, else ``MS_BN_GRAD_SOC``, else the SoC
  MindSpore reports on an Ascend device, else ``"cpu"``. Names are the
  canonical target names of op_def/batch_norm_backward_support.yaml or their
  aliases (support_rules.resolve); unknown names raise ValueError.
* ``device_target()``: MindSpore's device target ("CPU", "Ascend", ...), the
  one lookup of it (tests monkeypatch it); ``check_device_target()`` refuses
  any device this package has no kernels for.

Set the target before building a graph: MindSpore caches a compiled graph
per Cell instance and argument types, so a Cell already compiled under one
target is not re-validated when the target changes (PYNATIVE calls are).
"""
import contextlib
import functools
import os
from typing import Optional

from .support_rules import resolve

ENV_VAR = "MS_BN_GRAD_SOC"

_override: Optional[str] = None


def set_target_soc(name) -> Optional[str]:
    """Validate against `name`'s rules from now on (None: detect). Returns the previous override."""
    global _override
    previous = _override
    _override = None if name is None else resolve(name)
    return previous


def get_target_soc() -> Optional[str]:
    """The override, else MS_BN_GRAD_SOC (canonical name), else None (= detect)."""
    if _override is not None:
        return _override
    env = os.environ.get(ENV_VAR, "").strip()
    return _resolve_env(env) if env else None


@functools.lru_cache(maxsize=16)
def _resolve_env(env) -> str:  # an invalid value is not cached: it raises every time
    return resolve(env, source=ENV_VAR)


@contextlib.contextmanager
def target_soc(name):
    """Temporarily set the target: ``with target_soc("ascend910b"): ...``."""
    previous = set_target_soc(name)
    try:
        yield resolve(name) if name is not None else None
    finally:
        set_target_soc(previous)


def device_target() -> str:
    """MindSpore's device target: "CPU", "Ascend", "GPU"."""
    # PYNATIVE infers at every call: MSContext's getter (ms_compat.context_param) is much
    # cheaper than mindspore.get_context (docs/performance.md). The public call is the fallback.
    from .ms_compat import context_param
    value = context_param("device_target")
    if value:
        return value
    import mindspore as ms
    return ms.get_context("device_target")


@functools.lru_cache(maxsize=16)
def _resolve_reported(reported) -> str:
    return resolve(reported, source="Ascend SoC reported by MindSpore")


def detected_target() -> str:
    """The SoC MindSpore reports on an Ascend device, else 'cpu'."""
    if device_target() != "Ascend":
        return "cpu"
    from .ms_compat import ascend_soc_version
    return _resolve_reported(ascend_soc_version())


def active_target() -> str:
    return get_target_soc() or detected_target()


def check_device_target(op="BatchNormBackward"):
    """Our kernels run on CPU (aot) and Ascend; anywhere else refuse before anything runs.

    On GPU, MindSpore's BatchNorm forward also returns the inverse std (cuDNN's saved
    inverse variance) where our cells expect the variance: a clear error, never wrong numbers.
    """
    target = device_target()
    if target not in ("CPU", "Ascend"):
        raise RuntimeError(f"{op}: device_target expected 'CPU' or 'Ascend', got {target!r} "
                           "(mindspore_bn_grad has no kernels for it)")
