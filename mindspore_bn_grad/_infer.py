"""Infer-shape and infer-dtype functions for ops.Custom, built from the prototype.

They run while MindSpore builds the graph (GRAPH_MODE compile, or the infer
step of each PYNATIVE call), so every check here rejects bad input before any
kernel runs. Unknown dims (-1) and unknown rank ([-2]) are propagated and
only what is known is checked.
"""
from . import _soc
from ._checks import check_rank, fail
from ._opdef import load_opdef

UNKNOWN_DIM = -1
UNKNOWN_RANK = -2


def _ms_float_names():
    import mindspore as ms
    return {ms.float16: "float16", ms.bfloat16: "bfloat16", ms.float32: "float32",
            ms.float64: "float64"}


def dtype_name(t):
    """MindSpore TensorType / dtype -> 'float16', ..., or its own name for other types."""
    if t is None:
        return None
    et = t.element_type() if hasattr(t, "element_type") else t
    return _ms_float_names().get(et) or str(et).lower()


def ms_dtype(name):
    import mindspore as ms
    return getattr(ms, name)


def _known_rank(shape):
    return shape is not None and UNKNOWN_RANK not in shape


def _merge_dim(a, b, arg, other, axis):
    if a == UNKNOWN_DIM:
        return b
    if b != UNKNOWN_DIM and a != b:
        fail(ValueError, arg, f"the shape of {other}", f"dim {axis} = {a} vs {b}")
    return a


def _fmt_shape(shape):
    return "(" + ", ".join("?" if d == UNKNOWN_DIM else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def infer_shapes(shapes: dict, attrs: dict):
    """shapes: input name -> list of dims or None. Returns one shape per output."""
    opdef = load_opdef()
    for arg in opdef.inputs:
        if shapes.get(arg.name) is None and arg.required(attrs):
            when = "" if not arg.optional else f" when training={attrs['training']}"
            what = "a tensor" if arg.shape == "full" else "a (C,) tensor"
            fail(ValueError, arg.name, what + when, "None")
    full = None
    for arg in opdef.inputs:
        if arg.shape != "full":
            continue
        shape = [int(d) for d in shapes[arg.name]]
        if not _known_rank(shape):
            continue
        if full is None:
            full, first = shape, arg.name
            fmt = check_rank(len(full), attrs)
            _soc.check_format(fmt.names[len(full)])
            continue
        if len(shape) != len(full):
            fail(ValueError, arg.name, f"the shape of {first} {_fmt_shape(full)}", _fmt_shape(shape))
        full = [_merge_dim(a, b, arg.name, first, i) for i, (a, b) in enumerate(zip(full, shape))]
    axis = None if full is None else (len(full) - 1 if attrs["data_format"] in _channel_last_formats() else 1)
    channels = UNKNOWN_DIM if full is None else full[axis]
    for arg in opdef.inputs:
        shape = shapes.get(arg.name)
        if arg.shape != "channel" or shape is None or not _known_rank(shape):
            continue
        shape = [int(d) for d in shape]
        if len(shape) != 1:
            fail(ValueError, arg.name, f"a 1-D (C,) tensor", f"shape {_fmt_shape(shape)}")
        n = shape[0]
        if n == 0 and arg.empty_allowed(attrs):
            continue
        if n != UNKNOWN_DIM and channels != UNKNOWN_DIM and n != channels:
            fail(ValueError, arg.name, f"length {channels} (the channel count of input)", f"length {n}")
        if channels == UNKNOWN_DIM:
            channels = n
    out = []
    for o in opdef.outputs:
        if o.shape == "full":
            out.append(list(full) if full is not None else [UNKNOWN_RANK])
        else:
            out.append([channels])
    return out


def _channel_last_formats():
    return tuple(n for n, f in load_opdef().data_formats.items() if f.channel_last)


def infer_dtypes(dtypes: dict, attrs: dict):
    """dtypes: input name -> dtype name or None. Returns one dtype name per output."""
    opdef = load_opdef()
    for arg in opdef.inputs:
        if dtypes.get(arg.name) is None and not arg.optional:
            fail(ValueError, arg.name, "a tensor", "None")
    out = [next(dtypes[src] for src in o.dtype_from if dtypes.get(src) is not None)
           for o in opdef.outputs]
    # The target's rules first: their messages name the SoC.
    _soc.check_dtypes({**dtypes, **dict(zip(opdef.output_names, out))})
    allowed = list(opdef.dtypes)
    for arg in opdef.inputs:
        d = dtypes.get(arg.name)
        if d is None:
            continue
        if d not in allowed:
            fail(TypeError, arg.name, f"a floating dtype ({', '.join(allowed)})", d)
        if arg.like and d != dtypes[arg.like]:
            fail(TypeError, arg.name, f"the dtype of {arg.like} ({dtypes[arg.like]})", d)
    return out


def make_infer(attrs: dict):
    """(infer_shape, infer_dtype) callables for ops.Custom with these attributes."""
    names = load_opdef().input_names

    def infer_shape(*shapes):
        return infer_shapes(dict(zip(names, shapes)), attrs)

    def infer_dtype(*types):
        return [ms_dtype(n) for n in infer_dtypes(dict(zip(names, map(dtype_name, types))), attrs)]

    return infer_shape, infer_dtype
