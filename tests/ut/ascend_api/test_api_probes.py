"""Illegal calls built against the public asc-devkit headers and the project's
stand-ins exactly like the kernels (api_probes.cpp, one per case): each must
stop its core with a message naming the rule and the probe's source line --
the stand-ins' own checks (the rule table) or, where the public headers check
first, their message followed by the stand-ins' report of where it fired.
Skipped without the headers (see docs/ascend.md)."""
import subprocess

import pytest

import apilib
import simlib  # probe_line

pytestmark = pytest.mark.ascend_api

SOURCE = apilib.ROOT / "tests" / "ut" / "ascend_api" / "api_probes.cpp"
HEADERS_FIRST = "raised inside the public Ascend C headers' own checks"

CASES = [
    # case, words of stdout + stderr (the headers' message goes to stdout, the stand-ins' to stderr)
    ("add_unaligned", ["Failed to check dst tensor start address alignment in Add", HEADERS_FIRST]),
    ("muls_past_tensor", ["Muls: dst: access of 8192 bytes exceeds the tensor (tensor holds 4096 bytes)"]),
    ("datacopy_7_floats", ["count * sizeof(T) must be 32B align", HEADERS_FIRST]),
    ("datacopy_ub_plus_4", ["Failed to check dst tensor start address alignment in DataCopy", HEADERS_FIRST]),
    ("add_repeat_255", ["Add: dst: access of 65280 bytes exceeds the tensor (tensor holds 4096 bytes)"]),
    ("add_mask_high_word", ["Add: mask high word must be 0 for 32-bit elements"]),
    ("add_dst_block_stride_0", ["Add: destination block stride 0"]),
    ("add_partial_overlap", ["Add: dst and src0 overlap partially"]),
    ("datacopy_block_count", ["blockCount", "4095", "4096"]),
    ("datacopypad_padding", ["leftPadding", "32"]),
    ("datacopypad_block_len", ["blockLen", "2097151", "2097152"]),
]


@pytest.fixture(scope="module")
def probe():
    if not apilib.headers_available():
        pytest.skip(apilib.SKIP_REASON)
    return apilib.build_probe(SOURCE)


def _run(probe, case):
    return subprocess.run([str(probe), case], capture_output=True, text=True, timeout=300)


def test_legal_baseline_runs(probe):
    proc = _run(probe, "ok")
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("case,words", CASES, ids=[c[0] for c in CASES])
def test_illegal_call_stops_with_a_message(probe, case, words):
    proc = _run(probe, case)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "[bnb-check] core 0:" in proc.stderr, out
    for w in words:
        assert w in out, (w, out)
    assert f"api_probes.cpp:{simlib.probe_line(SOURCE, case)}" in proc.stderr, out
