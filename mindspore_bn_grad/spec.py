"""The operator prototype, read from op_def/batch_norm_backward.yaml.

Loaded once, on first use. Everything the package knows about the
signature (names, order, optional inputs, defaults, outputs, layouts) comes
from here; nothing below restates it.
"""
import functools
from dataclasses import dataclass
from importlib import resources
from typing import Dict, List, Optional, Tuple

import yaml

# The prototypes under op_def/ (shipped as mindspore_bn_grad.op_def).
BACKWARD_YAML = "batch_norm_backward.yaml"
DOUBLE_YAML = "batch_norm_double_backward.yaml"
REDUCE_YAML = "batch_norm_reduce_backward.yaml"
ELEMT_YAML = "batch_norm_elemt_backward.yaml"
FORWARD_YAML = "batch_norm_forward.yaml"

@dataclass(frozen=True)
class TensorArg:
    name: str
    aclnn: str
    optional: bool
    shape: str                      # "full" | "channel"
    like: Optional[str] = None
    default_value: Optional[float] = None
    used_when: Optional[dict] = None
    required_when: Optional[dict] = None
    empty_allowed_when: Optional[dict] = None
    dtypes: Optional[Dict[str, Tuple[str, ...]]] = None  # device -> the only dtypes allowed

    def allowed_dtypes(self, device: str) -> Optional[Tuple[str, ...]]:
        """The input's own dtype list on a device ("CPU" / "Ascend"), None when it has none."""
        return None if self.dtypes is None else self.dtypes[device]

    def used(self, attrs) -> bool:
        return _matches(self.used_when, attrs)

    def required(self, attrs) -> bool:
        return (not self.optional) or (self.required_when is not None and _matches(self.required_when, attrs))

    def empty_allowed(self, attrs) -> bool:
        return self.empty_allowed_when is not None and _matches(self.empty_allowed_when, attrs)


@dataclass(frozen=True)
class Attr:
    name: str
    type: str
    default: object
    length: Optional[int] = None
    values: Optional[Tuple[str, ...]] = None
    min: Optional[float] = None
    kernel_name: Optional[str] = None   # attribute name the kernels read, when not `name`
    kernel_bits_name: Optional[str] = None  # float: also passed exactly, as int64 bits

    @property
    def kernel_attr(self) -> str:
        return self.kernel_name or self.name


@dataclass(frozen=True)
class Output:
    name: str
    aclnn: str
    shape: str
    dtype_from: Tuple[str, ...]
    mask_bit: int
    like: Optional[str] = None


@dataclass(frozen=True)
class DataFormat:
    name: str
    channel_axis: int
    ranks: Tuple[int, ...]
    names: Dict[int, str]

    @property
    def channel_last(self) -> bool:
        return self.channel_axis == -1


@dataclass(frozen=True)
class KernelError:
    name: str
    code: int
    message: str


@dataclass(frozen=True)
class MindSporePrimitive:
    """MindSpore's own primitive with an operator's semantics, as its CPU op plugin hands it over."""
    name: str
    arguments: Tuple[Tuple[Optional[str], str], ...]  # (our entry or None, MindSpore's name), in its order
    outputs_from: int                        # arguments before this index are inputs
    carries_variance: Tuple[str, ...] = ()   # MindSpore's names of arguments that hold a variance where
                                             # ours holds save_invstd (`as: variance`)
    in_inference: Tuple[Tuple[str, str], ...] = ()  # (MindSpore's name, our entry it holds in inference)

    @property
    def ours(self) -> List[Optional[str]]:
        return [o for o, _ in self.arguments]

    @property
    def theirs(self) -> List[str]:
        return [t for _, t in self.arguments]


@dataclass(frozen=True)
class OpDef:
    key: str
    op_name: str
    aclnn: str
    inputs: Tuple[TensorArg, ...]
    attrs: Tuple[Attr, ...]
    outputs: Tuple[Output, ...]
    min_rank: int
    max_rank: int
    data_formats: Dict[str, DataFormat]
    dtypes: Tuple[str, ...]
    description: str = ""
    support: Optional[str] = None            # per-target rules file, when the op has one
    mask_attrs: Tuple[str, ...] = ()         # bool attributes behind the mask bits
    kernel_errors: Tuple[KernelError, ...] = ()
    single_output: bool = False
    mindspore_primitive: Optional[MindSporePrimitive] = None
    mindspore_legacy_primitive: Optional[MindSporePrimitive] = None

    def input(self, name) -> TensorArg:
        return next(a for a in self.inputs if a.name == name)

    def attr(self, name) -> Attr:
        return next(a for a in self.attrs if a.name == name)

    @property
    def input_names(self) -> List[str]:
        return [a.name for a in self.inputs]

    @property
    def output_names(self) -> List[str]:
        return [o.name for o in self.outputs]

    @property
    def attr_defaults(self) -> dict:
        return {a.name: a.default for a in self.attrs}


def _matches(cond, attrs) -> bool:
    if cond is None:
        return True
    return all(attrs.get(k) == v for k, v in cond.items())


def yaml_text(filename: str) -> str:
    """Text of a file of op_def/ (shipped inside the package as mindspore_bn_grad.op_def)."""
    return resources.files("mindspore_bn_grad.op_def").joinpath(filename).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=None)
