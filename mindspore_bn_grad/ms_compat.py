"""The MindSpore releases this package supports, and the differences between them that touch it.

Imported first by the modules that need MindSpore (not by ``import
mindspore_bn_grad``): importing it checks the installed MindSpore and raises
``UnsupportedMindSporeError`` (an ``ImportError``) naming the supported range
for any other release.

What differs between 2.7.0 and 2.10.0, as found by scripts/test_matrix.sh (the
fast test profile on each release), and how it is handled:

- The AotExtra header (csrc): identical class in every release; 2.7 includes one
  internal header from another path. Handled by csrc/ms_aot_compat.h and the
  files under csrc/ms_internal/.
- Cell bprop: 2.7.0 in GRAPH mode fails to compile a Cell that has a bprop and
  whose construct calls a module-level Python function ("The pointer[input] is
  null", "The input[0] is released"); 2.10.0 compiles it. Calling a method of
  the Cell works on every release, so such cells (nn/_sync.py) call only
  methods (tests/ut/test_sync_batchnorm.py, GRAPH cases); no release-specific
  code path is needed.
- CPU collectives: 2.7.x runs an AllReduce on CPU (mccl) on the world group
  only ("AllReduce only support mccl_world_group on CPU, but got <group>", seen
  on 2.7.0); 2.8.0, 2.9.0 and 2.10.0 also run it on a group made by
  create_group (the 2-worker msrun test with an explicit group passes). Handled by
  CPU_COLLECTIVES_WORLD_GROUP_ONLY below: on such a release SyncBatchNorm
  (nn/_sync.py) uses the world group for a process group of all ranks and
  refuses other multi-rank groups on CPU with an error naming the reason.
- Parameter flags: ``Parameter.requires_grad`` reads ``param_info``, whose getter
  first drains PYNATIVE's whole asynchronous queue (``Tensor_.wait_pipeline``),
  in every supported release. The backward reads the flag at every step, so it
  goes through ``requires_grad_nowait`` below (tests/ut/test_pynative_waits.py).
- Waiting for PYNATIVE's queue (benchmarks): ``_pynative_executor`` lives in
  ``mindspore.graph.api`` from 2.8 on (``mindspore.common.api`` still has it there,
  with a deprecation warning) and only in ``mindspore.common.api`` in 2.7. See
  ``pynative_sync`` below. Its ``clear_res`` makes PYNATIVE drop the CPU kernels it
  keeps per operator and attributes (``pynative_forget_kernels``: once, when ours
  start standing in for MindSpore's BatchNorm kernels after the import).
- CPU op plugin (the native route, docs/native_route.md): the interface the package
  uses (``include/mindspore/ops/kernel/cpu/op_plugin/custom_kernel_input_info.h``:
  std-only, ``mindspore::kernel::op_plugin::KernelInputInfo`` with double scalars and
  the inputs' strides) is the same file in 2.8.0, 2.9.0 and 2.10.0. 2.7.x have earlier
  forms: 2.7.2's (``kernel/cpu/custom/kernel_mod_impl/``, float scalars, no output-shape
  calls) compiles against op_plugin.cpp, but there PYNATIVE launches our BatchNormExt
  with arguments it refuses (code 1, kBadParamCount) and GRAPH fails to create the
  kernel; 2.7.1's (same path) is in namespace ``mindspore``, without strides, and
  includes MindSpore's internal KernelTensor header; 2.7.0's is under ccsrc/ and
  older still. cpu_kernel/build.py (MS_PLUGIN_HEADERS) states where each release has
  the one we use; on 2.7.x the library exports no plugin entry points,
  ``MS_BN_GRAD_OP_PLUGIN=1`` leaves ``MS_OP_PLUGIN_PATH`` alone and warns,
  ``op_plugin_active()`` is False and everything takes the Cell route
  (tests/ut/test_ms_compat.py checks the installed wheel against this).
  BatchNormExt / BatchNormGradExt have the same Python signatures in every supported
  release, so the argument layouts in op_def/*.yaml ``mindspore_primitive`` need no
  per-release variant (tests/ut/test_op_plugin.py checks them on 2.8.0 to 2.10.0).
- CPU kernel factory (the native route's second mechanism, cpu_kernel/factory.py,
  csrc/factory_kernels.cpp): a library of ``NativeCpuKernelMod`` subclasses, compiled on
  the user's machine against the installed wheel's own C++ headers
  (``include/mindspore/ops/kernel/cpu/cpu_kernel.h`` and what it includes) and linked
  against its libraries, registered in MindSpore's CPU kernel factory after import.
  CPU_KERNEL_FACTORY below says, per release, where that header is and which include
  directories, macros and libraries the build takes. Two build settings of the wheels
  must be repeated, or the class layouts differ: ``-D_GLIBCXX_USE_CXX11_ABI=0`` (as for
  every library of ours) and ``ENABLE_FAST_HASH_TABLE`` (``mindspore::HashMap`` is
  robin_hood's table, as the libraries' exported symbols show; without it the 2.7.0
  link fails on ``Primitive``'s constructor, on later releases nothing would say so).
  The wheels are built with glog (``USE_GLOG``), whose headers they do not ship; without
  it ``core/mindrt/include/actor/log.h`` includes ``common/log_adapter.h`` instead of
  ``utils/log_adapter.h``: csrc/ms_factory_internal/ maps the one to the other.
  2.7.1 and 2.7.2 also include headers by paths relative to the package and to
  ``include/`` (both on the list). 2.7.0 is not served: its header is under
  ``ccsrc/plugin/device/cpu/kernel/`` (the factory and ``KernelMod`` in
  ``libmindspore_ops_kernel_common.so``) and such a library builds, loads and registers,
  but PYNATIVE looks a CPU operator up among pyboost's own op classes only ("Not found op
  N9mindspore6kernel7pyboost12BatchNormExtE on device CPU"), so the self-test fails;
  2.7.1 and later fall back to the kernel factory there.
- Compile phase: from 2.7.1 on a GRAPH compile writes its phase on every cell of the
  graph (``Cell._compile_phase``); 2.7.0 only records the phases in the top cell's
  ``_compile_cache``. ``compile_phase`` below reads either, so on 2.7.0
  convert_batchnorm's "already compiled" warning comes for a network that was itself
  compiled, not for a cell taken out of one (COMPILE_PHASE_ON_EVERY_CELL).
- Mixed precision in PYNATIVE: AMP O2/O3's ``to_float`` makes every operator run inside a flagged
  cell cast its inputs, Parameters too, unless the operator's signature marks them written
  (``ops.BatchNorm``'s moving statistics); BatchNormExt's signature does not, so its in-place
  update of the statistics would land in a float16 copy. ``shield_from_mixed_precision`` below
  (the native route's cells, 2.8 on).
- Everything else the tests exercise behaves the same on every supported
  release: ops.Custom(func_type="aot") with Init attributes, the dynamic-shape
  attributes cpp_infer_shape / multi_output / reg_op_name (primitives.py), GRAPH jit
  levels O0-O2, AMP O2, Parameter identity and names through convert_batchnorm,
  and SyncBatchNorm under msrun (mccl on CPU). ``mindspore.set_device`` exists
  in every supported release (tests/ut/test_ms_compat.py), and
  ``set_context(device_target=...)`` works with the same deprecation warning
  in 2.7.0 and 2.10.0.
"""
import os
import re

