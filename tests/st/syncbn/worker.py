"""One msrun worker of the SyncBatchNorm test: python worker.py OUT_DIR MODE[,MODE] [CASE,...].

For every case of cases.py: builds SyncBatchNorm, runs forward + backward of
sum(y * W) on this rank's share of the batch, and saves y, the input
gradient, the gamma/beta gradients and the running statistics to
OUT_DIR/<mode>_<case>_rank<r>.npz (MODE: pynative or graph; all cases when
none are named). test_syncbn_msrun.py checks them.
"""
import os
import sys

import numpy as np

from cases import CASES, EPS, MOMENTUM, data, rank_slice  # run as a script: its folder is on sys.path


def main():
    out_dir, modes = sys.argv[1], sys.argv[2].split(",")
    names = sys.argv[3].split(",") if len(sys.argv) > 3 else list(CASES)
    import mindspore as ms
    from mindspore import Tensor
    from mindspore.communication import get_rank, init

    ms.set_context(device_target="CPU")
    init()
    rank = get_rank()
    from mindspore_bn_grad.nn._sync import SyncBatchNorm
    from sum_loss import WeightedSumLoss

    for mode in modes:
        ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)
        for name in names:
            x, w, gamma, beta, split, fmt, groups = data(name)
            part = rank_slice(rank, split, x.shape[0])
            bn = SyncBatchNorm(gamma.size, eps=EPS, momentum=MOMENTUM, gamma_init=Tensor(gamma),
                               beta_init=Tensor(beta), process_groups=groups, data_format=fmt)
            bn.set_train()
            net = WeightedSumLoss(bn)
            step = ms.value_and_grad(net, grad_position=0, weights=net.trainable_params(), has_aux=True)
            (_, y), (gx, (gg, gb)) = step(Tensor(x[part]), Tensor(w[part]))
            np.savez(os.path.join(out_dir, f"{mode}_{name}_rank{rank}.npz"), y=y.asnumpy(), gx=gx.asnumpy(),
                     gg=gg.asnumpy(), gb=gb.asnumpy(), mm=bn.moving_mean.asnumpy(),
                     mv=bn.moving_variance.asnumpy())
            print(f"rank {rank} {mode} {name} done", flush=True)


if __name__ == "__main__":
    main()
