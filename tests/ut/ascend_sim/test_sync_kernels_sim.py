"""BatchNormReduceBackward / BatchNormElemtBackward Ascend C kernels
(ascend_impl/op_kernel/batch_norm_{reduce,elemt}_backward.cpp) through the CPU
build of the Ascend C API, against the float64 references of the two steps
(sync_reduce_ref / sync_elemt_ref in tests/reference.py).
"""
import ctypes
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

import simlib
from _harness import assert_close_to_scale
from reference import sync_elemt_ref, sync_reduce_ref

pytestmark = pytest.mark.ascend_sim

LAUNCH = Path(__file__).resolve().parent / "sim_sync_launch.cpp"
COUNTER = {"float32": (0, np.float32), "int32": (1, np.int32), "int64": (2, np.int64)}


@pytest.fixture(scope="module")
def lib():
    flags = simlib.CXXFLAGS
    digest = hashlib.sha256(" ".join(flags).encode())
    for f in [LAUNCH] + simlib._sources():
        digest.update(f.read_bytes())
    out = Path(tempfile.gettempdir()) / "bnb_ascend_sim" / f"libbnbsync.{digest.hexdigest()[:16]}.so"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run(["g++", *flags, *(f"-I{p}" for p in simlib.INCLUDES), "-shared", str(LAUNCH), "-o", str(tmp)],
                       check=True, capture_output=True, text=True)
        os.replace(tmp, out)
    return ctypes.CDLL(str(out))


def _ptr(a):
    return ctypes.c_void_p(None if a is None else a.ctypes.data)


def _call(lib, mode, dy, x, mean, invstd, weight, dtype, channel_last, soc, cores, ub_bytes=0, mask=7,
          stats_f32=False, weight_f32=False, grad_f32=False, sums=None, counter=None, counter_dtype="int32"):
    shape = dy.shape
    c = shape[-1] if channel_last else shape[1]
    sdt = "float32" if stats_f32 else dtype
    wdt = "float32" if weight_f32 else dtype
    gdt = "float32" if grad_f32 else dtype
    d_dy, d_x = simlib.to_device(dy, dtype), simlib.to_device(x, dtype)
    d_mean, d_inv = simlib.to_device(mean, sdt), simlib.to_device(invstd, sdt)
    d_w = None if weight is None else simlib.to_device(weight, wdt)
    info, err = (ctypes.c_int64 * 6)(), ctypes.create_string_buffer(2048)
    shp = (ctypes.c_int64 * len(shape))(*shape)
    if mode == 1:
        s0, s1 = simlib._garbage((c,), sdt), simlib._garbage((c,), sdt)
        gw, gb, gi, cnt = simlib._garbage((c,), gdt), simlib._garbage((c,), gdt), None, None
    else:
        s0, s1 = simlib.to_device(sums[0], sdt), simlib.to_device(sums[1], sdt)
        gw = gb = None
        gi = simlib._garbage(shape, dtype)
        cnt = np.ascontiguousarray(counter, dtype=COUNTER[counter_dtype][1])
    rc = lib.bnb_sim_sync_run(
        soc.encode(), ctypes.c_uint32(ub_bytes), ctypes.c_uint32(cores), shp, len(shape), int(channel_last),
        simlib.DTYPES[dtype], mode, mask, _ptr(d_dy), _ptr(d_x), _ptr(d_mean), _ptr(d_inv), _ptr(d_w),
        ctypes.c_uint32(int(weight_f32) | int(stats_f32) << 1), int(grad_f32), _ptr(s0), _ptr(s1), _ptr(cnt),
        ctypes.c_int64(0 if cnt is None else cnt.size), COUNTER[counter_dtype][0], _ptr(gi), _ptr(gw), _ptr(gb),
        info, err, len(err))
    if rc != 0:
        raise simlib.SimError(err.value.decode())
    if mode == 1:
        return [simlib.from_device(a, d) for a, d in ((s0, sdt), (s1, sdt), (gw, gdt), (gb, gdt))], list(info)
    return simlib.from_device(gi, dtype), list(info)


def _fmt(channel_last):
    return "NHWC" if channel_last else "NCHW"


