"""mindspore-bn-grad: aclnnBatchNormBackward semantics for MindSpore.

Importing this package has one documented side effect: enabling the native route, that is
making MindSpore's own BatchNorm operators run our CPU kernels. By default
(``MS_BN_GRAD_NATIVE_KERNELS`` unset) it adds our BatchNormExt / BatchNormGradExt, which plain
MindSpore lacks on CPU, to MindSpore's CPU kernel factory (``cpu_kernel/factory.py``): when
MindSpore is installed, its device target is CPU and no op plugin is named (and not for the
package's own command line, ``python -m mindspore_bn_grad``, whose commands load what they
need). That imports
MindSpore and builds the libraries once if they are not cached (with a progress line); it
changes nothing that ran before (``mint``'s BatchNorm had no CPU kernel). ``off`` leaves the
import without side effects (nothing read, compiled or configured until a name below is
first used: PEP 562 lazy attributes); ``factory`` also puts our kernels in place of
MindSpore's legacy BatchNorm kernels at import, which otherwise waits for the first
conversion. With ``MS_BN_GRAD_OP_PLUGIN=1`` it enables MindSpore's CPU op plugin instead
(``cpu_kernel/plugin.py``), which only works before MindSpore creates its first CPU kernel:
while ``MS_OP_PLUGIN_PATH`` is unset it points that variable at our kernel library. The op
plugin is off by default because MindSpore 2.10 mishandles strided views on CPU while any op
plugin is loaded (docs/native_route.md).
"""
import importlib

from .cpu_kernel import factory as _factory
from .cpu_kernel import plugin as _plugin

_plugin.enable_at_import()
_factory.enable_at_import()

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
    "native_kernels_active": ".cpu_kernel",
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
