"""The BatchNormForward rows of the per-op benchmark (`bench`), or alone: `bench --forward [--quick] [--reps N]`.

Training mode, weight, bias and running statistics given (updated in place by
the direct kernel, as MindSpore's BatchNormExt does). For each case, as
medians of interleaved rounds (kernel.interleaved_medians), in two passes like
the backward rows:
  1. before MindSpore is imported: our kernel called directly
     (cpu_kernel.native.prepare_forward_direct), a NumPy copy of the same
     bytes (x -> y, one thread), and PyTorch's torch.nn.functional.batch_norm
     (training, the same thread count);
  2. through MindSpore, PYNATIVE: the built-in ops.BatchNorm(is_training=True)
     against our kernel called directly, in the same rounds (and our primitive,
     mindspore_bn_grad.batch_norm_forward, for its launch overhead).
Effective bandwidth counts x read and y written once. Ratios are the other
contestant's time / ours (> 1: ours faster); % copy is of the copy of the same
bytes in the row's own rounds.
"""
import argparse
import gc
import sys

import numpy as np

from .kernel import (Case, Timed, _ms_sync, checked_on, interleaved_medians, legacy_kernels_active, log, ratio,
                     torch_activation)

# (shape in NC... order, layout)
CASES = [((32, 64, 56, 56), "NCHW"), ((32, 256, 14, 14), "NCHW"), ((256, 1024), "NCHW"),
         ((32, 64, 56, 56), "NHWC")]


class FwdCase(Case):
    """A float32 case of kernel.Case (shape in NC... order, layout) with the forward's inputs."""

    def __init__(self, shape, layout):
        super().__init__(shape, "float32", layout)

    def arrays(self, seed=0):
        rng = np.random.default_rng(seed)
        c = self.shape[1]
        return (rng.standard_normal(self.data_shape, dtype=np.float32),
                {"weight": rng.uniform(0.5, 1.5, c).astype(np.float32),
                 "bias": rng.standard_normal(c).astype(np.float32),
                 "running_mean": np.zeros(c, np.float32), "running_var": np.ones(c, np.float32)})


def direct_contestant(case):
    from mindspore_bn_grad.cpu_kernel import native
    x, p = case.arrays()
    call, _ = native.prepare_forward_direct(x, p["weight"], p["bias"], p["running_mean"], p["running_var"],
                                            training=True, momentum=0.1, eps=1e-5,
                                            channel_last=case.channel_last, in_place=True)
    return Timed(call)


def same_bytes_copy(case):
    x, _ = case.arrays()
    y = np.empty_like(x)
    return Timed(lambda: np.copyto(y, x))


def torch_contestant(case, threads):
    try:
        import torch
    except ImportError:
        return None
    x, p = case.arrays()
    tx = torch_activation(x, case)
    tp = {k: torch.from_numpy(v.copy()) for k, v in p.items()}
    fbn = torch.nn.functional.batch_norm
    return Timed(lambda: fbn(tx, tp["running_mean"], tp["running_var"], tp["weight"], tp["bias"], True, 0.1, 1e-5),
                 setup=lambda: torch.set_num_threads(threads))


def ms_builtin_contestant(case, kernels="mindspore"):
    """MindSpore's CPU ops.BatchNorm(is_training=True), PYNATIVE; None where it does not run. kernels="ours":
    the same primitive on our kernel where it stands in for MindSpore's (the nn cells' native route)."""
    import mindspore as ms
    from mindspore import ops
    if kernels == "ours" and (case.channel_last or not legacy_kernels_active()):
        return None
    x, p = case.arrays()
    args = (ms.Tensor(x), ms.Tensor(p["weight"]), ms.Tensor(p["bias"]),
            ms.Parameter(ms.Tensor(p["running_mean"]), name="fwd_bench_rm"),
            ms.Parameter(ms.Tensor(p["running_var"]), name="fwd_bench_rv"))
    op = ops.BatchNorm(is_training=True, epsilon=1e-5, momentum=0.1, data_format=case.layout)
    return checked_on(Timed(lambda: op(*args), _ms_sync, lambda: ms.set_context(mode=ms.PYNATIVE_MODE),
                            kernels=kernels))


def _graph(fn):
    import mindspore as ms

    class Net(ms.nn.Cell):
        def construct(self, *args):
            return fn(*args)
    net = Net()
    return lambda *args: net(*args)


def ms_builtin_graph_contestant(case, kernels="mindspore"):
    """ops.BatchNorm(is_training=True) inside a GRAPH-mode cell (kernels: as ms_builtin_contestant)."""
    import mindspore as ms
    from mindspore import ops
    if case.channel_last or (kernels == "ours" and not legacy_kernels_active()):
        return None
    x, p = case.arrays()
    args = (ms.Tensor(x), ms.Tensor(p["weight"]), ms.Tensor(p["bias"]),
            ms.Parameter(ms.Tensor(p["running_mean"]), name="fwd_bench_grm"),
            ms.Parameter(ms.Tensor(p["running_var"]), name="fwd_bench_grv"))
    net = _graph(ops.BatchNorm(is_training=True, epsilon=1e-5, momentum=0.1))
    return Timed(lambda: net(*args), _ms_sync, lambda: ms.set_context(mode=ms.GRAPH_MODE), kernels=kernels)