def _axes(shape, channel_last):
    cax = len(shape) - 1 if channel_last else 1
    return tuple(i for i in range(len(shape)) if i != cax), cax


def _inputs(shape, channel_last, dtype, seed, affine=True):
    rng = np.random.default_rng(seed)
    axes, cax = _axes(shape, channel_last)
    c = shape[cax]
    x = simlib.quantize(rng.normal(0.5, 2.0, shape), dtype)
    dy = simlib.quantize(rng.normal(0.0, 1.0, shape), dtype)
    mean = x.mean(axis=axes) + rng.normal(0, 0.05, c)
    invstd = 1.0 / np.sqrt(x.var(axis=axes) + 1e-5)
    weight = rng.uniform(0.5, 1.5, c) if affine else None
    return dy, x, mean, invstd, weight, axes, cax


CASES = [  # shape, channel_last, soc, cores, ub_bytes
    ((2, 5, 7, 3), False, "ascend910b", 0, 0),        # channel-first, ragged rows (pad)
    ((4, 70, 9), False, "ascend910b", 7, 0),          # two parameter groups, multi-core
    ((6, 3, 41), False, "ascend910", 0, 0),           # no DataCopyPad / SyncAll: backtracked tails
    ((4, 44, 9), False, "ascend310p", 4, 0),          # no DataCopyPad: float32 groups of 8 channels
    ((33, 3, 16), False, "ascend910b", 5, 8192),       # several row blocks per channel, cross-core
    ((5, 4, 3, 19), True, "ascend910b", 0, 0),        # channel-last, unaligned C
    ((50, 24), True, "ascend910", 3, 0),              # rank 2, no pad
    ((70, 2, 37), True, "ascend910b", 6, 8192),       # channel-last, several row blocks
    ((3, 2), True, "ascend910", 0, 0),                # smaller than one block (flat / scalar writes)
]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape,channel_last,soc,cores,ub", CASES)
def test_reduce_matches_reference(lib, shape, channel_last, soc, cores, ub, dtype):
    dy, x, mean, invstd, weight, axes, cax = _inputs(shape, channel_last, dtype, hash(shape) % 1000)
    stats_f32 = dtype != "float32"
    (sdy, sdyx, gw, gb), info = _call(lib, 1, dy, x, mean, invstd, weight, dtype, channel_last, soc, cores, ub,
                                      stats_f32=stats_f32)
    mean_k = simlib.quantize(mean, "float32" if stats_f32 else dtype)
    inv_k = simlib.quantize(invstd, "float32" if stats_f32 else dtype)
    ref_sdy, ref_sdyx, ref_gw, ref_gb = sync_reduce_ref(dy, x, mean_k, inv_k, _fmt(channel_last))
    tol_sum = 2e-5 if stats_f32 or dtype == "float32" else 2e-3
    assert_close_to_scale("sum_dy", sdy, ref_sdy, tol_sum)
    assert_close_to_scale("sum_dy_xmu", sdyx, ref_sdyx, tol_sum)
    tol_g = 2e-5 if dtype == "float32" else 2e-3
    assert_close_to_scale("grad_weight", gw, ref_gw, tol_g)
    assert_close_to_scale("grad_bias", gb, ref_gb, tol_g)


