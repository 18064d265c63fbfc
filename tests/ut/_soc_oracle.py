"""An independent encoding of spec section 3 (per-SoC dtype and format rules).

Written from the spec's prose alone; it does not read the support YAML or
import the package, so tests comparing the package against it can fail.
"""
FLOATS = ("float16", "bfloat16", "float32", "float64")
NON_FLOATS = ("int32", "bool")
PARAMS = ("weight", "running_mean", "running_var", "save_mean", "save_invstd")
INPUTS = ("grad_out", "input") + PARAMS
OUTPUTS = ("grad_input", "grad_weight", "grad_bias")

# Atlas training / inference: no bfloat16; A2 / A3 / Atlas 350: bfloat16 too;
# CPU: also float64 (section 3, last paragraph).
SOC_DTYPES = {
    "ascend910": {"float16", "float32"},
    "ascend310p": {"float16", "float32"},
    "ascend910b": {"float16", "bfloat16", "float32"},
    "ascend910_93": {"float16", "bfloat16", "float32"},
    "ascend950": {"float16", "bfloat16", "float32"},
    "cpu": set(FLOATS),
}
SOCS = tuple(SOC_DTYPES)
SAME_DTYPE_SOCS = {"ascend910", "ascend310p", "ascend910b", "ascend910_93"}

ACLNN_FORMATS = {"NC", "NCL", "NCHW", "NHWC", "NCDHW", "NDHWC", "ND"}
CHANNEL_LAST = {"NHWC", "NDHWC"}


def format_name(data_format, rank):
    """The ACLNN format name of a call (spec section 2: shapes and their formats)."""
    last = data_format in ("NHWC", "NDHWC")
    if rank == 2:
        return "NC"
    if rank == 3:
        return "NLC" if last else "NCL"
    if rank == 4:
        return "NHWC" if last else "NCHW"
    if rank == 5:
        return "NDHWC" if last else "NCDHW"
    return "ND_CHANNEL_LAST" if last else "ND"


def format_ok(soc, name):
    if soc == "cpu":
        return True                                   # both layouts, every rank
    if soc == "ascend950":
        return name in ACLNN_FORMATS
    return name in ACLNN_FORMATS - CHANNEL_LAST


def output_dtypes(dt):
    """Spec section 2: grad_input like grad_out; grad_weight / grad_bias like weight, else grad_out."""
    p = dt.get("weight") or dt["grad_out"]
    return {"grad_input": dt["grad_out"], "grad_weight": p, "grad_bias": p}


def dtype_offenders(soc, dt):
    """Names of tensors that break a dtype rule of `soc` (empty: accepted). dt: input -> dtype or None."""
    dt = {n: dt.get(n) for n in INPUTS}
    g = dt["grad_out"]
    every = {**dt, **output_dtypes(dt)}
    bad = {n for n, d in every.items() if d is not None and d not in SOC_DTYPES[soc]}
    if dt["input"] != g:
        bad.add("input")
    given = [p for p in PARAMS if dt[p] is not None]
    if soc in SAME_DTYPE_SOCS:
        bad |= {p for p in given if dt[p] != g}
    elif soc == "ascend950":
        # gradOut FLOAT32 -> FLOAT32; FLOAT16 -> FLOAT16 or FLOAT32; BFLOAT16 -> BFLOAT16 or FLOAT32.
        bad |= {p for p in given if dt[p] not in (g, "float32")}
        if dt["running_mean"] and dt["running_var"] and dt["running_var"] != dt["running_mean"]:
            bad.add("running_var")
        if dt["save_mean"] and dt["save_invstd"] and dt["save_invstd"] != dt["save_mean"]:
            bad.add("save_invstd")
        # grad_weight / grad_bias take weight's dtype here, which the weight rule
        # already bounds; "weight FLOAT16 -> gradWeight FLOAT16 or FLOAT32" holds.
    return bad


def verdict(soc, dt, data_format="NCHW", rank=4):
    """None if accepted, else (exception type, set of tensor names that may be blamed).

    Shapes (and so formats) are inferred before dtypes, so a bad format wins.
    """
    if not format_ok(soc, format_name(data_format, rank)):
        return ValueError, {"grad_out", "input", "data_format"}
    bad = dtype_offenders(soc, dt)
    return (TypeError, bad) if bad else None
