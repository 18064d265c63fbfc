"""Per-SoC dtype and format rules (issue 3) against an independent encoding of spec section 3.

* Every SoC x grad_out dtype x per-channel dtypes (each absent or any float)
  x format goes through the infer functions (what MindSpore calls at graph
  build time) and is compared with tests/ut/_soc_oracle.py.
* A representative subset goes through MindSpore in PYNATIVE and GRAPH mode:
  accepted cases are checked against the float64 reference, rejected ones
  must raise the right exception naming the SoC (GRAPH: at compile).
"""
import itertools
import re

import numpy as np
import pytest

import _soc_oracle as oracle
from _harness import NAMES, check, make_arrays, ms_tensor

from mindspore_bn_grad import infer, support_rules, target, get_target_soc, set_target_soc
from mindspore_bn_grad.checks import normalize_attrs

MSG = re.compile(r"^BatchNormBackward: (?P<arg>[\w ]+?) expected .+, got (?P<got>.+) on (?P<soc>\w+)$")


@pytest.fixture(autouse=True)
def _clean_target(monkeypatch):
    monkeypatch.delenv("MS_BN_GRAD_SOC", raising=False)
    set_target_soc(None)
    yield
    set_target_soc(None)


def _assert_rejection(exc, soc, blamed, given=None):
    m = MSG.match(str(exc))
    assert m, str(exc)
    assert m["soc"] == soc, str(exc)
    arg = m["arg"].replace(" format", "")
    assert arg in blamed, (str(exc), blamed)
    if given is not None:
        assert given in m["got"], (str(exc), given)


# --------------------------------------------------------------------------- pure enumeration

PARAM_CHOICES = (None,) + oracle.FLOATS


def _dtype_cases():
    """grad_out (float or not) x each per-channel tensor absent or any float; input like grad_out."""
    for g in oracle.FLOATS + oracle.NON_FLOATS:
        for params in itertools.product(PARAM_CHOICES, repeat=len(oracle.PARAMS)):
            yield {"grad_out": g, "input": g, **dict(zip(oracle.PARAMS, params))}
    # input differing from grad_out; non-float per-channel tensors
    for g, x in itertools.product(oracle.FLOATS, oracle.FLOATS + oracle.NON_FLOATS):
        yield {"grad_out": g, "input": x, **{p: g for p in oracle.PARAMS}}
    for g, p, d in itertools.product(oracle.FLOATS, oracle.PARAMS, oracle.NON_FLOATS):
        yield {"grad_out": g, "input": g, **{q: (d if q == p else g) for q in oracle.PARAMS}}


@pytest.mark.parametrize("soc", oracle.SOCS)
def test_every_dtype_combination_matches_spec(soc):
    set_target_soc(soc)
    attrs = normalize_attrs()
    n_accepted = n_rejected = 0
    for case in _dtype_cases():
        want = oracle.verdict(soc, case)
        if want is None:
            got = infer.infer_dtypes(dict(case), attrs)
            outs = oracle.output_dtypes(case)
            assert got == [outs[o] for o in oracle.OUTPUTS], (soc, case, got)
            n_accepted += 1
            continue
        exc_type, blamed = want
        with pytest.raises(Exception) as info:
            infer.infer_dtypes(dict(case), attrs)
        assert info.type is exc_type, (soc, case, info.value)
        _assert_rejection(info.value, soc, blamed)
        m = MSG.match(str(info.value))
        every = {**case, **oracle.output_dtypes(case)}
        assert m["got"] == every[m["arg"]], (str(info.value), case)
        n_rejected += 1
    assert n_accepted and n_rejected


FORMAT_CASES = [(f, r) for f in ("NCHW", "NHWC") for r in range(2, 9)] + [("NCDHW", 5), ("NDHWC", 5)]


@pytest.mark.parametrize("soc", oracle.SOCS)
@pytest.mark.parametrize("data_format,rank", FORMAT_CASES)
def test_every_format_matches_spec(soc, data_format, rank):
    set_target_soc(soc)
    attrs = normalize_attrs(data_format=data_format)
    shape = [2, 3] + [2] * (rank - 2)
    shapes = {"grad_out": shape, "input": shape, "weight": None, "running_mean": None,
              "running_var": None, "save_mean": [-1], "save_invstd": [-1]}
    want = oracle.verdict(soc, {"grad_out": "float32", "input": "float32"}, data_format, rank)
    if want is None:
        infer.infer_shapes(shapes, attrs)
        return
    with pytest.raises(ValueError) as info:
        infer.infer_shapes(shapes, attrs)
    _assert_rejection(info.value, soc, want[1], given=oracle.format_name(data_format, rank))


