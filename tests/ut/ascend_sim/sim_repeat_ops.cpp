// One call of a repeat-form vector instruction of the CPU build (ReduceRepeat<SUM>, ReduceDataBlock<SUM>, Brcb, the masked
// Copy, Add and Duplicate with a bitwise mask; ReduceSum) on data the test gives, for tests/ut/ascend_sim/test_sim_repeat_ops.py: values against NumPy
// and every argument rule refusing a bad call. Loaded through ctypes with the other units.
//
// params (int64): [srcOffset, dstOffset, alias, reserveBytes, scalarRead, op arguments...]
//   srcOffset / dstOffset: elements into the source / destination buffers (an unaligned view when not
//   a multiple of a block); alias 1: the destination is a view of the source's buffer; reserveBytes: a
//   buffer of that many more bytes allocated first (UB in use); scalarRead 1: dst[0] read by the scalar
//   unit right after the instruction, without an event (the hazard tracker must see PIPE_V).
//   reduce_repeat: mask, repeatTime, dstRepStride, srcBlkStride, srcRepStride
//   reduce_data_block / block_reduce_sum: as reduce_repeat (a sum per block, dstRepStride in sets of 8 results)
//   brcb:          repeatTime, dstBlkStride, dstRepStride
//   copy:          mask, repeatTime, dstStride, srcStride, dstRepeatSize, srcRepeatSize
//   add_masked:    maskLow, maskHigh, repeatTime, dstBlkStride, src0BlkStride, src1BlkStride, dstRepStride,
//                  src0RepStride, src1RepStride (Add, bitwise mask: dst = dst + src, src0 the destination)
//   sub_masked / fma_masked / mad_masked: as add_masked, for Sub (dst = dst - src), FusedMulAdd (dst = src * dst
//                  + src, src0 and src1 the source with their own strides) and MulAddDst (dst = src * src + dst)
//   dup_masked:    maskLow, maskHigh, repeatTime, dstBlockStride, dstRepeatStride (Duplicate, bitwise mask,
//                  of src[0])
//   reduce_sum:    count (ReduceSum of the first count elements into dst[0], a scratch buffer of its own)
//   gather:        srcBaseAddr, count, offsetsBytes, srcOffset[0 .. count) (Gather, count form; the offsets in
//                  a uint32_t buffer of offsetsBytes of its own, 0: count x 4 rounded up to a block)
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include "kernel_operator.h"

using namespace AscendC;

