"""The per-SoC dtype and format rules, from op_def/batch_norm_backward_support.yaml.

The YAML states each rule once; everything else is derived here (which SoC
is active is target.py's business: every function here takes the SoC):

* ``resolve(name)``: canonical target name for a name or alias.
* ``check_dtypes(dtypes, soc)`` / ``check_format(format_name, soc)``: called
  by the infer functions at graph build time; TypeError / ValueError reading
  ``BatchNormBackward: <arg> expected <allowed>, got <given> on <soc>``.
* For generators (CustomRegOp rows, the Ascend C ``AddConfig`` blocks, docs):

  - ``targets(device=None) -> list[str]``: canonical names, YAML order
    (``device="Ascend"`` for the SoCs only).
  - ``target_info(soc) -> Target``: product line, dtypes, formats, rule set.
  - ``accepted_formats(soc) -> tuple[str, ...]``: ACLNN format names of
    grad_out / input / grad_input (per-channel tensors are 1-D, format ND).
  - ``dtype_combinations(soc, absent=(), derived_outputs=True) -> list[dict]``:
    every accepted ``{tensor name: dtype}`` over all inputs and outputs in
    prototype order; absent optional inputs map to None. With
    ``derived_outputs`` the outputs take the dtype this package gives them
    (prototype ``dtype_from``); without, every output dtype the SoC accepts.
  - ``accepted_combinations(soc, absent=(), derived_outputs=True)``: yields
    ``{tensor name: dtype, ..., "format": format name}`` for every dtype
    combination times every accepted format.
  - ``combinations(soc, opdef=None, ...)``: the same for a SyncBatchNorm step,
    whose dtypes follow BatchNormBackward's (``SYNC_SOURCE``).

Nothing is read at import; the YAML is loaded (and validated) on first use.
"""
import functools
import itertools
import re
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Tuple

from .checks import fail
from .spec import load_opdef, load_yaml


def _support_file() -> str:
    return load_opdef().support


SAME = "same"


@dataclass(frozen=True)
class Constraint:
    by: Tuple[str, ...]                     # first present one is the source
    relation: str                           # SAME or a relation name

    def allowed(self, source_dtype, relations) -> Tuple[str, ...]:
        if self.relation == SAME:
            return (source_dtype,)
        return tuple(relations[self.relation].get(source_dtype, ()))


@dataclass(frozen=True)
class Target:
    name: str
    product_line: str
    device: str
    aliases: Tuple[str, ...]
    dtypes: Tuple[str, ...]
    rule_set: str
    rule_summary: str
    rules: Dict[str, Tuple[Constraint, ...]]
    format_set: str
    formats: Tuple[str, ...]


@dataclass(frozen=True)
class Support:
    relations: Dict[str, Dict[str, Tuple[str, ...]]]
    targets: Dict[str, Target]
    names: Dict[str, str]                   # normalized name or alias -> target


def _norm(name) -> str:
    return re.sub(r"[\s\-]+", "_", str(name).strip().lower())


def _bad(msg):
    raise ValueError(f"{_support_file()}: {msg}")


