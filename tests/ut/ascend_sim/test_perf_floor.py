"""The floor of the performance model's time (bench/ascend_floor.py): a lower bound no design can beat.

- It is computed from the shape and the YAML's figures alone: it holds with the model unavailable and
  agrees with the arithmetic of docs/ascend_kernel.md ("The floor") written out here.
- It is never above the modeled time and never below the GM bound: on sample rows of the model, on
  the committed bench/RESULTS_ASCEND_MODEL.json, and (slow, test_perf_model.py) on every ResNet-50 row
  of every SoC line.
"""
import json
from pathlib import Path

import pytest

from mindspore_bn_grad_bench import ascend, ascend_floor, ascend_model

pytestmark = pytest.mark.ascend_sim
RESULTS = Path(__file__).resolve().parents[3] / "bench" / "RESULTS_ASCEND_MODEL.json"
SAMPLE = [(32, 512, 7, 7), (32, 64, 56, 56), (32, 128, 28, 28)]


@pytest.mark.parametrize("dtype,mul_add,count", [
    ("float32", True, 5), ("float32", False, 7), ("float16", True, 8), ("float16", False, 10),
    ("bfloat16", True, 8)])
def test_vector_instructions_per_element(dtype, mul_add, count):
    assert ascend_floor.vector_instructions(dtype, mul_add) == count


def test_floor_needs_no_model(monkeypatch):
    def refuse(*_a, **_k):
        raise AssertionError("the floor must not read the kernel's counters")
    monkeypatch.setattr(ascend_model, "build", refuse)
    monkeypatch.setattr(ascend_model, "run", refuse)
    assert ascend_floor.floor("ascend910b", (32, 64, 56, 56), "float16")["us"] > 0


def _by_hand(soc, shape, dtype):
    """The floor's four figures, ns, written out per pipe from the YAML."""
    caps = ascend_model.capabilities()[soc]
    n, c, h, w = shape
    eb = ascend_model.DTYPES[dtype][1]
    cores, clock_ghz = caps["vector_cores"], caps["clock_mhz"] / 1e3
    per_core_bytes = n * c * h * w * eb / cores
    gm_share = min(caps["core_gm_bytes_per_cycle"] * clock_ghz, caps["gm_gbps"] / cores)
    latency2 = 2 * caps["copy_latency_ns"]
    channel_xdy = 2 * n * h * w * eb
    reread_per_core = c * max(0, channel_xdy - cores * caps["ub_bytes"]) / cores
    instrs = (3 if caps["mul_add"] else 4) + (2 if caps["mul_add"] else 3) + (3 if eb == 2 else 0)
    return {"gm": 3 * n * c * h * w * eb / caps["gm_gbps"],
            "mte2": 2 * per_core_bytes / gm_share + reread_per_core / (caps["core_l2_bytes_per_cycle"] * clock_ghz)
            + latency2,
            "mte3": per_core_bytes / gm_share + latency2,
            "v": per_core_bytes / eb * instrs / (caps["vector_bytes"] / 4) / clock_ghz + latency2}


@pytest.mark.parametrize("soc", list(ascend_model.capabilities()))
@pytest.mark.parametrize("shape", [(32, 64, 112, 112), (32, 512, 7, 7)])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_floor_by_hand(soc, shape, dtype):
    want = _by_hand(soc, shape, dtype)
    got = ascend_floor.floor(soc, shape, dtype)
    assert got["pipes_us"] == pytest.approx({p: t / 1e3 for p, t in want.items()}, rel=1e-12)
    assert got["us"] == max(got["pipes_us"].values()) and got["pipes_us"][got["pipe"]] == got["us"]


def test_a_channel_beyond_all_ub_is_read_twice():
    """ascend310p fp32 (32, 64, 112, 112): a channel's x + dy exceed the UB of its 8 cores."""
    assert _by_hand("ascend310p", (32, 64, 112, 112), "float32")["mte2"] > \
        _by_hand("ascend310p", (32, 64, 56, 56), "float32")["mte2"] * 4


def _check(rows):
    for r in rows:
        assert r["bound_us"] <= r["floor_us"] <= r["modeled_us"], (r["soc"], r["shape"], r["dtype"])


def test_floor_within_bound_and_model_on_sample_rows():
    lib = ascend_model.build()
    shapes = [(s, n) for s, n in ascend.resnet50_shapes() if s in SAMPLE]
    rows = ascend.model_all(["ascend910b", "ascend910"], ["float32", "float16"], shapes, lib)
    _check(rows)


def test_committed_results_carry_the_floor():
    rows = json.loads(RESULTS.read_text())["rows"]
    _check(rows)
    for r in rows:
        f = ascend_floor.floor(r["soc"], r["shape"], r["dtype"])
        assert r["floor_us"] == round(f["us"], 3) and r["floor_pipe"] == f["pipe"]

