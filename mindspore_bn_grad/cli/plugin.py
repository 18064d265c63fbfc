"""``python -m mindspore_bn_grad plugin-path``: the op plugin library, for MS_OP_PLUGIN_PATH.

    export MS_OP_PLUGIN_PATH=$(python -m mindspore_bn_grad plugin-path)

prints the path of our kernel library (building it first if it is not cached) and
nothing else on standard output (on a MindSpore release without the op plugin interface, 2.7.x,
nothing: it says why on standard error and exits 1). ``--check`` also runs the self-test in this process
(a BatchNormExt launch on CPU) and says whether MindSpore ran our kernel.
"""
import argparse
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m mindspore_bn_grad plugin-path",
                                     description=__doc__.strip().splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="also launch BatchNormExt once and report whether our kernel ran")
    args = parser.parse_args(argv)
    from ..cpu_kernel import plugin
    if not plugin.release_has_interface():  # a path MindSpore could not use as a plugin: none at all
        print(f"plugin-path: {plugin.state().reason}", file=sys.stderr)
        return 1
    print(plugin.plugin_path())
    if args.check:
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ok = plugin.status()
        print("op plugin active: our kernels run MindSpore's BatchNormExt / BatchNormGradExt" if ok
              else f"op plugin not active: {plugin.state().reason}", file=sys.stderr)
        return 0 if ok else 1
    return 0
