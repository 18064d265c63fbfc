"""ops.vmap over the package's primitives and over converted networks (docs/vmap.md).

1. BatchNormBackward and BatchNormDoubleBackward (and BatchNormForward) under vmap, in MindSpore's own vmap test
   shapes for BatchNormGradGrad (activations vmapped at axis 1 in NCHW, at axis 3 in NHWC,
   per-channel inputs at axis 0) and in larger ones, training and inference, PYNATIVE and
   GRAPH (ms.jit): every member equal to the float64 reference run on that member alone.
2. in_axes variants: inputs shared by all members (None), absent optional inputs, negative
   axes, out_axes, ranks 2 and 5, masked outputs; one launch for the whole batch.
3. MindSpore's own BatchNormGrad / BatchNormGradGrad under vmap, where they run on CPU
   (BatchNormGrad: NCHW; BatchNormGradGrad: both layouts), give the same values.
4. The SyncBatchNorm pair: folded, and the per-member loop for a vmapped `counter`.
5. Converted networks behave under vmap as MindSpore's nn.BatchNorm2d does: the same
   error in training, the same values in inference (forward in both modes; gradients in
   GRAPH mode only, see docs/vmap.md).
"""
import itertools

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn, ops
from mindspore.ops.operations import _grad_ops as G

from _harness import builtin_kernels, copy_parameter_values, record_backward_ops
from mindspore_bn_grad import vmap as bn_vmap
from mindspore_bn_grad.backward import BatchNormBackward
from mindspore_bn_grad.double_backward import BatchNormDoubleBackward
from mindspore_bn_grad.forward import BatchNormForward
from mindspore_bn_grad.nn import convert_batchnorm
from mindspore_bn_grad.sync_backward import BatchNormElemtBackward, BatchNormReduceBackward
from reference import (batch_norm_backward_ref, batch_norm_double_backward_ref, batch_norm_forward_ref, sync_elemt_ref,
                       sync_reduce_ref)

EPS = 1e-5
GRAPH = (False, True)   # False: PYNATIVE, True: GRAPH (ms.jit over the vmapped function)
RTOL = 2e-5             # float32 data, float32-or-wider accumulation: relative to max |reference|


# vmap reads the arity of `fn` from its signature (in GRAPH mode `*args` counts as one).
def _fn5(op):
    def fn(a, b, c, d, e):
        return op(a, b, c, d, e)
    return fn


def _fn6(op):
    def fn(a, b, c, d, e, f):
        return op(a, b, c, d, e, f)
    return fn


def _fn7(op):
    def fn(a, b, c, d, e, f, g):
        return op(a, b, c, d, e, f, g)
    return fn


def _fn8(op):
    def fn(a, b, c, d, e, f, g, h):
        return op(a, b, c, d, e, f, g, h)
    return fn


def _fn10(op):
    def fn(a, b, c, d, e, f, g, h, i, j):
        return op(a, b, c, d, e, f, g, h, i, j)
    return fn


FNS = {5: _fn5, 6: _fn6, 7: _fn7, 8: _fn8, 10: _fn10}


def run_vmap(op, args, in_axes, out_axes=0, graph=False):
    """ops.vmap(op) on NumPy arrays (None stays None); the outputs as NumPy arrays."""
    vm = ops.vmap(FNS[len(args)](op), in_axes, out_axes)
    if graph:
        vm = ms.jit(vm)
    outs = vm(*[None if a is None else ms.Tensor(a) for a in args])
    return [o.asnumpy() for o in (outs if isinstance(outs, tuple) else (outs,))]


def channel_axis(rank, fmt):
    return rank - 1 if fmt in ("NHWC", "NDHWC") else 1


