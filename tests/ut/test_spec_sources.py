"""op_def/ is the single source of truth: every YAML key is read by something,
and the facts it states are not written again by hand in the C++ / Ascend C /
Python sources (they come from the generated headers or from spec.py)."""
import re
from pathlib import Path

import pytest

from mindspore_bn_grad.spec import load_opdef, load_yaml

ROOT = Path(__file__).resolve().parents[2]
OPS = ("batch_norm_backward.yaml", "batch_norm_reduce_backward.yaml", "batch_norm_elemt_backward.yaml",
       "batch_norm_double_backward.yaml", "batch_norm_forward.yaml")

# Every key of the three prototypes -> (file, pattern) where it is used beyond loading.
CONSUMERS = {
    "op_name": ("scripts/gen_ascend_op_def.py", r"opdef\.op_name"),
    "aclnn": ("mindspore_bn_grad/cli/support.py", r"o\.aclnn|i\.aclnn|x\.aclnn"),
    "support": ("mindspore_bn_grad/support_rules.py", r"load_opdef\(\)\.support"),
    "description": ("mindspore_bn_grad/cli/support.py", r"o\.description"),
    "layouts_from": ("mindspore_bn_grad/spec.py", r'raw\["layouts_from"\]'),
    "inherits": ("mindspore_bn_grad/spec.py", r'raw\.get\("inherits"\)'),
    "mindspore_primitive": ("scripts/gen_ascend_op_def.py", r"opdef\.mindspore_primitive"),
    "mindspore_legacy_primitive": ("scripts/gen_ascend_op_def.py", r"opdef\.mindspore_legacy_primitive"),
    "inputs": ("mindspore_bn_grad/infer.py", r"opdef\.inputs"),
    "inputs.name": ("mindspore_bn_grad/infer.py", r"arg\.name"),
    "inputs.aclnn": ("mindspore_bn_grad/cli/support.py", r"i\.aclnn"),
    "inputs.optional": ("mindspore_bn_grad/infer.py", r"arg\.optional"),
    "inputs.shape": ("mindspore_bn_grad/infer.py", r'arg\.shape == "full"'),
    "inputs.like": ("mindspore_bn_grad/infer.py", r"arg\.like"),
    "inputs.default_value": ("scripts/gen_ascend_op_def.py", r"i\.default_value"),
    "inputs.used_when": ("mindspore_bn_grad/cli/support.py", r"i\.used_when"),
    "inputs.required_when": ("mindspore_bn_grad/infer.py", r"arg\.required\(attrs\)"),
    "inputs.empty_allowed_when": ("mindspore_bn_grad/infer.py", r"arg\.empty_allowed\(attrs\)"),
    "inputs.dtypes": ("mindspore_bn_grad/infer.py", r"arg\.allowed_dtypes\("),
    "attrs": ("mindspore_bn_grad/checks.py", r"opdef\.attrs"),
    "attrs.name": ("mindspore_bn_grad/checks.py", r"a\.name"),
    "attrs.type": ("mindspore_bn_grad/checks.py", r"a\.type =="),
    "attrs.default": ("mindspore_bn_grad/checks.py", r"a\.default"),
    "attrs.min": ("mindspore_bn_grad/checks.py", r"a\.min"),
    "attrs.length": ("mindspore_bn_grad/checks.py", r"a\.length"),
    "attrs.values": ("mindspore_bn_grad/checks.py", r"a\.values"),
    "attrs.kernel_name": ("scripts/gen_ascend_op_def.py", r"a\.kernel_attr"),
    "attrs.kernel_bits_name": ("scripts/gen_ascend_op_def.py", r"a\.kernel_bits_name"),
    "outputs": ("mindspore_bn_grad/infer.py", r"opdef\.outputs"),
    "outputs.name": ("scripts/gen_ascend_op_def.py", r"o\.name"),
    "outputs.aclnn": ("mindspore_bn_grad/cli/support.py", r"x\.aclnn"),
    "outputs.shape": ("mindspore_bn_grad/infer.py", r'o\.shape == "full"'),
    "outputs.like": ("mindspore_bn_grad/cli/support.py", r"x\.like"),
    "outputs.dtype_from": ("mindspore_bn_grad/infer.py", r"o\.dtype_from"),
    "outputs.mask_bit": ("scripts/gen_ascend_op_def.py", r"o\.mask_bit"),
    "mask_attrs": ("scripts/gen_ascend_op_def.py", r"opdef\.mask_attrs"),
    "ranks": ("mindspore_bn_grad/checks.py", r"opdef\.min_rank <= rank <= opdef\.max_rank"),
    "data_formats": ("mindspore_bn_grad/infer.py", r"opdef\.data_formats"),
    "data_formats.channel_axis": ("scripts/gen_ascend_op_def.py", r"f\.channel_last"),
    "data_formats.ranks": ("mindspore_bn_grad/checks.py", r"fmt\.ranks"),
    "data_formats.names": ("mindspore_bn_grad/infer.py", r"fmt\.names"),
    "dtypes": ("scripts/gen_ascend_op_def.py", r"opdef\.dtypes"),
    "kernel_errors": ("scripts/gen_ascend_op_def.py", r"opdef\.kernel_errors"),
    "kernel_errors.name": ("scripts/gen_ascend_op_def.py", r"e\.name"),
    "kernel_errors.code": ("mindspore_bn_grad/spec.py", r"e\.code"),
    "kernel_errors.message": ("mindspore_bn_grad/spec.py", r"e\.message"),
}


