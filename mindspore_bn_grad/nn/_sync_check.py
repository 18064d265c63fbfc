"""SyncBatchNorm across processes: the layout check and errors that name their cause.

``check_same_layout`` runs once per SyncBatchNorm, when it is built: every rank
of the job writes a small integer header (num_features, parameter dtype,
data_format, eps, momentum, a hash of process_groups; in 16-bit pieces, exact
in float32) into its row of a (world, 12) table, one AllReduce over the world
group sums the table (a gather), and every rank compares the rows. Ranks that disagree all raise
``SyncBatchNormMismatchError`` before any group is created or any statistic
changes. Every rank takes part (also a rank alone in its group), so the header
exchanges pair up as long as the ranks build the same layers in the same order.

``SyncGuard(step_fn, network)`` wraps one training step: it counts the steps,
waits for the step's kernels (so PYNATIVE's asynchronous errors surface inside
the step they belong to), and re-raises a failed collective as
``SyncBatchNormPeerLostError`` saying which group, which step, how long the
wait was and what to check. How long a lost peer takes to be noticed is
bounded by MindSpore's settings (docs/syncbn.md, "When a peer is lost"):
on CPU a collective waits MS_CPU_COMM_OP_TIMEOUT seconds (else MS_NODE_TIMEOUT,
default 30) for a peer's data.
"""
import os
import re
import weakref
import zlib

import numpy as np

_HEADER_MAGIC = 0x5B4E  # "SBN": a row of the table that is not ours reads as a mismatch, not as a layout
_FIELDS = ("magic", "num_features", "dtype", "data_format", "eps", "momentum", "process_groups")
_COLLECTIVE_TEXT = re.compile(r"AllReduce|AllGather|Broadcast|ReduceScatter|collective|hccl|nccl|mccl|"
                              r"timed? ?out|heartbeat|connection", re.IGNORECASE)
_LAYERS = weakref.WeakValueDictionary()   # id -> SyncBatchNorm: which groups exist, for the peer-lost message


class SyncBatchNormMismatchError(ValueError):
    """Ranks built a SyncBatchNorm with different num_features, dtype, format or process_groups."""


class SyncBatchNormPeerLostError(RuntimeError):
    """A collective of a SyncBatchNorm step did not complete: a peer died, hung or became unreachable."""


def comm_timeout_s():
    """Seconds a CPU collective waits for a peer (MindSpore's MS_CPU_COMM_OP_TIMEOUT, else MS_NODE_TIMEOUT)."""
    for name in ("MS_CPU_COMM_OP_TIMEOUT", "MS_NODE_TIMEOUT"):
        value = os.environ.get(name, "").strip()
        if value:
            return name, value
    return "MS_CPU_COMM_OP_TIMEOUT", "30 (default)"


def _halves(value):
    """A 32-bit value as two 16-bit ints: exact in float32, the only AllReduce dtype mccl has besides float16."""
    value &= 0xFFFFFFFF
    return [value >> 16, value & 0xFFFF]


def _header(num_features, dtype, data_format, eps, momentum, process_groups):
    """{field: the ints that encode it}, in _FIELDS order."""
    groups = "world" if process_groups is None else repr(process_groups)
    bits = lambda v: int(np.array(v, np.float32).view(np.uint32))  # noqa: E731
    return {"magic": [_HEADER_MAGIC], "num_features": _halves(int(num_features)),
            "dtype": _halves(zlib.crc32(str(dtype).encode())), "data_format": [1 if data_format == "NHWC" else 0],
            "eps": _halves(bits(eps)), "momentum": _halves(bits(momentum)),
            "process_groups": _halves(zlib.crc32(groups.encode()))}


def header_table(fields, rank, world):
    """The (world, 12) float32 table with this rank's header in its row, zeros elsewhere."""
    mine = np.array([v for f in _FIELDS for v in fields[f]], np.float32)
    table = np.zeros((world, mine.size), np.float32)
    table[rank] = mine
    return table


def _ranks_text(ranks):
    return "rank " + str(ranks[0]) if len(ranks) == 1 else "ranks " + str(ranks)


def check_same_layout(num_features, dtype, data_format, eps, momentum, process_groups):
    """Raises SyncBatchNormMismatchError on every rank unless all ranks pass the same layout."""
    from mindspore import Tensor, ops
    from mindspore.communication import GlobalComm, get_group_size, get_rank
    rank, world = get_rank(), get_group_size()
    if world < 2:
        return
    fields = _header(num_features, dtype, data_format, eps, momentum, process_groups)
    table = header_table(fields, rank, world)
    try:
        got = ops.AllReduce(ops.ReduceOp.SUM, GlobalComm.WORLD_COMM_GROUP)(Tensor(table)).asnumpy()
    except RuntimeError as err:
        name, value = comm_timeout_s()
        raise SyncBatchNormPeerLostError(
            f"SyncBatchNorm: the layout check of a new SyncBatchNorm({num_features}) on rank {rank} (world of "
            f"{world}) did not complete within {name}={value} s. Check that every rank is alive, reachable "
            f"(master_addr, the network between the hosts) and builds the same SyncBatchNorm layers in the same "
            f"order. MindSpore said: {err}") from err
    shown = {"num_features": num_features, "dtype": dtype, "data_format": data_format, "eps": eps,
             "momentum": momentum, "process_groups": process_groups}
    problem = layout_mismatch(got, rank, fields, shown)
    if problem:
        raise SyncBatchNormMismatchError(problem)


