"""End-to-end training benchmark: MindSpore's BatchNorm against convert_batchnorm, whole networks.

    python -m mindspore_bn_grad bench --train [--nets resnet18,stack,mlp] [--modes GRAPH,PYNATIVE]
        [--threads default,1] [--rounds N] [--steps K] [--quick] [--out DIR]

For each network (nets.py) and mode there are two variants: "original"
(MindSpore's nn.BatchNorm) and "converted" (convert_batchnorm on a deep copy
of the original: the same initial parameters, the same batch).

1. Isolated runs, one child process per (network, mode, variant), one after
   the other while this process waits (for each network before its steady-state
   rounds, so that a run stopped early has whole networks): the first step (the
   GRAPH compile, or PYNATIVE's first launches; building the network is
   timed apart), peak RSS (/proc/self/status VmHWM: the process's own high-water
   mark since its exec, which only a fresh process can give per variant), the losses of the
   first two steps, then MindSpore's profiler (mindspore.profiler.profile,
   CPU activity, into a temporary directory) over a few steady steps: kernel
   time per op type. BatchNorm (forward and backward) is BatchNorm* in the original and
   BatchNorm* on our kernels (the native route: MindSpore's own primitives), BatchNormExt* (the native
   route through BatchNormExt) or BatchNorm and our Custom op (Cell route) converted. Where our kernels
   stand in for MindSpore's, the original's steps switch MindSpore's own back in (both variants run the
   same primitives then).
2. Steady state, in one fresh process per (network, mode) with both variants
   built side by side (never after another row's steps: what ran before in a
   process changes how fast MindSpore runs the next network there):
   for each thread setting (our kernel's threads, mindspore_bn_grad.set_num_threads;
   MindSpore's own kernels are not affected), `rounds` rounds of k steps of each
   variant, the variants alternating step by step (a slow spell of the machine or
   of MindSpore's runtime falls on both alike), the first variant alternating
   between rounds; every step synced and timed; garbage collection off inside the
   rounds. Step time = median of
   all timed steps of a variant; ratio = original / converted (> 1: converted
   is faster); the spread of the per-round ratios is reported too.

The share of BatchNorm (forward + backward) in the original step is its profiled kernel
time over the profiled wall time of the same steps; the bound it implies for
an operator speed-up s is 1 / (1 - share * (1 - 1/s)), with s the
original/converted BatchNorm kernel time measured in the same
network (and 1 / (1 - share) for infinitely fast BatchNorm kernels).
Writes bench_train.json and bench_train.md into --out.
"""
import argparse
import gc
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mindspore_bn_grad.cli import args as cli_args

from . import kernel as bench
from .nets import NETS, VARIANTS, build, describe, train_step, variant_of

MODES = cli_args.MODES
RESULT_TAG = "BENCH_TRAIN_RESULT "
# BatchNorm's own kernels (forward and backward), by op type prefix: BatchNorm / BatchNormGrad in the
# original; BatchNormExt / BatchNormGradExt (the native route) or BatchNorm and our Custom op (the
# Cell route) in the converted network.
BN_OPS = ("BatchNorm", "Custom")


def log(msg):
    bench.log(msg)


def _set_mode(mode):
    import mindspore as ms
    ms.set_context(mode=ms.GRAPH_MODE if mode == "GRAPH" else ms.PYNATIVE_MODE)


def _timed_step(step):
    """Runs one step, waits for it (PYNATIVE queues launches), returns (seconds, loss tensor)."""
    t0 = time.perf_counter()
    loss = step()
    bench._ms_sync()  # pylint: disable=protected-access
    return time.perf_counter() - t0, loss


