"""ops.Custom wiring of the Ascend C operator (ascend_impl/), used on an Ascend device.

``ascend_custom_kwargs(attrs)`` returns the keyword arguments the public
primitive adds to ``ops.Custom(..., func_type="aot")``:

    {"func": "BatchNormBackward",            # the Ascend C op type (from the YAML)
     "reg_info": <CustomRegOp op info>}      # rows generated from op_def/ for the active SoC

It raises RuntimeError, saying how to build and install the op package,
when no installed custom op package provides the operator.
"""
import glob
import os

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


def ascend_custom_kwargs(attrs) -> dict:
    """func / reg_info of ops.Custom for the Ascend C operator.

    attrs: the normalized attributes (training, eps, output_mask, data_format);
    they reach the operator as primitive attributes, so only the package
    lookup and the registration rows depend on the target here.
    """
    del attrs  # the rows cover every attribute value
    op_type = load_opdef().op_name
    if installed_package(op_type) is None:
        searched = ", ".join(_candidate_dirs()) or "nothing (ASCEND_CUSTOM_OPP_PATH and ASCEND_OPP_PATH unset)"
        raise RuntimeError(f"BatchNormBackward: the Ascend C op package providing {op_type} is not installed "
                           f"(searched {searched}); {BUILD_HINT}")
    from ._reg import ascend_reg_info
    return {"func": op_type, "reg_info": ascend_reg_info()}