def member(shape, fmt, training, rng, weight=True, with_double=False):
    """One member's inputs of BatchNormBackward (+ the double backward's upstream gradients)."""
    axis = channel_axis(len(shape), fmt)
    c = shape[axis]
    axes = tuple(i for i in range(len(shape)) if i != axis)
    x = (rng.standard_normal(shape) * 2 + rng.standard_normal((1,) * axis + (c,) + (1,) * (len(shape) - axis - 1))
         ).astype(np.float32)
    m = {"grad_out": rng.standard_normal(shape).astype(np.float32), "input": x,
         "weight": rng.standard_normal(c).astype(np.float32) if weight else None,
         "running_mean": None, "running_var": None, "save_mean": None, "save_invstd": None}
    if training:
        m["save_mean"] = x.mean(axis=axes).astype(np.float32)
        m["save_invstd"] = (1 / np.sqrt(x.var(axis=axes) + EPS)).astype(np.float32)
    else:
        m["running_mean"] = rng.standard_normal(c).astype(np.float32)
        m["running_var"] = (rng.random(c) + 0.5).astype(np.float32)
    if with_double:
        m["grad_grad_input"] = rng.standard_normal(shape).astype(np.float32)
        m["grad_grad_weight"] = rng.standard_normal(c).astype(np.float32)
        m["grad_grad_bias"] = rng.standard_normal(c).astype(np.float32)
    return m


def batch(members, names, in_axes):
    """(arguments, in_axes): members stacked at their in_axis; a None axis shares member 0's value
    (and every member then sees that value); an absent input is None with axis None."""
    args, axes = [], []
    for name, ax in zip(names, in_axes):
        axes.append(None if members[0][name] is None else ax)
        if members[0][name] is None:
            args.append(None)
        elif ax is None:
            for m in members[1:]:
                m[name] = members[0][name]
            args.append(members[0][name])
        else:
            args.append(np.stack([m[name] for m in members], axis=ax))
    return args, tuple(axes)


def check_members(outs, out_axes, refs, what):
    """Output j of member b, taken at out_axes[j], equals refs[b][j] (float64)."""
    for j, out in enumerate(outs):
        ax = out_axes[j] if isinstance(out_axes, tuple) else out_axes
        for b, ref in enumerate(refs):
            got, want = np.take(out, b, axis=ax), np.asarray(ref[j], np.float64)
            assert got.shape == want.shape, (what, j, got.shape, want.shape)
            scale = max(float(np.abs(want).max()), 1e-30)
            err = float(np.abs(got - want).max())
            assert err <= RTOL * scale, f"{what}: output {j} of member {b}: error {err:.3g}, max|ref| {scale:.3g}"


BACKWARD_NAMES = ("grad_out", "input", "weight", "running_mean", "running_var", "save_mean", "save_invstd")
DOUBLE_NAMES = BACKWARD_NAMES + ("grad_grad_input", "grad_grad_weight", "grad_grad_bias")

# (member shape, data_format, vmapped axis of the activations, members, training, GRAPH). The
# first of each layout is the shape and mode of MindSpore's BatchNormGradGrad vmap tests: batched
# (2, 2, 1, 1, 3) at axis 1 (NCHW, training) and (2, 2, 1, 3, 1) at axis 3 (NHWC, inference);
# per-channel inputs at axis 0. Each layout in training and inference, and in both modes.
CASES = [((2, 1, 1, 3), "NCHW", 1, 2, True, False), ((4, 3, 2, 5), "NCHW", 1, 3, False, True),
         ((2, 2, 1, 1), "NHWC", 3, 3, False, False), ((4, 2, 5, 3), "NHWC", 3, 2, True, True)]
CASE_IDS = [f"{s[0]}-{s[1]}-{'train' if s[4] else 'infer'}-{'graph' if s[5] else 'pynative'}" for s in CASES]


def backward_axes(act_axis, n=7):
    return (act_axis, act_axis) + (0,) * (n - 2)


def mindspore_stats(args, training):
    """mean, variance as MindSpore's BatchNormGrad / BatchNormGradGrad take them (training: the batch
    variance, which they turn into invstd themselves)."""
    rm, rv, sm, si = args[3:7]
    return (sm, 1 / si.astype(np.float64) ** 2 - EPS) if training else (rm, rv)


def as_ms(arrays):
    return [ms.Tensor(np.asarray(a, np.float32)) for a in arrays]


