"""The Ascend C operators (ascend_impl/) for ops.Custom: registration rows and where the op package is.

``custom_kwargs(filename)`` returns the keyword arguments a primitive
(primitives.py) adds to ``ops.Custom(..., func_type="aot")`` on an Ascend device:

    {"func": "BatchNormBackward",            # the Ascend C op type (op_name in the YAML)
     "reg_info": <CustomRegOp op info>}      # rows generated from op_def/ for the active SoC

It raises RuntimeError, saying how to build and install the op package,
when no installed custom op package provides the operator.

``ascend_reg_info(soc, absent=(), derived_outputs=True, filename=None)``
builds ``CustomRegOp(<op_name>)`` with the prototype's input / output /
attribute names and one ``dtype_format`` row per accepted combination of
``support_rules.combinations`` (duplicates dropped), ``.target("Ascend")``,
and returns ``.get_op_info()``.

Formats: grad_out / input / grad_input carry the call's ACLNN format
(NCHW, NHWC, NCDHW, NDHWC; NC / NCL / ND are MindSpore's DefaultFormat);
the per-channel tensors are 1-D and always DefaultFormat. Optional inputs
listed in ``absent`` get ``DataType.None_None`` in their slot.
"""
import glob
import os

from . import support_rules, target
from .spec import load_opdef

VENDOR = "mindspore_bn_grad"
BUILD_HINT = ("build and install it on the Ascend host with `scripts/build_ascend.sh --soc <soc>` "
              "(needs the CANN toolkit: set ASCEND_HOME_PATH or source set_env.sh), then export "
              "ASCEND_CUSTOM_OPP_PATH=<install dir>/vendors/" + VENDOR +
              " (build_ascend.sh prints the exact line)")


def _candidate_dirs():
    """Vendor directories where CANN looks for custom op packages."""
    dirs = [d for d in os.environ.get("ASCEND_CUSTOM_OPP_PATH", "").split(":") if d]
    opp = os.environ.get("ASCEND_OPP_PATH")
    if opp:
        dirs += glob.glob(os.path.join(opp, "vendors", "*"))
    return dirs


def installed_package(op_type=None):
    """The vendor directory whose ops-info declares the operator, or None."""
    op_type = op_type or load_opdef().op_name
    for d in _candidate_dirs():
        for info in glob.glob(os.path.join(d, "op_impl", "ai_core", "tbe", "config", "*", "aic-*-ops-info.json")):
            try:
                with open(info, encoding="utf-8") as f:
                    if f'"{op_type}"' in f.read():
                        return d
            except OSError:
                continue
    return None


def custom_kwargs(filename=None) -> dict:
    """func / reg_info of ops.Custom for the Ascend C operator of the prototype `filename`.

    The attributes reach the operator as primitive attributes, so only the
    package lookup and the registration rows depend on the target here.
    """
    op_type = load_opdef(filename).op_name if filename else load_opdef().op_name
    if installed_package(op_type) is None:
        searched = ", ".join(_candidate_dirs()) or "nothing (ASCEND_CUSTOM_OPP_PATH and ASCEND_OPP_PATH unset)"
        raise RuntimeError(f"{op_type}: the Ascend C op package providing it is not installed "
                           f"(searched {searched}); {BUILD_HINT}")
    return {"func": op_type, "reg_info": ascend_reg_info(filename=filename)}


# ---------------------------------------------------------------- registration rows

_DTYPE_PREFIX = {"float16": "F16", "bfloat16": "BF16", "float32": "F32", "float64": "F64", "int32": "I32",
                 "int64": "I64"}
# ACLNN format name -> MindSpore DataType format suffix.
_FORMAT_SUFFIX = {"NC": "Default", "NCL": "Default", "ND": "Default", "NCHW": "NCHW",
                  "NHWC": "NHWC", "NCDHW": "NCDHW", "NDHWC": "NDHWC",
                  "NLC": "ChannelLast", "ND_CHANNEL_LAST": "ChannelLast"}
# Prototype attribute type -> CustomRegOp value_type (output_mask reaches kernels as ints).
_ATTR_VALUE_TYPE = {"bool": "bool", "float": "float", "str": "str", "bool_tuple": "listInt"}


def data_type(dtype, fmt="ND"):
    """('float16', 'NHWC') -> DataType.F16_NHWC; dtype None -> DataType.None_None."""
    from mindspore.ops import DataType
    if dtype is None:
        return DataType.None_None
    return getattr(DataType, f"{_DTYPE_PREFIX[dtype]}_{_FORMAT_SUFFIX[fmt]}")


def reg_rows(soc, absent=(), derived_outputs=True, opdef=None):
    """Distinct dtype_format rows (tuples of DataType pairs, inputs then outputs)."""
    opdef = opdef or load_opdef()
    full = {a.name for a in opdef.inputs + opdef.outputs if a.shape == "full"}
    names = opdef.input_names + opdef.output_names
    rows, seen = [], set()
    for combo in support_rules.combinations(soc, opdef, absent, derived_outputs):
        row = tuple(data_type(combo[n], combo["format"] if n in full else "ND") for n in names)
        if row not in seen:
            seen.add(row)
            rows.append(row)
    return rows


def ascend_reg_info(soc=None, absent=(), derived_outputs=True, filename=None):
    """CustomRegOp(...).get_op_info() for an Ascend SoC (default: the active target).

    filename: the prototype (default BatchNormBackward's; or a sync op's YAML)."""
    from mindspore.ops import CustomRegOp
    soc = support_rules.resolve(soc) if soc is not None else target.active_target()
    if soc not in support_rules.targets(device="Ascend"):
        raise ValueError(f"BatchNormBackward: target SoC expected an Ascend SoC "
                         f"({', '.join(support_rules.targets(device='Ascend'))}), got {soc!r}")
    opdef = load_opdef(filename) if filename else load_opdef()
    reg = CustomRegOp(opdef.op_name)
    for i, a in enumerate(opdef.inputs):
        reg = reg.input(i, a.name, "optional" if a.optional else "required")
    for i, o in enumerate(opdef.outputs):
        reg = reg.output(i, o.name, "required")
    for a in opdef.attrs:
        reg = reg.attr(a.kernel_attr, "required", _ATTR_VALUE_TYPE[a.type])
    for row in reg_rows(soc, absent, derived_outputs, opdef):
        reg = reg.dtype_format(*row)
    return reg.target("Ascend").get_op_info()
