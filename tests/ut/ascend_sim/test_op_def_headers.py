"""The generated Ascend C op definitions (ascend_impl/op_host/*_def.gen.h),
compiled with g++ against a recording stand-in of CANN's op registry
(op_def_stub/) and run: what they declare is exactly the prototype (names,
order, optionality, attribute defaults), one AddConfig per Ascend SoC with
every accepted combination (per tensor: its dtype, and the call's format for
the activations or ND for the per-channel tensors), and the output dtypes
of `dtype_from`. No CANN needed."""
import hashlib
import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

import gen_ascend_op_def as gen
from mindspore_bn_grad import support_rules
from mindspore_bn_grad.spec import load_opdef

pytestmark = pytest.mark.ascend_sim

HERE = Path(__file__).resolve().parent
OP_HOST = HERE.parents[2] / "ascend_impl" / "op_host"
HEADERS = {"batch_norm_backward.yaml": ("batch_norm_backward_def.gen.h", "bnb_gen"),
           "batch_norm_reduce_backward.yaml": ("batch_norm_reduce_backward_def.gen.h", "bnb_gen_reduce"),
           "batch_norm_elemt_backward.yaml": ("batch_norm_elemt_backward_def.gen.h", "bnb_gen_elemt")}
# The stand-in's codes (op_def_stub/register/op_def_registry.h).
DTYPE = {"float32": 0, "float16": 1, "int32": 3, "int64": 9, "bfloat16": 27}
FORMAT = {"NCHW": 0, "NHWC": 1, "ND": 2, "NC": 3, "NCDHW": 30, "NDHWC": 31, "NCL": 47}
REQUIRED, OPTIONAL = 2, 1  # ops::Option as metadef numbers them


def _dump(yaml_name):
    header, ns = HEADERS[yaml_name]
    sources = [HERE / "op_def_dump.cpp", HERE / "op_def_stub" / "register" / "op_def_registry.h", OP_HOST / header,
               gen.COMMON_OUT]
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    exe = Path(tempfile.gettempdir()) / "bnb_op_def_dump" / f"{ns}.{digest}"
    if not exe.exists():
        exe.parent.mkdir(parents=True, exist_ok=True)
        tmp = exe.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", f"-I{HERE / 'op_def_stub'}", f"-I{OP_HOST}",
                        f'-DGEN_HEADER="{header}"', f"-DNS={ns}", str(HERE / "op_def_dump.cpp"), "-o", str(tmp)],
                       check=True, capture_output=True, text=True)
        os.replace(tmp, exe)
    return json.loads(subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout)


@pytest.fixture(scope="module", params=list(HEADERS))
def op(request):
    return load_opdef(request.param), _dump(request.param)


def test_signature_and_attributes(op):
    opdef, d = op
    assert d["op_type"] == opdef.op_name
    assert [(p["name"], p["param"]) for p in d["inputs"]] == \
        [(i.name, OPTIONAL if i.optional else REQUIRED) for i in opdef.inputs]
    assert [(p["name"], p["param"]) for p in d["outputs"]] == [(o.name, REQUIRED) for o in opdef.outputs]
    assert [a["name"] for a in d["attrs"]] == [a.kernel_attr for a in opdef.attrs]
    for got, a in zip(d["attrs"], opdef.attrs):
        kind, value = got["value"].split(":", 1)
        assert got["option"] == OPTIONAL
        if a.type == "bool":
            assert (kind, value) == ("bool", "true" if a.default else "false")
        elif a.type == "float":
            assert kind == "float" and float(value) == pytest.approx(a.default, rel=1e-6)
        elif a.type == "bool_tuple":  # output_mask travels as a list of ints
            assert (kind, value) == ("list_int", "".join(f"{int(b)}," for b in a.default))
        else:
            assert (kind, value) == ("str", a.default)


def test_one_config_per_soc_with_every_combination(op):
    opdef, d = op
    socs = support_rules.targets(device="Ascend")
    assert [c["soc"] for c in d["configs"]] == socs
    for cfg, soc in zip(d["configs"], socs):
        assert cfg["flags"] == 3  # dynamic compile / rank / shape
        names, cols = gen._columns(soc, opdef)
        params = {p["name"]: p for p in cfg["inputs"] + cfg["outputs"]}
        assert [p["name"] for p in cfg["inputs"]] == opdef.input_names
        assert [p["name"] for p in cfg["outputs"]] == opdef.output_names
        full = {a.name for a in opdef.inputs + opdef.outputs if a.shape == "full"}
        for k, name in enumerate(names):
            assert params[name]["dtypes"] == [DTYPE[dts[k]] for dts, _ in cols], (soc, name)
            assert params[name]["formats"] == [FORMAT[fmt if name in full else "ND"] for _, fmt in cols], (soc, name)


def test_output_dtypes_follow_dtype_from(op):
    opdef, d = op
    index = {n: k for k, n in enumerate(opdef.input_names)}
    optional = {i.name: i.optional for i in opdef.inputs}
    assert d["dtypes_all_given"] == [100 + index[o.dtype_from[0]] for o in opdef.outputs]
    assert d["dtypes_optional_absent"] == [100 + index[next(s for s in o.dtype_from if not optional[s])]
                                           for o in opdef.outputs]
