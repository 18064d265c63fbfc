"""The end-to-end training benchmark (bench --train) runs and reports what it says it reports.

No timing is asserted: this runs `--quick` (tiny networks) once, through the
same command-line entry as `python -m mindspore_bn_grad bench --train`, and
checks that every network, mode, variant and thread setting ran, that the
converted networks really ran our backward and not MindSpore's, that both
variants did the same work (same losses at the first two steps, in the
isolated processes and in the steady-state process), that every derived
figure is computed from its own row, and that nothing was written to the
working directory.
"""
import json
import math
import statistics
from pathlib import Path

import pytest

from mindspore_bn_grad.cli import bench
from mindspore_bn_grad_bench import train
from mindspore_bn_grad_bench.nets import NETS, VARIANTS

ROUNDS, STEPS = 2, 1
THREADS = ("default", "1")


def _close(a, b):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0)


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench_train_out")
    cwd = tmp_path_factory.mktemp("bench_train_cwd")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(cwd)
        from mindspore_bn_grad.cpu_kernel import native
        threads_before = native.get_num_threads()
        try:
            assert bench.main(["--train", "--quick", "--rounds", str(ROUNDS), "--steps", str(STEPS),
                               "--profile-steps", "1", "--threads", ",".join(THREADS), "--out", str(out)]) == 0
        finally:
            native.set_num_threads(threads_before)
            import mindspore as ms
            ms.set_context(mode=ms.PYNATIVE_MODE)
        left_in_cwd = sorted(p.name for p in Path(cwd).iterdir())
    data = json.loads((out / "bench_train.json").read_text())
    md = (out / "bench_train.md").read_text()
    return data, md, left_in_cwd


def test_every_contestant_ran(result):
    data, _, _ = result
    want = {(n, m, t) for n in NETS for m in train.MODES for t in THREADS}
    assert {(r["net"], r["mode"], r["threads"]) for r in data["steady"]} == want
    for r in data["steady"]:
        assert r["kernel_threads"] == (1 if r["threads"] == "1" else data["settings"]["default_threads"])
        for v in VARIANTS:
            assert len(r[f"{v}_times_ms"]) == ROUNDS * STEPS
            assert all(t > 0 for t in r[f"{v}_times_ms"])
    assert {(r["net"], r["mode"]) for r in data["isolated"]} == {(n, m) for n in NETS for m in train.MODES}
    for r in data["isolated"]:
        for v in VARIANTS:
            res = r[v]
            assert "error" not in res, (r["net"], r["mode"], v, res.get("error"))
            assert res["first_step_s"] > 0 and res["peak_rss_mb"] > 0 and res["profile_wall_ms"] > 0
            assert len(res["steady_ms"]) == STEPS


def test_converted_runs_our_kernels_and_the_original_mindspores(result):
    # from the profiles: the ops that did BatchNorm in each variant. Converted: MindSpore's own
    # BatchNorm / BatchNormGrad on our kernels (the native route's default: the library's launch counter
    # says they were ours), its BatchNormExt / BatchNormGradExt, or the Cell route's Custom op.
    data, _, _ = result
    for r in data["isolated"]:
        o, c = r["original"]["profile_op_ms"], r["converted"]["profile_op_ms"]
        assert any(k.startswith("BatchNormGrad") and not k.startswith("BatchNormGradExt") for k in o), \
            (r["net"], r["mode"], sorted(o))
        assert "Custom" not in o and not any(k.startswith("BatchNormExt") for k in o)
        assert r["original"]["our_legacy_launches"] == 0  # MindSpore's own kernels
        legacy = r["converted"]["our_legacy_launches"] > 0
        ext = any(k.startswith("BatchNormGradExt") for k in c)
        assert legacy or ext or "Custom" in c, (r["net"], r["mode"], sorted(c))
        if not legacy:
            assert not any(k.startswith("BatchNormGrad") and not k.startswith("BatchNormGradExt") for k in c), \
                (r["net"], r["mode"], sorted(c))
        assert r["original"]["bn_ms"] > 0 and r["converted"]["bn_ms"] > 0


def _same_loss(a, b, step=0):
    """Step 1's loss: the same network and batch (float32 kernels round differently: ours and MindSpore's
    forward both run on the native route). Step 2's follows a training step, which amplifies that
    rounding through a deep network (ResNet-18: 1.6e-4 relative measured), so a looser bound."""
    return math.isclose(a, b, rel_tol=1e-5 if step == 0 else 1e-3, abs_tol=1e-5)


