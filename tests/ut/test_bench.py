"""The benchmark runs end to end and reports what it says it reports.

No timing is asserted (speed is the benchmark's business, not the tests'):
this checks that every contestant ran, that each derived figure is computed
from the medians of the same row (GB/s, % of copy, the mask and twin ratios,
the speed-ups), and that the table shows it. Small shapes keep it quick.
"""
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from mindspore_bn_grad_bench import forward as forward_bench
from mindspore_bn_grad_bench import kernel as bench
from mindspore_bn_grad.cpu_kernel import native_kernels_active

SHAPES = [(4, 8, 16, 16), (64, 32)]
FORWARD_CASES = [((4, 8, 16, 16), "NCHW"), ((64, 32), "NCHW"), ((4, 8, 16, 16), "NHWC")]


CALLS = []  # the order in which the run made its contestants


def _logged(name, make):
    def wrapper(*args, **kwargs):
        CALLS.append(name)
        return make(*args, **kwargs)
    return wrapper


LEFT_IN_CWD = []  # what the run wrote into its working directory


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    cwd = tmp_path_factory.mktemp("bench_cwd")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(cwd)
        # no --out: the files go to the default directory (here a temporary one), never the cwd
        mp.setattr(bench, "default_out_dir", lambda: out)
        mp.setattr(bench, "QUICK_SHAPES", SHAPES)
        mp.setattr(bench, "CHANNEL_LAST", [SHAPES[0]])
        mp.setattr(bench, "COPY_BYTES", 1 << 20)
        for name in ("direct_contestant", "torch_contestant", "ms_ours_contestant", "ms_builtin_contestant"):
            mp.setattr(bench, name, _logged(name, getattr(bench, name)))
        mp.setattr(forward_bench, "CASES", FORWARD_CASES)
        for name in ("direct_contestant", "torch_contestant", "same_bytes_copy", "ms_ours_contestant",
                     "ms_builtin_contestant"):  # ms_*: through MindSpore (the ordering test reads the prefix)
            mp.setattr(forward_bench, name, _logged(("ms_fwd_" + name[3:]) if name.startswith("ms_")
                                                    else "fwd_" + name, getattr(forward_bench, name)))
        try:
            assert bench.main(["--quick"]) == 0
        finally:
            import mindspore as ms
            ms.set_context(mode=ms.PYNATIVE_MODE)
        LEFT_IN_CWD.extend(p.name for p in cwd.iterdir())
    return json.loads((out / "bench_cpu.json").read_text()), (out / "bench_cpu.md").read_text()


def _approx(a, b):
    return a == pytest.approx(b, rel=1e-9)


def test_every_case_and_contestant_ran(result):
    data, _ = result
    got = {(tuple(r["shape"]), r["dtype"], r["layout"]) for r in data["rows"]}
    want = {(SHAPES[0], "float32", "NCHW"), (SHAPES[1], "float32", "NCHW"), (SHAPES[0], "float32", "NHWC"),
            (SHAPES[0], "float16", "NCHW"), (SHAPES[0], "bfloat16", "NCHW")}
    assert got == want
    have_torch = importlib.util.find_spec("torch") is not None
    for r in data["rows"]:
        assert r["direct_ms"] > 0 and r["copy_gbs"] > 0
        assert r["ms_pynative_ms"] > 0 and r["ms_graph_ms"] > 0
        # MindSpore's built-in runs float32/float16 channel-first only.
        builtin_runs = r["layout"] == "NCHW" and r["dtype"] != "bfloat16"
        for mode in ("pynative", "graph"):
            assert (r[f"builtin_{mode}_ms"] is not None) == builtin_runs, (r["dtype"], r["layout"], mode)
            # the native route's BatchNormGradExt (ours through either mechanism): channel-first only
            assert (r[f"native_{mode}_ms"] is not None) == (r["layout"] == "NCHW" and native_kernels_active()), \
                (r["dtype"], r["layout"], mode)
        if have_torch:
            assert r["torch_ms"] > 0


def test_mindspores_floor_is_timed_in_each_rows_rounds(result):
    """MindSpore's own Add of the same two tensors, per mode, in the row's rounds, with its table."""
    data, md = result
    assert "MindSpore's floor" in md
    for r in data["rows"]:
        if r["dtype"] == "bfloat16":
            continue  # Add may or may not run bfloat16 on CPU
        assert r["add_pynative_ms"] > 0 and r["add_graph_ms"] > 0
        line = next(l for l in md.splitlines()[md.splitlines().index(next(
            l for l in md.splitlines() if l.startswith("| shape | dtype | layout | Add PYNATIVE ms"))):]
                    if l.startswith(f"| {tuple(r['shape'])} | {r['dtype']} | {r['layout']} |"))
        assert f"{r['add_pynative_ms']:.3f}" in line and f"{r['ms_pynative_ms'] / r['add_pynative_ms']:.2f}" in line


