"""Data-parallel training with SyncBatchNorm on CPU, on one host or several.

Run it once per host with the host layout as options; it starts msrun on
itself (one worker per --workers-per-host, the scheduler on --node-rank 0):

    # host 0 (its address is the master address)
    python examples/syncbn_train.py --hosts 2 --workers-per-host 2 --node-rank 0 \\
        --master-addr 10.77.0.1 --master-port 8118 --groups "0,1;2,3"
    # host 1
    python examples/syncbn_train.py --hosts 2 --workers-per-host 2 --node-rank 1 \\
        --master-addr 10.77.0.1 --master-port 8118 --groups "0,1;2,3"

(docs/syncbn.md: ports, variables, logs; scripts/run_syncbn_example.sh: one host.)
A small conv net on synthetic two-class images; every rank trains on its own
shard (ranks get different batch sizes on purpose), BatchNorm statistics are
synchronised by mindspore_bn_grad.nn.SyncBatchNorm over --groups (default:
all ranks) and the parameter gradients are averaged over all ranks by
MindSpore's data-parallel grad reducer. Each step runs under SyncGuard, so a
lost peer ends the run with SyncBatchNormPeerLostError naming the step; with
--checkpoint-dir every epoch is saved and --resume continues from the last one.
Prints the loss per epoch on rank 0 and checks at the end that every rank
holds the same parameters.
"""
import argparse
import glob
import os
import subprocess
import sys

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


def parse_groups(text):
    """"0,1;2,3" -> [[0, 1], [2, 3]]; "" -> None (all ranks)."""
    if not text:
        return None
    return [[int(r) for r in part.split(",") if r.strip()] for part in text.split(";")]


def options(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=1, help="number of hosts")
    ap.add_argument("--workers-per-host", type=int, default=2, help="msrun workers on each host")
    ap.add_argument("--node-rank", type=int, default=0, help="this host's index (0: runs the scheduler)")
    ap.add_argument("--master-addr", default="127.0.0.1", help="address of host 0, reachable from every host")
    ap.add_argument("--master-port", type=int, default=8118, help="scheduler port on host 0")
    ap.add_argument("--log-dir", default="syncbn_logs", help="msrun's log folder on this host")
    ap.add_argument("--groups", default="", help='process_groups, e.g. "0,1;2,3" (default: all ranks)')
    ap.add_argument("--mode", choices=["pynative", "graph"], default="pynative")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batches", type=int, default=4, help="steps per epoch")
    ap.add_argument("--checkpoint-dir", default="", help="save every rank's network after each epoch here")
    ap.add_argument("--resume", action="store_true", help="continue from the last epoch in --checkpoint-dir")
    return ap.parse_args(argv)


def launch(args):
    """Not under msrun yet: start msrun on this host with the layout, this script as its task."""
    world = args.hosts * args.workers_per_host
    cmd = ["msrun", f"--worker_num={world}", f"--local_worker_num={args.workers_per_host}",
           f"--master_addr={args.master_addr}", f"--master_port={args.master_port}",
           f"--node_rank={args.node_rank}", "--join=True", f"--log_dir={args.log_dir}",
           os.path.abspath(__file__), *sys.argv[1:]]
    return subprocess.call(cmd)


def _last_epoch(ckpt_dir, rank):
    done = [int(p.rsplit("_epoch", 1)[1].split(".")[0]) for p in glob.glob(f"{ckpt_dir}/rank{rank}_epoch*.ckpt")]
    return max(done) if done else -1


def train(args):
    import mindspore as ms
    from mindspore import Tensor, nn, ops
    from mindspore.communication import get_group_size, get_rank, init

    from mindspore_bn_grad.nn import SyncBatchNorm, SyncGuard

    ms.set_device("CPU")
    ms.set_context(mode=ms.GRAPH_MODE if args.mode == "graph" else ms.PYNATIVE_MODE)
    init()
    rank, world = get_rank(), get_group_size()
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
    ms.set_seed(1)

    net = nn.SequentialCell([
        nn.Conv2d(1, 8, 3, pad_mode="same", weight_init="he_uniform"),
        SyncBatchNorm(8, process_groups=parse_groups(args.groups)),
        nn.ReLU(),
        nn.AvgPool2d(2, 2),
        nn.Flatten(),
        nn.Dense(8 * 4 * 4, 2),
    ])
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)
    train_step = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), opt)
    train_step.set_train()

    start = 0
    if args.checkpoint_dir and args.resume:
        last = _last_epoch(args.checkpoint_dir, rank)
        if last >= 0:
            ms.load_param_into_net(train_step, ms.load_checkpoint(f"{args.checkpoint_dir}/rank{rank}_epoch{last}.ckpt"))
            start = last + 1
            print(f"rank {rank}: resumed after epoch {last}", flush=True)

    x, y = make_data(rank, world)
    xb, yb = np.array_split(x, args.batches), np.array_split(y, args.batches)
    step = SyncGuard(train_step, network=net, first_step=start * args.batches + 1)
    allreduce = ops.AllReduce()
    for epoch in range(start, args.epochs):
        total = 0.0
        for bx, by in zip(xb, yb):
            total += float(step(Tensor(bx), Tensor(by)).asnumpy())
        mean_loss = allreduce(Tensor(np.array([total / len(xb)], np.float32))).asnumpy()[0] / world
        if rank == 0:
            print(f"epoch {epoch}: mean loss over ranks {mean_loss:.4f}", flush=True)
        if args.checkpoint_dir:
            os.makedirs(args.checkpoint_dir, exist_ok=True)
            ms.save_checkpoint(train_step, f"{args.checkpoint_dir}/rank{rank}_epoch{epoch}.ckpt")

    net.set_train(False)
    logits = net(Tensor(x)).asnumpy()
    acc = float((logits.argmax(1) == y).mean())
    # every rank must hold the same weights, and the same running statistics unless --groups splits them
    params = net.trainable_params() if args.groups else net.get_parameters()
    flat = np.concatenate([p.asnumpy().ravel() for p in params]).astype(np.float32)
    spread = allreduce(Tensor(flat)).asnumpy() / world - flat
    print(f"rank {rank}: {len(x)} samples, train accuracy {acc:.3f}, "
          f"max parameter difference to the rank mean {np.abs(spread).max():.2e}", flush=True)
    if np.abs(spread).max() > 1e-4:
        raise SystemExit(f"rank {rank}: parameters diverged across ranks")


def main():
    args = options()
    if "MS_ROLE" not in os.environ:   # msrun sets MS_ROLE in the processes it starts
        sys.exit(launch(args))
    train(args)


if __name__ == "__main__":
    main()
