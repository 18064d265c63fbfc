"""Infer-shape and infer-dtype functions for ops.Custom, built from the prototype.

They run while MindSpore builds the graph (GRAPH_MODE compile, or the infer
step of each PYNATIVE call), so every check here rejects bad input before any
kernel runs. Unknown dims (-1) and unknown rank ([-2]) are propagated and
only what is known is checked.
"""
import functools

from . import support_rules, target
from .checks import check_rank, fail
from .spec import load_opdef

UNKNOWN_DIM = -1
UNKNOWN_RANK = -2


@functools.lru_cache(maxsize=1)
def _ms_float_names():
    import mindspore as ms
    return {getattr(ms, name): name for name in load_opdef().dtypes}


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


def _merge_dim(a, b, arg, other, axis, op):
    if a == UNKNOWN_DIM:
        return b
    if b != UNKNOWN_DIM and a != b:
        fail(ValueError, arg, f"the shape of {other}", f"dim {axis} = {a} vs {b}", op=op)
    return a


def _fmt_shape(shape):
    return "(" + ", ".join("?" if d == UNKNOWN_DIM else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def infer_shapes(shapes: dict, attrs: dict, opdef=None):
    """shapes: input name -> list of dims or None. Returns one shape per output.

    Input kinds (the prototype's `shape`): `full` activations, `channel`
    (C,) tensors, `counts` 1-D tensors of any length.
    """
    opdef = opdef or load_opdef()
    op = opdef.op_name
    for arg in opdef.inputs:
        if shapes.get(arg.name) is None and arg.required(attrs):
            when = "" if not arg.optional else f" when training={attrs['training']}"
            what = "a tensor" if arg.shape == "full" else "a (C,) tensor"
            fail(ValueError, arg.name, what + when, "None", op=op)
    full = None
    for arg in opdef.inputs:
        if arg.shape != "full":
            continue
        shape = [int(d) for d in shapes[arg.name]]
        if not _known_rank(shape):
            continue
        if full is None:
            full, first = shape, arg.name
            fmt = check_rank(len(full), attrs, opdef)
            if opdef.support:
                support_rules.check_format(fmt.names[len(full)], target.active_target())
            continue
        if len(shape) != len(full):
            fail(ValueError, arg.name, f"the shape of {first} {_fmt_shape(full)}", _fmt_shape(shape), op=op)
        full = [_merge_dim(a, b, arg.name, first, i, op) for i, (a, b) in enumerate(zip(full, shape))]
    fmt = opdef.data_formats[attrs["data_format"]]
    channels = UNKNOWN_DIM if full is None else full[len(full) - 1 if fmt.channel_last else 1]
    for arg in opdef.inputs:
        shape = shapes.get(arg.name)
        if arg.shape == "full" or shape is None or not _known_rank(shape):
            continue
        shape = [int(d) for d in shape]
        if len(shape) != 1:
            what = "a 1-D (C,) tensor" if arg.shape == "channel" else "a 1-D tensor"
            fail(ValueError, arg.name, what, f"shape {_fmt_shape(shape)}", op=op)
        n = shape[0]
        if arg.shape != "channel" or (n == 0 and arg.empty_allowed(attrs)):
            continue
        if n != UNKNOWN_DIM and channels != UNKNOWN_DIM and n != channels:
            fail(ValueError, arg.name, f"length {channels} (the channel count of input)", f"length {n}", op=op)
        if channels == UNKNOWN_DIM:
            channels = n
    return [(list(full) if full is not None else [UNKNOWN_RANK]) if o.shape == "full" else [channels]
            for o in opdef.outputs]


def infer_dtypes(dtypes: dict, attrs: dict, opdef=None):
    """dtypes: input name -> dtype name or None. Returns one dtype name per output."""
    opdef = opdef or load_opdef()
    op = opdef.op_name
    for arg in opdef.inputs:
        if dtypes.get(arg.name) is None and not arg.optional:
            fail(ValueError, arg.name, "a tensor", "None", op=op)
    out = [next(dtypes[src] for src in o.dtype_from if dtypes.get(src) is not None)
           for o in opdef.outputs]
    if opdef.support:
        # The target's rules first: their messages name the SoC.
        support_rules.check_dtypes({**dtypes, **dict(zip(opdef.output_names, out))}, target.active_target())
    floats = list(opdef.dtypes)
    for arg in opdef.inputs:
        d = dtypes.get(arg.name)
        if d is None:
            continue
        if arg.dtypes is not None:  # the input's own per-device list (counter)
            soc = target.active_target()
            allowed = arg.allowed_dtypes(support_rules.target_info(soc).device)
            if d not in allowed:
                fail(TypeError, arg.name, f"a float or integer dtype ({', '.join(allowed)})", d, soc=soc, op=op)
        elif d not in floats:
            fail(TypeError, arg.name, f"a floating dtype ({', '.join(floats)})", d, op=op)
        if arg.like and d != dtypes[arg.like]:
            fail(TypeError, arg.name, f"the dtype of {arg.like} ({dtypes[arg.like]})", d, op=op)
    return out


def make_infer(attrs: dict, opdef=None):
    """(infer_shape, infer_dtype) callables for ops.Custom with these attributes.

    A single-output op gets a bare shape / dtype, as ops.Custom expects.
    Results are memoised per input signature and active target (PYNATIVE
    infers at every call); a rejection is never memoised, so it raises again.
    """
    opdef = opdef or load_opdef()
    names = opdef.input_names
    unwrap = (lambda out: out[0]) if opdef.single_output else (lambda out: out)

    by_target = bool(opdef.support) or any(a.dtypes is not None for a in opdef.inputs)

    def target_key():  # results depend on the target when it has rules or an input has per-device dtypes
        return target.active_target() if by_target else None

    @functools.lru_cache(maxsize=256)
    def shapes_for(key, _target):
        out = infer_shapes(dict(zip(names, (None if s is None else list(s) for s in key))), attrs, opdef)
        return tuple(tuple(s) for s in out)

    @functools.lru_cache(maxsize=256)
    def dtypes_for(key, _target):
        return tuple(infer_dtypes(dict(zip(names, key)), attrs, opdef))

    def ms_dtypes(types, _target):
        return tuple(ms_dtype(n) for n in dtypes_for(tuple(map(dtype_name, types)), _target))

    # MindSpore type objects hash and compare by type
    dtypes_by_type = functools.lru_cache(maxsize=256)(ms_dtypes)

    def infer_shape(*shapes):
        key = tuple(None if s is None else tuple(int(d) for d in s) for s in shapes)
        return unwrap([list(s) for s in shapes_for(key, target_key())])

    def infer_dtype(*types):
        try:
            out = dtypes_by_type(types, target_key())
        except TypeError as e:  # an unhashable type object: the uncached way (which raises
            if "unhashable" not in str(e):  # the clear error for a bad dtype)
                raise
            out = ms_dtypes(types, target_key())
        return unwrap(list(out))

    return infer_shape, infer_dtype
