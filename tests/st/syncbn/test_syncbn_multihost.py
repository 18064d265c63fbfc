"""SyncBatchNorm across hosts: network-namespace hosts on one machine, one msrun per host.

Layout (environment, defaults in brackets): SYNCBN_MH_HOSTS [2] hosts,
SYNCBN_MH_WORKERS [2] workers per host, SYNCBN_MH_GROUPS process_groups as
"0,1;2,3" [the world cut in two halves; "none" for no split], SYNCBN_MH_FAIL_STEP
[2] the step before which a peer is lost, SYNCBN_MH_FAIL_RANK [the last rank] the
rank killed with SIGKILL, SYNCBN_MH_LINK_HOST [the last host] the host whose link
goes down, SYNCBN_MH_COMM_TIMEOUT [10] MS_CPU_COMM_OP_TIMEOUT of the failure jobs.

Four msrun launches (each ~20-60 s of start-up, so cases are combined), the first three side by side:
  cases    the cases of mh_cases.MODE_CASES in PYNATIVE and GRAPH, checked step by step
           against the float64 oracle (mh_oracle.py); statistics identical within
           each sync set and parameters identical on all ranks after every step
  kill     PYNATIVE, a rank killed with kill -9 before step s: every other rank ends
           within the bound with SyncBatchNormPeerLostError naming the step, group
           and what to check
  link     GRAPH, a host's link goes down before step s: the same for every rank
  resume   ranks that disagree on channels / dtype / groups all get
           SyncBatchNormMismatchError; then the kill job's checkpoints of step s-1
           are loaded and training continues with the numbers of the
           uninterrupted run (the resume case of `cases`)
"""
import json
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import hostnet
import mh_cases as C
from cluster import Job
from mh_oracle import expected

pytestmark = [pytest.mark.multihost]

HOSTS = int(os.environ.get("SYNCBN_MH_HOSTS", "2"))
WORKERS = int(os.environ.get("SYNCBN_MH_WORKERS", "2"))
WORLD = HOSTS * WORKERS
FAIL_STEP = int(os.environ.get("SYNCBN_MH_FAIL_STEP", "2"))
FAIL_RANK = int(os.environ.get("SYNCBN_MH_FAIL_RANK", str(WORLD - 1)))
LINK_HOST = int(os.environ.get("SYNCBN_MH_LINK_HOST", str(HOSTS - 1)))
COMM_TIMEOUT = int(os.environ.get("SYNCBN_MH_COMM_TIMEOUT", "10"))
# docs/syncbn.md, "When a peer is lost": a survivor raises SyncBatchNormPeerLostError within RAISE_S
# of the loss (two collective waits plus the step's own work: a GRAPH compile on a busy machine),
# and its process has ended within BOUND_S (MindSpore's cluster finalisation waits up to 30 s more).
RAISE_S = 2 * COMM_TIMEOUT + 40
BOUND_S = RAISE_S + 35
START_S = 120 + 40 * WORLD  # msrun start-up of a job on a busy 2-core machine, at most


def parse_groups(text, world):
    if text is None:
        half = world // 2
        return [list(range(half)), list(range(half, world))] if world >= 2 else None
    if text.strip().lower() in ("", "none"):
        return None
    return [[int(r) for r in part.split(",")] for part in text.split(";")]


GROUPS = parse_groups(os.environ.get("SYNCBN_MH_GROUPS"), WORLD)


@pytest.fixture(scope="module")
def hosts_ok():
    reason = hostnet.unavailable_reason()
    if reason:
        pytest.skip(f"multi-host test needs network namespaces: {reason}")
    if not 0 < FAIL_STEP <= C.RESUME_STEPS or not 0 <= FAIL_RANK < WORLD or not 0 <= LINK_HOST < HOSTS:
        pytest.fail(f"bad failure point: step {FAIL_STEP}, rank {FAIL_RANK}, host {LINK_HOST}")
    hostnet.reap_stale()


def _run_ok(net, out, spec, timeout=START_S + 120):
    job = Job(net, out, WORKERS, dict(spec, groups=GROUPS))
    codes = job.wait(timeout)
    assert codes == [0] * HOSTS, f"msrun return codes {codes}\n{job.tails()}"
    return job


def _load(out, mode, case):
    return [dict(np.load(os.path.join(out, f"{mode}_{case}_rank{r}.npz"))) for r in range(WORLD)]


