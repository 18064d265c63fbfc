"""The CPU kernels' thread pool (csrc/thread_pool.h) on its own, compiled with the package's compiler.

A pool thread preempted while it holds a task makes the caller wait for the scheduler (more runnable
threads than CPUs: MindSpore's own threads, another process); the pool then runs the next jobs on the
calling thread alone for a while, and goes back to its threads after that. Every task runs exactly
once in every job either way."""
import subprocess
from pathlib import Path

import pytest

from mindspore_bn_grad.cpu_kernel.build import CSRC, KernelBuildError, find_compiler

HERE = Path(__file__).resolve().parent


def _build(tmp_path_factory, name, *flags):
    try:
        cxx = find_compiler()
    except KernelBuildError as e:
        pytest.skip(f"no C++ compiler: {e}")
    exe = tmp_path_factory.mktemp("pool") / name
    subprocess.run([cxx, "-O2", "-std=c++17", "-pthread", f"-I{CSRC}", str(HERE / "cpp" / f"{name}.cpp"),
                    "-o", str(exe), *flags], check=True, capture_output=True, timeout=300)
    return exe


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    return _build(tmp_path_factory, "thread_pool_stall")


def test_a_stalled_job_sends_the_next_jobs_to_the_caller_then_the_pool_returns(program):
    out = subprocess.run([str(program)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"a task ran twice or never (rc {out.returncode}): {out.stdout}{out.stderr}"
    got = {line.split()[0]: int(line.split()[1]) for line in out.stdout.splitlines()}
    assert got["stall_threads"] == 2, got        # the pool thread took its task and held it
    assert got["serial_left"] == 16, got         # kMinSerialRuns after the first stall
    assert got["alone"] == got["serial_left"], got  # each of them on the caller alone
    assert got["serial_left_after"] == 0, got    # then the pool is offered the next job again


def test_a_polling_pool_thread_gives_its_cpu_to_other_threads_then_sleeps(tmp_path_factory):
    """After back-to-back jobs a pool thread polls for the next one; it yields while it polls, and
    then it sleeps; when the kernel call those jobs made up ends and calls do not come back to back,
    it stops polling at once (in a network MindSpore's next operator runs right after our call, on
    its own threads, and a pool thread polling on a core slowed it)."""
    exe = _build(tmp_path_factory, "thread_pool_poll", "-Wl,--wrap=sched_yield")
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"rc {out.returncode}: {out.stdout}{out.stderr}"
    got = {line.split()[0]: int(line.split()[1]) for line in out.stdout.splitlines()}
    assert got["sum"] == 2 * 200 * sum(range(64)), got  # every task ran once
    assert got["yields_while_polling"] > 0, got
    assert got["yields_after_the_poll"] == 0, got
    assert got["yields_after_a_call_end"] <= 1, got  # (at most the yield it was in)



def test_a_pool_thread_late_for_a_job_joins_the_next_one(tmp_path_factory):
    """A pool thread that saw a job but was preempted before taking its ticket (the caller ran that
    job alone meanwhile and started the next) must join the next job, not spend its ticket on the
    old one: that job would run on the caller alone. The program holds the thread there through a
    compile-time hook of the header."""
    exe = _build(tmp_path_factory, "thread_pool_ticket")
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"a task ran twice or never (rc {out.returncode}): {out.stdout}{out.stderr}"
    got = {line.split()[0]: int(line.split()[1]) for line in out.stdout.splitlines()}
    assert got["held"] == 1, got              # the hook held the pool thread inside the first job
    assert got["held_job_threads"] == 1, got  # which the caller therefore ran alone
    assert got["next_job_threads"] == 2, got  # the late thread joined the next job

_PIPELINE_THREAD_CASE = r"""
import ctypes, json, threading
import numpy as np
from mindspore_bn_grad.cpu_kernel import native

lib = native.lib()
native.set_num_threads(2)
libc = ctypes.CDLL(None)
rng = np.random.default_rng(3)
x = rng.standard_normal((16, 64, 24, 24)).astype(np.float32)
dy = rng.standard_normal(x.shape).astype(np.float32)
args = (dy, x, rng.uniform(0.5, 1.5, 64).astype(np.float32), None, None, x.mean(axis=(0, 2, 3)),
        1.0 / np.sqrt(x.var(axis=(0, 2, 3)) + 1e-5))

def on_thread(name, calls):
    out = {}
    def body():
        libc.prctl(15, name.encode(), 0, 0, 0)  # PR_SET_NAME, as MindSpore names its pipeline threads
        res, counts = [], []
        for _ in range(calls):
            res.append(native.direct(*args))
            counts.append(lib.MsBnGradLastCallThreads())
        out["res"], out["counts"] = res, counts
    t = threading.Thread(target=body)
    t.start()
    t.join()
    return out["res"], out["counts"]

here = native.direct(*args)
queue_res, queue_counts = on_thread("backend_queue", 34)
actor_res, actor_counts = on_thread("ActorThread_0", 3)
same = all(np.array_equal(a, b) for r in queue_res + actor_res for a, b in zip(here, r))
print(json.dumps({"queue": queue_counts, "actor": actor_counts, "main": lib.MsBnGradLastCallThreads(),
                  "same": same}))
"""


def test_a_pipeline_thread_times_both_thread_counts_then_keeps_the_faster():
    """On a thread of MindSpore's PYNATIVE pipeline ("backend_queue" and its siblings), where MindSpore's
    Python thread runs beside the call, a size class's first calls (16) run on the setting, the next
    alternate between one CPU fewer and the setting (7 timed calls each), then every call takes the
    one that was faster; elsewhere every call takes the setting. The results are the same bits every time. (A fresh process: the
    choices are per process.)"""
    import json
    import sys
    out = subprocess.run([sys.executable, "-c", _PIPELINE_THREAD_CASE], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["same"], got
    assert got["main"] == 2 and got["actor"] == [2, 2, 2], got
    assert got["queue"][:16] == [2] * 16, got              # warm-up calls on the setting
    assert got["queue"][16:30] == [1, 2] * 7, got          # the trials: one CPU fewer, the setting, ...
    assert len(set(got["queue"][30:])) == 1 and got["queue"][30] in (1, 2), got  # then one choice
