"""The support matrix (CLI, docs/support_table.md, README block) is generated from the YAML and stays in sync."""
import importlib.util
import pathlib

import pytest

from mindspore_bn_grad.cli import support

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_support_table", ROOT / "scripts" / "gen_support_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_docs_match_the_yaml():
    """Fails when docs/support_table.md or docs/arguments.md drift; fix: python scripts/gen_support_table.py."""
    for path, text in _generator().expected().items():
        assert path.exists(), f"{path} missing: run scripts/gen_support_table.py"
        assert path.read_text(encoding="utf-8") == text, \
            f"{path.name} is out of date with op_def/batch_norm_backward_support.yaml: run scripts/gen_support_table.py"
    assert "docs/support_table.md" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_table_states_the_rules():
    md = support.support_markdown()
    for line in md.splitlines():
        if line.startswith("| `ascend910` "):
            assert "bfloat16" not in line and "NHWC" not in line
        if line.startswith("| `ascend950` "):
            assert "NHWC" in line and "NDHWC" in line and "NLC" not in line
        if line.startswith("| `cpu` "):
            assert "float64" in line and "ND_CHANNEL_LAST" in line
    assert "running_var: " in md and "the dtype of running_mean" in md


def test_cli(capsys):
    from mindspore_bn_grad.__main__ import main
    assert main(["support", "--soc", "Ascend910B2", "--combinations", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "`ascend910b`" in out and "`ascend950`" not in out and "3 dtype combinations x 5 formats" in out
    assert main(["support", "--soc", "nope"]) == 2
    assert "ascend910_93" in capsys.readouterr().err
    assert support.main(["--markdown"]) == 0
    assert capsys.readouterr().out == support.support_markdown()


def test_cli_prints_plain_text(capsys):
    """Plain text by default: no HTML comment, no Markdown table rules or backticks; same content."""
    assert support.main([]) == 0
    out = capsys.readouterr().out
    assert "<!--" not in out and "| ---" not in out and "`" not in out
    assert out == support.plain_text(support.support_markdown())
    rows = {}
    for line in out.splitlines():  # the summary table's rows come first
        if line.split() and line.split()[0] in ("ascend910", "ascend950", "cpu"):
            rows.setdefault(line.split()[0], line)
    assert "bfloat16" not in rows["ascend910"] and "NDHWC" in rows["ascend950"] and "float64" in rows["cpu"]


def test_arguments_doc_states_the_prototypes():
    md = support.arguments_markdown()
    for name in ("BatchNormBackward", "BatchNormReduceBackward", "BatchNormElemtBackward"):
        assert f"## {name} (`aclnn{name}`)" in md
    assert "| `running_var` | runningVar | no | (C,) | training=False | 1.0 |" in md
    assert "| `counter` | counter | yes | 1-D, any length | always |  | Ascend: float32, int32, int64; " \
           "CPU: float32, float64, int32, int64 |" in md
    assert "| `grad_weight` | gradWeight | (C,) | weight else mean | weight_g |" in md


def test_docs_ship_with_the_code():
    """The README links the operator contract in docs/, never a file outside the repository."""
    import re
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)]+)\)", readme)
    assert {"docs/operator.md", "docs/arguments.md", "docs/support_table.md"} <= set(links)
    for link in links:
        if not link.startswith(("http://", "https://", "#")):
            assert not link.startswith(".."), link
            assert (ROOT / link.split("#")[0]).exists(), link
    for doc in ("operator.md", "arguments.md", "support_table.md"):
        text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
        assert "../shared" not in text and "/work/" not in text, doc


def test_every_relative_link_in_the_shipped_documents_resolves():
    """README, CHANGELOG, docs/ and bench/ link each other relative to the linking file; a link
    written relative to the repository root from inside docs/ points nowhere on GitHub."""
    import re
    files = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "bench").glob("*.md"))]
    broken = []
    for md in files:
        text = md.read_text(encoding="utf-8")
        for m in re.finditer(r"\]\(([^)\s]+)\)", text):
            target = m.group(1).split("#")[0]
            if not target or target.startswith(("http://", "https://", "mailto:")):
                continue
            if not (md.parent / target).exists():
                broken.append(f"{md.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(1)}")
    assert not broken, broken
