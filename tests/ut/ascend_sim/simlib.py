"""Build and call the CPU build of the Ascend C kernel (ctypes).

The unchanged kernel (ascend_impl/op_kernel) and host tiling
(ascend_impl/op_host) are compiled with g++ against the project's Ascend C
headers (tests/ascend_tools/sim) once, cached by a hash of the sources.
Extra compile and link flags (e.g. sanitizers, see scripts/run_sanitizers.sh)
come from MS_BN_GRAD_SIM_CXXFLAGS and are part of the cache key.
"""
import ctypes
import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from _harness import NAMES, bf16_bits_to_f64, to_bf16_bits

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
INCLUDES = [ROOT / "tests" / "ascend_tools" / "sim", ROOT / "tests" / "ascend_tools" / "rules",
            ROOT / "ascend_impl" / "perf_model", ROOT / "ascend_impl" / "op_kernel", ROOT / "ascend_impl" / "op_host"]
UNITS = [HERE / "sim_launch.cpp", HERE / "sim_misuse.cpp", HERE / "sim_rule_probes.cpp", HERE / "sim_repeat_ops.cpp"]
CXXFLAGS = ["-std=c++17", "-O2", "-fPIC", "-pthread", "-Wall", "-Werror", "-Wno-unused-function"]

DTYPES = {"float32": 0, "float16": 1, "bfloat16": 2}
PARAMS = NAMES[2:]  # the per-channel inputs in kernel order (Param in batch_norm_spec.gen.h)
SOCS = ("ascend910", "ascend310p", "ascend910b", "ascend910_93", "ascend950")
STRATEGIES = {"two_pass": 0, "single_pass": 1}  # enum Strategy (batch_norm_backward_tiling.h)


class SimError(RuntimeError):
    """The CPU build refused the run (a hardware rule was broken)."""


class TilingError(RuntimeError):
    """The host tiling refused the shape."""


class TilingInfo(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in (
        "used_cores", "layout", "units", "groups", "tile_rows", "tile_cols", "row_blocks", "col_blocks", "use_pad",
        "cross_core", "flat", "shift_last", "strategy", "sp_channels", "l2_rounds", "sp_quantum", "l2_channels",
        "sp_seg_sum", "soft_sync", "sp_buffers", "sp_slab_rows", "sp_whole", "sp_lane_sums", "pl_tail", "pl_ahead", "sp_spare",
        "sp_chunk_rows", "out_buffers", "in_buffers", "sp_even", "sp_last_rows")]


def _sources(includes=None, units=None):
    files = list(UNITS if units is None else units)
    for inc in INCLUDES if includes is None else includes:
        files += sorted(inc.glob("*.h")) + sorted(inc.glob("*.cpp"))
    return files


