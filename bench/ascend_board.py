"""On an Ascend board: our BatchNormBackward kernel against MindSpore's aclnn BatchNorm backward
(BatchNormGradExt, which calls aclnnBatchNormBackward) on the ResNet-50 BatchNorm shapes of
`bench --ascend`, timed the same way in the same run, with the model's estimate beside.
Elsewhere it says so and exits 0. `scripts/run_st.sh --perf` runs it under msprof when msprof is
on PATH, so the profile holds the device time of both kernels.

    python -m mindspore_bn_grad_bench.ascend_board [--repeat N] [--dtype float32|float16] [--json FILE]
"""
import argparse
import json
import sys
import time

import numpy as np

from . import ascend


def _device():
    try:
        import mindspore as ms
        return bool(ms.hal.is_available("Ascend"))
    except Exception:  # noqa: BLE001 - any failure means no usable device
        return False


def _aclnn_backward():
    """MindSpore's aclnn-style BatchNorm backward primitive, or None where this MindSpore has none."""
    try:
        from mindspore.ops.auto_generate import BatchNormGradExt
        return BatchNormGradExt()
    except Exception:  # noqa: BLE001
        return None


def _time_ms(fn, repeat):
    import mindspore as ms
    fn()
    ms.runtime.synchronize()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    ms.runtime.synchronize()
    return (time.perf_counter() - start) / repeat * 1e3


def measure(shape, dtype, repeat):
    import mindspore as ms
    from mindspore_bn_grad import batch_norm_backward
    ms.set_context(mode=ms.PYNATIVE_MODE, device_target="Ascend")
    rng = np.random.default_rng(0)
    c = shape[1]
    t = lambda a: ms.Tensor(a.astype(np.float32)).astype(getattr(ms, dtype))  # noqa: E731
    dy, x = t(rng.standard_normal(shape)), t(rng.standard_normal(shape))
    w, mean, invstd = t(rng.uniform(0.5, 1.5, c)), t(rng.standard_normal(c)), t(rng.uniform(0.5, 1.5, c))
    mask = (True, True, True)
    ours = _time_ms(lambda: batch_norm_backward(dy, x, w, None, None, mean, invstd, training=True, eps=1e-5,
                                                output_mask=mask), repeat)
    aclnn = _aclnn_backward()
    theirs = None
    if aclnn is not None:
        theirs = _time_ms(lambda: aclnn(dy, x, w, None, None, mean, invstd, True, 1e-5, mask), repeat)
    return ours, theirs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--dtype", choices=["float32", "float16"], action="append")
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)
    if not _device():
        print("ascend_board: no Ascend device (mindspore.hal.is_available('Ascend') is False): nothing to time")
        return 0
    from mindspore_bn_grad import target
    soc = target.detected_target()
    rows = []
    for dtype in args.dtype or ["float32", "float16"]:
        for shape, layers in ascend.resnet50_shapes():
            ours, theirs = measure(shape, dtype, args.repeat)
            rows.append({"soc": soc, "shape": list(shape), "dtype": dtype, "layers": layers, "ours_ms": ours,
                         "aclnn_ms": theirs, "ratio": (theirs / ours) if theirs else None})
            print(f"{soc} {dtype} {shape}: ours {ours:.3f} ms, aclnnBatchNormBackward "
                  f"{'n/a' if theirs is None else f'{theirs:.3f} ms'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
