"""Real-API build of the Ascend C operator (scripts/check_ascend_api.sh) and
its CPU launcher (tests/ascend_tools/api_check/bnb_api_launch.cpp), for the tests.

The build compiles every kernel entry for every SoC line against the public
asc-devkit headers in CPU-debug mode, the op_host sources against the public
metadef / ge headers, and links one launcher per SoC whose intrinsics the
project's stand-ins model. It is cached by a hash of the sources and the
header locations. Without the headers every test skips with SKIP_REASON.
"""
import fcntl
import hashlib
import os
import struct
import subprocess
import tempfile
from pathlib import Path

import numpy as np

import simlib  # dtype helpers: to_device / from_device / quantize (tests/ut/ascend_sim is on pytest's pythonpath)

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "check_ascend_api.sh"

ENV_VARS = ("ASCEND_DEVKIT_PATH", "ASCEND_HOME_PATH", "ASCEND_METADEF_PATH", "ASCEND_GE_PATH", "ASCEND_OPBASE_PATH")
TESTED_COMMIT = "82b89a1"
# One line (pytest repeats it per skipped test). The long form: check out the asc-devkit repository
# (tested at TESTED_COMMIT, e.g. https://github.com/mirror-cann/asc-devkit) outside this project and
# set ASCEND_DEVKIT_PATH to it, or source a CANN toolkit (ASCEND_HOME_PATH); for the op_host check
# also set ASCEND_METADEF_PATH and ASCEND_GE_PATH (the public metadef and ge repositories) and
# optionally ASCEND_OPBASE_PATH (opbase).
SKIP_REASON = (f"needs the Ascend C API headers (asc-devkit {TESTED_COMMIT}): set ASCEND_DEVKIT_PATH or "
               "ASCEND_HOME_PATH; for op_host also ASCEND_METADEF_PATH, ASCEND_GE_PATH")
DTYPES = {"float32": 0, "float16": 1, "bfloat16": 2}
MODES = {"full": 0, "reduce": 1, "elemt": 2}
COUNTERS = {"float32": (0, np.float32), "int32": (1, np.int32), "int64": (2, np.int64)}
PARAMS = ("weight", "running_mean", "running_var", "save_mean", "save_invstd")  # kernel order
KERNELS = ("batch_norm_backward", "batch_norm_reduce_backward", "batch_norm_elemt_backward")
HOST_SOURCES = KERNELS


def headers_available():
    """True when the script finds an asc-devkit tree (ASCEND_DEVKIT_PATH, or inside ASCEND_HOME_PATH)."""
    if not (os.environ.get("ASCEND_DEVKIT_PATH") or os.environ.get("ASCEND_HOME_PATH")):
        return False
    proc = subprocess.run(["bash", str(SCRIPT), "--find-headers"], capture_output=True, text=True)
    return proc.returncode == 0


def host_headers_available():
    return bool(os.environ.get("ASCEND_METADEF_PATH") and os.environ.get("ASCEND_GE_PATH"))


def soc_table():
    """{soc: runs} for every SoC line of the YAML, as the script knows them."""
    out = subprocess.run(["bash", str(SCRIPT), "--list"], check=True, capture_output=True, text=True).stdout
    return {line.split()[0]: line.split()[1] == "1" for line in out.splitlines() if line.strip()}


class Build:
    """Output of one scripts/check_ascend_api.sh --soc all run."""

    def __init__(self, build_dir, stdout, returncode):
        self.dir = Path(build_dir)
        self.stdout = stdout
        self.returncode = returncode
        self.status = {}  # "ascend910b kernel batch_norm_backward" -> "ok" / "FAIL"
        for line in stdout.splitlines():
            word, _, rest = line.partition(" ")
            if word in ("ok", "FAIL"):
                self.status[rest.strip().split(" (log:")[0].rsplit(" /", 1)[0].strip()] = word

    def log(self, soc, name):
        path = self.dir / soc / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def launcher(self, soc):
        return self.dir / soc / "bnb_api_launch"


def _digest():
    h = hashlib.sha256()
    for sub in ("ascend_impl", "tests/ascend_tools", "scripts/check_ascend_api.sh"):
        p = ROOT / sub
        files = sorted(p.rglob("*")) if p.is_dir() else [p]
        for f in files:
            if f.is_file() and f.suffix in (".h", ".cpp", ".sh", ".py", ""):
                h.update(str(f.relative_to(ROOT)).encode())
                h.update(f.read_bytes())
    for var in ENV_VARS:
        h.update(f"{var}={os.environ.get(var, '')}".encode())
    return h.hexdigest()[:16]


def build():
    """Runs (or reuses) the real-API build of every SoC; returns a Build."""
    build_dir = Path(tempfile.gettempdir()) / "bnb_ascend_api" / _digest()
    done = build_dir / "check_ascend_api.out"
    if done.exists():
        rc, _, text = done.read_text().partition("\n")
        return Build(build_dir, text, int(rc))
    build_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["bash", str(SCRIPT), "--soc", "all", "--build-dir", str(build_dir)],
                          capture_output=True, text=True, timeout=3600)
    done.write_text(f"{proc.returncode}\n{proc.stdout}")
    return Build(build_dir, proc.stdout, proc.returncode)


class TilingError(RuntimeError):
    """The host tiling refused the case."""


class CoreError(RuntimeError):
    """A core failed (an unmodelled intrinsic, a crash, a timeout)."""


