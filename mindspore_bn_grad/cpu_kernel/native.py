"""The CPU kernel library: loading it, the thread count, and direct calls on NumPy arrays.

The library is loaded (built on first use, see build.py) by ctypes in the
same process where MindSpore dlopens it for ops.Custom; the same path gives
the same library instance, so settings made here apply to MindSpore's calls.

Direct calls run the kernels without MindSpore, for tests and benchmarks:
``direct`` / ``prepare_direct`` (BatchNormBackward), ``double_direct`` /
``prepare_double_direct`` (BatchNormDoubleBackward), ``reduce_direct`` /
``elemt_direct`` (the SyncBatchNorm pair), ``forward_direct`` /
``prepare_forward_direct`` (BatchNormForward). bfloat16 arrays travel as
uint16 bit patterns.
"""
import ctypes
import functools
import numbers
import os
import re

import numpy as np

from .build import KernelBuildError, library_path, usable_cpus  # noqa: F401  (usable_cpus: public here)
from ..spec import DOUBLE_YAML, ELEMT_YAML, FORWARD_YAML, REDUCE_YAML, kernel_errors, load_opdef

ERRORS = kernel_errors()  # code -> message of the kernel entries: kernel_errors in op_def/batch_norm_backward.yaml

# The thread cap: this many threads per usable CPU (csrc/num_threads.h kThreadsPerCpu; a test
# checks they agree). More only adds switching and memory.
THREADS_PER_CPU = 4

_settings = {"num_threads": None}


def max_threads() -> int:
    return THREADS_PER_CPU * usable_cpus()


