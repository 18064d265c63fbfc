"""SyncBatchNorm: BatchNorm whose statistics and backward span a process group.

Mirrors ``mindspore.nn.SyncBatchNorm`` (constructor, Parameters ``gamma``,
``beta``, ``moving_mean``, ``moving_variance`` and their names, eval mode,
``use_batch_statistics``, ``process_groups``), and runs on CPU (``msrun``,
mccl) as well as wherever MindSpore's collectives run.

Training forward (``SyncBatchNormTrainCell.construct``):
  each rank computes its count n_r, mean m_r and M2_r = sum((x - m_r)^2) per
  channel; one AllReduce over the group acts as a gather (every rank writes
  its row of a zero (group_size, 2C+1) buffer), and every rank combines the
  rows the numerically stable way (Chan et al.):
      N = sum n_r,  mean = sum n_r m_r / N,
      M2 = sum M2_r + sum n_r (m_r - mean)^2,  var = M2 / N.
  y = (x - mean) / sqrt(var + eps) * gamma + beta. The running statistics
  are updated with the global mean and the unbiased global variance
  M2 / (N - 1), as MindSpore's BatchNorm does:
      moving = (1 - momentum') * moving + momentum' * batch,  momentum' = 1 - momentum.

Backward (``bprop``), as in MindSpore's own SyncBatchNorm (mint):
  BatchNormReduceBackward on the local batch -> (sum_dy, sum_dy_xmu,
  grad_gamma, grad_beta); AllReduce of (sum_dy, sum_dy_xmu) over the group;
  BatchNormElemtBackward with the per-rank counts -> grad_input.
  grad_gamma / grad_beta stay per rank: the data-parallel gradient reducer
  sums (or averages) them like every other parameter gradient.

Without distributed initialisation (``mindspore.communication.init()`` not
called), or on a rank that no group of ``process_groups`` with two or more
members contains, the cell is a plain BatchNorm over the local batch
(group size 1): no collective runs. A rank may bring an empty batch (N = 0
locally): it contributes nothing to the statistics, takes part in every
collective, gets an empty input gradient and zero gamma/beta gradients.
When every rank's batch is empty, the batch mean and variance are taken as 0,
as MindSpore's BatchNorm does: the running statistics decay towards 0 by the
momentum and stay finite.

Across processes (``_sync_check.py``): building a SyncBatchNorm after
``init()`` exchanges a small layout header over all ranks and raises
SyncBatchNormMismatchError on every rank if they disagree; ``SyncGuard`` turns
a collective that fails in a step into SyncBatchNormPeerLostError.
"""
import hashlib
import itertools

import numpy as np
from .. import ms_compat  # first: refuses an unsupported MindSpore release
from mindspore import Tensor, context, nn, ops
from mindspore import dtype as mstype

from ..launch import SerialCall, launch
from ..spec import is_channel_last
from ..target import check_device_target
from ..sync_backward import BatchNormElemtBackward, BatchNormReduceBackward
from ._amp import PrecisionNeutral, opaque_to_rewrite
from ._sync_check import check_same_layout, register_layer



def _is_initialized():
    return bool(ms_compat.global_comm().INITED)


def group_members(process_groups):
    """The global ranks this rank synchronises with (itself included), by the rules of resolve_group."""
    if not _is_initialized():
        return [0]
    from mindspore.communication import get_group_size, get_rank
    rank, world = get_rank(), get_group_size()
    if process_groups is None:
        return list(range(world))
    return next((list(sub) for sub in process_groups if rank in sub), [rank])