def _rel_err(got, want):
    return float(np.max(np.abs(got - want) / (1.0 + np.abs(want)))) if want.size else 0.0


def check_against_oracle(res, case, first=1):
    want = expected(case, WORLD, GROUPS)
    for step in range(first, C.steps_of(case) + 1):
        for rank in range(WORLD):
            for key, value in want[step][rank].items():
                got = res[rank][f"{key}{step}"]
                assert got.shape == value.shape, (case, step, rank, key, got.shape, value.shape)
                tol = 1e-3 if key in ("gg", "gb") else 1e-4
                err = _rel_err(got, value)
                assert err < tol, f"{case} step {step} rank {rank} {key}: error {err:.3g}\n{got}\n{value}"


def check_identical(res, case, first=1):
    """Running statistics equal bit for bit within each sync set, parameters on every rank."""
    for step in range(first, C.steps_of(case) + 1):
        for s in C.sync_sets(case, GROUPS, WORLD):
            for key in ("mm", "mv"):
                for r in s[1:]:
                    assert np.array_equal(res[r][f"{key}{step}"], res[s[0]][f"{key}{step}"]), (case, step, key, r)
        for key in ("gamma", "beta"):
            for r in range(1, WORLD):
                assert np.array_equal(res[r][f"{key}{step}"], res[0][f"{key}{step}"]), (case, step, key, r)


@pytest.fixture(scope="module")
def jobs(hosts_ok, tmp_path_factory):
    """The cases job, the kill job and the link job side by side (start-ups and waits overlap)."""
    nets = [hostnet.HostNet(HOSTS) for _ in range(3 if HOSTS > 1 else 2)]
    try:
        outs = [tmp_path_factory.mktemp(name) for name in ("mh_cases", "mh_kill", "mh_link")]
        cases = Job(nets[0], outs[0], WORKERS, {"job": "cases", "modes": ["pynative", "graph"], "groups": GROUPS})
        failures = {"kill": Failure(nets[1], outs[1], "pynative",
                                    lambda pids: os.kill(pids[FAIL_RANK], signal.SIGKILL),
                                    [r for r in range(WORLD) if r != FAIL_RANK])}
        if HOSTS > 1:   # one host: its workers still reach each other through its own address
            failures["link"] = Failure(nets[2], outs[2], "graph", lambda pids: nets[2].link_down(LINK_HOST),
                                       list(range(WORLD)))
        with ThreadPoolExecutor(2) as pool:
            runs = {name: pool.submit(f.run) for name, f in failures.items()}
            done = {name: (f, *runs[name].result()) for name, f in failures.items()}
        codes = cases.wait(START_S + 180)
        done["cases"] = (str(outs[0]), codes, cases.tails() if codes != [0] * HOSTS else "")
        yield done
    finally:
        for net in nets:
            net.close()


@pytest.fixture(scope="module")
def cases_dir(jobs):
    out, codes, tails = jobs["cases"]
    assert codes == [0] * HOSTS, f"msrun return codes {codes}\n{tails}"
    return out


@pytest.mark.parametrize("mode,case", [(m, c) for m, cs in C.MODE_CASES.items() for c in cs])
def test_hosts_train_like_full_batch(cases_dir, mode, case):
    res = _load(cases_dir, mode, case)
    check_against_oracle(res, case)
    check_identical(res, case)


def _ready_pids(out, step, timeout):
    deadline = time.monotonic() + timeout
    while True:
        names = [os.path.join(out, f"ready_{step}_rank{r}") for r in range(WORLD)]
        if all(os.path.exists(n) for n in names):
            return [int(open(n).read()) for n in names]
        if time.monotonic() > deadline:
            raise AssertionError(f"not every rank reached step {step} in {timeout} s")
        time.sleep(0.1)


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][:1] != "Z"
    except FileNotFoundError:
        return False


