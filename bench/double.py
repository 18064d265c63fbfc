"""Benchmark of the double backward: `python -m mindspore_bn_grad bench --double [--reps N] [--threads N]`.

For each shape (float32, NCHW, training), as medians of interleaved rounds in
one process (see bench.interleaved_medians):
  * op rows: our BatchNormDoubleBackward (the kernel called directly, and the
    primitive in PYNATIVE and GRAPH) vs MindSpore's built-in
    ops.operations._grad_ops.BatchNormGradGrad in the same mode;
  * penalty row: the whole second-order step a user runs, ms.grad of a
    gradient penalty through one BatchNorm2d layer (forward, backward and
    double backward), MindSpore's nn.BatchNorm2d vs the converted layer, in
    GRAPH mode (MindSpore's own layer crashes on a repeated such step in
    PYNATIVE on CPU, see penalty_contestants).
Ratios are MindSpore's time / ours (> 1: ours faster). Prints a Markdown table.
"""
import argparse
import sys

import numpy as np

from mindspore_bn_grad.cli.args import positive_int

from .kernel import Timed, _ms_sync, interleaved_medians, log

SHAPES = [(32, 64, 56, 56), (32, 256, 14, 14), (256, 1024)]
PENALTY_SHAPE = (16, 64, 28, 28)


def _arrays(shape, seed=0):
    rng = np.random.default_rng(seed)
    c = shape[1]
    axes = tuple(i for i in range(len(shape)) if i != 1)
    x = rng.standard_normal(shape, dtype=np.float32)
    f = {"x": x, "dy": rng.standard_normal(shape, dtype=np.float32),
         "ggi": rng.standard_normal(shape, dtype=np.float32),
         "w": rng.uniform(0.5, 1.5, c).astype(np.float32), "ggw": rng.standard_normal(c).astype(np.float32),
         "ggb": rng.standard_normal(c).astype(np.float32),
         "mean": x.mean(axis=axes), "var": x.var(axis=axes)}
    f["invstd"] = (1.0 / np.sqrt(f["var"] + 1e-5)).astype(np.float32)
    return f