def _keys():
    keys = set()
    for name in OPS:
        (_, raw), = load_yaml(name).items()
        for k, v in raw.items():
            keys.add(k)
            if k in ("inputs", "attrs", "outputs", "kernel_errors"):
                keys |= {f"{k}.{kk}" for entry in v for kk in entry}
            if k == "data_formats":
                keys |= {f"{k}.{kk}" for f in v.values() for kk in f}
    return keys


def test_every_yaml_key_is_consumed():
    keys = _keys()
    assert keys - set(CONSUMERS) == set(), "a YAML key nothing reads: use it, or remove it from op_def/"
    for key, (path, pattern) in CONSUMERS.items():
        assert re.search(pattern, (ROOT / path).read_text()), f"{key}: {path} no longer uses it ({pattern})"
    assert set(CONSUMERS) - keys == set(), "stale entries in CONSUMERS"


def _sources(patterns):
    """Every file the patterns name; a pattern that names none fails (a renamed folder must not turn
    the guard off)."""
    files = []
    for pat in patterns:
        found = [p for p in sorted(ROOT.glob(pat)) if not p.name.endswith(".gen.h")]
        assert found, f"{pat} matches no source file: follow the rename in CPP / PY"
        files += found
    return {p: p.read_text() for p in files}


CPP = ("mindspore_bn_grad/csrc/*.h", "mindspore_bn_grad/csrc/*.cpp", "ascend_impl/op_host/*.h",
       "ascend_impl/op_host/*.cpp", "ascend_impl/op_kernel/*.h", "ascend_impl/op_kernel/*.cpp")
# Every Python module that ships (the package, its sub-packages, the benchmarks) and the generators.
PY = ("mindspore_bn_grad/*.py", "mindspore_bn_grad/cli/*.py", "mindspore_bn_grad/cpu_kernel/*.py",
      "mindspore_bn_grad/nn/*.py", "bench/*.py", "scripts/*.py")


def _cpp_facts():
    o = load_opdef()
    names = {n for f in OPS for n in load_opdef(f).input_names + load_opdef(f).output_names}
    attrs = {a.kernel_attr for f in OPS for a in load_opdef(f).attrs} | {"eps_bits"}
    dtypes = set(o.dtypes) | set(load_opdef(OPS[2]).input("counter").allowed_dtypes("CPU"))
    return [
        ("a channel-last layout name", r'"(%s)"' % "|".join(n for n, f in o.data_formats.items() if f.channel_last)),
        ("a dtype name", r'"(%s)"' % "|".join(sorted(dtypes))),
        ("an attribute name", r'"(%s)"' % "|".join(sorted(attrs))),
        ("a rank bound", r"(rank|size\(\))\s*[<>]=?\s*\d"),
        ("a slot enum", r"enum\s+\w*\s*(:\s*\w+\s*)?\{[^}]*\b(%s)\b" % "|".join(sorted(n.upper() for n in names))),
        ("an error code", r"\bk(BadParamCount|BadDtype|BadRank|BadShape|MissingTensor|Overflow|KernelFailed)\s*="),
        ("an absent-input default", r"LoadParam\((\w+,\s*)?(WEIGHT|RUNNING_MEAN|RUNNING_VAR)\s*,[^;]*\d\.\d*f\)"),
        ("an empty-allowed rule", r"\btraining\b[^;{]*\b(SAVE_MEAN|SAVE_INVSTD)\b|\b(SAVE_MEAN|SAVE_INVSTD)\b[^;{]*\btraining\b"),
        ("a slot-to-argument pairing", r"\bTake\(\s*\w+::[A-Z_]+\s*,\s*\w+\s*,\s*[A-Z_]+\s*\)"),
    ]


