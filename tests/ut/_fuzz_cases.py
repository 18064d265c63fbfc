"""Random BatchNormBackward cases for the property tests (test_fuzz.py).

A case is drawn by hypothesis as a small description (shape, layout,
dtypes, which arguments are given, attributes, value regime, seed); the
arrays are then made by NumPy from the seed, which keeps generation cheap
and every case reproducible from its printed description.

`run_direct_case` runs the compiled kernel through `cpu_kernel.native.direct` (no
MindSpore); `run_pynative_case` goes through the public function. Both
compare against the float64 reference (tests/reference.py) with the
per-dtype, per-output tolerances of `_harness.assert_close`.
"""
import math
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from _harness import NAMES, OUTPUTS, assert_close, direct_outputs, quantize
from reference import CHANNEL_LAST, batch_norm_backward_ref

PARAMS = NAMES[2:]
DTYPES = ("float16", "bfloat16", "float32", "float64")
# Dims that hit edges: 0 and 1, vector widths and their neighbours, primes.
SMALL_DIMS = (0, 1, 1, 2, 3, 5, 7, 8, 9, 13, 16, 17, 31, 32, 33, 61)
PRIMES = (2, 3, 5, 7, 11, 13, 17, 31, 61, 127, 257, 509, 1021, 2039, 4093)


@dataclass
class Case:
    shape: tuple
    data_format: str
    act: str                      # grad_out / input / grad_input dtype
    param_dtypes: dict            # per-channel argument -> dtype (given ones only)
    given: dict                   # per-channel argument -> "none" | "full" | "empty"
    training: bool
    eps: float
    output_mask: tuple
    regime: str
    seed: int
    arrays: dict = field(default_factory=dict, repr=False)

    @property
    def channel_axis(self):
        return len(self.shape) - 1 if self.data_format in CHANNEL_LAST else 1

    @property
    def channels(self):
        return self.shape[self.channel_axis]

    def attrs(self):
        return dict(training=self.training, eps=self.eps, output_mask=self.output_mask,
                    data_format=self.data_format)

    def dtypes(self):
        return {"grad_out": self.act, "input": self.act, **self.param_dtypes}

    def out_dtypes(self):
        p = self.param_dtypes["weight"] if self.given["weight"] != "none" else self.act
        return self.act, p, p


