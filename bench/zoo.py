"""`bench --zoo`: networks of a public model zoo (mindcv), original against converted, in one process.

For each (model, mode): the model is built from a fixed seed and deep-copied; the copy goes through
convert_batchnorm. Then, with the original on MindSpore's own BatchNorm kernels and the converted
copy on ours (the launch counters check both):
  1. values, PYNATIVE: every BatchNorm layer of the original's training step, on its own
     activations (x and dy captured by hooks): grad_input, grad_weight and grad_bias of
     ops.BatchNorm(is_training=True) on our kernel and on MindSpore's, each against a float64
     reference; the worst relative error of each kernel over the layers (ours must be <= 1e-5);
  2. one step's loss and running statistics from the same weights on the same batch (equal within
     1e-5 / 1e-4), and the whole gradient as information: its relative L2 difference, beside the
     original's own against the batch moved by one rounding step. The two kernels round
     differently (both within 1e-6 of float64 per layer); over tens of layers the activations drift
     apart by ~1e-5, and every ReLU input that this moves across 0 (or ReLU6's 6) switches a
     gradient path: a deep network's gradient differs by up to a few percent between any two
     correct kernels, while its loss and statistics agree;
  3. steady-state training steps (nn.TrainOneStepCell, Momentum) of four networks built from the same
     seed, in the order original, converted, converted, original (ABBA): in one process a network
     built (and compiled) later runs its steps slower, whatever its kernels (bench/RESULTS_ZOO.md),
     so a single pair would favour whichever variant was built first. Rounds of
     steps in which the four alternate step by step (the order reversed every other round); per
     variant the median over its two networks' steps; ratio = original / converted step time.

mindcv is not a dependency of this project: `pip install mindcv==0.3.0 tqdm pyyaml` (0.3.0 runs on
MindSpore 2.10). Results: bench/results/bench_zoo.{json,md}, summarised in bench/RESULTS_ZOO.md.

    python -m mindspore_bn_grad bench --zoo [--models resnet50,mobilenet_v2_100] [--modes GRAPH,PYNATIVE]
                                            [--batch 8] [--image 64] [--rounds 5] [--steps 3] [--out DIR]
"""
import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from . import kernel as bench

MODELS = ("resnet50", "mobilenet_v2_100", "densenet121", "efficientnet_b0", "shufflenet_v2_x1_0",
          "regnet_x_200mf", "ghostnet_100", "mnasnet_100")
MODES = ("GRAPH", "PYNATIVE")
GRAD_FLOOR = 1e-4      # per-parameter errors are relative to max(|g|, GRAD_FLOOR * the largest |g|)
LAYER_TOL = 1e-5       # a BatchNorm layer's gradients on our kernel against float64 (max error / max |ref|)
STATS_TOL = 1e-4       # running statistics: |a - b| <= STATS_TOL * (1 + |a|)
LOSS_TOL = 1e-5


def log(msg):
    bench.log(msg)


def compare_grads(want, got):
    """(relative L2 error of the whole gradient, worst per-parameter error on its floored scale)."""
    flat_w = np.concatenate([w.ravel().astype(np.float64) for w in want])
    flat_g = np.concatenate([g.ravel().astype(np.float64) for g in got])
    whole = float(np.linalg.norm(flat_g - flat_w) / max(np.linalg.norm(flat_w), 1e-30))
    top = max(float(np.max(np.abs(w))) for w in want)
    worst = max(float(np.max(np.abs(g.astype(np.float64) - w))) / max(float(np.max(np.abs(w))), GRAD_FLOOR * top,
                                                                        1e-30)
                for w, g in zip(want, got))
    return whole, worst


def stats_error(want, got):
    """Worst |a - b| / (1 + |a|) over the running statistics (dicts by parameter name)."""
    return max((float(np.max(np.abs(got[k].astype(np.float64) - want[k]) / (1.0 + np.abs(want[k]))))
                for k in want), default=0.0)


