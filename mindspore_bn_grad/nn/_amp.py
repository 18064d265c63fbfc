"""How our cells meet MindSpore's automatic mixed precision (``mindspore.amp``, MindSpore 2.10).

Two mechanisms of AMP would otherwise break a converted network:

- O2 / O3 call ``Cell.to_float(float16)``, which flags every cell below the
  network. In GRAPH mode a flagged cell casts its inputs on entry. Our
  train / infer cells take the running statistics as inputs (like the
  ``ops.BatchNorm`` they stand in for) and update them in place: the update
  would land in a float16 copy and be lost, and the gamma / beta gradients
  would come back float16. ``PrecisionNeutral`` cells ignore the precision
  flags, so they receive exactly what the primitive would have received from
  the (flagged) BatchNorm cell around them.
- O1 rewrites the network with ``mindspore.rewrite``: every cell whose class
  is not MindSpore's own is parsed and regenerated as Python source that
  imports the class again by the file name of its module
  (``from _layers import OurBatchNorm``), which a module of a package cannot
  survive. ``opaque_to_rewrite`` puts a class on the rewrite's list of cells
  it keeps as they are (the same objects, hence the same Parameters). O1
  casts only around white-listed operators (convolutions, matmuls, ...), and
  a BatchNorm holds none, so nothing is lost by not rewriting its inside.

The rewritten_network/ folder that O1 leaves in the working directory is
MindSpore's own (it writes one there for any network); our cells add nothing
to it.
"""
from .. import ms_compat

PRECISION_FLAGS = ("fp16", "fp32", "bf16")


class PrecisionNeutral:
    """Mixin for a Cell that stands in for a primitive: ``to_float`` flags do not apply to it."""

    def add_flags(self, **flags):
        return super().add_flags(**{k: v for k, v in flags.items() if k not in PRECISION_FLAGS})


def opaque_to_rewrite(cls):
    """Class decorator: ``mindspore.rewrite`` (AMP O1) keeps instances of ``cls`` as they are."""
    black_list = ms_compat.rewrite_black_list()
    if cls not in black_list:
        black_list.append(cls)
    return cls