def test_both_variants_do_the_same_work(result):
    # step 1's loss: the same network and batch; step 2's: the same gradients were applied
    data, _, _ = result
    for r in data["steady"]:
        lo, lc = r["losses"]["original"], r["losses"]["converted"]
        assert len(lo) == len(lc) == 2 and all(math.isfinite(x) for x in lo + lc)
        assert all(_same_loss(a, b, k) for k, (a, b) in enumerate(zip(lo, lc))), (r["net"], r["mode"], lo, lc)
        assert lo[0] != lo[1]  # the first step did train
    steady = {(r["net"], r["mode"]): r["losses"] for r in data["steady"]}
    for r in data["isolated"]:
        for v in VARIANTS:  # a fresh process builds the very same network and batch
            got, want = r[v]["losses"], steady[(r["net"], r["mode"])][v]
            assert all(_same_loss(a, b, k) for k, (a, b) in enumerate(zip(got, want))), (r["net"], r["mode"], v, got,
                                                                                         want)
            # and so does each process that only timed the first step
            firsts = r[v]["first_step_losses"]
            assert len(firsts) == data["settings"]["first_step_reps"], (r["net"], r["mode"], v)
            assert all(_same_loss(x, want[0], 0) for x in firsts), (r["net"], r["mode"], v, firsts, want[0])


def test_steady_figures_come_from_their_row(result):
    data, _, _ = result
    for r in data["steady"]:
        assert _close(r["original_ms"], statistics.median(r["original_times_ms"]))
        assert _close(r["converted_ms"], statistics.median(r["converted_times_ms"]))
        assert _close(r["ratio"], r["original_ms"] / r["converted_ms"])
        assert len(r["round_ratios"]) == ROUNDS
        for i, rr in enumerate(r["round_ratios"]):
            cut = slice(i * STEPS, (i + 1) * STEPS)
            want = statistics.median(r["original_times_ms"][cut]) / statistics.median(r["converted_times_ms"][cut])
            assert _close(rr, want)


def test_isolated_figures_come_from_their_row(result):
    data, _, _ = result
    n_first = data["settings"]["isolated_reps"] + data["settings"]["first_step_reps"]
    for r in data["isolated"]:
        o, c = r["original"], r["converted"]
        for v in (o, c):  # the full processes' first steps, then the first-step-only ones'
            assert len(v["first_step_s_reps"]) == n_first and all(t > 0 for t in v["first_step_s_reps"])
            assert _close(v["first_step_s"], statistics.median(v["first_step_s_reps"]))
        assert _close(r["first_step_ratio"], c["first_step_s"] / o["first_step_s"])
        assert _close(r["peak_rss_ratio"], c["peak_rss_mb"] / o["peak_rss_mb"])
        for v in (o, c):
            assert _close(v["bn_ms"], sum(t for k, t in v["profile_op_ms"].items()
                                          if k.startswith("BatchNorm") or k == "Custom"))
        assert _close(o["kernel_ms"], sum(o["profile_op_ms"].values()))
        share = o["bn_ms"] / o["profile_wall_ms"]
        assert _close(r["bn_share"], share)
        s = o["bn_ms"] / c["bn_ms"]
        assert _close(r["bn_op_speedup"], s)
        assert _close(r["bound"], 1 / (1 - share * (1 - 1 / s)))
        assert _close(r["bound_infinite"], 1 / (1 - share))
        assert _close(r["saving_vs_bn_saved"], (o["profile_wall_ms"] - c["profile_wall_ms"])
                      / (o["bn_ms"] - c["bn_ms"]))


def test_report_shows_every_row_and_the_machine(result):
    data, md, _ = result
    for r in data["steady"]:
        assert (f"| {r['net']} | {r['mode']} | {r['threads']} ({r['kernel_threads']}) | {r['original_ms']:.1f} | "
                f"{r['converted_ms']:.1f} | {r['ratio']:.2f}x |") in md
    for r in data["isolated"]:
        assert f"| {r['net']} | {r['mode']} | {r['original']['first_step_s']:.2f} / " in md
    head = md.splitlines()[0]
    m = data["machine"]
    for part in (m["cpu"], f"MindSpore {m['mindspore']}", f"NumPy {m['numpy']}", m["date_utc"]):
        assert part in head
    assert "Method:" in md


def test_nothing_written_to_the_working_directory(result):
    _, _, left = result
    assert left == []