def reference_grads(x, dy, gamma, eps):
    """float64 grad_input, grad_weight, grad_bias of a training BatchNorm (channel axis 1)."""
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    n = x.size / x.shape[1]
    mean = x.mean(axis=axes)
    invstd = 1.0 / np.sqrt(x.var(axis=axes) + eps)
    xhat = (x - mean.reshape(shape)) * invstd.reshape(shape)
    db = dy.sum(axis=axes)
    dw = (dy * xhat).sum(axis=axes)
    dx = (gamma * invstd).reshape(shape) / n * (n * dy - db.reshape(shape) - xhat * dw.reshape(shape))
    return dx, dw, db


def layer_errors(net, x, y):
    """Worst relative error against float64 of MindSpore's kernel and ours, over every BatchNorm layer
    of one training step of `net` (PYNATIVE: hooks capture each layer's x and dy)."""
    import mindspore as ms
    from mindspore import nn, ops
    caps = {}
    handles = []
    for cname, cell in net.cells_and_names():
        if isinstance(cell, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)):
            def fwd(c, inputs, outputs, cname=cname):
                caps[cname] = {"x": inputs[0].asnumpy().copy(), "gamma": c.gamma.asnumpy().copy(), "eps": c.eps}

            def bwd(c, grad_in, grad_out, cname=cname):
                caps[cname]["dy"] = grad_out[0].asnumpy().copy()
            handles += [cell.register_forward_hook(fwd), cell.register_backward_hook(bwd)]
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    _on("mindspore", lambda: ms.value_and_grad(lambda a, b: loss_fn(net(a), b), None,
                                               net.trainable_params())(x, y)[0].asnumpy())
    for h in handles:
        h.remove()
    worst = {"mindspore": 0.0, "ours": 0.0}
    for d in caps.values():
        c = d["x"].shape[1]
        bn = ops.BatchNorm(is_training=True, epsilon=d["eps"], momentum=0.1)
        rm = ms.Parameter(ms.Tensor(np.zeros(c, np.float32)), name="zoo_rm")
        rv = ms.Parameter(ms.Tensor(np.ones(c, np.float32)), name="zoo_rv")
        sens = ms.Tensor(d["dy"])
        grad = ms.grad(lambda a, w, b: (bn(a, w, b, rm, rv)[0] * sens).sum(), grad_position=(0, 1, 2))
        ref = reference_grads(d["x"].astype(np.float64), d["dy"].astype(np.float64), d["gamma"].astype(np.float64),
                              d["eps"])
        for kernels in worst:
            got, _ = _on(kernels, lambda: [g.asnumpy() for g in grad(ms.Tensor(d["x"]), ms.Tensor(d["gamma"]),
                                                                       ms.Tensor(np.zeros(c, np.float32)))])
            for g, r in zip(got, ref):
                worst[kernels] = max(worst[kernels], float(np.max(np.abs(g - r)) / max(float(np.max(np.abs(r))), 1e-30)))
    return worst, len(caps)


def _mindcv():
    try:
        import mindcv
    except ImportError:
        return None
    return mindcv


def _batch(args):
    rng = np.random.default_rng(0)
    import mindspore as ms
    return (ms.Tensor(rng.standard_normal((args.batch, 3, args.image, args.image)).astype(np.float32)),
            ms.Tensor(rng.integers(0, 10, args.batch).astype(np.int32)))


def _original(mindcv, name):
    """The model with the same initial weights on every call (seed 0)."""
    import mindspore as ms
    ms.set_seed(0)
    return mindcv.create_model(name, num_classes=10, pretrained=False)


def _networks(mindcv, name):
    """(original, converted deep copy of it)."""
    from mindspore_bn_grad import convert_batchnorm
    net = _original(mindcv, name)
    return net, convert_batchnorm(copy.deepcopy(net))


def one_step(net, x, y):
    """(loss, gradients, running statistics) of one step of `net` in training."""
    import mindspore as ms
    from mindspore import nn
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    params = ms.ParameterTuple(net.trainable_params())

    class Step(nn.Cell):
        def __init__(self):
            super().__init__()
            self.net = net
            self.grad = ms.ops.GradOperation(get_by_list=True)

        def construct(self, a, b):
            return self.grad(lambda u, v: loss_fn(self.net(u), v), params)(a, b)
    net.set_train(True)
    loss = float(loss_fn(net(x), y).asnumpy())
    grads = [g.asnumpy() for g in Step()(x, y)]
    stats = {p.name: p.asnumpy().astype(np.float64) for p in net.get_parameters() if "moving_" in p.name}
    return loss, grads, stats