namespace {
template <typename T>
void Run(const std::string &op, const int64_t *p, int nParams, const float *src, int srcLen, float *dst, int dstLen)
{
    const int64_t srcOff = p[0], dstOff = p[1], alias = p[2], reserve = p[3], scalarRead = p[4];
    const int64_t *a = p + 5;
    const auto need = [&](int n) {
        if (nParams < 5 + n) throw SimError(op + ": too few parameters");
    };
    TPipe pipe;
    TBuf<TPosition::VECCALC> extra, sbuf, dbuf, tbuf;
    if (reserve > 0) pipe.InitBuffer(extra, uint32_t(reserve));
    const uint32_t srcBytes = uint32_t((srcOff + srcLen) * sizeof(T) + 31) / 32 * 32;
    const uint32_t dstBytes = uint32_t((dstOff + dstLen) * sizeof(T) + 31) / 32 * 32;
    pipe.InitBuffer(sbuf, alias ? (srcBytes > dstBytes ? srcBytes : dstBytes) : srcBytes);
    if (!alias) pipe.InitBuffer(dbuf, dstBytes);
    const LocalTensor<T> sAll = sbuf.Get<T>(), dAll = alias ? sAll : dbuf.Get<T>();
    T *ps = sAll.SimPtr(uint64_t(srcOff + srcLen), "test setup", true);
    T *pd = dAll.SimPtr(uint64_t(dstOff + dstLen), "test setup", true);
    for (int i = 0; i < dstLen; ++i) pd[dstOff + i] = static_cast<T>(dst[i]);  // initial dst (untouched elements)
    for (int i = 0; i < srcLen; ++i) ps[srcOff + i] = static_cast<T>(src[i]);
    const LocalTensor<T> s = sAll[uint32_t(srcOff)], d = dAll[uint32_t(dstOff)];
    if (op == "reduce_repeat") {
        need(5);
        ReduceRepeat<ReduceType::SUM, T, T>(d, s, int32_t(a[0]), int32_t(a[1]), int32_t(a[2]), int32_t(a[3]),
                                            int32_t(a[4]));
    } else if (op == "reduce_data_block") {
        need(5);
        ReduceDataBlock<ReduceType::SUM, T, T>(d, s, int32_t(a[0]), int32_t(a[1]), int32_t(a[2]), int32_t(a[3]),
                                               int32_t(a[4]));
    } else if (op == "block_reduce_sum") {
        need(5);
        BlockReduceSum<T>(d, s, int32_t(a[1]), int32_t(a[0]), int32_t(a[2]), int32_t(a[3]), int32_t(a[4]));
    } else if (op == "whole_reduce_sum") {
        need(5);
        WholeReduceSum<T>(d, s, int32_t(a[0]), int32_t(a[1]), int32_t(a[2]), int32_t(a[3]), int32_t(a[4]));
    } else if (op == "brcb") {
        need(3);
        Brcb(d, s, uint8_t(a[0]), BrcbRepeatParams(uint16_t(a[1]), uint16_t(a[2])));
    } else if (op == "copy") {
        need(6);
        Copy(d, s, uint64_t(a[0]), uint8_t(a[1]), CopyRepeatParams(uint16_t(a[2]), uint16_t(a[3]), uint16_t(a[4]),
                                                                      uint16_t(a[5])));
    } else if (op == "add_masked") {
        need(9);
        uint64_t mask[2] = {uint64_t(a[0]), uint64_t(a[1])};
        Add(d, d, s, mask, uint8_t(a[2]), BinaryRepeatParams(uint8_t(a[3]), uint8_t(a[4]), uint8_t(a[5]), uint8_t(a[6]),
                                                             uint8_t(a[7]), uint8_t(a[8])));
    } else if (op == "sub_masked" || op == "fma_masked" || op == "mad_masked") {
        need(9);
        uint64_t mask[2] = {uint64_t(a[0]), uint64_t(a[1])};
        const BinaryRepeatParams rp{uint8_t(a[3]), uint8_t(a[4]), uint8_t(a[5]), uint8_t(a[6]), uint8_t(a[7]),
                                    uint8_t(a[8])};
        if (op == "sub_masked") {
            Sub(d, d, s, mask, uint8_t(a[2]), rp);
        } else if (op == "fma_masked") {
            FusedMulAdd(d, s, s, mask, uint8_t(a[2]), rp);
        } else {
            MulAddDst(d, s, s, mask, uint8_t(a[2]), rp);
        }
    } else if (op == "dup_masked") {
        need(5);
        uint64_t mask[2] = {uint64_t(a[0]), uint64_t(a[1])};
        Duplicate(d, static_cast<T>(src[0]), mask, uint8_t(a[2]), uint16_t(a[3]), uint8_t(a[4]));
    } else if (op == "gather") {
        need(3);
        const uint32_t count = uint32_t(a[1]);
        need(3 + int(count));
        const uint32_t bytes = a[2] > 0 ? uint32_t(a[2]) : (count * 4 + 31) / 32 * 32;
        pipe.InitBuffer(tbuf, bytes);
        const LocalTensor<uint32_t> off = tbuf.Get<uint32_t>();
        uint32_t *po = off.SimPtr(uint64_t(bytes / 4), "test setup", true);
        for (uint32_t i = 0; i < count && i < bytes / 4; ++i) po[i] = uint32_t(a[3 + i]);
        Gather(d, s, off, uint32_t(a[0]), count);
    } else if (op == "reduce_sum") {
        need(1);
        pipe.InitBuffer(tbuf, srcBytes);
        ReduceSum(d, s, tbuf.Get<T>(), int32_t(a[0]));
    } else {
        throw SimError("no such op " + op);
    }
    if (scalarRead) {
        (void)d.GetValue(0);
    }
    for (int i = 0; i < dstLen; ++i) dst[i] = static_cast<float>(pd[dstOff + i]);
}
}  // namespace

// 0: ran (dst holds the result); 2: refused (reason in err); 3: no such op.
extern "C" int bnb_sim_repeat_op(const char *soc, const char *op, int half_, const int64_t *params, int nParams,
                                 const float *src, int srcLen, float *dst, int dstLen, char *err, int errLen)
{
    const std::string name(op);
    if (name != "reduce_repeat" && name != "whole_reduce_sum" && name != "reduce_data_block" &&
        name != "block_reduce_sum" && name != "brcb" && name != "copy" &&
        name != "add_masked" && name != "sub_masked" && name != "fma_masked" && name != "mad_masked" &&
        name != "dup_masked" && name != "reduce_sum" && name != "gather") {
        return 3;
    }
    try {
        SimThisCore().Reset(SimFindSoc(soc), SimFindSoc(soc).ubBytes, 0, 1);
        if (half_) {
            Run<half>(name, params, nParams, src, srcLen, dst, dstLen);
        } else {
            Run<float>(name, params, nParams, src, srcLen, dst, dstLen);
        }
        return 0;
    } catch (const SimError &e) {
        std::snprintf(err, errLen, "%s", e.what());
        return 2;
    }
}
