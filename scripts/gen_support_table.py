#!/usr/bin/env python
"""Regenerates the support table and the argument tables from op_def/.

Writes docs/arguments.md (the prototypes' arguments, from op_def/*.yaml) and
docs/support_table.md (which the README links). `--check` writes nothing
and exits 1 when either file is out of date. tests/ut/test_support_table.py
runs the same comparison.
"""
import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "support_table.md"
ARGS_DOC = ROOT / "docs" / "arguments.md"


def expected():
    """{path: wanted text} for the generated files."""
    sys.path.insert(0, str(ROOT))
    from mindspore_bn_grad.cli.support import arguments_markdown, support_markdown
    doc = "# BatchNormBackward: dtype and format support per target\n\n" + support_markdown()
    return {DOC: doc, ARGS_DOC: arguments_markdown()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only report drift (exit 1)")
    args = p.parse_args(argv)
    stale = []
    for path, text in expected().items():
        old = path.read_text(encoding="utf-8") if path.exists() else None
        if old == text:
            continue
        stale.append(path)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    for path in stale:
        print(f"{'out of date' if args.check else 'rewrote'}: {path.relative_to(ROOT)}")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