@pytest.mark.parametrize("shape,fmt,act_axis,size,training,graph", CASES, ids=CASE_IDS)
def test_backward_per_member(shape, fmt, act_axis, size, training, graph):
    rng = np.random.default_rng(1)
    members = [member(shape, fmt, training, rng) for _ in range(size)]
    args, in_axes = batch(members, BACKWARD_NAMES, backward_axes(act_axis))
    out_axes = (act_axis, 0, 0)
    outs = run_vmap(BatchNormBackward(training, EPS, (True,) * 3, fmt), args, in_axes, out_axes, graph)
    refs = [batch_norm_backward_ref(*[m[n] for n in BACKWARD_NAMES], training=training, eps=EPS, data_format=fmt)
            for m in members]
    check_members(outs, out_axes, refs, f"BatchNormBackward {fmt} training={training}")
    if fmt == "NCHW":  # MindSpore's own BatchNormGrad under vmap (its CPU kernel is NCHW only)
        mean, var = mindspore_stats(args, training)
        theirs = ops.vmap(_fn6(G.BatchNormGrad(training, EPS, fmt)), (act_axis, act_axis, 0, 0, 0, 0), out_axes)(
            *as_ms((args[0], args[1], args[2], mean, var, var)))
        for j, (a, b) in enumerate(zip(outs, theirs)):
            b = b.asnumpy()
            assert np.abs(a - b).max() <= 1e-5 * max(np.abs(b).max(), 1.0), (j, np.abs(a - b).max())


@pytest.mark.parametrize("shape,fmt,act_axis,size,training,graph", CASES, ids=CASE_IDS)
def test_double_backward_per_member(shape, fmt, act_axis, size, training, graph):
    rng = np.random.default_rng(2)
    members = [member(shape, fmt, training, rng, with_double=True) for _ in range(size)]
    args, in_axes = batch(members, DOUBLE_NAMES, backward_axes(act_axis) + (act_axis, 0, 0))
    out_axes = (act_axis, act_axis, 0)
    outs = run_vmap(BatchNormDoubleBackward(training, EPS, (True,) * 3, fmt), args, in_axes, out_axes, graph)
    refs = [batch_norm_double_backward_ref(*[m[n] for n in DOUBLE_NAMES], training=training, eps=EPS,
                                           data_format=fmt) for m in members]
    check_members(outs, out_axes, refs, f"BatchNormDoubleBackward {fmt} training={training}")
    # MindSpore's own BatchNormGradGrad under vmap, in its test's in_axes / out_axes
    mean, var = mindspore_stats(args, training)
    dy, x, w = args[:3]
    ggx, ggw, ggb = args[7:]
    # BatchNormGradGrad(x, dy, scale, mean, variance, dout_dx, dout_dscale, dout_dbias) -> (dx, ddy, dscale)
    dx, ddy, dscale = ops.vmap(_fn8(G.BatchNormGradGrad(training, EPS, fmt)),
                               (act_axis, act_axis, 0, 0, 0, act_axis, 0, 0), out_axes)(
        *as_ms((x, dy, w, mean, var, ggx, ggw, ggb)))
    for name, a, b in (("grad_grad_out", outs[0], ddy), ("grad_input", outs[1], dx),
                       ("grad_weight", outs[2], dscale)):
        b = b.asnumpy()
        assert np.abs(a - b).max() <= 1e-4 * max(np.abs(b).max(), 1.0), (name, np.abs(a - b).max())


@pytest.mark.parametrize("fmt,training,graph", [("NCHW", True, False), ("NHWC", False, True)])
def test_forward_per_member(fmt, training, graph):
    """BatchNormForward (functional: the updated running statistics are outputs) folds the same way."""
    rng = np.random.default_rng(12)
    shape = (4, 3, 2, 5) if fmt == "NCHW" else (4, 2, 5, 3)
    act = channel_axis(len(shape), fmt)
    members = []
    for _ in range(3):
        m = member(shape, fmt, False, rng)
        m["bias"] = rng.standard_normal(shape[act]).astype(np.float32)
        members.append(m)
    names = ("input", "weight", "bias", "running_mean", "running_var")
    args, in_axes = batch(members, names, (act, 0, None, 0, 0))
    outs = run_vmap(BatchNormForward(training, 0.1, EPS, fmt), args, in_axes, (act, 0, 0, 0, 0), graph)
    refs = [batch_norm_forward_ref(*[m[n] for n in names], training=training, momentum=0.1, eps=EPS,
                                   data_format=fmt) for m in members]
    check_members(outs, (act, 0, 0, 0, 0), refs, f"BatchNormForward {fmt} training={training}")