@pytest.mark.parametrize("counter_dtype", ["int32", "float32"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape,channel_last,soc,cores,ub", CASES)
def test_elemt_matches_reference(lib, shape, channel_last, soc, cores, ub, dtype, counter_dtype):
    dy, x, mean, invstd, weight, axes, cax = _inputs(shape, channel_last, dtype, hash(shape) % 997 + 1)
    n_local = int(np.prod(shape)) // shape[cax]
    rng = np.random.default_rng(3)
    # Group-wide sums of this rank and two more (uneven counts, one empty rank).
    counter = [n_local, 2 * n_local + 1, 0]
    n = sum(counter)
    own_sdy, own_sdyx, _, _ = sync_reduce_ref(dy, x, mean, invstd, _fmt(channel_last))
    sdy = own_sdy * 3.0 + rng.normal(0, 1, shape[cax])
    sdyx = own_sdyx * 3.0 + rng.normal(0, 1, shape[cax])
    gi, info = _call(lib, 2, dy, x, mean, invstd, weight, dtype, channel_last, soc, cores, ub, stats_f32=True,
                     sums=(sdy, sdyx), counter=counter, counter_dtype=counter_dtype)
    q = lambda v: simlib.quantize(v, "float32")  # noqa: E731
    ref = sync_elemt_ref(dy, x, q(mean), q(invstd), q(weight), q(sdy), q(sdyx), counter, _fmt(channel_last))
    assert_close_to_scale("grad_input", gi, ref, 2e-5 if dtype == "float32" else 2e-3)


def test_reduce_masks_zero_fill_and_weight_optional(lib):
    shape = (3, 6, 10)
    dy, x, mean, invstd, _, axes, cax = _inputs(shape, False, "float32", 7, affine=False)
    (sdy, sdyx, gw, gb), _ = _call(lib, 1, dy, x, mean, invstd, None, "float32", False, "ascend910b", 4, mask=0b100)
    assert not sdy.any() and not sdyx.any() and not gw.any()
    assert_close_to_scale("grad_bias", gb, sync_reduce_ref(dy, x, mean, invstd)[3], 2e-5)


def test_elemt_without_weight_and_int64_counter(lib):
    shape = (4, 3, 5, 5)
    dy, x, mean, invstd, _, axes, cax = _inputs(shape, True, "float32", 11, affine=False)
    sdy, sdyx, _, _ = sync_reduce_ref(dy, x, mean, invstd, "NHWC")
    n = int(np.prod(shape)) // shape[cax]
    gi, _ = _call(lib, 2, dy, x, mean, invstd, None, "float32", True, "ascend910b", 0, sums=(sdy, sdyx),
                  counter=[n], counter_dtype="int64")
    want = sync_elemt_ref(dy, x, mean, invstd, None, sdy, sdyx, [n], "NHWC")
    assert_close_to_scale("grad_input", gi, want, 2e-5)


def test_reduce_is_deterministic_across_core_counts(lib):
    shape = (33, 5, 40)
    dy, x, mean, invstd, weight, _, _ = _inputs(shape, False, "float16", 5)
    outs = [_call(lib, 1, dy, x, mean, invstd, weight, "float16", False, "ascend910b", cores, 8192,
                  stats_f32=True)[0] for cores in (1, 3, 8)]
    for o in outs[1:]:
        for a, b in zip(outs[0], o):
            np.testing.assert_array_equal(a, b)


def test_sync_kernels_use_several_cores_and_units(lib):
    dy, x, mean, invstd, weight, _, _ = _inputs((33, 3, 16), False, "float32", 1)
    _, info = _call(lib, 1, dy, x, mean, invstd, weight, "float32", False, "ascend910b", 5, 8192)
    assert info[0] > 1 and info[2] > info[0]  # usedCores, units


@pytest.mark.parametrize("shape,cores,ub,whole", [
    ((4, 96, 49), 8, 0, True),       # 12 whole channels per core
    ((4, 70, 9), 7, 0, True),        # 10 per core, two parameter groups' worth
    ((6, 50, 30), 48, 8192, False),  # 50 channels on 48 cores: two on some, so channels span cores
])
def test_reduce_syncs_only_when_a_channel_spans_cores(lib, shape, cores, ub, whole):
    """The reduce step takes whole channels per core when that is balanced: then nothing crosses cores, the
    tiling asks for no batch mode and the kernel must not SyncAll (the CPU build refuses a SyncAll without
    schedule mode 1, so a stray one fails this test), with the values of the reference either way."""
    dy, x, mean, invstd, weight, _, _ = _inputs(shape, False, "float32", 13)
    (sdy, sdyx, gw, gb), info = _call(lib, 1, dy, x, mean, invstd, weight, "float32", False, "ascend910b", cores, ub)
    assert info[0] > 1 and bool(info[4]) == (not whole)  # usedCores, crossCore
    ref = sync_reduce_ref(dy, x, mean, invstd, "NCHW")
    for name, got, want in zip(("sum_dy", "sum_dy_xmu", "grad_weight", "grad_bias"), (sdy, sdyx, gw, gb), ref):
        assert_close_to_scale(name, got, want, 2e-5)