def ms_native_contestant(case, mode):
    """MindSpore's BatchNormExt (mint.nn.functional.batch_norm), which the op plugin or the kernel
    factory runs on our kernel: the native route's forward. Channel-first only."""
    import mindspore as ms
    from mindspore import mint
    from mindspore_bn_grad.cpu_kernel import native_kernels_active
    if case.channel_last or not native_kernels_active():
        return None
    x, p = case.arrays()
    args = (ms.Tensor(x), ms.Parameter(ms.Tensor(p["running_mean"]), name=f"fwd_bench_nrm_{mode}"),
            ms.Parameter(ms.Tensor(p["running_var"]), name=f"fwd_bench_nrv_{mode}"),
            ms.Tensor(p["weight"]), ms.Tensor(p["bias"]))

    def fwd(x, rm, rv, w, b):
        return mint.nn.functional.batch_norm(x, rm, rv, w, b, True, 0.1, 1e-5)
    fn = fwd if mode == "PYNATIVE" else _graph(fwd)
    setup = (lambda: ms.set_context(mode=ms.PYNATIVE_MODE if mode == "PYNATIVE" else ms.GRAPH_MODE))
    return Timed(lambda: fn(*args), _ms_sync, setup)


def ms_ours_contestant(case):
    import mindspore as ms
    import mindspore_bn_grad as mbg
    x, p = case.arrays()
    args = (ms.Tensor(x),) + tuple(ms.Tensor(p[k]) for k in ("weight", "bias", "running_mean", "running_var"))
    return Timed(lambda: mbg.batch_norm_forward(*args, training=True, momentum=0.1, eps=1e-5,
                                                data_format=case.layout),
                 _ms_sync, lambda: ms.set_context(mode=ms.PYNATIVE_MODE))


def direct_pass(cases, reps, threads, have_torch):
    """Pass 1 (MindSpore not yet imported): direct, copy of the same bytes, torch."""
    rows = []
    for i, case in enumerate(cases, 1):
        log(f"[forward {i}/{len(cases)}] {case.label()}: direct, copy{', torch' if have_torch else ''}")
        con = {"copy": same_bytes_copy(case), "direct": direct_contestant(case)}
        if have_torch:
            con["torch"] = torch_contestant(case, threads)
        med = interleaved_medians({k: c for k, c in con.items() if c is not None}, reps)
        t = {k: (med[k] * 1e3 if k in med else None) for k in con}
        moved = 2 * case.tensor_bytes
        r = {"shape": list(case.shape), "dtype": case.dtype, "layout": case.layout,
             "tensor_mb": case.tensor_bytes / 1e6, "direct_ms": t["direct"], "copy_ms": t["copy"],
             "direct_gbs": moved / (t["direct"] / 1e3) / 1e9, "copy_gbs": moved / (t["copy"] / 1e3) / 1e9,
             "torch_ms": t.get("torch")}
        r["direct_pct_copy"] = 100 * r["direct_gbs"] / r["copy_gbs"]
        r["speedup_vs_torch"] = ratio(r["torch_ms"], r["direct_ms"])
        del con
        gc.collect()
        log("    " + ", ".join(f"{k}={v:.3g}" for k, v in r.items() if isinstance(v, float)))
        rows.append(r)
    return rows


def mindspore_pass(cases, rows, reps):
    """Pass 2: ops.BatchNorm(is_training=True) vs our kernel (direct, and our primitive) in the same rounds."""
    for i, (case, r) in enumerate(zip(cases, rows), 1):
        log(f"[forward {i}/{len(cases)}] {case.label()}: with MindSpore")
        con = {"direct": direct_contestant(case), "builtin": ms_builtin_contestant(case),
               "ours_pynative": ms_ours_contestant(case), "builtin_graph": ms_builtin_graph_contestant(case),
               "native_pynative": ms_native_contestant(case, "PYNATIVE"),
               "native_graph": ms_native_contestant(case, "GRAPH"),
               "legacy_pynative": ms_builtin_contestant(case, kernels="ours"),
               "legacy_graph": ms_builtin_graph_contestant(case, kernels="ours")}
        med = interleaved_medians({k: c for k, c in con.items() if c is not None}, reps)
        t = {k: (med[k] * 1e3 if k in med else None) for k in con}
        r["ms_round_direct_ms"] = t["direct"]
        r["builtin_pynative_ms"] = t["builtin"]
        r["ours_pynative_ms"] = t["ours_pynative"]
        r["speedup_vs_builtin"] = ratio(t["builtin"], t["direct"])
        r["pynative_speedup_vs_builtin"] = ratio(t["builtin"], t["ours_pynative"])
        r["builtin_graph_ms"] = t["builtin_graph"]
        r["native_pynative_ms"] = t["native_pynative"]
        r["native_graph_ms"] = t["native_graph"]
        r["native_pynative_speedup_vs_builtin"] = ratio(t["builtin"], t["native_pynative"])
        r["native_graph_speedup_vs_builtin"] = ratio(t["builtin_graph"], t["native_graph"])
        r["legacy_pynative_ms"] = t["legacy_pynative"]
        r["legacy_graph_ms"] = t["legacy_graph"]
        r["legacy_pynative_speedup_vs_builtin"] = ratio(t["builtin"], t["legacy_pynative"])
        r["legacy_graph_speedup_vs_builtin"] = ratio(t["builtin_graph"], t["legacy_graph"])
        del con
        gc.collect()
        log("    " + ", ".join(f"{k}={r[k]:.3g}" for k in r if k.startswith(("ms_", "builtin", "ours", "speedup_vs_b",
                                                                              "pynative"))
                               and isinstance(r[k], float)))


