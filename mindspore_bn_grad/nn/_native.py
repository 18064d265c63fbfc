"""The native route: a converted BatchNorm trains through MindSpore's own C++ autograd.

On CPU, with MindSpore's op plugin active (``cpu_kernel/plugin.py``) or our kernels in
its CPU kernel factory (``cpu_kernel/factory.py``, ``MS_BN_GRAD_NATIVE_KERNELS=factory``), MindSpore's
``BatchNormExt`` (the forward of ``mint.nn.functional.batch_norm``, aclnnBatchNorm's
semantics) and ``BatchNormGradExt`` (its C++ bprop, aclnnBatchNormBackward's) run our
kernels. A converted ``nn.BatchNorm*`` cell's ``bn_train`` / ``bn_infer`` then call
``BatchNormExt`` on the cell's own Parameters: no Python bprop, so PYNATIVE never drains its queue for one, GRAPH
compiles no bprop graph of ours, and the forward is our kernel too.

``BatchNormExt`` and ``ops.BatchNorm`` agree on everything a cell relies on: the
momentum convention (``new = (1 - momentum) * old + momentum * batch``, which is the
``momentum`` attribute an ``nn`` cell already holds), the unbiased running variance,
the in-place update of the moving statistics, the output. What the native route cannot
do, and so where conversion keeps the Cell route (``_cells.py``), is listed in
``cell_route_reason``.
"""
from .. import ms_compat  # first: refuses an unsupported MindSpore release
from mindspore import mint, nn, ops

from .. import target
from ..launch import LOCK
from ..spec import is_channel_last
from ._amp import PRECISION_FLAGS, PrecisionNeutral, opaque_to_rewrite

ROUTES = ("auto", "native", "cell")

_batch_norm = mint.nn.functional.batch_norm


def check_route(route, where):
    if route not in ROUTES:
        raise ValueError(f"{where}: route expected one of {', '.join(map(repr, ROUTES))}, got {route!r}")
    return route


def cell_route_reason(data_format):
    """Why a BatchNorm in ``data_format`` cannot take the native route here ('' when it can)."""
    device = target.device_target()
    if device != "CPU":
        return f"the device target is {device} (the native route is MindSpore's CPU op plugin)"
    if is_channel_last(data_format):
        return f"data_format {data_format!r} (MindSpore's BatchNormExt is channel-first only)"
    if native_mechanism():
        return ""
    from ..cpu_kernel import factory, plugin
    if not factory.requested():
        return f"MindSpore's CPU kernel factory route is off ({factory.WHY_OFF})"
    reason = factory.state().legacy_reason or factory.state().reason
    if plugin.requested():
        reason += f"; MindSpore's CPU op plugin is not active ({plugin.state().reason})"
    return f"MindSpore's CPU kernel factory does not run our kernels ({reason})"


def native_mechanism():
    """How MindSpore runs our kernels for a converted nn.BatchNorm* here: 'legacy' (its own ops.BatchNorm /
    BatchNormGrad on our kernels, from its CPU kernel factory: the default), 'ext' (BatchNormExt cells:
    the op plugin, or the factory without the legacy kernels), '' (neither: the Cell route)."""
    from ..cpu_kernel import factory, plugin
    if factory.requested() and factory.legacy_status():
        return "legacy"
    if (plugin.requested() and plugin.status()) or (factory.requested() and factory.status()) or plugin.status():
        return "ext"
    return ""


def choose_route(route, data_format, where):
    """'native' or 'cell' for a BatchNorm in ``data_format``; route='native' that cannot be is an error."""
    check_route(route, where)
    target.check_device_target(where)
    if route == "cell":
        return "cell"
    why = cell_route_reason(data_format)
    if not why:
        return "native"
    if route == "native":
        raise RuntimeError(f"{where}: route 'native' is not available: {why}")
    return "cell"


@opaque_to_rewrite
class NativeBatchNormCell(PrecisionNeutral, nn.Cell):
    """``bn_train`` / ``bn_infer`` of a BatchNorm cell on the native route.

    Same five inputs as ``ops.BatchNorm``; returns a tuple whose first element is the
    output (all the cell's construct reads). Neutral to AMP's precision flags (_amp.py), as
    the primitive it stands in for: a flagged cell would cast the moving statistics to a
    float16 copy, and BatchNormExt's in-place update would be lost in it. In PYNATIVE the flagged
    BatchNorm cell around it would still cast the operators' inputs, the moving statistics too
    (BatchNormExt's signature, unlike ops.BatchNorm's, does not mark them written): once flagged,
    it shields its own call from those casts (``ms_compat.shield_from_mixed_precision``), so
    BatchNormExt gets the input as the flagged cell made it and the cell's float32 Parameters, as
    ops.BatchNorm does."""

    def __init__(self, training, eps, momentum):
        super().__init__()
        self.training_flag = bool(training)
        self.eps = float(eps)
        self.momentum = float(momentum)

    def add_flags(self, **flags):
        if any(flags.get(k) for k in PRECISION_FLAGS):
            ms_compat.shield_from_mixed_precision(self)
        return super().add_flags(**flags)

    def construct(self, x, gamma, beta, moving_mean, moving_variance):
        return (_batch_norm(x, moving_mean, moving_variance, gamma, beta, self.training_flag, self.momentum,
                            self.eps),)


class BatchNorm(ops.BatchNorm):  # MindSpore's primitive, by its own name (its bprop, kernels, vmap rule)
    """MindSpore's ``ops.BatchNorm``, whose PYNATIVE launch runs under the package's launch lock
    (launch.py): MindSpore 2.10's ``ops.BatchNorm`` launched from several Python threads at once loses
    moving-statistics updates now and then (plain MindSpore too). A GRAPH graph compiles the primitive
    and never calls this."""

    def __call__(self, *args):
        with LOCK:
            return super().__call__(*args)


def install_native(bn_cell):
    """Puts a BatchNorm cell on the native route: ``bn_train`` / ``bn_infer`` become MindSpore's own
    ops.BatchNorm primitives, as MindSpore's ``_BatchNorm`` makes them, where our kernels stand in for
    MindSpore's (mechanism 'legacy'), else cells calling BatchNormExt ('ext')."""
    for name in ("bn_train", "bn_infer"):
        ms_compat.drop_primitive(bn_cell, name)
    if native_mechanism() == "legacy":
        fmt = bn_cell.format
        bn_cell.bn_train = BatchNorm(is_training=True, epsilon=bn_cell.eps, momentum=bn_cell.momentum,
                                     data_format=fmt)
        bn_cell.bn_infer = BatchNorm(is_training=False, epsilon=bn_cell.eps, data_format=fmt)
        bn_cell.bn_native = "legacy"
    else:
        bn_cell.bn_train = NativeBatchNormCell(True, bn_cell.eps, bn_cell.momentum)
        bn_cell.bn_infer = NativeBatchNormCell(False, bn_cell.eps, bn_cell.momentum)
        bn_cell.bn_native = "ext"
    return bn_cell


def is_native(bn_cell):
    return getattr(bn_cell, "bn_native", "") in ("legacy", "ext") or isinstance(
        getattr(bn_cell, "bn_train", None), NativeBatchNormCell)