from .cpu_kernel.build import FACTORY_FIRST_RELEASE

# >= MINIMUM and < BELOW; setup.cfg install_requires states the same range
# (tests/ut/test_ms_compat.py checks that), the README lists the tested releases.
MINIMUM = (2, 7, 0)
BELOW = (2, 11)
SUPPORTED = "mindspore>=2.7.0,<2.11"


class UnsupportedMindSporeError(ImportError):
    """The installed MindSpore is outside the supported range."""


def release(version: str) -> tuple:
    """(major, minor, patch) of a MindSpore version string such as '2.10.0' or '2.7.0rc1'."""
    m = re.match(r"\s*(\d+)\.(\d+)(?:\.(\d+))?", str(version))
    if m is None:
        return None
    return tuple(int(g or 0) for g in m.groups())


def check_version(version: str) -> None:
    """Raises UnsupportedMindSporeError unless `version` is in the supported range."""
    rel = release(version)
    if rel is None or not MINIMUM <= rel < BELOW:
        raise UnsupportedMindSporeError(
            f"mindspore-bn-grad supports MindSpore >=2.7.0,<2.11 (2.7.0 to 2.10.x), found "
            f"MindSpore {version}; install a supported release: pip install '{SUPPORTED}'")


def _installed_version() -> str:
    import mindspore
    return mindspore.__version__