def resolve_group(process_groups):
    """(group name or None, size, this rank's index in the group) for `process_groups`.

    Same rules and group names as ``mindspore.nn.SyncBatchNorm``; groups are
    shared with it through MindSpore's registry.
    """
    if not _is_initialized():
        return None, 1, 0
    from mindspore.communication import GlobalComm, create_group, get_group_size, get_rank
    rank, world = get_rank(), get_group_size()
    if process_groups is None:
        return (GlobalComm.WORLD_COMM_GROUP, world, rank) if world > 1 else (None, 1, 0)
    if not isinstance(process_groups, list) or not all(isinstance(g, list) for g in process_groups):
        raise TypeError(f"SyncBatchNorm: process_groups expected a list of lists of rank ids, "
                        f"got {process_groups!r}")
    seen = set()
    for rid in itertools.chain(*process_groups):
        if isinstance(rid, bool) or not isinstance(rid, int) or not 0 <= rid < world:
            raise ValueError(f"SyncBatchNorm: rank id in process_groups expected an int in [0, {world}), "
                             f"got {rid!r}")
        if rid in seen:
            raise ValueError(f"SyncBatchNorm: process_groups expected distinct rank ids, got {process_groups}")
        seen.add(rid)
    for sub in process_groups:
        if rank in sub and len(sub) > 1:
            if ms_compat.CPU_COLLECTIVES_WORLD_GROUP_ONLY and context.get_context("device_target") == "CPU":
                if len(sub) == world:
                    return GlobalComm.WORLD_COMM_GROUP, world, rank
                raise ValueError(
                    f"SyncBatchNorm: process_groups expected, on CPU with MindSpore {ms_compat.VERSION}, "
                    f"groups of all {world} ranks or of one rank (its CPU collectives run on the world "
                    f"group only; 2.8 and later have no such limit), got {process_groups}")
            key = "_".join(str(r) for r in sub)
            registry = ms_compat.syncbatchnorm_group_registry()
            if key not in registry:
                name = f"{len(sub)}_{hashlib.sha256(key.encode('utf-8')).hexdigest()}"
                create_group(name, sub)
                registry[key] = name
            return registry[key], len(sub), sub.index(rank)
    return None, 1, 0


