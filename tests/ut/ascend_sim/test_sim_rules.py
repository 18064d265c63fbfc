"""The CPU build refuses what the hardware refuses, and the tiling refuses
what a SoC cannot run."""
import numpy as np
import pytest

import simlib

pytestmark = pytest.mark.ascend_sim


def test_legal_program_runs_clean(sim):
    assert simlib.misuse(sim, "ok") is None
    assert simlib.misuse(sim, "max_buffers") is None  # 64 buffers: QBUF_MAX_LEN (kernel_macros.h)


@pytest.mark.parametrize("case,words", [
    ("unaligned_datacopy", "multiple of 32"),
    ("unaligned_ub_address", "aligned"),
    ("ub_overflow", "UB overflow"),
    ("use_after_free", "after FreeTensor"),
    ("queue_depth", "depth"),
    ("alloc_beyond_buffers", "in use"),
    ("gm_out_of_bounds", "beyond the buffer"),
    ("too_many_buffers", "more than 64 buffers in one TPipe (QBUF_MAX_LEN)"),
])
def test_misuse_is_refused(sim, case, words):
    msg = simlib.misuse(sim, case)
    assert msg is not None and words in msg


@pytest.mark.parametrize("soc,available", [("ascend910", False), ("ascend310p", False), ("ascend910b", True),
                                           ("ascend950", True)])
def test_datacopypad_only_where_it_exists(sim, soc, available):
    msg = simlib.misuse(sim, "datacopypad", soc)
    assert (msg is None) == available
    if not available:
        assert soc in msg


@pytest.mark.parametrize("case", ["sync_all", "dcci"])
@pytest.mark.parametrize("soc,available", [("ascend910", False), ("ascend310p", False), ("ascend910b", True),
                                           ("ascend910_93", True), ("ascend950", True)])
def test_sync_and_cache_flush_only_where_they_exist(sim, case, soc, available):
    msg = simlib.misuse(sim, case, soc)
    assert (msg is None) == available, msg
    if not available:
        assert soc in msg


@pytest.mark.parametrize("case", ["mul_add_dst", "fused_mul_add"])
@pytest.mark.parametrize("soc,available", [("ascend910", False), ("ascend310p", True), ("ascend910b", True),
                                           ("ascend910_93", True), ("ascend950", True)])
def test_multiply_adds_only_where_they_exist(sim, case, soc, available):
    """MulAddDst / FusedMulAdd: not on dav-c100 (ascend910), whose headers report them not supported."""
    msg = simlib.misuse(sim, case, soc)
    assert (msg is None) == available, msg
    if not available:
        assert soc in msg


@pytest.mark.parametrize("case", ["event_ids_enqueued", "event_ids_freed"])
@pytest.mark.parametrize("soc,available", [("ascend910", False), ("ascend310p", True), ("ascend910b", True),
                                           ("ascend910_93", True), ("ascend950", True)])
def test_event_ids_are_one_pool_with_the_queues(sim, case, soc, available):
    """A TPipe has QUE_MAX_EVENT event ids per HardEvent (asc-devkit impl/basic_api/kernel_macros.h: 8 for
    __NPU_ARCH__ 2002 / 2201 / 3510, else 4, so 4 on dav-c100), and a queue's buffers take theirs from the
    same pool as the kernel's AllocEventID: EnQue one of the enqueue event until DeQue, FreeTensor one of
    the free event until AllocTensor takes the buffer again (impl/basic_api/kernel_tquebind_impl.h)."""
    msg = simlib.misuse(sim, case, soc)
    assert (msg is None) == available, msg
    if not available:
        assert "event ids of MTE" in msg and "are held on ascend910" in msg and "AllocEventID" in msg, msg


@pytest.mark.parametrize("soc", ["ascend910", "ascend910b"])
def test_allocating_a_freed_buffer_returns_its_event_id(sim, soc):
    assert simlib.misuse(sim, "event_ids_freed_then_allocated", soc) is None


def test_hardware_sync_all_needs_mix_kernel_type(sim):
    msg = simlib.misuse(sim, "sync_all_without_kernel_type")
    assert msg is not None and "KERNEL_TYPE_MIX_AIV_1_0" in msg


def test_ub_too_small_is_a_tiling_error(sim):
    x = np.ones((2, 3, 5))
    with pytest.raises(simlib.TilingError, match="too small"):
        simlib.run(sim, x, x, ub_bytes=1024)


def test_sync_all_needs_batch_schedule_mode(sim):
    # The hardware SyncAll waits for every core: the tiling must set SetScheduleMode(1).
    msg = simlib.misuse(sim, "sync_all_without_schedule_mode")
    assert msg is not None and "SetScheduleMode(1)" in msg