@pytest.mark.parametrize("soc", oracle.SOCS)
def test_enumerated_combinations_are_the_specs(soc):
    """accepted_combinations() (source of the CustomRegOp / AddConfig rows) == the oracle's set."""
    names = oracle.INPUTS + oracle.OUTPUTS
    got = {tuple(c[n] for n in names) for c in support_rules.dtype_combinations(soc)}
    want = set()
    for dts in itertools.product(oracle.FLOATS, repeat=len(oracle.INPUTS)):
        case = dict(zip(oracle.INPUTS, dts))
        if not oracle.dtype_offenders(soc, case):
            want.add(dts + tuple(oracle.output_dtypes(case)[o] for o in oracle.OUTPUTS))
    assert got == want
    formats = {oracle.format_name(f, r) for f, r in FORMAT_CASES}
    assert set(support_rules.accepted_formats(soc)) == {f for f in formats if oracle.format_ok(soc, f)}
    combos = list(support_rules.accepted_combinations(soc))
    assert len(combos) == len(got) * len(support_rules.accepted_formats(soc))
    assert all(set(c) == set(names) | {"format"} for c in combos)


def test_combinations_with_absent_inputs():
    """Absent optional inputs: None in their slot, and outputs follow grad_out when weight is absent."""
    combos = support_rules.dtype_combinations("ascend950", absent=("weight", "running_mean", "running_var"))
    assert combos and all(c["weight"] is None and c["running_var"] is None for c in combos)
    assert all(c["grad_weight"] == c["grad_out"] for c in combos)
    # save_mean f16/f32 x save_invstd like it, for grad_out f16 and bf16; f32 only for f32
    assert len(combos) == 2 + 2 + 1
    full = support_rules.dtype_combinations("ascend950", derived_outputs=False)
    assert any(c["weight"] == "float16" and c["grad_weight"] == "float32" for c in full)
    with pytest.raises(ValueError):
        support_rules.dtype_combinations("ascend950", absent=("grad_out",))


# --------------------------------------------------------------------------- through MindSpore

def _case(soc, g, params=None, data_format="NCHW", shape=(2, 3, 4, 4), value=False):
    dt = {"grad_out": g, "input": g, **{p: g for p in oracle.PARAMS}, **(params or {})}
    return pytest.param(soc, dt, data_format, shape, value,
                        id=f"{soc}-{g}-{data_format}-{len(shape)}d-" + "-".join(
                            f"{k}={v}" for k, v in (params or {}).items()))


def _ms_cases():
    cases = []
    for soc in oracle.SOCS:
        for i, g in enumerate(oracle.FLOATS):
            cases.append(_case(soc, g, value=(i == 2)))          # uniform: ok iff g allowed
        cases.append(_case(soc, "float32", {"weight": "float16"}))
        cases.append(_case(soc, "float16", {"save_invstd": "float32"}))
        cases.append(_case(soc, "float32", data_format="NHWC", value=soc in ("ascend950", "cpu")))
        cases.append(_case(soc, "float32", data_format="NHWC", shape=(2, 5, 3)))   # NLC
        cases.append(_case(soc, "float16", data_format="NDHWC", shape=(2, 2, 3, 2, 3)))
    mixed = [
        {"weight": "float32", "running_mean": "float32", "running_var": "float32"},
        {"weight": "float32", "save_mean": "float32", "save_invstd": "float32"},
        {"running_mean": "float32", "running_var": "bfloat16"},
        {"save_mean": "bfloat16", "save_invstd": "float32"},
        {"weight": "float16"},
    ]
    for params in mixed:
        cases.append(_case("ascend950", "bfloat16", params, value=True))
    cases.append(_case("ascend950", "float32", {"weight": "bfloat16"}))
    cases.append(_case("ascend950", "float16", {"running_mean": "float32", "running_var": "float16"}))
    cases.append(_case("cpu", "float64", {"weight": "float16", "save_mean": "bfloat16"}, value=True))
    return cases


