"""`python -m mindspore_bn_grad demo`: train a small CNN whose BatchNorm backward is ours.

Data: the handwritten digits scikit-learn ships inside its package (1797
images, 8x8, 10 classes; offline; ``pip install mindspore-bn-grad[demo]``).
The network is written with plain ``mindspore.nn`` cells and converted with
``convert_batchnorm``, so every BatchNorm backward runs BatchNormBackward.
GRAPH mode on CPU, seeded and deterministic. It ends with the test accuracy
and a gradient parity check against MindSpore's built-in BatchNorm on one
batch.
"""
import argparse
import sys
import time

import numpy as np

from .args import mode_name, positive_float, positive_int

N_CLASSES = 10
N_TRAIN = 1438  # of scikit-learn's 1797 digits, after the 20% test split


def parse_args(argv):
    p = parser()
    args = p.parse_args(argv)
    if args.batch_size > N_TRAIN:
        p.error(f"argument --batch-size: expected at most the {N_TRAIN} training images, got {args.batch_size}")
    return args


def parser():
    p = argparse.ArgumentParser(prog="python -m mindspore_bn_grad demo", description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=positive_int, default=8, help="passes over the training images (>= 1; default 8)")
    p.add_argument("--batch-size", type=positive_int, default=64,
                   help="images per step (>= 1, at most the 1438 training images; default 64)")
    p.add_argument("--lr", type=positive_float, default=0.05, help="Momentum learning rate (> 0; default 0.05)")
    p.add_argument("--seed", type=int, default=0, help="seed of the split, the shuffling and the weights (default 0)")
    p.add_argument("--mode", type=mode_name, default="GRAPH",
                   help="MindSpore execution mode, GRAPH or PYNATIVE, any case (default GRAPH)")
    return p


def load_digits_split(seed, test_fraction=0.2):
    """(x_train, y_train, x_test, y_test): float32 NCHW images scaled to [0, 1], int32 labels."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise SystemExit("the demo needs scikit-learn: pip install 'mindspore-bn-grad[demo]'") from e
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    y = digits.target.astype(np.int32)
    order = np.random.RandomState(seed).permutation(len(y))
    n_test = int(round(len(y) * test_fraction))
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def build_net():
    """A small CNN written with MindSpore's own cells (BatchNorm2d x3, BatchNorm1d x1)."""
    from mindspore import nn

    def conv_block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, pad_mode="same", has_bias=False, weight_init="he_uniform"),
                nn.BatchNorm2d(cout), nn.ReLU()]

    return nn.SequentialCell(
        conv_block(1, 16)
        + conv_block(16, 32) + [nn.MaxPool2d(2, 2)]            # 32 x 4 x 4
        + conv_block(32, 64) + [nn.MaxPool2d(2, 2)]            # 64 x 2 x 2
        + [nn.Flatten(), nn.Dense(256, 64, weight_init="he_uniform"), nn.BatchNorm1d(64), nn.ReLU(),
           nn.Dense(64, N_CLASSES, weight_init="he_uniform")])


def make_train_step(net, lr):
    """A GRAPH-compilable step: forward, loss, gradients, Momentum update; returns (loss, logits)."""
    from mindspore import nn, ops

    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), learning_rate=lr, momentum=0.9, weight_decay=1e-4)

    class TrainStep(nn.Cell):
        def __init__(self):
            super().__init__(auto_prefix=False)  # keep the network's parameter names
            self.net, self.loss_fn, self.opt = net, loss_fn, opt
            self.grad_fn = ops.value_and_grad(self.forward, None, opt.parameters, has_aux=True)

        def forward(self, x, y):
            logits = self.net(x)
            return self.loss_fn(logits, y), logits

        def construct(self, x, y):
            (loss, logits), grads = self.grad_fn(x, y)
            self.opt(grads)
            return loss, logits

    step = TrainStep()
    step.set_train()
    return step