class SyncBatchNormTrainCell(SerialCall, PrecisionNeutral, nn.Cell):
    """Training step of SyncBatchNorm: the ``bn_train`` of the cell below.

    Same five inputs as ``ops.BatchNorm`` (x, gamma, beta, moving_mean,
    moving_variance); outputs (y, mean, invstd, counts, var): the global batch
    mean, 1/sqrt(var + eps), the per-rank element counts per channel, and the
    biased global variance. The moving statistics are updated in place.
    """

    def __init__(self, num_features, eps, momentum, group, group_size, group_rank, data_format="NCHW"):
        super().__init__()
        self.num_features = num_features
        self.eps = float(eps)
        self.momentum = float(momentum)  # ops.BatchNorm convention: weight of the batch value
        self.group = group
        self.group_size = group_size
        self.channel_last = is_channel_last(data_format)
        self.data_format = data_format
        if group is not None:
            self.all_reduce = ops.AllReduce(ops.ReduceOp.SUM, group)
        slot = np.zeros((group_size, 1), np.float32)
        slot[group_rank, 0] = 1.0
        self.slot32 = Tensor(slot, mstype.float32)
        self.slot64 = Tensor(slot.astype(np.float64), mstype.float64)
        self.reduce_op = BatchNormReduceBackward(data_format=data_format)
        self.elemt_op = BatchNormElemtBackward(data_format=data_format)
        self.assign = ops.Assign()

    def _stat_dtype(self, x):
        return mstype.float64 if x.dtype == mstype.float64 else mstype.float32

    def _axes(self, rank):
        """The reduction axes (all but the channel axis). A method: see ms_compat, "Cell bprop"."""
        axis = rank - 1 if self.channel_last else 1
        return tuple(i for i in range(rank) if i != axis)

    def _bshape(self, rank):
        shape = [1] * rank
        shape[rank - 1 if self.channel_last else 1] = self.num_features
        return tuple(shape)

    def construct(self, x, gamma, beta, moving_mean, moving_variance):
        shape = x.shape
        rank = len(shape)
        c = self.num_features
        axes = self._axes(rank)
        bshape = self._bshape(rank)
        sdt = self._stat_dtype(x)
        n_local = 1
        for i in axes:
            n_local = n_local * shape[i]
        xf = ops.cast(x, sdt)
        if n_local > 0:
            mean_l = ops.reduce_mean(xf, axes)
            m2_l = ops.reduce_sum(ops.square(xf - ops.reshape(mean_l, bshape)), axes)
        else:  # MindSpore's reductions over an empty tensor are not zero on CPU
            mean_l = ops.zeros((c,), sdt)
            m2_l = ops.zeros((c,), sdt)
        # depend on x: with an empty batch the row is a constant, and the
        # AllReduce must still run after the collectives of earlier layers.
        row = ops.depend(ops.concat((ops.fill(sdt, (1,), n_local), mean_l, m2_l)), x)
        slot = self.slot64 if sdt == mstype.float64 else self.slot32
        table = slot * ops.reshape(row, (1, 2 * c + 1))          # (G, 2C+1), only our row non-zero
        if self.group is not None:
            table = self.all_reduce(table)                       # gather by sum
        counts = table[:, 0]
        means = table[:, 1:c + 1]
        m2s = table[:, c + 1:]
        cnt = ops.reshape(counts, (self.group_size, 1))
        total = ops.reduce_sum(counts)
        # every rank empty (N = 0): mean 0 and variance 0, as MindSpore's BatchNorm takes an empty
        # batch; the running statistics stay finite (momentum * old)
        n_div = ops.maximum(total, ops.ones((), sdt))
        mean = ops.reduce_sum(cnt * means, 0) / n_div
        m2 = ops.reduce_sum(m2s, 0) + ops.reduce_sum(cnt * ops.square(means - mean), 0)
        var = m2 / n_div
        invstd = ops.rsqrt(var + self.eps)
        unbiased = m2 / ops.maximum(total - 1, ops.ones((), sdt))
        pdt = moving_mean.dtype
        mom = self.momentum
        self.assign(moving_mean, ops.cast(moving_mean * (1 - mom) + ops.cast(mean, pdt) * mom, pdt))
        self.assign(moving_variance,
                    ops.cast(moving_variance * (1 - mom) + ops.cast(unbiased, pdt) * mom, pdt))
        scale = ops.cast(gamma, sdt) * invstd
        shift = ops.cast(beta, sdt) - mean * scale
        y = ops.cast(xf * ops.reshape(scale, bshape) + ops.reshape(shift, bshape), x.dtype)
        return y, mean, invstd, counts, var

    def bprop(self, x, gamma, beta, moving_mean, moving_variance, out, dout):
        dy = dout[0]
        mean, invstd, counts = out[1], out[2], out[3]
        shape = x.shape
        n_local = 1
        for i in self._axes(len(shape)):
            n_local = n_local * shape[i]
        c = self.num_features
        if n_local > 0:
            sum_dy, sum_dy_xmu, d_gamma, d_beta = launch(self.reduce_op, dy, x, mean, invstd, gamma)
        else:
            sum_dy = ops.zeros((c,), mean.dtype)
            sum_dy_xmu = ops.zeros((c,), mean.dtype)
            d_gamma = ops.zeros_like(gamma)
            d_beta = ops.zeros_like(gamma)
        if self.group is not None:
            # depend on the forward's results: every rank must issue its
            # collectives in the same order, and on a rank with an empty batch
            # nothing else ties this AllReduce to the forward one.
            both = self.all_reduce(ops.depend(ops.concat((sum_dy, sum_dy_xmu)), counts))
            sum_dy = both[:c]
            sum_dy_xmu = both[c:]
        if n_local > 0:
            dx = launch(self.elemt_op, dy, x, mean, invstd, gamma, sum_dy, sum_dy_xmu, counts)
        else:
            # nothing uses the sums here: tie them to an output so that GRAPH
            # mode keeps the AllReduce the other ranks are waiting for
            dx = ops.zeros_like(x)
            d_gamma = ops.depend(d_gamma, sum_dy_xmu)
            d_beta = ops.depend(d_beta, sum_dy)
        return dx, d_gamma, ops.cast(d_beta, beta.dtype), ops.zeros_like(moving_mean), \
            ops.zeros_like(moving_variance)