VERSION = _installed_version()
check_version(VERSION)

# See the module docstring, "CPU collectives".
CPU_COLLECTIVES_WORLD_GROUP_ONLY = release(VERSION) < (2, 8)
# See the module docstring, "CPU kernel factory": paths relative to the mindspore package directory.
def _cpu_kernel_factory(rel):
    incs = ("include/mindspore/ops", "include/mindspore/ccsrc", "include/mindspore/core/include",
            "include/third_party", "include/mindspore/ops/include", "include/mindspore/core/mindrt/include",
            "include/mindspore/core/mindrt", "include/third_party/robin_hood_hashing", "include", ".")
    # The wheels are built with MindSpore's fast hash table (robin_hood: their libraries' symbols say so);
    # without it mindspore::HashMap is std::unordered_map and the layouts of the classes holding one differ.
    defines = ("ENABLE_FAST_HASH_TABLE=1",)
    if rel >= FACTORY_FIRST_RELEASE:
        return {"header": "kernel/cpu/cpu_kernel.h", "include_dirs": incs, "defines": defines,
                "libraries": ("lib/libmindspore_core.so", "lib/libmindspore_hardware_abstract.so")}
    return None  # 2.7.0: PYNATIVE does not reach the factory (see the module docstring)


CPU_KERNEL_FACTORY = _cpu_kernel_factory(release(VERSION))
# See the module docstring, "Compile phase".
COMPILE_PHASE_ON_EVERY_CELL = release(VERSION) >= (2, 7, 1)


def package_dir() -> str:
    """The installed mindspore package's directory (its include/ and lib/ are there)."""
    import mindspore
    return os.path.dirname(os.path.abspath(mindspore.__file__))


def requires_grad_nowait(param) -> bool:
    """``param.requires_grad`` without waiting for PYNATIVE's queue (see "Parameter flags").

    The flag lives in the ParamInfo object that the property's setter writes
    (``_param_info``); reading it there skips the getter's pipeline wait.
    """
    info = getattr(param, "_param_info", None)
    if info is None:  # not a Parameter as these releases make it: the public property
        return bool(param.requires_grad)
    return bool(info.requires_grad)


def pynative_sync() -> None:
    """Waits for PYNATIVE's queued launches (``ms.runtime.synchronize()`` is not supported on CPU)."""
    try:
        from mindspore.graph.api import _pynative_executor  # 2.8 and later
    except ImportError:  # 2.7
        from mindspore.common.api import _pynative_executor
    _pynative_executor.sync()


def pynative_forget_kernels() -> None:
    """Makes PYNATIVE create its CPU kernels anew: it keeps one kernel per operator and attributes and
    resizes it for new shapes, so a BatchNormGrad kernel created before ours were registered would
    stay MindSpore's (``PyNativeExecutor::ClearRes``, which MindSpore itself calls after a failed
    compile: it waits for the queue, then drops the cached kernels and the grad executor's cached
    cells, which are rebuilt on their next call)."""
    try:
        from mindspore.graph.api import _pynative_executor  # 2.8 and later
    except ImportError:  # 2.7
        from mindspore.common.api import _pynative_executor
    _pynative_executor.clear_res()


# ---------------------------------------------------------------------------------------------
# MindSpore internals: every private name of MindSpore this package uses goes through here, so a
# release that moves one breaks in one place (tests/ut/test_ms_compat.py checks each of them on
# the installed release; scripts/test_matrix.sh runs that on every supported one).
# ---------------------------------------------------------------------------------------------

def batchnorm_base():
    """``mindspore.nn.layer.normalization._BatchNorm``: the base of nn.BatchNorm1d/2d/3d and SyncBatchNorm."""
    from mindspore.nn.layer.normalization import _BatchNorm
    return _BatchNorm


def drop_primitive(cell, name) -> None:
    """Forgets the primitive attribute ``name`` of ``cell`` (``Cell._primitives``) before a Cell
    takes its place: a Cell keeps its primitives in a registry of their own."""
    cell._primitives.pop(name, None)  # pylint: disable=protected-access


