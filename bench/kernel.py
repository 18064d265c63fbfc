"""Side-by-side benchmark of the CPU BatchNormBackward kernel.

    python -m mindspore_bn_grad bench [--quick] [--threads N] [--out DIR]
    python -m mindspore_bn_grad bench --double    (the double backward; double.py)
    python -m mindspore_bn_grad bench --forward   (only the BatchNormForward rows; forward.py)
    python bench/bench_cpu.py [same options]
    python -m mindspore_bn_grad bench --train [...]   (whole networks: see train.py)

In one run: the machine's copy bandwidth (NumPy copy of a 256 MiB array,
read + write bytes), then for every case (shape x dtype x layout), as medians
after warm-up:
  * direct: our compiled kernel called without MindSpore (arguments marshalled
    once, one ctypes call per run) vs PyTorch's
    torch.ops.aten.native_batch_norm_backward (when torch is importable, with
    the same thread count); also the kernel with output_mask (False, True, True);
  * through MindSpore, PYNATIVE and GRAPH: mindspore_bn_grad.batch_norm_backward
    / BatchNormBackward vs the built-in ops.operations._grad_ops.BatchNormGrad
    (oneDNN; float32/float16 NCHW only) in the same mode; with the native kernels active,
    also MindSpore's BatchNormGradExt on our kernel (the native route): in PYNATIVE
    called directly, in GRAPH the forward + backward of mint.nn.functional.batch_norm
    (MindSpore's C++ bprop) minus the forward alone, timed in the same rounds (a GRAPH
    cell cannot call BatchNormGradExt itself; see ms_native_graph_contestants).
The direct rows of every case run first, before MindSpore is imported (next to
MindSpore, PyTorch ran slower: docs/performance.md), then the MindSpore rows.
Effective bandwidth counts x and dy read and dx written once; % is of the
copy bandwidth measured in the same interleaved rounds as the row (the figure in
the header is a separate measurement at the start). Training mode, all three
outputs, unless a row says otherwise.
Then the BatchNormForward rows (bench/forward.py), in the same two passes.
Garbage collection is off inside timed loops (as in timeit), for every contestant.
Writes bench_cpu.json, bench_cpu.md (the table) and bench_cpu.png (needs
matplotlib: pip install mindspore-bn-grad[bench]) into --out (default: bench/results/
of the checkout this package sits in, else a new temporary directory; never the
current directory).
"""
import argparse
import datetime
import gc
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from mindspore_bn_grad.cli.args import positive_int

SHAPES = [(32, 64, 56, 56), (32, 256, 14, 14), (8, 512, 7, 7), (256, 1024), (16, 32, 64, 64),
          (64, 64, 112, 112)]
CHANNEL_LAST = [(32, 64, 56, 56), (32, 256, 14, 14)]   # NCHW shapes with an NHWC twin
HALF_SHAPES = [(32, 64, 56, 56), (32, 256, 14, 14), (16, 32, 64, 64), (64, 64, 112, 112)]
QUICK_SHAPES = [(32, 64, 56, 56), (32, 256, 14, 14), (256, 1024)]
ELEM = {"float32": 4, "float16": 2, "bfloat16": 2}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Timed:
    """One contestant: fn() runs it once, sync() waits for it, setup() before a batch. kernels:
    "mindspore" for a contestant that times MindSpore's own BatchNorm kernels (its built-in
    ops.BatchNorm / BatchNormGrad), which need switching back to once ours stand in for them."""

    def __init__(self, fn, sync=None, setup=None, kernels="ours"):
        self.fn, self.sync, self.setup = fn, sync, setup
        self.kernels = kernels
        self.times = []

    def prepare(self):
        select_kernels(self.kernels)
        if self.setup:
            self.setup()

    def run_once(self):
        t0 = time.perf_counter()
        self.fn()
        if self.sync:
            self.sync()
        return time.perf_counter() - t0


def select_kernels(kernels):
    """Where our kernels stand in for MindSpore's BatchNorm / BatchNormGrad (the kernel-factory route,
    cpu_kernel/factory.py), switches between the two; elsewhere MindSpore's are the only ones."""
    from mindspore_bn_grad.cpu_kernel import factory
    if factory.state().legacy:
        factory.set_mindspore_kernels(kernels == "mindspore")


def legacy_kernels_active():
    """Whether MindSpore's BatchNorm / BatchNormGrad run our kernels here (loads the default route)."""
    from mindspore_bn_grad.cpu_kernel import factory
    return factory.legacy_status()


