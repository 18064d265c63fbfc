"""PYNATIVE launches of our operators from several Python threads, and telling GRAPH compilation apart.

MindSpore 2.10's PYNATIVE launch path is not safe against several Python
threads at once: the first launch of an operator from several threads fails
("The pointer[runtime_info] is null") or crashes, built-in operators too; aot
Custom operators abort the process now and then even when warm ("The
pointer[task] is null", munmap_chunk); and ``ops.BatchNorm`` launched from
several threads at once gives wrong numbers now and then. Our public entry
points, our cells' forward and SyncBatchNorm's backward steps launch under
``LOCK``, so they are serialised against each other. The BatchNorm cells'
backward does not (a mode test inside their bprop breaks MindSpore's
second-order graph); it runs in the thread computing gradients, and MindSpore
2.10 cannot compute gradients in two threads at once ("Can not find top cell
for backward"). Only the launch is serialised (PYNATIVE runs
kernels asynchronously, after the launch returns); an uncontended acquire
costs well under a microsecond. Reentrant: a cell may launch through another
of ours.
"""
import threading

from mindspore.ops.primitive import constexpr

LOCK = threading.RLock()


def _probe():
    return 0


@constexpr(check=False)
def _compiling(func):
    return func is None


def compiling():
    """True while MindSpore compiles a graph (``@ms.jit``, a GRAPH ``construct`` or ``bprop``).

    A Python function reaches a constexpr there as None (MindSpore's own
    ``_run_in_jit`` works this way). In PYNATIVE this is a plain call (docs/performance.md).
    """
    return _compiling(_probe)


def launch(op, *args):
    """``op(*args)``; in PYNATIVE under LOCK. Usable in graph code (a ``bprop``)."""
    if compiling():
        return op(*args)
    return _locked(op, args)


def _locked(op, args):
    with LOCK:
        return op(*args)


class SerialCall:
    """Mixin for our Cells: a PYNATIVE call runs under LOCK.

    A GRAPH ``construct`` never calls this: its sub-cells are compiled, not called.
    """

    def __call__(self, *args, **kwargs):
        with LOCK:
            return super().__call__(*args, **kwargs)
