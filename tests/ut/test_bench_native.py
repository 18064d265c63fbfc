"""The per-op benchmark's native-route contestants (bench/kernel.py) compute what they time: MindSpore's
BatchNormGradExt on our kernel, PYNATIVE through the pyboost primitive, GRAPH through MindSpore's own
C++ bprop of BatchNormExt, against the float64 reference. And why GRAPH cannot call BatchNormGradExt
itself (pinned: when MindSpore fixes it, this fails and the benchmark can call it directly)."""
import numpy as np
import pytest

import mindspore as ms
from mindspore.ops.auto_generate import gen_ops_prim

from mindspore_bn_grad_bench import kernel as bench
from reference import batch_norm_backward_ref, batch_norm_forward_ref

pytestmark = pytest.mark.native_route

CASE = bench.Case((4, 3, 5, 5))


def _grads_ref(x, dy, w, **stats):
    return batch_norm_backward_ref(dy, x, w, training=True, eps=1e-5, **stats)


def _assert_grads(got, want):
    for g, r, name in zip(got, want, ("dx", "dweight", "dbias")):
        np.testing.assert_allclose(g.asnumpy(), r, rtol=5e-5, atol=5e-5, err_msg=name)


def test_pynative_contestant_is_batch_norm_grad_ext_with_the_saved_statistics():
    ms.set_context(mode=ms.PYNATIVE_MODE)
    timed = bench.ms_native_contestant(CASE, "PYNATIVE")
    assert timed is not None
    x, dy, p = CASE.arrays()
    _assert_grads(timed.fn(), _grads_ref(x, dy, p["weight"], save_mean=p["save_mean"],
                                         save_invstd=p["save_invstd"]))


def test_graph_contestants_run_batch_norm_ext_and_its_cpp_bprop():
    try:
        con = bench.ms_native_graph_contestants(CASE)
        assert set(con) == {"native_graph_fwd_bwd", "native_graph_fwd"}
        x, dy, p = CASE.arrays()
        bias = p["save_mean"]
        y_ref, mean, invstd, _, _ = batch_norm_forward_ref(x, p["weight"], bias, training=True, eps=1e-5)
        np.testing.assert_allclose(con["native_graph_fwd"].fn().asnumpy(), y_ref, rtol=2e-5, atol=2e-5)
        _assert_grads(con["native_graph_fwd_bwd"].fn(), _grads_ref(x, dy, p["weight"], save_mean=mean,
                                                                   save_invstd=invstd))
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


class _Call(ms.nn.Cell):
    def __init__(self, op):
        super().__init__()
        self.op = op

    def construct(self, *args):
        return self.op(*args)


@pytest.mark.parametrize("init,tail", [
    ({"training": True, "eps": 1e-5}, ((1, 1, 1),)),               # the public signature
    ({}, (True, 1e-5, (1, 1, 1))),                                 # the kernel's order
], ids=["public-signature", "kernel-order"])
def test_graph_cannot_call_batch_norm_grad_ext_from_python(init, tail):
    """MindSpore 2.10's GRAPH frontend appends the init arguments (training, eps) after the call arguments
    (..., output_mask) and then checks the node in the primitive's definition order (..., training, eps,
    output_mask): 'training's type Tuple ... does not match bool'; with all ten, the signature has eight."""
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        x, dy, p = CASE.arrays()
        tensors = [ms.Tensor(a) for a in (dy, x, p["weight"], p["running_mean"], p["running_var"],
                                          p["save_mean"], p["save_invstd"])]
        with pytest.raises((TypeError, RuntimeError), match="does not match expected type 'bool'|"
                           "not equal to Signature length"):
            _Call(gen_ops_prim.BatchNormGradExt(**init))(*tensors, *tail)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
