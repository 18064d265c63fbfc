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


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    try:
        cxx = find_compiler()
    except KernelBuildError as e:
        pytest.skip(f"no C++ compiler: {e}")
    exe = tmp_path_factory.mktemp("pool") / "thread_pool_stall"
    subprocess.run([cxx, "-O2", "-std=c++17", "-pthread", f"-I{CSRC}", str(HERE / "cpp" / "thread_pool_stall.cpp"),
                    "-o", str(exe)], check=True, capture_output=True, timeout=300)
    return exe


def test_a_stalled_job_sends_the_next_jobs_to_the_caller_then_the_pool_returns(program):
    for _attempt in range(3):  # a busy machine may stall a clean job too: that only delays the phases
        out = subprocess.run([str(program)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, f"a task ran twice or never (rc {out.returncode}): {out.stdout}{out.stderr}"
        phases = {line.split()[0]: [int(v) for v in line.split()[1:]] for line in out.stdout.splitlines()}
        if phases["clean"][2] >= 15 and phases["stall"][2] == 1:
            break
    else:
        pytest.fail(f"the pool never ran clean jobs on both threads here: {phases}")
    jobs, one, _ = phases["after_stall"]
    assert one == jobs, f"after a stall, {jobs - one} of {jobs} jobs still woke the pool: {phases}"
    jobs, _, two = phases["recovered"]
    assert two >= jobs // 2, f"the pool did not come back after its serial jobs: {phases}"
