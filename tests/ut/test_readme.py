"""The README is a user's document: every Python example in it runs as written, and it stays short."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def python_blocks():
    text = README.read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_readme_is_short_and_has_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert 'python -m pip install -e ".[demo]" && python -m mindspore_bn_grad demo' in text
    assert 'python -m pip install -e ".[test]" && python -m pytest' in text
    assert len(python_blocks()) >= 3


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_example_runs_as_written(index, tmp_path):
    code = python_blocks()[index]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.pop("MS_OP_PLUGIN_PATH", None)  # a fresh user process
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"README example {index} failed:\n{code}\n{proc.stderr[-3000:]}"
    assert list(tmp_path.iterdir()) == [], "an example left files in the working directory"


def test_benchmark_summary_is_generated_from_the_results():
    """The README's numbers are the result files' (fix: python scripts/gen_bench_summary.py)."""
    import gen_bench_summary
    text = README.read_text(encoding="utf-8")
    assert gen_bench_summary.expected_readme(text) == text
