"""CustomRegOp registration info for the Ascend target, generated from the YAML.

``ascend_reg_info(soc, absent=(), derived_outputs=True)`` builds
``CustomRegOp(<op_name>)`` with the prototype's input / output / attribute
names and one ``dtype_format`` row per accepted combination of
``_soc.accepted_combinations(soc, absent, derived_outputs)`` (duplicates
dropped), ``.target("Ascend")``, and returns ``.get_op_info()``.

Formats: grad_out / input / grad_input carry the call's ACLNN format
(NCHW, NHWC, NCDHW, NDHWC; NC / NCL / ND are MindSpore's DefaultFormat);
the per-channel tensors are 1-D and always DefaultFormat. Optional inputs
listed in ``absent`` get ``DataType.None_None`` in their slot.
"""
from .spec import load_opdef
from . import support_rules as _soc

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


# SyncBatchNorm steps (op_def/batch_norm_{reduce,elemt}_backward.yaml, `layouts_from`
# BatchNormBackward): each tensor takes the dtype of the BatchNormBackward tensor
# named here (mean / invstd are save_mean / save_invstd, the sums mean's dtype);
# `counter` takes each of its own Ascend dtypes (`dtypes` of the counter input).
SYNC_SOURCE = {"grad_out": "grad_out", "input": "input", "mean": "save_mean", "invstd": "save_invstd",
               "weight": "weight", "sum_dy": "save_mean", "sum_dy_xmu": "save_mean", "grad_input": "grad_input",
               "grad_weight": "grad_weight", "grad_bias": "grad_bias"}


def combinations(soc, opdef=None, absent=(), derived_outputs=True):
    """BatchNormBackward's accepted combinations, or a sync op's derived from them."""
    base = load_opdef()
    opdef = opdef or base
    for combo in _soc.accepted_combinations(soc, absent, derived_outputs):
        if opdef.op_name == base.op_name:
            yield combo
            continue
        names = opdef.input_names + opdef.output_names
        for counter in (opdef.input("counter").allowed_dtypes("Ascend") if "counter" in names else (None,)):
            out = {"format": combo["format"]}
            for n in names:
                out[n] = counter if n == "counter" else combo[SYNC_SOURCE[n]]
            yield out


def reg_rows(soc, absent=(), derived_outputs=True, opdef=None):
    """Distinct dtype_format rows (tuples of DataType pairs, inputs then outputs)."""
    opdef = opdef or load_opdef()
    full = {a.name for a in opdef.inputs + opdef.outputs if a.shape == "full"}
    names = opdef.input_names + opdef.output_names
    rows, seen = [], set()
    for combo in combinations(soc, opdef, absent, derived_outputs):
        row = tuple(data_type(combo[n], combo["format"] if n in full else "ND") for n in names)
        if row not in seen:
            seen.add(row)
            rows.append(row)
    return rows


def ascend_reg_info(soc=None, absent=(), derived_outputs=True, filename=None):
    """CustomRegOp(...).get_op_info() for an Ascend SoC (default: the active target).

    filename: the prototype (default BatchNormBackward's; or a sync op's YAML)."""
    from mindspore.ops import CustomRegOp
    soc = _soc.resolve(soc) if soc is not None else _soc.active_target()
    if soc not in _soc.targets(device="Ascend"):
        raise ValueError(f"BatchNormBackward: target SoC expected an Ascend SoC "
                         f"({', '.join(_soc.targets(device='Ascend'))}), got {soc!r}")
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
