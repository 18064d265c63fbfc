// Vector instructions of the repeat form that have no count form (CPU build):
// ReduceRepeat<ReduceType::SUM> (and its older name WholeReduceSum), a sum per
// repeat, and Brcb, each of 8 elements broadcast to a 32-byte block. Arguments
// are checked by the shared rules (bnb_rules::ReduceRepeatParams / BrcbParams);
// both run on PIPE_V and cost what the API reference's theoretical throughput
// says (附录/Vector指令理论性能汇总.md).
#ifndef BNB_SIM_VECTOR_REPEAT_H
#define BNB_SIM_VECTOR_REPEAT_H
#include <algorithm>
#include <string>
#include <vector>
#include "sim_vector.h"

namespace AscendC {
enum class ReduceType { NONE = -1, SUM = 0, MAX, MIN };
enum class ReduceOrder : uint8_t { ORDER_VALUE_INDEX = 0, ORDER_INDEX_VALUE, ORDER_ONLY_VALUE, ORDER_ONLY_INDEX };

struct BrcbRepeatParams {
    BrcbRepeatParams() {}
    BrcbRepeatParams(const uint16_t dstBlkStrideIn, const uint16_t dstRepStrideIn)
        : dstRepStride(dstRepStrideIn), dstBlkStride(dstBlkStrideIn)
    {}
    uint32_t blockNumber = 8;
    uint16_t dstRepStride = 8;
    uint16_t dstBlkStride = 1;
};

struct CopyRepeatParams {
    CopyRepeatParams() {}
    CopyRepeatParams(const uint16_t dstStrideIn, const uint16_t srcStrideIn, uint16_t dstRepeatSizeIn,
                     uint16_t srcRepeatSizeIn)
        : dstStride(dstStrideIn), srcStride(srcStrideIn), dstRepeatSize(dstRepeatSizeIn), srcRepeatSize(srcRepeatSizeIn)
    {}
    uint16_t dstStride = 1;
    uint16_t srcStride = 1;
    uint16_t dstRepeatSize = 8;
    uint16_t srcRepeatSize = 8;
};

namespace sim {
// The general overlap rule (通用地址重叠约束) over the operands' whole extents: 100% or not at all.
template <typename T, typename U>
void WholeOperands(const char *op, const LocalTensor<T> &dst, uint64_t dstElems, const LocalTensor<U> &src,
                   uint64_t srcElems, Src at)
{
    const bnb_hazards::Range d = dst.SimRange(dstElems), s = src.SimRange(srcElems);
    bnb_rules::NoPartialOverlap(op, "dst", d.lo, d.hi - d.lo, "src", s.lo, s.hi - s.lo, at);
}

// ReduceRepeat float / half: 64/7 resp. 128/7 elements per cycle, i.e. 7 cycles per repeat
// (附录/Vector指令理论性能汇总.md); Brcb: 8 source elements (8 blocks out) per cycle, one repeat; Copy:
// 256 bytes per cycle (its DataCopy(UB->UB) row), one repeat.
constexpr double REDUCE_REPEAT_CYCLES = 7;

// Sum of the lanes of one repeat as the instruction forms it: a binary tree of adjacent pairs over
// all 256 / sizeof(T) lanes, the lanes the mask leaves out counting 0 (ReduceRepeat.md and
// ReduceDataBlock.md, 关键特性说明: "两两相加").
inline float TreeSum(std::vector<float> lanes)
{
    while (lanes.size() > 1) {
        std::vector<float> next(lanes.size() / 2);
        for (size_t i = 0; i < next.size(); ++i) {
            next[i] = lanes[2 * i] + lanes[2 * i + 1];
        }
        lanes.swap(next);
    }
    return lanes.empty() ? 0.0f : lanes[0];
}

// A call that the documentation leaves undefined on dav-3510 (count / repeatTime 0: "不保证该接口被视为NOP").
inline void NoUndefinedNop(const char *op, int64_t repeat, int64_t mask, Src src)
{
    const bnb_rules::Soc &soc = SimThisCore().soc;
    bnb_rules::Require(soc.npuArch != 3510 || (repeat > 0 && mask > 0), op,
                       std::string("repeatTime or mask 0 is not a NOP on ") + soc.name, "", src);
}
}  // namespace sim

// dst[r * dstRepStride] = sum of the first `mask` elements of repeat r of src (continuous mask), for
// r < repeatTime; src's repeat r starts srcRepStride blocks after repeat r - 1, its blocks srcBlkStride
// blocks apart. dst needs only its element's alignment (ReduceRepeat.md 表3).
template <ReduceType reduceType, typename T, typename U, bool isSetMask = true>
void ReduceRepeat(const LocalTensor<T> &dst, const LocalTensor<U> &src, const int32_t mask, const int32_t repeatTime,
                  const int32_t dstRepStride, const int32_t srcBlkStride, const int32_t srcRepStride,
                  ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX, bnb_rules::Src at = bnb_rules::Here())
{
    static_assert(reduceType == ReduceType::SUM, "ReduceRepeat: this CPU build models ReduceType::SUM only");
    static_assert(std::is_same<T, U>::value, "ReduceRepeat: dst and src of one type on these SoC lines");
    static_assert(std::is_same<T, float>::value || std::is_same<T, half>::value, "ReduceRepeat: half or float only");
    (void)order;  // not used by SUM
    const char *op = "ReduceRepeat";
    bnb_rules::ContinuousMask(op, mask, at);
    bnb_rules::ReduceRepeatParams(op, SimThisCore().soc, sizeof(T), repeatTime, dstRepStride, srcBlkStride,
                                  srcRepStride, at);
    sim::NoUndefinedNop(op, repeatTime, mask, at);
    const uint64_t lanes = ONE_REPEAT_BYTE_SIZE / sizeof(T), perBlock = bnb_rules::BLOCK / sizeof(T);
    const uint64_t active = bnb_rules::MaskElems(mask, sizeof(T));
    const uint64_t repeats = active == 0 ? 0 : uint64_t(repeatTime);
    // Extents in elements: src up to the last active element of the last repeat, dst the last result.
    const uint64_t srcExtent =
        repeats == 0 ? 0
                     : ((repeats - 1) * uint64_t(srcRepStride) + (active - 1) / perBlock * uint64_t(srcBlkStride)) *
                               perBlock + (active - 1) % perBlock + 1;
    const uint64_t dstExtent = repeats == 0 ? 0 : (repeats - 1) * uint64_t(dstRepStride) + 1;
    const U *ps = src.SimPtr(srcExtent, op, true, at, "src");
    T *pd = dst.SimPtr(dstExtent, op, false, at, "dst");  // element alignment is the type's own
    sim::WholeOperands(op, dst, dstExtent, src, srcExtent, at);
    std::vector<bnb_hazards::Range> reads, writes;
    for (uint64_t r = 0; r < repeats; ++r) {
        const uint64_t first = r * uint64_t(srcRepStride) * perBlock;
        for (uint64_t b = 0; b * perBlock < active; ++b) {
            const uint64_t lo = first + b * uint64_t(srcBlkStride) * perBlock;
            const uint64_t n = std::min<uint64_t>(perBlock, active - b * perBlock);
            reads.push_back(src[uint32_t(lo)].SimRange(n));
        }
        writes.push_back(dst[uint32_t(r * uint64_t(dstRepStride))].SimRange(1));
    }
    sim::RecordV(op, at, reads, writes);
    perf::Vector(std::max<uint64_t>(repeats, 1) * lanes, sizeof(T), sim::REDUCE_REPEAT_CYCLES);
    if (perf::SkipData()) return;
    std::vector<float> sums(repeats);
    for (uint64_t r = 0; r < repeats; ++r) {
        std::vector<float> lane(lanes, 0.0f);
        for (uint64_t e = 0; e < active; ++e) {
            lane[e] = static_cast<float>(
                ps[(r * uint64_t(srcRepStride) + e / perBlock * uint64_t(srcBlkStride)) * perBlock + e % perBlock]);
        }
        sums[r] = sim::TreeSum(lane);
    }
    for (uint64_t r = 0; r < repeats; ++r) {
        pd[r * uint64_t(dstRepStride)] = static_cast<T>(sums[r]);
    }
}

// The older name of ReduceRepeat<ReduceType::SUM> (still in the headers).
template <typename T, bool isSetMask = true>
void WholeReduceSum(const LocalTensor<T> &dst, const LocalTensor<T> &src, const int32_t mask, const int32_t repeatTime,
                    const int32_t dstRepStride, const int32_t srcBlkStride, const int32_t srcRepStride,
                    bnb_rules::Src at = bnb_rules::Here())
{
    ReduceRepeat<ReduceType::SUM, T, T, isSetMask>(dst, src, mask, repeatTime, dstRepStride, srcBlkStride,
                                                   srcRepStride, ReduceOrder::ORDER_VALUE_INDEX, at);
}

// ReduceDataBlock<ReduceType::SUM> (and its older name BlockReduceSum): in repeat r, element b of dst's
// r-th result set (dstRepStride sets of 8 apart: 8 elements, a repeat's results) = the sum of the active
// elements of block b of src's repeat r (continuous mask; its blocks srcBlkStride blocks apart, its repeats
// srcRepStride), a binary tree of adjacent pairs over the block's lanes (ReduceDataBlock.md, 关键特性说明:
// "两两相加"); a block with no active element is not written. dst starts on 8 elements (32 bytes for
// float). A cycle a repeat, as the other single-pass vector instructions.
template <ReduceType reduceType, typename T, typename U, bool isSetMask = true>
void ReduceDataBlock(const LocalTensor<T> &dst, const LocalTensor<U> &src, const int32_t mask, const int32_t repeatTime,
                     const int32_t dstRepStride, const int32_t srcBlkStride, const int32_t srcRepStride,
                     bnb_rules::Src at = bnb_rules::Here())
{
    static_assert(reduceType == ReduceType::SUM, "ReduceDataBlock: this CPU build models ReduceType::SUM only");
    static_assert(std::is_same<T, U>::value, "ReduceDataBlock: dst and src of one type on these SoC lines");
    static_assert(std::is_same<T, float>::value || std::is_same<T, half>::value, "ReduceDataBlock: half or float only");
    const char *op = "ReduceDataBlock";
    bnb_rules::ContinuousMask(op, mask, at);
    bnb_rules::BlockReduceParams(op, SimThisCore().soc, sizeof(T), repeatTime, dstRepStride, srcBlkStride,
                                 srcRepStride, at);
    sim::NoUndefinedNop(op, repeatTime, mask, at);
    const uint64_t lanes = ONE_REPEAT_BYTE_SIZE / sizeof(T), perBlock = bnb_rules::BLOCK / sizeof(T);
    const uint64_t active = bnb_rules::MaskElems(mask, sizeof(T));
    const uint64_t repeats = active == 0 ? 0 : uint64_t(repeatTime), blocks = (active + perBlock - 1) / perBlock;
    const uint64_t srcExtent =
        repeats == 0 ? 0
                     : ((repeats - 1) * uint64_t(srcRepStride) + (blocks - 1) * uint64_t(srcBlkStride)) * perBlock +
                           (active - 1) % perBlock + 1;
    const uint64_t setElems = 8;  // a repeat's results: one per block
    const uint64_t dstExtent = repeats == 0 ? 0 : (repeats - 1) * uint64_t(dstRepStride) * setElems + blocks;
    const U *ps = src.SimPtr(srcExtent, op, true, at, "src");
    T *pd = dst.SimPtr(dstExtent, op, false, at, "dst");
    bnb_rules::BlockReduceDst(op, dst.SimRange(0).lo, sizeof(T), at);
    sim::WholeOperands(op, dst, dstExtent, src, srcExtent, at);
    std::vector<bnb_hazards::Range> reads, writes;
    for (uint64_t r = 0; r < repeats; ++r) {
        for (uint64_t b = 0; b < blocks; ++b) {
            const uint64_t lo = (r * uint64_t(srcRepStride) + b * uint64_t(srcBlkStride)) * perBlock;
            reads.push_back(src[uint32_t(lo)].SimRange(std::min<uint64_t>(perBlock, active - b * perBlock)));
        }
        writes.push_back(dst[uint32_t(r * uint64_t(dstRepStride) * setElems)].SimRange(blocks));
    }
    sim::RecordV(op, at, reads, writes);
    perf::Vector(std::max<uint64_t>(repeats, 1) * lanes, sizeof(T));
    if (perf::SkipData()) return;
    std::vector<T> sums;
    for (uint64_t r = 0; r < repeats; ++r) {
        for (uint64_t b = 0; b < blocks; ++b) {
            std::vector<float> lane(perBlock, 0.0f);
            for (uint64_t e = b * perBlock; e < std::min(active, (b + 1) * perBlock); ++e) {
                lane[e - b * perBlock] = static_cast<float>(
                    ps[(r * uint64_t(srcRepStride) + b * uint64_t(srcBlkStride)) * perBlock + e % perBlock]);
            }
            sums.push_back(static_cast<T>(sim::TreeSum(lane)));
        }
    }
    for (uint64_t r = 0; r < repeats; ++r) {
        for (uint64_t b = 0; b < blocks; ++b) {
            pd[r * uint64_t(dstRepStride) * setElems + b] = sums[r * blocks + b];
        }
    }
}

// The older name of ReduceDataBlock<ReduceType::SUM> (still in the headers; repeatTime before the mask).
template <typename T, bool isSetMask = true>
void BlockReduceSum(const LocalTensor<T> &dst, const LocalTensor<T> &src, const int32_t repeatTime, const int32_t mask,
                    const int32_t dstRepStride, const int32_t srcBlkStride, const int32_t srcRepStride,
                    bnb_rules::Src at = bnb_rules::Here())
{
    ReduceDataBlock<ReduceType::SUM, T, T, isSetMask>(dst, src, mask, repeatTime, dstRepStride, srcBlkStride,
                                                      srcRepStride, at);
}

// Block j of repeat i of dst (dstRepStride * i + dstBlkStride * j blocks from dst) = src[8 * i + j], for
// i < repeatTime; src is read contiguously.
template <typename T>
void Brcb(const LocalTensor<T> &dst, const LocalTensor<T> &src, const uint8_t repeatTime,
          const BrcbRepeatParams &repeatParams, bnb_rules::Src at = bnb_rules::Here())
{
    static_assert(sizeof(T) == 2 || sizeof(T) == 4, "Brcb: 16- or 32-bit elements only");
    const char *op = "Brcb";
    sim::CheckVecType<T>(op, at);
    bnb_rules::BrcbParams(op, SimThisCore().soc, sizeof(T), repeatParams.dstBlkStride, SimThisCore().ubUsed, at);
    sim::NoUndefinedNop(op, repeatTime, 1, at);
    const uint64_t perBlock = bnb_rules::BLOCK / sizeof(T), n = repeatTime;
    const uint64_t blk = repeatParams.dstBlkStride, rep = repeatParams.dstRepStride;
    const uint64_t dstExtent = n == 0 ? 0 : ((n - 1) * rep + 7 * blk + 1) * perBlock;
    const T *ps = src.SimPtr(8 * n, op, true, at, "src");
    T *pd = dst.SimPtr(dstExtent, op, true, at, "dst");
    const bnb_hazards::Range rs = src.SimRange(8 * n), rd = dst.SimRange(dstExtent);
    bnb_rules::Require(n == 0 || rs.hi <= rd.lo || rd.hi <= rs.lo, op, "src and dst share memory",
                       "src UB " + bnb_rules::N(rs.lo) + ".." + bnb_rules::N(rs.hi) + ", dst UB " +
                           bnb_rules::N(rd.lo) + ".." + bnb_rules::N(rd.hi),
                       at);
    std::vector<bnb_hazards::Range> writes;
    for (uint64_t i = 0; i < n; ++i) {
        for (uint64_t j = 0; j < 8; ++j) {
            writes.push_back(dst[uint32_t((i * rep + j * blk) * perBlock)].SimRange(perBlock));
        }
    }
    sim::RecordV(op, at, {rs}, writes);
    perf::Vector(std::max<uint64_t>(n, 1) * ONE_REPEAT_BYTE_SIZE / sizeof(T), sizeof(T));
    if (perf::SkipData()) return;
    const std::vector<T> v(ps, ps + 8 * n);
    for (uint64_t i = 0; i < n; ++i) {
        for (uint64_t j = 0; j < 8; ++j) {
            T *b = pd + (i * rep + j * blk) * perBlock;
            for (uint64_t e = 0; e < perBlock; ++e) {
                b[e] = v[8 * i + j];
            }
        }
    }
}

// Copy, masked repeat form (UB -> UB, PIPE_V): in repeat r, the first `mask` elements (continuous
// mask), block b of dst (r * dstRepeatSize + b * dstStride blocks from dst) = block b of src
// (r * srcRepeatSize + b * srcStride blocks from src); a stride 0 reads or writes one block for all.
template <typename T, bool isSetMask = true>
void Copy(const LocalTensor<T> &dst, const LocalTensor<T> &src, const uint64_t mask, const uint8_t repeatTime,
          const CopyRepeatParams &repeatParams, bnb_rules::Src at = bnb_rules::Here())
{
    static_assert(sizeof(T) == 2 || sizeof(T) == 4, "Copy: 16- or 32-bit elements only");
    const char *op = "Copy";
    sim::CheckVecType<T>(op, at);
    const CopyRepeatParams &p = repeatParams;
    bnb_rules::MaskedCopyParams(op, SimThisCore().soc, sizeof(T), p.dstRepeatSize, p.srcRepeatSize, at);
    bnb_rules::BlockStride(op, "dst", p.dstStride, 65535, true, at);
    const uint64_t active = bnb_rules::MaskElems(int64_t(std::min<uint64_t>(mask, 1u << 30)), sizeof(T));
    sim::NoUndefinedNop(op, repeatTime, int64_t(active), at);
    const uint64_t perBlock = bnb_rules::BLOCK / sizeof(T), n = active == 0 ? 0 : repeatTime;
    const auto at_ = [&](uint64_t r, uint64_t e, uint64_t rep, uint64_t blk) {
        return (r * rep + e / perBlock * blk) * perBlock + e % perBlock;
    };
    const uint64_t dstExtent = n == 0 ? 0 : at_(n - 1, active - 1, p.dstRepeatSize, p.dstStride) + 1;
    const uint64_t srcExtent = n == 0 ? 0 : at_(n - 1, active - 1, p.srcRepeatSize, p.srcStride) + 1;
    T *pd = dst.SimPtr(dstExtent, op, true, at, "dst");
    const T *ps = src.SimPtr(srcExtent, op, true, at, "src");
    sim::WholeOperands(op, dst, dstExtent, src, srcExtent, at);
    std::vector<bnb_hazards::Range> reads, writes;
    for (uint64_t r = 0; r < n; ++r) {
        for (uint64_t b = 0; b * perBlock < active; ++b) {
            const uint64_t k = std::min<uint64_t>(perBlock, active - b * perBlock);
            reads.push_back(src[uint32_t(at_(r, b * perBlock, p.srcRepeatSize, p.srcStride))].SimRange(k));
            writes.push_back(dst[uint32_t(at_(r, b * perBlock, p.dstRepeatSize, p.dstStride))].SimRange(k));
        }
    }
    sim::RecordV(op, at, reads, writes);
    perf::Vector(std::max<uint64_t>(n, 1) * ONE_REPEAT_BYTE_SIZE / sizeof(T), sizeof(T));
    if (perf::SkipData()) return;
    std::vector<T> v(n * active);
    for (uint64_t r = 0; r < n; ++r) {
        for (uint64_t e = 0; e < active; ++e) {
            v[r * active + e] = ps[at_(r, e, p.srcRepeatSize, p.srcStride)];
        }
    }
    for (uint64_t r = 0; r < n; ++r) {
        for (uint64_t e = 0; e < active; ++e) {
            pd[at_(r, e, p.dstRepeatSize, p.dstStride)] = v[r * active + e];
        }
    }
}

// Gather (离散与聚合/Gather.md), the repeat form with a continuous mask: in repeat r (dst
// r * dstRepStride blocks on, srcOffset r * 256 / sizeof(T) elements on), dst element e = the src
// element (srcBaseAddr + srcOffset[e]) bytes from src, for the first `mask` elements. Rules:
// bnb_rules::GatherParams / GatherOffset. Cost: 5 elements a cycle (附录/Vector指令理论性能汇总.md, 表15).
constexpr double GATHER_ELEMS_PER_CYCLE = 5;
template <typename T>
void Gather(const LocalTensor<T> &dst, const LocalTensor<T> &src, const LocalTensor<uint32_t> &srcOffset,
            const uint32_t srcBaseAddr, const uint64_t mask, const uint8_t repeatTime, const uint16_t dstRepStride,
            bnb_rules::Src at = bnb_rules::Here())
{
    static_assert(sizeof(T) == 2 || sizeof(T) == 4, "Gather: 16- or 32-bit elements only in this CPU build");
    const char *op = "Gather";
    sim::CheckVecType<T>(op, at);
    const uint64_t srcBytes = uint64_t(src.GetSize()) * sizeof(T);
    bnb_rules::GatherParams(op, SimThisCore().soc, sizeof(T), srcBaseAddr, srcBytes, at);
    const uint64_t lanes = ONE_REPEAT_BYTE_SIZE / sizeof(T), perBlock = bnb_rules::BLOCK / sizeof(T);
    const uint64_t active = bnb_rules::MaskElems(int64_t(std::min<uint64_t>(mask, 1u << 30)), sizeof(T));
    sim::NoUndefinedNop(op, repeatTime, int64_t(active), at);
    const uint64_t n = active == 0 ? 0 : repeatTime;
    const uint64_t offExtent = n == 0 ? 0 : (n - 1) * lanes + active;
    const uint64_t dstExtent = n == 0 ? 0 : (n - 1) * uint64_t(dstRepStride) * perBlock + active;
    const uint32_t *po = srcOffset.SimPtr(offExtent, op, true, at, "srcOffset");
    T *pd = dst.SimPtr(dstExtent, op, true, at, "dst");
    const T *ps = src.SimPtr(srcBytes / sizeof(T), op, true, at, "src");
    std::vector<uint64_t> idx;
    for (uint64_t r = 0; r < n; ++r) {
        for (uint64_t e = 0; e < active; ++e) {
            const uint64_t i = r * lanes + e;
            bnb_rules::GatherOffset(op, i, po[i], srcBaseAddr, sizeof(T), srcBytes, at);
            idx.push_back((srcBaseAddr + po[i]) / sizeof(T));
        }
    }
    std::vector<bnb_hazards::Range> reads, writes;
    if (n > 0) {
        const uint64_t lo = *std::min_element(idx.begin(), idx.end()), hi = *std::max_element(idx.begin(), idx.end());
        const bnb_hazards::Range rs = src[uint32_t(lo)].SimRange(hi - lo + 1), rd = dst.SimRange(dstExtent);
        bnb_rules::Require(rs.hi <= rd.lo || rd.hi <= rs.lo, op, "src and dst share memory",
                           "src UB " + bnb_rules::N(rs.lo) + ".." + bnb_rules::N(rs.hi) + ", dst UB " +
                               bnb_rules::N(rd.lo) + ".." + bnb_rules::N(rd.hi),
                           at);
        reads.push_back(rs);
        reads.push_back(srcOffset.SimRange(offExtent));
        for (uint64_t r = 0; r < n; ++r) {
            writes.push_back(dst[uint32_t(r * uint64_t(dstRepStride) * perBlock)].SimRange(active));
        }
    }
    sim::RecordV(op, at, reads, writes);
    perf::Vector(std::max<uint64_t>(n, 1) * lanes, sizeof(T), double(lanes) / GATHER_ELEMS_PER_CYCLE);
    if (perf::SkipData()) return;
    std::vector<T> v(idx.size());
    for (size_t i = 0; i < idx.size(); ++i) v[i] = ps[idx[i]];
    for (uint64_t r = 0; r < n; ++r) {
        for (uint64_t e = 0; e < active; ++e) {
            pd[r * uint64_t(dstRepStride) * perBlock + e] = v[r * active + e];
        }
    }
}

// Gather, the count form: the first `count` elements, as the headers split it on these lines (full
// repeats of 256 bytes, then one repeat of the rest, kernel_operator_vec_gather_intf_impl.h).
template <typename T>
void Gather(const LocalTensor<T> &dst, const LocalTensor<T> &src, const LocalTensor<uint32_t> &srcOffset,
            const uint32_t srcBaseAddr, const uint32_t count, bnb_rules::Src at = bnb_rules::Here())
{
    const uint32_t lanes = uint32_t(ONE_REPEAT_BYTE_SIZE / sizeof(T));
    bnb_rules::GatherCount("Gather", count, sizeof(T), at);
    const uint32_t repeats = count / lanes, tail = count % lanes;
    if (repeats > 0) {
        Gather(dst, src, srcOffset, srcBaseAddr, uint64_t(lanes), uint8_t(repeats), uint16_t(8), at);
    }
    if (tail > 0) {
        Gather(dst[count - tail], src, srcOffset[count - tail], srcBaseAddr, uint64_t(tail), uint8_t(1), uint16_t(8),
               at);
    }
}
}  // namespace AscendC
#endif
