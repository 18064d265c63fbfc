"""A lower bound of the performance model's time that no design of BatchNormBackward can beat (issue 27).

Computed from the shape, the dtype and the SoC line's figures in op_def/ascend_soc_capabilities.yaml
alone, never from the kernel's counters: per pipe, the work every design must pass through it,
spread evenly over every vector core of the SoC, at the model's own rates (sim_perf.h):

- gm:   x and dy read once, dx written once, at the chip's GM bandwidth (the model's bound);
- mte2: x and dy read once at a core's GM share, min(its port, chip / cores); plus, where one
        channel's x + dy exceed the UB of all cores together, the excess read a second time, at a
        core's L2 rate (the fastest a re-read can be);
- mte3: dx written once at a core's GM share;
- v:    the vector instructions each element needs at least (`vector_instructions`), each a
        repeat of `vector_bytes` per 64 float32 lanes (casts cost their float32 side), issue
        cycles left out (they shrink with longer instructions).

Each pipe's figure but gm adds two copy latencies: no vector instruction or store starts before
a first load landed, and the launch ends when the last store has landed. The floor is the largest;
docs/ascend_kernel.md ("The floor") argues each count.
"""
from . import ascend_model

FLOAT_BYTES = 4  # the computation is float32 whatever the element type (docs/operator.md)


def vector_instructions(dtype, mul_add):
    """Vector instructions per element at least: the two sums, the apply step, the casts."""
    reduce = 1 + 1 + (1 if mul_add else 2)  # x - mean; sum dy; sum dy * (x - mean) (MulAddDst or Mul + Add)
    apply = 2 if mul_add else 3             # a * dy + k * x + b: FusedMulAdd, MulAddDst; else Muls, Axpy, Adds
    casts = 3 if ascend_model.DTYPES[dtype][1] < FLOAT_BYTES else 0  # x, dy in; dx out
    return reduce + apply + casts


def floor(soc, shape, dtype, caps=None):
    """{"us": the floor, "pipe": the pipe that sets it, "pipes_us": {pipe: its figure}}."""
    caps = caps or ascend_model.capabilities()[soc]
    eb = ascend_model.DTYPES[dtype][1]
    n, c = shape[0], shape[1]
    inner = 1
    for d in shape[2:]:
        inner *= d
    elements = n * c * inner
    cores = caps["vector_cores"]
    ns_per_cycle = 1e3 / caps["clock_mhz"]
    share = min(caps["core_gm_bytes_per_cycle"] / ns_per_cycle, caps["gm_gbps"] / cores)  # bytes per ns
    l2_rate = caps["core_l2_bytes_per_cycle"] / ns_per_cycle
    fill_drain = 2 * caps["copy_latency_ns"]
    reread = c * max(0, 2 * n * inner * eb - cores * caps["ub_bytes"])
    per_core = elements / cores
    pipes = {
        "gm": 3 * elements * eb / caps["gm_gbps"],
        "mte2": 2 * per_core * eb / share + reread / cores / l2_rate + fill_drain,
        "mte3": per_core * eb / share + fill_drain,
        "v": per_core * vector_instructions(dtype, caps["mul_add"]) * FLOAT_BYTES / caps["vector_bytes"]
        * ns_per_cycle + fill_drain,
    }
    pipes_us = {p: t / 1e3 for p, t in pipes.items()}
    pipe = max(pipes_us, key=pipes_us.get)
    return {"us": pipes_us[pipe], "pipe": pipe, "pipes_us": pipes_us}
