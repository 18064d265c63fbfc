"""Putting BatchNormBackward into existing networks: convert_batchnorm and the opt-in patch.

Nothing here runs at import. ``convert_batchnorm(net)`` changes one network;
``patch_batchnorm()`` changes MindSpore's ``nn.BatchNorm1d`` / ``nn.BatchNorm2d``
(and so ``nn.BatchNorm3d``, which builds a BatchNorm2d) constructors until
``unpatch_batchnorm()``: cells constructed in between use our backward.
"""
import contextlib
import functools
import inspect
import re
import warnings

from .. import ms_compat  # first: refuses an unsupported MindSpore release
from mindspore import nn as ms_nn
from mindspore import ops
from mindspore.common import dtype as mstype

from ..target import check_device_target
from ._cells import install, is_installed
from ._layers import _OURS, OurBatchNorm, _init_format, to_ours
from ._mint import convert_mint_cell, is_mint_batchnorm
from ._native import check_route, choose_route, install_native, is_native

_BatchNorm = ms_compat.batchnorm_base()


class ConversionWarning(UserWarning):
    """``convert_batchnorm`` met a BatchNorm it does not convert; the message says which and what to do."""


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
    BatchNormExt, which is ours on CPU while the op plugin is active. Returns ``net``.

    Not converted, each with a ``ConversionWarning`` (docs/convert.md):
    ``mindspore.nn.SyncBatchNorm`` (use ``mindspore_bn_grad.nn.SyncBatchNorm``);
    a cell whose ``construct`` calls ``ops.batch_norm`` / ``ops.BatchNorm`` itself
    or holds an ``ops.BatchNorm`` primitive; and a network already compiled in
    GRAPH mode: that graph is not recompiled and keeps MindSpore's backward
    (convert before the first call).
    """
    if not isinstance(net, ms_nn.Cell):
        raise TypeError(f"convert_batchnorm: net expected a mindspore.nn.Cell, got {type(net).__name__}")
    check_device_target("convert_batchnorm")
    check_route(route, "convert_batchnorm")
    _warn_what_stays(net)
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


def _warn_what_stays(net):
    """One ConversionWarning per thing convert_batchnorm leaves with MindSpore's backward."""
    phase = next((ms_compat.compile_phase(c) for _, c in net.cells_and_names() if ms_compat.compile_phase(c)),
                 None)
    if phase:
        _warn(f"{type(net).__name__} was already compiled into a GRAPH-mode graph ({phase!r}); that graph "
              "is not compiled again and keeps MindSpore's BatchNorm backward. Convert before the first "
              "call, or call the converted network through new cells (e.g. a new TrainOneStepCell)")
    for name, cell in net.cells_and_names():
        where = f"{name or 'net'} ({type(cell).__module__}.{type(cell).__qualname__})"
        if isinstance(cell, ms_nn.SyncBatchNorm):
            _warn(f"{where} is not converted: use mindspore_bn_grad.nn.SyncBatchNorm in its place (same "
                  "arguments) for BatchNormBackward across devices")
        elif not isinstance(cell, (_BatchNorm, ms_nn.SyncBatchNorm)) and type(cell).__module__.split(".")[0] \
                not in ("mindspore", "mindspore_bn_grad"):
            what = _own_batch_norm(cell)
            if what:
                _warn(f"{where} {what}, which convert_batchnorm cannot convert (only BatchNorm cells); "
                      "use a mindspore_bn_grad.nn.BatchNorm1d/2d/3d cell there, or "
                      "mindspore_bn_grad.batch_norm_backward in a bprop of your own")


def _warn(message):
    warnings.warn(f"convert_batchnorm: {message}", ConversionWarning, stacklevel=4)


def _own_batch_norm(cell):
    """What in ``cell`` runs a BatchNorm without a BatchNorm cell, or None."""
    for attr, prim in ms_compat.cell_primitives(cell).items():
        if isinstance(prim, ops.BatchNorm):
            return f"holds an ops.BatchNorm primitive ({attr})"
    call = _functional_call(type(cell))
    return f"calls {call} in construct" if call else None


# ops.batch_norm / F.batch_norm / ops.BatchNorm(...) spelled in a construct's source
_FUNCTIONAL = re.compile(r"(?<![\w.])((?:ops|F|P)\.(?:batch_norm|BatchNorm))\s*\(")


@functools.lru_cache(maxsize=None)
def _functional_call(cls):
    construct = cls.__dict__.get("construct")
    try:
        source = inspect.getsource(construct) if construct else ""
    except (OSError, TypeError):  # no source (built at run time, a C extension): nothing to tell
        return None
    found = _FUNCTIONAL.search(source)
    return found.group(1) if found else None


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
