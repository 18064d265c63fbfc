"""`python -m mindspore_bn_grad bench [--train | --double | --forward | --ascend | --zoo] [...]`: the benchmarks, kept outside the runtime package.

They are the import package ``mindspore_bn_grad_bench`` (the repository's
bench/ folder), installed alongside this one. This command picks one and
hands it the remaining arguments:

    bench [...]            the CPU kernel against MindSpore and PyTorch   (bench/kernel.py)
    bench --train [...]    whole networks training                         (bench/train.py)
    bench --double [...]   the double backward                             (bench/double.py)
    bench --forward [...]  the BatchNormForward rows alone                 (bench/forward.py)
    bench --ascend [...]   the Ascend C kernel's performance model         (bench/ascend.py)
    bench --zoo [...]      a public model zoo's networks (mindcv)          (bench/zoo.py)
"""
import importlib
import sys

# flag -> module; none of them: kernel
BENCHMARKS = {"--train": "train", "--double": "double", "--forward": "forward", "--ascend": "ascend", "--zoo": "zoo"}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    chosen = [f for f in BENCHMARKS if f in argv]
    if len(chosen) > 1:
        print(f"bench: {' and '.join(chosen)} are separate benchmarks: give one", file=sys.stderr)
        return 2
    name = BENCHMARKS[chosen[0]] if chosen else "kernel"
    try:
        importlib.import_module("mindspore_bn_grad_bench")
    except ModuleNotFoundError as e:
        if e.name != "mindspore_bn_grad_bench":
            raise
        print("bench: the benchmarks (import package mindspore_bn_grad_bench, the repository's bench/ "
              "folder) are not installed; install the project from its checkout: pip install -e .",
              file=sys.stderr)
        return 2
    module = importlib.import_module(f"mindspore_bn_grad_bench.{name}")
    return module.main([a for a in argv if a not in BENCHMARKS])