def _graph_net(op):
    import mindspore as ms

    class Net(ms.nn.Cell):
        def __init__(self):
            super().__init__()
            self.op = op

        def construct(self, dy, x, w, rm, rv, sm, si):
            return self.op(dy, x, w, rm, rv, sm, si)

    return Net()


def _build(mode, tensors, attrs):
    """PYNATIVE: one call. GRAPH: compile a Cell (no kernel runs)."""
    import mindspore as ms
    import mindspore_bn_grad as mbg
    if mode == "pynative":
        ms.set_context(mode=ms.PYNATIVE_MODE)
        mbg.batch_norm_backward(*tensors, **attrs)
        return
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        # compile() builds the graph only; no kernel runs.
        _graph_net(mbg.BatchNormBackward(**attrs)).compile(*tensors)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


@pytest.mark.parametrize("soc,dtypes,data_format,shape,value", _ms_cases())
def test_through_mindspore(mode, soc, dtypes, data_format, shape, value):
    set_target_soc(soc)
    arrays = make_arrays(shape, data_format, seed=len(shape))
    attrs = {"data_format": data_format, "training": True}
    want = oracle.verdict(soc, dtypes, data_format, len(shape))
    if want is None:
        if value:
            check(mode, arrays, dtypes, **attrs)
        else:
            _build(mode, [ms_tensor(arrays.get(n), dtypes[n]) for n in NAMES], attrs)
        return
    tensors = [ms_tensor(arrays.get(n), dtypes[n]) for n in NAMES]
    with pytest.raises(want[0]) as info:
        _build(mode, tensors, attrs)
    _assert_rejection(info.value, soc, want[1])


@pytest.mark.parametrize("soc", oracle.SOCS)
@pytest.mark.parametrize("dtype", oracle.NON_FLOATS)
def test_integer_and_bool_rejected(mode, soc, dtype):
    import mindspore as ms
    set_target_soc(soc)
    x = ms.Tensor(np.ones((2, 3, 2, 2)), getattr(ms, "bool_" if dtype == "bool" else dtype))
    c = ms.Tensor(np.ones(3, np.float32))
    with pytest.raises(TypeError) as info:
        _build(mode, [x, x, None, None, None, c, c], {})
    _assert_rejection(info.value, soc, {"grad_out"}, given=dtype)


def test_graph_rejection_happens_before_the_kernel(monkeypatch):
    """GRAPH mode: a Cell that the target rejects fails in compile(); the kernel entry is never reached."""
    import mindspore as ms
    import mindspore_bn_grad as mbg
    set_target_soc("ascend910b")
    arrays = make_arrays((2, 3, 4, 4))
    tensors = [ms_tensor(arrays[n], "float32") for n in NAMES]
    tensors[2] = ms_tensor(arrays["weight"], "float16")
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        net = _graph_net(mbg.BatchNormBackward())
        with pytest.raises(TypeError, match=r"weight expected float32 \(the dtype of grad_out\), "
                                            r"got float16 on ascend910b"):
            net(*tensors)
        assert not getattr(net, "compile_cache", set()), "no graph may have been compiled"
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


def test_same_graph_accepted_on_cpu(mode):
    """The target is a dry run: with no SoC set, the CPU rules accept what ascend910b rejects."""
    arrays = make_arrays((2, 3, 4, 4), "NHWC")
    dtypes = {n: "float32" for n in arrays}
    dtypes["weight"] = "float16"
    check(mode, arrays, dtypes, data_format="NHWC")
    set_target_soc("ascend910b")
    with pytest.raises(ValueError, match="got NHWC on ascend910b"):
        check(mode, arrays, dtypes, data_format="NHWC")
    with pytest.raises(TypeError, match="got float16 on ascend910b"):
        check(mode, make_arrays((2, 3, 4, 4)), dtypes)


# --------------------------------------------------------------------------- target resolution

def test_known_targets():
    assert support_rules.targets() == list(oracle.SOCS)
    assert support_rules.targets(device="Ascend") == [s for s in oracle.SOCS if s != "cpu"]


def test_set_get_round_trip():
    assert get_target_soc() is None
    assert target.active_target() == "cpu"
    for soc in oracle.SOCS:
        set_target_soc(soc)
        assert get_target_soc() == soc == target.active_target()
    set_target_soc("  Ascend910B3 ")
    assert get_target_soc() == "ascend910b"
    set_target_soc("ASCEND910_9391")
    assert get_target_soc() == "ascend910_93"
    set_target_soc(None)
    assert get_target_soc() is None