@opaque_to_rewrite  # AMP O1: see _amp.py
class SyncBatchNorm(ms_compat.batchnorm_base()):
    r"""Cross-process synchronised BatchNorm with aclnn-style reduce / elementwise backward.

    Args as ``mindspore.nn.SyncBatchNorm`` (momentum 0.9 means
    moving = 0.9 * moving + 0.1 * batch), plus ``data_format`` ("NCHW", or
    "NHWC" for channel-last input). Input rank 2..8 channel-first (N, C, ...)
    or rank 3..8 channel-last (N, ..., C).

    ``process_groups``: None (all ranks, when distributed is initialised) or
    a list of disjoint lists of rank ids; a rank synchronises with the ranks
    of its list. Without ``mindspore.communication.init()`` the cell is an
    ordinary BatchNorm of the local batch.
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.9, affine=True, gamma_init='ones', beta_init='zeros',
                 moving_mean_init='zeros', moving_var_init='ones', use_batch_statistics=None,
                 process_groups=None, data_format="NCHW", dtype=mstype.float32):
        check_device_target("SyncBatchNorm")
        if data_format not in ("NCHW", "NHWC"):
            raise ValueError(f"SyncBatchNorm: data_format expected one of ['NCHW', 'NHWC'], got {data_format!r}")
        # MindSpore's base class refuses NHWC off GPU; our cells handle it.
        init_format = data_format if context.get_context("device_target") == "GPU" else "NCHW"
        super().__init__(num_features, eps, momentum, affine, gamma_init, beta_init, moving_mean_init,
                         moving_var_init, use_batch_statistics, init_format, dtype)
        self.format = data_format
        self.process_groups = process_groups
        if _is_initialized():  # every rank, before any group exists: see _sync_check.py
            check_same_layout(num_features, dtype, data_format, eps, momentum, process_groups)
        self.group_name, self.group_device_num, self.group_rank = resolve_group(process_groups)
        self.is_global = self.group_name is not None
        self.group_ranks = group_members(process_groups) if self.is_global else []
        register_layer(self)
        for name in ("bn_train", "bn_infer"):
            ms_compat.drop_primitive(self, name)
        self.bn_train = SyncBatchNormTrainCell(num_features, self.eps, self.momentum, self.group_name,
                                               self.group_device_num, self.group_rank, data_format)
        self.bn_infer = _InferCell(self.eps, data_format)

    def construct(self, x):
        if self.use_batch_statistics is None:
            train = self.training
        else:
            train = self.use_batch_statistics
        if train:
            return self.bn_train(x, self.gamma, self.beta, self.moving_mean, self.moving_variance)[0]
        return self.bn_infer(x, self.gamma, self.beta, self.moving_mean, self.moving_variance)

    def extend_repr(self):
        return (f"num_features={self.num_features}, eps={self.eps}, momentum={1.0 - self.momentum}, "
                f"process_groups={self.process_groups}, group_size={self.group_device_num}, "
                f"data_format={self.format}")


class _InferCell(SerialCall, PrecisionNeutral, nn.Cell):
    """Eval forward: y = (x - moving_mean) / sqrt(moving_var + eps) * gamma + beta (plain autodiff)."""

    def __init__(self, eps, data_format):
        super().__init__()
        self.eps = float(eps)
        self.channel_last = is_channel_last(data_format)

    def construct(self, x, gamma, beta, moving_mean, moving_variance):
        rank = len(x.shape)
        shape = [1] * rank
        shape[rank - 1 if self.channel_last else 1] = -1
        shape = tuple(shape)
        scale = gamma * ops.rsqrt(moving_variance + self.eps)
        shift = beta - moving_mean * scale
        y = ops.cast(x, scale.dtype) * ops.reshape(scale, shape) + ops.reshape(shift, shape)
        return ops.cast(y, x.dtype)