def _buffer(a):
    if a is None:
        return struct.pack("<q", 0)
    raw = np.ascontiguousarray(a).tobytes()
    return struct.pack("<q", len(raw)) + raw


def run(launcher, mode, grad_out, x, params=None, training=True, eps=1e-5, output_mask=(True, True, True),
        channel_last=False, dtype="float32", cores=1, ub_bytes=0, param_float32=(), grad_param_float32=False,
        sums=None, counter=None, counter_dtype="int32", workdir=None):
    """Runs one case; returns (outputs, info).

    outputs: full -> (grad_input, grad_weight, grad_bias); reduce -> (sum_dy, sum_dy_xmu, grad_weight,
    grad_bias); elemt -> (grad_input,), all float64. `params` maps the names in PARAMS to arrays (absent:
    missing or None); `param_float32` names those stored as float32 instead of `dtype` (for the
    SyncBatchNorm steps, "save_mean" also sets the dtype of sum_dy / sum_dy_xmu). `sums` = (sum_dy,
    sum_dy_xmu) and `counter` are the elemt step's inputs.
    """
    params = params or {}
    shape = np.asarray(grad_out).shape
    header = [0] * 32
    header[0] = MODES[mode]
    header[1] = len(shape)
    header[2:2 + len(shape)] = shape
    header[10] = int(channel_last)
    header[11] = DTYPES[dtype]
    header[12] = int(training)
    header[13] = struct.unpack("<I", struct.pack("<f", eps))[0]
    header[14] = sum(int(bool(b)) << i for i, b in enumerate(output_mask))
    present = f32 = 0
    buffers = [simlib.to_device(grad_out, dtype), simlib.to_device(x, dtype)]
    for i, name in enumerate(PARAMS):
        value = params.get(name)
        as_f32 = name in param_float32
        f32 |= int(as_f32) << i
        present |= int(value is not None) << i
        buffers.append(None if value is None else simlib.to_device(value, "float32" if as_f32 else dtype))
    header[15], header[16], header[17] = present, f32, int(grad_param_float32)
    header[18], header[19] = ub_bytes, cores
    sum_dtype = "float32" if "save_mean" in param_float32 else dtype
    buffers += [None, None] if sums is None else [simlib.to_device(s, sum_dtype) for s in sums]
    if counter is None:
        buffers.append(None)
    else:
        code, np_type = COUNTERS[counter_dtype]
        buffers.append(np.asarray(counter, dtype=np_type))
        header[20], header[21] = len(counter), code
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        case, out = Path(tmp) / "case.bin", Path(tmp) / "out.bin"
        case.write_bytes(struct.pack("<32q", *header) + b"".join(_buffer(b) for b in buffers))
        proc = subprocess.run([str(launcher), str(case), str(out)], capture_output=True, text=True, timeout=600)
        if proc.returncode == 1:
            raise TilingError(proc.stderr.strip())
        if proc.returncode != 0:
            raise CoreError(f"exit {proc.returncode}: {proc.stderr.strip()[-2000:]}")
        raw = out.read_bytes()
    info = dict(kv.split("=") for kv in proc.stdout.split())
    info = {k: int(v) for k, v in info.items()}
    outs, pos = [], 0
    gdt = "float32" if grad_param_float32 else dtype
    kinds = [dtype, gdt, gdt, sum_dtype, sum_dtype]
    for kind in kinds:
        (length,) = struct.unpack_from("<q", raw, pos)
        pos += 8
        np_type = np.uint16 if kind == "bfloat16" else {"float32": np.float32, "float16": np.float16}[kind]
        outs.append(simlib.from_device(np.frombuffer(raw, dtype=np_type, count=length // np.dtype(np_type).itemsize,
                                                     offset=pos).copy(), kind) if length else None)
        pos += length
    gi, gw, gb, sdy, sdyx = outs
    c = shape[-1] if channel_last else shape[1]
    if mode == "full":
        return (gi.reshape(shape), gw.reshape(c), gb.reshape(c)), info
    if mode == "reduce":
        return (sdy.reshape(c), sdyx.reshape(c), gw.reshape(c), gb.reshape(c)), info
    return (gi.reshape(shape),), info


def build_probe(source, soc="ascend910b"):
    """Builds a probe program (kernel fragments with a main, run on the stand-ins' cores) with
    scripts/check_ascend_api.sh --probe; returns its path. Cached like build()."""
    h = hashlib.sha256(_digest().encode())
    h.update(Path(source).read_bytes())
    # the source's path too: a probe reports its hazards at file:line, which the tests compare, so a
    # binary built from another checkout of the same sources would name that checkout's file
    h.update(str(Path(source).resolve()).encode())
    build_dir = Path(tempfile.gettempdir()) / "bnb_ascend_api_probe" / h.hexdigest()[:16]
    exe = build_dir / soc / f"probe_{Path(source).stem}"
    build_dir.mkdir(parents=True, exist_ok=True)
    with open(build_dir / f".{soc}.lock", "w") as lock:  # pytest-xdist workers: one builds, the others wait
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not exe.exists():
            proc = subprocess.run(["bash", str(SCRIPT), "--soc", soc, "--build-dir", str(build_dir), "--probe",
                                   str(source)], capture_output=True, text=True, timeout=3600)
            if proc.returncode != 0:
                log = build_dir / soc / f"probe_{Path(source).stem}.log"
                raise RuntimeError(proc.stdout + (log.read_text()[-4000:] if log.exists() else ""))
    return exe
