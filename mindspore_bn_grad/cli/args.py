"""Argument types shared by the commands (and the benchmarks): a bad value is refused by argparse,
naming the option, with exit status 2."""
import argparse


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


MODES = ("GRAPH", "PYNATIVE")  # MindSpore's execution modes, in any letter case on the command line


def mode_name(text: str) -> str:
    """'graph', 'Graph', 'GRAPH' -> 'GRAPH' (the spelling of ms.GRAPH_MODE); likewise PYNATIVE."""
    value = text.strip().upper()
    if value not in MODES:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(MODES)} (any case), got {text!r}")
    return value