def _bounded(shape, limit):
    """Shrinks the largest dims until prod(shape) <= limit (keeps zeros and the rank)."""
    shape = list(shape)
    while math.prod(shape) > limit:
        i = max(range(len(shape)), key=lambda k: shape[k])
        shape[i] = max(1, shape[i] // 2)
    return tuple(shape)


@st.composite
def shapes(draw, max_elems):
    rank = draw(st.integers(2, 8))
    kind = draw(st.sampled_from(["mixed", "mixed", "primes", "wide_c", "long_spatial", "empty"]))
    dim = st.sampled_from(SMALL_DIMS[1:])
    dims = [draw(dim) for _ in range(rank)]
    if kind == "primes":
        dims = [draw(st.sampled_from(PRIMES[:9])) for _ in range(rank)]
    layout = draw(st.sampled_from(["first", "last"]))
    c_axis = rank - 1 if layout == "last" else 1
    if kind == "wide_c":  # many channels, tiny spatial
        dims = [draw(st.sampled_from((1, 1, 2, 3))) for _ in range(rank)]
        dims[c_axis] = draw(st.sampled_from((257, 509, 1021, 2039, 4093, 1000, 3000)))
    elif kind == "long_spatial":  # one or two channels, a long reduction
        dims = [1] * rank
        dims[c_axis] = draw(st.sampled_from((1, 2, 3)))
        spatial = [i for i in range(rank) if i != c_axis]
        big = draw(st.sampled_from(spatial))
        dims[big] = draw(st.sampled_from((4093, 8191, 10007, 16384, 16411)))
        other = draw(st.sampled_from(spatial))
        if other != big:
            dims[other] = draw(st.sampled_from((1, 2, 3)))
    elif kind == "empty":
        zero_at = draw(st.sampled_from([i for i in range(rank) if i != c_axis] +
                                       ([c_axis] if draw(st.booleans()) else [])))
        dims[zero_at] = 0
    dims = _bounded(dims, max_elems)
    if rank == 5:
        fmt = draw(st.sampled_from(["NCDHW", "NCHW"] if layout == "first" else ["NDHWC", "NHWC"]))
    else:
        fmt = "NCHW" if layout == "first" else "NHWC"
    return tuple(dims), fmt


@st.composite
def cases(draw, max_elems=20000, act_dtypes=DTYPES, param_dtypes=DTYPES):
    shape, fmt = draw(shapes(max_elems))
    act = draw(st.sampled_from(act_dtypes))
    mixed = draw(st.booleans())
    pdt = {p: (draw(st.sampled_from(param_dtypes)) if mixed else act) for p in PARAMS}
    training = draw(st.booleans())
    given = {"weight": draw(st.sampled_from(["none", "full", "full"]))}
    if training:
        given.update(running_mean=draw(st.sampled_from(["none", "full"])),
                     running_var=draw(st.sampled_from(["none", "full"])),
                     save_mean="full", save_invstd="full")
    else:
        given.update(running_mean=draw(st.sampled_from(["none", "full", "full"])),
                     running_var=draw(st.sampled_from(["none", "full", "full"])))
        saved = draw(st.sampled_from(["none", "full", "empty"]))
        given.update(save_mean=saved, save_invstd=saved)
    return Case(
        shape=shape, data_format=fmt, act=act,
        param_dtypes={p: pdt[p] for p in PARAMS if given[p] != "none"}, given=given,
        training=training,
        eps=draw(st.sampled_from([0.0, 1e-5, 1e-3, 0.1, 1.0])),
        output_mask=tuple(draw(st.booleans()) for _ in range(3)),
        regime=draw(st.sampled_from(["normal", "normal", "offset", "small_var", "sparse_dy"])),
        seed=draw(st.integers(0, 2 ** 32 - 1)),
    )


def make_case_arrays(case):
    """float64 arrays for the case (before quantisation to the case's dtypes)."""
    rng = np.random.default_rng(case.seed)
    shape, axis, c = case.shape, case.channel_axis, case.channels
    bshape = [1] * len(shape)
    bshape[axis] = c
    centre = rng.standard_normal(c) * (20.0 if case.regime == "offset" else 0.5)
    spread = rng.uniform(0.01, 0.1, c) if case.regime == "small_var" else rng.uniform(0.5, 2.0, c)
    x = rng.standard_normal(shape) * spread.reshape(bshape) + centre.reshape(bshape)
    dy = rng.standard_normal(shape)
    if case.regime == "sparse_dy":
        dy *= rng.random(shape) < 0.1
    axes = tuple(i for i in range(len(shape)) if i != axis)
    n = x.size // c if c else 0
    if n:
        mean, var = x.mean(axis=axes), x.var(axis=axes)
    else:
        mean, var = rng.standard_normal(c), rng.uniform(0.5, 2.0, c)
    full = {
        "weight": rng.uniform(0.5, 1.5, c) * rng.choice([-1.0, 1.0], c),
        # the statistics in use are close to the data's own (what a network has)
        "running_mean": mean + rng.standard_normal(c) * 0.05 * np.sqrt(var),
        "running_var": var * rng.uniform(0.8, 1.25, c) + 1e-3,
        "save_mean": mean,
        "save_invstd": 1.0 / np.sqrt(var + 1e-5),
    }
    arrays = {"grad_out": dy, "input": x}
    for p in PARAMS:
        g = case.given[p]
        arrays[p] = None if g == "none" else (np.zeros(0) if g == "empty" else full[p])
    return arrays


# ------------------------------------------------------------------ runners

def compare(case, got, q, odt):
    attrs = case.attrs()
    want = batch_norm_backward_ref(*(q[n] for n in NAMES), **attrs)
    for name, g, w, dt in zip(OUTPUTS, got, want, odt):
        assert g.shape == w.shape, (name, g.shape, w.shape)
        assert_close(name, g, w, dt, case.act, q, attrs)
    for name, g, keep in zip(OUTPUTS, got, case.output_mask):
        if not keep:
            assert not np.any(g), f"{name} is masked and must be zero-filled"


def run_direct_case(case):
    arrays = make_case_arrays(case)
    got, q, odt, _ = direct_outputs(arrays, case.dtypes(), case.attrs())
    assert odt == case.out_dtypes()
    compare(case, got, q, odt)


def run_pynative_case(case, mode="pynative"):
    """Through batch_norm_backward (PYNATIVE), or the primitive in a compiled Cell (mode="graph"):
    dtypes, shapes and values of all three outputs."""
    import mindspore as ms
    from _harness import run
    arrays = make_case_arrays(case)
    dtypes = case.dtypes()
    outs = run(mode, arrays, dtypes, **case.attrs())
    q = {n: quantize(arrays.get(n), dtypes.get(n, case.act)) for n in NAMES}
    got = []
    for o, dt in zip(outs, case.out_dtypes()):
        assert str(o.dtype).lower().replace("mindspore.", "") == dt, (o.dtype, dt)
        got.append(o.astype(ms.float64).asnumpy())
    compare(case, got, q, case.out_dtypes())