def _cell(fn):
    from mindspore import nn

    class Call(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fn = fn

        def construct(self, *args):
            return self.fn(*args)

    return Call()


def _mode_setter(mode):
    import mindspore as ms
    return lambda: ms.set_context(mode=ms.GRAPH_MODE if mode == "GRAPH" else ms.PYNATIVE_MODE)


def op_contestants(shape):
    import mindspore as ms
    from mindspore_bn_grad.ms_compat import builtin_batchnorm_grads

    from mindspore_bn_grad.cpu_kernel.native import prepare_double_direct
    from mindspore_bn_grad.double_backward import BatchNormDoubleBackward
    a = _arrays(shape)
    call, _ = prepare_double_direct(a["dy"], a["x"], a["w"], None, None, a["mean"], a["invstd"], a["ggi"],
                                    a["ggw"], a["ggb"])
    con = {"ours direct": Timed(call)}
    t = {k: ms.Tensor(v) for k, v in a.items()}
    ours_args = (t["dy"], t["x"], t["w"], None, None, t["mean"], t["invstd"], t["ggi"], t["ggw"], t["ggb"])
    # BatchNormGradGrad(x, dy, scale, saved_mean, saved_variance, dout_dx, dout_dscale, dout_dbias) -> (dx, ddy, dscale)
    ms_args = (t["x"], t["dy"], t["w"], t["mean"], t["var"], t["ggi"], t["ggw"], t["ggb"])
    for mode in ("PYNATIVE", "GRAPH"):
        setup = _mode_setter(mode)
        setup()
        ours = BatchNormDoubleBackward(training=True)
        builtin = builtin_batchnorm_grads()[1](is_training=True, epsilon=1e-5)
        if mode == "GRAPH":
            ours, builtin = _cell(ours), _cell(builtin)
        con[f"ours {mode}"] = Timed(lambda op=ours: op(*ours_args), _ms_sync, setup)
        con[f"MindSpore {mode}"] = Timed(lambda op=builtin: op(*ms_args), _ms_sync, setup, kernels="mindspore")
    return con


def _penalty_step(bn, v):
    """ms.grad (x, gamma, beta) of |d sum(v * sin(bn(x))) / dx|^2."""
    import mindspore as ms
    from mindspore import ops

    def out_sum(x):
        return (ops.sin(bn(x)) * v).sum()

    grad_x = ms.grad(out_sum)

    def penalty(x):
        g = grad_x(x)
        return (g * g).sum()

    return ms.grad(penalty, grad_position=0, weights=[bn.gamma, bn.beta])


def penalty_contestants(shape):
    """GRAPH only: MindSpore's own BatchNorm2d crashes on the second such step in PYNATIVE
    (segfault, or "BatchNormGradGrad: 'reserve_space_2' must be no less than zero"; 2.10, CPU)."""
    import mindspore as ms
    from mindspore import nn

    import mindspore_bn_grad as mbg
    a = _arrays(shape)
    x, v = ms.Tensor(a["x"]), ms.Tensor(a["dy"])
    setup = _mode_setter("GRAPH")
    setup()
    con = {}
    for who in ("ours", "MindSpore"):
        bn = nn.BatchNorm2d(shape[1])
        if who == "ours":
            mbg.convert_batchnorm(bn)
        bn.set_train(True)
        step = _penalty_step(bn, v)
        # From the conversion on, MindSpore's BatchNorm primitives run our kernels (the native route):
        # MindSpore's own are switched back in for its contestant.
        con[f"{who} GRAPH"] = Timed(lambda step=step: step(x), _ms_sync, setup,
                                    kernels="ours" if who == "ours" else "mindspore")
    return con


def _ratio_rows(name, shape, med, modes=("PYNATIVE", "GRAPH")):
    rows = []
    for mode in modes:
        ours, theirs = med[f"ours {mode}"], med[f"MindSpore {mode}"]
        rows.append(f"| {name} | {shape} | {mode} | {ours * 1e3:.2f} | {theirs * 1e3:.2f} | {theirs / ours:.2f}x |")
    return rows


def run_double(reps=15, threads=None):
    from mindspore_bn_grad.cpu_kernel import native
    native.set_num_threads(threads or native.get_num_threads())
    lines = [f"threads: {native.get_num_threads()}; float32, NCHW, training; medians of interleaved rounds "
             "(shared machine: figures are noisy)", "",
             "| what | shape | mode | ours ms | MindSpore ms | MindSpore / ours |", "|---|---|---|---|---|---|"]
    direct = []
    for shape in SHAPES:
        log(f"double backward op {shape}")
        med = interleaved_medians(op_contestants(shape), reps)
        lines += _ratio_rows("BatchNormDoubleBackward vs BatchNormGradGrad", shape, med)
        direct.append(f"| ours direct (kernel, no MindSpore) | {shape} | - | {med['ours direct'] * 1e3:.2f} | | |")
    log(f"gradient penalty {PENALTY_SHAPE}")
    med = interleaved_medians(penalty_contestants(PENALTY_SHAPE), max(3, reps // 3))
    lines += _ratio_rows("ms.grad of a gradient penalty through BatchNorm2d", PENALTY_SHAPE, med, ("GRAPH",))
    lines += direct
    table = "\n".join(lines)
    print(table)
    return table


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m mindspore_bn_grad bench --double",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=positive_int, default=15, help="timed runs per measurement (default 15)")
    p.add_argument("--threads", type=positive_int, default=None, help="kernel threads, >= 1 (default: all CPUs)")
    args = p.parse_args(sys.argv[1:] if argv is None else list(argv))
    run_double(args.reps, args.threads)
    return 0