def test_context_manager_restores():
    set_target_soc("ascend910")
    with target.target_soc("ascend950") as name:
        assert name == "ascend950" == get_target_soc()
    assert get_target_soc() == "ascend910"


@pytest.mark.parametrize("name", ["ascend310b", "ascend", "gpu", "", "ascend910c"])
def test_unknown_name_lists_known_ones(name):
    with pytest.raises(ValueError) as info:
        set_target_soc(name)
    for soc in oracle.SOCS:
        assert soc in str(info.value)
    assert get_target_soc() is None


def test_environment_variable(monkeypatch):
    monkeypatch.setenv("MS_BN_GRAD_SOC", "Ascend910B")
    assert get_target_soc() == "ascend910b" == target.active_target()
    set_target_soc("ascend950")                       # the override wins
    assert get_target_soc() == "ascend950"
    set_target_soc(None)
    monkeypatch.setenv("MS_BN_GRAD_SOC", "ascend42")
    with pytest.raises(ValueError, match="MS_BN_GRAD_SOC.*ascend910_93"):
        get_target_soc()


def test_environment_variable_drives_the_checks(monkeypatch, mode):
    monkeypatch.setenv("MS_BN_GRAD_SOC", "ascend910")
    arrays = make_arrays((2, 3, 4, 4))
    with pytest.raises(TypeError, match="got bfloat16 on ascend910$"):
        check(mode, arrays, {n: "bfloat16" for n in arrays})


class _FakeMSContext:
    reported = ""

    @classmethod
    def get_instance(cls):
        return cls

    @classmethod
    def get_ascend_soc_version(cls):
        return cls.reported


@pytest.mark.parametrize("reported,want", [("ascend910", "ascend910"), ("ascend910b", "ascend910b"),
                                           ("ascend910_93", "ascend910_93"), ("ascend310p", "ascend310p"),
                                           ("Ascend950PR", "ascend950"), ("ascend310b", None)])
def test_detection_on_an_ascend_device(monkeypatch, reported, want):
    import mindspore as ms
    import mindspore._c_expression as ce
    real = ms.get_context
    monkeypatch.setattr(ms, "get_context", lambda k: "Ascend" if k == "device_target" else real(k))
    monkeypatch.setattr(ce, "MSContext", type("C", (_FakeMSContext,), {"reported": reported}))
    assert get_target_soc() is None
    if want is None:
        with pytest.raises(ValueError, match="ascend910b.*got 'ascend310b'"):
            target.active_target()
    else:
        assert target.active_target() == want
    set_target_soc("cpu")
    assert target.active_target() == "cpu"


def test_cpu_detected_on_cpu():
    assert target.detected_target() == "cpu"


# --------------------------------------------------------------------------- CustomRegOp rows

@pytest.mark.parametrize("soc", [s for s in oracle.SOCS if s != "cpu"])
def test_ascend_reg_info(soc):
    from mindspore_bn_grad.ascend import ascend_reg_info
    info = ascend_reg_info(soc)
    assert info["op_name"] == "BatchNormBackward" and info["target"] == "Ascend"
    assert [i["name"] for i in info["inputs"]] == list(oracle.INPUTS)
    assert [o["name"] for o in info["outputs"]] == list(oracle.OUTPUTS)
    assert [i["paramType"] for i in info["inputs"]][:2] == ["required", "required"]
    rows = info["dtype_format"]
    assert len(rows) == len(set(map(str, rows)))
    combos = {tuple(c.values()) for c in support_rules.dtype_combinations(soc)}
    assert {tuple(d for d, _ in row) for row in rows} == combos
    channel_last = any(fmt in ("NHWC", "NDHWC") for row in rows for _, fmt in row)
    assert channel_last == (soc == "ascend950")
    assert all(fmt == "DefaultFormat" for row in rows for _, fmt in row[2:7])


def test_ascend_reg_info_absent_inputs_and_cpu():
    from mindspore_bn_grad.ascend import ascend_reg_info
    rows = ascend_reg_info("ascend910b", absent=("weight",))["dtype_format"]
    assert all(row[2] == ("", "") for row in rows)
    with pytest.raises(ValueError, match="Ascend SoC"):
        ascend_reg_info("cpu")
