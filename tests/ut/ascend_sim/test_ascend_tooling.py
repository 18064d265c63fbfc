"""Tooling around the Ascend C operator that runs without CANN: the
generated op definition is in sync with op_def/, the build script refuses
to run without CANN, the wiring explains how to install the op package."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_generated_op_definition_matches_yaml():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_ascend_op_def.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def rows(text, soc):
    """The combination rows of one SoC in a generated op definition: [(dtype names, format)]."""
    block = text.split(f"constexpr Combination {soc.upper()}[] = {{\n")[1].split("\n};")[0]
    out = []
    for line in block.splitlines():
        m = re.fullmatch(r"    \{\{([A-Z0-9, ]+)\}, (\w+)\},", line)
        assert m, line
        out.append((tuple(m.group(1).split(", ")), m.group(2)))
    return out


def test_generated_op_definition_has_one_config_per_ascend_soc():
    from mindspore_bn_grad import support_rules
    text = (ROOT / "ascend_impl" / "op_host" / "batch_norm_backward_def.gen.h").read_text()
    for soc in support_rules.targets(device="Ascend"):
        assert text.count(f'AddConfig(def, "{soc}", {soc.upper()});') == 1
    assert all("BF16" not in dts for dts, _ in rows(text, "ascend910"))
    assert any("BF16" in dts for dts, _ in rows(text, "ascend910b"))


def test_generated_rows_are_the_accepted_combinations():
    """Each row is one accepted combination of support_rules (dtype per tensor, format); none missing, none extra."""
    from mindspore_bn_grad import support_rules
    import gen_ascend_op_def as gen
    text = (ROOT / "ascend_impl" / "op_host" / "batch_norm_backward_def.gen.h").read_text()
    for soc in support_rules.targets(device="Ascend"):
        want = {(tuple(gen.GE_DTYPE_SHORT[d] for d in combo[:-1]), combo[-1])
                for combo in (tuple(c[n] for n in gen.load_opdef().input_names + gen.load_opdef().output_names)
                              + (c["format"],) for c in support_rules.accepted_combinations(soc, derived_outputs=False))}
        got = rows(text, soc)
        assert len(got) == len(set(got)) and set(got) == want, soc


def test_generated_headers_are_readable():
    """One fact per line: no line of a generated header is longer than 120 characters."""
    import gen_ascend_op_def as gen
    for path, text in gen.jobs():
        assert max(len(line) for line in text.splitlines()) <= 120, path


@pytest.mark.parametrize("target", ["OUT", "KERNEL_SPEC_OUT", "CPU_SPEC_OUT"])
def test_drift_is_detected(tmp_path, monkeypatch, target):
    import gen_ascend_op_def as gen
    stale = tmp_path / "def.gen.h"
    text = dict(gen.jobs())[getattr(gen, target)]
    stale.write_text(text.replace(" = 1", " = 2", 1))
    assert stale.read_text() != text
    monkeypatch.setattr(gen, target, stale)
    assert gen.main(["--check"]) == 1


def _no_cann_env():
    env = {k: v for k, v in os.environ.items() if k not in ("ASCEND_HOME_PATH", "ASCEND_CANN_PACKAGE_PATH")}
    return env


@pytest.mark.skipif(Path("/usr/local/Ascend/ascend-toolkit/latest").exists(), reason="CANN is installed here")
def test_build_script_requires_cann():
    r = subprocess.run(["bash", str(ROOT / "scripts" / "build_ascend.sh"), "--soc", "ascend910b"],
                       capture_output=True, text=True, env=_no_cann_env())
    assert r.returncode != 0
    assert "CANN" in r.stderr and "ASCEND_HOME_PATH" in r.stderr


def test_build_script_rejects_unknown_soc():
    r = subprocess.run(["bash", str(ROOT / "scripts" / "build_ascend.sh"), "--soc", "ascend999"],
                       capture_output=True, text=True, env=_no_cann_env())
    assert r.returncode != 0 and "ascend910b" in r.stderr


def test_missing_op_package_error_says_how_to_build(monkeypatch):
    from mindspore_bn_grad import ascend
    monkeypatch.delenv("ASCEND_CUSTOM_OPP_PATH", raising=False)
    monkeypatch.delenv("ASCEND_OPP_PATH", raising=False)
    with pytest.raises(RuntimeError, match="build_ascend.sh") as e:
        ascend.custom_kwargs()
    assert "ASCEND_CUSTOM_OPP_PATH" in str(e.value)


def test_installed_op_package_is_found(tmp_path, monkeypatch):
    from mindspore_bn_grad import ascend
    cfg = tmp_path / "op_impl" / "ai_core" / "tbe" / "config" / "ascend910b"
    cfg.mkdir(parents=True)
    (cfg / "aic-ascend910b-ops-info.json").write_text('{"BatchNormBackward": {}}')
    monkeypatch.setenv("ASCEND_CUSTOM_OPP_PATH", str(tmp_path))
    assert ascend.installed_package() == str(tmp_path)
