"""The one primitive factory: an operator prototype (op_def/*.yaml) as a MindSpore ``ops.Custom``.

``Primitive(filename, attrs, make_bprop=None)`` is what BatchNormBackward,
BatchNormDoubleBackward and the SyncBatchNorm pair (BatchNormReduceBackward,
BatchNormElemtBackward) are built from; each of them only names its
prototype, checks its attributes and, where it has one, gives its bprop.
From the prototype and the checked attributes it wires:

- the infer functions (infer.make_infer), which check every argument
  while MindSpore builds the graph, before any kernel runs;
- the kernel: on CPU the aot entry ``<op_name>`` of the library cpu_kernel
  builds, on Ascend the Ascend C operator ``<op_name>`` (ascend.custom_kwargs);
- the attributes under the names the kernels read (``kernel_name``); a bool
  tuple goes as a list of ints (the aot Init reads an int vector there), a
  float with ``kernel_bits_name`` also exactly, as its int64 bits (CPU);
- unknown dims in GRAPH mode (``Cell.set_inputs`` with None), when the CPU
  library has a C++ infer for the operator (``<op_name>InferShape``), unless
  the class says ``static_shapes = True`` (for PYNATIVE launches only: see
  ``_enable_dynamic_shape``);
- a bprop that raises a clear error when the operator is not differentiable;
- its ``ops.vmap`` rule (vmap.py), from the same prototype facts.
"""
import struct

from . import ms_compat  # noqa: F401  (first: refuses an unsupported MindSpore release)
from mindspore import ops
from mindspore.common import dtype as mstype

from . import target
from .checks import fail
from .infer import make_infer
from .spec import load_opdef
from . import vmap


def kernel_kwargs(filename=None) -> dict:
    """func / reg_info of ops.Custom for the prototype's kernel on the current device target."""
    opdef = load_opdef(filename) if filename else load_opdef()
    target.check_device_target(opdef.op_name)
    if target.device_target() == "Ascend":
        from . import ascend
        return ascend.custom_kwargs(filename)
    from .cpu_kernel import native
    return {"func": native.aot_func(opdef.op_name)}


def check_kernel_ready(filename=None) -> None:
    """Builds or loads the prototype's kernel now and checks its settings (cache directory,
    compiler, MS_BN_GRAD_NUM_THREADS): raises their clear error in Python.

    For what gets compiled into a GRAPH graph later: MindSpore's parser turns an exception
    raised while it reads an attribute into an AttributeError of its own."""
    kernel_kwargs(filename)


class Primitive(ops.Custom):
    """ops.Custom(func_type="aot") of the prototype `filename` with checked attributes `attrs`.

    Usable in PYNATIVE code and inside a GRAPH_MODE ``Cell.construct``. Optional
    tensors may be None. ``op_attrs`` holds the attributes (a dict).
    ``make_bprop(opdef, attrs)`` gives the bprop (default: ``not_differentiable``);
    it is called once the device target is known to be supported.
    """

    # True: no C++ shape infer. Such a primitive cannot run with unknown dims, and PYNATIVE,
    # where every launch has concrete shapes, launches it faster (see _enable_dynamic_shape).
    # A primitive with the C++ infer hands its PYNATIVE launches to a twin without it (__call__).
    static_shapes = False

    def __init__(self, filename, attrs, make_bprop=None):
        self._init_args = (filename, attrs, make_bprop)
        self._eager = None
        opdef = load_opdef(filename) if filename else load_opdef()
        infer_shape, infer_dtype = make_infer(attrs, opdef)
        kernel = kernel_kwargs(filename)  # first: it checks the device target
        bprop = make_bprop(opdef, attrs) if make_bprop else not_differentiable(opdef)
        super().__init__(out_shape=infer_shape, out_dtype=infer_dtype, func_type="aot", bprop=bprop, **kernel)
        for a in opdef.attrs:
            value = attrs[a.name]
            self.add_prim_attr(a.kernel_attr, [int(b) for b in value] if a.type == "bool_tuple" else value)
            if a.kernel_bits_name and not self.is_ascend_c:
                self.add_prim_attr(a.kernel_bits_name, struct.unpack("<q", struct.pack("<d", value))[0])
        self.opdef = opdef
        self.op_attrs = attrs
        self.dynamic_shape = not (self.is_ascend_c or self.static_shapes) and _has_cpp_infer(opdef.op_name)
        vmap.register()  # ops.vmap over it (vmap.fold_rule); at first use, not at import
        if self.dynamic_shape:
            _enable_dynamic_shape(self, opdef.op_name)

    def __call__(self, *args):
        """A launch from PYNATIVE code (a graph compiles the primitive, it never calls it).

        With the C++ shape infer, MindSpore would run it (and dlopen our library for it) at every
        PYNATIVE launch; PYNATIVE has no unknown dims, so the launch goes to a twin without it, made
        once (same attributes and bprop). Whoever calls, our cells' bprops or a user's, gets it."""
        if not self.dynamic_shape:
            return super().__call__(*args)
        eager = self._eager
        if eager is None:
            eager = type(self).__new__(type(self))
            eager.static_shapes = True  # read by Primitive.__init__: no C++ infer
            Primitive.__init__(eager, *self._init_args)
            self._eager = eager
        return eager(*args)

    def __infer__(self, *args):
        # GRAPH mode hands non-Tensor arguments (lists, NumPy arrays, Python
        # scalars) to the infer step as nested shapes or scalar types: reject
        # them by name before the shape checks misread them.
        inputs = self.opdef.inputs
        op = self.opdef.op_name
        if len(args) != len(inputs):  # else a missing one reads as None, an extra one reaches the kernel
            fail(TypeError, "inputs", f"{len(inputs)} tensors ({', '.join(a.name for a in inputs)}; "
                 "None for an absent optional one)", f"{len(args)}", op=op)
        for arg, given in zip(inputs, args):
            _check_tensor_arg(arg, given.get("dtype"), op)
        if self.dynamic_shape and any(_is_tensor(g.get("dtype")) and min(g["shape"], default=0) < 0
                                      for g in args):
            self._note_present([int(_is_tensor(g.get("dtype"))) for g in args])
        return super().__infer__(*args)

    def _note_present(self, present):
        """With unknown dims, tells the C++ infer which inputs its shape list holds (None ones are left
        out): from then on it checks each launch's shapes (csrc/aot_entry.cpp CheckShapes), which only
        it sees. Set only then, since it runs before this infer and would preempt its errors. One
        primitive used with two None patterns gets [-1]: then only grad_out and input are checked."""
        seen = getattr(self, "_present", None)
        if seen == present or seen == [-1]:
            return
        self._present = present if seen is None else [-1]
        self.add_prim_attr("input_present", self._present)


