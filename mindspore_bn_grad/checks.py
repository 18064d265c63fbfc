"""Small check functions shared by the public API and the infer step.

Every rejection reads `<Op>: <arg> expected <what>, got <what>` (with
` on <soc>` for a target rule): TypeError for a dtype or a Python type,
ValueError for a shape, format, length or value. <Op> is the prototype's
op_name (BatchNormBackward unless said otherwise).
"""
import math
import numbers

import numpy as np

from .spec import load_opdef

PREFIX = "BatchNormBackward"


def fail(exc_type, arg, expected, got, soc=None, op=PREFIX):
    where = f" on {soc}" if soc else ""
    raise exc_type(f"{op}: {arg} expected {expected}, got {got}{where}")


def _is_bool(v):
    return isinstance(v, (bool, np.bool_))


def normalize_attrs(**given) -> dict:
    """Attributes of BatchNormBackward, validated; see normalize_op_attrs."""
    return normalize_op_attrs(load_opdef(), given)


def normalize_op_attrs(opdef, given: dict) -> dict:
    """Validates attributes against the prototype; returns a complete dict of hashable values."""
    given = dict(given)
    op = opdef.op_name
    out = {}
    for a in opdef.attrs:
        v = given.pop(a.name, a.default)
        if a.type == "bool":
            if not _is_bool(v):
                fail(TypeError, a.name, "a bool", repr(v), op=op)
            v = bool(v)
        elif a.type == "float":
            if _is_bool(v) or not isinstance(v, numbers.Real):
                fail(TypeError, a.name, "a float", repr(v), op=op)
            v = float(v)
            if not math.isfinite(v) or (a.min is not None and v < a.min):
                fail(ValueError, a.name, f"a finite float >= {a.min}", repr(v), op=op)
        elif a.type == "bool_tuple":
            if not isinstance(v, (tuple, list)) or isinstance(v, str):
                fail(TypeError, a.name, f"a tuple of {a.length} bools", repr(v), op=op)
            if len(v) != a.length:
                fail(ValueError, a.name, f"{a.length} bools", f"length {len(v)}: {v!r}", op=op)
            if not all(_is_bool(b) for b in v):
                fail(TypeError, a.name, f"a tuple of {a.length} bools", repr(v), op=op)
            v = tuple(bool(b) for b in v)
        elif a.type == "str":
            if not isinstance(v, str):
                fail(TypeError, a.name, f"one of {list(a.values)}", repr(v), op=op)
            if a.values and v not in a.values:
                fail(ValueError, a.name, f"one of {list(a.values)}", repr(v), op=op)
        else:  # pragma: no cover - a prototype with a type this loader does not know
            raise NotImplementedError(f"{op}: attribute type {a.type}")
        out[a.name] = v
    if given:
        raise TypeError(f"{op}: unexpected argument(s) {sorted(given)}")
    return out


def check_tensor_args(opdef, tensors) -> None:
    """Each argument is a mindspore.Tensor, or None where the prototype makes it optional."""
    import mindspore as ms
    for arg, t in zip(opdef.inputs, tensors):
        if t is None and arg.optional:
            continue
        if not isinstance(t, ms.Tensor):
            what = "a mindspore.Tensor" + (" or None" if arg.optional else "")
            fail(TypeError, arg.name, what, type(t).__name__, op=opdef.op_name)


def check_rank(rank, attrs, opdef=None):
    opdef = opdef or load_opdef()
    if not opdef.min_rank <= rank <= opdef.max_rank:
        fail(ValueError, opdef.inputs[0].name, f"rank {opdef.min_rank}..{opdef.max_rank}", f"rank {rank}",
             op=opdef.op_name)  # the first input is the activation (grad_out, or input for the forward)
    fmt = opdef.data_formats[attrs["data_format"]]
    if rank not in fmt.ranks:
        fail(ValueError, "data_format", f"a format that fits rank {rank} "
             f"({', '.join(n for n, f in opdef.data_formats.items() if rank in f.ranks)})",
             repr(fmt.name), op=opdef.op_name)
    return fmt

