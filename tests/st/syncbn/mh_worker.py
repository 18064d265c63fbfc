"""One msrun worker of the multi-host SyncBatchNorm test: python mh_worker.py SPEC.json

SPEC (written by cluster.py): {"out": dir, "job": ..., "modes": [...], "groups": [[..]..] or null,
"fail_step": s, "resume_step": s}. Jobs:
  cases     the cases of mh_cases.MODE_CASES in every mode; saves <mode>_<case>_rank<r>.npz
            (per step: y, gx, gg, gb, mm, mv and the parameters after the update)
  fail      the resume case (first mode), a checkpoint after every step; before step
            fail_step every rank reports ready_<s>_rank<r> (with its pid) and waits for go_<s>
            (the harness kills a rank or pulls a link in between); each rank that ends with
            an error writes outcome_rank<r>.json
  mismatch  builds SyncBatchNorm layers the ranks disagree on (channels, dtype, groups) and
            records the error each rank gets (mismatch_rank<r>.json), then goes on with
  resume    restarts the resume case from the checkpoints of step resume_step - 1 and runs it
            to the end (saves like `cases`, steps resume_step and later)
"""
import json
import os
import sys
import time

import numpy as np

import mh_cases as C  # run as a script: its folder is on sys.path


def _env():
    import mindspore as ms
    from mindspore.communication import get_group_size, get_rank, init
    ms.set_context(device_target="CPU")
    init()
    return get_rank(), get_group_size()


class Trainer:
    """A lone SyncBatchNorm trained on sum(y * W), parameters averaged over the world."""

    def __init__(self, case, groups, world):
        import mindspore as ms
        from mindspore import Tensor, ops
        from mindspore_bn_grad.nn import SyncBatchNorm
        from sum_loss import WeightedSumLoss
        gamma, beta = C.initial_params()
        fmt = C.ALL[case][0]
        self.bn = SyncBatchNorm(C.CHANNELS, eps=C.EPS, momentum=C.MOMENTUM, gamma_init=Tensor(gamma),
                                beta_init=Tensor(beta), process_groups=C.groups_of(case, groups), data_format=fmt)
        self.bn.set_train()
        self.net = WeightedSumLoss(self.bn)
        self.grad = ms.value_and_grad(self.net, grad_position=0, weights=self.net.trainable_params(),
                                      has_aux=True)
        self.reduce = ops.AllReduce()
        self.world = world

    def step(self, x, w):
        from mindspore import Tensor, ops
        (_, y), (gx, (gg, gb)) = self.grad(Tensor(x), Tensor(w))
        both = self.reduce(ops.concat((gg, gb))).asnumpy() / self.world
        c = C.CHANNELS
        for p, g in ((self.bn.gamma, both[:c]), (self.bn.beta, both[c:])):
            p.set_data(Tensor((p.asnumpy() - C.LR * g).astype(np.float32)))
        # copies: on CPU asnumpy() of a Parameter shares its memory, which the next step updates in place
        got = {"y": y, "gx": gx, "gg": gg, "gb": gb, "mm": self.bn.moving_mean, "mv": self.bn.moving_variance,
               "gamma": self.bn.gamma, "beta": self.bn.beta}
        return {k: v.asnumpy().copy() for k, v in got.items()}


def _set_mode(mode):
    import mindspore as ms
    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)


def run_case(spec, mode, case, rank, world, first=1, before_step=None, ckpt=None, load=None):
    from mindspore_bn_grad.nn import SyncGuard
    import mindspore as ms
    _set_mode(mode)
    t = Trainer(case, spec["groups"], world)
    if first > 1:
        ms.load_param_into_net(t.net, ms.load_checkpoint(load(first - 1)), strict_load=True)
    guard = SyncGuard(t.step, network=t.net, first_step=first)
    saved = {}
    for step in range(first, C.steps_of(case) + 1):
        if before_step:
            before_step(step)
        x, w = C.rank_rows(case, world, spec["groups"], step, rank)
        for k, v in guard(x, w).items():
            saved[f"{k}{step}"] = v
        if ckpt:
            ms.save_checkpoint(t.net, ckpt(step))
        print(f"rank {rank} {mode} {case} step {step} done", flush=True)
    np.savez(os.path.join(spec["out"], f"{mode}_{case}_rank{rank}.npz"), **saved)


def _wait_for_go(out, step, rank):
    with open(os.path.join(out, f"ready_{step}_rank{rank}.tmp"), "w") as f:
        f.write(str(os.getpid()))
    os.replace(os.path.join(out, f"ready_{step}_rank{rank}.tmp"), os.path.join(out, f"ready_{step}_rank{rank}"))
    deadline = time.monotonic() + 300
    while not os.path.exists(os.path.join(out, f"go_{step}")):
        if time.monotonic() > deadline:
            raise SystemExit(f"rank {rank}: no go for step {step}")
        time.sleep(0.05)


def _record(path, err, **extra):
    with open(path, "w") as f:
        json.dump({"type": type(err).__name__, "message": str(err), "time": time.time(), **extra}, f)


def job_fail(spec, rank, world):
    out = spec["out"]
    ckpt = lambda s: os.path.join(out, "ckpt", f"rank{rank}_step{s}.ckpt")  # noqa: E731
    os.makedirs(os.path.join(out, "ckpt"), exist_ok=True)
    fail = spec["fail_step"]
    try:
        run_case(spec, spec["modes"][0], C.RESUME_CASE, rank, world, ckpt=ckpt,
                 before_step=lambda s: _wait_for_go(out, s, rank) if s == fail else None)
    except Exception as err:  # the outcome is what the test checks
        _record(os.path.join(out, f"outcome_rank{rank}.json"), err)
        raise
    raise SystemExit(f"rank {rank}: the step after the failure point completed")


def job_mismatch(spec, rank, world):
    from mindspore_bn_grad.nn import SyncBatchNorm
    from mindspore import dtype as mstype
    last = world - 1
    tries = {
        "channels": dict(num_features=4 + (rank == last)),
        "dtype": dict(num_features=4, dtype=mstype.float16 if rank == last else mstype.float32),
        "groups": dict(num_features=4, process_groups=[[r] for r in range(world)] if rank == last
                       else [list(range(world))]),
    }
    got = {}
    for name, kwargs in tries.items():
        try:
            SyncBatchNorm(**kwargs)
            got[name] = {"type": None, "message": "no error"}
        except Exception as err:  # recorded, checked by the test
            got[name] = {"type": type(err).__name__, "message": str(err)}
    with open(os.path.join(spec["out"], f"mismatch_rank{rank}.json"), "w") as f:
        json.dump(got, f)


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    rank, world = _env()
    job = spec["job"]
    if job == "cases":
        for mode in spec["modes"]:
            for case in C.MODE_CASES[mode]:
                run_case(spec, mode, case, rank, world)
    elif job == "fail":
        job_fail(spec, rank, world)
    elif job in ("mismatch", "resume"):
        job_mismatch(spec, rank, world)
        src = spec["resume_from"]
        load = lambda s: os.path.join(src, "ckpt", f"rank{rank}_step{s}.ckpt")  # noqa: E731
        run_case(spec, spec["modes"][0], C.RESUME_CASE, rank, world, first=spec["resume_step"], load=load)
    else:
        raise SystemExit(f"unknown job {job!r}")


if __name__ == "__main__":
    main()
