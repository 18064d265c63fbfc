"""Command line: python -m mindspore_bn_grad <command> [args].

  help      this list; help <command>: that command's options (also <command> --help)
  demo      train a small CNN on CPU with our BatchNorm backward (the main job)
  example   run the operator once and check it against NumPy
  support   print the per-SoC dtype/format support matrix from the YAML
  bench     benchmark the CPU kernel against MindSpore's built-in and PyTorch
            (bench --train: whole networks training, original vs converted BatchNorm;
            bench --double: the double backward; the benchmarks live outside this
            package, in mindspore_bn_grad_bench)
  plugin-path  print the op plugin library's path (the native route, opt-in), for
            export MS_OP_PLUGIN_PATH=$(python -m mindspore_bn_grad plugin-path)

Each command is a module of mindspore_bn_grad.cli with a main(argv).
"""
import importlib
import sys

COMMANDS = {
    "demo": "mindspore_bn_grad.cli.demo",
    "example": "mindspore_bn_grad.cli.example",
    "support": "mindspore_bn_grad.cli.support",
    "bench": "mindspore_bn_grad.cli.bench",
    "plugin-path": "mindspore_bn_grad.cli.plugin",
}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["help"] and argv[1:2] and argv[1] in COMMANDS:
        argv = [argv[1], "--help"]
    if not argv or argv[0] in ("help", "-h", "--help") or argv[0] not in COMMANDS:
        print(__doc__.strip())
        if argv and argv[0] not in ("help", "-h", "--help"):
            print(f"\nunknown command {argv[0]!r}", file=sys.stderr)
            return 2
        if argv[1:] and argv[0] == "help":
            print(f"\nunknown command {argv[1]!r}", file=sys.stderr)
            return 2
        return 0
    return importlib.import_module(COMMANDS[argv[0]]).main(argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main())
