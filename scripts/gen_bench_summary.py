#!/usr/bin/env python
"""Writes the README's benchmark summary from the latest benchmark results.

Reads bench/RESULTS.json (``python -m mindspore_bn_grad bench``) and
bench/RESULTS_TRAIN.json (``bench --train``) and replaces the block between
`<!-- bench-summary:start -->` and `<!-- bench-summary:end -->` in README.md.
`--check` writes nothing and exits 1 when the block is out of date;
tests/ut/test_readme.py runs the same comparison, so the README never shows
numbers the result files do not hold.
"""
import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
START, END = "<!-- bench-summary:start -->", "<!-- bench-summary:end -->"
NETS = {"resnet18": "ResNet-18", "stack": "8 x Conv-BN-ReLU", "mlp": "MLP 4 x (Dense, BN1d, ReLU)"}


def _range(values, fmt="{:.2f}"):
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    lo, hi = min(values), max(values)
    return fmt.format(lo) if lo == hi else f"{fmt.format(lo)}-{fmt.format(hi)}"


def _machine(m, load_end=None):
    load = load_end or m.get("load_avg")  # bench --train records the load at its end apart
    busy = f", load average {load[0]:.1f} at the end" if load else ""
    return (f"{m.get('cpu', '?')}, {m.get('logical_cpus', '?')} CPUs, MindSpore {m.get('mindspore', '?')}, "
            f"{m.get('date_utc', '?')}{busy}")


def summary(per_op, train):
    lines = []
    if per_op:
        big = [r for r in per_op["rows"] if r["dtype"] == "float32" and r["layout"] == "NCHW"
               and r["tensor_mb"] >= 1.0]
        fwd = [r for r in per_op.get("forward_rows", []) if r["dtype"] == "float32" and r["layout"] == "NCHW"]
        lines += [f"Per operator, float32, channel-first, tensors of 1 MB and more ({_machine(per_op['machine'])}; "
                  "*x* = MindSpore's built-in time / ours, measured in the same rounds):", "",
                  "| kernel | ours vs | PYNATIVE x | GRAPH x | % of copy bandwidth (direct) | x PyTorch (direct) |",
                  "|---|---|---:|---:|---:|---:|"]
        if any(r.get("legacy_pynative_speedup_vs_builtin") is not None for r in fwd):
            lines.append(
                "| forward (native route, nn cells: ops.BatchNorm on ours) | ops.BatchNorm | "
                f"{_range([r.get('legacy_pynative_speedup_vs_builtin') for r in fwd])} | "
                f"{_range([r.get('legacy_graph_speedup_vs_builtin') for r in fwd])} | "
                f"{_range([r.get('direct_pct_copy') for r in fwd], '{:.0f}')} | "
                f"{_range([r.get('speedup_vs_torch') for r in fwd])} |")
        if any(r.get("legacy_speedup_vs_builtin_pynative") is not None for r in big):
            lines.append(
                "| backward (native route, nn cells: BatchNormGrad on ours) | BatchNormGrad | "
                f"{_range([r.get('legacy_speedup_vs_builtin_pynative') for r in big])} | "
                f"{_range([r.get('legacy_speedup_vs_builtin_graph') for r in big])} | "
                f"{_range([r.get('direct_pct_copy') for r in big], '{:.0f}')} | "
                f"{_range([r.get('speedup_vs_torch') for r in big])} |")
        if fwd:
            lines.append(
                "| forward (mint: BatchNormExt) | ops.BatchNorm | "
                f"{_range([r.get('native_pynative_speedup_vs_builtin') for r in fwd])} | "
                f"{_range([r.get('native_graph_speedup_vs_builtin') for r in fwd])} | "
                f"{_range([r.get('direct_pct_copy') for r in fwd], '{:.0f}')} | "
                f"{_range([r.get('speedup_vs_torch') for r in fwd])} |")
        lines.append(
            "| backward (mint: BatchNormGradExt) | BatchNormGrad | "
            f"{_range([r.get('native_speedup_vs_builtin_pynative') for r in big])} | "
            f"{_range([r.get('native_speedup_vs_builtin_graph') for r in big])} | "
            f"{_range([r.get('direct_pct_copy') for r in big], '{:.0f}')} | "
            f"{_range([r.get('speedup_vs_torch') for r in big])} |")
        lines.append(
            "| backward (Cell route: BatchNormBackward) | BatchNormGrad | "
            f"{_range([r.get('speedup_vs_builtin_pynative') for r in big])} | "
            f"{_range([r.get('speedup_vs_builtin_graph') for r in big])} | | |")
    if train:
        steady = {}
        for r in train["steady"]:
            steady.setdefault((r["net"], r["mode"]), {})[r["threads"]] = r["ratio"]
        iso = {(r["net"], r["mode"]): r for r in train["isolated"]}
        lines += ["", f"Whole networks training, converted / original step speed ({_machine(train['machine'], train.get('load_avg_end'))}; "
                  "> 1: converted faster; first step and peak RSS: converted / original):", "",
                  "| network | mode | step speed, default threads | 1 thread | first step | peak RSS |",
                  "|---|---|---:|---:|---:|---:|"]
        for (net, mode), by_threads in steady.items():
            i = iso.get((net, mode), {})
            lines.append(f"| {NETS.get(net, net)} | {mode} | {_range([by_threads.get('default')])}x | "
                         f"{_range([by_threads.get('1')])}x | {_range([i.get('first_step_ratio')])}x | "
                         f"{_range([i.get('peak_rss_ratio')], '{:.3f}')}x |")
    return "\n".join(lines)


def _load(name):
    path = ROOT / "bench" / name
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def expected_readme(text):
    block = summary(_load("RESULTS.json"), _load("RESULTS_TRAIN.json"))
    head, sep, rest = text.partition(START)
    if not sep:
        raise SystemExit(f"gen_bench_summary: README.md has no {START} marker")
    _, sep, tail = rest.partition(END)
    if not sep:
        raise SystemExit(f"gen_bench_summary: README.md has no {END} marker")
    return f"{head}{START}\n{block}\n{END}{tail}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only report drift (exit 1)")
    args = p.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    want = expected_readme(text)
    if text == want:
        return 0
    if args.check:
        print("README.md's benchmark summary is out of date: run python scripts/gen_bench_summary.py",
              file=sys.stderr)
        return 1
    README.write_text(want, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
