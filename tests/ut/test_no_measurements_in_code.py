"""Measured numbers live in docs/performance.md, docs/ascend_kernel.md and bench/RESULTS*.md, not in
code comments, where nothing re-measures them (the CPU package, the Ascend C sources, the Ascend tools)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# a ratio (1.4x, 1.7-3x), a time (36-56 us, 12 ms), a percentage range (15-35%), a time in seconds
# that something took (took about 0.2 s longer, 45 s faster)
MEASURED = re.compile(r"\b\d+(\.\d+)?(-\d+(\.\d+)?)?x(?![{\w%])|\b\d+(-\d+)? ?(us|ms)\b|\b\d+-\d+ ?%"
                      r"|\b\d+(\.\d+)? ?s (longer|shorter|faster|slower|less|more)\b")


def _code_files():
    files = [p for pat in ("mindspore_bn_grad/**/*.py", "mindspore_bn_grad/csrc/**/*.h",
                           "mindspore_bn_grad/csrc/*.cpp", "bench/*.py", "ascend_impl/**/*.h", "ascend_impl/**/*.cpp",
                           "tests/ascend_tools/**/*.h", "tests/ascend_tools/**/*.cpp", "scripts/*.py")
             for p in ROOT.glob(pat) if not p.name.endswith(".gen.h")]
    assert len(files) > 30
    assert any(p.parts[-3:-1] == ("ascend_impl", "op_host") for p in files)
    return files


def test_no_measured_numbers_in_code_comments():
    found = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in _code_files()
             for n, line in enumerate(p.read_text().splitlines(), 1) if MEASURED.search(line)]
    assert found == [], "move these to docs/performance.md:\n" + "\n".join(found)


def test_the_pattern_finds_measurements():
    for text in ("ran up to 1.4x slower", "PyTorch 1.7-3x slower", "36-56 us of a launch", "12 ms against",
                 "15-35% slower", "took about 0.2 s longer", "45 s faster",
                 "(32, 128, 28, 28) 36.3 -> 43.3 us in the model"):
        assert MEASURED.search(text), text
    for text in ("x86_64", "0x1f", "float16", "ms.Tensor", "2 MiB", "3x{image}", "timeout of 600 s",
                 "'%s' 0x%lx 2>/dev/null"):
        assert not MEASURED.search(text), text
