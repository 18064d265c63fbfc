"""``mint.nn.BatchNorm1d/2d/3d`` in converted networks.

These cells call MindSpore's ``BatchNormExt`` themselves (``mint.functional.batch_norm``),
whose C++ bprop is ``BatchNormGradExt``. ``convert_batchnorm`` turns an exact mint cell into
one of the classes below (in place: the same object, Parameters and names, as ``to_ours``
does for ``nn`` cells), whose ``construct`` is mint's but calls ``bn_train`` / ``bn_infer``
with ``ops.BatchNorm``'s five inputs, as an ``nn`` cell does. Those are then what they are
for an ``nn`` cell of the route:

- on CPU, the default mechanism ("legacy"): MindSpore's own ``ops.BatchNorm`` primitives on our
  kernels, so a mint network trains through MindSpore's bprop chain BatchNorm -> BatchNormGrad
  -> BatchNormGradGrad, second order included (MindSpore's own bprop of ``BatchNormGradExt`` is
  broken on CPU, docs/native_route.md);
- the Cell route (``route="cell"``, and on Ascend, where it is our Ascend C kernel's route): our
  cells with a bprop.

A mint cell keeps MindSpore's ``construct`` (``BatchNormExt``) where ``ops.BatchNorm`` cannot
say what it does: ``momentum=None`` (a cumulative average, a factor that changes every step)
and ``track_running_stats=False`` (no running statistics to update), and on CPU where only
``BatchNormExt`` runs our kernels (the op plugin without the factory route). There it runs our
kernels on CPU when ``BatchNormExt`` does, else a warning says what runs it.
"""
import warnings

import numpy as np

from .. import ms_compat  # noqa: F401  (first: refuses an unsupported MindSpore release)
import mindspore as ms
from mindspore import mint, ops

from .. import target
from ._cells import install
from ._layers import OurBatchNorm
from ._native import choose_route, install_native, native_mechanism

_MINT_BATCHNORMS = (mint.nn.BatchNorm1d, mint.nn.BatchNorm2d, mint.nn.BatchNorm3d)
_WARNED = set()


def is_mint_batchnorm(cell):
    return isinstance(cell, _MINT_BATCHNORMS) and not isinstance(cell, mint.nn.SyncBatchNorm)


class _OnBatchNormPrimitives(OurBatchNorm):
    """Mixin: mint's ``construct`` on ``bn_train`` / ``bn_infer`` (ops.BatchNorm's inputs and outputs).

    ``gamma`` / ``beta`` are the affine Parameters where an ``nn`` cell has them (the Cell
    route's output mask reads them there); with ``affine=False`` the primitives get constant
    ones and zeros, which no gradient is asked of."""

    @property
    def gamma(self):
        return self.weight

    @property
    def beta(self):
        return self.bias

    def construct(self, input):  # pylint: disable=redefined-builtin
        self._check_input_dim(input)
        if self.training and self.num_batches_tracked is not None:
            # In place, as mint's `+= 1` means: that one, in PYNATIVE, builds a new tensor and sets the
            # Parameter to it (Parameter.set_data), a cost per layer and step (docs/native_route.md)
            ops.assign_add(self.num_batches_tracked, self.bn_one)
        weight = self.bn_ones if self.weight is None else self.weight
        bias = self.bn_zeros if self.bias is None else self.bias
        shape = input.shape
        # nn.BatchNorm1d's eval makes (N, C) / (N, C, L) 4-D around bn_infer; on the Cell route our
        # bn_infer does that inside itself, so that its bprop gets no Reshape views (_layers.BatchNorm1d)
        to_4d = len(shape) < 4 and not self.training and self.bn_route != "cell"
        x = input
        if len(shape) == 5:  # as nn.BatchNorm3d: (N, C, D * H, W)
            x = input.reshape(shape[0], shape[1], shape[2] * shape[3], shape[4])
        elif to_4d:
            x = input.reshape(shape + (1,) * (4 - len(shape)))
        if self.training:
            y = self.bn_train(x, weight, bias, self.running_mean, self.running_var)[0]
        else:
            y = self.bn_infer(x, weight, bias, self.running_mean, self.running_var)[0]
        if len(shape) == 5 or to_4d:
            y = y.reshape(shape)
        return y


class BatchNorm1d(_OnBatchNormPrimitives, mint.nn.BatchNorm1d):
    """A converted ``mint.nn.BatchNorm1d``."""


class BatchNorm2d(_OnBatchNormPrimitives, mint.nn.BatchNorm2d):
    """A converted ``mint.nn.BatchNorm2d``."""


class BatchNorm3d(_OnBatchNormPrimitives, mint.nn.BatchNorm3d):
    """A converted ``mint.nn.BatchNorm3d``."""


_OURS = {mint.nn.BatchNorm1d: BatchNorm1d, mint.nn.BatchNorm2d: BatchNorm2d, mint.nn.BatchNorm3d: BatchNorm3d}


def keeps_batch_norm_ext(cell):
    """Why ``cell`` (a mint BatchNorm) keeps MindSpore's construct on BatchNormExt ('' when it need not)."""
    name = type(cell).__name__
    if type(cell) not in _OURS:  # pylint: disable=unidiomatic-typecheck
        return f"{type(cell).__qualname__} is a subclass of mint.nn's, whose construct is its own"
    if cell.momentum is None:
        return f"mint.nn.{name}(momentum=None) averages over all batches, a factor ops.BatchNorm cannot take"
    if not cell.track_running_stats:
        return f"mint.nn.{name}(track_running_stats=False) has no running statistics for ops.BatchNorm"
    return ""


def convert_mint_cell(cell, route="auto"):
    """Puts ``cell`` (a mint BatchNorm) on ``bn_train`` / ``bn_infer`` of the route where it can be
    (module docstring); else checks that it runs our kernels and warns once per reason when not.
    Returns the cell."""
    name = type(cell).__name__
    keep = keeps_batch_norm_ext(cell)
    if not keep:
        chosen = choose_route(route, "NCHW", f"convert_batchnorm(mint.nn.{name})")
        if chosen == "cell" or native_mechanism() == "legacy":
            _to_ours(cell, chosen)
            return cell
        return cell  # native through BatchNormExt: the op plugin's (or the factory's) kernels, ours
    if target.device_target() != "CPU":
        reason = (f"{keep}: it keeps MindSpore's aclnnBatchNorm kernels on {target.device_target()} (the "
                  "same semantics as ours); use mindspore.nn.BatchNorm* cells to run our Ascend C kernel")
    elif route == "cell":
        reason = f"{keep}: it has no Cell route and takes BatchNormExt (the native route) or none"
    else:
        reason = ""
        try:
            choose_route("native", "NCHW", f"convert_batchnorm(mint.nn.{name})")
        except RuntimeError as e:
            reason = f"{keep}; {e}"
    if reason and reason not in _WARNED:
        _WARNED.add(reason)
        warnings.warn(f"convert_batchnorm: {reason}", RuntimeWarning, stacklevel=3)
    return cell


def _to_ours(cell, chosen):
    dtype = cell.running_mean.dtype
    c = cell.num_features
    cell.__class__ = _OURS[type(cell)]
    cell.bn_ones = ms.Tensor(np.ones(c), dtype)
    cell.bn_zeros = ms.Tensor(np.zeros(c), dtype)
    if cell.num_batches_tracked is not None:
        cell.bn_one = ms.Tensor(1, cell.num_batches_tracked.dtype)
    cell.bn_route = chosen
    if chosen == "native":
        cell.format = "NCHW"
        install_native(cell)
    else:
        install(cell, "NCHW")