@pytest.mark.parametrize("what,pattern", _cpp_facts())
def test_cpp_sources_do_not_restate_the_spec(what, pattern):
    for path, text in _sources(CPP).items():
        m = re.search(pattern, text)
        assert m is None, f"{path.relative_to(ROOT)} restates {what} by hand ({m.group(0)!r}): use the generated header"


def _py_facts():
    o = load_opdef()
    q = r"""["']"""
    slot_run = r",\s*".join(q + n + q for n in o.input_names[:3])
    return [
        ("a slot list", slot_run),
        ("a dtype-name table", r"(np|ms)\.(float16|float32|float64|bfloat16|int32|int64)\)?\s*:\s*" + q),
        ("an error message table", r"\d\s*:\s*" + q + re.escape(o.kernel_errors[0].message)),
        ("a counter dtype list", r"COUNTER_DTYPES\s*="),
    ]


@pytest.mark.parametrize("what,pattern", _py_facts())
def test_python_sources_do_not_restate_the_spec(what, pattern):
    for path, text in _sources(PY).items():
        m = re.search(pattern, text)
        assert m is None, f"{path.relative_to(ROOT)} restates {what} by hand ({m.group(0)!r}): read it from spec.py"


def test_the_checks_fail_on_a_restated_fact():
    """The patterns above do find the restatements they were written against."""
    samples = {"a channel-last layout name": 'return l == "NHWC" || l == "NDHWC";',
               "a dtype name": 'if (std::strcmp(s, "bfloat16") == 0)',
               "an attribute name": 'extra->HasAttr("output_mask")',
               "a rank bound": "if (rank < 2 || rank > 8) return kBadRank;",
               "a slot enum": "enum Slot { GRAD_OUT, INPUT, WEIGHT };",
               "an error code": "enum Error { kOk = 0, kBadParamCount = 1 };",
               "an absent-input default": "LoadParam(k, WEIGHT, c0, n, v.weight, 1.0f);",
               "an empty-allowed rule": "const bool empty_ok = !training && (slot == SAVE_MEAN || slot == SAVE_INVSTD);",
               "a slot-to-argument pairing": "slots.Take(bnb::GRAD_OUT, call, DOUT);"}
    for what, pattern in _cpp_facts():
        assert re.search(pattern, samples[what]), what
    py = {"a slot list": 'names = ["grad_out", "input", "weight", "running_mean"]',
          "a dtype-name table": '{np.dtype(np.float16): "float16"}',
          "an error message table": 'ERRORS = {1: "wrong parameter count"}',
          "a counter dtype list": 'COUNTER_DTYPES = ("float32",)'}
    for what, pattern in _py_facts():
        assert re.search(pattern, py[what]), what


def test_a_pattern_that_names_no_file_fails():
    with pytest.raises(AssertionError, match="matches no source file"):
        _sources(("mindspore_bn_grad/_op*.py",))  # a module name from before the renames


def test_kernel_error_messages_come_from_the_yaml():
    from mindspore_bn_grad.cpu_kernel import native
    assert native.ERRORS == {e.code: e.message for e in load_opdef().kernel_errors}
    with pytest.raises(RuntimeError, match=re.escape(load_opdef().kernel_errors[2].message)):
        native.check_rc(load_opdef().kernel_errors[2].code)
