"""BatchNorm cells whose backward is BatchNormBackward, and ways to put them into networks.

``BatchNorm1d`` / ``BatchNorm2d`` / ``BatchNorm3d`` are drop-in for
``mindspore.nn``'s; ``convert_batchnorm(net)`` converts an existing network in
place; ``patch_batchnorm()`` / ``unpatch_batchnorm()`` / ``batchnorm_patched()``
are an explicit, reversible opt-in for code that builds ``mindspore.nn``
cells itself. ``SyncGuard`` runs training steps of a SyncBatchNorm network and
turns a lost peer into ``SyncBatchNormPeerLostError``; ranks that build
different SyncBatchNorm layers get ``SyncBatchNormMismatchError``. Names load on first use (importing this package imports
nothing from MindSpore until then).
"""
import importlib

_LAZY = {
    "BatchNorm1d": "._layers",
    "BatchNorm2d": "._layers",
    "BatchNorm3d": "._layers",
    "BatchNormTrainCell": "._cells",
    "BatchNormInferCell": "._cells",
    "SyncBatchNorm": "._sync",
    "SyncGuard": "._sync_check",
    "SyncBatchNormMismatchError": "._sync_check",
    "SyncBatchNormPeerLostError": "._sync_check",
    "convert_batchnorm": "._convert",
    "ConversionWarning": "._convert",
    "patch_batchnorm": "._convert",
    "unpatch_batchnorm": "._convert",
    "batchnorm_patched": "._convert",
    "is_batchnorm_patched": "._convert",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
