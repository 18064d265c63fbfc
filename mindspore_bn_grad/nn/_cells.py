"""The two cells that carry our backward: drop-in replacements for a BatchNorm cell's primitives.

MindSpore's ``nn.BatchNorm*`` call ``self.bn_train(x, gamma, beta, moving_mean,
moving_variance)[0]`` in training and ``self.bn_infer(...)[0]`` otherwise.
``BatchNormTrainCell`` / ``BatchNormInferCell`` take the same five inputs and
return the same five outputs, but own a ``bprop``: MindSpore 2.10 uses a
Cell's ``bprop`` in GRAPH and PYNATIVE mode, whereas a Python bprop
registered for the built-in ``ops.BatchNorm`` is ignored.

Forward: the built-in ``ops.BatchNorm`` (same numbers and the same in-place
running-statistics update as MindSpore). Channel-last inputs are transposed
to channel-first around it, because the CPU BatchNorm kernel is NCHW only.
In eval, a 2-D or 3-D input (BatchNorm1d's) is made 4-D around it, as MindSpore's
BatchNorm1d does before it calls ``bn_infer``: our BatchNorm1d leaves that to the
cell, so that the bprop receives no Reshape views (see BatchNormInferCell).

Backward: ``BatchNormBackward`` on ``dout[0]`` and the forward input, in the
cell's own data_format (channel-last gradients are computed channel-last).
Training uses the saved batch mean ``out[3]`` and ``save_invstd =
1 / sqrt(out[4] + eps)``: on CPU ``out[4]`` is the biased batch variance, not
an inverse std. The moving statistics get zero gradients.

Output mask: ``grad_input`` is always produced (a Cell bprop in MindSpore 2.10
is not told which of its inputs need a gradient: it gets ``out`` and ``dout``
only, and ``dout`` of unused outputs is simply zeros). ``grad_weight`` /
``grad_bias`` are produced only when ``gamma`` / ``beta`` have
``requires_grad`` (False for ``affine=False``). PYNATIVE reads the flags at
every backward; GRAPH reads them when the graph is compiled. They are read
without ``Parameter.requires_grad`` (see ``ms_compat.requires_grad_nowait``): that property
waits for PYNATIVE's whole asynchronous queue, which made each backward stall.
"""
import weakref

from .. import ms_compat  # first: refuses an unsupported MindSpore release
from mindspore import nn, ops

from ..launch import SerialCall
from ..backward import backward_op  # one BatchNormBackward per attribute set
from ..primitives import check_kernel_ready
from ..spec import is_channel_last
from ..target import check_device_target
from ._amp import PrecisionNeutral, opaque_to_rewrite



def _to_channel_first(rank):
    return (0, rank - 1) + tuple(range(1, rank - 1))


def _to_channel_last(rank):
    return (0,) + tuple(range(2, rank)) + (1,)


def _wants_grad(param):
    """Whether an affine Parameter wants its gradient (None: a converted mint cell with affine=False)."""
    return param is not None and ms_compat.requires_grad_nowait(param)


class _OwnerRef:
    """Weak reference to the BatchNorm cell that owns us; a deep copy of the owner gets its own."""

    __slots__ = ("_ref",)

    def __init__(self, owner):
        self._ref = weakref.ref(owner)

    def __call__(self):
        return self._ref()

    def __deepcopy__(self, memo):
        owner = self._ref()
        # deepcopy registers the owner's copy in memo before copying its children (us)
        return self if owner is None else _OwnerRef(memo.get(id(owner), owner))


class _ReadEachTime:
    """A computed attribute, like ``property``, that MindSpore's GRAPH parser does not compile.

    The parser turns a property's getter (and every method it calls) into graph
    functions, once per cell instance; for ``grad_op`` that was two more parses and
    sub-graphs per BatchNorm, part of the longer first step of converted networks
    (docs/performance.md). Other attributes the parser reads with getattr while it
    builds the graph, so ``grad_op`` enters the graph as the primitive itself, chosen
    when the graph compiles. PYNATIVE reads it like a property.
    """

    def __init__(self, fget):
        self.fget = fget
        self.__doc__ = fget.__doc__

    def __get__(self, obj, owner=None):
        return self if obj is None else self.fget(obj)