def build(cache_dir=None, kernel_dir=None, units=None, opt="-O2"):
    """Compiles (if needed) and loads the shared library.

    kernel_dir: a (patched) copy of ascend_impl/op_kernel to build instead
    (tests/ut/ascend_sim/mutations.py); units: the translation units (default UNITS).
    """
    extra = shlex.split(os.environ.get("MS_BN_GRAD_SIM_CXXFLAGS", ""))
    flags = [f if f != "-O2" else opt for f in CXXFLAGS] + extra
    includes = [Path(kernel_dir) if p == ROOT / "ascend_impl" / "op_kernel" and kernel_dir else p for p in INCLUDES]
    units = list(units or UNITS)
    digest = hashlib.sha256()
    for f in _sources(includes, units):
        digest.update(str(f).encode())
        digest.update(f.read_bytes())
    digest.update(" ".join(flags).encode())
    cache = Path(cache_dir or os.path.join(tempfile.gettempdir(), "bnb_ascend_sim")) / digest.hexdigest()[:16]
    lib = cache / "libbnbsim.so"
    if not lib.exists():
        cache.mkdir(parents=True, exist_ok=True)
        # Test sessions run in parallel (pytest-xdist workers, docs/testing.md): the first to take the
        # lock builds, in a directory of its own, and the others wait for it and load its library.
        with open(cache / "build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not lib.exists():
                _compile(cache, flags, extra, includes, units, lib)
    return ctypes.CDLL(str(lib))


def _compile(cache, flags, extra, includes, units, lib):
    work = Path(tempfile.mkdtemp(prefix="build.", dir=cache))
    inc = [f"-I{p}" for p in includes]
    objs = [work / (u.stem + ".o") for u in units]

    def compile_one(pair):
        src, obj = pair
        r = subprocess.run(["g++", *flags, *inc, "-c", str(src), "-o", str(obj)], capture_output=True, text=True)
        if r.returncode:  # every test of the simulator fails on this: say why, once per test
            raise RuntimeError(f"building the simulator failed: g++ ... -c {src}\n{r.stderr[-4000:]}")

    with ThreadPoolExecutor(len(units)) as pool:
        list(pool.map(compile_one, zip(units, objs)))
    tmp = work / "libbnbsim.so"
    subprocess.run(["g++", "-shared", "-pthread", *extra, *map(str, objs), "-o", str(tmp)], check=True)
    os.replace(tmp, lib)
    shutil.rmtree(work, ignore_errors=True)


# ---- dtype helpers: bfloat16 travels as uint16 bits (the harness's codec) ----
def to_device(a, dtype):
    a = np.ascontiguousarray(a, dtype=np.float32)
    if dtype == "float32":
        return a.copy()
    if dtype == "float16":
        return a.astype(np.float16)
    return to_bf16_bits(a)


def from_device(a, dtype):
    if dtype == "bfloat16":
        return bf16_bits_to_f64(a)
    return a.astype(np.float64)


def quantize(a, dtype):
    """What the kernel actually sees after the dtype round trip."""
    return from_device(to_device(a, dtype), dtype)


def _garbage(shape, dtype):
    """Output buffers start as NaN so an unwritten element cannot pass."""
    return to_device(np.full(shape, np.nan, dtype=np.float32), dtype)


def run(lib, grad_out, x, weight=None, running_mean=None, running_var=None, save_mean=None, save_invstd=None,
        training=True, eps=1e-5, output_mask=(True, True, True), channel_last=False, dtype="float32",
        soc="ascend910b", ub_bytes=0, cores=0, param_float32=(), grad_param_float32=False, two_pass=False,
        l2_bytes=0):
    """Runs the kernel; returns (grad_input, grad_weight, grad_bias) as float64 and the TilingInfo.

    param_float32 names the per-channel inputs stored as float32 instead of `dtype`;
    two_pass: the tiling may not pick the single-pass strategy; l2_bytes: the L2 its two-pass rounds are
    sized by (0: no rounds).
    """
    shape = np.asarray(grad_out).shape
    c = shape[-1] if channel_last else shape[1]
    dy, xx = to_device(grad_out, dtype), to_device(x, dtype)
    given = dict(weight=weight, running_mean=running_mean, running_var=running_var, save_mean=save_mean,
                 save_invstd=save_invstd)
    keep, ptrs, f32_bits = [], (ctypes.c_void_p * len(PARAMS))(), 0
    for i, name in enumerate(PARAMS):
        if given[name] is None:
            continue
        as_f32 = name in param_float32
        f32_bits |= as_f32 << i
        buf = to_device(given[name], "float32" if as_f32 else dtype)
        keep.append(buf)
        ptrs[i] = buf.ctypes.data
    gdt = "float32" if grad_param_float32 else dtype
    gi, gw, gb = _garbage(shape, dtype), _garbage((c,), gdt), _garbage((c,), gdt)
    info, err = TilingInfo(), ctypes.create_string_buffer(2048)
    shp = (ctypes.c_int64 * len(shape))(*shape)
    mask = sum(int(bool(b)) << i for i, b in enumerate(output_mask))
    lib.bnb_sim_force_two_pass(int(two_pass))
    lib.bnb_sim_set_l2_bytes(ctypes.c_uint64(l2_bytes))
    rc = lib.bnb_sim_run(
        soc.encode(), ctypes.c_uint32(ub_bytes), ctypes.c_uint32(cores), shp, len(shape), int(channel_last),
        DTYPES[dtype], int(training), ctypes.c_float(eps), mask, ctypes.c_void_p(dy.ctypes.data),
        ctypes.c_void_p(xx.ctypes.data), ptrs, ctypes.c_uint32(f32_bits), int(grad_param_float32),
        ctypes.c_void_p(gi.ctypes.data), ctypes.c_void_p(gw.ctypes.data), ctypes.c_void_p(gb.ctypes.data),
        ctypes.byref(info), err, len(err))
    if rc == 1:
        raise TilingError(err.value.decode())
    if rc != 0:
        raise SimError(err.value.decode())
    return (from_device(gi, dtype), from_device(gw, gdt), from_device(gb, gdt)), info


def misuse(lib, name, soc="ascend910b"):
    """Runs one misuse case; returns None when it ran clean, else the refusal message."""
    err = ctypes.create_string_buffer(1024)
    rc = lib.bnb_sim_misuse(soc.encode(), name.encode(), err, len(err))
    if rc == 3:
        raise KeyError(name)
    return err.value.decode() if rc == 2 else None


def rule_probe(lib, name, soc="ascend910b", cores=1):
    """Runs one case of sim_rule_probes.cpp; returns None when it ran clean, else the refusal message."""
    err = ctypes.create_string_buffer(2048)
    rc = lib.bnb_sim_rule_probe(soc.encode(), name.encode(), cores, err, len(err))
    if rc == 3:
        raise KeyError(name)
    return err.value.decode() if rc == 2 else None


def repeat_op(lib, op, src, dst, args, soc="ascend910b", half=False, src_offset=0, dst_offset=0, alias=False,
              reserve_bytes=0, scalar_read=False):
    """One call of a repeat-form instruction (sim_repeat_ops.cpp: reduce_repeat, whole_reduce_sum, brcb,
    copy) with `args` in API order on `src`, over a destination holding `dst`; returns (dst after the
    call as float64, None) or (None, the refusal message)."""
    s = np.ascontiguousarray(src, dtype=np.float32)
    d = np.ascontiguousarray(dst, dtype=np.float32).copy()
    params = [src_offset, dst_offset, int(alias), reserve_bytes, int(scalar_read)] + [int(a) for a in args]
    p = (ctypes.c_int64 * len(params))(*params)
    err = ctypes.create_string_buffer(2048)
    rc = lib.bnb_sim_repeat_op(soc.encode(), op.encode(), int(half), p, len(params),
                               ctypes.c_void_p(s.ctypes.data), len(s), ctypes.c_void_p(d.ctypes.data), len(d), err,
                               len(err))
    if rc == 3:
        raise KeyError(op)
    return (None, err.value.decode()) if rc == 2 else (d.astype(np.float64), None)


def probe_line(path, name):
    """Line of `path` marked `// PROBE <name>`."""
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if line.rstrip().endswith(f"// PROBE {name}"):
            return i
    raise KeyError(name)
