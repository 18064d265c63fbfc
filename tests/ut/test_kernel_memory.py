"""What the CPU kernel keeps after a call, and huge channel counts.

The kernel reuses a per-thread scratch buffer between calls; a huge call must
not leave a huge buffer behind. A huge channel count with few rows must not
build per-channel arrays the size of the tensor either (it takes the fused
column walk). Each case runs in a fresh process so its memory is its own.
"""
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_PRELUDE = """
import numpy as np
from mindspore_bn_grad.cpu_kernel import native

def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20

def arrays(shape, dtype):
    rng = np.random.default_rng(0)
    C = shape[1]
    dy = rng.standard_normal(shape).astype(dtype)
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(C)
    m = rng.standard_normal(C)
    s = rng.random(C) + 0.5
    out = (np.ones_like(dy), np.ones(C), np.ones(C))  # touched: their pages count before the call
    return dy, x, w, m, s, out
"""


def _run(body):
    code = textwrap.dedent(_PRELUDE) + textwrap.dedent(body)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                       cwd=ROOT, env={**os.environ, "MS_BN_GRAD_NUM_THREADS": "2"})
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_a_huge_call_leaves_no_huge_scratch():
    # (1024, 2**17): rows come in 8 chunks, so the column walk keeps 8 partial sums per
    # column (about 17 MB of doubles) for the duration of the call.
    out = _run("""
        dy, x, w, m, s, out = arrays((1024, 2**17), np.float16)
        native.direct(dy[:2, :8], x[:2, :8], w[:8], None, None, m[:8], s[:8])  # library loaded
        before = rss_mb()
        native.direct(dy, x, w, None, None, m, s, out=out)
        print("kept MB", rss_mb() - before)
        # the call computed something real (one channel, in float64)
        c = 5
        xh = (x[:, c].astype(np.float64) - m[c]) * s[c]
        assert np.isclose(out[2][c], dy[:, c].astype(np.float64).sum(), rtol=1e-4, atol=1e-3)
        assert np.isclose(out[1][c], (dy[:, c].astype(np.float64) * xh).sum(), rtol=1e-4, atol=1e-3)
    """)
    kept = float(out.split("kept MB")[1])
    assert kept < 6.0, out


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_huge_channel_count_with_one_row(dtype):
    # C = 2**22, N = 1: per-channel work dominates; no per-call array grows with C.
    out = _run(f"""
        shape = (1, 2**22)
        dy, x, w, m, s, out = arrays(shape, np.{dtype})
        native.direct(dy[:, :8], x[:, :8], w[:8], None, None, m[:8], s[:8])
        before = rss_mb()
        native.direct(dy, x, w, None, None, m, s, out=out)
        print("kept MB", rss_mb() - before)
        # N = 1, in float64: the formulas of the contract (float32 arithmetic inside:
        # x - mean is rounded, hence the absolute tolerances)
        d64, x64 = dy.astype(np.float64)[0], x.astype(np.float64)[0]
        xh = (x64 - m) * s
        gw, gb = d64 * xh, d64
        gi = w * s * (d64 - gb - xh * gw)
        tol = 2e-2 if np.dtype(np.{dtype}) == np.float16 else 2e-5
        assert np.allclose(out[2], gb, rtol=1e-6, atol=1e-7)
        assert np.allclose(out[1], gw, rtol=1e-5, atol=2e-5)
        assert np.allclose(out[0].astype(np.float64)[0], gi, rtol=tol, atol=tol)
    """)
    kept = float(out.split("kept MB")[1])
    assert kept < 6.0, out


_PER_SHAPE = """
import gc, sys
import numpy as np
import mindspore as ms
from mindspore import ops
import mindspore_bn_grad as mbg
from mindspore_bn_grad.cpu_kernel import native
ms.set_context(mode=ms.PYNATIVE_MODE)
variant = sys.argv[1]

def rss_kb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4

if variant == "trivial":  # a plain aot op of the same signature, through the same kernel
    native.lib()
    triv = ops.Custom(native.aot_func(), out_shape=lambda *s: (s[0], [s[0][1]], [s[0][1]]),
                      out_dtype=lambda *t: (t[0], t[0], t[0]), func_type="aot")
    for name, value in (("training", True), ("eps", 1e-5), ("output_mask", [1, 1, 1]), ("layout", "NCHW")):
        triv.add_prim_attr(name, value)

def call(n):
    x = ms.Tensor(np.ones((n, 3), np.float32))
    w = ms.Tensor(np.ones(3, np.float32))
    if variant == "trivial":
        return triv(x, x, w, None, None, w, w)
    return mbg.batch_norm_backward(x, x, w, None, None, w, w)

for n in range(1, 40):
    call(n)[0].asnumpy()
gc.collect()
base = rss_kb()
for n in range(40, 340):
    out = call(n)
out[0].asnumpy()
gc.collect()
print("per shape KB", (rss_kb() - base) / 300)
"""


def test_each_new_shape_costs_no_more_than_a_plain_aot_op():
    """PYNATIVE keeps per-shape state for every aot Custom op inside MindSpore (about 90 KB
    for 7 inputs and 3 outputs on MindSpore 2.10, not freed with the primitive); ours adds
    nothing to it (no per-shape cache of our own grows without bound)."""
    per_shape = {}
    for variant in ("trivial", "ours"):
        r = subprocess.run([sys.executable, "-c", _PER_SHAPE, variant], capture_output=True, text=True,
                           timeout=600, cwd=ROOT)
        assert r.returncode == 0, r.stderr[-3000:]
        per_shape[variant] = float(r.stdout.split("per shape KB")[1])
    assert per_shape["ours"] <= per_shape["trivial"] * 1.1 + 4.0, per_shape
