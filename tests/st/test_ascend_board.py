"""Board system tests of the Ascend C operator through the public API, both
modes, against the float64 reference. Skipped where no Ascend device exists.
Run with scripts/run_st.sh on a board with the op package installed
(scripts/build_ascend.sh) and ASCEND_CUSTOM_OPP_PATH set.
"""
import itertools

import numpy as np
import pytest

from reference import batch_norm_backward_ref


def _ascend_available():
    try:
        import mindspore as ms
        return bool(ms.hal.is_available("Ascend"))
    except Exception:  # noqa: BLE001 - any failure means no usable device
        return False


pytestmark = [pytest.mark.ascend,
              pytest.mark.skipif(not _ascend_available(), reason="no Ascend device (mindspore.hal.is_available('Ascend') is False)")]

ALL_MASKS = list(itertools.product([True, False], repeat=3))
TOL = {"float32": (1e-4, 1e-4), "float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2)}
SHAPES = [(4, 3), (2, 3, 5), (2, 5, 7, 9), (2, 3, 4, 5, 6), (2, 3, 1, 2, 3), (2, 3, 2, 1, 2, 3),
          (1, 3, 2, 1, 1, 2, 3), (2, 3, 1, 1, 1, 1, 2, 2), (0, 3, 4), (2, 3, 0), (16, 64, 56, 56), (3, 17, 31, 33)]


def _soc_dtypes():
    from mindspore_bn_grad import support_rules, target
    return support_rules.load_support().targets[target.detected_target()].dtypes


def _ms_dtype(name):
    import mindspore as ms
    return {"float32": ms.float32, "float16": ms.float16, "bfloat16": ms.bfloat16}[name]


def _tensor(a, dtype):
    import mindspore as ms
    return None if a is None else ms.Tensor(a.astype(np.float32)).astype(_ms_dtype(dtype))


def _run(mode, dtype, shape, training, mask, data_format="NCHW"):
    import mindspore as ms
    from mindspore_bn_grad import batch_norm_backward
    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)
    rng = np.random.default_rng(0)
    c = shape[-1] if data_format in ("NHWC", "NDHWC") else shape[1]
    arrays = [rng.standard_normal(shape), rng.standard_normal(shape), rng.uniform(0.5, 1.5, c),
              rng.standard_normal(c), rng.uniform(0.5, 2, c), rng.standard_normal(c), rng.uniform(0.5, 1.5, c)]
    tensors = [_tensor(a, dtype) for a in arrays]
    quantized = [t.astype(ms.float32).asnumpy().astype(np.float64) for t in tensors]
    outs = batch_norm_backward(*tensors, training=training, eps=1e-5, output_mask=mask, data_format=data_format)
    refs = batch_norm_backward_ref(*quantized, training=training, eps=1e-5, output_mask=mask,
                                   data_format=data_format)
    n = int(np.prod(shape)) // c if c else 0
    rtol, atol = TOL[dtype]
    for i, (got, ref) in enumerate(zip(outs, refs)):
        got = got.astype(ms.float32).asnumpy()
        np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol + (1e-6 * n if i else 0), err_msg=f"output {i}")


@pytest.mark.parametrize("mode", ["pynative", "graph"])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", SHAPES)
def test_shapes_every_dtype(mode, training, shape):
    for dtype in _soc_dtypes():
        if dtype != "float64":
            _run(mode, dtype, shape, training, (True, True, True))


@pytest.mark.parametrize("mode", ["pynative", "graph"])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("mask", ALL_MASKS)
def test_all_masks(mode, training, mask):
    _run(mode, "float32", (2, 5, 7, 9), training, mask)


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_channel_last_where_allowed(mode):
    from mindspore_bn_grad import support_rules, target
    if "NHWC" not in support_rules.accepted_formats(target.detected_target()):
        pytest.skip(f"{target.detected_target()} does not accept NHWC")
    _run(mode, "float16", (2, 7, 9, 5), True, (True, True, True), data_format="NHWC")


@pytest.mark.parametrize("mode", ["pynative", "graph"])
@pytest.mark.parametrize("kind", ["nn", "mint"])
def test_converted_cell_trains_on_our_kernel(mode, kind):
    """A converted nn.BatchNorm2d / mint.nn.BatchNorm2d on the board: the Cell route to our Ascend C
    kernel; the input and weight gradients of a training step against the float64 reference."""
    import mindspore as ms
    from mindspore import mint, nn
    from mindspore_bn_grad import convert_batchnorm
    from reference import batch_norm_forward_ref
    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3, 5, 6)).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    bn = nn.BatchNorm2d(3) if kind == "nn" else mint.nn.BatchNorm2d(3)
    convert_batchnorm(bn)
    assert bn.bn_route == "cell"
    bn.set_train(True)

    def loss(t):
        return (bn(t) * ms.Tensor(dy)).sum()
    gx, (gw, gb) = ms.value_and_grad(loss, grad_position=0, weights=bn.trainable_params())(ms.Tensor(x))[1]
    _, mean, invstd, _, _ = batch_norm_forward_ref(x, training=True)
    refs = batch_norm_backward_ref(dy, x, np.ones(3), save_mean=mean, save_invstd=invstd)
    for got, ref in zip((gx, gw, gb), refs):
        np.testing.assert_allclose(got.asnumpy(), ref, rtol=1e-4, atol=1e-4)