def gradient_parity(trained, x, y):
    """(max relative difference, number of compared arrays, how the reference ran) between our
    gradients and the built-in BatchNorm's on one batch.

    Once the native route is loaded, every ``nn.BatchNorm*`` of the process runs our kernels, the
    unconverted network's too; the reference network then runs inside ``use_mindspore_kernels()``, and
    MindSpore's own kernels must have been launched for it (their launch counter), or the comparison
    would be ours against ours."""
    import contextlib
    import mindspore as ms
    from mindspore import nn
    from ..cpu_kernel import factory
    from ..nn import convert_batchnorm

    values = {p.name: p.data.copy() for p in trained.get_parameters()}
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    native = bool(factory.state().legacy)
    grads, reference = [], "MindSpore's own kernels"
    for ours in (False, True):
        net = build_net()
        for p in net.get_parameters():
            p.set_data(values[p.name].copy())
        if ours:
            convert_batchnorm(net)
        net.set_train()
        fn = ms.value_and_grad(nn.WithLossCell(net, loss_fn), grad_position=0, weights=net.trainable_params())
        theirs_before = factory.legacy_launches(mindspore=True)
        with factory.use_mindspore_kernels() if native and not ours else contextlib.nullcontext():
            loss, (dx, dw) = fn(ms.Tensor(x), ms.Tensor(y))
            grads.append([dx.asnumpy()] + [g.asnumpy() for g in dw] + [loss.asnumpy()])
        if native and not ours:
            launched = factory.legacy_launches(mindspore=True) - theirs_before
            if launched == 0:
                raise RuntimeError("demo: the reference network did not launch MindSpore's own BatchNorm kernels")
            reference = f"MindSpore's own kernels, {launched} launches"
    scale = max(float(np.abs(g).max()) for g in grads[0])
    worst = max(float(np.abs(a - b).max()) for a, b in zip(*grads)) / scale
    return worst, len(grads[0]), reference


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import mindspore as ms
    import mindspore_bn_grad as mbg
    from ..nn import convert_batchnorm

    ms.set_device("CPU")
    ms.set_context(mode=ms.GRAPH_MODE if args.mode == "GRAPH" else ms.PYNATIVE_MODE)
    ms.set_seed(args.seed)
    t_start = time.perf_counter()
    mbg.BatchNormBackward()  # builds the CPU kernel on first use (cached afterwards)
    print(f"BatchNormBackward CPU kernel ready in {time.perf_counter() - t_start:.1f} s", flush=True)

    x_train, y_train, x_test, y_test = load_digits_split(args.seed)
    print(f"digits: {len(y_train)} train / {len(y_test)} test images, 8x8; mode {args.mode}, CPU",
          flush=True)
    net = convert_batchnorm(build_net())
    n_bn = sum(isinstance(c, (mbg.nn.BatchNorm1d, mbg.nn.BatchNorm2d)) for _, c in net.cells_and_names())
    print(f"model: {n_bn} BatchNorm cells converted to mindspore_bn_grad (backward = BatchNormBackward)",
          flush=True)
    step = make_train_step(net, args.lr)
    x_test_t = ms.Tensor(x_test)

    def evaluate():
        net.set_train(False)
        pred = net(x_test_t).asnumpy().argmax(axis=1)
        net.set_train(True)
        return float((pred == y_test).mean())

    rng = np.random.RandomState(args.seed)
    bs = args.batch_size
    n_steps = len(y_train) // bs  # full batches only: one compiled graph
    test_acc = 0.0
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(y_train))
        losses, correct, step_times = [], 0, []
        for i in range(n_steps):
            idx = order[i * bs:(i + 1) * bs]
            t0 = time.perf_counter()
            loss, logits = step(ms.Tensor(x_train[idx]), ms.Tensor(y_train[idx]))
            loss = float(loss.asnumpy())
            step_times.append(time.perf_counter() - t0)
            losses.append(loss)
            correct += int((logits.asnumpy().argmax(axis=1) == y_train[idx]).sum())
        test_acc = evaluate()
        # the first step of the first epoch includes graph compilation
        steady = step_times[1:] if epoch == 1 and len(step_times) > 1 else step_times
        note = f" (first step incl. compile {step_times[0]:.1f} s)" if epoch == 1 else ""
        print(f"epoch {epoch:2d}/{args.epochs}  loss {np.mean(losses):.4f}  "
              f"train acc {correct / (n_steps * bs):.4f}  test acc {test_acc:.4f}  "
              f"{1000 * np.mean(steady):.1f} ms/step{note}", flush=True)

    print(f"test accuracy: {test_acc:.4f}")
    worst, n, reference = gradient_parity(net, x_train[:bs], y_train[:bs])
    verdict = "OK" if worst < 1e-4 else "MISMATCH"
    print(f"gradient parity vs mindspore.nn.BatchNorm ({reference}; one batch of {bs}, input + {n - 2} "
          f"parameter gradients + loss): max relative difference {worst:.2e} {verdict}")
    print(f"total time: {time.perf_counter() - t_start:.1f} s")
    return 0 if verdict == "OK" else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