def cell_primitives(cell) -> dict:
    """The primitive attributes of ``cell`` (``Cell._primitives``): name -> primitive."""
    return dict(getattr(cell, "_primitives", None) or {})


def compile_phase(cell):
    """The GRAPH-mode compile phase of the last graph ``cell`` was compiled into (``Cell._compile_phase``,
    set on every cell of the graph), or None when it never was. 2.7.0 has no ``_compile_phase``: there
    the phases a cell was compiled under as the graph's top cell (``Cell._compile_cache``, a set), so
    the cells inside a compiled graph say None (see "Compile phase" in the module docstring)."""
    if hasattr(cell, "_compile_phase"):
        return cell._compile_phase  # pylint: disable=protected-access
    phases = getattr(cell, "_compile_cache", None)
    return sorted(phases)[-1] if phases else None


def rewrite_black_list() -> list:
    """The classes ``mindspore.rewrite`` (AMP O1) keeps as they are (``namespace._subtree_black_list``)."""
    from mindspore.rewrite.common import namespace
    return namespace._subtree_black_list  # pylint: disable=protected-access


def shield_from_mixed_precision(cell) -> None:
    """PYNATIVE: the operators ``cell`` runs get no mixed-precision casts, even inside a cell that
    ``to_float`` flagged. A flagged cell's call pushes its ``mixed_precision_type`` on PYNATIVE's
    stack (``Cell._call_pre_process``), and every operator run until the pop casts its inputs to it,
    Parameters included; a cell whose own type is ``MixedPrecisionType.NOTSET`` pushes "no cast"
    for its own call (and the cell's call then takes the path that pushes). GRAPH mode does not
    read this attribute."""
    from mindspore._c_expression import MixedPrecisionType
    object.__setattr__(cell, "mixed_precision_type", MixedPrecisionType.NOTSET)


def context_param(name):
    """A context parameter read from MindSpore's C++ context (``_c_expression.MSContext``), far cheaper
    than ``mindspore.get_context`` (docs/performance.md). None where this release has no such path."""
    try:
        from mindspore._c_expression import MSContext, ms_ctx_param
        return MSContext.get_instance().get_param(getattr(ms_ctx_param, name))
    except (ImportError, AttributeError, RuntimeError, TypeError):
        return None


def ascend_soc_version() -> str:
    """The Ascend SoC MindSpore reports (``_c_expression.MSContext.get_ascend_soc_version``)."""
    from mindspore._c_expression import MSContext
    return MSContext.get_instance().get_ascend_soc_version()


def builtin_batchnorm_grads():
    """MindSpore's own BatchNorm backward primitives (``ops.operations._grad_ops``), for the benchmarks:
    (BatchNormGrad, BatchNormGradGrad)."""
    from mindspore.ops.operations import _grad_ops
    return _grad_ops.BatchNormGrad, _grad_ops.BatchNormGradGrad


def global_comm():
    """``mindspore.communication._comm_helper.GlobalComm`` (``INITED``, ``WORLD_COMM_GROUP``)."""
    from mindspore.communication._comm_helper import GlobalComm
    return GlobalComm


def batch_norm_grad_ext_pynative():
    """MindSpore's pyboost BatchNormGradExt, called with its kernel's argument order (dout, input, weight,
    running_mean, running_var, saved_mean, saved_rstd, training, eps, output_mask). The public primitive's
    PYNATIVE ``__call__`` hands its init arguments after ``output_mask`` and fails in 2.10; the benchmark
    times the native route's backward through this."""
    from mindspore.ops.auto_generate.pyboost_inner_prim import batch_norm_grad_ext_impl
    return batch_norm_grad_ext_impl


def vmap_rules_getters():
    """``mindspore.ops._vmap.vmap_base.vmap_rules_getters``: where ops.vmap looks a primitive's rule up
    by name (None where this release keeps it elsewhere)."""
    try:
        from mindspore.ops._vmap.vmap_base import vmap_rules_getters as getters
    except ImportError:
        return None
    return getters


def syncbatchnorm_group_registry() -> dict:
    """MindSpore's registry of the groups its SyncBatchNorm created (rank list key -> group name),
    shared so that one rank list makes one group (``normalization._syncbatchnorm_group_dict``)."""
    from mindspore.nn.layer import normalization
    return normalization._syncbatchnorm_group_dict()  # pylint: disable=protected-access