@opaque_to_rewrite
class _BatchNormCell(SerialCall, PrecisionNeutral, nn.Cell):
    """Shared state: eps, layout and where the affine flags come from.

    Neutral to AMP (see _amp.py); PYNATIVE calls are serialised across Python threads (see
    launch.py).
    """

    def __init__(self, eps, data_format, owner=None):
        super().__init__()
        self.eps = float(eps)
        self.data_format = data_format
        self.channel_last = is_channel_last(data_format)
        self.transpose = ops.Transpose()
        self.cast = ops.Cast()
        # Zero gradients for the moving statistics: the primitive ops.ZerosLike (GRAPH mode
        # cannot differentiate the bprop, second order, through the function ops.zeros_like:
        # "Illegal AnfNode"). In PYNATIVE, MindSpore 2.10 runs ZerosLike on its older,
        # synchronous op path: the second one waits, yielding its core, until the kernels
        # queued before it (our backward) have run. That wait is kept on purpose: MindSpore
        # drains its queue before the next Python bprop anyway, spinning on a core the kernels
        # need; measured against ops.Zeros (asynchronous), the wait here was faster
        # (docs/performance.md, "One deliberate wait after it").
        self.zeros_like = ops.ZerosLike()
        # weakref: the owner (the BatchNorm cell) holds this cell, not the other way round.
        self._owner = None if owner is None else _OwnerRef(owner)

    @property
    def output_mask(self):
        """(grad_input, grad_weight, grad_bias): weight/bias bits follow gamma/beta requires_grad."""
        owner = None if self._owner is None else self._owner()
        if owner is None:
            return (True, True, True)
        return (True, _wants_grad(owner.gamma), _wants_grad(owner.beta))

    @_ReadEachTime
    def grad_op(self):
        """The BatchNormBackward of this cell's forward mode (its ops.BatchNorm's is_training), eps,
        format and output mask (its PYNATIVE launches go to its twin without the C++ shape infer:
        primitives.Primitive.__call__)."""
        return backward_op(self.bn.is_training, self.eps, self.output_mask, self.data_format)

    def construct(self, x, gamma, beta, moving_mean, moving_variance):
        if self.channel_last:
            rank = len(x.shape)
            out = self.bn(self.transpose(x, _to_channel_first(rank)), gamma, beta, moving_mean, moving_variance)
            return (self.transpose(out[0], _to_channel_last(rank)), out[1], out[2], out[3], out[4])
        return self.bn(x, gamma, beta, moving_mean, moving_variance)


# construct (above) and the bprops below are written out in full rather than through helper methods:
# GRAPH mode compiles each method a cell calls as one more sub-graph per instance, and with the
# helpers a converted ResNet-18's first step took measurably longer (docs/performance.md).
#
# The bprops cast x to dout's dtype and dx back to x's: they differ when a mixed-precision wrapper
# casts inside the cell (AMP O2 in PYNATIVE keeps BatchNorm in float32 but the bprop sees the
# float16 input). No `if` on the dtypes: GRAPH mode cannot differentiate the bprop (second-order
# gradients) through one ("The func graph is empty"). A Cast to the same dtype costs nothing:
# PYNATIVE's Cast returns its input, GRAPH mode eliminates it. The backward is called directly,
# not through launch.launch: its mode test inside a bprop breaks MindSpore's second-order graph
# the same way; it runs in the one thread that computes gradients.