def test_derived_figures_come_from_the_row(result):
    data, _ = result
    for r in data["rows"]:
        bytes_moved = 3 * r["tensor_mb"] * 1e6
        assert _approx(r["direct_gbs"], bytes_moved / (r["direct_ms"] / 1e3) / 1e9)
        assert _approx(r["direct_pct_copy"], 100 * r["direct_gbs"] / r["copy_gbs"])
        for mode in ("pynative", "graph"):
            if r[f"builtin_{mode}_ms"] is not None:
                assert _approx(r[f"speedup_vs_builtin_{mode}"], r[f"builtin_{mode}_ms"] / r[f"ms_{mode}_ms"])
                if r[f"native_{mode}_ms"] is not None:
                    assert _approx(r[f"native_speedup_vs_builtin_{mode}"],
                                   r[f"builtin_{mode}_ms"] / r[f"native_{mode}_ms"])
        if r["torch_ms"] is not None:
            assert _approx(r["speedup_vs_torch"], r["torch_ms"] / r["direct_ms"])
        if r["dtype"] == "float32" and r["layout"] == "NCHW":
            assert _approx(r["mask_ftt_vs_full"], r["mask_ftt_ms"] / r["direct_ms"])
            assert "twin_ms" not in r
        else:  # timed against its twin in its own rounds
            key = "vs_float32_time" if r["dtype"] != "float32" else "vs_channel_first_time"
            assert r["twin_ms"] > 0
            assert _approx(r[key], r["direct_ms"] / r["twin_ms"])


def test_table_shows_every_row_and_twin(result):
    data, md = result
    for r in data["rows"]:
        assert f"| {tuple(r['shape'])} | {r['dtype']} | {r['layout']} |" in md
    assert "| shape | dtype | layout | direct ms | twin | twin direct ms | time / twin time |" in md
    twins = [line for line in md.splitlines() if "| float32 NCHW |" in line or "| float32 NHWC |" in line]
    assert len(twins) == 3  # float16, bfloat16 and the NHWC row


def test_header_says_which_pages_the_tensors_live_on(result):
    data, md = result
    m = data["machine"]
    assert set(m) >= {"thp", "numpy_madvise_hugepage", "glibc_tunables"}
    head = md.splitlines()[0]
    assert "Memory: transparent huge pages" in head
    assert "MindSpore's tensors on " in head


@pytest.mark.parametrize("tunables,thp,want", [
    (None, "madvise", "4 KiB pages"),
    ("glibc.malloc.hugetlb=1", "madvise", "GLIBC_TUNABLES=glibc.malloc.hugetlb=1"),
    ("glibc.malloc.hugetlb=1", "never", "4 KiB pages"),
    (None, "always", "THP always"),
])
def test_header_names_mindspore_pages(result, tunables, thp, want):
    data, _ = result
    r = dict(data, machine=dict(data["machine"], glibc_tunables=tunables, thp=thp))
    assert "MindSpore's tensors on " in bench.table(r).splitlines()[0]
    assert want in bench.table(r).splitlines()[0].split("MindSpore's tensors on ")[1]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_torch_gets_the_same_values_in_its_dtype(dtype, layout):
    import numpy as np
    import torch
    case = bench.Case((2, 3, 4, 5), dtype, layout)
    x, _, _ = case.arrays()
    t = bench.torch_activation(x, case)
    assert t.dtype == getattr(torch, dtype)
    assert tuple(t.shape) == (2, 3, 4, 5)
    # independent rounding: float32 -> dtype by torch itself, in logical NCHW order
    logical = np.moveaxis(x, -1, 1) if layout == "NHWC" else x
    want = torch.from_numpy(np.ascontiguousarray(logical)).to(getattr(torch, dtype))
    assert torch.equal(t, want)


def test_direct_and_torch_rows_all_run_before_any_mindspore_row(result):
    # next to MindSpore, PyTorch measured 1.7-3x slower: the direct pass
    # (kernel, copy, PyTorch) of every case comes first
    # (the forward rows' MindSpore pass times our kernel again in its rounds: the one exception)
    ms_calls = [i for i, n in enumerate(CALLS) if n.startswith("ms_")]
    direct_calls = [i for i, n in enumerate(CALLS) if not n.startswith("ms_")]
    assert ms_calls and direct_calls
    after = [CALLS[i] for i in direct_calls if i > min(ms_calls)]
    assert set(after) <= {"fwd_direct_contestant"}, CALLS
    data, _ = result
    assert len(after) == len(data["forward_rows"]), CALLS  # once per forward case
    assert CALLS.count("ms_ours_contestant") == 2 * len(data["rows"])  # PYNATIVE and GRAPH per case


