"""``ops.vmap`` over the package's primitives: one rule for all of them, from their prototypes.

MindSpore looks a vmap rule up by primitive name (``get_vmap_rule`` in
``mindspore/ops/_vmap/vmap_base.py``), and every ``ops.Custom`` is named
"Custom"; without a rule it falls back to a loop whose stacking fails on our
multi-output primitives (``For 'Stack', the element of 'input_x[0]' must be
Tensor, but got type 'list'``). ``register()`` (called by primitives.py) adds a
getter under "Custom" that answers for our primitives (they carry ``opdef``)
and hands any other Custom to the getter that was there before, if any. It
runs when the first primitive is made, not at import.

The rule folds the vmapped axis into the channel axis, which is exact because
every per-channel quantity of BatchNorm is computed over the non-channel axes
only: with B members, an activation (full) input of one member (N, C, *) is
read as (N, B*C, *) — channel-last (*, C) as (*, B*C) — and a per-channel input
(C,) as (B*C,); members absent from an input (in_axes None) are broadcast.
Outputs are unfolded the same way: full ones come back with the vmapped axis
just before the channel axis, per-channel ones with it in front. One launch for
the whole batch, any rank, both layouts, training and inference.

The one input that cannot be folded is a batched ``counts`` input
(BatchNormElemtBackward's ``counter``): members would then normalise by
different element counts. That case runs one launch per member and stacks the
results (an unbatched ``counter`` still folds).
"""
from mindspore import ops

from .spec import OpDef

_FULL, _CHANNEL = "full", "channel"


_registered = []


def register():
    """Makes ops.vmap use fold_rule for the package's primitives (idempotent). False if MindSpore has no
    vmap rule registry where this release looks (then ops.vmap keeps its own fallback)."""
    if _registered:
        return True
    from . import ms_compat
    vmap_rules_getters = ms_compat.vmap_rules_getters()
    if vmap_rules_getters is None:
        return False
    previous = vmap_rules_getters.get("Custom", None)
    if getattr(previous, "_bn_grad_getter", False):
        return True

    def getter(prim, axis_size):
        if isinstance(getattr(prim, "opdef", None), OpDef):
            return fold_rule(prim, axis_size)
        return previous(prim, axis_size) if previous is not None else None

    getter._bn_grad_getter = True
    vmap_rules_getters.register("Custom")(getter)
    _registered.append(getter)
    return True


def fold_rule(prim, axis_size):
    """The vmap rule of a primitive made by primitives.Primitive (see the module docstring).

    MindSpore compiles the rule like a GRAPH_MODE construct, hence the plain loops over constant
    ranges and tuple concatenation (no generators, no lists that grow)."""
    opdef = prim.opdef
    channel_last = opdef.data_formats[prim.op_attrs["data_format"]].channel_last
    kinds = tuple(a.shape for a in opdef.inputs)
    out_kinds = tuple(o.shape for o in opdef.outputs)
    n_in, n_out = len(kinds), len(out_kinds)
    first_full = kinds.index(_FULL)  # a required input (grad_out; input for the forward)
    foldable = tuple(k in (_FULL, _CHANNEL) for k in kinds)

    def rule(*args):
        values, dims = (), ()
        for i in range(n_in):  # a side-effect monad, if MindSpore ever appends one, is not an input
            values = values + (args[i][0],)
            dims = dims + (args[i][1],)
        if _all_none(dims):
            return _bind(prim(*values), n_out, (None,) * n_out)
        if not _foldable(dims, foldable):
            return _loop(prim, values, dims, n_out, axis_size)
        rank = len(values[first_full].shape) - (0 if dims[first_full] is None else 1)
        axis = rank - 1 if channel_last else 1   # where the vmapped axis goes: just before the channel axis
        full = _move(values[first_full], dims[first_full], axis, axis_size).shape
        folded = ()
        for i in range(n_in):
            v = values[i]
            if v is None or not foldable[i]:
                folded = folded + (v,)  # an absent optional input, or unbatched counts: as given
            elif kinds[i] == _FULL:
                folded = folded + (_move(v, dims[i], axis, axis_size).reshape(_fold_shape(full, axis)),)
            else:
                v = _move(v, dims[i], 0, axis_size)
                folded = folded + (v.reshape((v.shape[0] * v.shape[1],)),)
        outs = prim(*folded)
        if n_out == 1:
            outs = (outs,)
        unfolded, out_dims = (), ()
        for j in range(n_out):
            if out_kinds[j] == _FULL:
                unfolded = unfolded + (outs[j].reshape(full),)
                out_dims = out_dims + (axis,)
            else:
                unfolded = unfolded + (outs[j].reshape((axis_size, full[axis + 1])),)
                out_dims = out_dims + (0,)
        return _bind(unfolded if n_out > 1 else unfolded[0], n_out, out_dims)

    return rule


def _all_none(dims):
    for d in dims:
        if d is not None:
            return False
    return True


def _foldable(dims, foldable):
    for d, f in zip(dims, foldable):
        if d is not None and not f:
            return False
    return True


def _fold_shape(shape, axis):
    return shape[:axis] + (shape[axis] * shape[axis + 1],) + shape[axis + 2:]


def _move(x, src, dst, axis_size):
    """x with its vmapped axis `src` moved to `dst`; broadcast there to axis_size when x has none."""
    if src is None:
        x = ops.expand_dims(x, dst)
        return ops.broadcast_to(x, x.shape[:dst] + (axis_size,) + x.shape[dst + 1:])
    return ops.moveaxis(x, src, dst)


def _bind(outs, n_out, out_dims):
    """(output, its vmapped axis) pairs, in the form vmap expects for one or several outputs."""
    if n_out == 1:
        return outs, out_dims[0]
    pairs = ()
    for j in range(n_out):
        pairs = pairs + ((outs[j], out_dims[j]),)
    return pairs


def _loop(prim, values, dims, n_out, axis_size):
    """One launch per member, stacked along axis 0 (used only where folding is not exact)."""
    per_member = ()
    for m in range(axis_size):
        member = ()
        for v, d in zip(values, dims):
            member = member + (v if v is None or d is None else _take(v, d, m),)
        outs = prim(*member)
        per_member = per_member + ((outs if n_out > 1 else (outs,)),)
    stacked = ()
    for j in range(n_out):
        column = ()
        for m in range(axis_size):
            column = column + (per_member[m][j],)
        stacked = stacked + (ops.stack(column),)
    return _bind(stacked if n_out > 1 else stacked[0], n_out, (0,) * n_out)


def _take(x, dim, m):
    """Member m of x along its vmapped axis dim."""
    return ops.squeeze(ops.narrow(x, dim, m, 1), dim)
