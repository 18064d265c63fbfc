"""The performance model of the Ascend C kernel (ascend_impl/perf_model), from Python.

The unchanged host tiling and kernel run in the project's CPU build of the Ascend C API with
counters and a per-core pipe timeline switched on (sim_perf.h), for one SoC line of
op_def/ascend_soc_capabilities.yaml: GM bytes each core moves, UB high-water mark, busy time of
the S / V / MTE2 / MTE3 pipes, and the modeled time. Needs a checkout (the C++ sources) and g++.
"""
import ctypes
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
ASCEND = ROOT / "ascend_impl"
SOURCE = ASCEND / "perf_model" / "perf_launch.cpp"
TOOLS = ROOT / "tests" / "ascend_tools"
INCLUDES = [TOOLS / "sim", TOOLS / "rules"] + [ASCEND / d for d in ("perf_model", "op_kernel", "op_host")]
CAPS_YAML = ROOT / "op_def" / "ascend_soc_capabilities.yaml"
DTYPES = {"float32": (0, 4), "float16": (1, 2), "bfloat16": (2, 2)}  # ElemType, bytes
STRATEGIES = ("two_pass", "single_pass")  # enum Strategy (batch_norm_backward_tiling.h)
MAX_CORES = 64


class PerfCore(ctypes.Structure):
    _fields_ = [(n, ctypes.c_double) for n in ("end_ns", "busy_s", "busy_v", "busy_mte2", "busy_mte3")] + [
        (n, ctypes.c_uint64) for n in ("gm_read_bytes", "gm_write_bytes", "act_read_bytes", "act_write_bytes",
                                       "copies", "bursts", "min_burst", "vector_instrs", "scalar_ops", "sync_alls",
                                       "ub_bytes", "hbm_read_bytes")] + [("combine_ns", ctypes.c_double)]


class PerfTiling(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in ("strategy", "used_cores", "cross_core", "sp_channels", "groups",
                                              "units", "workspace_bytes", "l2_rounds", "group_width",
                                              "l2_channels", "soft_sync", "pl_tail")]


def capabilities():
    """{soc: {field: value}}: the one table of per-SoC facts (op_def/ascend_soc_capabilities.yaml)."""
    return yaml.safe_load(CAPS_YAML.read_text())["ascend_soc_capabilities"]


def _sources():
    files = [SOURCE]
    for inc in INCLUDES:
        files += sorted(inc.glob("*.h")) + sorted(inc.glob("*.cpp"))
    return files


def build():
    """Compiles (once per source hash) and loads the model's library."""
    if not SOURCE.exists():
        raise RuntimeError(f"the performance model needs a checkout of the project ({SOURCE} is missing)")
    digest = hashlib.sha256()
    for f in _sources():
        digest.update(f.read_bytes())
    base = os.environ.get("MS_BN_GRAD_CACHE_DIR") or tempfile.gettempdir()
    cache = Path(base) / "bnb_perf_model" / digest.hexdigest()[:16]
    lib = cache / "libbnbperf.so"
    if not lib.exists():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = cache / f"libbnbperf.{os.getpid()}.so"
        cmd = ["g++", "-std=c++17", "-O2", "-fPIC", "-shared", "-pthread", *[f"-I{p}" for p in INCLUDES],
               str(SOURCE), "-o", str(tmp)]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        os.replace(tmp, lib)
    return ctypes.CDLL(str(lib))


class Result:
    """One modeled launch: the tiling's choices, per-core counts, and what follows from them."""

    def __init__(self, soc, shape, dtype, tiling, cores, caps):
        self.soc, self.shape, self.dtype, self.tiling, self.cores = soc, tuple(shape), dtype, tiling, cores
        self.elements = 1
        for d in shape:
            self.elements *= d
        self.elem_bytes = DTYPES[dtype][1]
        self.gm_gbps = caps["gm_gbps"]
        # GM (HBM) traffic: the reads that miss L2 (whole 32-byte blocks) and every write.
        self.core_bytes = [c.hbm_read_bytes + c.gm_write_bytes for c in cores]
        self.gm_bytes = sum(self.core_bytes)
        self.requested_bytes = sum(c.gm_read_bytes + c.gm_write_bytes for c in cores)
        self.l2_hit_bytes = max(0, self.requested_bytes - self.gm_bytes)
        self.act_bytes = sum(c.act_read_bytes + c.act_write_bytes for c in cores)

    @property
    def strategy(self):
        return STRATEGIES[self.tiling.strategy]

    @property
    def gm_bytes_per_element(self):
        return self.gm_bytes / self.elements if self.elements else 0.0

    @property
    def activation_accesses(self):
        """GM accesses per element of grad_out / input / grad_input, L2 hits excluded (the floor is 3)."""
        other = self.requested_bytes - self.act_bytes  # per-channel vectors, partials: never L2 hits here
        return (self.gm_bytes - other) / (self.elements * self.elem_bytes) if self.elements else 0.0

    @property
    def requested_accesses(self):
        """Accesses per element the cores request, L2 hits included (single pass 3, two passes 5)."""
        return self.act_bytes / (self.elements * self.elem_bytes) if self.elements else 0.0

    @property
    def max_core_share(self):
        return max(self.core_bytes) / self.gm_bytes if self.gm_bytes else 0.0

    @property
    def timeline_us(self):
        return max(c.end_ns for c in self.cores) / 1e3

    @property
    def modeled_us(self):
        """The latest core's timeline, or the chip's GM bandwidth for the bytes moved if that is longer."""
        return max(self.timeline_us, self.gm_bytes / self.gm_gbps / 1e3)

    @property
    def bound_us(self):
        """GM-bandwidth bound of the floor: x and dy read once, dx written once."""
        return 3 * self.elements * self.elem_bytes / self.gm_gbps / 1e3

    @property
    def ub_high_water(self):
        return max(c.ub_bytes for c in self.cores)

    @property
    def min_burst(self):
        return min(c.min_burst for c in self.cores)

    @property
    def combine_us(self):
        """The combine of the per-channel sums on the core where it takes longest (sim_perf.h CombineBegin)."""
        return max(c.combine_ns for c in self.cores) / 1e3

    @property
    def combine_share(self):
        return self.combine_us / self.modeled_us if self.modeled_us else 0.0

    def busy_us(self, pipe):
        return max(getattr(c, f"busy_{pipe}") for c in self.cores) / 1e3


def run(lib, soc, shape, dtype="float32", training=True, output_mask=7, skip_data=True, two_pass=False):
    """Models one launch of BatchNormBackward (NCHW-like shape) on `soc`."""
    caps = capabilities()[soc]
    tiling = PerfTiling()
    cores = (PerfCore * MAX_CORES)()
    err = ctypes.create_string_buffer(2048)
    shp = (ctypes.c_int64 * len(shape))(*shape)
    rc = lib.bnb_perf_run(soc.encode(), shp, len(shape), DTYPES[dtype][0], int(training), output_mask,
                          int(skip_data), int(two_pass), ctypes.byref(tiling), cores, MAX_CORES, err, len(err))
    if rc != 0:
        raise RuntimeError(f"performance model of {soc} {tuple(shape)} {dtype}: {err.value.decode()}")
    return Result(soc, shape, dtype, tiling, list(cores[:tiling.used_cores]), caps)