def test_op_times_are_read_per_op_type(tmp_path):
    d = tmp_path / "vm_1_ascend_ms" / "FRAMEWORK"
    d.mkdir(parents=True)
    (d / "cpu_op_execute_timestamp_0.txt").write_text(
        "Gradients/Default/net/1-BatchNorm2d/Grad_BatchNorm/BatchNormGrad-op0;HostCpuOps;10,0.5,0 20,0.25,0 \n"
        "Gradients/Default/net/4-BatchNorm2d/Grad_BatchNorm/BatchNormGrad-op12;HostCpuOps;30,1.0,0 \n"
        "Default/Custom-op3;HostCpuOps;40,0.125,1 \n"
        "ReluGrad;HostCpuOps;50,2.0,0 60,3.0,0 \n")
    got = train.op_times_ms(tmp_path)
    assert got == {"BatchNormGrad": 1.75, "Custom": 0.125, "ReluGrad": 5.0}
    assert train.bn_ms(got) == 1.875
    with pytest.raises(RuntimeError, match="no cpu_op_execute_timestamp"):
        train.op_times_ms(tmp_path / "vm_1_ascend_ms" / "missing")


@pytest.mark.parametrize("argv,msg", [
    (["--nets", "resnet50"], "--nets expected"),
    (["--modes", "eager"], "--modes expected"),
    (["--threads", "0"], "--threads expected"),
    (["--rounds", "0"], "--rounds expected"),
    (["--isolated-reps", "0"], "--isolated-reps expected"),
    (["--first-step-reps", "-1"], "--first-step-reps expected"),
])
def test_bad_options_are_refused(argv, msg):
    with pytest.raises(SystemExit, match=msg):
        args = train.parse_args(argv)
        train.thread_settings(args.threads)


def test_isolated_reps_take_medians_and_keep_one_profile_whole():
    def res(first, rss, wall, bn):
        return {"first_step_s": first, "peak_rss_mb": rss, "profile_wall_ms": wall, "bn_ms": bn,
                "profile_op_ms": {"BatchNorm": bn}}
    reps = [res(1.30, 500.0, 20.0, 2.0), res(1.00, 520.0, 10.0, 1.0), res(1.10, 510.0, 30.0, 3.0)]
    got = train.combine_reps(reps)
    assert got["first_step_s"] == 1.10 and got["peak_rss_mb"] == 510.0
    assert got["first_step_s_reps"] == [1.30, 1.00, 1.10] and got["peak_rss_mb_reps"] == [500.0, 520.0, 510.0]
    # the profile of the process with the median profiled step, its figures together
    assert (got["profile_wall_ms"], got["bn_ms"], got["profile_op_ms"]) == (20.0, 2.0, {"BatchNorm": 2.0})
    assert train.combine_reps([res(1.0, 1.0, 1.0, 1.0)])["first_step_s"] == 1.0
    assert train.combine_reps([res(1.0, 1.0, 1.0, 1.0), {"error": "exit code 1"}]) == {"error": "exit code 1"}
    assert train.parse_args([]).isolated_reps == 3 and train.parse_args(["--quick"]).isolated_reps == 1


def test_the_first_step_median_takes_the_first_step_only_processes_too():
    """A process's first step varies widely between processes, so its median also takes processes
    that only time it; peak RSS and the profile stay those of the full processes."""
    def res(first, rss, wall):
        return {"first_step_s": first, "peak_rss_mb": rss, "profile_wall_ms": wall, "bn_ms": 1.0,
                "profile_op_ms": {"BatchNorm": 1.0}}
    reps = [res(1.50, 500.0, 20.0), res(1.40, 520.0, 10.0), res(1.45, 510.0, 30.0)]
    firsts = [{"first_step_s": t, "losses": [0.5]} for t in (1.00, 1.05, 1.10, 1.20)]
    got = train.combine_reps(reps, firsts)
    assert got["first_step_s_reps"] == [1.50, 1.40, 1.45, 1.00, 1.05, 1.10, 1.20]
    assert got["first_step_s"] == 1.20 and got["peak_rss_mb"] == 510.0 and got["profile_wall_ms"] == 20.0
    assert got["first_step_losses"] == [0.5] * 4
    assert train.combine_reps(reps, [{"error": "timed out after 5 s"}]) == {"error": "timed out after 5 s"}
    assert train.parse_args([]).first_step_reps == 6 and train.parse_args(["--quick"]).first_step_reps == 1
    assert train.parse_args(["--first-step-reps", "0"]).first_step_reps == 0