@functools.lru_cache(maxsize=None)
def load_support() -> Support:
    """Parses and validates the support YAML against the prototype (once)."""
    (raw,) = load_yaml(_support_file()).values()
    opdef = load_opdef()
    tensors = opdef.input_names + opdef.output_names
    fmt_names = {n for f in opdef.data_formats.values() for n in f.names.values()}
    relations = {r: {src: tuple(dst) for src, dst in m.items()} for r, m in raw["relations"].items()}
    for r, m in relations.items():
        for d in itertools.chain(m, *m.values()):
            if d not in opdef.dtypes:
                _bad(f"relation {r}: unknown dtype {d!r}")
    rule_sets = {}
    for rs_name, rs in raw["rule_sets"].items():
        rules = {}
        for arg, cons in (rs.get("rules") or {}).items():
            if arg not in tensors:
                _bad(f"rule set {rs_name}: unknown tensor {arg!r}")
            parsed = []
            for c in cons:
                if "same_as" in c:
                    by, rel = c["same_as"], SAME
                else:
                    by, rel = c["by"], c["allow"]
                by = (by,) if isinstance(by, str) else tuple(by)
                if rel != SAME and rel not in relations:
                    _bad(f"rule set {rs_name}: unknown relation {rel!r}")
                for b in by:
                    if b not in tensors or tensors.index(b) >= tensors.index(arg):
                        _bad(f"rule set {rs_name}: {arg} depends on {b!r}, which is not an earlier tensor")
                parsed.append(Constraint(by, rel))
            rules[arg] = tuple(parsed)
        rule_sets[rs_name] = (rs.get("summary", ""), rules)
    format_sets = {k: tuple(v) for k, v in raw["format_sets"].items()}
    for k, v in format_sets.items():
        for f in v:
            if f not in fmt_names:
                _bad(f"format set {k}: unknown format {f!r} (prototype names: {sorted(fmt_names)})")
    targets, names = {}, {}
    for t_name, t in raw["targets"].items():
        for d in t["dtypes"]:
            if d not in opdef.dtypes:
                _bad(f"target {t_name}: unknown dtype {d!r}")
        summary, rules = rule_sets[t["dtype_rules"]]
        target = Target(name=t_name, product_line=t["product_line"], device=t["device"],
                        aliases=tuple(t.get("aliases") or ()), dtypes=tuple(t["dtypes"]),
                        rule_set=t["dtype_rules"], rule_summary=summary, rules=rules,
                        format_set=t["formats"], formats=format_sets[t["formats"]])
        targets[t_name] = target
        for n in (t_name,) + target.aliases:
            if _norm(n) in names:
                _bad(f"name {n!r} is used twice")
            names[_norm(n)] = t_name
    return Support(relations=relations, targets=targets, names=names)


# ---------------------------------------------------------------- target names

def targets(device: Optional[str] = None) -> List[str]:
    """Canonical target names in YAML order; device='Ascend' or 'CPU' filters."""
    return [n for n, t in load_support().targets.items() if device is None or t.device == device]


def resolve(name, source="target SoC") -> str:
    """Canonical target name for a name or alias; ValueError listing the known ones."""
    found = load_support().names.get(_norm(name))
    if found is None:
        fail(ValueError, source, f"one of {', '.join(targets())} (or an alias of one)", repr(name))
    return found


def target_info(soc) -> Target:
    return load_support().targets[resolve(soc)]


# ---------------------------------------------------------------- checks

def _source(constraint, dtypes):
    return next(((b, dtypes[b]) for b in constraint.by if dtypes.get(b) is not None), (None, None))


def _ordered(dtypes):
    opdef = load_opdef()
    order = opdef.input_names + opdef.output_names
    return sorted(dtypes, key=lambda n: order.index(n) if n in order else len(order))


def dtype_violation(dtypes, soc) -> Optional[Tuple[str, str, str]]:
    """First broken rule as (tensor, expected, got), or None if `soc` accepts `dtypes`."""
    support = load_support()
    target = support.targets[soc]
    opdef = load_opdef()
    likes = {a.name: a.like for a in opdef.inputs + opdef.outputs if a.like}
    for name in _ordered(dtypes):
        d = dtypes[name]
        if d is None:
            continue
        if d not in target.dtypes:
            return name, f"one of {', '.join(target.dtypes)}", d
        like = likes.get(name)
        if like and dtypes.get(like) is not None and d != dtypes[like]:
            return name, f"{dtypes[like]} (the dtype of {like})", d
        for c in target.rules.get(name, ()):
            src, src_dtype = _source(c, dtypes)
            if src is None:
                continue
            allowed = c.allowed(src_dtype, support.relations)
            if d not in allowed:
                if c.relation == SAME:
                    return name, f"{src_dtype} (the dtype of {src})", d
                return name, f"{' or '.join(allowed) or 'nothing'} (with {src} {src_dtype})", d
    return None


