#!/usr/bin/env python
"""Benchmark of the CPU kernel; thin wrapper of mindspore_bn_grad/bench.py.

    python bench/bench_cpu.py [--quick] [--threads N] [--reps N] [--out DIR]

Same as `python -m mindspore_bn_grad bench`; results go to bench/results/
unless --out is given. The latest table is kept in bench/RESULTS.md.
"""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from mindspore_bn_grad.bench import main  # noqa: E402

if __name__ == "__main__":
    argv = sys.argv[1:]
    if not any(a == "--out" or a.startswith("--out=") for a in argv):
        argv += ["--out", str(HERE / "results")]
    sys.exit(main(argv))
