"""One prototype inherits another's entries (op_def `inherits`), instead of repeating them."""
import pytest

from mindspore_bn_grad import spec


def test_double_backward_inherits_the_inputs_and_attributes_it_differentiates():
    base, double = spec.load_opdef(spec.BACKWARD_YAML), spec.load_opdef(spec.DOUBLE_YAML)
    assert double.inputs[:len(base.inputs)] == base.inputs
    assert [a.name for a in double.inputs[len(base.inputs):]] == ["grad_grad_input", "grad_grad_weight",
                                                                 "grad_grad_bias"]
    assert double.attrs == base.attrs
    assert (double.min_rank, double.max_rank, double.data_formats, double.dtypes, double.kernel_errors) == \
        (base.min_rank, base.max_rank, base.data_formats, base.dtypes, base.kernel_errors)
    assert double.op_name == "BatchNormDoubleBackward" and double.support is None  # its own, not inherited
    (_, raw), = spec.load_yaml(spec.DOUBLE_YAML).items()
    written = [i["name"] for i in raw["inputs"]]
    assert "grad_out" not in written and "attrs" not in raw, "the YAML repeats what it inherits"


FAKE = {
    "base.yaml": {"base": {"op_name": "Base", "ranks": {"min": 2, "max": 8}, "support": "base's",
                           "inputs": [{"name": "x"}, {"name": "w"}], "attrs": [{"name": "eps"}]}},
    "middle.yaml": {"middle": {"op_name": "Middle", "ranks": {"min": 1, "max": 4},
                               "inherits": {"from": "base.yaml", "take": ["inputs", "attrs", "ranks"]},
                               "inputs": [{"name": "dy"}]}},
    "top.yaml": {"top": {"op_name": "Top", "inherits": {"from": "middle.yaml", "take": ["inputs", "ranks"]},
                         "inputs": [{"name": "ddy"}]}},
    "clash.yaml": {"clash": {"inherits": {"from": "base.yaml", "take": ["inputs"]}, "inputs": [{"name": "w"}]}},
    "loop_a.yaml": {"a": {"inherits": {"from": "loop_b.yaml", "take": ["inputs"]}}},
    "loop_b.yaml": {"b": {"inherits": {"from": "loop_a.yaml", "take": ["inputs"]}}},
    "missing.yaml": {"m": {"inherits": {"from": "base.yaml", "take": ["outputs"]}}},
}


def _resolve(monkeypatch, name):
    monkeypatch.setattr(spec, "load_yaml", lambda f: FAKE[f])
    (_, raw), = FAKE[name].items()
    return spec._inherited(raw, name)  # pylint: disable=protected-access


def test_lists_are_the_base_entries_then_the_own_ones_along_a_chain(monkeypatch):
    top = _resolve(monkeypatch, "top.yaml")
    assert [i["name"] for i in top["inputs"]] == ["x", "w", "dy", "ddy"]
    assert top["ranks"] == {"min": 1, "max": 4}  # middle's own value won over base's
    assert "attrs" not in top and "support" not in top and "inherits" not in top  # only what is taken
    assert top["op_name"] == "Top"


@pytest.mark.parametrize("name, message", [
    ("clash.yaml", "clash.yaml: inputs repeats a name of base.yaml's"),
    ("loop_a.yaml", "inherits from loop_a.yaml, which inherits from it"),
    ("missing.yaml", "missing.yaml: inherits 'outputs' from base.yaml, which has none"),
])
def test_bad_inheritance_is_a_clear_error(monkeypatch, name, message):
    with pytest.raises(ValueError, match=message):
        _resolve(monkeypatch, name)