# in_axes variants: (member shape, data_format, training, in_axes, out_axes, weight given, mask)
VARIANTS = [
    ((6, 3), "NCHW", True, (0, 0, None, 0, 0, 0, 0), (1, 0, 0), True, (True,) * 3),        # rank 2, shared weight
    ((6, 3), "NHWC", False, (-1, -1, 0, None, None, 0, 0), (-1, -1, -1), True, (True,) * 3),  # negative axes
    ((2, 3, 2, 2, 2), "NCDHW", True, (2, 2, 0, 0, 0, 0, 0), (0, 0, 1), False, (True,) * 3),    # rank 5, no weight
    ((2, 2, 2, 3, 2), "NDHWC", False, (4, 0, 0, 0, 0, 0, 0), (5, 0, 0), True, (True, False, True)),
    ((3, 4, 5), "NCHW", False, (None, 1, 0, 0, 0, 0, 0), (2, 0, 0), True, (True, True, False)),  # grad_out shared
    ((3, 4, 5), "NCHW", True, (0, None, 0, 0, None, 0, 0), (0, 0, 0), True, (False, True, True)),  # input shared
]


@pytest.mark.parametrize("shape,fmt,training,in_axes,out_axes,weight,mask,graph",
                         [(*v, i % 2 == 1) for i, v in enumerate(VARIANTS)])
def test_backward_in_axes_variants(shape, fmt, training, in_axes, out_axes, weight, mask, graph):
    rng = np.random.default_rng(3)
    members = [member(shape, fmt, training, rng, weight=weight) for _ in range(3)]
    args, in_axes = batch(members, BACKWARD_NAMES, in_axes)
    outs = run_vmap(BatchNormBackward(training, EPS, mask, fmt), args, in_axes, out_axes, graph)
    refs = [batch_norm_backward_ref(*[m[n] for n in BACKWARD_NAMES], training=training, eps=EPS,
                                    output_mask=mask, data_format=fmt) for m in members]
    check_members(outs, out_axes, refs, f"in_axes={in_axes} out_axes={out_axes}")


def test_fold_runs_one_launch_not_a_loop(monkeypatch):
    """The batch is folded into one launch: the per-member loop never runs for these inputs."""
    def no_loop(*args):
        raise AssertionError("the per-member loop ran")

    monkeypatch.setattr(bn_vmap, "_loop", no_loop)
    rng = np.random.default_rng(4)
    members = [member((4, 3, 2, 2), "NCHW", True, rng) for _ in range(5)]
    args, in_axes = batch(members, BACKWARD_NAMES, backward_axes(0))
    outs = run_vmap(BatchNormBackward(True, EPS, (True,) * 3, "NCHW"), args, in_axes, 0)
    refs = [batch_norm_backward_ref(*[m[n] for n in BACKWARD_NAMES], training=True, eps=EPS) for m in members]
    check_members(outs, 0, refs, "folded")


