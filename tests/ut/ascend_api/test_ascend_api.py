"""The Ascend C operator against the public Ascend C API (asc-devkit headers in
their CPU-debug mode) instead of the project's simulator: every kernel entry
compiles for every SoC line, op_host compiles against the public
registration / tiling / logging headers, the simulator's API is called the
same way against both, and on the SoCs whose intrinsics the project's
stand-ins model the kernels run core by core (one process per core) against
the float64 reference (tests/reference.py).

Skipped without the headers (see apilib.SKIP_REASON); with them the build
takes minutes (cached by a hash of the sources).
"""
import itertools

import numpy as np
import pytest

import apilib
from reference import batch_norm_backward_ref, sync_elemt_ref, sync_reduce_ref
from mindspore_bn_grad import support_rules

pytestmark = pytest.mark.ascend_api

SOCS = support_rules.targets(device="Ascend")
RUN_SOCS = ("ascend910b", "ascend910_93", "ascend910", "ascend310p")
LEGACY = ("ascend910", "ascend310p")  # no DataCopyPad, no SyncAll, no bfloat16 kernels
TOL = {"float32": (1e-4, 1e-5), "float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2)}


# ---- compile ----
@pytest.mark.parametrize("kernel", apilib.KERNELS)
@pytest.mark.parametrize("soc", SOCS)
def test_kernel_entry_compiles(api_build, soc, kernel):
    key = f"{soc} kernel {kernel}"
    assert api_build.status.get(key) == "ok", f"{key}:\n{api_build.log(soc, kernel)}"


@pytest.mark.parametrize("soc", SOCS)
def test_simulator_api_matches_real_api(api_build, soc):
    """tests/ascend_tools/api_check/sim_api_probe.cpp calls every API the simulator provides with the simulator's
    argument types; it must compile against the simulator and against the real headers."""
    assert api_build.status.get("sim sim-api probe") == "ok", api_build.stdout
    key = f"{soc} sim-api probe"
    assert api_build.status.get(key) == "ok", f"{key}:\n{api_build.log(soc, 'sim_api_probe')}"


@pytest.mark.parametrize("source", apilib.HOST_SOURCES)
def test_op_host_compiles(api_build, source):
    if not apilib.host_headers_available():
        pytest.skip(apilib.SKIP_REASON)
    key = f"op_host {source}"
    assert api_build.status.get(key) == "ok", f"{key}:\n{(api_build.dir / f'host_{source}.log').read_text()}"


def test_soc_table_covers_the_yaml(soc_table):
    assert list(soc_table) == SOCS
    assert {s for s, runs in soc_table.items() if runs} == set(RUN_SOCS)


@pytest.fixture(scope="module")
def launcher(api_build):
    def get(soc):
        key = f"{soc} launcher"
        assert api_build.status.get(key) == "ok", f"{key}:\n{api_build.log(soc, 'launcher')}"
        return api_build.launcher(soc)
    return get


# ---- BatchNormBackward against the reference ----
def make_inputs(shape, channel_last, dtype, seed=0, param_float32=(), with_weight=True):
    rng = np.random.default_rng(seed)
    c = shape[-1] if channel_last else shape[1]
    q = lambda a, name=None: apilib.simlib.quantize(a, "float32" if name in param_float32 else dtype)  # noqa: E731
    return dict(
        grad_out=q(rng.standard_normal(shape)),
        x=q(rng.standard_normal(shape) * 2 + 0.5),
        params=dict(
            weight=q(rng.uniform(0.5, 1.5, c), "weight") if with_weight else None,
            running_mean=q(rng.standard_normal(c) * 0.3, "running_mean"),
            running_var=q(rng.uniform(0.5, 2.0, c), "running_var"),
            save_mean=q(rng.standard_normal(c) * 0.3, "save_mean"),
            save_invstd=q(rng.uniform(0.5, 1.5, c), "save_invstd"),
        ),
    )


def check(launcher, soc, shape, channel_last=False, dtype="float32", training=True, mask=(True, True, True),
          cores=1, ub_bytes=0, seed=0, **kw):
    args = make_inputs(shape, channel_last, dtype, seed, **kw)
    outs, info = apilib.run(launcher(soc), "full", args["grad_out"], args["x"], args["params"], training=training,
                            output_mask=mask, channel_last=channel_last, dtype=dtype, cores=cores,
                            ub_bytes=ub_bytes)
    p = args["params"]
    refs = batch_norm_backward_ref(args["grad_out"], args["x"], p["weight"], p["running_mean"], p["running_var"],
                                   p["save_mean"], p["save_invstd"], training=training, output_mask=mask,
                                   data_format="NHWC" if channel_last else "NCHW")
    c = shape[-1] if channel_last else shape[1]
    n = int(np.prod(shape)) // c
    for i, (got, ref) in enumerate(zip(outs, refs)):
        rtol, atol = TOL[dtype]
        if i > 0:
            atol += 2e-6 * n * (1 + np.abs(args["x"]).max())  # float32 accumulation over n terms
        if not mask[i]:
            assert np.array_equal(got, np.zeros_like(ref)), f"output {i} masked but not zero-filled"
        np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, err_msg=f"{soc} output {i} {info}")
    return info


