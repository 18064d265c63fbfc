"""The repeat-form instructions of the CPU build (ReduceRepeat<SUM> / WholeReduceSum, Brcb, the masked
Copy, Add and Duplicate with a bitwise mask): values against NumPy as the Ascend C API reference documents them, and every argument rule
refusing a bad call (sim_repeat_ops.cpp)."""
import numpy as np
import pytest

import simlib

pytestmark = pytest.mark.ascend_sim

RNG = np.random.default_rng(27)
SENTINEL = -7.0  # what the destination holds before the call (elements the instruction must not touch)


def tree_sum_f32(lanes):
    """The documented order of a repeat's sum: adjacent pairs, level by level, in float32."""
    v = np.asarray(lanes, dtype=np.float32)
    while v.size > 1:
        v = (v[0::2] + v[1::2]).astype(np.float32)
    return v[0]


def segmented_reference(src, mask, repeats, src_blk, src_rep, lanes=64, per_block=8):
    """Each repeat's first `mask` elements (blocks src_blk apart, repeats src_rep blocks apart)."""
    out = []
    for r in range(repeats):
        idx = [(r * src_rep + e // per_block * src_blk) * per_block + e % per_block for e in range(min(mask, lanes))]
        lane = np.zeros(lanes, dtype=np.float32)
        lane[:len(idx)] = src[idx]
        out.append((tree_sum_f32(lane), np.sum(src[idx].astype(np.float64))))
    return out


@pytest.mark.parametrize("op", ["reduce_repeat", "whole_reduce_sum"])
@pytest.mark.parametrize("mask,repeats,src_blk,src_rep", [(49, 5, 1, 7), (64, 3, 1, 8), (20, 4, 2, 9), (8, 7, 1, 1),
                                                         (200, 2, 1, 8)])
def test_reduce_repeat_sums_each_repeat(sim, op, mask, repeats, src_blk, src_rep):
    src = RNG.standard_normal(8 * (src_rep * repeats + 8 * src_blk)).astype(np.float32)
    dst_rep = 2  # every other element: the ones between stay untouched
    out, err = simlib.repeat_op(sim, op, src, np.full(dst_rep * repeats, SENTINEL), [mask, repeats, dst_rep, src_blk,
                                                                                    src_rep])
    assert err is None, err
    for r, (tree, exact) in enumerate(segmented_reference(src, mask, repeats, src_blk, src_rep)):
        assert out[dst_rep * r] == tree  # the documented binary tree, bit for bit
        assert abs(out[dst_rep * r] - exact) <= 1e-5 * max(1.0, np.sum(np.abs(src)))
        assert out[dst_rep * r + 1] == SENTINEL


def test_reduce_repeat_half(sim):
    # half: 128 lanes, 16 per block; repeats 8 blocks (128 halves) apart, the first 100 of each summed
    src = RNG.standard_normal(3 * 128).astype(np.float16).astype(np.float32)
    out, err = simlib.repeat_op(sim, "reduce_repeat", src, np.full(3, SENTINEL), [100, 3, 1, 1, 8], half=True)
    assert err is None, err
    for r in range(3):
        ref = np.sum(src[r * 128:r * 128 + 100].astype(np.float64))
        assert abs(out[r] - ref) <= 1e-3 * np.sum(np.abs(src[r * 128:r * 128 + 100])) + 1e-2


def test_reduce_repeat_zero_mask_is_a_nop_on_a2(sim):
    out, err = simlib.repeat_op(sim, "reduce_repeat", np.ones(64), np.full(2, SENTINEL), [0, 2, 1, 1, 8])
    assert err is None and np.all(out == SENTINEL)


@pytest.mark.parametrize("args,offsets,soc,half,words", [
    ([64, 256, 1, 1, 8], (0, 0), "ascend910b", False, "repeatTime outside [0, 255]"),
    ([-1, 2, 1, 1, 8], (0, 0), "ascend910b", False, "negative continuous mask"),
    ([64, 2, 1, 1, 65536], (0, 0), "ascend910b", False, "stride outside [0, 65535]"),
    ([64, 2, 1, 1, 8], (0, 0), "ascend910", False, "float not supported on ascend910"),
    ([64, 2, 0, 1, 8], (0, 0), "ascend910", True, "dstRepStride 0 not supported on ascend910"),
    ([64, 2, 1, 1, 8], (3, 0), "ascend910b", False, "not 32-byte aligned"),
    ([64, 0, 1, 1, 8], (0, 0), "ascend950", False, "not a NOP on ascend950"),
    ([64, 40, 1, 1, 8], (0, 0), "ascend910b", False, "exceeds the tensor"),
])
def test_reduce_repeat_rules(sim, args, offsets, soc, half, words):
    out, err = simlib.repeat_op(sim, "reduce_repeat", np.ones(512), np.zeros(64), args, soc=soc, half=half,
                                src_offset=offsets[0], dst_offset=offsets[1])
    assert out is None and err is not None and words in err, err


def test_reduce_repeat_half_on_ascend910_runs(sim):
    out, err = simlib.repeat_op(sim, "reduce_repeat", np.ones(256), np.zeros(2), [64, 2, 1, 1, 8], soc="ascend910",
                                half=True)
    assert err is None and list(out) == [64.0, 64.0]


# ReduceSum.md, 数据类型: "Atlas 训练系列产品，支持half" (half and float on every other line): the CPU build
# refuses float ReduceSum on ascend910 only (the kernel then sums with BlockTreeSum, tiling reduceSum 0).
@pytest.mark.parametrize("soc", ["ascend910", "ascend310p", "ascend910b", "ascend910_93", "ascend950"])
@pytest.mark.parametrize("half", [False, True])
def test_reduce_sum_float_refused_on_ascend910_only(sim, soc, half):
    src = np.arange(100, dtype=np.float32) % 7
    out, err = simlib.repeat_op(sim, "reduce_sum", src, np.full(8, SENTINEL), [100], soc=soc, half=half)
    if soc == "ascend910" and not half:
        assert out is None and err is not None and "float not supported on ascend910 (half only)" in err, err
    else:
        assert err is None, err
        assert out[0] == float(np.sum(src)) and np.all(out[1:] == SENTINEL)


def test_reduce_repeat_dst_needs_only_element_alignment(sim):
    # ReduceRepeat.md 表3: SUM float, dst 4-byte aligned: a destination 3 floats into its buffer is legal.
    src = np.arange(128, dtype=np.float32)
    out, err = simlib.repeat_op(sim, "reduce_repeat", src, np.full(2, SENTINEL), [64, 2, 1, 1, 8], dst_offset=3)
    assert err is None, err
    assert list(out) == [float(np.sum(src[:64])), float(np.sum(src[64:]))]


# ReduceDataBlock<SUM> / BlockReduceSum (ReduceDataBlock.md): a sum per block of each repeat's active elements,
# adjacent pairs level by level ("两两相加"), a repeat's 8 results dstRepStride sets of 8 apart.
@pytest.mark.parametrize("op", ["reduce_data_block", "block_reduce_sum"])
@pytest.mark.parametrize("mask,repeats,dst_rep,src_blk,src_rep", [(64, 2, 1, 1, 8), (64, 3, 2, 1, 16), (20, 2, 1, 2, 9),
                                                                 (64, 2, 5, 1, 8)])
def test_reduce_data_block_sums_each_block(sim, op, mask, repeats, dst_rep, src_blk, src_rep):
    src = RNG.standard_normal(8 * (src_rep * repeats + 8 * src_blk)).astype(np.float32)
    out, err = simlib.repeat_op(sim, op, src, np.full(8 * dst_rep * repeats, SENTINEL),
                                [mask, repeats, dst_rep, src_blk, src_rep])
    assert err is None, err
    blocks = -(-mask // 8)
    for r in range(repeats):
        for b in range(8):
            at = 8 * dst_rep * r + b
            if b >= blocks:
                assert out[at] == SENTINEL  # a block with no active element is not written
                continue
            lanes = np.zeros(8, dtype=np.float32)
            n = min(8, mask - 8 * b)
            lo = (r * src_rep + b * src_blk) * 8
            lanes[:n] = src[lo:lo + n]
            assert out[at] == tree_sum_f32(lanes)  # the documented binary tree, bit for bit
        assert np.all(out[8 * dst_rep * r + 8:8 * dst_rep * (r + 1)] == SENTINEL)


@pytest.mark.parametrize("args,offsets,soc,half,words", [
    ([64, 2, 1, 1, 8], (0, 0), "ascend910", False, "float not supported on ascend910"),
    ([64, 2, 1, 1, 8], (0, 4), "ascend310p", False, "dst not aligned to a repeat's 8 results"),
    ([64, 256, 1, 1, 8], (0, 0), "ascend310p", False, "repeatTime outside [0, 255]"),
    ([64, 2, 1, 1, 8], (3, 0), "ascend310p", False, "not 32-byte aligned"),
])
def test_reduce_data_block_rules(sim, args, offsets, soc, half, words):
    out, err = simlib.repeat_op(sim, "reduce_data_block", np.ones(512), np.zeros(64), args, soc=soc, half=half,
                                src_offset=offsets[0], dst_offset=offsets[1])
    assert out is None and err is not None and words in err, err


def test_reduce_data_block_half_on_ascend910_runs(sim):
    out, err = simlib.repeat_op(sim, "reduce_data_block", np.ones(256), np.zeros(16), [128, 2, 1, 1, 8],
                                soc="ascend910", half=True)
    assert err is None and list(out) == [16.0] * 16


@pytest.mark.parametrize("half", [False, True])
@pytest.mark.parametrize("repeats,blk,rep", [(2, 1, 8), (1, 2, 16), (3, 7, 56)])
def test_brcb_broadcasts_each_element_to_a_block(sim, half, repeats, blk, rep):
    per_block = 16 if half else 8
    src = np.arange(1, 8 * repeats + 1, dtype=np.float32)
    extent = ((repeats - 1) * rep + 7 * blk + 1) * per_block
    out, err = simlib.repeat_op(sim, "brcb", src, np.full(extent, SENTINEL), [repeats, blk, rep], half=half)
    assert err is None, err
    expect = np.full(extent, SENTINEL)
    for i in range(repeats):
        for j in range(8):
            b = (i * rep + j * blk) * per_block
            expect[b:b + per_block] = src[8 * i + j]
    np.testing.assert_array_equal(out, expect)


@pytest.mark.parametrize("args,kw,soc,words", [
    ([1, 1, 8], {}, "ascend910", "not supported on ascend910"),
    ([1, 0, 8], {}, "ascend910b", "dstBlkStride 0"),
    ([1, 1, 8], {"alias": True, "dst_offset": 64}, "ascend910b", None),  # disjoint views of one buffer: legal
    ([1, 1, 8], {"alias": True, "dst_offset": 0}, "ascend910b", "src and dst share memory"),
    ([1, 1, 8], {"dst_offset": 4}, "ascend910b", "not 32-byte aligned"),
    ([1, 1, 8], {"src_offset": 4}, "ascend910b", "not 32-byte aligned"),
    ([1, 1, 8], {"reserve_bytes": 262144 - 8192 - 256}, "ascend310p", "8 KB of UB"),
    ([1, 1, 8], {"reserve_bytes": 262144 - 8192 - 1024}, "ascend310p", None),
    ([0, 1, 8], {}, "ascend950", "not a NOP on ascend950"),
])
def test_brcb_rules(sim, args, kw, soc, words):
    out, err = simlib.repeat_op(sim, "brcb", np.arange(8), np.zeros(64), args, soc=soc, **kw)
    if words is None:
        assert err is None, err
    else:
        assert out is None and err is not None and words in err, err


@pytest.mark.parametrize("mask,repeats,dst_stride,src_stride,dst_rep,src_rep", [
    (56, 3, 1, 0, 7, 1),   # the single pass's broadcast: block r of src over the 7 blocks of channel r
    (64, 2, 1, 1, 8, 8),   # a plain copy of two repeats
    (20, 2, 2, 1, 5, 3),   # a partial last block, strided both ways
])
def test_masked_copy_values(sim, mask, repeats, dst_stride, src_stride, dst_rep, src_rep):
    src = RNG.standard_normal(8 * 40).astype(np.float32)
    extent = 8 * ((repeats - 1) * dst_rep + 7 * dst_stride + 1)
    out, err = simlib.repeat_op(sim, "copy", src, np.full(extent, SENTINEL),
                                [mask, repeats, dst_stride, src_stride, dst_rep, src_rep])
    assert err is None, err
    expect = np.full(extent, SENTINEL)
    for r in range(repeats):
        for e in range(min(mask, 64)):
            expect[(r * dst_rep + e // 8 * dst_stride) * 8 + e % 8] = src[(r * src_rep + e // 8 * src_stride) * 8 + e % 8]
    np.testing.assert_array_equal(out, expect)


@pytest.mark.parametrize("args,kw,soc,words", [
    ([64, 1, 1, 1, 8, 8], {}, "ascend910", "not supported on ascend910"),
    ([64, 1, 1, 1, 8, 8], {}, "ascend310p", "not supported on ascend310p"),
    ([64, 1, 1, 1, 4096, 8], {}, "ascend910b", "repeat size above 4095"),
    ([64, 1, 0, 1, 8, 8], {}, "ascend910b", "destination block stride 0"),
    ([64, 1, 1, 1, 8, 8], {"dst_offset": 2}, "ascend910b", "not 32-byte aligned"),
    ([20, 1, 1, 1, 8, 8], {"alias": True, "dst_offset": 8}, "ascend910b", "overlap partially"),
    ([64, 9, 1, 1, 8, 8], {}, "ascend910b", "exceeds the tensor"),
])
def test_masked_copy_rules(sim, args, kw, soc, words):
    out, err = simlib.repeat_op(sim, "copy", np.arange(64), np.zeros(64), args, soc=soc, **kw)
    assert out is None and err is not None and words in err, err


def strided_index(r, e, blk, rep, per_block=8):
    return (r * rep + e // per_block * blk) * per_block + e % per_block


# Add with a bitwise mask (the single pass's lane partials, tiling spLaneSums): holes in the mask, block
# strides of a channel's blocks, repeats of runs; dst = dst + src on the active elements only.
@pytest.mark.parametrize("mask,repeats,blk,rep", [((1 << 64) - 1, 1, 6, 49), (0xFE_FC_F8_F0_E0_C0_80_FF, 2, 6, 49),
                                                   (0x0F_0F, 3, 3, 2), (1 << 63 | 1, 2, 1, 8)])
def test_masked_add_values(sim, mask, repeats, blk, rep):
    src = RNG.standard_normal(8 * (rep * repeats + 8 * blk)).astype(np.float32)
    dst = RNG.standard_normal(8 * 8 * repeats).astype(np.float32)
    args = [mask & 0xFFFFFFFFFFFFFFFF, 0, repeats, 1, 1, blk, 8, 8, rep]
    args[0] = args[0] - (1 << 64) if args[0] >= 1 << 63 else args[0]  # as int64
    out, err = simlib.repeat_op(sim, "add_masked", src, dst, args)
    assert err is None, err
    ref = dst.astype(np.float32).copy()
    for r in range(repeats):
        for e in range(64):
            if mask >> e & 1:
                ref[strided_index(r, e, 1, 8)] = np.float32(dst[strided_index(r, e, 1, 8)] +
                                                            src[strided_index(r, e, blk, rep)])
    assert np.array_equal(out, ref.astype(np.float64))


# The general address-overlap rule (通用地址重叠约束) repeat by repeat, as the reference states it
# (asc-devkit docs/zh/api/SIMD-API/通用说明和约束.md): within a repeat a source and the destination overlap 100% or
# not at all; across repeats no earlier repeat's destination may overlap a later repeat's source, but for Add (and
# Sub, Mul, Max, Min, AddRelu, SubRelu) on half / int32_t / float the second source may, when src1RepStride or
# dstRepStride is 0. The operands' whole spans may interleave (one in-place tree step of Adds over several channels,
# a repeat per channel: ascend910's BlockTreeSum over a sub-group).
def _aliased_add(sim, buf, dst_offset, src_offset, args):
    buf = np.asarray(buf, dtype=np.float32)
    return simlib.repeat_op(sim, "add_masked", buf[src_offset:], buf, args, soc="ascend910", alias=True,
                            dst_offset=dst_offset, src_offset=src_offset)


@pytest.mark.parametrize("cnt,rs_blocks,n", [(4, 6, 40), (3, 25, 196), (5, 13, 100)])
def test_add_one_tree_step_over_channels(sim, cnt, rs_blocks, n):
    # channel j's n floats at j * rs: floats [0, n - h) += [h, n), h a whole block past the middle
    rs = 8 * rs_blocks
    h = -(-((n + 1) // 2) // 8) * 8
    k = min(n - h, 64)
    buf = RNG.standard_normal(rs * cnt + 64).astype(np.float32)
    mask = (1 << k) - 1
    args = [mask - (1 << 64) if mask >= 1 << 63 else mask, 0, cnt, 1, 1, 1, rs_blocks, rs_blocks, rs_blocks]
    out, err = _aliased_add(sim, buf, 0, h, args)
    assert err is None, err
    ref = buf.copy()
    for j in range(cnt):
        ref[j * rs:j * rs + k] = buf[j * rs:j * rs + k] + buf[j * rs + h:j * rs + h + k]
    assert np.array_equal(out, ref.astype(np.float64))


@pytest.mark.parametrize("dst_offset,src_offset,args,words", [
    # repeat 0's destination is repeat 1's second source (the reference's figure: N's dst is N + 1's source)
    (64, 0, [-1, 0, 2, 1, 1, 1, 8, 8, 8], "an earlier repeat's dst overlaps a later repeat's src1"),
    # the same two blocks apart within 8-block repeats
    (16, 0, [0xFFFF, 0, 3, 1, 1, 1, 2, 2, 2], "an earlier repeat's dst overlaps a later repeat's src1"),
    # destination repeat stride 0 with src0 over it: the exception is for the second source only
    (0, 64, [-1, 0, 2, 1, 1, 1, 0, 0, 8], "an earlier repeat's dst overlaps a later repeat's src0"),
    # within one repeat: partial overlap
    (8, 0, [0xFFFF, 0, 1, 1, 1, 1, 8, 8, 8], "overlap partially"),
    (0, 8, [0xFFFF, 0, 2, 1, 1, 1, 8, 8, 8], "overlap partially"),
])
def test_add_repeatwise_overlap_refused(sim, dst_offset, src_offset, args, words):
    out, err = _aliased_add(sim, np.arange(256), dst_offset, src_offset, args)
    assert out is None and err is not None and words in err, err


def test_add_accumulates_when_src1_repeat_stride_is_zero(sim):
    # dst repeat r = dst repeat r + src1 (repeat stride 0, over repeat 0's destination): the repeats in order
    buf = RNG.standard_normal(256).astype(np.float32)
    out, err = _aliased_add(sim, buf, 0, 0, [-1, 0, 3, 1, 1, 1, 8, 8, 0])
    assert err is None, err
    ref = buf.copy()
    ref[0:64] = buf[0:64] + buf[0:64]
    for r in (1, 2):
        ref[64 * r:64 * r + 64] = buf[64 * r:64 * r + 64] + ref[0:64]
    assert np.array_equal(out, ref.astype(np.float64))


def test_add_later_destination_over_earlier_source_is_allowed(sim):
    # repeat 1's destination is repeat 0's second source: not restricted (each repeat reads before it writes)
    buf = RNG.standard_normal(256).astype(np.float32)
    out, err = _aliased_add(sim, buf, 0, 64, [-1, 0, 2, 1, 1, 1, 8, 8, 8])
    assert err is None, err
    ref = buf.copy()
    ref[0:64] = buf[0:64] + buf[64:128]
    ref[64:128] = buf[64:128] + buf[128:192]
    assert np.array_equal(out, ref.astype(np.float64))


# Sub, FusedMulAdd and MulAddDst of the repeat form (the single pass's compact slabs, tiling spSegSum 2): a
# source block per repeat read with block stride 0 against slices a repeat (or 7 blocks) apart.
@pytest.mark.parametrize("op", ["sub_masked", "fma_masked", "mad_masked"])
@pytest.mark.parametrize("mask,repeats,rep", [((1 << 64) - 1, 5, 8), ((1 << 56) - 1, 3, 7)])
def test_masked_fused_values_with_a_block_per_repeat(sim, op, mask, repeats, rep):
    src = RNG.standard_normal(8 * repeats).astype(np.float32)
    dst = RNG.standard_normal(8 * 8 * repeats).astype(np.float32)
    sub = op == "sub_masked"  # Sub(dst, dst, src): src0 is the destination, with its strides
    args = [mask - (1 << 64) if mask >= 1 << 63 else mask, 0, repeats, 1, int(sub), 0, rep, rep if sub else 1, 1]
    out, err = simlib.repeat_op(sim, op, src, dst, args, soc="ascend910b")
    assert err is None, err
    ref = dst.copy()
    for r in range(repeats):
        for e in range(64):
            if mask >> e & 1:
                i, v = strided_index(r, e, 1, rep), src[strided_index(r, e, 0, 1)]
                d = dst[i]
                ref[i] = {"sub_masked": np.float32(d - v), "fma_masked": np.float32(np.float32(v * d) + v),
                          "mad_masked": np.float32(np.float32(v * v) + d)}[op]
    assert np.array_equal(out, ref.astype(np.float64))


@pytest.mark.parametrize("op,soc,args,words", [
    ("fma_masked", "ascend910", [255, 0, 1, 1, 0, 0, 8, 1, 1], "not supported on ascend910"),
    ("mad_masked", "ascend910", [255, 0, 1, 1, 0, 0, 8, 1, 1], "not supported on ascend910"),
    ("fma_masked", "ascend910b", [255, 0, 1, 0, 0, 0, 8, 1, 1], "destination block stride 0"),
    ("mad_masked", "ascend910b", [255, 0, 2, 1, 1, 1, 8, 8, 8], "exceeds the tensor"),
    ("sub_masked", "ascend910b", [255, 1, 1, 1, 1, 1, 8, 8, 8], "mask high word must be 0"),
])
def test_masked_fused_rules(sim, op, soc, args, words):
    out, err = simlib.repeat_op(sim, op, np.arange(64), np.zeros(64), args, soc=soc)
    assert out is None and err is not None and words in err, err


@pytest.mark.parametrize("repeats,blk,rep", [(1, 1, 8), (4, 1, 49), (2, 2, 20)])
def test_masked_duplicate_values(sim, repeats, blk, rep):
    mask = 0x00_00_FF_FF_FF_FF_FF_F8  # lanes 3 .. 47: a 7x7 slice starting on lane 3
    n = 8 * ((repeats - 1) * rep + 8 * blk)
    out, err = simlib.repeat_op(sim, "dup_masked", np.array([2.5]), np.full(n, SENTINEL), [mask, 0, repeats, blk, rep])
    assert err is None, err
    ref = np.full(n, SENTINEL)
    for r in range(repeats):
        for e in range(64):
            if mask >> e & 1:
                ref[strided_index(r, e, blk, rep)] = 2.5
    assert np.array_equal(out, ref)


@pytest.mark.parametrize("op,args,kw,words", [
    ("add_masked", [255, 0, 1, 0, 1, 1, 8, 8, 8], {}, "destination block stride 0"),
    ("add_masked", [255, 1, 1, 1, 1, 1, 8, 8, 8], {}, "mask high word must be 0"),
    ("add_masked", [255, 0, 2, 1, 1, 1, 8, 8, 8], {}, "exceeds the tensor"),
    ("add_masked", [255, 0, 1, 1, 1, 1, 8, 8, 8], {"src_offset": 3}, "not 32-byte aligned"),
    ("add_masked", [0xFFFF, 0, 1, 1, 1, 1, 8, 8, 8], {"alias": True, "dst_offset": 8}, "overlap partially"),
    ("dup_masked", [255, 0, 1, 0, 8], {}, "destination block stride 0"),
    ("dup_masked", [255, 1, 1, 1, 8], {}, "mask high word must be 0"),
    ("dup_masked", [255, 0, 3, 1, 8], {}, "exceeds the tensor"),
    ("dup_masked", [255, 0, 1, 1, 8], {"dst_offset": 2}, "not 32-byte aligned"),
])
def test_masked_add_and_duplicate_rules(sim, op, args, kw, words):
    out, err = simlib.repeat_op(sim, op, np.arange(64), np.zeros(64 + 8 * kw.get("dst_offset", 0)) if "alias" not in kw
                                else np.zeros(16), args, soc="ascend910", **kw)
    assert out is None and err is not None and words in err, err


@pytest.mark.parametrize("op,args", [("reduce_repeat", [64, 1, 1, 1, 8]), ("brcb", [1, 1, 8]),
                                     ("copy", [64, 1, 1, 1, 8, 8]), ("add_masked", [255, 0, 1, 1, 1, 1, 8, 8, 8]),
                                     ("dup_masked", [255, 0, 1, 1, 8]), ("sub_masked", [255, 0, 1, 1, 1, 1, 8, 8, 8]),
                                     ("fma_masked", [255, 0, 1, 1, 1, 1, 8, 8, 8]),
                                     ("mad_masked", [255, 0, 1, 1, 1, 1, 8, 8, 8])])
def test_repeat_ops_run_on_the_vector_pipe(sim, op, args):
    # A scalar read of the result with no V_S event in between is a hazard of PIPE_S against PIPE_V.
    out, err = simlib.repeat_op(sim, op, np.arange(64), np.zeros(64), args, scalar_read=True)
    assert out is None and err is not None and "pipe hazard" in err and "PIPE_V" in err, err


# Gather (SIMD-API/基础API/Memory矢量计算/离散与聚合/Gather.md): dst[i] = src[(srcBaseAddr + srcOffset[i]) //
# sizeof(T)], offsets in bytes; on the Atlas inference AI Core (ascend310p), A2, A3 and 950, not on Atlas
# training (ascend910, 产品支持情况: "Atlas 训练系列产品：不支持").
def gather_args(base, offsets, offsets_bytes=0):
    return [base, len(offsets), offsets_bytes] + [int(o) for o in offsets]


@pytest.mark.parametrize("soc", ["ascend310p", "ascend910b", "ascend950"])
@pytest.mark.parametrize("half", [False, True])
def test_gather_picks_the_addressed_elements(sim, soc, half):
    # a per-channel broadcast: 16 values, each to a 49-element span (7x7 slices packed), from lane 3 on
    vals = np.arange(32, dtype=np.float32) - 5.5
    chan = np.repeat(np.arange(16), 49)
    esize = 2 if half else 4
    out, err = simlib.repeat_op(sim, "gather", vals, np.full(784 + 8, SENTINEL),
                                gather_args(3 * esize, chan * esize), soc=soc, half=half)
    assert err is None, err
    assert np.array_equal(out[:784], vals[3 + chan]) and np.all(out[784:] == SENTINEL)


def test_gather_partial_repeat(sim):
    vals = RNG.standard_normal(64).astype(np.float32)
    idx = RNG.integers(0, 64, size=70)
    out, err = simlib.repeat_op(sim, "gather", vals, np.full(72, SENTINEL), gather_args(0, idx * 4), soc="ascend310p")
    assert err is None, err
    assert np.array_equal(out[:70], vals[idx]) and np.all(out[70:] == SENTINEL)


@pytest.mark.parametrize("args,soc,kw,words", [
    (gather_args(0, [0, 4]), "ascend910", {}, "Gather: not supported on ascend910"),
    (gather_args(2, [0, 4]), "ascend310p", {}, "srcBaseAddr not a multiple of the element size"),
    (gather_args(0, [0, 6]), "ascend310p", {}, "srcOffset not a multiple of the element size"),
    (gather_args(0, [0, 64 * 4]), "ascend310p", {}, "srcOffset outside src"),
    (gather_args(64 * 4, [0]), "ascend310p", {}, "srcBaseAddr outside src"),
    (gather_args(0, [0, 4]), "ascend310p", {"alias": True}, "src and dst share memory"),
    (gather_args(0, [0, 4]), "ascend310p", {"src_offset": 3}, "not 32-byte aligned"),
    (gather_args(0, [0] * (256 * 64)), "ascend310p", {}, "count above 255 repeats"),
])
def test_gather_rules(sim, args, soc, kw, words):
    out, err = simlib.repeat_op(sim, "gather", np.ones(64), np.zeros(64), args, soc=soc, **kw)
    assert out is None and err is not None and words in err, err