def _is_tensor(dtype):
    return isinstance(dtype, mstype.TensorType)


def _check_tensor_arg(arg, dtype, op):
    if isinstance(dtype, mstype.TensorType):
        return
    if dtype is None or isinstance(dtype, type(mstype.type_none)):
        if arg.optional:
            return
        fail(TypeError, arg.name, "a mindspore.Tensor", "NoneType", op=op)  # as the functional form says
    got = type(dtype).__name__ if isinstance(dtype, (list, tuple)) else f"a non-Tensor value of type {dtype}"
    fail(TypeError, arg.name, "a mindspore.Tensor" + (" or None" if arg.optional else ""), got, op=op)


def _has_cpp_infer(op_name) -> bool:
    from .cpu_kernel import native
    return native.has_symbol(op_name + "InferShape")


def _enable_dynamic_shape(op, op_name):
    """Lets the aot op run in GRAPH mode with unknown dims (Cell.set_inputs with None).

    With dynamic shapes MindSpore 2.10 infers the output shapes again before
    every launch, in C++, on a primitive that is no longer the Python one: a
    Python out_shape cannot run there ("The prim is not a PrimitivePy"). So:
    - cpp_infer_shape: output shapes come from <op_name>InferShape in the
      kernel library (grad_out's shape and its channel dim), at compile and
      at each launch. MindSpore still calls the Python infer at compile (for
      the dtypes), which runs every check on the known dims and raises.
    - multi_output: the C++ infer returns a tuple of shapes.
    - reg_op_name: read by the C++ infer (its absence is the
      "The pointer[value] is null" error); set by reg_info, which we do not use.
    The price: with cpp_infer_shape set, MindSpore 2.10 also runs the C++ infer at
    every PYNATIVE launch, each time resolving the library's path (realpath) and
    dlopen/dlsym/dlclose-ing it, a measurable part of each launch (docs/performance.md,
    "No C++ shape infer in PYNATIVE"). PYNATIVE never needs it, so the launches
    that only PYNATIVE makes use primitives with ``static_shapes = True``.
    """
    op.add_prim_attr("reg_op_name", op_name)
    op.add_prim_attr("cpp_infer_shape", True)
    op.multi_output = True
    op.add_prim_attr("multi_output", True)


def not_differentiable(opdef, why="it is not differentiable (third-order gradients of BatchNorm are not "
                                   "supported)"):
    """A bprop that raises (in GRAPH mode: while the graph compiles) why the op has no derivative."""
    msg = f"{opdef.op_name}: {why}"

    # GRAPH mode wants the bprop's parameters spelled out: the inputs, out, dout.
    def bprop5(a, b, c, d, e, out, dout):
        raise RuntimeError(msg)

    def bprop8(a, b, c, d, e, f, g, h, out, dout):
        raise RuntimeError(msg)

    def bprop10(a, b, c, d, e, f, g, h, i, j, out, dout):
        raise RuntimeError(msg)

    return {5: bprop5, 8: bprop8, 10: bprop10}[len(opdef.inputs)]