SHAPES = [
    ((4, 3, 5, 7), False),             # channel-first, tails everywhere
    ((2, 70, 9), False),               # two parameter groups
    ((6, 5), False),                   # NC: channel-last in memory
    ((3, 4, 5, 6), True),              # NHWC
    ((2, 3, 4, 5, 19), True),          # NDHWC, odd C
    ((2, 16, 8, 8), False),            # whole blocks everywhere
    ((1, 2, 3), False),                # smaller than one block
]


def dtypes_of(soc):
    return ("float32", "float16") if soc in LEGACY else ("float32", "float16", "bfloat16")


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape,channel_last", SHAPES)
@pytest.mark.parametrize("soc", RUN_SOCS)
def test_shapes_dtypes_modes(launcher, soc, shape, channel_last, training):
    for dtype in dtypes_of(soc):
        info = check(launcher, soc, shape, channel_last, dtype, training, cores=3)
        if soc in LEGACY:
            assert info["use_pad"] == 0 and info["cross_core"] == 0


@pytest.mark.parametrize("soc", ("ascend910b", "ascend910"))
def test_masks_and_absent_weight(launcher, soc):
    for mask in itertools.product([True, False], repeat=3):
        check(launcher, soc, (3, 5, 6, 7), False, "float16", True, mask, cores=2)
    check(launcher, soc, (5, 9), True, "float32", False, with_weight=False)


def test_mixed_precision_params(launcher):
    params = apilib.PARAMS
    for dtype in ("float16", "bfloat16"):
        args = make_inputs((2, 7, 13), False, dtype, param_float32=params)
        outs, _ = apilib.run(launcher("ascend910b"), "full", args["grad_out"], args["x"], args["params"],
                             dtype=dtype, param_float32=params, grad_param_float32=True, cores=2)
        p = args["params"]
        refs = batch_norm_backward_ref(args["grad_out"], args["x"], p["weight"], None, None, p["save_mean"],
                                       p["save_invstd"])
        for got, ref in zip(outs, refs):
            np.testing.assert_allclose(got, ref, rtol=TOL[dtype][0], atol=TOL[dtype][1] + 1e-3)


@pytest.mark.parametrize("soc", RUN_SOCS)
def test_tiny_ub_many_tiles_many_cores(launcher, soc):
    """Small UB: several tiles per row and per channel; several cores (SyncAll where the SoC has it)."""
    first = check(launcher, soc, (5, 3, 2001), False, "float16", True, cores=4, ub_bytes=16 * 1024)
    last = check(launcher, soc, (50, 701), True, "float32", True, cores=4, ub_bytes=16 * 1024)
    if soc in LEGACY:  # whole channel groups per core; without DataCopyPad the ragged last chunk is shifted
        assert first["cross_core"] == last["cross_core"] == 0 and first["shift_last"] == 1
        assert last["used_cores"] > 1
    else:  # a channel's partial sums come from several cores, combined after SyncAll
        assert first["cross_core"] == last["cross_core"] == 1
        assert first["used_cores"] == last["used_cores"] == 4


@pytest.mark.parametrize("soc", LEGACY)
def test_soft_sync_all_splits_channels(launcher, soc):
    """Atlas training / inference: the headers' software SyncAll (SoftSyncAllImpl, flags in the
    workspace, which the launcher hands over as garbage and every core zeroes) lets a channel's units
    run on several cores: values against the reference, the same bits as on one core."""
    for dtype in ("float32", "float16"):
        info = check(launcher, soc, (4, 16, 32, 32), False, dtype, True, cores=3, ub_bytes=20 * 1024)
        assert info["cross_core"] == 1 and info["soft_sync"] == 1 and info["used_cores"] == 3
    args = make_inputs((4, 16, 32, 32), False, "float32")
    got = [apilib.run(launcher(soc), "full", args["grad_out"], args["x"], args["params"], ub_bytes=20 * 1024,
                      cores=n)[0] for n in (1, 3)]
    for a, b in zip(got[0], got[1]):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("soc", LEGACY)