def _check_threads(n, name: str) -> int:
    """The one rule for a thread count (set_num_threads, MS_BN_GRAD_NUM_THREADS); C++ gets the result."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Integral):
        raise TypeError(f"BatchNormBackward: {name} expected a positive int, got {n!r}")
    n = int(n)  # NumPy integers too
    cap = max_threads()
    if not 1 <= n <= cap:
        raise ValueError(f"BatchNormBackward: {name} expected an integer in 1..{cap} (at most "
                         f"{THREADS_PER_CPU} threads for each of the {usable_cpus()} CPUs this "
                         f"process may use), got {n}")
    return n


def _default_threads() -> int:
    env = os.environ.get("MS_BN_GRAD_NUM_THREADS", "").strip()
    if not env:
        return usable_cpus()
    if not re.fullmatch(r"\+?[0-9]+", env):
        raise ValueError(f"BatchNormBackward: MS_BN_GRAD_NUM_THREADS expected a positive integer, "
                         f"got {env!r}")
    return _check_threads(int(env), "MS_BN_GRAD_NUM_THREADS")


# The aot ABI's arguments (nparam, params, ndims, shapes, dtypes) that every direct entry point takes first.
_AOT_ARGS = (ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int),
             ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)), ctypes.POINTER(ctypes.c_char_p))


def _declare(fn, *extra):
    """Sets the ctypes signature of a direct entry point: the aot arguments, then `extra`; returns an int."""
    fn.restype = ctypes.c_int
    fn.argtypes = [*_AOT_ARGS, *extra]


def _apply_threads(handle, n: int) -> None:
    rc = handle.MsBnGradSetNumThreads(n)
    if rc == 9:
        raise RuntimeError(f"BatchNormBackward: num_threads expected a thread count the system can "
                           f"start, got {n}: the OS refused to start a thread (see ulimit -u and "
                           f"memory limits); the previous setting, {handle.MsBnGradGetNumThreads()}, "
                           "stays")
    check_rc(rc)


@functools.lru_cache(maxsize=None)
def lib():
    """The loaded library, with the current settings applied."""
    threads = get_num_threads()  # a bad MS_BN_GRAD_NUM_THREADS fails before anything is built
    path = library_path()  # checked against its digest: never a damaged file into dlopen
    try:
        handle = ctypes.CDLL(str(path))
    except OSError as e:
        raise KernelBuildError(f"BatchNormBackward: cannot load the CPU kernel library {path} ({e}); "
                               f"delete it to have it rebuilt") from e
    _declare(handle.MsBnGradDirect, ctypes.c_int, ctypes.c_double, *[ctypes.c_int] * 4)
    handle.MsBnGradSetNumThreads.argtypes = [ctypes.c_int]
    handle.MsBnGradSetNumThreads.restype = ctypes.c_int
    _apply_threads(handle, threads)
    return handle


def aot_func(op_name=None) -> str:
    """`func` argument of ops.Custom for the CPU kernel of `op_name` (default BatchNormBackward's):
    the library lib() checked and loaded (MindSpore's dlopen of the same path gets that same instance)."""
    return f"{lib()._name}:{op_name or load_opdef().op_name}"


def has_symbol(name: str) -> bool:
    """Whether the kernel library exports `name` (e.g. an operator's C++ infer, <op_name>InferShape)."""
    return hasattr(lib(), name)


def set_num_threads(n: int) -> None:
    """Threads the CPU kernel uses, 1..4 per usable CPU (default: MS_BN_GRAD_NUM_THREADS, else
    the CPUs this process may use). The threads are started here: an OS that refuses one raises
    RuntimeError and keeps the previous setting."""
    n = _check_threads(n, "num_threads")
    if lib.cache_info().currsize:
        _apply_threads(lib(), n)
    _settings["num_threads"] = n


def get_num_threads() -> int:
    return _settings["num_threads"] or _default_threads()


_NP_DTYPES = {np.dtype(n): n for n in load_opdef().dtypes if hasattr(np, n)}  # bfloat16: uint16 bits


def _dtype_name(arr, bf16):
    if arr is None:
        return "none"
    if arr.dtype == np.uint16 and bf16:
        return "bfloat16"
    name = _NP_DTYPES.get(arr.dtype)
    if name is None:
        raise TypeError(f"BatchNormBackward: direct call expected float16/float32/float64 arrays "
                        f"(or uint16 with bf16=True), got {arr.dtype}")
    return name


def direct(grad_out, input, weight=None, running_mean=None, running_var=None, save_mean=None,
           save_invstd=None, *, training=True, eps=1e-5, output_mask=(True, True, True),
           channel_last=False, param_grad_dtype=None, bf16=(), out=None):
    """Runs the compiled kernel on NumPy arrays, without MindSpore.

    For benchmarks and kernel-level tests. bfloat16 arrays are passed as
    uint16 bit patterns and named in `bf16` (argument names, plus "grad_out"
    for the activations and "param_grads" for grad_weight/grad_bias).
    `out` may pass preallocated (grad_input, grad_weight, grad_bias).
    Returns the three outputs.
    """
    call, out = prepare_direct(grad_out, input, weight, running_mean, running_var, save_mean,
                               save_invstd, training=training, eps=eps, output_mask=output_mask,
                               channel_last=channel_last, param_grad_dtype=param_grad_dtype,
                               bf16=bf16, out=out)
    call()
    return out


def prepare_direct(grad_out, input, weight=None, running_mean=None, running_var=None,
                   save_mean=None, save_invstd=None, *, training=True, eps=1e-5,
                   output_mask=(True, True, True), channel_last=False, param_grad_dtype=None,
                   bf16=(), out=None):
    """direct() split in two: marshals the arguments once and returns
    (call, outputs); each call() runs the kernel again on the same arrays.
    For benchmarks: call() costs one ctypes call (a few microseconds),
    direct() a few hundred microseconds of argument marshalling.
    """
    ins = [grad_out, input, weight, running_mean, running_var, save_mean, save_invstd]
    names = load_opdef().input_names  # the prototype's slot order (csrc/bn_spec.gen.h)
    ins = [None if a is None else np.ascontiguousarray(a) for a in ins]
    in_dtypes = [_dtype_name(a, n in bf16 or (n == "input" and "grad_out" in bf16))
                 for a, n in zip(ins, names)]
    channels = grad_out.shape[-1 if channel_last else 1]
    if out is None:
        pdt = param_grad_dtype or (weight.dtype if weight is not None else grad_out.dtype)
        out = (np.empty_like(ins[0]), np.empty(channels, pdt), np.empty(channels, pdt))
    pbf16 = "param_grads" in bf16 or ("param_grads" not in bf16 and weight is None and "grad_out" in bf16
                                      and param_grad_dtype is None)
    out_dtypes = [in_dtypes[0], _dtype_name(out[1], pbf16), _dtype_name(out[2], pbf16)]
    arrays = ins + list(out)
    marshalled = marshal(arrays, in_dtypes + out_dtypes)
    fn = lib().MsBnGradDirect
    args = (*marshalled.args, int(training), float(eps), *[int(bool(m)) for m in output_mask],
            int(channel_last))

    def call(_keep=(arrays, marshalled)):  # the buffers behind the pointers live as long as call
        check_rc(fn(*args))

    return call, out


class Marshalled:
    """The (nparam, params, ndims, shapes, dtypes) arguments of an aot entry, for ctypes."""

    def __init__(self, arrays, dtype_names):
        n = len(arrays)
        params = (ctypes.c_void_p * n)(*[None if a is None else a.ctypes.data for a in arrays])
        ndims = (ctypes.c_int * n)(*[0 if a is None else a.ndim for a in arrays])
        self._shape_bufs = [(ctypes.c_int64 * max(1, 0 if a is None else a.ndim))(*(() if a is None else a.shape))
                            for a in arrays]
        shapes = (ctypes.POINTER(ctypes.c_int64) * n)(
            *[ctypes.cast(b, ctypes.POINTER(ctypes.c_int64)) for b in self._shape_bufs])
        dtypes = (ctypes.c_char_p * n)(*[d.encode() for d in dtype_names])
        self.args = (n, params, ndims, shapes, dtypes)


def marshal(arrays, dtype_names) -> Marshalled:
    """Marshals NumPy arrays (None for absent tensors) for an aot-ABI entry point."""
    return Marshalled(arrays, dtype_names)


def check_rc(rc, op="BatchNormBackward"):
    if rc != 0:
        raise RuntimeError(f"{op}: kernel returned {rc} ({ERRORS.get(rc, 'unknown')})")


# --- the double backward and the SyncBatchNorm pair ---------------------------------------

@functools.lru_cache(maxsize=None)
def _counter_dtypes():
    """NumPy dtype -> name of the integer dtypes a `counter` may have on CPU (beyond the float ones)."""
    return {np.dtype(n): n for n in load_opdef(ELEMT_YAML).input("counter").allowed_dtypes("CPU")
            if n not in load_opdef().dtypes}


@functools.lru_cache(maxsize=None)
def _sync_lib():
    handle = lib()
    _declare(handle.MsBnSyncReduceDirect, *[ctypes.c_int] * 4)
    _declare(handle.MsBnSyncElemtDirect, ctypes.c_int)
    return handle


def _call(fn, arrays, names, *extra):
    check_rc(fn(*marshal(arrays, names).args, *extra), op="BatchNormSync")


def _sync_dtype_name(a, bf16=False):
    if a is not None and a.dtype in _counter_dtypes():
        return _counter_dtypes()[a.dtype]
    return _dtype_name(a, bf16)


def reduce_direct(grad_out, input, mean, invstd, weight=None, *, input_g=True, weight_g=True, bias_g=True,
                  channel_last=False, bf16=False):
    """Reduce kernel on NumPy arrays (bf16=True: activations are uint16 bfloat16 bits)."""
    opdef = load_opdef(REDUCE_YAML)
    given = dict(zip(opdef.input_names, (grad_out, input, mean, invstd, weight)))
    ins = [None if given[n] is None else np.ascontiguousarray(given[n]) for n in opdef.input_names]
    c = given["grad_out"].shape[-1 if channel_last else 1]
    # each output in the dtype of the first present input of its dtype_from
    outs = [np.full(c, np.nan, next(given[s].dtype for s in o.dtype_from if given[s] is not None))
            for o in opdef.outputs]
    full = {a.name for a in opdef.inputs if a.shape == "full"}
    names = [_sync_dtype_name(a, bf16 and n in full) for n, a in zip(opdef.input_names, ins)] + [_sync_dtype_name(o) for o in outs]
    _call(_sync_lib().MsBnSyncReduceDirect, ins + outs, names, int(input_g), int(weight_g), int(bias_g),
          int(channel_last))
    return tuple(outs)


def elemt_direct(grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu, counter, *, channel_last=False,
                 bf16=False):
    """Elementwise kernel on NumPy arrays; returns grad_input (grad_out's dtype)."""
    opdef = load_opdef(ELEMT_YAML)
    given = dict(zip(opdef.input_names, (grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu, counter)))
    ins = [None if given[n] is None else np.ascontiguousarray(given[n]) for n in opdef.input_names]
    out = np.full_like(ins[opdef.input_names.index("grad_out")], 0x7fff if bf16 else np.nan)
    full = {a.name for a in opdef.inputs if a.shape == "full"}
    names = [_sync_dtype_name(a, bf16 and n in full) for n, a in zip(opdef.input_names, ins)] + [_sync_dtype_name(out, bf16)]
    _call(_sync_lib().MsBnSyncElemtDirect, ins + [out], names, int(channel_last))
    return out


@functools.lru_cache(maxsize=None)
def _double_lib():
    handle = lib()
    _declare(handle.MsBnDoubleBackwardDirect, ctypes.c_int, ctypes.c_double, *[ctypes.c_int] * 4)
    return handle


def prepare_double_direct(grad_out, input, weight=None, running_mean=None, running_var=None, save_mean=None,
                          save_invstd=None, grad_grad_input=None, grad_grad_weight=None, grad_grad_bias=None,
                          *, training=True, eps=1e-5, output_mask=(True, True, True), channel_last=False,
                          bf16=False, weight_grad_dtype=None):
    """Marshals once; returns (call, (grad_grad_out, grad_input, grad_weight)); call() runs the kernel.

    bf16=True: the activations (grad_out, input, grad_grad_input and the two
    full-size outputs) are uint16 bfloat16 bit patterns; per-channel tensors
    are float16/float32/float64 arrays. Absent grad_grad_* count as zero.
    """
    ins = [None if a is None else np.ascontiguousarray(a)
           for a in (grad_out, input, weight, running_mean, running_var, save_mean, save_invstd,
                     grad_grad_input, grad_grad_weight, grad_grad_bias)]
    c = ins[0].shape[-1 if channel_last else 1]
    wdt = weight_grad_dtype or (ins[2].dtype if ins[2] is not None else ins[0].dtype)
    fill = 0x7fff if bf16 else np.nan
    outs = (np.full_like(ins[0], fill), np.full_like(ins[0], fill), np.full(c, np.nan, wdt))
    full = {0, 1, 7, 10, 11}
    arrays = ins + list(outs)
    names = [_sync_dtype_name(a, bf16 and i in full) for i, a in enumerate(arrays)]
    marshalled = marshal(arrays, names)
    args = (*marshalled.args, int(training), float(eps), *[int(bool(m)) for m in output_mask],
            int(channel_last))
    fn = _double_lib().MsBnDoubleBackwardDirect

    def call(_keep=(arrays, marshalled)):  # the buffers behind the pointers live as long as call
        check_rc(fn(*args), op=load_opdef(DOUBLE_YAML).op_name)

    return call, outs


def double_direct(*arrays, **kwargs):
    """The CPU double-backward kernel on NumPy arrays; returns (grad_grad_out, grad_input, grad_weight)."""
    call, outs = prepare_double_direct(*arrays, **kwargs)
    call()
    return outs


# --- the forward --------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _forward_lib():
    handle = lib()
    _declare(handle.MsBnForwardDirect, ctypes.c_int, ctypes.c_double, ctypes.c_double, ctypes.c_int)
    return handle


def prepare_forward_direct(input, weight=None, bias=None, running_mean=None, running_var=None, *,
                           training=False, momentum=0.1, eps=1e-5, channel_last=False, bf16=False,
                           stats_dtype=None, in_place=False, output=None):
    """Marshals once; returns (call, (output, save_mean, save_invstd, running_mean_out, running_var_out)).

    bf16=True: input and output are uint16 bfloat16 bit patterns (per-channel
    tensors are float16/float32/float64 arrays). save_* take `stats_dtype`, else
    weight's dtype, else input's (float32 for bf16 input). in_place=True: the
    running statistics are updated in the given arrays (returned as the last two
    outputs; they must be contiguous); else new arrays, None when the input is
    absent. output: a preallocated y (contiguous, the input's shape and dtype), else a new array.
    """
    opdef = load_opdef(FORWARD_YAML)
    given = [input, weight, bias, running_mean, running_var]
    ins = [None if a is None else (a if in_place and k >= 3 else np.ascontiguousarray(a))
           for k, a in enumerate(given)]
    if in_place and any(a is not None and not a.flags.c_contiguous for a in ins[3:]):
        raise ValueError(f"{opdef.op_name}: running statistics expected contiguous arrays for in_place=True")
    c = ins[0].shape[-1 if channel_last else 1]
    sdt = stats_dtype or (ins[1].dtype if ins[1] is not None else (np.float32 if bf16 else ins[0].dtype))
    if output is not None and (output.shape != ins[0].shape or output.dtype != ins[0].dtype
                               or not output.flags.c_contiguous):
        raise ValueError(f"{opdef.op_name}: output expected a contiguous {ins[0].dtype} array of shape "
                         f"{ins[0].shape}, got {output.dtype} {output.shape}")
    out = np.full_like(ins[0], 0x7fff if bf16 else np.nan) if output is None else output
    saves = [np.full(c, np.nan, sdt), np.full(c, np.nan, sdt)]
    runs = [r if in_place or r is None else np.full(c, np.nan, r.dtype) for r in ins[3:]]
    arrays = ins + [out] + saves + runs
    names = [_dtype_name(a, bf16 and k in (0, 5)) for k, a in enumerate(arrays)]
    marshalled = marshal(arrays, names)
    args = (*marshalled.args, int(training), float(momentum), float(eps), int(channel_last))
    fn = _forward_lib().MsBnForwardDirect

    def call(_keep=(arrays, marshalled)):  # the buffers behind the pointers live as long as call
        check_rc(fn(*args), op=opdef.op_name)

    return call, (out, *saves, *runs)


def forward_direct(*arrays, **kwargs):
    """The CPU forward kernel on NumPy arrays; returns (output, save_mean, save_invstd,
    running_mean_out, running_var_out); see prepare_forward_direct."""
    call, outs = prepare_forward_direct(*arrays, **kwargs)
    call()
    return outs
