"""Tooling around the Ascend C operator that runs without CANN: the
generated op definition is in sync with op_def/, the build script refuses
to run without CANN, the wiring explains how to install the op package."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_generated_op_definition_matches_yaml():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_ascend_op_def.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_generated_op_definition_has_one_config_per_ascend_soc():
    from mindspore_bn_grad import _soc
    text = (ROOT / "ascend_impl" / "op_host" / "batch_norm_backward_def.gen.h").read_text()
    for soc in _soc.targets(device="Ascend"):
        assert text.count(f'AddConfig("{soc}"') == 1
    assert "ge::DT_BF16" not in text.split('AddConfig("ascend910"')[0].split("{\n        ops::OpAICoreConfig")[1]


def test_drift_is_detected(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "scripts"))
    import gen_ascend_op_def as gen
    stale = tmp_path / "def.gen.h"
    stale.write_text(gen.render().replace("ge::DT_FLOAT16", "ge::DT_FLOAT", 1))
    monkeypatch.setattr(gen, "OUT", stale)
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
    from mindspore_bn_grad import _ascend
    monkeypatch.delenv("ASCEND_CUSTOM_OPP_PATH", raising=False)
    monkeypatch.delenv("ASCEND_OPP_PATH", raising=False)
    with pytest.raises(RuntimeError, match="build_ascend.sh") as e:
        _ascend.ascend_custom_kwargs({})
    assert "ASCEND_CUSTOM_OPP_PATH" in str(e.value)


def test_installed_op_package_is_found(tmp_path, monkeypatch):
    from mindspore_bn_grad import _ascend
    cfg = tmp_path / "op_impl" / "ai_core" / "tbe" / "config" / "ascend910b"
    cfg.mkdir(parents=True)
    (cfg / "aic-ascend910b-ops-info.json").write_text('{"BatchNormBackward": {}}')
    monkeypatch.setenv("ASCEND_CUSTOM_OPP_PATH", str(tmp_path))
    assert _ascend.installed_package() == str(tmp_path)