def test_single_pass_event_ids_within_the_pool(launcher, soc):
    """Single passes with several sub-groups and chunks per buffer, values against the reference: every
    event id the kernel sets or waits on is below the core's QUE_MAX_EVENT (4 on ascend910, where the
    headers' SetFlagImpl aborted on the first shape's chunk events before the tiling kept them in range)."""
    for shape, dtype, cores in (((16, 44, 14, 14), "float32", 2), ((16, 24, 14, 14), "float16", 4),
                                ((8, 96, 7, 7), "float16", 2)):
        check(launcher, soc, shape, False, dtype, True, cores=cores)


def test_packed_float32_scalar_operands_on_ascend910(launcher):
    """ascend910's float32 packed single pass (7x7, 5x5: lanes summed by the scalar unit, no mul_add) takes the
    apply's per-channel values as the scalar operands of the masked repeat forms of Muls / Adds
    (UnaryRepeatParams, a repeat per row; 14x14: a repeat per row and piece of a channel wider than a repeat,
    slabs in a core's last sub-group) under the real headers: values against the reference with several
    sub-groups, cores and output masks."""
    for shape, cores in (((6, 48, 7, 7), 2), ((5, 32, 5, 5), 3), ((4, 24, 14, 14), 3)):
        info = check(launcher, "ascend910", shape, False, "float32", True, cores=cores)
        assert info["cross_core"] == 0 and info["used_cores"] == cores
        check(launcher, "ascend910", shape, False, "float32", True, (True, False, True), cores=cores)


def test_deterministic_for_any_core_count(launcher):
    args = make_inputs((4, 3, 999), False, "float32")
    got = [apilib.run(launcher("ascend910b"), "full", args["grad_out"], args["x"], args["params"],
                      ub_bytes=20 * 1024, cores=n)[0] for n in (1, 3, 8)]
    for other in got[1:]:
        for a, b in zip(got[0], other):
            assert np.array_equal(a, b)


@pytest.mark.parametrize("soc", LEGACY)
def test_bfloat16_refused_where_not_built(launcher, soc):
    args = make_inputs((2, 3, 4), False, "bfloat16")
    with pytest.raises(apilib.TilingError, match="no kernel on this SoC"):
        apilib.run(launcher(soc), "full", args["grad_out"], args["x"], args["params"], dtype="bfloat16")


# ---- SyncBatchNorm steps against the reference (tests/reference.py) ----
@pytest.mark.parametrize("shape,channel_last", [((4, 3, 5, 7), False), ((3, 4, 5, 6), True), ((2, 70, 9), False)])
@pytest.mark.parametrize("soc", RUN_SOCS)
def test_reduce_and_elemt(launcher, soc, shape, channel_last):
    for dtype in dtypes_of(soc):
        args = make_inputs(shape, channel_last, dtype, seed=3)
        p = args["params"]
        dy, x = args["grad_out"], args["x"]
        mean, invstd, weight = p["save_mean"], p["save_invstd"], p["weight"]
        c = shape[-1] if channel_last else shape[1]
        local = int(np.prod(shape)) // c
        counter = [local, 2 * local + 1]  # this rank's count plus another rank's
        fmt = "NHWC" if channel_last else "NCHW"
        ref = sync_reduce_ref(dy, x, mean, invstd, fmt)
        rtol, atol = TOL[dtype]
        red_atol = atol + 2e-6 * local * (1 + np.abs(x).max())
        params = dict(weight=weight, save_mean=mean, save_invstd=invstd)
        outs, _ = apilib.run(launcher(soc), "reduce", dy, x, params, channel_last=channel_last, dtype=dtype, cores=3)
        for i, (got, want) in enumerate(zip(outs, ref)):
            np.testing.assert_allclose(got, want, rtol=rtol, atol=red_atol, err_msg=f"{soc} reduce output {i}")
        sums = (apilib.simlib.quantize(ref[0], dtype), apilib.simlib.quantize(ref[1], dtype))
        (gi,), _ = apilib.run(launcher(soc), "elemt", dy, x, params, channel_last=channel_last, dtype=dtype,
                              cores=3, sums=sums, counter=counter)
        # the sums travel in the dtype: the reference takes the same rounded sums
        want = sync_elemt_ref(dy, x, mean, invstd, weight, sums[0], sums[1], counter, fmt)
        np.testing.assert_allclose(gi, want, rtol=rtol, atol=atol, err_msg=f"{soc} elemt")


def test_skip_reason_is_one_short_line():
    """pytest prints it once per skipped test: it must not flood the report."""
    assert "\n" not in apilib.SKIP_REASON and len(apilib.SKIP_REASON) <= 160
