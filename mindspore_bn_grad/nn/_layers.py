"""BatchNorm1d / 2d / 3d: MindSpore's cells, with BatchNormBackward as their backward.

Each class subclasses the ``mindspore.nn`` class of the same name, so the
constructor arguments and defaults, the Parameters (``gamma``, ``beta``,
``moving_mean``, ``moving_variance``), their names, the checkpoint layout,
``construct`` (eval mode, ``use_batch_statistics``) and ``isinstance`` checks
(for example AMP's keep-in-float32 list) are MindSpore's own. The change
is ``bn_train`` / ``bn_infer``, by the route to our kernels (``route``, see _native.py):
on CPU with MindSpore's op plugin active, cells that call MindSpore's ``BatchNormExt``,
which runs our forward and backward kernels through MindSpore's C++ autograd (the
native route); otherwise cells with a registered bprop (the Cell route, _cells.py).
On the Cell route, BatchNorm1d's eval also hands its input to ``bn_infer`` without
MindSpore's reshape to 4-D (``BatchNorm1d.construct`` says why); the results are the same.

Beyond MindSpore on CPU: ``BatchNorm2d(data_format="NHWC")`` works (MindSpore's CPU
BatchNorm refuses it); the channel axis is then the last one.
"""
from .. import ms_compat  # noqa: F401  (first: refuses an unsupported MindSpore release)
from mindspore import context
from mindspore import nn as ms_nn
from mindspore.common import dtype as mstype

from ._amp import opaque_to_rewrite
from ._cells import install
from ._native import choose_route, install_native


@opaque_to_rewrite  # AMP O1 keeps our cells as they are: see _amp.py
class OurBatchNorm:
    """Mixin: this BatchNorm cell runs our kernels, by the route in ``bn_route``."""

    bn_route = "cell"


def route_cell(cell, route, data_format):
    """Puts ``cell`` (one of ours) on ``route`` ('auto', 'native' or 'cell'): its ``bn_train`` /
    ``bn_infer`` become BatchNormExt cells (native) or cells with our bprop (cell). MindSpore's own
    ``construct`` stays."""
    cell.bn_route = choose_route(route, data_format, type(cell).__name__)
    if cell.bn_route == "native":
        install_native(cell)
    else:
        install(cell, data_format)
    return cell


def _init_format(data_format):
    """Format to give MindSpore's constructor (which rejects NHWC off GPU); our cells do NHWC anywhere."""
    if data_format == "NHWC" and context.get_context("device_target") != "GPU":
        return "NCHW"
    return data_format


def _check_1d_format(data_format):
    # MindSpore's eval path reshapes (N, C, L) to (N, C, L, 1), which is wrong for channel-last
    # input; channel-last 1-D data is (N, C) or should use BatchNorm2d. Refuse it rather than guess.
    if data_format != "NCHW":
        raise ValueError(f"For 'BatchNorm1d', data_format expected 'NCHW', got {data_format!r} "
                         "(use mindspore_bn_grad.nn.BatchNorm2d for channel-last data)")


class BatchNorm1d(OurBatchNorm, ms_nn.BatchNorm1d):
    """``mindspore.nn.BatchNorm1d`` whose backward is BatchNormBackward. Input (N, C) or (N, C, L)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.9, affine=True, gamma_init='ones',
                 beta_init='zeros', moving_mean_init='zeros', moving_var_init='ones',
                 use_batch_statistics=None, data_format='NCHW', dtype=mstype.float32, route="auto"):
        _check_1d_format(data_format)
        super().__init__(num_features, eps, momentum, affine, gamma_init, beta_init, moving_mean_init,
                         moving_var_init, use_batch_statistics, data_format, dtype)
        route_cell(self, route, data_format)

    def construct(self, x):
        """MindSpore's ``construct``, except that on the Cell route eval hands ``x`` to ``bn_infer``
        as it is: MindSpore's makes (N, C) / (N, C, L) 4-D around ``bn_infer``, and the Reshape
        views that gave the bprop made its launches wait for PYNATIVE's queue. Our
        ``BatchNormInferCell`` makes its forward 4-D inside itself instead (_cells.py)."""
        if self.bn_route != "cell":
            return super().construct(x)
        self._check_input_dim(self.shape(x), self.cls_name)
        batch_statistics = self.training if self.use_batch_statistics is None else self.use_batch_statistics
        if batch_statistics:
            return self.bn_train(x, self.gamma, self.beta, self.moving_mean, self.moving_variance)[0]
        return self.bn_infer(x, self.gamma, self.beta, self.moving_mean, self.moving_variance)[0]


class BatchNorm2d(OurBatchNorm, ms_nn.BatchNorm2d):
    """``mindspore.nn.BatchNorm2d`` whose backward is BatchNormBackward. Input NCHW or NHWC."""

    def __init__(self, num_features, eps=1e-5, momentum=0.9, affine=True, gamma_init='ones',
                 beta_init='zeros', moving_mean_init='zeros', moving_var_init='ones',
                 use_batch_statistics=None, data_format='NCHW', dtype=mstype.float32, route="auto"):
        super().__init__(num_features, eps, momentum, affine, gamma_init, beta_init, moving_mean_init,
                         moving_var_init, use_batch_statistics, _init_format(data_format), dtype)
        route_cell(self, route, data_format)


class BatchNorm3d(OurBatchNorm, ms_nn.BatchNorm3d):
    """``mindspore.nn.BatchNorm3d`` whose backward is BatchNormBackward. Input NCDHW.

    Like MindSpore's, it holds a BatchNorm2d named ``bn2d`` (parameter names
    ``<name>.bn2d.gamma`` ...) and runs it on (N, C, D*H, W).
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.9, affine=True, gamma_init='ones',
                 beta_init='zeros', moving_mean_init='zeros', moving_var_init='ones',
                 use_batch_statistics=None, dtype=mstype.float32, route="auto"):
        super().__init__(num_features, eps, momentum, affine, gamma_init, beta_init, moving_mean_init,
                         moving_var_init, use_batch_statistics, dtype)
        to_ours(self.bn2d, route)
        self.bn_route = self.bn2d.bn_route


_OURS = {ms_nn.BatchNorm1d: BatchNorm1d, ms_nn.BatchNorm2d: BatchNorm2d, ms_nn.BatchNorm3d: BatchNorm3d}


def to_ours(cell, route="auto"):
    """Turns an exact ``mindspore.nn.BatchNorm1d/2d/3d`` instance into ours, in place.

    The object stays the same (same Parameters, names, parent links); its class
    becomes our subclass and it takes ``route`` to our kernels. Returns the cell.
    """
    ours = _OURS[type(cell)]
    cell.__class__ = ours
    if ours is BatchNorm3d:
        if not isinstance(cell.bn2d, OurBatchNorm):
            to_ours(cell.bn2d, route)
        cell.bn_route = cell.bn2d.bn_route  # its bn2d does the work
    else:
        route_cell(cell, route, cell.format)
    return cell
