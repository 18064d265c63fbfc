"""Small check functions shared by the public API and the infer step.

Every rejection reads `BatchNormBackward: <arg> expected <what>, got <what>`
(with ` on <soc>` for a target rule): TypeError for a dtype or a Python
type, ValueError for a shape, format, length or value.
"""
import math
import numbers

import numpy as np

from ._opdef import load_opdef

PREFIX = "BatchNormBackward"


def fail(exc_type, arg, expected, got, soc=None):
    where = f" on {soc}" if soc else ""
    raise exc_type(f"{PREFIX}: {arg} expected {expected}, got {got}{where}")


def _is_bool(v):
    return isinstance(v, (bool, np.bool_))


def normalize_attrs(**given) -> dict:
    """Validates attributes against the prototype; returns a complete, hashable-valued dict."""
    opdef = load_opdef()
    out = {}
    for a in opdef.attrs:
        v = given.pop(a.name, a.default)
        if a.type == "bool":
            if not _is_bool(v):
                fail(TypeError, a.name, "a bool", repr(v))
            v = bool(v)
        elif a.type == "float":
            if _is_bool(v) or not isinstance(v, numbers.Real):
                fail(TypeError, a.name, "a float", repr(v))
            v = float(v)
            if not math.isfinite(v) or (a.min is not None and v < a.min):
                fail(ValueError, a.name, f"a finite float >= {a.min}", repr(v))
        elif a.type == "bool_tuple":
            if not isinstance(v, (tuple, list)) or isinstance(v, str):
                fail(TypeError, a.name, f"a tuple of {a.length} bools", repr(v))
            if len(v) != a.length:
                fail(ValueError, a.name, f"{a.length} bools", f"length {len(v)}: {v!r}")
            if not all(_is_bool(b) for b in v):
                fail(TypeError, a.name, f"a tuple of {a.length} bools", repr(v))
            v = tuple(bool(b) for b in v)
        elif a.type == "str":
            if not isinstance(v, str):
                fail(TypeError, a.name, f"one of {list(a.values)}", repr(v))
            if a.values and v not in a.values:
                fail(ValueError, a.name, f"one of {list(a.values)}", repr(v))
        out[a.name] = v
    if given:
        raise TypeError(f"{PREFIX}: unexpected argument(s) {sorted(given)}")
    return out


def data_format(attrs):
    return load_opdef().data_formats[attrs["data_format"]]


def check_rank(rank, attrs):
    opdef = load_opdef()
    if not opdef.min_rank <= rank <= opdef.max_rank:
        fail(ValueError, "grad_out", f"rank {opdef.min_rank}..{opdef.max_rank}", f"rank {rank}")
    fmt = data_format(attrs)
    if rank not in fmt.ranks:
        fail(ValueError, "data_format", f"a format that fits rank {rank} "
             f"({', '.join(n for n, f in opdef.data_formats.items() if rank in f.ranks)})",
             repr(fmt.name))
    return fmt