def check_dtypes(dtypes, soc) -> None:
    """dtypes: tensor name -> dtype name ('float16', ...) or None when absent. TypeError on a broken rule."""
    bad = dtype_violation(dtypes, soc)
    if bad is not None:
        fail(TypeError, *bad, soc=soc)


def check_format(format_name: str, soc) -> None:
    """format_name: the ACLNN format name of the call (NCHW, NHWC, ND, ...). ValueError if not allowed."""
    allowed = load_support().targets[soc].formats
    if format_name not in allowed:
        fail(ValueError, "grad_out format", f"one of {', '.join(allowed)}", format_name, soc=soc)


# ---------------------------------------------------------------- enumeration

def accepted_formats(soc) -> Tuple[str, ...]:
    return load_support().targets[resolve(soc)].formats


def _derived_output_dtype(output, dtypes):
    return next(dtypes[s] for s in output.dtype_from if dtypes.get(s) is not None)


def dtype_combinations(soc, absent=(), derived_outputs=True) -> List[Dict[str, Optional[str]]]:
    """Every accepted {tensor: dtype} (inputs, then outputs, prototype order); see the module doc."""
    soc = resolve(soc)
    opdef = load_opdef()
    absent = set(absent)
    for name in absent:
        if name not in opdef.input_names or not opdef.input(name).optional:
            raise ValueError(f"absent: {name!r} is not an optional input")
    target = load_support().targets[soc]
    outputs = {o.name: o for o in opdef.outputs}
    order = opdef.input_names + opdef.output_names
    found = []

    def extend(i, dtypes):
        if i == len(order):
            if dtype_violation(dtypes, soc) is None:
                found.append(dict(dtypes))
            return
        name = order[i]
        if name in absent:
            choices = (None,)
        elif derived_outputs and name in outputs:
            choices = (_derived_output_dtype(outputs[name], dtypes),)
        else:
            choices = target.dtypes
        for d in choices:
            dtypes[name] = d
            # prune: check the prefix assigned so far
            if dtype_violation({n: dtypes[n] for n in order[:i + 1]}, soc) is None:
                extend(i + 1, dtypes)
        dtypes.pop(name, None)

    extend(0, {})
    return found


def accepted_combinations(soc, absent=(), derived_outputs=True) -> Iterator[Dict[str, Optional[str]]]:
    """Yields {tensor name: dtype, ..., "format": ACLNN format name}: dtype combinations x formats."""
    formats = accepted_formats(soc)
    for dtypes in dtype_combinations(soc, absent, derived_outputs):
        for fmt in formats:
            yield {**dtypes, "format": fmt}


# ---------------------------------------------------------------- SyncBatchNorm steps

# op_def/batch_norm_{reduce,elemt}_backward.yaml (`layouts_from` BatchNormBackward):
# each tensor takes the dtype of the BatchNormBackward tensor named here (mean /
# invstd are save_mean / save_invstd, the sums mean's dtype); `counter` takes each
# of its own Ascend dtypes (`dtypes` of the counter input).
SYNC_SOURCE = {"grad_out": "grad_out", "input": "input", "mean": "save_mean", "invstd": "save_invstd",
               "weight": "weight", "sum_dy": "save_mean", "sum_dy_xmu": "save_mean", "grad_input": "grad_input",
               "grad_weight": "grad_weight", "grad_bias": "grad_bias"}


def combinations(soc, opdef=None, absent=(), derived_outputs=True):
    """BatchNormBackward's accepted combinations, or a sync op's derived from them."""
    base = load_opdef()
    opdef = opdef or base
    for combo in accepted_combinations(soc, absent, derived_outputs):
        if opdef.op_name == base.op_name:
            yield combo
            continue
        names = opdef.input_names + opdef.output_names
        for counter in (opdef.input("counter").allowed_dtypes("Ascend") if "counter" in names else (None,)):
            out = {"format": combo["format"]}
            for n in names:
                out[n] = counter if n == "counter" else combo[SYNC_SOURCE[n]]
            yield out