def test_nested_vmap_and_unmapped_call():
    """vmap of vmap folds twice; an operator call whose inputs are all unmapped runs as is."""
    rng = np.random.default_rng(11)
    outer, inner = 2, 3
    members = [[member((4, 5, 3), "NHWC", False, rng) for _ in range(inner)] for _ in range(outer)]
    names = ("grad_out", "input", "weight", "running_mean", "running_var")
    stacked = [ms.Tensor(np.stack([np.stack([m[n] for m in row]) for row in members])) for n in names]
    op = BatchNormBackward(False, EPS, (True,) * 3, "NHWC")

    def backward(dy, x, w, mean, var):
        return op(dy, x, w, mean, var, None, None)

    outs = [o.asnumpy() for o in ops.vmap(ops.vmap(backward, 0, 0), 0, 0)(*stacked)]
    for i, row in enumerate(members):
        refs = [batch_norm_backward_ref(*[m[n] for n in names], training=False, eps=EPS, data_format="NHWC")
                for m in row]
        check_members([o[i] for o in outs], 0, refs, f"nested vmap, outer member {i}")

    def scaled(s, dy, x, w, mean, var):
        gi, gw, gb = op(dy, x, w, mean, var, None, None)
        return gi * s, gw, gb

    m = members[0][0]
    scales = np.arange(1, 4, dtype=np.float32)
    gi = ops.vmap(scaled, (0,) + (None,) * 5)(ms.Tensor(scales), *[ms.Tensor(m[n]) for n in names])[0].asnumpy()
    ref = batch_norm_backward_ref(*[m[n] for n in names], training=False, eps=EPS, data_format="NHWC")[0]
    check_members([gi], 0, [(s * ref,) for s in scales], "unmapped call")


# --- the SyncBatchNorm pair ---------------------------------------------------------------------------

def sync_members(fmt, rng, size=3):
    shape = (4, 3, 2, 2) if fmt == "NCHW" else (4, 2, 2, 3)
    c = shape[channel_axis(len(shape), fmt)]
    members = []
    for _ in range(size):
        m = member(shape, fmt, True, rng)
        m.update(mean=m["save_mean"], invstd=m["save_invstd"], sum_dy=rng.standard_normal(c).astype(np.float32),
                 sum_dy_xmu=rng.standard_normal(c).astype(np.float32),
                 counter=rng.integers(2, 9, size=2).astype(np.float32))
        members.append(m)
    return members


REDUCE_NAMES = ("grad_out", "input", "mean", "invstd", "weight")
ELEMT_NAMES = REDUCE_NAMES + ("sum_dy", "sum_dy_xmu", "counter")


def test_sync_pair_folded():
    """BatchNormReduceBackward, and BatchNormElemtBackward with a counter shared by all members: folded."""
    members = sync_members("NHWC", np.random.default_rng(7))
    args, in_axes = batch(members, REDUCE_NAMES, (0,) * 5)
    outs = run_vmap(BatchNormReduceBackward(True, True, True, "NHWC"), args, in_axes, 0)
    check_members(outs, 0, [sync_reduce_ref(*[m[n] for n in REDUCE_NAMES[:4]], data_format="NHWC")
                            for m in members], "BatchNormReduceBackward")
    args, in_axes = batch(members, ELEMT_NAMES, (0,) * 7 + (None,))
    outs = run_vmap(BatchNormElemtBackward("NHWC"), args, in_axes, 0)
    check_members(outs, 0, [(sync_elemt_ref(*[m[n] for n in ELEMT_NAMES], data_format="NHWC"),) for m in members],
                  "BatchNormElemtBackward, shared counter")


def test_sync_elemt_vmapped_counter_loops():
    """A vmapped counter gives each member its own element count: one launch per member (GRAPH)."""
    members = sync_members("NCHW", np.random.default_rng(8))
    args, in_axes = batch(members, ELEMT_NAMES, (0,) * 7 + (0,))
    outs = run_vmap(BatchNormElemtBackward("NCHW"), args, in_axes, 0, graph=True)
    check_members(outs, 0, [(sync_elemt_ref(*[m[n] for n in ELEMT_NAMES]),) for m in members],
                  "BatchNormElemtBackward, vmapped counter")


def test_other_custom_ops_keep_mindspore_rules():
    """The "Custom" getter (registered when the first primitive is made) answers only for ours."""
    from mindspore.ops._vmap.vmap_base import vmap_rules_getters
    op = BatchNormBackward()
    getter = vmap_rules_getters.get("Custom", None)
    assert getter(op, 2) is not None
    plain = ops.Custom(lambda x: x, out_shape=lambda s: s, out_dtype=lambda t: t, func_type="pyfunc")
    assert getter(plain, 2) is None
    assert bn_vmap.register()  # idempotent: registering again keeps one getter
    assert vmap_rules_getters.get("Custom", None) is getter


