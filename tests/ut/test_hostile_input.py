"""Hostile calls of the compiled kernel: inconsistent shapes, ranks, dtypes
and null pointers through the direct C entry (MsBnGradDirect, used without
MindSpore). Each returns an error code and leaves every output buffer
untouched (no out-of-bounds access: scripts/run_sanitizers.sh runs this under
ASan). The Python-level rejections (before any kernel runs) are in
test_op_errors.py.
"""
import ctypes

import numpy as np
import pytest

X_SHAPE = (2, 3, 4)


# --------------------------------------------------------- the direct C entry

def _lib():
    from mindspore_bn_grad.cpu_kernel import native
    return native.lib()


class Call:
    """A raw MsBnGradDirect call whose shapes, ranks, dtypes and pointers can lie."""
    SENTINEL = 12345.0

    def __init__(self, shape=(2, 3, 4), c=None, dtype="float32"):
        c = shape[1] if c is None else c
        np_dt = {"float32": np.float32, "float64": np.float64, "float16": np.float16}[dtype]
        size = max(1, int(np.prod(shape)))
        rng = np.random.default_rng(0)
        self.bufs = [rng.standard_normal(size).astype(np_dt), rng.standard_normal(size).astype(np_dt)]
        self.bufs += [np.ones(max(c, 1), np_dt) for _ in range(5)]
        self.bufs += [np.full(size, self.SENTINEL, np_dt), np.full(max(c, 1), self.SENTINEL, np_dt),
                      np.full(max(c, 1), self.SENTINEL, np_dt)]
        self.ptrs = [b.ctypes.data for b in self.bufs]
        self.shapes = [list(shape), list(shape)] + [[c]] * 5 + [list(shape), [c], [c]]
        self.dtypes = [dtype] * 10
        self.nparam = 10
        self.training = 1
        self.mask = (1, 1, 1)
        self.channel_last = 0

    def run(self):
        n = len(self.shapes)
        params = (ctypes.c_void_p * n)(*self.ptrs)
        ndims = (ctypes.c_int * n)(*[len(s) for s in self.shapes])
        bufs = [(ctypes.c_int64 * max(1, len(s)))(*s) for s in self.shapes]
        shapes = (ctypes.POINTER(ctypes.c_int64) * n)(*[ctypes.cast(b, ctypes.POINTER(ctypes.c_int64)) for b in bufs])
        dtypes = (ctypes.c_char_p * n)(*[d.encode() if d is not None else None for d in self.dtypes])
        return _lib().MsBnGradDirect(self.nparam, params, ndims, shapes, dtypes, self.training, 1e-5,
                                     *self.mask, self.channel_last)

    def outputs_untouched(self):
        return all(np.all(b == self.SENTINEL) for b in self.bufs[7:])


def _set(**kw):
    def f(call):
        for k, v in kw.items():
            if k.startswith("shape_"):
                call.shapes[int(k[6:])] = v
            elif k.startswith("dtype_"):
                call.dtypes[int(k[6:])] = v
            elif k.startswith("null_"):
                call.ptrs[int(k[5:])] = None
            else:
                setattr(call, k, v)
    return f


BIG = 2 ** 40
# (id, mutation, expected error code) -- codes from native.ERRORS
DIRECT_BAD = [
    ("nparam_9", _set(nparam=9), 1),
    ("rank1", _set(shape_0=[24], shape_1=[24], shape_7=[24]), 3),
    ("rank9", _set(shape_0=[2, 3, 4] + [1] * 6, shape_1=[2, 3, 4] + [1] * 6, shape_7=[2, 3, 4] + [1] * 6), 3),
    ("input_shape_differs", _set(shape_1=[2, 3, 5]), 4),
    ("input_bigger_than_buffer", _set(shape_0=[2, 3, 5], shape_7=[2, 3, 5]), 4),
    ("grad_input_shape_differs", _set(shape_7=[2, 3, 3]), 4),
    ("grad_input_rank_differs", _set(shape_7=[2, 3, 4, 1]), 4),
    ("weight_length", _set(shape_2=[4]), 4),
    ("weight_2d", _set(shape_2=[3, 1]), 3),
    ("save_invstd_length", _set(shape_6=[2]), 4),
    ("running_var_length", _set(shape_4=[5]), 4),
    ("grad_weight_length", _set(shape_8=[2]), 4),
    ("grad_bias_length", _set(shape_9=[4]), 4),
    ("grad_bias_rank0", _set(shape_9=[]), 4),
    ("negative_dim", _set(shape_0=[2, -3, 4], shape_1=[2, -3, 4], shape_7=[2, -3, 4]), 6),
    ("numel_overflow", _set(shape_0=[BIG, 3, BIG], shape_1=[BIG, 3, BIG], shape_7=[BIG, 3, BIG]), 6),
    ("dtype_int32", _set(dtype_0="int32", dtype_1="int32", dtype_7="int32"), 2),
    ("dtype_input_differs", _set(dtype_1="float16"), 2),
    ("dtype_grad_input_differs", _set(dtype_7="float64"), 2),
    ("dtype_weight_bool", _set(dtype_2="bool"), 2),
    ("dtype_grad_weight_none", _set(dtype_8="none"), 2),
    ("dtype_grad_weight_vs_bias", _set(dtype_9="float64"), 2),
    ("null_grad_out", _set(null_0=True), 5),
    ("null_grad_input", _set(null_7=True), 5),
    ("null_grad_weight", _set(null_8=True), 5),
    ("training_without_save_mean", _set(null_5=True, shape_5=[], dtype_5="none"), 5),
    ("training_empty_save_invstd", _set(shape_6=[0]), 4),
]


@pytest.mark.parametrize("mutate,code", [c[1:] for c in DIRECT_BAD], ids=[c[0] for c in DIRECT_BAD])
def test_direct_entry_inconsistent_shapes(mutate, code):
    call = Call()
    mutate(call)
    assert call.run() == code
    assert call.outputs_untouched(), "an output was written on a rejected call"
    # and a consistent call still works afterwards
    good = Call()
    assert good.run() == 0 and not good.outputs_untouched()


def test_direct_entry_null_arrays():
    """Null ndims / shapes / dtypes / params: an error code, no dereference."""
    lib = _lib()
    assert lib.MsBnGradDirect(10, None, None, None, None, 1, 1e-5, 1, 1, 1, 0) != 0


def test_direct_python_wrapper_rejects_bad_arrays():
    from mindspore_bn_grad.cpu_kernel import native
    x = np.ones(X_SHAPE, np.float32)
    with pytest.raises(TypeError, match="BatchNormBackward: direct call expected float16/float32/float64"):
        native.direct(x.astype(np.int32), x.astype(np.int32), None, None, None, np.zeros(3, np.float32),
                       np.ones(3, np.float32))
    with pytest.raises(RuntimeError, match=r"kernel returned 4 \(shapes do not fit together\)"):
        native.direct(x, x, np.ones(4, np.float32), None, None, np.zeros(3, np.float32), np.ones(3, np.float32))
    with pytest.raises(RuntimeError, match=r"kernel returned 4"):
        native.direct(x, x[:, :, :3], None, None, None, np.zeros(3, np.float32), np.ones(3, np.float32))
