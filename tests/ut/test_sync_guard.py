"""SyncGuard in one process: a failed collective becomes SyncBatchNormPeerLostError with the step and
what to check; other errors pass through unchanged; results pass through. (Real lost peers:
tests/st/syncbn/test_syncbn_multihost.py.)"""
import pytest


def _failing(message):
    def step(*_):
        raise RuntimeError(message)
    return step


def test_failed_collective_names_step_and_cause(monkeypatch):
    from mindspore_bn_grad.nn import SyncBatchNormPeerLostError, SyncGuard
    monkeypatch.setenv("MS_CPU_COMM_OP_TIMEOUT", "7")
    guard = SyncGuard(_failing("Launch kernel failed, name:Default/AllReduce-op0\n\nC++ stack ..."), first_step=5)
    with pytest.raises(SyncBatchNormPeerLostError) as info:
        guard()
    msg = str(info.value)
    assert "SyncBatchNorm lost a peer in step 5" in msg
    assert "MS_CPU_COMM_OP_TIMEOUT=7 s" in msg and "Check:" in msg
    assert "Default/AllReduce-op0" in msg and "C++ stack" not in msg
    assert isinstance(info.value.__cause__, RuntimeError)
    assert guard.step == 5


def test_other_errors_and_results_pass_through():
    from mindspore_bn_grad.nn import SyncGuard
    with pytest.raises(RuntimeError, match="^kernel returned 3$"):
        SyncGuard(_failing("kernel returned 3"))()
    with pytest.raises(ValueError):
        SyncGuard(lambda: int("x"))()
    guard = SyncGuard(lambda a, b=1: (a, b))
    assert guard(2, b=3) == (2, 3) and guard(4) == (4, 1) and guard.step == 2


def test_timeout_variable_read_from_mindspore_settings(monkeypatch):
    from mindspore_bn_grad.nn._sync_check import comm_timeout_s
    monkeypatch.delenv("MS_CPU_COMM_OP_TIMEOUT", raising=False)
    monkeypatch.delenv("MS_NODE_TIMEOUT", raising=False)
    assert comm_timeout_s() == ("MS_CPU_COMM_OP_TIMEOUT", "30 (default)")
    monkeypatch.setenv("MS_NODE_TIMEOUT", "12")
    assert comm_timeout_s() == ("MS_NODE_TIMEOUT", "12")
    monkeypatch.setenv("MS_CPU_COMM_OP_TIMEOUT", "4")
    assert comm_timeout_s() == ("MS_CPU_COMM_OP_TIMEOUT", "4")


def _gathered(layouts):
    """The table the AllReduce of check_same_layout gives when rank r builds layouts[r]."""
    from mindspore_bn_grad.nn._sync_check import _header, header_table
    return sum(header_table(_header(*lay), r, len(layouts)) for r, lay in enumerate(layouts))


BASE = (4, "Float32", "NCHW", 1e-5, 0.9, [[0, 1], [2, 3]])


@pytest.mark.parametrize("index,other,field,detail", [
    (0, 5, "num_features", "4 on ranks [0, 1, 2], 5 on rank 3"),
    (1, "Float16", "dtype", "something else on rank 3"),
    (2, "NHWC", "data_format", "something else on rank 3"),
    (3, 1e-3, "eps", "something else on rank 3"),
    (4, 0.8, "momentum", "something else on rank 3"),
    (5, [[0, 1, 2, 3]], "process_groups", "something else on rank 3"),
])
def test_layout_mismatch_names_the_field_and_the_ranks(index, other, field, detail):
    from mindspore_bn_grad.nn._sync_check import _header, layout_mismatch
    odd = list(BASE)
    odd[index] = other
    table = _gathered([BASE, BASE, BASE, tuple(odd)])
    for rank, lay in enumerate([BASE, BASE, BASE, tuple(odd)]):
        msg = layout_mismatch(table, rank, _header(*lay), dict(zip(
            ("num_features", "dtype", "data_format", "eps", "momentum", "process_groups"), lay)))
        assert msg and msg.startswith(f"SyncBatchNorm: {field} expected the same on every rank"), msg
        if rank == 0:
            assert detail in msg, msg


def test_same_layout_passes_and_a_missing_header_is_named():
    from mindspore_bn_grad.nn._sync_check import _header, layout_mismatch
    table = _gathered([BASE] * 4)
    assert layout_mismatch(table, 2, _header(*BASE), {}) is None
    table[1] = 0   # rank 1 took part in some other AllReduce of the same size
    msg = layout_mismatch(table, 0, _header(*BASE), {})
    assert msg.startswith("SyncBatchNorm: a layout header expected from every rank, got none from rank 1"), msg