# --- converted networks --------------------------------------------------------------------------------

# The native-route tests need MindSpore's CPU op plugin: they run in the native-route session
# (tests/ut/test_native_route_session.py).
NATIVE = pytest.mark.native_route


def _nets(train, route):
    ms.set_seed(0)
    original = nn.BatchNorm2d(3, gamma_init="normal", beta_init="normal")
    converted = nn.BatchNorm2d(3)
    copy_parameter_values(original, converted)
    convert_batchnorm(converted, route=route)
    for net in (original, converted):
        net.set_train(train)
    return original, converted


def _x(rng):
    return ms.Tensor(rng.standard_normal((3, 4, 3, 2, 2)).astype(np.float32) * 2 + 1)


def _loss(net):
    def loss(v):
        y = net(v)
        return (y * y * v).sum()
    return loss


@pytest.mark.parametrize("route", ["cell", "auto"])
@pytest.mark.parametrize("graph", GRAPH)
def test_converted_cell_route_training_raises_as_mindspore(graph, route):
    """MindSpore's BatchNorm refuses vmap in training (its scale/offset/statistics are Parameters
    that the members would share); a cell on the Cell route keeps that error, and so does one on
    the default native route (MindSpore's own ops.BatchNorm on our kernels)."""
    errors = []
    for net in _nets(True, route):
        vm = ops.vmap(net, 0)
        with pytest.raises(ValueError, match="does not support Vmap during training") as info:
            (ms.jit(vm) if graph else vm)(_x(np.random.default_rng(8)))
        errors.append(str(info.value).split("\n")[0])
    assert errors[0] == errors[1]


