"""Data-parallel training with SyncBatchNorm on CPU: run through msrun (see
scripts/run_syncbn_example.sh), one process per worker.

A small conv net on synthetic two-class images; every rank trains on its own
shard (ranks get different batch sizes on purpose), BatchNorm statistics are
synchronised across the ranks by mindspore_bn_grad.nn.SyncBatchNorm and the
parameter gradients are averaged by MindSpore's data-parallel grad reducer.
Prints the loss per epoch on rank 0 and checks at the end that every rank
holds the same parameters and running statistics.

    python examples/syncbn_train.py [--mode pynative|graph] [--epochs N]
"""
import argparse

import numpy as np


def make_data(rank, world, n_total=192, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n_total)
    x = rng.standard_normal((n_total, 1, 8, 8)).astype(np.float32)
    x[y == 1, :, 2:6, 2:6] += 1.5        # class 1: a bright square
    # uneven shards: rank r gets a share proportional to r + 1
    bounds = np.cumsum([0] + [(r + 1) for r in range(world)])
    lo, hi = (n_total * bounds[rank] // bounds[-1], n_total * bounds[rank + 1] // bounds[-1])
    return x[lo:hi], y[lo:hi].astype(np.int32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["pynative", "graph"], default="pynative")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batches", type=int, default=4, help="steps per epoch")
    args = ap.parse_args()

    import mindspore as ms
    from mindspore import Tensor, nn, ops
    from mindspore.communication import get_group_size, get_rank, init

    from mindspore_bn_grad.nn._sync import SyncBatchNorm

    ms.set_device("CPU")
    ms.set_context(mode=ms.GRAPH_MODE if args.mode == "graph" else ms.PYNATIVE_MODE)
    init()
    rank, world = get_rank(), get_group_size()
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
    ms.set_seed(1)

    net = nn.SequentialCell([
        nn.Conv2d(1, 8, 3, pad_mode="same", weight_init="he_uniform"),
        SyncBatchNorm(8),
        nn.ReLU(),
        nn.AvgPool2d(2, 2),
        nn.Flatten(),
        nn.Dense(8 * 4 * 4, 2),
    ])
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)
    train = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), opt)
    train.set_train()

    x, y = make_data(rank, world)
    xb, yb = np.array_split(x, args.batches), np.array_split(y, args.batches)
    allreduce = ops.AllReduce()
    for epoch in range(args.epochs):
        total = 0.0
        for bx, by in zip(xb, yb):
            total += float(train(Tensor(bx), Tensor(by)).asnumpy())
        mean_loss = allreduce(Tensor(np.array([total / len(xb)], np.float32))).asnumpy()[0] / world
        if rank == 0:
            print(f"epoch {epoch}: mean loss over ranks {mean_loss:.4f}", flush=True)

    net.set_train(False)
    logits = net(Tensor(x)).asnumpy()
    acc = float((logits.argmax(1) == y).mean())
    # every rank must hold the same weights and running statistics
    flat = np.concatenate([p.asnumpy().ravel() for p in net.get_parameters()]).astype(np.float32)
    spread = allreduce(Tensor(flat)).asnumpy() / world - flat
    print(f"rank {rank}: {len(x)} samples, train accuracy {acc:.3f}, "
          f"max parameter difference to the rank mean {np.abs(spread).max():.2e}", flush=True)
    if np.abs(spread).max() > 1e-4:
        raise SystemExit(f"rank {rank}: parameters diverged across ranks")


if __name__ == "__main__":
    main()