class Failure:
    """A `fail` job: every rank waits before FAIL_STEP, `act(pids)` breaks the job, then the survivors end."""

    def __init__(self, net, out, mode, act, survivors):
        self.out, self.act, self.survivors = str(out), act, survivors
        env = {"MS_CPU_COMM_OP_TIMEOUT": str(COMM_TIMEOUT)}
        self.job = Job(net, out, WORKERS, {"job": "fail", "modes": [mode], "groups": GROUPS,
                                           "fail_step": FAIL_STEP}, join=False, env=env)

    def run(self):
        pids = _ready_pids(self.out, FAIL_STEP, START_S)
        self.act(pids)
        t0 = time.time()
        with open(os.path.join(self.out, f"go_{FAIL_STEP}"), "w"):
            pass
        ended = {}
        while len(ended) < len(self.survivors) and time.time() - t0 < BOUND_S + 60:
            for r in self.survivors:
                if r not in ended and not _alive(pids[r]):
                    ended[r] = time.time() - t0
            time.sleep(0.2)
        return t0, ended

    def check(self, t0, ended):
        tails = self.job.tails()
        assert sorted(ended) == sorted(self.survivors), f"still running after {BOUND_S + 60} s: " \
            f"{sorted(set(self.survivors) - set(ended))}\n{tails}"
        slow = {r: t for r, t in ended.items() if t > BOUND_S}
        assert not slow, f"ranks ended later than the bound {BOUND_S} s: {slow}"
        raised = {}
        for r in self.survivors:
            path = os.path.join(self.out, f"outcome_rank{r}.json")
            assert os.path.exists(path), f"rank {r} ended without an error record\n{tails}"
            with open(path) as f:
                got = json.load(f)
            assert got["type"] == "SyncBatchNormPeerLostError", (r, got)
            msg = got["message"]
            assert f"SyncBatchNorm lost a peer in step {FAIL_STEP}" in msg, msg
            assert "The collective belongs to" in msg and "Check:" in msg and "MS_CPU_COMM_OP_TIMEOUT" in msg, msg
            mine = next(s for s in C.sync_sets(C.RESUME_CASE, GROUPS, WORLD) if r in s)
            if len(mine) > 1:
                assert f"group {mine}" in msg, msg
            assert got["time"] - t0 <= RAISE_S, (r, got["time"] - t0, RAISE_S)
            raised[r] = round(got["time"] - t0, 1)
        timings = {"raised_s": raised, "ended_s": {r: round(t, 1) for r, t in ended.items()}}
        with open(os.path.join(self.out, "timings.json"), "w") as f:
            json.dump(timings, f)
        print(f"{os.path.basename(self.out)}: {timings}")


def test_killed_peer_named_on_every_survivor(jobs):
    f, t0, ended = jobs["kill"]
    f.check(t0, ended)


def test_link_down_named_on_every_rank(jobs):
    if "link" not in jobs:
        pytest.skip("one host: a link down separates no ranks")
    f, t0, ended = jobs["link"]
    f.check(t0, ended)


@pytest.fixture(scope="module")
def resume_dir(jobs, tmp_path_factory):
    out = tmp_path_factory.mktemp("mh_resume")
    with hostnet.HostNet(HOSTS) as net:
        _run_ok(net, out, {"job": "resume", "modes": ["pynative"], "resume_from": str(jobs["kill"][0].out),
                           "resume_step": FAIL_STEP})
    return out


def test_layout_mismatch_fails_on_every_rank(resume_dir):
    for r in range(WORLD):
        with open(os.path.join(resume_dir, f"mismatch_rank{r}.json")) as f:
            got = json.load(f)
        for field, what in (("channels", "num_features"), ("dtype", "dtype"), ("groups", "process_groups")):
            assert got[field]["type"] == "SyncBatchNormMismatchError", (r, field, got[field])
            assert f"SyncBatchNorm: {what} expected the same on every rank" in got[field]["message"], got[field]
    assert f"rank {WORLD - 1}" in got["channels"]["message"]


def test_restart_from_checkpoint_continues_like_uninterrupted(resume_dir, cases_dir):
    resumed = _load(resume_dir, "pynative", C.RESUME_CASE)
    straight = _load(cases_dir, "pynative", C.RESUME_CASE)
    for step in range(FAIL_STEP, C.RESUME_STEPS + 1):
        for r in range(WORLD):
            for key in ("y", "gx", "gg", "gb", "mm", "mv", "gamma", "beta"):
                a, b = resumed[r][f"{key}{step}"], straight[r][f"{key}{step}"]
                assert a.shape == b.shape and _rel_err(a, b) <= 1e-6, (step, r, key, a, b)
    check_against_oracle(resumed, C.RESUME_CASE, first=FAIL_STEP)
    check_identical(resumed, C.RESUME_CASE, first=FAIL_STEP)