class BatchNormTrainCell(_BatchNormCell):
    """``ops.BatchNorm(is_training=True)`` forward, BatchNormBackward(training=True) backward."""

    def __init__(self, eps=1e-5, momentum=0.1, data_format="NCHW", owner=None):
        super().__init__(eps, data_format, owner)
        # momentum as ops.BatchNorm takes it: new = (1 - momentum) * old + momentum * batch
        self.bn = ops.BatchNorm(is_training=True, epsilon=self.eps, momentum=momentum, data_format="NCHW")

    def bprop(self, x, gamma, beta, moving_mean, moving_variance, out, dout):
        dy = dout[0]
        save_invstd = ops.rsqrt(out[4] + self.eps)
        dx, dgamma, dbeta = self.grad_op(dy, self.cast(x, dy.dtype), gamma, None, None, out[3], save_invstd)
        return (self.cast(dx, x.dtype), dgamma, dbeta,
                self.zeros_like(moving_mean), self.zeros_like(moving_variance))


class BatchNormInferCell(_BatchNormCell):
    """``ops.BatchNorm(is_training=False)`` forward, BatchNormBackward(training=False) backward."""

    def __init__(self, eps=1e-5, data_format="NCHW", owner=None):
        super().__init__(eps, data_format, owner)
        self.bn = ops.BatchNorm(is_training=False, epsilon=self.eps, data_format="NCHW")
        self.reshape = ops.Reshape()

    def construct(self, x, gamma, beta, moving_mean, moving_variance):
        rank = len(x.shape)
        if rank < 4:
            # BatchNorm1d's (N, C) or (N, C, L), channel-first: the primitive runs on it made 4-D, as
            # MindSpore's BatchNorm1d does in eval, but here, inside the cell. Our BatchNorm1d hands
            # x over as it is so that the bprop gets x and dy themselves, not Reshape views of them:
            # in PYNATIVE a launch inside the bprop that reads such a view waits for the whole queue
            # (docs/performance.md, "The eval BatchNorm1d wait").
            shape = x.shape
            out = self.bn(self.reshape(x, shape + (1,) * (4 - rank)), gamma, beta, moving_mean, moving_variance)
            return (self.reshape(out[0], shape), out[1], out[2], out[3], out[4])
        if self.channel_last:
            out = self.bn(self.transpose(x, _to_channel_first(rank)), gamma, beta, moving_mean, moving_variance)
            return (self.transpose(out[0], _to_channel_last(rank)), out[1], out[2], out[3], out[4])
        return self.bn(x, gamma, beta, moving_mean, moving_variance)

    def bprop(self, x, gamma, beta, moving_mean, moving_variance, out, dout):
        dy = dout[0]
        dx, dgamma, dbeta = self.grad_op(dy, self.cast(x, dy.dtype), gamma, moving_mean, moving_variance,
                                         None, None)
        return (self.cast(dx, x.dtype), dgamma, dbeta,
                self.zeros_like(moving_mean), self.zeros_like(moving_variance))


def install(bn_cell, data_format=None):
    """Points a MindSpore ``_BatchNorm`` cell's ``bn_train`` / ``bn_infer`` at our cells.

    ``bn_cell`` keeps its Parameters, names and ``construct``; only the two
    primitives are replaced. ``bn_cell.momentum`` is already in ops.BatchNorm's
    convention (1 - the nn momentum). The kernel is made ready here (built or
    loaded, its settings checked): a set-up error raises now, in Python, with
    its own message; in a GRAPH graph it would surface as MindSpore's parser
    failing to read ``grad_op``.
    """
    check_device_target(type(bn_cell).__name__)
    check_kernel_ready()
    fmt = data_format or bn_cell.format
    bn_cell.format = fmt
    for name in ("bn_train", "bn_infer"):  # drop the primitives from the cell's registry too
        ms_compat.drop_primitive(bn_cell, name)
    bn_cell.bn_native = ""  # not (or no longer) on the native route
    bn_cell.bn_train = BatchNormTrainCell(bn_cell.eps, bn_cell.momentum, fmt, owner=bn_cell)
    bn_cell.bn_infer = BatchNormInferCell(bn_cell.eps, fmt, owner=bn_cell)
    return bn_cell


def is_installed(bn_cell):
    return isinstance(getattr(bn_cell, "bn_train", None), BatchNormTrainCell)
