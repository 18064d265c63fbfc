#!/usr/bin/env python
"""Benchmark of the CPU kernel; thin wrapper of bench/kernel.py (mindspore_bn_grad_bench.kernel).

    python bench/bench_cpu.py [--quick] [--threads N] [--reps N] [--out DIR]

Same as `python -m mindspore_bn_grad bench`; results go to bench/results/
unless --out is given. The latest table is kept in bench/RESULTS.md. Needs the
project installed (pip install -e .), which provides mindspore_bn_grad_bench.
"""
import sys
from pathlib import Path

from mindspore_bn_grad_bench.kernel import main

if __name__ == "__main__":
    argv = sys.argv[1:]
    if not any(a == "--out" or a.startswith("--out=") for a in argv):
        argv += ["--out", str(Path(__file__).resolve().parent / "results")]
    sys.exit(main(argv))