def _on(kernels, fn):
    """fn() with MindSpore's BatchNorm kernels ("mindspore") or ours, and how many of ours launched."""
    from mindspore_bn_grad.cpu_kernel import factory
    bench.select_kernels(kernels)
    try:
        before = factory.legacy_launches()
        out = fn()
        return out, factory.legacy_launches() - before
    finally:
        bench.select_kernels("ours")


def train_step(net, x, y):
    from mindspore import nn
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.01, momentum=0.9)
    cell = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), opt)
    cell.set_train(True)
    return lambda: cell(x, y).asnumpy()


def model_row(mindcv, name, mode, args):
    import mindspore as ms
    from mindspore_bn_grad import convert_batchnorm
    ms.set_context(mode=ms.GRAPH_MODE if mode == "GRAPH" else ms.PYNATIVE_MODE)
    x, y = _batch(args)
    original, converted = _networks(mindcv, name)
    (lo, go, so), theirs_ours = _on("mindspore", lambda: one_step(original, x, y))
    (lc, gc, sc), ours = _on("ours", lambda: one_step(converted, x, y))
    whole, worst = compare_grads(go, gc)
    nudged = x * ms.Tensor(np.float32(1.0 + 2.0 ** -23))
    (_, gn, _), _ = _on("mindspore", lambda: one_step(_original(mindcv, name), nudged, y))
    noise_whole, _ = compare_grads(go, gn)
    layers, n_layers = (layer_errors(_original(mindcv, name), x, y) if mode == "PYNATIVE" else (None, 0))
    row = {"model": name, "mode": mode, "loss_original": lo, "loss_converted": lc,
           "grad_rel_l2": whole, "grad_worst": worst, "noise_rel_l2": noise_whole,
           "layer_worst_ours": layers and layers["ours"], "layer_worst_mindspore": layers and layers["mindspore"],
           "bn_layers": n_layers, "stats_worst": stats_error(so, sc),
           "params": len(go), "running_stats": len(so), "our_launches_original": theirs_ours,
           "our_launches_converted": ours}
    row["values_ok"] = bool(abs(lo - lc) <= LOSS_TOL * max(1.0, abs(lo)) and row["stats_worst"] <= STATS_TOL
                            and (layers is None or layers["ours"] <= LAYER_TOL)
                            and theirs_ours == 0 and ours > 0)
    # ABBA (module docstring): the pair whose values were checked (the original, then its converted
    # copy), then a converted network and an original, each built from the same seed; compiled in
    # that order too.
    nets = [("original", "mindspore", train_step(original, x, y)), ("converted", "ours", train_step(converted, x, y))]
    nets.append(("converted", "ours", train_step(convert_batchnorm(_original(mindcv, name)), x, y)))
    nets.append(("original", "mindspore", train_step(_original(mindcv, name), x, y)))
    t0 = time.perf_counter()
    for _, kernels, fn in nets:  # compile (GRAPH) and warm up, in the build order
        _on(kernels, fn)
    row["first_steps_s"] = time.perf_counter() - t0
    per_net = [[] for _ in nets]
    for r in range(args.rounds):  # the networks alternate step by step: a slow spell falls on all alike
        order = list(range(len(nets))) if r % 2 == 0 else list(range(len(nets)))[::-1]
        for _ in range(args.steps):
            for i in order:
                _, kernels, fn = nets[i]

                def timed(fn=fn):
                    t = time.perf_counter()
                    fn()
                    return (time.perf_counter() - t) * 1e3
                per_net[i].append(_on(kernels, timed)[0])
    times = {v: [t for (variant, _, _), ts in zip(nets, per_net) if variant == v for t in ts]
             for v in ("original", "converted")}
    row["original_ms"] = statistics.median(times["original"])
    row["converted_ms"] = statistics.median(times["converted"])
    row["ratio"] = row["original_ms"] / row["converted_ms"]
    row["times_ms"] = times
    row["network_order"] = [variant for variant, _, _ in nets]
    row["network_median_ms"] = [statistics.median(ts) for ts in per_net]
    return row