def test_op_host_sets_the_schedule_mode_the_kernel_needs():
    # Both tiling functions hand bnb::ScheduleMode (1 exactly when the kernel runs SyncAll, which the
    # simulator's launchers apply and SyncAll checks) to TilingContext::SetScheduleMode.
    host = simlib.ROOT / "ascend_impl" / "op_host"
    common = (host / "batch_norm_host_common.h").read_text()
    assert "context->SetScheduleMode(scheduleMode);" in common
    assert "bnb::ScheduleMode(tiling)" in (host / "batch_norm_backward.cpp").read_text()
    assert "bnb::ScheduleMode(tiling.base)" in (host / "batch_norm_sync_host.h").read_text()


@pytest.mark.parametrize("cores,cross", [(1, False), (4, True)])
def test_sync_all_only_when_cores_share_a_channel(sim, cores, cross):
    x = np.random.default_rng(3).standard_normal((8, 2, 4096))
    _, info = simlib.run(sim, x, x, soc="ascend910b", cores=cores, ub_bytes=20 * 1024)
    # The kernel runs SyncAll (and the tiling asks for batch mode) exactly when a channel spans cores.
    assert (bool(info.cross_core) and info.used_cores > 1) == cross


# The 950's UB is 256 KB, but a kernel may use 248 KB of it: asc-devkit docs/zh/guide/编程指南/高级编程/
# 硬件实现/架构规格/NPU架构版本3510.md (存储单元: ASC_UB_SIZE = 248 x 1024 unless compiled with
# --cce-disable-vf-stack-reserved-ubuf / --cce-disable-asc-reserved-ubuf; the 6 KB SIMD VF stack and the
# 2 KB the APIs take, the "tensor高维切分计算占用8KB Unified Buffer" of docs/zh/api/SIMD-API/基础API/
# Memory矢量计算/基础算术/Add.md, 复合计算/FusedMulAdd.md, 归约计算/ReduceRepeat.md), and the headers'
# TOTAL_UB_SIZE / TMP_UB_OFFSET for __NPU_ARCH__ 3510, below which TPipe asserts every buffer.
RESERVED_950 = 8 * 1024


def test_950_ub_table_is_the_kernels_share():
    caps = (simlib.ROOT / "ascend_impl" / "op_host" / "batch_norm_soc_caps.gen.h").read_text()
    entry = caps[caps.index('{"ascend950"'):]
    assert f"{256 * 1024 - RESERVED_950}u,  // ubBytes" in entry.split("},")[0]


def test_950_buffers_past_its_total_ub_size_are_refused(sim):
    # A launch handed the whole 256 KB (a platform reporting the full UB, uncapped) whose plan takes
    # more than 248 KB: the stand-in's TPipe refuses the buffer that crosses TOTAL_UB_SIZE.
    rng = np.random.default_rng(5)
    x, dy = rng.standard_normal((4, 8, 64, 64)), rng.standard_normal((4, 8, 64, 64))
    with pytest.raises(simlib.SimError, match="past TOTAL_UB_SIZE on ascend950"):
        simlib.run(sim, dy, x, soc="ascend950", cores=2, two_pass=True, ub_bytes=256 * 1024)
    # Within the kernel's share the same launch runs.
    simlib.run(sim, dy, x, soc="ascend950", cores=2, two_pass=True, ub_bytes=256 * 1024 - RESERVED_950)


def test_op_host_caps_the_950_ub_at_the_kernels_share():
    common = (simlib.ROOT / "ascend_impl" / "op_host" / "batch_norm_host_common.h").read_text()
    assert "SocVersion::ASCEND950 && ubBytes > UB_KERNEL_BYTES_950" in common
    assert "UB_KERNEL_BYTES_950 = 248 * 1024" in common


def test_event_ids_of_the_soc_table_are_the_rules_que_max_event(sim):
    """op_def's event_ids (what the host tiling caps the single pass's chunk ids at) is, for every SoC
    line, the rules' QueMaxEvent of its __NPU_ARCH__ (what the stand-in TPipe and SetFlag / WaitFlag
    enforce; kernel_macros.h QUE_MAX_EVENT; the API check compares both with the headers' own)."""
    import ctypes

    import yaml

    caps = yaml.safe_load((simlib.ROOT / "op_def" / "ascend_soc_capabilities.yaml").read_text(encoding="utf-8"))
    caps = caps["ascend_soc_capabilities"]
    assert caps["ascend910"]["event_ids"] == 4  # dav-c100
    for soc, c in caps.items():
        table, rules = ctypes.c_int(), ctypes.c_int()
        sim.bnb_sim_event_ids(soc.encode(), ctypes.byref(table), ctypes.byref(rules))
        assert (c["event_ids"], table.value) == (rules.value, rules.value), soc
