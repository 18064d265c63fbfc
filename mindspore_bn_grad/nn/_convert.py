"""Putting BatchNormBackward into existing networks: convert_batchnorm and the opt-in patch.

Nothing here runs at import. ``convert_batchnorm(net)`` changes one network;
``patch_batchnorm()`` changes MindSpore's ``nn.BatchNorm1d`` / ``nn.BatchNorm2d``
(and so ``nn.BatchNorm3d``, which builds a BatchNorm2d) constructors until
``unpatch_batchnorm()``: cells constructed in between use our backward.
"""
import contextlib

from .. import ms_compat  # noqa: F401  (first: refuses an unsupported MindSpore release)
from mindspore import nn as ms_nn
from mindspore.common import dtype as mstype
from mindspore.nn.layer.normalization import _BatchNorm

from ..target import check_device_target
from ._cells import install, is_installed
from ._layers import _OURS, OurBatchNorm, _init_format, to_ours
from ._mint import convert_mint_cell, is_mint_batchnorm
from ._native import check_route, choose_route, install_native, is_native


def convert_batchnorm(net, route="auto"):
    """Makes every BatchNorm cell in ``net`` (``net`` itself included) run our kernels.

    ``route``: 'native' (MindSpore's own C++ autograd on our forward and backward kernels,
    through its CPU op plugin; CPU, channel-first), 'cell' (MindSpore's forward, our
    backward as the cell's bprop; every layout, Ascend, second-order gradients) or 'auto'
    (native where it can be, else cell). See docs/native_route.md.

    In place: each cell object stays where it is with the very same Parameter
    objects and names, so checkpoints load either way and optimizers see the
    same Parameters. Exact ``mindspore.nn.BatchNorm1d/2d/3d`` cells become
    instances of ``mindspore_bn_grad.nn.BatchNorm1d/2d/3d`` (subclasses of
    MindSpore's); user subclasses of them keep their class and get our
    ``bn_train`` / ``bn_infer`` cells. ``mint.nn.BatchNorm1d/2d/3d`` already call
    BatchNormExt, which is ours on CPU while the op plugin is active. ``SyncBatchNorm`` is
    left alone (its statistics are cross-device). Convert before the first GRAPH-mode call:
    an already compiled graph is not recompiled. Returns ``net``.
    """
    if not isinstance(net, ms_nn.Cell):
        raise TypeError(f"convert_batchnorm: net expected a mindspore.nn.Cell, got {type(net).__name__}")
    check_device_target("convert_batchnorm")
    check_route(route, "convert_batchnorm")
    for _, cell in list(net.cells_and_names()):
        if isinstance(cell, OurBatchNorm):
            continue
        if type(cell) in _OURS:  # pylint: disable=unidiomatic-typecheck
            to_ours(cell, route)
        elif (isinstance(cell, _BatchNorm) and not isinstance(cell, ms_nn.SyncBatchNorm)
              and not is_installed(cell) and not is_native(cell)):
            if choose_route(route, cell.format, type(cell).__name__) == "native":
                install_native(cell)
            else:
                install(cell)
        elif is_mint_batchnorm(cell):
            convert_mint_cell(cell, route)
    return net


_PATCHED = {}  # class -> its own __init__ before patching (None: it had none, inherited)


_ROUTE = {"route": "auto"}  # the route patch_batchnorm() asked for


def _patched_init(self, num_features, eps=1e-5, momentum=0.9, affine=True, gamma_init='ones',
                  beta_init='zeros', moving_mean_init='zeros', moving_var_init='ones',
                  use_batch_statistics=None, data_format='NCHW', dtype=mstype.float32):
    """``_BatchNorm.__init__`` followed by installing our bn_train / bn_infer cells."""
    if isinstance(self, OurBatchNorm):  # our classes install their own
        _BatchNorm.__init__(self, num_features, eps, momentum, affine, gamma_init, beta_init,
                            moving_mean_init, moving_var_init, use_batch_statistics, data_format, dtype)
        return
    if isinstance(self, ms_nn.BatchNorm2d):  # NHWC on CPU too, like our BatchNorm2d
        fmt = _init_format(data_format)
    else:
        fmt = data_format  # BatchNorm1d: MindSpore's own checks apply unchanged
    _BatchNorm.__init__(self, num_features, eps, momentum, affine, gamma_init, beta_init,
                        moving_mean_init, moving_var_init, use_batch_statistics, fmt, dtype)
    if choose_route(_ROUTE["route"], data_format, type(self).__name__) == "native":
        install_native(self)
    else:
        install(self, data_format)


def patch_batchnorm(route="auto"):
    """Opt-in: ``mindspore.nn.BatchNorm1d/2d/3d`` constructed from now on run our kernels.

    ``route`` as for ``convert_batchnorm``. Reversible with ``unpatch_batchnorm()``; cells
    built meanwhile keep our kernels. Idempotent. While patched, BatchNorm2d accepts NHWC on
    CPU as well.
    """
    check_device_target("patch_batchnorm")
    _ROUTE["route"] = check_route(route, "patch_batchnorm")
    for cls in (ms_nn.BatchNorm1d, ms_nn.BatchNorm2d):
        if cls not in _PATCHED:
            _PATCHED[cls] = cls.__dict__.get("__init__")
            cls.__init__ = _patched_init


def unpatch_batchnorm():
    """Restores MindSpore's BatchNorm constructors. Idempotent."""
    for cls, original in list(_PATCHED.items()):
        if original is None:
            del cls.__init__
        else:
            cls.__init__ = original
        del _PATCHED[cls]


def is_batchnorm_patched():
    return bool(_PATCHED)


@contextlib.contextmanager
def batchnorm_patched(route="auto"):
    """``with batchnorm_patched(): net = build()`` — BatchNorm cells built inside run our kernels."""
    was_patched = is_batchnorm_patched()
    previous = _ROUTE["route"]
    patch_batchnorm(route)
    try:
        yield
    finally:
        _ROUTE["route"] = previous
        if not was_patched:
            unpatch_batchnorm()
