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
    # repeat by repeat (SIMD-API/通用说明和约束.md, 通用地址重叠约束): repeat 0's dst is repeat 1's src1
    ("add_earlier_dst_later_src1", ["Add: an earlier repeat's dst overlaps a later repeat's src1"]),
    ("datacopy_block_count", ["blockCount", "4095", "4096"]),
    ("datacopypad_padding", ["leftPadding", "32"]),
    ("datacopypad_block_len", ["blockLen", "2097151", "2097152"]),
    # each operand within its own LocalTensor / TPipe buffer (the headers check the copies' tensor sizes first)
    ("datacopy_past_queue_buffer", ["dstLocal size in DataCopy", "8192", "4096", HEADERS_FIRST]),
    ("datacopy_params_past_buffer", ["dstLocal size in DataCopy", "8192", "4096", HEADERS_FIRST]),
    ("datacopypad_past_buffer", ["dstLocal size in DataCopyPad", "8192", "4096", HEADERS_FIRST]),
    ("cast_past_buffer", ["Cast: dst: access of 8192 bytes exceeds the tensor (tensor holds 4096 bytes)"]),
    ("reducesum_past_buffer", ["ReduceSum: src: access of 8192 bytes exceeds the tensor (tensor holds 4096 bytes)"]),
    ("setsize_past_buffer", ["vmuls: src runs past the end of its TPipe buffer (UB bytes 0..8192, buffer 0..4096)"]),
    # narrowing at the kernel's call (bnb::Narrow, the kernels' casts of API arguments): the unnarrowed value
    ("narrow_block_count", ["DataCopyPad blockCount: value does not fit the 16-bit unsigned field it is cast to "
                            "(it would wrap) (value 65544)"]),
    ("narrow_count", ["Duplicate count: value does not fit the 32-bit signed field", "(value 4294967360)"]),
    # pipe hazards: both instructions and their lines (the earlier one's is checked in test_hazard_names_both)
    ("raw_mte2_v_no_wait", ["vadd: pipe hazard, read-after-write on UB bytes 0..4096 with copy_gm_to_ubuf (PIPE_MTE2",
                            "nothing orders PIPE_MTE2 before PIPE_V"]),
    ("raw_v_mte3_no_barrier", ["copy_ubuf_to_gm: pipe hazard, read-after-write on UB bytes 0..4096 with vector_dup "
                               "(PIPE_V", "nothing orders PIPE_V before PIPE_MTE3"]),
    ("war_v_mte2_no_wait", ["copy_gm_to_ubuf: pipe hazard, write-after-read on UB bytes 0..4096 with copy_ubuf_to_gm "
                            "(PIPE_MTE3", "nothing orders PIPE_MTE3 before PIPE_MTE2"]),
    ("gm_raw_mte3_mte2", ["copy_gm_to_ubuf: pipe hazard, read-after-write on GM bytes +4096 with copy_ubuf_to_gm "
                          "(PIPE_MTE3", "nothing orders PIPE_MTE3 before PIPE_MTE2"]),
    ("fixed_event_id_vs_queue", ["SetFlag: SetFlag on an event id already set and not yet waited for: undefined "
                                 "behaviour (PIPE_MTE2 -> PIPE_V, event 0)"]),
    ("wait_without_set", ["WaitFlag: WaitFlag with no SetFlag pending: the core would wait forever "
                          "(PIPE_MTE2 -> PIPE_V, event 3)"]),
]
# hazard case -> the probe line of the earlier instruction (the line above the PROBE mark)
HAZARDS = ("raw_mte2_v_no_wait", "raw_v_mte3_no_barrier", "war_v_mte2_no_wait", "gm_raw_mte3_mte2")


@pytest.fixture(scope="module")
def probe():
    if not apilib.headers_available():
        pytest.skip(apilib.SKIP_REASON)
    return apilib.build_probe(SOURCE)


def _run(probe, case):
    return subprocess.run([str(probe), case], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("case", ["ok", "flags_order_it"])
def test_legal_baseline_runs(probe, case):
    proc = _run(probe, case)
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


@pytest.mark.parametrize("case", HAZARDS)
def test_hazard_names_both(probe, case):
    proc = _run(probe, case)
    line = simlib.probe_line(SOURCE, case)
    assert f"api_probes.cpp:{line - 1})" in proc.stderr, proc.stderr  # the earlier instruction, in the rule
    assert f") at {SOURCE}:{line}\n" in proc.stderr, proc.stderr  # the instruction that found it