def load_yaml(filename: str) -> dict:
    # the C loader where PyYAML has one: the same result, several times faster (first use)
    return yaml.load(yaml_text(filename), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _inherited(raw: dict, filename: str, seen=()) -> dict:
    """The prototype `raw` with what it inherits filled in.

    ``inherits: {from: <file of op_def/>, take: [keys]}`` takes each listed key of that prototype
    (itself resolved first, so inheritance chains): a list (inputs, attrs, outputs, kernel_errors)
    becomes the base's entries followed by the prototype's own under the same key (names must not
    repeat); any other value is the base's unless the prototype gives its own. Nothing else is
    inherited (op_name, aclnn, description, support are the prototype's own)."""
    spec = raw.get("inherits")
    if spec is None:
        return raw
    base_file = spec["from"]
    if base_file in seen or base_file == filename:
        raise ValueError(f"{filename}: inherits from {base_file}, which inherits from it")
    (_, base), = load_yaml(base_file).items()
    base = _inherited(base, base_file, seen + (filename,))
    out = {k: v for k, v in raw.items() if k != "inherits"}
    for key in spec["take"]:
        if key not in base:
            raise ValueError(f"{filename}: inherits {key!r} from {base_file}, which has none")
        if isinstance(base[key], list):
            merged = list(base[key]) + list(raw.get(key, ()))
            names = [e["name"] for e in merged if isinstance(e, dict) and "name" in e]
            if len(names) != len(set(names)):
                raise ValueError(f"{filename}: {key} repeats a name of {base_file}'s: {names}")
            out[key] = merged
        else:
            out.setdefault(key, base[key])
    return out


@functools.lru_cache(maxsize=None)
def load_opdef(filename: str = BACKWARD_YAML) -> OpDef:
    (key, raw), = load_yaml(filename).items()
    raw = _inherited(raw, filename)
    base = {}
    if "layouts_from" in raw:  # ranks, data_formats, dtypes shared with another prototype
        (_, base), = load_yaml(raw["layouts_from"]).items()
        raw = {**{k: base[k] for k in ("ranks", "data_formats", "dtypes")}, **raw}
    if "layouts_from" in raw:  # kernel error codes are shared too
        raw.setdefault("kernel_errors", base.get("kernel_errors", []))
    inputs = tuple(TensorArg(**{**a, "dtypes": {d: tuple(v) for d, v in a["dtypes"].items()}} if "dtypes" in a else a)
                   for a in raw["inputs"])
    attrs = []
    for a in raw["attrs"]:
        a = dict(a)
        if a["type"] == "bool_tuple":
            a["default"] = tuple(a["default"])
        if "values" in a:
            a["values"] = tuple(a["values"])
        if a["type"] == "float":
            a["default"] = float(a["default"])
        attrs.append(Attr(**a))
    outputs = tuple(Output(**{**o, "dtype_from": tuple(o["dtype_from"])}) for o in raw["outputs"])
    fmts = {name: DataFormat(name=name, channel_axis=f["channel_axis"], ranks=tuple(f["ranks"]),
                             names={int(k): v for k, v in f["names"].items()})
            for name, f in raw["data_formats"].items()}
    return OpDef(key=key, op_name=raw["op_name"], aclnn=raw["aclnn"], inputs=inputs,
                 attrs=tuple(attrs), outputs=outputs, min_rank=raw["ranks"]["min"],
                 max_rank=raw["ranks"]["max"], data_formats=fmts, dtypes=tuple(raw["dtypes"]),
                 description=" ".join(raw["description"].split()), support=raw.get("support"),
                 mask_attrs=tuple(raw.get("mask_attrs", ())),
                 kernel_errors=tuple(KernelError(**e) for e in raw.get("kernel_errors", ())),
                 single_output=len(outputs) == 1,
                 mindspore_primitive=_mindspore_primitive(raw, filename, "mindspore_primitive"),
                 mindspore_legacy_primitive=_mindspore_primitive(raw, filename, "mindspore_legacy_primitive"))


def _mindspore_primitive(raw, filename, key):
    mp = raw.get(key)
    if mp is None:
        return None
    known = {a["name"] for a in raw["inputs"]} | {a["name"] for a in raw["attrs"]} | {o["name"] for o in raw["outputs"]}
    args = tuple((a.get("ours"), a["theirs"]) for a in mp["arguments"])
    inference = tuple((a["theirs"], a["in_inference"]) for a in mp["arguments"] if "in_inference" in a)
    unknown = [o for o, _ in args if o is not None and o not in known] + [o for _, o in inference if o not in known]
    if unknown:
        raise ValueError(f"{filename}: {key} names {unknown}, not entries of the prototype")
    bad = [a for a in mp["arguments"] if a.get("as", "variance") != "variance" or set(a) - {"ours", "theirs", "as",
                                                                                           "in_inference"}]
    if bad:
        raise ValueError(f"{filename}: {key} entries {bad}: only ours, theirs, in_inference and as: variance")
    return MindSporePrimitive(name=mp["name"], arguments=args, outputs_from=int(mp["outputs_from"]),
                              carries_variance=tuple(a["theirs"] for a in mp["arguments"] if "as" in a),
                              in_inference=inference)


def kernel_errors() -> Dict[int, str]:
    """Error code -> message of the kernel entries (kernel_errors in batch_norm_backward.yaml)."""
    return {e.code: e.message for e in load_opdef().kernel_errors}


def is_channel_last(data_format: str) -> bool:
    """Whether a data_format of the prototype puts the channel last (False for unknown names)."""
    fmt = load_opdef().data_formats.get(data_format)
    return bool(fmt and fmt.channel_last)
