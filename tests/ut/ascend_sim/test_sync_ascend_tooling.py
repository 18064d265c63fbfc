"""Ascend wiring of the SyncBatchNorm backward steps without CANN: the
generated op definitions (op_host/batch_norm_{reduce,elemt}_backward_def.gen.h)
and the kernel entry points carry the YAML names in order, the Python side
builds the Custom kwargs from the same YAMLs."""
import json
import re
from pathlib import Path

import pytest

from mindspore_bn_grad.spec import load_opdef

ROOT = Path(__file__).resolve().parents[3]
OPS = {"batch_norm_reduce_backward.yaml": "batch_norm_reduce_backward",
       "batch_norm_elemt_backward.yaml": "batch_norm_elemt_backward"}


@pytest.mark.parametrize("yaml_name,stem", OPS.items())
def test_generated_signature_matches_yaml(yaml_name, stem):
    opdef = load_opdef(yaml_name)
    text = (ROOT / "ascend_impl" / "op_host" / f"{stem}_def.gen.h").read_text()
    assert f'OP_TYPE = "{opdef.op_name}"' in text
    assert re.findall(r'def\.Input\("(\w+)"\)', text) == opdef.input_names
    assert re.findall(r'def\.Output\("(\w+)"\)', text) == opdef.output_names
    assert re.findall(r'def\.Attr\("(\w+)"\)', text) == [a.kernel_attr for a in opdef.attrs]
    optional = re.findall(r'def\.Input\("(\w+)"\)\.ParamType\(ops::OPTIONAL\)', text)
    assert optional == [i.name for i in opdef.inputs if i.optional]
    from mindspore_bn_grad import support_rules
    for soc in support_rules.targets(device="Ascend"):
        assert text.count(f'AddConfig(def, "{soc}", {soc.upper()});') == 1


@pytest.mark.parametrize("yaml_name,stem", OPS.items())
def test_kernel_entry_takes_yaml_names_in_order(yaml_name, stem):
    opdef = load_opdef(yaml_name)
    src = (ROOT / "ascend_impl" / "op_kernel" / f"{stem}.cpp").read_text()
    m = re.search(rf'void {stem}\(([^)]*)\)', src)
    params = re.findall(r'GM_ADDR (\w+)', m.group(1))
    assert params == opdef.input_names + opdef.output_names + ["workspace", "tiling"]


def test_elemt_counter_columns_are_the_yaml_counter_dtypes():
    """Every SoC's rows give `counter` exactly its Ascend dtypes (float32, int32, int64), each with every
    combination of the other tensors."""
    from mindspore_bn_grad import support_rules
    from test_ascend_tooling import rows
    opdef = load_opdef("batch_norm_elemt_backward.yaml")
    short = {"float32": "F32", "int32": "I32", "int64": "I64"}
    want = {short[d] for d in opdef.input("counter").allowed_dtypes("Ascend")}
    assert want == {"F32", "I32", "I64"}
    text = (ROOT / "ascend_impl" / "op_host" / "batch_norm_elemt_backward_def.gen.h").read_text()
    k = opdef.input_names.index("counter")
    for soc in support_rules.targets(device="Ascend"):
        got = rows(text, soc)
        assert {dts[k] for dts, _ in got} == want
        others = {(dts[:k] + dts[k + 1:], fmt) for dts, fmt in got}
        assert len(got) == len(others) * len(want)


@pytest.mark.parametrize("yaml_name", OPS)
def test_reg_info_from_yaml(yaml_name):
    pytest.importorskip("mindspore")
    from mindspore_bn_grad.ascend import ascend_reg_info
    info = ascend_reg_info("ascend910b", filename=yaml_name)
    info = json.loads(info) if isinstance(info, str) else info
    opdef = load_opdef(yaml_name)
    assert info["op_name"] == opdef.op_name
    assert [i["name"] for i in info["inputs"]] == opdef.input_names
    assert [o["name"] for o in info["outputs"]] == opdef.output_names
    assert [a["name"] for a in info["attr"]] == [a.kernel_attr for a in opdef.attrs]
    assert info["dtype_format"]


@pytest.mark.parametrize("yaml_name", OPS)
def test_ascend_kwargs(yaml_name, tmp_path, monkeypatch):
    pytest.importorskip("mindspore")
    from mindspore_bn_grad import ascend, target
    op_type = load_opdef(yaml_name).op_name
    monkeypatch.delenv("ASCEND_OPP_PATH", raising=False)
    monkeypatch.setenv("ASCEND_CUSTOM_OPP_PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match="build_ascend.sh"):
        ascend.custom_kwargs(yaml_name)
    cfg = tmp_path / "op_impl" / "ai_core" / "tbe" / "config" / "ascend910b"
    cfg.mkdir(parents=True)
    (cfg / "aic-ascend910b-ops-info.json").write_text(json.dumps({op_type: {}}))
    with target.target_soc("ascend910b"):
        kw = ascend.custom_kwargs(yaml_name)
    assert kw["func"] == op_type and kw["reg_info"]
