"""`python -m mindspore_bn_grad bench [...]`: the benchmarks, which live outside the runtime package.

They are the import package ``mindspore_bn_grad_bench`` (the repository's
bench/ folder), installed alongside this one; this command only hands its
arguments on (``bench --train``, ``bench --double`` and every other flag).
"""
import sys


def main(argv=None):
    try:
        from mindspore_bn_grad_bench.kernel import main as bench_main
    except ModuleNotFoundError as e:
        if e.name != "mindspore_bn_grad_bench":
            raise
        print("bench: the benchmarks (import package mindspore_bn_grad_bench, the repository's bench/ "
              "folder) are not installed; install the project from its checkout: pip install -e .",
              file=sys.stderr)
        return 2
    return bench_main(argv)
