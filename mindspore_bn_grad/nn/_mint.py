"""``mint.nn.BatchNorm1d/2d/3d`` in converted networks.

These cells call MindSpore's ``BatchNormExt`` themselves (``mint.functional.batch_norm``),
whose C++ bprop is ``BatchNormGradExt``: on CPU, while MindSpore's op plugin is active,
both are our kernels already, so converting changes nothing in them. Where the plugin is
not active there is no CPU kernel for them at all (plain MindSpore 2.10 raises "The kernel
BatchNormExt unregistered"), and on Ascend they run MindSpore's aclnnBatchNorm /
aclnnBatchNormBackward: ``convert_mint_cell`` says so with a warning rather than skip them
silently.
"""
import warnings

from mindspore import mint

from ..target import device_target
from ._native import choose_route

_MINT_BATCHNORMS = (mint.nn.BatchNorm1d, mint.nn.BatchNorm2d, mint.nn.BatchNorm3d)
_WARNED = set()


def is_mint_batchnorm(cell):
    return isinstance(cell, _MINT_BATCHNORMS) and not isinstance(cell, mint.nn.SyncBatchNorm)


def convert_mint_cell(cell, route="auto"):
    """Checks that ``cell`` (a mint BatchNorm) runs our kernels; warns once per reason when not."""
    name = type(cell).__name__
    if route == "cell":
        reason = (f"mint.nn.{name} calls BatchNormExt itself and has no Cell route; it takes the "
                  "native route or none")
    elif device_target() != "CPU":
        reason = (f"mint.nn.{name} on {device_target()} keeps MindSpore's aclnnBatchNorm kernels "
                  "(the same semantics as ours); use mindspore.nn.BatchNorm* cells to run our Ascend C kernel")
    else:
        reason = ""
        try:
            choose_route("native", "NCHW", f"convert_batchnorm(mint.nn.{name})")
        except RuntimeError as e:
            reason = str(e)
    if reason and reason not in _WARNED:
        _WARNED.add(reason)
        warnings.warn(f"convert_batchnorm: {reason}", RuntimeWarning, stacklevel=3)
    return cell
