"""Active target (SoC) and its dtype/format rules.

Placeholder interface: the rules engine (issue 3) reads them from
op_def/batch_norm_backward_support.yaml. The infer functions call
check_dtypes() and check_format() at graph build time.
"""
import os

_override = None


def set_target_soc(name):
    global _override
    _override = None if name is None else str(name).lower()


def get_target_soc():
    return _override or (os.environ.get("MS_BN_GRAD_SOC") or "").lower() or None


def active_target() -> str:
    return get_target_soc() or "cpu"


def check_dtypes(dtypes) -> None:
    """dtypes: argument/output name -> MindSpore dtype name ('float16', ...) or None when absent."""


def check_format(format_name: str) -> None:
    """format_name: the ACLNN format name of the call (NCHW, NHWC, ND, ...)."""
