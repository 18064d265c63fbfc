"""mindspore-bn-grad: aclnnBatchNormBackward semantics for MindSpore.

Importing this package has one side effect, documented: it enables MindSpore's CPU
op plugin (``cpu_kernel/plugin.py``), which only works before MindSpore creates its
first CPU kernel: while ``MS_OP_PLUGIN_PATH`` is unset it points that variable at
our kernel library (building the library once if it is not cached, with a progress
line). ``MS_BN_GRAD_OP_PLUGIN=0`` turns this off. Nothing else is read, compiled or
configured until a name below is first used (PEP 562 lazy attributes).
"""
import importlib

from .cpu_kernel import plugin as _plugin

_plugin.enable_at_import()

__version__ = "0.1.0"

# public name -> module that defines it
_LAZY = {
    "batch_norm_backward": ".backward",
    "BatchNormBackward": ".backward",
    "BatchNormDoubleBackward": ".double_backward",
    "batch_norm_forward": ".forward",
    "BatchNormForward": ".forward",
    "set_target_soc": ".target",
    "get_target_soc": ".target",
    "target_soc": ".target",
    "set_num_threads": ".cpu_kernel.native",
    "get_num_threads": ".cpu_kernel.native",
    "convert_batchnorm": ".nn._convert",
    "patch_batchnorm": ".nn._convert",
    "unpatch_batchnorm": ".nn._convert",
    "batchnorm_patched": ".nn._convert",
    "op_plugin_active": ".cpu_kernel.plugin",
}

__all__ = sorted(_LAZY) + ["nn"]


def __getattr__(name):
    if name == "nn":
        return importlib.import_module(".nn", __name__)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