def test_forward_rows_come_from_their_own_rounds(result):
    data, md = result
    rows = data["forward_rows"]
    assert [(tuple(r["shape"]), r["layout"]) for r in rows] == FORWARD_CASES
    have_torch = importlib.util.find_spec("torch") is not None
    for r in rows:
        moved = 2 * r["tensor_mb"] * 1e6  # x read, y written
        assert _approx(r["direct_gbs"], moved / (r["direct_ms"] / 1e3) / 1e9)
        assert _approx(r["copy_gbs"], moved / (r["copy_ms"] / 1e3) / 1e9)
        assert _approx(r["direct_pct_copy"], 100 * r["direct_gbs"] / r["copy_gbs"])
        assert (r["torch_ms"] is not None) == have_torch
        if have_torch:
            assert _approx(r["speedup_vs_torch"], r["torch_ms"] / r["direct_ms"])
        assert r["ours_pynative_ms"] > 0 and r["ms_round_direct_ms"] > 0
        if r["layout"] == "NCHW":  # MindSpore's CPU ops.BatchNorm: channel-first only
            assert _approx(r["speedup_vs_builtin"], r["builtin_pynative_ms"] / r["ms_round_direct_ms"])
            assert _approx(r["pynative_speedup_vs_builtin"], r["builtin_pynative_ms"] / r["ours_pynative_ms"])
        assert f"| {tuple(r['shape'])} | {r['layout']} | {r['tensor_mb']:.1f} |" in md
    assert "BatchNormForward (training, float32)" in md
    assert CALLS.count("ms_fwd_ours_contestant") == len(rows)


def test_result_files_go_to_the_out_directory_not_the_cwd(result):
    assert LEFT_IN_CWD == []


def test_default_out_dir_is_the_checkouts_bench_results(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    # the benchmarks in a checkout (its bench/ folder, pyproject.toml beside it): <checkout>/bench/results
    repo = tmp_path / "repo"
    (repo / "bench").mkdir(parents=True)
    (repo / "pyproject.toml").write_text("")
    monkeypatch.setattr(bench, "__file__", str(repo / "bench" / "kernel.py"))
    assert bench.default_out_dir() == repo / "bench" / "results"
    # installed without a checkout around it: a new temporary directory, not the cwd
    pkg = tmp_path / "site-packages" / "mindspore_bn_grad_bench"
    pkg.mkdir(parents=True)
    monkeypatch.setattr(bench, "__file__", str(pkg / "kernel.py"))
    got = bench.default_out_dir()
    assert got.is_dir() and got.resolve() != Path.cwd().resolve() and not list(got.iterdir())
    got.rmdir()


def test_bench_command_without_the_benchmarks_installed(monkeypatch, capsys):
    """`python -m mindspore_bn_grad bench` where the benchmark package is absent: a clear error, exit 2."""
    from mindspore_bn_grad.cli import bench as command
    for name in [m for m in sys.modules if m == "mindspore_bn_grad_bench" or m.startswith("mindspore_bn_grad_bench.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mindspore_bn_grad_bench", None)  # import fails as when not installed
    assert command.main(["--quick"]) == 2
    assert "mindspore_bn_grad_bench" in capsys.readouterr().err


def test_bench_command_takes_one_benchmark(capsys):
    from mindspore_bn_grad.cli import bench as command
    assert command.main(["--train", "--double"]) == 2
    assert "--train and --double" in capsys.readouterr().err


@pytest.mark.parametrize("value, shown", [("1", True), ("0", False), (None, False)])
def test_header_says_when_mindspore_runs_pynative_launches_blocking(monkeypatch, value, shown):
    """MS_DEV_HOST_BLOCKING_RUN=1 changes PYNATIVE step times a lot: a result made with it says so."""
    if value is None:
        monkeypatch.delenv("MS_DEV_HOST_BLOCKING_RUN", raising=False)
    else:
        monkeypatch.setenv("MS_DEV_HOST_BLOCKING_RUN", value)
    m = bench.machine_info(2)
    assert m["ms_host_blocking_run"] is shown
    assert ("MS_DEV_HOST_BLOCKING_RUN=1" in bench.describe_machine(m)) is shown