def _f(v, fmt="{:.2f}"):
    return "–" if v is None else fmt.format(v)


def table(rows):
    lines = ["| shape | layout | MB | direct ms | GB/s | copy (same bytes) GB/s | % copy | torch ms | x torch | "
             "ops.BatchNorm ms | direct ms (same rounds) | x ops.BatchNorm | ours PYNATIVE ms | x (PYNATIVE) | "
             "native PYNATIVE ms | x | ops.BatchNorm GRAPH ms | native GRAPH ms | x | nn route PYNATIVE ms | x | "
             "nn route GRAPH ms | x |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
             "---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {tuple(r['shape'])} | {r['layout']} | {r['tensor_mb']:.1f} | {_f(r['direct_ms'], '{:.3f}')} | "
            f"{_f(r['direct_gbs'], '{:.1f}')} | {_f(r['copy_gbs'], '{:.1f}')} | {_f(r['direct_pct_copy'], '{:.0f}')} | "
            f"{_f(r['torch_ms'], '{:.3f}')} | {_f(r['speedup_vs_torch'])} | "
            f"{_f(r.get('builtin_pynative_ms'), '{:.3f}')} | {_f(r.get('ms_round_direct_ms'), '{:.3f}')} | "
            f"{_f(r.get('speedup_vs_builtin'))} | {_f(r.get('ours_pynative_ms'), '{:.3f}')} | "
            f"{_f(r.get('pynative_speedup_vs_builtin'))} | {_f(r.get('native_pynative_ms'), '{:.3f}')} | "
            f"{_f(r.get('native_pynative_speedup_vs_builtin'))} | {_f(r.get('builtin_graph_ms'), '{:.3f}')} | "
            f"{_f(r.get('native_graph_ms'), '{:.3f}')} | {_f(r.get('native_graph_speedup_vs_builtin'))} | "
            f"{_f(r.get('legacy_pynative_ms'), '{:.3f}')} | {_f(r.get('legacy_pynative_speedup_vs_builtin'))} | "
            f"{_f(r.get('legacy_graph_ms'), '{:.3f}')} | {_f(r.get('legacy_graph_speedup_vs_builtin'))} |")
    return ("BatchNormForward (training, float32): our kernel vs MindSpore's ops.BatchNorm(is_training=True) "
            "(PYNATIVE), PyTorch's F.batch_norm and a NumPy copy of the same bytes. nn route: the same "
            "ops.BatchNorm primitive on our kernel (the native route of nn cells), in the same rounds.\n\n"
            + "\n".join(lines) + "\n")


def cases_for(quick):
    return [FwdCase(s, layout) for s, layout in CASES]  # four cases either way (the quick set is the set)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(prog="python -m mindspore_bn_grad bench --forward",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="5 runs each")
    p.add_argument("--threads", type=int, default=None, help="kernel and torch threads (default: all CPUs)")
    p.add_argument("--reps", type=int, default=15, help="timed runs per measurement (default 15)")
    p.add_argument("--no-mindspore", action="store_true", help="skip the MindSpore pass")
    p.add_argument("--no-torch", action="store_true", help="skip PyTorch")
    args = p.parse_args(argv)
    from mindspore_bn_grad.cpu_kernel import native
    from .kernel import describe_machine, machine_info
    threads = args.threads or native.get_num_threads()
    native.set_num_threads(threads)
    reps = 5 if args.quick else args.reps
    try:
        import torch  # noqa: F401
        have_torch = not args.no_torch
    except ImportError:
        have_torch = False
    cases = cases_for(args.quick)
    rows = direct_pass(cases, reps, threads, have_torch)
    if not args.no_mindspore:
        mindspore_pass(cases, rows, reps)
    print(f"Machine: {describe_machine(machine_info(threads))}. Kernel threads {threads}.\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