@NATIVE
def test_converted_native_route_training_runs_member_by_member():
    """On the native route MindSpore's BatchNormExt runs under vmap in training (its general rule loops
    over the members): outputs and input gradients are each member's own, and every member updates
    the shared running statistics once, as if run one after another (docs/vmap.md)."""
    x = _x(np.random.default_rng(9))
    _, net = _nets(True, "native")
    _, each = _nets(True, "native")
    y = ops.vmap(net, 0)(x).asnumpy()
    grads = ops.vmap(ops.grad(_loss(net)), 0)(x).asnumpy()
    members = x.asnumpy()
    # each member as its own (contiguous) tensor: see the report on views of a tensor
    ys = np.stack([each(ms.Tensor(xb)).asnumpy() for xb in members])
    for xb in members:
        ops.grad(_loss(each))(ms.Tensor(xb))
    assert np.abs(y - ys).max() <= 1e-6 * np.abs(ys).max()
    w, b = (p.asnumpy().astype(np.float64).reshape(1, -1, 1, 1) for p in (net.gamma, net.beta))
    refs = []
    for xm in members.astype(np.float64):
        mean, var = xm.mean(axis=(0, 2, 3)), xm.var(axis=(0, 2, 3))
        s = 1 / np.sqrt(var + EPS)
        yv = (xm - mean.reshape(1, -1, 1, 1)) * s.reshape(1, -1, 1, 1) * w + b
        refs.append((batch_norm_backward_ref(2 * yv * xm, xm, w.ravel(), None, None, mean, s, training=True,
                                             eps=EPS)[0] + yv * yv,))
    check_members([grads], 0, refs, "native route training gradient")
    # 2 vmapped calls, 3 members each, 6 updates from the initial statistics, vs 6 sequential ones
    x64, m = x.asnumpy().astype(np.float64), net.momentum
    mean, var = x64.mean(axis=(1, 3, 4)), x64.var(axis=(1, 3, 4), ddof=1)
    rm0, rv0 = np.zeros(3), np.ones(3)  # nn.BatchNorm2d's initial moving statistics

    def updated(order):
        rm, rv = rm0.copy(), rv0.copy()
        for b in order:
            rm, rv = (1 - m) * rm + m * mean[b], (1 - m) * rv + m * var[b]
        return rm, rv

    orders = [tuple(p) + tuple(q) for p in itertools.permutations(range(3)) for q in itertools.permutations(range(3))]
    got = (net.moving_mean.asnumpy(), net.moving_variance.asnumpy())
    assert any(np.allclose(got[0], rm, rtol=1e-5, atol=1e-6) and np.allclose(got[1], rv, rtol=1e-5, atol=1e-6)
               for rm, rv in map(updated, orders)), got
    want = updated((0, 1, 2, 0, 1, 2))
    np.testing.assert_allclose(each.moving_mean.asnumpy(), want[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("route,graph", [("cell", True), ("auto", False), ("auto", True),
                                         pytest.param("native", False, marks=NATIVE),
                                         pytest.param("native", True, marks=NATIVE)])
def test_converted_inference_forward_as_mindspore(route, graph):
    """route "auto": by default the native route on MindSpore's own ops.BatchNorm (our kernels); the
    original runs on MindSpore's own kernels."""
    x = _x(np.random.default_rng(10))
    outs = []
    for net in _nets(False, route):
        vm = ops.vmap(net, 0)
        with builtin_kernels(net):
            outs.append((ms.jit(vm) if graph else vm)(x).asnumpy())
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-6, atol=1e-6 * np.abs(outs[0]).max())


@pytest.fixture
def graph_mode():
    ms.set_context(mode=ms.GRAPH_MODE)
    yield
    ms.set_context(mode=ms.PYNATIVE_MODE)


def _inference_gradient_refs(net, x):
    w, b, rm, rv = (p.asnumpy().astype(np.float64) for p in (net.gamma, net.beta, net.moving_mean,
                                                             net.moving_variance))
    refs = []
    for xm in x.asnumpy().astype(np.float64):
        y = (xm - rm.reshape(1, -1, 1, 1)) * (w / np.sqrt(rv + EPS)).reshape(1, -1, 1, 1) + b.reshape(1, -1, 1, 1)
        gx = batch_norm_backward_ref(2 * y * xm, xm, w, rm, rv, training=False, eps=EPS)[0]
        refs.append((gx + y * y,))  # d/dx of sum(y * y * x)
    return refs


def test_converted_cell_route_inference_gradients_graph(monkeypatch, graph_mode):
    """Per-member input gradients under vmap on the Cell route in GRAPH mode: BatchNormBackward, folded,
    equal to MindSpore's and to the float64 reference (not in PYNATIVE: docs/vmap.md)."""
    from mindspore_bn_grad.nn import _cells
    handed_out = record_backward_ops(monkeypatch, _cells)
    x = _x(np.random.default_rng(11))
    nets = _nets(False, "cell")
    grads = [ops.vmap(ops.grad(_loss(net)), 0)(x).asnumpy() for net in nets]
    assert handed_out and all(isinstance(op, BatchNormBackward) for op in handed_out)
    for g in grads:
        check_members([g], 0, _inference_gradient_refs(nets[1], x), "Cell route inference gradient")


@pytest.mark.parametrize("graph", GRAPH)
def test_converted_default_route_inference_gradients(graph):
    """Per-member input gradients under vmap on the default native route (MindSpore's own BatchNorm /
    BatchNormGrad on our kernels) and on MindSpore's own kernels: each equal to the float64 reference."""
    x = _x(np.random.default_rng(13))
    nets = _nets(False, "auto")
    assert nets[1].bn_native == "legacy"
    for net in nets:
        with builtin_kernels(net):
            fn = ops.vmap(ops.grad(_loss(net)), 0)
            g = (ms.jit(fn) if graph else fn)(x).asnumpy()
        check_members([g], 0, _inference_gradient_refs(nets[1], x), "default route inference gradient")


@NATIVE
def test_converted_native_route_inference_gradients_pynative():
    x = _x(np.random.default_rng(12))
    nets = _nets(False, "native")
    grads = [ops.vmap(ops.grad(_loss(net)), 0)(x).asnumpy() for net in nets]
    for g in grads:
        check_members([g], 0, _inference_gradient_refs(nets[1], x), "native route inference gradient")