def layout_mismatch(table, rank, fields, shown):
    """The error text for the first field in which a row of the gathered `table` differs from ours, or None."""
    col = 0
    for field in _FIELDS:
        width = len(fields[field])
        cols = table[:, col:col + width].astype(np.int64)
        mine = np.array(fields[field], np.int64)
        col += width
        same = np.all(cols == mine, axis=1)
        if np.all(same):
            continue
        differ = [int(r) for r in np.nonzero(~same)[0]]
        if field == "magic":
            return (f"SyncBatchNorm: a layout header expected from every rank, got none from {_ranks_text(differ)}"
                    f" (it ran another collective of the same size at this point). The ranks build different "
                    f"SyncBatchNorm layers or run different code; nothing was synchronised yet.")
        if field == "num_features":
            values = cols[:, 0] * 65536 + cols[:, 1]
            detail = ", ".join(f"{int(v)} on {_ranks_text([int(r) for r in np.nonzero(values == v)[0]])}"
                               for v in np.unique(values))
        else:
            detail = f"something else on {_ranks_text(differ)}"
        return (f"SyncBatchNorm: {field} expected the same on every rank (rank {rank} has "
                f"{shown.get(field, field)!r}), got {detail}. The ranks build different SyncBatchNorm layers (or "
                f"in a different order); nothing was synchronised yet.")
    return None


def _rank_and_world():
    from .. import ms_compat
    if not ms_compat.global_comm().INITED:
        return 0, 1
    from mindspore.communication import get_group_size, get_rank
    return get_rank(), get_group_size()


def register_layer(layer):
    _LAYERS[id(layer)] = layer


def _group_lines(network):
    layers = []
    if network is not None:
        from ._sync import SyncBatchNorm
        layers = [(name, cell) for name, cell in network.cells_and_names() if isinstance(cell, SyncBatchNorm)]
    if not layers:
        layers = [(f"SyncBatchNorm({cell.num_features})", cell) for cell in list(_LAYERS.values())]
    groups = {}
    for name, cell in layers:
        if cell.group_ranks and len(cell.group_ranks) > 1:
            groups.setdefault(tuple(cell.group_ranks), []).append(name or "the network")
    return groups


def _wait(out):
    """Waits for the step's results (PYNATIVE runs them asynchronously): its errors belong to this step."""
    from mindspore import Tensor, context
    if isinstance(out, Tensor):
        out.asnumpy()
    elif isinstance(out, (tuple, list)):
        for item in out:
            _wait(item)
    elif isinstance(out, dict):
        for item in out.values():
            _wait(item)
    if context.get_context("device_target") != "CPU":   # on CPU this call only logs that it is unsupported
        import mindspore as ms
        ms.runtime.synchronize()


class SyncGuard:
    """Runs training steps; a failed collective becomes SyncBatchNormPeerLostError with its context.

        step = SyncGuard(train_one_step, network=net)
        for batch in data:
            loss = step(*batch)       # step.step: the number of the step being run (1, 2, ...)

    ``first_step`` numbers the first call (e.g. the step after the checkpoint a
    job resumes from). Other errors pass through unchanged.
    """

    def __init__(self, step_fn, network=None, first_step=1):
        self.step_fn = step_fn
        self.network = network
        self.step = int(first_step) - 1

    def __call__(self, *args, **kwargs):
        self.step += 1
        try:
            out = self.step_fn(*args, **kwargs)
            _wait(out)
            return out
        except RuntimeError as err:
            if isinstance(err, SyncBatchNormPeerLostError) or not _COLLECTIVE_TEXT.search(str(err)):
                raise
            raise self.peer_lost(err) from err

    def peer_lost(self, err):
        """The error for a failed collective: the step, the groups it may belong to, what to check."""
        rank, world = _rank_and_world()
        groups = _group_lines(self.network)
        mine = [g for g in groups if rank in g]
        where = [f"group {list(g)} (SyncBatchNorm {', '.join(groups[g])})" for g in mine]
        if not any(len(g) == world for g in mine):
            where.append(f"all {world} ranks (the gradient reducer, other collectives)")
        peers = sorted(set(range(world)) - {rank})
        name, value = comm_timeout_s()
        said = str(err).strip().splitlines()[0] if str(err).strip() else repr(err)
        return SyncBatchNormPeerLostError(
            f"SyncBatchNorm lost a peer in step {self.step}: on rank {rank} (world of {world}) a collective of "
            f"the step did not complete; a peer waits at most {name}={value} s (MindSpore said: {said}). "
            f"The collective belongs to {' or '.join(where)}. Check: whether one of {_ranks_text(peers)} exited "
            f"or was killed (its worker log, msrun's output on its host, 'is timed out' in the scheduler log), "
            f"whether its host is reachable from this one (link, firewall, master_addr/port), and that every "
            f"rank runs the same steps. Resume every rank from the last checkpoint once all hosts are back.")