def _rss_mb(field="VmRSS"):
    """Current resident set size (MB) from /proc/self/status (field="VmHWM": its high-water mark);
    None where there is none."""
    try:
        with open("/proc/self/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


# --------------------------------------------------------- profiler parsing

def op_times_ms(prof_dir):
    """Total kernel milliseconds per op type from the CPU profiler's cpu_op_execute_timestamp files.

    Each line is ``<op full name>;HostCpuOps;<start ns>,<duration ms>,<tid> ...``;
    the op type is the last name component without its ``-opN`` suffix
    (``Gradients/.../Grad_BatchNorm/BatchNormGrad-op0`` -> ``BatchNormGrad``).
    """
    totals = {}
    files = sorted(Path(prof_dir).rglob("cpu_op_execute_timestamp_*.txt"))
    if not files:
        raise RuntimeError(f"bench --train: the profiler wrote no cpu_op_execute_timestamp file under {prof_dir}")
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            parts = line.strip().split(";")
            if len(parts) < 3:
                continue
            op_type = parts[0].rsplit("/", 1)[-1].split("-op")[0]
            durations = [float(rec.split(",")[1]) for rec in parts[2].split() if rec.count(",") >= 2]
            totals[op_type] = totals.get(op_type, 0.0) + sum(durations)
    return totals


def bn_ms(op_ms):
    """Milliseconds per step in BatchNorm's kernels, forward and backward."""
    return sum(v for k, v in op_ms.items() if k.startswith(BN_OPS))


def profile_steps(step, n):
    """Profiles n steady steps (after one traced warm-up step): (op type -> ms per step, wall ms per step)."""
    from mindspore import profiler as prof
    tmp = tempfile.mkdtemp(prefix="mindspore_bn_grad_profile_")
    try:
        walls = []
        with prof.profile(activities=[prof.ProfilerActivity.CPU],
                          schedule=prof.schedule(wait=0, warmup=1, active=n, repeat=1, skip_first=0),
                          on_trace_ready=prof.tensorboard_trace_handler(tmp)) as p:
            for i in range(n + 1):
                t, _ = _timed_step(step)
                if i >= 1:
                    walls.append(t)
                p.step()
        totals = op_times_ms(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {k: v / n for k, v in totals.items()}, 1e3 * sum(walls) / n


# ------------------------------------------------------------ isolated child

def child(spec):
    """One (network, mode, variant) in a fresh process: first step, peak RSS, losses, profile; or, with
    spec["steady"], the steady-state rows of one (network, mode), both variants in this process."""
    if spec.get("steady"):
        from types import SimpleNamespace
        args = SimpleNamespace(rounds=spec["rounds"], steps=spec["steps"], quick=spec["quick"])
        return {"rows": steady_rows(spec["net"], spec["mode"], [tuple(s) for s in spec["settings"]], args)}
    t0 = time.perf_counter()
    import mindspore  # noqa: F401  (import time reported apart)
    import_s = time.perf_counter() - t0
    rss_after_import = _rss_mb()
    _set_mode(spec["mode"])
    t0 = time.perf_counter()
    net, inputs, kind = build(spec["net"], spec["quick"])
    net = variant_of(net, spec["variant"], copy_original=True)  # both variants: a deep copy, then ours or not
    # The network copied from is garbage now, but in reference cycles (a Cell and its Parameters):
    # without a collection here, whether its weights (45 MB for ResNet-18) are still held at the
    # peak depends on when Python's collector happens to run, a +-30 MB lottery between processes.
    gc.collect()
    step = train_step(spec["net"], net, inputs, kind, graph=spec["mode"] == "GRAPH")
    build_s = time.perf_counter() - t0
    first_s, loss0 = _timed_step(step)
    if spec.get("first_step_only"):  # (the extra processes of the first step's median: isolated_row)
        return {"first_step_s": first_s, "losses": [float(loss0.asnumpy())]}
    _, loss1 = _timed_step(step)
    losses = [float(loss0.asnumpy()), float(loss1.asnumpy())]
    steady = [_timed_step(step)[0] * 1e3 for _ in range(spec["steps"])]
    # The process's own high-water mark: VmHWM (this process's memory since its exec). Not
    # getrusage's ru_maxrss, which Linux carries over from the parent's memory at fork and exec:
    # once this benchmark's own process had grown past a child's peak, every child reported it.
    peak_rss = _rss_mb("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    op_ms, wall_ms = profile_steps(step, spec["profile_steps"])
    from mindspore_bn_grad.cpu_kernel import factory
    return {"our_legacy_launches": factory.legacy_launches(),  # ours standing in for MindSpore's BatchNorm*
            "import_s": import_s, "build_s": build_s, "first_step_s": first_s, "losses": losses,
            "steady_ms": steady, "rss_after_import_mb": rss_after_import, "peak_rss_mb": peak_rss,
            "profile_wall_ms": wall_ms, "profile_op_ms": op_ms,
            "bn_ms": bn_ms(op_ms),
            "kernel_ms": sum(op_ms.values())}


def run_child(spec, timeout, show_log=False):
    """Runs child(spec) in a fresh interpreter (working directory: a temporary one); its result dict.
    show_log: the child's progress lines (stderr) go to ours as they come, not into the error text."""
    cwd = tempfile.mkdtemp(prefix="mindspore_bn_grad_bench_")
    cmd = [sys.executable, "-m", "mindspore_bn_grad_bench.train", "--child", json.dumps(spec)]
    env = dict(os.environ)
    import mindspore_bn_grad  # the child imports the same package, wherever we were started
    pkg_parent = str(Path(mindspore_bn_grad.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                              stderr=None if show_log else subprocess.PIPE, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    finally:
        shutil.rmtree(cwd, ignore_errors=True)
    lines = [l for l in proc.stdout.splitlines() if l.startswith(RESULT_TAG)]
    if proc.returncode != 0 or not lines:
        tail = " | ".join((proc.stderr or proc.stdout or "(its output is in the log above)").strip().splitlines()[-5:])
        return {"error": f"exit code {proc.returncode}: {tail[-600:]}"}
    return json.loads(lines[-1][len(RESULT_TAG):])


def isolated_row(net, mode, args, progress):
    """Both variants of (net, mode), each in args.isolated_reps fresh processes, alternating which
    variant goes first; then args.first_step_reps more of each that only time the first step (one
    process's first step varies too much between processes for a few to tell 5%). progress: (index of
    the first process, total)."""
    row = {"net": net, "mode": mode}
    runs = {v: [] for v in VARIANTS}
    k = progress[0]
    for rep in range(args.isolated_reps):
        for variant in (VARIANTS if rep % 2 == 0 else VARIANTS[::-1]):
            log(f"[isolated {k}/{progress[1]}] {net} {mode} {variant}: fresh process "
                f"(first step, peak RSS, profile)")
            k += 1
            spec = {"net": net, "mode": mode, "variant": variant, "quick": args.quick,
                    "steps": args.steps, "profile_steps": args.profile_steps}
            t0 = time.perf_counter()
            res = run_child(spec, args.child_timeout)
            res["process_s"] = time.perf_counter() - t0
            runs[variant].append(res)
            if "error" in res:
                log(f"    FAILED: {res['error']}")
            else:
                log(f"    first step {res['first_step_s']:.2f} s, peak RSS {res['peak_rss_mb']:.0f} MB, "
                    f"BatchNorm kernels {res['bn_ms']:.2f} of {res['profile_wall_ms']:.1f} ms/step")
    firsts = {v: [] for v in VARIANTS}
    for rep in range(args.first_step_reps):
        for variant in (VARIANTS if rep % 2 == 0 else VARIANTS[::-1]):
            log(f"[first step {rep + 1}/{args.first_step_reps}] {net} {mode} {variant}: "
                "fresh process (first step only)")
            spec = {"net": net, "mode": mode, "variant": variant, "quick": args.quick, "first_step_only": True}
            res = run_child(spec, args.child_timeout)
            firsts[variant].append(res)
            log(f"    FAILED: {res['error']}" if "error" in res else f"    first step {res['first_step_s']:.2f} s")
    for variant in VARIANTS:
        row[variant] = combine_reps(runs[variant], firsts[variant])
    return derive_isolated(row)


def combine_reps(reps, firsts=()):
    """One variant's isolated figures from its fresh processes: first step and peak RSS are their
    medians (each process's in *_reps; the first step's also over `firsts`, processes that only timed
    it); the profile, and the rest, is that of the process with the median profiled step (its figures
    stay together). A failed process: its error."""
    failed = [r for r in list(reps) + list(firsts) if "error" in r]
    if failed:
        return failed[0]
    out = dict(sorted(reps, key=lambda r: r["profile_wall_ms"])[(len(reps) - 1) // 2])
    for key in ("first_step_s", "peak_rss_mb"):
        out[f"{key}_reps"] = [r[key] for r in reps] + ([r[key] for r in firsts] if key == "first_step_s" else [])
        out[key] = statistics.median(out[f"{key}_reps"])
    out["first_step_losses"] = [r["losses"][0] for r in firsts]  # (the same network and batch: tests)
    return out


def derive_isolated(row):
    """The figures of an isolated row, each from the row's own two runs."""
    o, c = row["original"], row["converted"]
    ok = "error" not in o and "error" not in c
    row["first_step_ratio"] = bench.ratio(c["first_step_s"], o["first_step_s"]) if ok else None
    row["peak_rss_ratio"] = bench.ratio(c["peak_rss_mb"], o["peak_rss_mb"]) if ok else None
    share = bench.ratio(o["bn_ms"], o["profile_wall_ms"]) if "error" not in o else None
    row["bn_share"] = share
    row["bound_infinite"] = None if share is None or share >= 1 else 1 / (1 - share)
    op_speedup = bench.ratio(o["bn_ms"], c["bn_ms"]) if ok else None
    row["bn_op_speedup"] = op_speedup
    row["bound"] = (None if share is None or not op_speedup else 1 / (1 - share * (1 - 1 / op_speedup)))
    saved_bn = o["bn_ms"] - c["bn_ms"] if ok else None
    row["saving_vs_bn_saved"] = (None if not saved_bn else
                                 (o["profile_wall_ms"] - c["profile_wall_ms"]) / saved_bn)
    return row


# -------------------------------------------------------------- steady state

def thread_settings(spec):
    """'default,1' -> [('default', n_default), ('1', 1)]."""
    from mindspore_bn_grad.cpu_kernel import native
    out = []
    for item in spec.split(","):
        item = item.strip()
        if item == "default":
            out.append(("default", native.get_num_threads()))
        else:
            try:
                n = int(item)
            except ValueError:
                n = 0
            if n < 1:
                raise SystemExit(f"bench --train: --threads expected 'default' or positive integers, got {item!r}")
            out.append((item, n))
    return out


def _select(variant):
    """The original trains on MindSpore's own BatchNorm kernels: where ours stand in for them in this
    process (the converted network's native route), they are switched back for its steps."""
    bench.select_kernels("mindspore" if variant == "original" else "ours")


def steady_rows_in_child(net_name, mode, settings, args):
    """steady_rows in a fresh process of its own: what earlier rows ran in a process (another network,
    the other mode) changes how fast MindSpore runs the next one there, for both variants alike, so
    no row's steps may follow another row's in one process (docs/performance.md)."""
    spec = {"steady": True, "net": net_name, "mode": mode, "settings": [list(s) for s in settings],
            "rounds": args.rounds, "steps": args.steps, "quick": args.quick}
    log(f"[steady] {net_name} {mode}: a fresh process for both variants")
    res = run_child(spec, args.child_timeout, show_log=True)
    if "error" in res:
        raise RuntimeError(f"bench --train: the steady-state process of {net_name} {mode} failed: {res['error']}")
    return res["rows"]


def steady_rows(net_name, mode, settings, args):
    """One row per thread setting for (net, mode), both variants in this process."""
    from mindspore_bn_grad.cpu_kernel import native
    _set_mode(mode)
    net, inputs, kind = build(net_name, args.quick)
    nets_ = {v: variant_of(net, v) for v in VARIANTS}  # converted: a deep copy, made before any step
    steps = {v: train_step(net_name, n, inputs, kind, graph=mode == "GRAPH") for v, n in nets_.items()}
    native.set_num_threads(settings[0][1])
    losses = {}
    for v in VARIANTS:
        log(f"[steady] {net_name} {mode} {v}: first steps" + (" (the graph compiles)" if mode == "GRAPH" else ""))
        _select(v)
        l0 = _timed_step(steps[v])[1]
        l1 = _timed_step(steps[v])[1]
        losses[v] = [float(l0.asnumpy()), float(l1.asnumpy())]
    rows = []
    for label, n in settings:
        rows.append(steady_row(net_name, mode, label, n, steps, args))
        rows[-1]["losses"] = losses
    del steps, nets_, net
    gc.collect()
    return rows


def steady_row(net_name, mode, label, threads, steps, args):
    from mindspore_bn_grad.cpu_kernel import native
    native.set_num_threads(threads)
    for v in VARIANTS:  # one untimed step under this setting
        _select(v)
        _timed_step(steps[v])
    times = {v: [] for v in VARIANTS}
    round_ratios = []
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for r in range(args.rounds):
            order = VARIANTS if r % 2 == 0 else VARIANTS[::-1]
            this_round = {v: [] for v in VARIANTS}
            for _ in range(args.steps):  # step by step: a slow spell of the machine falls on both alike
                for v in order:
                    _select(v)
                    this_round[v].append(_timed_step(steps[v])[0] * 1e3)
            for v in VARIANTS:
                times[v] += this_round[v]
            rr = statistics.median(this_round["original"]) / statistics.median(this_round["converted"])
            round_ratios.append(rr)
            log(f"[steady] {net_name} {mode} threads={label}: round {r + 1}/{args.rounds} "
                f"({order[0]} first): original {statistics.median(this_round['original']):.1f} ms, "
                f"converted {statistics.median(this_round['converted']):.1f} ms, ratio {rr:.2f}")
    finally:
        if was_enabled:
            gc.enable()
        _select("converted")
    row = {"net": net_name, "mode": mode, "threads": label, "kernel_threads": threads,
           "original_times_ms": times["original"], "converted_times_ms": times["converted"],
           "round_ratios": round_ratios}
    row["original_ms"] = statistics.median(times["original"])
    row["converted_ms"] = statistics.median(times["converted"])
    row["ratio"] = row["original_ms"] / row["converted_ms"]
    return row


# ------------------------------------------------------------------ report

METHOD = (
    "Method: network by network, first the isolated runs, then the steady state. First step, peak RSS and "
    "the profile come from one fresh process per (network, mode, variant), run one after the other while "
    "the main process waits ({isolated_reps} per variant, alternating which goes first: first step and peak RSS are their medians, the profile is that of the process with the median profiled step; the first step's median also takes {first_step_reps} more processes per variant that only time it, since one process's first step varies widely between processes); each builds the original network and deep-copies it, converted or not, so both "
    "have the same allocation history, and collects the garbage original before the first step (peak RSS = "
    "the process's VmHWM after the first {steps} + 2 steps, before profiling; first step = the first "
    "training-step call, including GRAPH compilation, after the network was built). Steady-state step "
    "times come from one fresh process per (network, mode) holding both variants: {rounds} rounds of {steps} steps of each, the "
    "variants alternating step by step, which goes first alternating between rounds, every step synced; medians over all timed "
    "steps; ratio = original / converted step time (> 1: converted faster), with the range of the per-round "
    "ratios. Thread settings change only our kernel's threads (set_num_threads); MindSpore's own kernels run "
    "as they do by default. BatchNorm kernel time (forward + backward) is from MindSpore's profiler (CPU activity, "
    "{profile_steps} steps): BatchNorm* in the original; in the converted network BatchNorm* on our kernels "
    "(the native route: MindSpore's own primitives, with MindSpore's own kernels switched back in for the "
    "original's steps in the one-process rounds), BatchNormExt* (the route through BatchNormExt) or BatchNorm "
    "and our Custom op (the Cell route) "
    "(small ops around them not counted); share = that time / the wall time "
    "of the same profiled steps; bound = 1 / (1 - share * (1 - 1/s)) with s = original / converted "
    "BatchNorm time in the same network.")


def _load(avg):
    return "–" if not avg else " / ".join(f"{x:.1f}" for x in avg) + " (1 / 5 / 15 min)"


def _f(v, fmt="{:.2f}"):
    return bench._f(v, fmt)  # pylint: disable=protected-access


def report(result):
    m = result["machine"]
    a = result["settings"]
    partial = "" if result.get("complete", True) else "PARTIAL RESULT (the run has not finished). "
    lines = [f"{partial}Machine: {bench.describe_machine(m)}; load average at the end {_load(result['load_avg_end'])}. "
             f"Kernel threads by default: {a['default_threads']}. MindSpore's tensors on "
             f"{bench.mindspore_pages(m)}.", "",
             METHOD.format(**{"first_step_reps": 0, **a}), ""]
    lines += [f"- `{n}`: {describe(n, result['quick'])}" for n in a["nets"]]
    lines += ["", "Steady state (ms per training step, medians):", "",
              "| network | mode | our threads | original ms | converted ms | original / converted | per-round range |",
              "|---|---|---|---:|---:|---:|---|"]
    for r in result["steady"]:
        rr = r["round_ratios"]
        lines.append(f"| {r['net']} | {r['mode']} | {r['threads']} ({r['kernel_threads']}) | "
                     f"{r['original_ms']:.1f} | {r['converted_ms']:.1f} | {r['ratio']:.2f}x | "
                     f"{min(rr):.2f}-{max(rr):.2f} |")
    lines += ["", "Isolated processes (default threads): first step, peak RSS, BatchNorm kernels (forward + backward) from the profiler:", "",
              "| network | mode | first step s original / converted | converted / original | "
              "peak RSS MB original / converted | converted / original | BN ms/step original / converted "
              "| profiled step ms original / converted | BN share of original step | bound (this s) | "
              "bound (s = inf) |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in result["isolated"]:
        o, c = r["original"], r["converted"]
        if "error" in o or "error" in c:
            lines.append(f"| {r['net']} | {r['mode']} | failed: {(o.get('error') or c.get('error'))[:120]} "
                         "| | | | | | | | |")
            continue
        lines.append(
            f"| {r['net']} | {r['mode']} | {o['first_step_s']:.2f} / {c['first_step_s']:.2f} | "
            f"{_f(r['first_step_ratio'])}x | {o['peak_rss_mb']:.0f} / {c['peak_rss_mb']:.0f} | "
            f"{_f(r['peak_rss_ratio'], '{:.3f}')}x | {o['bn_ms']:.2f} / {c['bn_ms']:.2f} | "
            f"{o['profile_wall_ms']:.1f} / {c['profile_wall_ms']:.1f} | {_f(100 * r['bn_share'], '{:.1f}')}% | "
            f"{_f(r['bound'])}x (s = {_f(r['bn_op_speedup'])}) | {_f(r['bound_infinite'])}x |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ driver

def _csv(value, allowed, what):
    items = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in items if v not in allowed]
    if bad or not items:
        raise SystemExit(f"bench --train: --{what} expected a comma-separated list of "
                         f"{', '.join(allowed)}, got {value!r}")
    return items


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m mindspore_bn_grad bench --train",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--nets", default=",".join(NETS), help=f"comma-separated, of {', '.join(NETS)}")
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated, of GRAPH, PYNATIVE")
    p.add_argument("--threads", default="default,1",
                   help="our kernel's thread settings, comma-separated: 'default' or a count (default: default,1)")
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 10; --quick 2)")
    p.add_argument("--steps", type=int, default=None, help="timed steps per variant and round (default 5; --quick 2)")
    p.add_argument("--profile-steps", type=int, default=None, help="profiled steps (default 5; --quick 2)")
    p.add_argument("--isolated-reps", type=int, default=None,
                   help="fresh processes per variant for first step, peak RSS and profile (default 3; --quick 1)")
    p.add_argument("--first-step-reps", type=int, default=None,
                   help="more fresh processes per variant that only time the first step, for its median "
                        "(default 6; --quick 1)")
    p.add_argument("--child-timeout", type=float, default=1800, help="seconds per child process, isolated or steady state (default 1800)")
    p.add_argument("--quick", action="store_true", help="tiny networks (a test of the benchmark, not a measurement)")
    p.add_argument("--out", default=None,
                   help="directory for bench_train.{json,md} (default: bench/results/ of the checkout, "
                        "else a new temporary directory)")
    args = p.parse_args(argv)
    for name, full, quick in (("rounds", 10, 2), ("steps", 5, 2), ("profile_steps", 5, 2), ("isolated_reps", 3, 1)):
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
        if getattr(args, name) < 1:
            raise SystemExit(f"bench --train: --{name.replace('_', '-')} expected a positive integer, "
                             f"got {getattr(args, name)}")
    if args.first_step_reps is None:
        args.first_step_reps = 1 if args.quick else 6
    if args.first_step_reps < 0:
        raise SystemExit(f"bench --train: --first-step-reps expected 0 or a positive integer, got {args.first_step_reps}")
    args.nets = _csv(args.nets, NETS, "nets")
    args.modes = _csv(args.modes.upper(), MODES, "modes")
    return args


def run(args, save=None):
    """Network by network: its isolated processes, then its steady-state rounds here.

    save(result) is called after every row with the result so far ("complete": False until the end)."""
    from mindspore_bn_grad.cpu_kernel import native
    default_threads = native.get_num_threads()
    settings = thread_settings(args.threads)
    result = {"machine": bench.machine_info(settings[0][1]), "quick": bool(args.quick), "complete": False,
              "settings": {"nets": args.nets, "modes": args.modes, "threads": [s[0] for s in settings],
                           "default_threads": default_threads,
                           "rounds": args.rounds, "steps": args.steps, "profile_steps": args.profile_steps,
                           "isolated_reps": args.isolated_reps, "first_step_reps": args.first_step_reps},
              "isolated": [], "steady": []}

    def saved():
        result["load_avg_end"] = os.getloadavg() if hasattr(os, "getloadavg") else None
        if save:
            save(result)
    total = len(args.nets) * len(args.modes) * len(VARIANTS) * args.isolated_reps
    try:
        for net in args.nets:
            for mode in args.modes:
                first = len(result["isolated"]) * len(VARIANTS) * args.isolated_reps + 1
                result["isolated"].append(isolated_row(net, mode, args, (first, total)))
                saved()
            for mode in args.modes:
                result["steady"] += steady_rows_in_child(net, mode, settings, args)
                saved()
    finally:
        native.set_num_threads(default_threads)
        if "mindspore" in sys.modules:
            import mindspore as ms
            ms.set_context(mode=ms.PYNATIVE_MODE)
    result["complete"] = True
    saved()
    return result


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--child"]:
        print(RESULT_TAG + json.dumps(child(json.loads(argv[1]))), flush=True)
        return 0
    args = parse_args(argv)
    out = Path(args.out) if args.out else bench.default_out_dir()
    out.mkdir(parents=True, exist_ok=True)

    def save(result):  # after every row, so that a long run stopped early keeps what it measured
        (out / "bench_train.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
        (out / "bench_train.md").write_text(report(result), encoding="utf-8")
    log(f"writing {out / 'bench_train.json'} and {out / 'bench_train.md'} as rows complete")
    result = run(args, save)
    print(report(result))
    log(f"wrote {out / 'bench_train.json'} and {out / 'bench_train.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