def report(result):
    lines = [f"Machine: {bench.describe_machine(result['machine'])}. mindcv {result['mindcv']}; batch "
             f"{result['settings']['batch']} x 3 x {result['settings']['image']} x {result['settings']['image']}, "
             f"10 classes; {result['settings']['rounds']} rounds of {result['settings']['steps']} steps.", "",
             "| model | mode | values | BatchNorm layers vs float64: ours / MindSpore's | worst running stat "
             "| whole gradient rel. L2 (original nudged) | original ms | converted ms | original / converted "
             "| each network, built O C C O, ms |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in result["rows"]:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['mode']} | failed: {r['error'][:150]} | | | | | | | |")
            continue
        layers = ("–" if r["layer_worst_ours"] is None else
                  f"{r['layer_worst_ours']:.1e} / {r['layer_worst_mindspore']:.1e} ({r['bn_layers']} layers)")
        lines.append(f"| {r['model']} | {r['mode']} | {'equal' if r['values_ok'] else 'DIFFER'} | {layers} | "
                     f"{r['stats_worst']:.1e} | {r['grad_rel_l2']:.1e} ({r['noise_rel_l2']:.1e}) | "
                     f"{r['original_ms']:.1f} | {r['converted_ms']:.1f} | {r['ratio']:.2f}x | "
                     f"{' / '.join(f'{t:.1f}' for t in r.get('network_median_ms', []))} |")
    return "\n".join(lines) + "\n"


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m mindspore_bn_grad bench --zoo", description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated mindcv model names")
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated, of GRAPH, PYNATIVE")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--image", type=int, default=64)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--out", default=None, help="directory for bench_zoo.{json,md} (default: as bench --train)")
    args = p.parse_args(argv)
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    args.modes = [m.strip().upper() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in args.modes if m not in MODES]
    if bad or not args.modes or not args.models:
        raise SystemExit(f"bench --zoo: --modes expected a comma-separated list of GRAPH, PYNATIVE and "
                         f"--models a non-empty list, got {args.modes}, {args.models}")
    for name in ("batch", "image", "rounds", "steps"):
        if getattr(args, name) < 1:
            raise SystemExit(f"bench --zoo: --{name} expected a positive integer, got {getattr(args, name)}")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    mindcv = _mindcv()
    if mindcv is None:
        print("bench --zoo: needs mindcv, which this project does not depend on: "
              "pip install mindcv==0.3.0 tqdm pyyaml", file=sys.stderr)
        return 2
    from mindspore_bn_grad.cpu_kernel import factory
    if not factory.legacy_status():
        print("bench --zoo: our kernels do not stand in for MindSpore's BatchNorm here (the native route's "
              "default mechanism is off), so there is nothing to compare", file=sys.stderr)
        return 2
    result = {"machine": bench.machine_info(None), "mindcv": getattr(mindcv, "__version__", "?"),
              "settings": {k: getattr(args, k) for k in ("models", "modes", "batch", "image", "rounds", "steps")},
              "rows": []}
    out = Path(args.out) if args.out else bench.default_out_dir()
    out.mkdir(parents=True, exist_ok=True)
    for name in args.models:
        for mode in args.modes:
            log(f"[zoo] {name} {mode}")
            try:
                row = model_row(mindcv, name, mode, args)
            except Exception as e:  # noqa: BLE001  (one model's failure is a row of the report)
                row = {"model": name, "mode": mode, "error": f"{type(e).__name__}: {str(e).splitlines()[0]}"}
            log("    " + ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                                   for k, v in row.items() if k != "times_ms"))
            result["rows"].append(row)
            (out / "bench_zoo.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    (out / "bench_zoo.md").write_text(report(result), encoding="utf-8")
    print(report(result))
    return 0 if all(r.get("values_ok") for r in result["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
