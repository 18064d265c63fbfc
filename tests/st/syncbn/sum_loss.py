"""The loss of the SyncBatchNorm tests: sum(bn(x) * w), with y as the auxiliary output.

Shared by the msrun workers (worker.py, mh_worker.py: their folder is on sys.path) and
tests/ut/test_sync_batchnorm.py (this folder is on pytest's pythonpath)."""
from mindspore import nn


class WeightedSumLoss(nn.Cell):
    def __init__(self, bn):
        super().__init__()
        self.bn = bn

    def construct(self, x, w):
        y = self.bn(x)
        return (y * w).sum(), y