def interleaved_medians(contestants, reps, warmup=3, rounds=3, budget=60.0, settle=0.03, prime=2):
    """Median seconds per contestant; the timed runs are spread over `rounds`
    rounds that visit every contestant in turn (A B C ... A B C ...), so a
    drift in machine speed hits all of them alike. `budget` (seconds) caps each
    contestant's timed runs (at least one per round).

    Like timeit, garbage collection is off inside timed runs: with MindSpore
    imported a full collection walks millions of objects and lands on whichever
    contestant happens to trigger it. Before each contestant's turn the machine
    is left idle for `settle` seconds: the previous contestant's threads keep
    polling for a while after their last call (PyTorch's OpenMP team does) and
    would otherwise take cores from the next one. Then `prime` untimed runs
    wake the contestant's own threads and caches (after the idle a first call
    is much slower than a steady one; docs/performance.md), so each batch
    times steady calls, as in a training loop.
    """
    for c in contestants.values():
        c.prepare()
        for _ in range(warmup):
            c.run_once()
    per_round = max(1, -(-reps // rounds))
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(rounds):
            for c in contestants.values():
                c.prepare()
                time.sleep(settle)
                for _ in range(prime):
                    c.run_once()
                round_start = time.perf_counter()
                for _ in range(per_round):
                    c.times.append(c.run_once())
                    if time.perf_counter() - round_start > budget / rounds:
                        break
    finally:
        if was_enabled:
            gc.enable()
        select_kernels("ours")
    return {k: statistics.median(c.times) for k, c in contestants.items()}


def median_time(fn, sync=None, warmup=3, reps=10):
    return interleaved_medians({"f": Timed(fn, sync)}, reps, warmup=warmup, rounds=1)["f"]


COPY_BYTES = 256 << 20


def copy_contestant():
    """A single-threaded NumPy copy of 256 MiB (GB/s = (read + written bytes) / time)."""
    src = np.ones(COPY_BYTES // 4, dtype=np.float32)
    dst = np.empty_like(src)
    return Timed(lambda: np.copyto(dst, src))


def copy_bandwidth(reps):
    t = interleaved_medians({"copy": copy_contestant()}, reps, warmup=2, rounds=1)["copy"]
    return 2 * COPY_BYTES / t / 1e9


# ------------------------------------------------------------------ cases

class Case:
    def __init__(self, shape, dtype="float32", layout="NCHW"):
        self.shape, self.dtype, self.layout = tuple(shape), dtype, layout

    @property
    def channel_last(self):
        return self.layout == "NHWC"

    @property
    def data_shape(self):  # memory shape
        if self.channel_last:
            n, c, *sp = self.shape
            return (n, *sp, c)
        return self.shape

    @property
    def channels(self):
        return self.shape[1]

    @property
    def numel(self):
        return int(np.prod(self.shape))

    @property
    def tensor_bytes(self):
        return self.numel * ELEM[self.dtype]

    def label(self):
        return f"{self.shape} {self.dtype} {self.layout}"

    def arrays(self, seed=0):
        rng = np.random.default_rng(seed)
        x = rng.standard_normal(self.data_shape, dtype=np.float32)
        dy = rng.standard_normal(self.data_shape, dtype=np.float32)
        c = self.channels
        params = dict(weight=rng.uniform(0.5, 1.5, c).astype(np.float32),
                      running_mean=np.zeros(c, np.float32), running_var=np.ones(c, np.float32),
                      save_mean=rng.standard_normal(c).astype(np.float32) * 0.1,
                      save_invstd=rng.uniform(0.5, 2.0, c).astype(np.float32))
        return x, dy, params


def to_bf16_bits(a):
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


# ----------------------------------------------------------- contestants

def direct_contestant(case, mask=(True, True, True)):
    from mindspore_bn_grad.cpu_kernel import native
    x, dy, p = case.arrays()
    if case.dtype == "bfloat16":
        x, dy, bf16 = to_bf16_bits(x), to_bf16_bits(dy), ("grad_out",)
    else:
        x, dy, bf16 = x.astype(case.dtype), dy.astype(case.dtype), ()
    call, _ = native.prepare_direct(dy, x, p["weight"], p["running_mean"], p["running_var"],
                                     p["save_mean"], p["save_invstd"], training=True,
                                     output_mask=mask, channel_last=case.channel_last,
                                     param_grad_dtype=np.float32, bf16=bf16)
    return Timed(call)


def torch_activation(a, case):
    """A float32 NumPy activation (memory shape) as the torch tensor the
    PyTorch contestant gets: case.dtype, logical NC... shape. It is built on
    NumPy memory, like the direct contestant's arrays (the same page backing,
    see memory_info); torch's own allocator would put half-precision copies
    on other pages."""
    import torch
    if case.dtype == "bfloat16":
        t = torch.from_numpy(to_bf16_bits(a).view(np.int16)).view(torch.bfloat16)
    else:
        t = torch.from_numpy(np.ascontiguousarray(a, dtype=case.dtype))
    return t.permute(0, t.dim() - 1, *range(1, t.dim() - 1)) if case.channel_last else t


def torch_contestant(case, threads):
    """torch.ops.aten.native_batch_norm_backward; None if torch is missing or refuses the dtype."""
    try:
        import torch
    except ImportError:
        return None
    x, dy, p = case.arrays()
    tx, tdy = torch_activation(x, case), torch_activation(dy, case)
    tp = {k: torch.from_numpy(v) for k, v in p.items()}
    aten = torch.ops.aten.native_batch_norm_backward

    def fn():
        return aten(tdy, tx, tp["weight"], tp["running_mean"], tp["running_var"], tp["save_mean"],
                    tp["save_invstd"], True, 1e-5, [True, True, True])
    try:
        fn()
    except RuntimeError as e:  # dtype not supported by this torch build
        log(f"    torch: {str(e).splitlines()[0][:100]}")
        return None
    return Timed(fn, setup=lambda: torch.set_num_threads(threads))


def _ms_inputs(case):
    import mindspore as ms
    x, dy, p = case.arrays()
    mdt = getattr(ms, case.dtype)
    tx, tdy = ms.Tensor(x).astype(mdt), ms.Tensor(dy).astype(mdt)
    tp = {k: ms.Tensor(v) for k, v in p.items()}
    return tx, tdy, tp


def _ms_sync():
    """Waits for MindSpore's queued launches (PYNATIVE runs kernels asynchronously)."""
    from mindspore_bn_grad.ms_compat import pynative_sync
    pynative_sync()


def _ms_mode_setter(mode):
    import mindspore as ms
    return lambda: ms.set_context(mode=ms.GRAPH_MODE if mode == "GRAPH" else ms.PYNATIVE_MODE)


def _graph_cell(op, nargs):
    import mindspore as ms

    class Net(ms.nn.Cell):
        def __init__(self):
            super().__init__()
            self.op = op

        def construct(self, *args):
            return self.op(*args)
    net = Net()
    return lambda *args: net(*args)


def ms_ours_contestant(case, mode):
    import mindspore_bn_grad as mbg
    tx, tdy, tp = _ms_inputs(case)
    args = (tdy, tx, tp["weight"], tp["running_mean"], tp["running_var"], tp["save_mean"],
            tp["save_invstd"])
    fmt = case.layout
    setup = _ms_mode_setter(mode)
    setup()
    if mode == "PYNATIVE":
        def fn():
            return mbg.batch_norm_backward(*args, training=True, eps=1e-5, data_format=fmt)
    else:
        net = _graph_cell(mbg.BatchNormBackward(training=True, eps=1e-5, data_format=fmt), len(args))

        def fn():
            return net(*args)
    return Timed(fn, _ms_sync, setup)


def ms_native_contestant(case, mode):
    """MindSpore's own BatchNormGradExt primitive, which the op plugin or the kernel factory runs on
    our kernel (the native route's backward), called from Python in PYNATIVE; None where it cannot
    run (channel-last: BatchNormGradExt is channel-first). GRAPH mode: see
    ms_native_graph_contestants."""
    from mindspore_bn_grad.cpu_kernel import native_kernels_active
    if mode != "PYNATIVE" or case.channel_last or not native_kernels_active():
        return None
    from mindspore_bn_grad import ms_compat
    tx, tdy, tp = _ms_inputs(case)
    tensors = (tdy, tx, tp["weight"], tp["running_mean"], tp["running_var"], tp["save_mean"], tp["save_invstd"])
    setup = _ms_mode_setter(mode)
    setup()
    impl = ms_compat.batch_norm_grad_ext_pynative()
    return _checked(Timed(lambda: impl(*tensors, True, 1e-5, (1, 1, 1)), _ms_sync, setup), f"native {mode}")


def _checked(timed, name):
    """`timed` after one run, or None (logged) when it does not run here."""
    try:
        timed.run_once()
    except (RuntimeError, TypeError, ValueError) as e:
        log(f"    {name}: {str(e).strip().splitlines()[0][:100]}")
        return None
    return timed


def ms_native_graph_contestants(case):
    """The native route's backward in GRAPH mode, as MindSpore schedules it: {"native_graph_fwd_bwd": a
    GRAPH cell taking the gradients of mint.nn.functional.batch_norm (BatchNormExt, then the
    BatchNormGradExt node of MindSpore's C++ bprop, both our kernels), "native_graph_fwd": the same
    forward alone}, timed in the same rounds; the backward's time is their difference. ({} where the
    native route cannot run.)

    A GRAPH cell cannot call BatchNormGradExt itself (MindSpore 2.10's frontend builds the node with
    ``output_mask`` before ``training``/``eps`` and then checks it in the primitive's own order, which
    rejects every call; tests/ut/test_bench_native.py pins it), so the backward is timed as MindSpore's
    own autograd runs it."""
    from mindspore_bn_grad.cpu_kernel import native_kernels_active
    if case.channel_last or not native_kernels_active():
        return {}
    fwd_bwd, fwd = native_graph_cells(case)
    tx, tdy, tp = _ms_inputs(case)
    bias = tp["save_mean"]  # any channel vector
    setup = _ms_mode_setter("GRAPH")
    setup()
    con = {"native_graph_fwd_bwd": _checked(Timed(lambda: fwd_bwd(tx, tp["weight"], bias, tdy), _ms_sync, setup),
                                            "native GRAPH forward + backward"),
           "native_graph_fwd": _checked(Timed(lambda: fwd(tx, tp["weight"], bias), _ms_sync, setup),
                                        "native GRAPH forward")}
    return con if all(con.values()) else {}


def graph_step_cells(case, forward, tag):
    """(forward + backward, forward) GRAPH cells in training, with running statistics of their own:
    (x, weight, bias, dy) -> (dx, dweight, dbias); (x, weight, bias) -> y. forward(x, w, b, rm, rv) is
    the batch norm's output (a GRAPH-compilable function)."""
    import mindspore as ms
    from mindspore import ops
    c = case.channels

    class Forward(ms.nn.Cell):
        def __init__(self, part):
            super().__init__()
            self.rm = ms.Parameter(ms.Tensor(np.zeros(c, np.float32)), name=f"bench_{tag}_rm_{part}",
                                   requires_grad=False)
            self.rv = ms.Parameter(ms.Tensor(np.ones(c, np.float32)), name=f"bench_{tag}_rv_{part}",
                                   requires_grad=False)

        def construct(self, x, w, b):
            return forward(x, w, b, self.rm, self.rv)

    class ForwardBackward(ms.nn.Cell):
        def __init__(self):
            super().__init__()
            self.fwd = Forward("fb")
            self.grad = ops.GradOperation(get_all=True, sens_param=True)

        def construct(self, x, w, b, dy):
            return self.grad(self.fwd)(x, w, b, dy)

    return ForwardBackward(), Forward("f")


def native_graph_cells(case, momentum=0.1, eps=1e-5):
    """graph_step_cells on mint.nn.functional.batch_norm (BatchNormExt, whose C++ bprop is BatchNormGradExt)."""
    from mindspore import mint

    def forward(x, w, b, rm, rv):
        return mint.nn.functional.batch_norm(x, rm, rv, w, b, True, momentum, eps)
    return graph_step_cells(case, forward, "native")


def nn_route_step_contestants(case):
    """MindSpore's nn route in a GRAPH training step, on our kernels and on MindSpore's: for kernels in
    ("ours", "mindspore"), "legacy_step_fwd_bwd_<kernels>" (graph_step_cells on ops.BatchNorm(is_training=True),
    the primitive nn.BatchNorm* calls, whose bprop is BatchNormGrad) and "legacy_step_fwd_<kernels>" (the
    same forward alone); the backward's share of the step is their difference, as in
    ms_native_graph_contestants. ({} where our kernels do not stand in for MindSpore's, or the case is not
    one MindSpore's kernel runs: channel-last, not float32.)"""
    if case.channel_last or case.dtype != "float32" or not legacy_kernels_active():
        return {}
    from mindspore import ops
    bn = ops.BatchNorm(is_training=True, epsilon=1e-5, momentum=0.1)

    def forward(x, w, b, rm, rv):
        return bn(x, w, b, rm, rv)[0]
    tx, tdy, tp = _ms_inputs(case)
    setup = _ms_mode_setter("GRAPH")
    setup()
    bias = tp["save_mean"]  # any channel vector
    con = {}
    for kernels in ("ours", "mindspore"):
        fb, f = graph_step_cells(case, forward, f"nn_{kernels}")
        for key, fn in ((f"legacy_step_fwd_bwd_{kernels}", lambda fb=fb: fb(tx, tp["weight"], bias, tdy)),
                        (f"legacy_step_fwd_{kernels}", lambda f=f: f(tx, tp["weight"], bias))):
            timed = Timed(fn, _ms_sync, setup, kernels=kernels)
            try:
                timed.prepare()
                con[key] = _checked(timed, f"nn route GRAPH step ({kernels}' kernels)")
            finally:
                select_kernels("ours")
    return con if all(con.values()) else {}


def ms_builtin_contestant(case, mode, kernels="mindspore"):
    """Built-in CPU BatchNormGrad (oneDNN); None where it does not run (bfloat16, NHWC). kernels="ours":
    the same primitive where our kernel stands in for MindSpore's (the native route of nn cells), None
    where it does not."""
    from mindspore_bn_grad.ms_compat import builtin_batchnorm_grads
    if case.dtype == "bfloat16" or case.channel_last:
        return None
    if kernels == "ours" and not legacy_kernels_active():
        return None
    tx, tdy, tp = _ms_inputs(case)
    # (dout, x, scale, saved_mean, saved_variance, reserve)
    args = (tdy, tx, tp["weight"], tp["save_mean"], tp["save_invstd"], tp["save_invstd"])
    op = builtin_batchnorm_grads()[0](is_training=True, epsilon=1e-5, data_format="NCHW")
    setup = _ms_mode_setter(mode)
    setup()
    if mode == "PYNATIVE":
        def fn():
            return op(*args)
    else:
        net = _graph_cell(op, len(args))

        def fn():
            return net(*args)
    return checked_on(Timed(fn, _ms_sync, setup, kernels=kernels))


def checked_on(timed):
    """`timed` after one run on the kernels it times (ours again afterwards), or None (logged) where
    MindSpore's built-in operator does not run here."""
    try:
        timed.prepare()
        timed.run_once()
    except (RuntimeError, TypeError, ValueError) as e:
        log(f"    built-in ({timed.kernels}' kernel): {str(e).strip().splitlines()[0][:100]}")
        return None
    finally:
        select_kernels("ours")
    return timed


def ms_add_contestant(case, mode):
    """MindSpore's own elementwise Add of dy and x (two tensors read, one written: the backward's
    activation traffic) in the mode: what one MindSpore launch of this size costs, the floor of
    any operator launched there. None where it does not run."""
    from mindspore import ops
    tx, tdy, _ = _ms_inputs(case)
    setup = _ms_mode_setter(mode)
    setup()
    if mode == "PYNATIVE":
        def fn():
            return ops.add(tdy, tx)
    else:
        net = _graph_cell(ops.Add(), 2)

        def fn():
            return net(tdy, tx)
    return _checked(Timed(fn, _ms_sync, setup), f"Add {mode}")


# ---------------------------------------------------------------- running

def build_cases(quick):
    shapes = QUICK_SHAPES if quick else SHAPES
    cases = [Case(s) for s in shapes]
    cases += [Case(s, layout="NHWC") for s in CHANNEL_LAST if s in shapes]
    half = [s for s in HALF_SHAPES if s in shapes] if not quick else [shapes[0]]
    for s in half:
        cases += [Case(s, "float16"), Case(s, "bfloat16")]
    return cases


def ratio(a, b):
    """a / b, or None when either is missing or zero (a kernel the profiler did not see has no time)."""
    return None if a is None or b is None or a == 0 or b == 0 else a / b


def run(args):
    from mindspore_bn_grad.cpu_kernel import native
    threads = args.threads or native.get_num_threads()
    native.set_num_threads(threads)
    reps = 5 if args.quick else args.reps
    try:
        import torch  # noqa: F401
        have_torch = not args.no_torch
    except ImportError:
        have_torch = False
        log("torch not importable: PyTorch columns skipped (pip install torch==2.13.0, CPU build)")
    log(f"measuring copy bandwidth ...")
    copy_gbs = copy_bandwidth(reps=max(reps, 5))
    log(f"copy bandwidth: {copy_gbs:.1f} GB/s")
    cases = build_cases(args.quick)
    # Two passes over the cases. First the kernel called directly, the copy and
    # PyTorch, before MindSpore is imported: once MindSpore was loaded and run in
    # the process, PyTorch ran much slower (docs/performance.md), which would
    # flatter the kernel. Then each
    # case through MindSpore. No ratio mixes the two passes: each comes from the
    # interleaved rounds of one set of contestants.
    rows = []
    for i, case in enumerate(cases, 1):
        log(f"[{i}/{len(cases)}] {case.label()}: direct, copy{', torch' if have_torch else ''}")
        r = {"shape": list(case.shape), "dtype": case.dtype, "layout": case.layout,
             "tensor_mb": case.tensor_bytes / 1e6}
        # The copy runs in the same rounds, so "% of copy" compares like with like
        # even when the machine's speed drifts during the run.
        con = {"copy": copy_contestant(), "direct": direct_contestant(case)}
        if case.dtype == "float32" and case.layout == "NCHW":
            con["mask_ftt"] = direct_contestant(case, mask=(False, True, True))
        twin = twin_case(case)
        if twin is not None:  # its float32 / channel-first twin, in the same rounds
            con["twin"] = direct_contestant(twin)
        if have_torch:
            con["torch"] = torch_contestant(case, threads)
        med = interleaved_medians({k: c for k, c in con.items() if c is not None}, reps)
        ms_ = {k: (med[k] * 1e3 if k in med else None) for k in con}
        bytes_moved = 3 * case.tensor_bytes
        r["direct_ms"] = ms_["direct"]
        r["direct_gbs"] = bytes_moved / (r["direct_ms"] / 1e3) / 1e9
        r["copy_gbs"] = 2 * COPY_BYTES / (ms_["copy"] / 1e3) / 1e9
        r["direct_pct_copy"] = 100 * r["direct_gbs"] / r["copy_gbs"]
        if "mask_ftt" in con:
            r["mask_ftt_ms"] = ms_["mask_ftt"]
            r["mask_ftt_vs_full"] = ratio(r["mask_ftt_ms"], r["direct_ms"])
        if "twin" in con:
            r["twin_ms"] = ms_["twin"]
            key = "vs_float32_time" if case.dtype != "float32" else "vs_channel_first_time"
            r[key] = ratio(r["direct_ms"], r["twin_ms"])
        r["torch_ms"] = ms_.get("torch")
        r["speedup_vs_torch"] = ratio(r["torch_ms"], r["direct_ms"])
        del con
        gc.collect()
        log("    " + ", ".join(f"{k}={v:.3g}" for k, v in r.items() if isinstance(v, float)))
        rows.append(r)
    from . import forward  # the BatchNormForward rows, in the same two passes
    fwd_cases = forward.cases_for(args.quick)
    fwd_rows = forward.direct_pass(fwd_cases, reps, threads, have_torch)
    if not args.no_mindspore:
        for i, (case, r) in enumerate(zip(cases, rows), 1):
            log(f"[{i}/{len(cases)}] {case.label()}: through MindSpore")
            con = {}
            for mode in ("PYNATIVE", "GRAPH"):
                con[f"ms_{mode.lower()}"] = ms_ours_contestant(case, mode)
                con[f"native_{mode.lower()}"] = ms_native_contestant(case, mode)
                con[f"builtin_{mode.lower()}"] = ms_builtin_contestant(case, mode)
                con[f"legacy_{mode.lower()}"] = ms_builtin_contestant(case, mode, kernels="ours")
                con[f"add_{mode.lower()}"] = ms_add_contestant(case, mode)
            con.update(ms_native_graph_contestants(case))
            con.update(nn_route_step_contestants(case))
            med = interleaved_medians({k: c for k, c in con.items() if c is not None}, reps)
            ms_ = {k: (med[k] * 1e3 if k in med else None) for k in con}
            if "legacy_step_fwd_bwd_ours" in ms_:  # the backward's share of a GRAPH step, both kernels
                for kernels, key in (("ours", "legacy_step_graph_ms"), ("mindspore", "builtin_step_graph_ms")):
                    for part in ("fwd_bwd", "fwd"):
                        r[f"legacy_step_{part}_{kernels}_ms"] = ms_[f"legacy_step_{part}_{kernels}"]
                    r[key] = r[f"legacy_step_fwd_bwd_{kernels}_ms"] - r[f"legacy_step_fwd_{kernels}_ms"]
                r["legacy_step_speedup_vs_builtin"] = ratio(r["builtin_step_graph_ms"], r["legacy_step_graph_ms"])
            if "native_graph_fwd_bwd" in ms_:  # the backward's share of MindSpore's GRAPH step
                r["native_graph_fwd_bwd_ms"] = ms_["native_graph_fwd_bwd"]
                r["native_graph_fwd_ms"] = ms_["native_graph_fwd"]
                ms_["native_graph"] = r["native_graph_fwd_bwd_ms"] - r["native_graph_fwd_ms"]
            for key in ("pynative", "graph"):
                r[f"ms_{key}_ms"] = ms_[f"ms_{key}"]
                r[f"native_{key}_ms"] = ms_[f"native_{key}"]
                r[f"builtin_{key}_ms"] = ms_[f"builtin_{key}"]
                r[f"add_{key}_ms"] = ms_[f"add_{key}"]
                r[f"speedup_vs_builtin_{key}"] = ratio(r[f"builtin_{key}_ms"], r[f"ms_{key}_ms"])
                r[f"native_speedup_vs_builtin_{key}"] = ratio(r[f"builtin_{key}_ms"], r[f"native_{key}_ms"])
                r[f"legacy_{key}_ms"] = ms_[f"legacy_{key}"]
                r[f"legacy_speedup_vs_builtin_{key}"] = ratio(r[f"builtin_{key}_ms"], r[f"legacy_{key}_ms"])
            _ms_mode_setter("PYNATIVE")()
            del con
            gc.collect()
            log("    " + ", ".join(f"{k}={r[k]:.3g}" for k in r if k.startswith(("ms_", "native_", "builtin_",
                                                                              "speedup_vs_b"))
                                   and isinstance(r[k], float)))
        forward.mindspore_pass(fwd_cases, fwd_rows, reps)
    return {"machine": machine_info(threads), "copy_gbs": copy_gbs, "threads": threads,
            "quick": bool(args.quick), "rows": rows, "forward_rows": fwd_rows}


def twin_case(case):
    """The case a row's time is compared with: float32 for a half-precision case,
    channel-first for a channel-last float32 case (None for a float32 NCHW case).
    The twin is timed in the row's own rounds, so the ratio does not depend on
    how the machine's speed drifted between rows."""
    if case.dtype != "float32":
        return Case(case.shape, "float32", case.layout)
    if case.channel_last:
        return Case(case.shape, "float32", "NCHW")
    return None


def _version(dist):
    """An installed distribution's version, read without importing it (None if absent)."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine_info(threads):
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), cpu)
    except OSError:
        pass
    return {"cpu": cpu, "logical_cpus": os.cpu_count(), "avx512": _has_avx512(),
            # MindSpore's oneDNN runs plain-layout convolutions through a slow reference path on
            # AVX-512 CPUs unless this caps it (docs/performance.md): it sets every ratio's scale
            "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA"),
            # MindSpore runs PYNATIVE launches on the Python thread, without its queue: it changes
            # PYNATIVE step times and ratios a lot on few cores (docs/performance.md)
            "ms_host_blocking_run": os.environ.get("MS_DEV_HOST_BLOCKING_RUN") == "1",
            "affinity_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "threads": threads, "python": platform.python_version(), "numpy": np.__version__,
            "mindspore": _version("mindspore"), "torch": _version("torch"), "platform": platform.platform(),
            "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "load_avg": os.getloadavg() if hasattr(os, "getloadavg") else None, **memory_info()}


def _has_avx512():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return any(l.startswith("flags") and " avx512f" in l for l in f)
    except OSError:
        return None


def describe_machine(m):
    """The machine in one sentence fragment, for the headers of both benchmarks."""
    torch = f", torch {m['torch']}" if m.get("torch") else ""
    when = f"; run {m['date_utc']}" if m.get("date_utc") else ""
    isa = ""
    if m.get("avx512") is not None:
        cap = m.get("onednn_max_cpu_isa")
        isa = f", {'AVX-512' if m['avx512'] else 'no AVX-512'}, oneDNN ISA {'capped at ' + cap if cap else 'not capped'}"
    blocking = ", MS_DEV_HOST_BLOCKING_RUN=1" if m.get("ms_host_blocking_run") else ""
    return (f"{m['cpu']}{isa}, {m['affinity_cpus']} CPUs available ({m['logical_cpus']} logical); "
            f"Python {m['python']}, NumPy {m['numpy']}, MindSpore {m['mindspore']}{torch}{blocking}{when}")


def mindspore_pages(m):
    """Which pages MindSpore's tensors live on, from memory_info()."""
    hugetlb = "glibc.malloc.hugetlb=1" in (m.get("glibc_tunables") or "")
    if m.get("thp") == "always":
        return "huge pages (THP always)"
    if hugetlb and m.get("thp") == "madvise":
        return "huge pages (GLIBC_TUNABLES=glibc.malloc.hugetlb=1)"
    return "4 KiB pages"


def default_out_dir():
    """bench/results/ of the checkout (this module is its bench/kernel.py); when installed elsewhere a new
    temporary directory."""
    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and (root / "bench").is_dir():
        return root / "bench" / "results"
    return Path(tempfile.mkdtemp(prefix="mindspore_bn_grad_bench_"))


def memory_info():
    """Which pages the tensors live on. On this kind of VM the kernel ran
    slower on 4 KiB pages than on 2 MiB transparent huge pages (TLB misses
    under nested paging; docs/performance.md). NumPy asks for huge pages (madvise) on big
    arrays, so the direct, PyTorch and copy contestants get them where the
    system's THP mode allows; MindSpore's tensors come from glibc malloc on
    4 KiB pages unless Python was started with
    GLIBC_TUNABLES=glibc.malloc.hugetlb=1."""
    thp = None
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled", encoding="utf-8") as f:
            thp = next((w.strip("[]") for w in f.read().split() if w.startswith("[")), None)
    except OSError:
        pass
    try:
        from numpy.core import multiarray
        np_huge = bool(multiarray._get_madvise_hugepage())
    except (ImportError, AttributeError):
        np_huge = None
    return {"thp": thp, "numpy_madvise_hugepage": np_huge,
            "glibc_tunables": os.environ.get("GLIBC_TUNABLES")}


# ---------------------------------------------------------------- reports

def _f(v, fmt="{:.2f}"):
    return "–" if v is None else fmt.format(v)


def table(result):
    rows = result["rows"]
    lines = [
        "| shape | dtype | layout | MB | direct ms | GB/s | copy GB/s | % copy | mask FTT / full | torch ms | x torch"
        " | PYNATIVE ours / built-in ms | x | GRAPH ours / built-in ms | x"
        " | native PYNATIVE ms | x | native GRAPH ms | x | nn route PYNATIVE ms | x | nn route GRAPH ms | x |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:"
        "|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {tuple(r['shape'])} | {r['dtype']} | {r['layout']} | {r['tensor_mb']:.1f} | "
            f"{_f(r['direct_ms'], '{:.3f}')} | {_f(r['direct_gbs'], '{:.1f}')} | {_f(r['copy_gbs'], '{:.1f}')} | "
            f"{_f(r['direct_pct_copy'], '{:.0f}')} | {_f(r.get('mask_ftt_vs_full'))} | "
            f"{_f(r['torch_ms'], '{:.3f}')} | {_f(r['speedup_vs_torch'])} | "
            f"{_f(r.get('ms_pynative_ms'), '{:.3f}')} / {_f(r.get('builtin_pynative_ms'), '{:.3f}')} | "
            f"{_f(r.get('speedup_vs_builtin_pynative'))} | "
            f"{_f(r.get('ms_graph_ms'), '{:.3f}')} / {_f(r.get('builtin_graph_ms'), '{:.3f}')} | "
            f"{_f(r.get('speedup_vs_builtin_graph'))} | "
            f"{_f(r.get('native_pynative_ms'), '{:.3f}')} | {_f(r.get('native_speedup_vs_builtin_pynative'))} | "
            f"{_f(r.get('native_graph_ms'), '{:.3f}')} | {_f(r.get('native_speedup_vs_builtin_graph'))} | "
            f"{_f(r.get('legacy_pynative_ms'), '{:.3f}')} | {_f(r.get('legacy_speedup_vs_builtin_pynative'))} | "
            f"{_f(r.get('legacy_graph_ms'), '{:.3f}')} | {_f(r.get('legacy_speedup_vs_builtin_graph'))} |")
    extra = [r for r in rows if "vs_float32_time" in r or "vs_channel_first_time" in r]
    if extra:
        lines += ["", "Twins timed in the row's own rounds: a half-precision case against float32 "
                  "(same layout), a channel-last case against channel-first (float32).", "",
                  "| shape | dtype | layout | direct ms | twin | twin direct ms | time / twin time |",
                  "|---|---|---|---:|---|---:|---:|"]
        for r in extra:
            v = r.get("vs_float32_time", r.get("vs_channel_first_time"))
            twin = f"float32 {r['layout']}" if r["dtype"] != "float32" else "float32 NCHW"
            lines.append(f"| {tuple(r['shape'])} | {r['dtype']} | {r['layout']} | {_f(r['direct_ms'], '{:.3f}')} | "
                         f"{twin} | {_f(r.get('twin_ms'), '{:.3f}')} | {_f(v)} |")
    step = [r for r in rows if r.get("legacy_step_graph_ms") is not None]
    if step:
        lines += ["", "The nn route's backward in a GRAPH training step: a GRAPH cell taking the gradients of "
                  "ops.BatchNorm(is_training=True) (what nn.BatchNorm* runs; its bprop is BatchNormGrad) minus "
                  "the same forward alone, on our kernels and on MindSpore's own, all four timed in the row's "
                  "rounds (legacy_step_* in the JSON). A one-operator graph (the nn route GRAPH column) also "
                  "times the graph's own launch.", "",
                  "| shape | dtype | ours: step - forward ms | MindSpore's: step - forward ms | x |",
                  "|---|---|---:|---:|---:|"]
        for r in step:
            lines.append(f"| {tuple(r['shape'])} | {r['dtype']} | {_f(r['legacy_step_graph_ms'], '{:.3f}')} | "
                         f"{_f(r['builtin_step_graph_ms'], '{:.3f}')} | "
                         f"{_f(r.get('legacy_step_speedup_vs_builtin'))} |")
    floor = [r for r in rows if r.get("add_pynative_ms") is not None or r.get("add_graph_ms") is not None]
    if floor:
        lines += ["", "MindSpore's floor: its own elementwise Add of dy and x (the backward's activation "
                  "traffic), timed in the row's rounds; no operator launched through MindSpore in that "
                  "mode takes less. ours / Add: our backward through MindSpore against it.", "",
                  "| shape | dtype | layout | Add PYNATIVE ms | ours / Add | native / Add | nn route / Add "
                  "| Add GRAPH ms | ours / Add | native / Add | nn route / Add |",
                  "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in floor:
            cells = []
            for key in ("pynative", "graph"):
                add = r.get(f"add_{key}_ms")
                cells += [_f(add, "{:.3f}"), _f(ratio(r.get(f"ms_{key}_ms"), add)),
                          _f(ratio(r.get(f"native_{key}_ms"), add)), _f(ratio(r.get(f"legacy_{key}_ms"), add))]
            lines.append(f"| {tuple(r['shape'])} | {r['dtype']} | {r['layout']} | " + " | ".join(cells) + " |")
    m = result["machine"]
    head = (f"Machine: {describe_machine(m)}; load average at the end {m['load_avg']}. Kernel threads "
            f"{result['threads']}; copy bandwidth at the start {result['copy_gbs']:.1f} GB/s (NumPy, "
            f"1 thread, 256 MiB, read + write bytes; each row also has its own, measured in its rounds).")
    if "thp" in m:
        head += (f" Memory: transparent huge pages '{m['thp']}', NumPy madvise(hugepage) "
                 f"{m['numpy_madvise_hugepage']} (direct, torch and copy use NumPy memory); "
                 f"MindSpore's tensors on {mindspore_pages(m)}.")
    if any(r.get("legacy_pynative_ms") is not None for r in rows):
        head += (" nn route: MindSpore's own BatchNormGrad primitive (what nn.BatchNorm*'s bprop launches) "
                 "on our kernel, which the kernel-factory route puts in place of MindSpore's; built-in: the "
                 "same primitive on MindSpore's own kernel, switched back in its turn of the same rounds "
                 "(legacy_*_ms in the JSON).")
    if any(r.get("native_graph_fwd_bwd_ms") is not None for r in rows):
        head += (" native GRAPH ms: MindSpore's GRAPH step of forward + backward through "
                 "mint.nn.functional.batch_norm minus its forward alone, both timed in the row's rounds "
                 "(native_graph_fwd_bwd_ms, native_graph_fwd_ms in the JSON).")
    out = head + "\n\n" + "\n".join(lines) + "\n"
    if result.get("forward_rows"):
        from .forward import table as forward_table
        out += "\n" + forward_table(result["forward_rows"])
    return out


def chart(result, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib not installed: no chart (pip install mindspore-bn-grad[bench])")
        return False
    rows = result["rows"]
    labels = [f"{'x'.join(map(str, r['shape']))}\n{r['dtype']} {r['layout']}" for r in rows]
    series = [("ours direct", "direct_gbs"), ("torch", "torch_ms"), ("ours PYNATIVE", "ms_pynative_ms"),
              ("built-in PYNATIVE", "builtin_pynative_ms"), ("ours GRAPH", "ms_graph_ms"),
              ("built-in GRAPH", "builtin_graph_ms")]
    fig, ax = plt.subplots(figsize=(max(10, len(rows) * 1.1), 5))
    width = 0.8 / len(series)
    for k, (name, key) in enumerate(series):
        vals = []
        for r in rows:
            if key == "direct_gbs":
                vals.append(r["direct_gbs"])
            else:
                t = r.get(key)
                vals.append(0 if t is None else 3 * r["tensor_mb"] / 1e3 / (t / 1e3))
        ax.bar([i + k * width for i in range(len(rows))], vals, width, label=name)
    ax.axhline(result["copy_gbs"], color="k", linestyle="--", label="copy bandwidth")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(rows))])
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("effective GB/s (x, dy read + dx written)")
    ax.set_title(f"BatchNormBackward CPU, {result['threads']} threads")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv=None):
    """The kernel benchmark (`bench`; `bench --train` and `bench --double` are train.py and double.py)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(prog="python -m mindspore_bn_grad bench", description=__doc__.split("\n\n")[0],
                                epilog="bench --train: whole networks training (see bench --train --help); "
                                       "bench --double: the double backward (see bench --double --help)")
    p.add_argument("--quick", action="store_true", help="three shapes, 5 runs each")
    p.add_argument("--threads", type=positive_int, default=None,
                   help="kernel and torch threads, >= 1 (default: all CPUs)")
    p.add_argument("--reps", type=positive_int, default=15, help="timed runs per measurement (default 15)")
    p.add_argument("--out", default=None, help="directory for bench_cpu.{json,md,png} (default: bench/results/ "
                   "of the checkout, else a new temporary directory)")
    p.add_argument("--no-mindspore", action="store_true", help="skip the rows through MindSpore")
    p.add_argument("--no-torch", action="store_true", help="skip PyTorch")
    args = p.parse_args(argv)
    out = Path(args.out) if args.out else default_out_dir()
    result = run(args)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_cpu.json").write_text(json.dumps(result, indent=1))
    md = table(result)
    (out / "bench_cpu.md").write_text(md)
    print(md)
    if chart(result, out / "bench_cpu.png"):
        log(f"wrote {out / 'bench_cpu.png'}")
    log(f"wrote {out / 'bench_cpu.json'} and {out / 'bench_cpu.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
