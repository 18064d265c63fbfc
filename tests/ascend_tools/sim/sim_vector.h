// Vector instructions, count form (CPU build): operands must be live UB
// tensors, 32-byte aligned, large enough for `count` elements.
#ifndef BNB_SIM_VECTOR_H
#define BNB_SIM_VECTOR_H
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>
#include "sim_tensor.h"

namespace AscendC {
namespace sim {
using bnb_rules::Src;
template <typename T>
void CheckVecType(const char *op, Src src)
{
    static_assert(SimIsVecType<T>(), "vector instruction on an unsupported element type");
    if (std::is_same<T, bfloat16_t>::value) {
        SimCheck(SimThisCore().soc.hasBf16, std::string(op) + ": bfloat16 not supported on " + SimThisCore().soc.name,
                 src);
    }
}
// One vector instruction on PIPE_V: the operands' UB ranges for the hazard tracker,
// and no partial overlap between the destination and a source.
inline void RecordV(const char *op, Src src, std::vector<bnb_hazards::Range> reads,
                    std::vector<bnb_hazards::Range> writes)
{
    for (const auto &w : writes) {
        for (const auto &r : reads) {
            bnb_rules::NoPartialOverlap(op, "dst", w.lo, w.hi - w.lo, "src", r.lo, r.hi - r.lo, src);
        }
    }
    SimThisCore().pipes.Op(bnb_hazards::V, {op, src, bnb_hazards::V}, reads, writes);
}
template <typename T, typename F>
void Binary(const LocalTensor<T> &dst, const LocalTensor<T> &a, const LocalTensor<T> &b, int32_t count, const char *op,
            Src src, F f)
{
    CheckVecType<T>(op, src);
    bnb_rules::CalCount(op, count, src);
    const T *pa = a.SimPtr(count, op, true, src, "src0");
    const T *pb = b.SimPtr(count, op, true, src, "src1");
    T *pd = dst.SimPtr(count, op, true, src, "dst");
    RecordV(op, src, {a.SimRange(count), b.SimRange(count)}, {dst.SimRange(count)});
    perf::Vector(count, sizeof(T));
    if (perf::SkipData()) return;
    std::vector<T> tmp(count);
    for (int32_t i = 0; i < count; ++i) {
        tmp[i] = static_cast<T>(f(static_cast<float>(pa[i]), static_cast<float>(pb[i])));
    }
    std::copy(tmp.begin(), tmp.end(), pd);
}
template <typename T, typename F>
void Unary(const LocalTensor<T> &dst, const LocalTensor<T> &a, int32_t count, const char *op, Src src, F f)
{
    CheckVecType<T>(op, src);
    bnb_rules::CalCount(op, count, src);
    const T *pa = a.SimPtr(count, op, true, src, "src");
    T *pd = dst.SimPtr(count, op, true, src, "dst");
    RecordV(op, src, {a.SimRange(count)}, {dst.SimRange(count)});
    perf::Vector(count, sizeof(T));
    if (perf::SkipData()) return;
    for (int32_t i = 0; i < count; ++i) {
        pd[i] = static_cast<T>(f(static_cast<float>(pa[i])));
    }
}
}  // namespace sim

template <typename T, bool isSetMask = true>
void Add(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, const int32_t &count,
         bnb_rules::Src at = bnb_rules::Here())
{
    sim::Binary(dst, src0, src1, count, "Add", at, [](float x, float y) { return x + y; });
}
// Strides of the repeat form of a two-source instruction, in 32-byte blocks (辅助数据结构/BinaryRepeatParams.md).
struct BinaryRepeatParams {
    BinaryRepeatParams() {}
    BinaryRepeatParams(const uint8_t dstBlkStrideIn, const uint8_t src0BlkStrideIn, const uint8_t src1BlkStrideIn,
                       const uint8_t dstRepStrideIn, const uint8_t src0RepStrideIn, const uint8_t src1RepStrideIn)
        : dstBlkStride(dstBlkStrideIn), src0BlkStride(src0BlkStrideIn), src1BlkStride(src1BlkStrideIn),
          dstRepStride(dstRepStrideIn), src0RepStride(src0RepStrideIn), src1RepStride(src1RepStrideIn)
    {}
    uint32_t blockNumber = 8;
    uint8_t dstBlkStride = 1;
    uint8_t src0BlkStride = 1;
    uint8_t src1BlkStride = 1;
    uint8_t dstRepStride = 8;
    uint8_t src0RepStride = 8;
    uint8_t src1RepStride = 8;
    bool repeatStrideMode = false;
    bool strideSizeMode = false;
};

// Strides of the repeat form of a one-source instruction (Adds, Muls), in 32-byte blocks: block strides
// uint16_t, repeat strides uint8_t (辅助数据结构/UnaryRepeatParams.md).
struct UnaryRepeatParams {
    UnaryRepeatParams() {}
    UnaryRepeatParams(const uint16_t dstBlkStrideIn, const uint16_t srcBlkStrideIn, const uint8_t dstRepStrideIn,
                      const uint8_t srcRepStrideIn)
        : dstBlkStride(dstBlkStrideIn), srcBlkStride(srcBlkStrideIn), dstRepStride(dstRepStrideIn),
          srcRepStride(srcRepStrideIn)
    {}
    uint32_t blockNumber = 8;
    uint16_t dstBlkStride = 1;
    uint16_t srcBlkStride = 1;
    uint8_t dstRepStride = 8;
    uint8_t srcRepStride = 8;
    bool repeatStrideMode = false;
    bool strideSizeMode = false;
};

namespace sim {
// Normal-mode (逐bit) mask of one repeat: element e is active when its bit is set (low word elements
// 0..63, high word 64..127; 掩码.md).
inline bool MaskBit(const uint64_t mask[], uint64_t e) { return e < 64 ? (mask[0] >> e & 1) : (mask[1] >> (e - 64) & 1); }

// The element index (from an operand's start) of element e of repeat r, strides in blocks.
template <typename T>
inline uint64_t StridedAt(uint64_t r, uint64_t e, uint64_t blk, uint64_t rep)
{
    const uint64_t perBlock = bnb_rules::BLOCK / sizeof(T);
    return (r * rep + e / perBlock * blk) * perBlock + e % perBlock;
}

// The UB ranges of an operand's active elements, one per block of a repeat (its first to last active
// element there).
template <typename T>
std::vector<bnb_hazards::Range> StridedRanges(const LocalTensor<T> &t, const uint64_t mask[], uint64_t repeat,
                                              uint64_t blk, uint64_t rep)
{
    const uint64_t per = ONE_REPEAT_BYTE_SIZE / sizeof(T), perBlock = bnb_rules::BLOCK / sizeof(T);
    std::vector<bnb_hazards::Range> out;
    for (uint64_t r = 0; r < repeat; ++r) {
        for (uint64_t b = 0; b * perBlock < per; ++b) {
            int64_t lo = -1, hi = -1;
            for (uint64_t e = b * perBlock; e < (b + 1) * perBlock; ++e) {
                if (MaskBit(mask, e)) {
                    lo = lo < 0 ? int64_t(e) : lo;
                    hi = int64_t(e) + 1;
                }
            }
            if (lo >= 0) {
                out.push_back(t[uint32_t(StridedAt<T>(r, uint64_t(lo), blk, rep))].SimRange(uint64_t(hi - lo)));
            }
        }
    }
    return out;
}

// The ranges merged where they touch or overlap (a source read with block stride 0, a slab of slices read
// repeat after repeat): the same bytes, fewer ranges for the hazard tracker.
inline std::vector<bnb_hazards::Range> Merged(std::vector<bnb_hazards::Range> rs)
{
    std::sort(rs.begin(), rs.end(), [](const bnb_hazards::Range &a, const bnb_hazards::Range &b) {
        return a.space != b.space ? a.space < b.space : a.lo < b.lo;
    });
    std::vector<bnb_hazards::Range> out;
    for (const auto &r : rs) {
        if (!out.empty() && out.back().space == r.space && r.lo <= out.back().hi) {
            out.back().hi = std::max(out.back().hi, r.hi);
        } else {
            out.push_back(r);
        }
    }
    return out;
}

// Elements an operand spans from its start: repeats of 8 blocks with strides, up to the last element the
// mask enables (0: none).
inline uint64_t StridedElems(uint64_t elemBytes, uint64_t repeat, int64_t last, uint64_t blk, uint64_t rep)
{
    if (last < 0) return 0;
    return bnb_rules::StridedExtent(repeat, uint64_t(last) * elemBytes / bnb_rules::BLOCK, blk, rep) / elemBytes;
}

// StridedRanges' blocks grouped by repeat (the same mask, so as many blocks in every repeat).
inline std::vector<std::vector<bnb_rules::Span>> ByRepeat(const std::vector<bnb_hazards::Range> &blocks, uint64_t repeat)
{
    std::vector<std::vector<bnb_rules::Span>> out(repeat);
    const size_t per = repeat == 0 ? 0 : blocks.size() / repeat;
    for (size_t i = 0; i < blocks.size(); ++i) {
        out[i / per].push_back({blocks[i].lo, blocks[i].hi});
    }
    return out;
}
// The repeat forms' elements, repeat by repeat in order (each repeat reads its sources after the earlier
// repeats' writes): dst[at] = value(r, e, at) for the active elements e of repeat r, at their strided place.
template <typename T, typename Value>
void EachRepeat(T *pd, uint64_t n, const uint64_t mask[], uint64_t blk, uint64_t rep, Value value)
{
    const uint64_t per = ONE_REPEAT_BYTE_SIZE / sizeof(T);
    std::vector<std::pair<uint64_t, T>> out;
    for (uint64_t r = 0; r < n; ++r) {
        out.clear();
        for (uint64_t e = 0; e < per; ++e) {
            if (!MaskBit(mask, e)) continue;
            const uint64_t at = StridedAt<T>(r, e, blk, rep);
            out.emplace_back(at, static_cast<T>(value(r, e, at)));
        }
        for (const auto &o : out) {
            pd[o.first] = o.second;
        }
    }
}

// A two-source instruction of the repeat form with a normal-mode mask (高维切分.md, 掩码.md): in repeat r the
// active elements e, dst[r, e] = f(src0[r, e], src1[r, e], dst[r, e]), each operand with its block and repeat
// strides (a source block stride 0 reads one block eight times); the elements the mask leaves out keep their
// values. `readsDst`: dst is a source too (MulAddDst, FusedMulAdd). Strides and repeats as
// BinaryRepeatParams' uint8_t (rules::BlockStride: a destination block stride 0 is undefined).
template <typename T, typename F>
void RepeatForm(const LocalTensor<T> &dst, const LocalTensor<T> &a, const LocalTensor<T> &b, const uint64_t mask[],
                uint8_t repeatTime, const BinaryRepeatParams &p, const char *op, Src src, bool readsDst, F f)
{
    CheckVecType<T>(op, src);
    bnb_rules::MaskWords(op, sizeof(T), mask[1], mask[0], src);
    bnb_rules::BlockStride(op, "dst", p.dstBlkStride, 255, true, src);
    bnb_rules::BlockStride(op, "src0", p.src0BlkStride, 255, false, src);
    bnb_rules::BlockStride(op, "src1", p.src1BlkStride, 255, false, src);
    const int64_t last = bnb_rules::LastMaskElement(sizeof(T), mask[1], mask[0]);
    const uint64_t n = last < 0 ? 0 : repeatTime;
    T *pd = dst.SimPtr(StridedElems(sizeof(T), n, last, p.dstBlkStride, p.dstRepStride), op, true, src, "dst");
    const T *pa = a.SimPtr(StridedElems(sizeof(T), n, last, p.src0BlkStride, p.src0RepStride), op, true, src, "src0");
    const T *pb = b.SimPtr(StridedElems(sizeof(T), n, last, p.src1BlkStride, p.src1RepStride), op, true, src, "src1");
    // the general overlap rule (通用地址重叠约束) repeat by repeat (bnb_rules::RepeatwiseOverlap)
    const std::vector<bnb_hazards::Range> wd = StridedRanges(dst, mask, n, p.dstBlkStride, p.dstRepStride);
    const std::vector<bnb_hazards::Range> r0 = StridedRanges(a, mask, n, p.src0BlkStride, p.src0RepStride);
    const std::vector<bnb_hazards::Range> r1 = StridedRanges(b, mask, n, p.src1BlkStride, p.src1RepStride);
    const bool accumulates = (p.dstRepStride == 0 || p.src1RepStride == 0) && bnb_rules::AccumulatesAcrossRepeats(op) &&
                             (std::is_same<T, float>::value || std::is_same<T, half>::value ||
                              std::is_same<T, int32_t>::value);
    bnb_rules::RepeatwiseOverlap(op, ByRepeat(wd, n), "src0", ByRepeat(r0, n), false, src);
    bnb_rules::RepeatwiseOverlap(op, ByRepeat(wd, n), "src1", ByRepeat(r1, n), accumulates, src);
    // each operand's ranges merged on their own for the hazard tracker (two operands side by side stay two
    // ranges); dst read too where the instruction reads it
    std::vector<bnb_hazards::Range> reads = Merged(r0);
    const std::vector<bnb_hazards::Range> m1 = Merged(r1);
    reads.insert(reads.end(), m1.begin(), m1.end());
    const std::vector<bnb_hazards::Range> writes = Merged(wd);
    if (readsDst) {
        reads.insert(reads.end(), writes.begin(), writes.end());
    }
    SimThisCore().pipes.Op(bnb_hazards::V, {op, src, bnb_hazards::V}, reads, writes);  // (not RecordV: its check is whole-span)
    perf::Vector(std::max<uint64_t>(n, 1) * ONE_REPEAT_BYTE_SIZE / sizeof(T), sizeof(T));
    if (perf::SkipData()) return;
    EachRepeat(pd, n, mask, p.dstBlkStride, p.dstRepStride, [&](uint64_t r, uint64_t e, uint64_t at) {
        const float x = static_cast<float>(pa[StridedAt<T>(r, e, p.src0BlkStride, p.src0RepStride)]);
        const float y = static_cast<float>(pb[StridedAt<T>(r, e, p.src1BlkStride, p.src1RepStride)]);
        return f(x, y, static_cast<float>(pd[at]));
    });
}

template <typename T, typename F>
void BinaryRepeat(const LocalTensor<T> &dst, const LocalTensor<T> &a, const LocalTensor<T> &b, const uint64_t mask[],
                  uint8_t repeatTime, const BinaryRepeatParams &p, const char *op, Src src, F f)
{
    RepeatForm(dst, a, b, mask, repeatTime, p, op, src, false, [f](float x, float y, float) { return f(x, y); });
}

// A one-source instruction with a scalar, repeat form with a normal-mode mask: in repeat r the active
// elements e, dst[r, e] = f(src[r, e]), the others keep their values; element-wise, so dst may be src.
template <typename T, typename F>
void UnaryRepeat(const LocalTensor<T> &dst, const LocalTensor<T> &a, const uint64_t mask[], uint8_t repeatTime,
                 const UnaryRepeatParams &p, const char *op, Src src, F f)
{
    CheckVecType<T>(op, src);
    bnb_rules::MaskWords(op, sizeof(T), mask[1], mask[0], src);
    bnb_rules::BlockStride(op, "dst", p.dstBlkStride, 65535, true, src);
    bnb_rules::BlockStride(op, "src", p.srcBlkStride, 65535, false, src);
    const int64_t last = bnb_rules::LastMaskElement(sizeof(T), mask[1], mask[0]);
    const uint64_t n = last < 0 ? 0 : repeatTime;
    T *pd = dst.SimPtr(StridedElems(sizeof(T), n, last, p.dstBlkStride, p.dstRepStride), op, true, src, "dst");
    const T *pa = a.SimPtr(StridedElems(sizeof(T), n, last, p.srcBlkStride, p.srcRepStride), op, true, src, "src");
    const std::vector<bnb_hazards::Range> wd = StridedRanges(dst, mask, n, p.dstBlkStride, p.dstRepStride);
    const std::vector<bnb_hazards::Range> r0 = StridedRanges(a, mask, n, p.srcBlkStride, p.srcRepStride);
    bnb_rules::RepeatwiseOverlap(op, ByRepeat(wd, n), "src", ByRepeat(r0, n), false, src);
    SimThisCore().pipes.Op(bnb_hazards::V, {op, src, bnb_hazards::V}, Merged(r0), Merged(wd));
    perf::Vector(std::max<uint64_t>(n, 1) * ONE_REPEAT_BYTE_SIZE / sizeof(T), sizeof(T));
    if (perf::SkipData()) return;
    EachRepeat(pd, n, mask, p.dstBlkStride, p.dstRepStride, [&](uint64_t r, uint64_t e, uint64_t) {
        return f(static_cast<float>(pa[StridedAt<T>(r, e, p.srcBlkStride, p.srcRepStride)]));
    });
}
}  // namespace sim

// Add, repeat form with a normal-mode (逐bit) mask.
template <typename T, bool isSetMask = true>
void Add(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, uint64_t mask[],
         const uint8_t repeatTime, const BinaryRepeatParams &repeatParams, bnb_rules::Src at = bnb_rules::Here())
{
    sim::BinaryRepeat(dst, src0, src1, mask, repeatTime, repeatParams, "Add", at, [](float x, float y) { return x + y; });
}
// Sub, repeat form with a normal-mode (逐bit) mask.
template <typename T, bool isSetMask = true>
void Sub(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, uint64_t mask[],
         const uint8_t repeatTime, const BinaryRepeatParams &repeatParams, bnb_rules::Src at = bnb_rules::Here())
{
    sim::BinaryRepeat(dst, src0, src1, mask, repeatTime, repeatParams, "Sub", at, [](float x, float y) { return x - y; });
}
template <typename T, bool isSetMask = true>
void Sub(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, const int32_t &count,
         bnb_rules::Src at = bnb_rules::Here())
{
    sim::Binary(dst, src0, src1, count, "Sub", at, [](float x, float y) { return x - y; });
}
// Mul, repeat form with a normal-mode (逐bit) mask.
template <typename T, bool isSetMask = true>
void Mul(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, uint64_t mask[],
         const uint8_t repeatTime, const BinaryRepeatParams &repeatParams, bnb_rules::Src at = bnb_rules::Here())
{
    sim::BinaryRepeat(dst, src0, src1, mask, repeatTime, repeatParams, "Mul", at, [](float x, float y) { return x * y; });
}
template <typename T, bool isSetMask = true>
void Mul(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, const int32_t &count,
         bnb_rules::Src at = bnb_rules::Here())
{
    sim::Binary(dst, src0, src1, count, "Mul", at, [](float x, float y) { return x * y; });
}
template <typename T, bool isSetMask = true>
void Div(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, const int32_t &count,
         bnb_rules::Src at = bnb_rules::Here())
{
    sim::Binary(dst, src0, src1, count, "Div", at, [](float x, float y) { return x / y; });
}
// dst = src0 * src1 + dst (MulAddDst) and dst = src0 * dst + src1 (FusedMulAdd), float and half
// operands of one type; not on SoCs without them (Soc::hasMulAdd).
namespace sim {
template <typename T, typename F>
void MulAdd(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, int32_t count,
            const char *op, Src src, F f)
{
    static_assert(std::is_same<T, float>::value || std::is_same<T, half>::value, "MulAdd: float or half only");
    SimCheck(SimThisCore().soc.hasMulAdd, std::string(op) + ": not supported on " + SimThisCore().soc.name, src);
    bnb_rules::CalCount(op, count, src);
    const T *pa = src0.SimPtr(count, op, true, src, "src0");
    const T *pb = src1.SimPtr(count, op, true, src, "src1");
    T *pd = dst.SimPtr(count, op, true, src, "dst");
    RecordV(op, src, {src0.SimRange(count), src1.SimRange(count), dst.SimRange(count)}, {dst.SimRange(count)});
    perf::Vector(count, sizeof(T));
    if (perf::SkipData()) return;
    std::vector<T> tmp(count);
    for (int32_t i = 0; i < count; ++i) {
        tmp[i] = static_cast<T>(f(static_cast<float>(pa[i]), static_cast<float>(pb[i]), static_cast<float>(pd[i])));
    }
    std::copy(tmp.begin(), tmp.end(), pd);
}
}  // namespace sim
template <typename T, typename U>
void MulAddDst(const LocalTensor<T> &dst, const LocalTensor<U> &src0, const LocalTensor<U> &src1,
               const int32_t &count, bnb_rules::Src at = bnb_rules::Here())
{
    static_assert(std::is_same<T, U>::value, "MulAddDst: this CPU build models operands of one type");
    sim::MulAdd(dst, src0, src1, count, "MulAddDst", at, [](float a, float b, float d) { return a * b + d; });
}
template <typename T>
void FusedMulAdd(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1,
                 const int32_t &count, bnb_rules::Src at = bnb_rules::Here())
{
    sim::MulAdd(dst, src0, src1, count, "FusedMulAdd", at, [](float a, float b, float d) { return a * d + b; });
}
// MulAddDst / FusedMulAdd, repeat form with a normal-mode (逐bit) mask (复合计算/MulAddDst.md,
// FusedMulAdd.md): the same SoCs as the count form; dst is read as well as written.
template <typename T, typename U, bool isSetMask = true>
void MulAddDst(const LocalTensor<T> &dst, const LocalTensor<U> &src0, const LocalTensor<U> &src1, const uint64_t mask[],
               const uint8_t repeatTime, const BinaryRepeatParams &repeatParams, bnb_rules::Src at = bnb_rules::Here())
{
    static_assert(std::is_same<T, U>::value, "MulAddDst: this CPU build models operands of one type");
    static_assert(std::is_same<T, float>::value || std::is_same<T, half>::value, "MulAddDst: float or half only");
    SimCheck(SimThisCore().soc.hasMulAdd, std::string("MulAddDst: not supported on ") + SimThisCore().soc.name, at);
    sim::RepeatForm(dst, src0, src1, mask, repeatTime, repeatParams, "MulAddDst", at, true,
                    [](float a, float b, float d) { return a * b + d; });
}
template <typename T, bool isSetMask = true>
void FusedMulAdd(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, uint64_t mask[],
                 const uint8_t repeatTime, const BinaryRepeatParams &repeatParams, bnb_rules::Src at = bnb_rules::Here())
{
    static_assert(std::is_same<T, float>::value || std::is_same<T, half>::value, "FusedMulAdd: float or half only");
    SimCheck(SimThisCore().soc.hasMulAdd, std::string("FusedMulAdd: not supported on ") + SimThisCore().soc.name, at);
    sim::RepeatForm(dst, src0, src1, mask, repeatTime, repeatParams, "FusedMulAdd", at, true,
                    [](float a, float b, float d) { return a * d + b; });
}
template <typename T, bool isSetMask = true>
void Adds(const LocalTensor<T> &dst, const LocalTensor<T> &src, const T &scalarValue, const int32_t &count,
          bnb_rules::Src at = bnb_rules::Here())
{
    const float s = static_cast<float>(scalarValue);
    sim::Unary(dst, src, count, "Adds", at, [s](float x) { return x + s; });
}
template <typename T, bool isSetMask = true>
void Muls(const LocalTensor<T> &dst, const LocalTensor<T> &src, const T &scalarValue, const int32_t &count,
          bnb_rules::Src at = bnb_rules::Here())
{
    const float s = static_cast<float>(scalarValue);
    sim::Unary(dst, src, count, "Muls", at, [s](float x) { return x * s; });
}
// Adds / Muls, repeat form with a normal-mode (逐bit) mask.
template <typename T, bool isSetMask = true>
void Adds(const LocalTensor<T> &dst, const LocalTensor<T> &src, const T &scalarValue, uint64_t mask[],
          const uint8_t repeatTime, const UnaryRepeatParams &repeatParams, bnb_rules::Src at = bnb_rules::Here())
{
    const float s = static_cast<float>(scalarValue);
    sim::UnaryRepeat(dst, src, mask, repeatTime, repeatParams, "Adds", at, [s](float x) { return x + s; });
}
template <typename T, bool isSetMask = true>
void Muls(const LocalTensor<T> &dst, const LocalTensor<T> &src, const T &scalarValue, uint64_t mask[],
          const uint8_t repeatTime, const UnaryRepeatParams &repeatParams, bnb_rules::Src at = bnb_rules::Here())
{
    const float s = static_cast<float>(scalarValue);
    sim::UnaryRepeat(dst, src, mask, repeatTime, repeatParams, "Muls", at, [s](float x) { return x * s; });
}
// dst = src * scalar + dst (Axpy, count form), float or half operands of one type (the real API also
// takes a half source into a float destination; not modelled); on every SoC line.
template <typename T, typename U>
void Axpy(const LocalTensor<T> &dst, const LocalTensor<U> &src, const U &scalarValue, const int32_t &count,
          bnb_rules::Src at = bnb_rules::Here())
{
    static_assert(std::is_same<T, U>::value, "Axpy: this CPU build models operands of one type");
    static_assert(std::is_same<T, float>::value || std::is_same<T, half>::value, "Axpy: float or half only");
    bnb_rules::CalCount("Axpy", count, at);
    const T *ps = src.SimPtr(count, "Axpy", true, at, "src");
    T *pd = dst.SimPtr(count, "Axpy", true, at, "dst");
    sim::RecordV("Axpy", at, {src.SimRange(count), dst.SimRange(count)}, {dst.SimRange(count)});
    perf::Vector(count, sizeof(T));
    if (perf::SkipData()) return;
    const float s = static_cast<float>(scalarValue);
    std::vector<T> tmp(count);
    for (int32_t i = 0; i < count; ++i) {
        tmp[i] = static_cast<T>(static_cast<float>(ps[i]) * s + static_cast<float>(pd[i]));
    }
    std::copy(tmp.begin(), tmp.end(), pd);
}
template <typename T, bool isSetMask = true>
void Sqrt(const LocalTensor<T> &dst, const LocalTensor<T> &src, const int32_t &count,
          bnb_rules::Src at = bnb_rules::Here())
{
    sim::Unary(dst, src, count, "Sqrt", at, [](float x) { return std::sqrt(x); });
}
template <typename T>
void Duplicate(const LocalTensor<T> &dst, const T &scalarValue, const int32_t &count,
               bnb_rules::Src at = bnb_rules::Here())
{
    sim::CheckVecType<T>("Duplicate", at);
    bnb_rules::CalCount("Duplicate", count, at);
    T *pd = dst.SimPtr(count, "Duplicate", true, at, "dst");
    sim::RecordV("Duplicate", at, {}, {dst.SimRange(count)});
    perf::Vector(count, sizeof(T));
    if (perf::SkipData()) return;
    for (int32_t i = 0; i < count; ++i) {
        pd[i] = scalarValue;
    }
}

// Duplicate, repeat form with a normal-mode (逐bit) mask: in repeat r the active elements of dst (block and
// repeat strides in blocks) = the scalar, the others keep their values (数据填充/Duplicate.md; the block
// stride uint16_t, the repeat stride uint8_t; a destination block stride 0 is undefined).
template <typename T, bool isSetMask = true>
void Duplicate(const LocalTensor<T> &dst, const T &scalarValue, uint64_t mask[], const uint8_t repeatTime,
               const uint16_t dstBlockStride, const uint8_t dstRepeatStride, bnb_rules::Src at = bnb_rules::Here())
{
    const char *op = "Duplicate";
    sim::CheckVecType<T>(op, at);
    bnb_rules::MaskWords(op, sizeof(T), mask[1], mask[0], at);
    bnb_rules::BlockStride(op, "dst", dstBlockStride, 65535, true, at);
    const int64_t last = bnb_rules::LastMaskElement(sizeof(T), mask[1], mask[0]);
    const uint64_t n = last < 0 ? 0 : repeatTime;
    T *pd = dst.SimPtr(sim::StridedElems(sizeof(T), n, last, dstBlockStride, dstRepeatStride), op, true, at, "dst");
    sim::RecordV(op, at, {}, sim::StridedRanges(dst, mask, n, dstBlockStride, dstRepeatStride));
    perf::Vector(std::max<uint64_t>(n, 1) * ONE_REPEAT_BYTE_SIZE / sizeof(T), sizeof(T));
    if (perf::SkipData()) return;
    const uint64_t per = ONE_REPEAT_BYTE_SIZE / sizeof(T);
    for (uint64_t r = 0; r < n; ++r) {
        for (uint64_t e = 0; e < per; ++e) {
            if (sim::MaskBit(mask, e)) {
                pd[sim::StridedAt<T>(r, e, dstBlockStride, dstRepeatStride)] = scalarValue;
            }
        }
    }
}

// Cast between float and half / bfloat16_t. Widening takes CAST_NONE;
// narrowing to bfloat16 needs an explicit rounding mode.
template <typename T, typename U>
void Cast(const LocalTensor<T> &dst, const LocalTensor<U> &src, const RoundMode &roundMode, const uint32_t count,
          bnb_rules::Src at = bnb_rules::Here())
{
    sim::CheckVecType<T>("Cast", at);
    sim::CheckVecType<U>("Cast", at);
    constexpr bool widen = std::is_same<T, float>::value &&
                           (std::is_same<U, half>::value || std::is_same<U, bfloat16_t>::value);
    constexpr bool narrow = std::is_same<U, float>::value &&
                            (std::is_same<T, half>::value || std::is_same<T, bfloat16_t>::value);
    static_assert(widen || narrow, "Cast: conversion not supported by this CPU build");
    if (widen) {
        SimCheck(roundMode == RoundMode::CAST_NONE, "Cast: widening to float takes RoundMode::CAST_NONE", at);
    } else if (std::is_same<T, bfloat16_t>::value) {
        SimCheck(roundMode == RoundMode::CAST_RINT || roundMode == RoundMode::CAST_ROUND ||
                     roundMode == RoundMode::CAST_FLOOR || roundMode == RoundMode::CAST_CEIL ||
                     roundMode == RoundMode::CAST_TRUNC,
                 "Cast: float->bfloat16 needs a rounding mode", at);
    }
    SimCheck(roundMode == RoundMode::CAST_NONE || roundMode == RoundMode::CAST_RINT,
             "Cast: only CAST_NONE / CAST_RINT are modelled by this CPU build", at);
    const U *ps = src.SimPtr(count, "Cast", true, at, "src");
    T *pd = dst.SimPtr(count, "Cast", true, at, "dst");
    sim::RecordV("Cast", at, {src.SimRange(count)}, {dst.SimRange(count)});
    perf::Vector(count, std::max(sizeof(T), sizeof(U)));
    if (perf::SkipData()) return;
    std::vector<T> tmp(count);
    for (uint32_t i = 0; i < count; ++i) {
        tmp[i] = static_cast<T>(static_cast<float>(ps[i]));  // both directions round to nearest even
    }
    std::copy(tmp.begin(), tmp.end(), pd);
}

// Sum of `count` elements into dst[0]. Modelled order: 64-lane repeats, each
// summed pairwise, then the repeat results reduced the same way.
template <typename T, bool isSetMask = true>
void ReduceSum(const LocalTensor<T> &dst, const LocalTensor<T> &src, const LocalTensor<T> &sharedTmpBuffer,
               const int32_t count, bnb_rules::Src at = bnb_rules::Here())
{
    static_assert(std::is_same<T, float>::value || std::is_same<T, half>::value, "ReduceSum: float or half only");
    bnb_rules::CalCount("ReduceSum", count, at);
    bnb_rules::ReduceSumType("ReduceSum", SimThisCore().soc, sizeof(T), at);
    const T *ps = src.SimPtr(count, "ReduceSum", true, at, "src");
    const int32_t lanes = ONE_REPEAT_BYTE_SIZE / sizeof(T);
    const int32_t repeats = (count + lanes - 1) / lanes;
    sharedTmpBuffer.SimPtr(repeats, "ReduceSum", true, at, "sharedTmpBuffer");
    T *pd = dst.SimPtr(1, "ReduceSum", true, at, "dst");
    SimThisCore().pipes.Op(bnb_hazards::V, {"ReduceSum", at, bnb_hazards::V}, {src.SimRange(count)},
                           {dst.SimRange(1), sharedTmpBuffer.SimRange(repeats)});
    perf::Vector(count, sizeof(T), 2.0);  // the repeats, then their results reduced
    if (perf::SkipData()) return;
    std::vector<float> v(ps, ps + count);
    while (v.size() > 1) {
        std::vector<float> next;
        for (size_t r = 0; r < v.size(); r += lanes) {
            std::vector<float> lane(v.begin() + r, v.begin() + std::min(v.size(), r + lanes));
            while (lane.size() > 1) {
                std::vector<float> half_((lane.size() + 1) / 2);
                for (size_t i = 0; i < half_.size(); ++i) {
                    half_[i] = lane[i] + (i + half_.size() < lane.size() ? lane[i + half_.size()] : 0.0f);
                }
                lane.swap(half_);
            }
            next.push_back(lane[0]);
        }
        v.swap(next);
    }
    pd[0] = static_cast<T>(v.empty() ? 0.0f : v[0]);
}

}  // namespace AscendC
#endif
