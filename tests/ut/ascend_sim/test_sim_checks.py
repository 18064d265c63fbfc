"""Every rule of the rule table (tests/ascend_tools/rules/bnb_rules.h) and every
hazard of the pipe tracker (bnb_hazards.h) can fire in the simulator: one
kernel fragment per rule (sim_rule_probes.cpp), the message naming the
intrinsic, the rule and the fragment's source line; the legal twins run clean."""
import pytest

import simlib

pytestmark = pytest.mark.ascend_sim

PROBES = simlib.HERE / "sim_rule_probes.cpp"

REFUSED = [
    # case, cores, words the message must hold
    ("operand_past_tensor", 1, ["Muls", "exceeds the tensor", "8192 bytes"]),
    ("partial_overlap", 1, ["Add", "overlap partially"]),
    ("negative_count", 1, ["Duplicate", "negative element count"]),
    ("datacopy_block_count", 1, ["DataCopy GM->UB", "blockCount above 4095", "4096"]),
    ("datacopy_gm_misaligned", 1, ["DataCopy GM->UB", "GM address not aligned to the element size"]),
    ("datacopypad_padding", 1, ["DataCopyPad GM->UB", "padding above 32 bytes"]),
    ("datacopypad_block_len", 1, ["DataCopyPad UB->GM", "blockLen above 2097151 bytes"]),
    ("datacopypad_element", 1, ["DataCopyPad UB->GM", "blockLen not a whole number of elements"]),
    ("narrow_block_count", 1, ["DataCopyPad blockCount: value does not fit the 16-bit unsigned field it is cast to",
                               "(value 65544)"]),
    ("narrow_count", 1, ["Duplicate count: value does not fit the 32-bit signed field", "(value 4294967360)"]),
    ("raw_mte2_v", 1, ["Adds", "read-after-write", "DataCopy GM->UB (PIPE_MTE2", "PIPE_V"]),
    ("raw_v_mte3", 1, ["DataCopy UB->GM", "read-after-write", "Duplicate (PIPE_V"]),
    ("war_v_mte2", 1, ["DataCopy GM->UB", "write-after-read", "Adds (PIPE_V"]),
    ("raw_v_s", 1, ["LocalTensor::GetValue", "read-after-write", "Duplicate (PIPE_V"]),
    ("waw_mte2_mte2", 1, ["DataCopy GM->UB", "write-after-write", "PIPE_MTE2"]),
    ("wait_without_set", 1, ["WaitFlag", "would wait forever"]),
    ("set_twice", 1, ["SetFlag", "already set and not yet waited for", "PIPE_MTE2 -> PIPE_V, event 1"]),
    ("queue_reuse_without_free", 1, ["DataCopy GM->UB", "write-after-write", "Adds (PIPE_V"]),
    ("scalar_read_after_mte3", 1, ["GlobalTensor::GetValue", "without DataCacheCleanAndInvalid"]),
    ("scalar_store_then_mte2", 1, ["DataCopy GM->UB", "scalar store left in the data cache"]),
    ("cross_core_race", 2, ["DataCopy UB->GM", "cross-core GM race", "SyncAll"]),
    ("cross_core_scalar_stale", 2, ["GlobalTensor::GetValue", "core 0's DataCopy UB->GM",
                                    "without DataCacheCleanAndInvalid"]),
]
CLEAN = [("raw_mte2_v_ok", 1), ("raw_v_s_ok", 1), ("waw_mte2_mte2_ok", 1), ("queue_orders_ok", 1),
         ("scalar_read_after_mte3_ok", 1), ("scalar_store_then_mte2_ok", 1), ("cross_core_sync_ok", 2)]


@pytest.mark.parametrize("case,cores,words", REFUSED, ids=[c[0] for c in REFUSED])
def test_rule_fires_with_its_source_line(sim, case, cores, words):
    msg = simlib.rule_probe(sim, case, cores=cores)
    assert msg is not None, f"{case} ran clean"
    for w in words:
        assert w in msg, (w, msg)
    assert msg.endswith(f"sim_rule_probes.cpp:{simlib.probe_line(PROBES, case)}"), msg


@pytest.mark.parametrize("case,cores", CLEAN, ids=[c[0] for c in CLEAN])
def test_legal_twin_runs_clean(sim, case, cores):
    assert simlib.rule_probe(sim, case, cores=cores) is None


def test_scalar_gm_read_cannot_be_made_safe_without_dcci(sim):
    # Atlas training has no DataCacheCleanAndInvalid: the read is refused, naming that.
    msg = simlib.rule_probe(sim, "scalar_read_after_mte3", soc="ascend910")
    assert msg is not None and "no DataCacheCleanAndInvalid" in msg
