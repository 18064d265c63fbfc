"""SyncBatchNorm over 2 msrun workers on 127.0.0.1 (CPU, mccl), PYNATIVE and GRAPH.

One msrun launch runs every case of cases.py in both modes (start-up costs
~20 s, so one launch, not one per case); each rank saves its results and
this test checks them against full-batch float64 BatchNorm
(reference_check.py): each rank's y and input gradient (its slice of the
full batch), the gamma/beta gradients summed over the ranks, and each rank's
running statistics. Cases: even and uneven splits, a rank with an empty
batch, NHWC with an explicit process group, single-rank groups (no sync).
"""
import os
import shutil
import socket
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
from cases import CASES
from reference_check import check

TIMEOUT_S = 240
MODES = ("pynative", "graph")


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    if shutil.which("msrun") is None:
        pytest.skip("msrun not on PATH")
    out = tmp_path_factory.mktemp("syncbn")
    logs = out / "logs"
    cmd = ["msrun", "--worker_num=2", "--local_worker_num=2", "--master_addr=127.0.0.1",
           f"--master_port={_free_port()}", "--join=True", f"--log_dir={logs}",
           os.path.join(HERE, "worker.py"), str(out), ",".join(MODES)]
    # The workers write MindSpore's dump files (rank_*/) into their cwd: keep them in tmp.
    proc = subprocess.Popen(cmd, cwd=out, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        text, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        pytest.fail(f"msrun did not finish in {TIMEOUT_S} s; logs in {logs}")
    if proc.returncode != 0:
        tails = []
        for name in sorted(os.listdir(logs)) if logs.exists() else []:
            with open(logs / name, errors="replace") as f:
                tails.append(f"--- {name}\n" + "".join(l for l in f.readlines() if "WARNING" not in l)[-3000:])
        pytest.fail(f"msrun exited with {proc.returncode}\n{text[-2000:]}\n" + "\n".join(tails))
    return str(out)


@pytest.mark.msrun
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", list(CASES))
def test_two_workers_equal_full_batch(results, mode, case):
    errs = check(results, mode, case)
    assert errs  # every rank's file was there and compared
