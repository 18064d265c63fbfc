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
    out = subprocess.run([str(program)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"a task ran twice or never (rc {out.returncode}): {out.stdout}{out.stderr}"
    got = {line.split()[0]: int(line.split()[1]) for line in out.stdout.splitlines()}
    assert got["stall_threads"] == 2, got        # the pool thread took its task and held it
    assert got["serial_left"] == 16, got         # kMinSerialRuns after the first stall
    assert got["alone"] == got["serial_left"], got  # each of them on the caller alone
    assert got["serial_left_after"] == 0, got    # then the pool is offered the next job again
