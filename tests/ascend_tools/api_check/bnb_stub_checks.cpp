// The closed CPU-debug library's argument checkers (AscendC::check::*), as
// the stand-ins of the real-API build: each applies the documented rules of
// the one rule table (tests/ascend_tools/rules/bnb_rules.h) to what the public
// headers hand it, and a violation stops the core with a message naming the
// intrinsic, the rule, the values and the kernel source line (found on the
// call stack, bnb_stub_where.cpp). Compiled against the public headers for one
// SoC, like the kernel entries.
#include <algorithm>
#include <cstring>
#include "kernel_operator.h"
#include "../rules/bnb_rules.h"

namespace {
namespace R = bnb_rules;
using AscendC::Hardware;

uint64_t BnbUbBase()
{
    return reinterpret_cast<uint64_t>(AscendC::ConstDefiner::Instance().hardwareCpuBufferMap.at(Hardware::UB));
}
bool BnbIsUb(uint8_t phyPos) { return phyPos == static_cast<uint8_t>(Hardware::UB); }
std::string BnbPosName(uint8_t phyPos) { return "hardware " + std::to_string(phyPos); }

// A UB operand touching `needBytes` from its start, given as a tensor of `sizeBytes`.
void BnbOperand(const char *intr, const char *name, uint64_t addr, uint8_t phyPos, uint64_t needBytes, uint64_t sizeBytes)
{
    R::InUbPosition(intr, name, BnbIsUb(phyPos), BnbPosName(phyPos), {});
    const uint64_t off = addr - BnbUbBase();
    R::UbAligned(intr, name, off, {});
    R::FitsTensor(intr, name, needBytes, sizeBytes, {});
    R::InUb(intr, name, off, needBytes, AscendC::TOTAL_UB_SIZE, {});
}
void BnbNoPartialOverlap(const char *intr, uint64_t dst, uint64_t dstBytes, const char *srcName, uint64_t src,
                      uint64_t srcBytes)
{
    R::NoPartialOverlap(intr, "dst", dst - BnbUbBase(), dstBytes, srcName, src - BnbUbBase(), srcBytes, {});
}

// Bytes a mask-form operand spans: repeats of 8 DataBlocks with strides, the
// mask enabling elements up to `last` of each repeat (normal mode), or the
// first `mask` elements in all (counter mode).
uint64_t BnbMaskedExtent(uint64_t elemBytes, uint64_t repeat, uint64_t blk, uint64_t rep, int64_t last, bool counter,
                      uint64_t count)
{
    const uint64_t per = R::REPEAT / elemBytes;
    if (counter) {
        if (count == 0) return 0;
        const uint64_t repeats = (count + per - 1) / per, lastElem = (count - 1) % per;
        return R::StridedExtent(repeats, lastElem * elemBytes / R::BLOCK, blk, rep);
    }
    if (last < 0) return 0;
    return R::StridedExtent(repeat, uint64_t(last) * elemBytes / R::BLOCK, blk, rep);
}
bool BnbCounterMode() { return bnb_stub::Vec().counterMode; }

// Each repeat's blocks of a mask-form operand (normal mode), up to the block of the mask's last element
// (whole blocks: the operands are 32-byte aligned), for R::RepeatwiseOverlap.
std::vector<std::vector<R::Span>> BnbRepeatBlocks(uint64_t addr, uint64_t elemBytes, uint64_t repeat, uint64_t blk,
                                                  uint64_t rep, int64_t last)
{
    std::vector<std::vector<R::Span>> out;
    if (last < 0) return out;
    const uint64_t blocks = uint64_t(last) * elemBytes / R::BLOCK + 1, base = addr - BnbUbBase();
    out.resize(repeat);
    for (uint64_t r = 0; r < repeat; ++r) {
        for (uint64_t b = 0; b < blocks; ++b) {
            const uint64_t lo = base + (r * rep + b * blk) * R::BLOCK;
            out[r].push_back({lo, lo + R::BLOCK});
        }
    }
    return out;
}

// ---- binary (Add, Sub, Mul, Div, ...) ----
void BnbBinary(AscendC::check::VecBinaryApiParams &p, const char *intr, int64_t last, uint64_t count)
{
    R::RepeatTimes(intr, p.repeatTimes, {});
    R::BlockStride(intr, "dst", p.dstBlockStride, 255, true, {});
    R::BlockStride(intr, "src0", p.src0BlockStride, 255, false, {});
    R::BlockStride(intr, "src1", p.src1BlockStride, 255, false, {});
    R::RepeatStride(intr, "dst", p.dstRepeatStride, 255, {});
    R::RepeatStride(intr, "src0", p.src0RepeatStride, 255, {});
    R::RepeatStride(intr, "src1", p.src1RepeatStride, 255, {});
    const bool counter = BnbCounterMode();
    const uint64_t d = BnbMaskedExtent(p.dstDtypeBytes, p.repeatTimes, p.dstBlockStride, p.dstRepeatStride, last, counter,
                                    count);
    const uint64_t s0 = BnbMaskedExtent(p.src0DtypeBytes, p.repeatTimes, p.src0BlockStride, p.src0RepeatStride, last,
                                     counter, count);
    const uint64_t s1 = BnbMaskedExtent(p.src1DtypeBytes, p.repeatTimes, p.src1BlockStride, p.src1RepeatStride, last,
                                     counter, count);
    BnbOperand(intr, "dst", p.dstAddr, p.dstPos, d, p.dstSize);
    BnbOperand(intr, "src0", p.src0Addr, p.src0Pos, s0, p.src0Size);
    BnbOperand(intr, "src1", p.src1Addr, p.src1Pos, s1, p.src1Size);
    if (!counter) {
        // 通用地址重叠约束, repeat by repeat; the second source's exception taken for 4-byte types only (float,
        // int32_t: half is not told apart from bfloat16 here, so refused, stricter than the reference)
        const auto dst = BnbRepeatBlocks(p.dstAddr, p.dstDtypeBytes, p.repeatTimes, p.dstBlockStride,
                                         p.dstRepeatStride, last);
        const bool acc = (p.dstRepeatStride == 0 || p.src1RepeatStride == 0) && R::AccumulatesAcrossRepeats(intr) &&
                         p.dstDtypeBytes == 4;
        R::RepeatwiseOverlap(intr, dst, "src0",
                             BnbRepeatBlocks(p.src0Addr, p.src0DtypeBytes, p.repeatTimes, p.src0BlockStride,
                                             p.src0RepeatStride, last),
                             false, {});
        R::RepeatwiseOverlap(intr, dst, "src1",
                             BnbRepeatBlocks(p.src1Addr, p.src1DtypeBytes, p.repeatTimes, p.src1BlockStride,
                                             p.src1RepeatStride, last),
                             acc, {});
    }
}
void BnbBinaryCount(AscendC::check::VecBinaryApiParams &p, const char *intr)
{
    const uint64_t n = p.calCount;
    BnbOperand(intr, "dst", p.dstAddr, p.dstPos, n * p.dstDtypeBytes, p.dstSize);
    BnbOperand(intr, "src0", p.src0Addr, p.src0Pos, n * p.src0DtypeBytes, p.src0Size);
    BnbOperand(intr, "src1", p.src1Addr, p.src1Pos, n * p.src1DtypeBytes, p.src1Size);
    BnbNoPartialOverlap(intr, p.dstAddr, n * p.dstDtypeBytes, "src0", p.src0Addr, n * p.src0DtypeBytes);
    BnbNoPartialOverlap(intr, p.dstAddr, n * p.dstDtypeBytes, "src1", p.src1Addr, n * p.src1DtypeBytes);
}

// ---- one source and a scalar (Adds, Muls, and the unary forms: Sqrt, Exp, ...) ----
void BnbScalar(AscendC::check::VecBinaryScalarApiParams &p, const char *intr, int64_t last, uint64_t count)
{
    R::RepeatTimes(intr, p.repeatTimes, {});
    R::BlockStride(intr, "dst", p.dstBlockStride, 65535, true, {});
    R::BlockStride(intr, "src", p.src0BlockStride, 65535, false, {});
    R::RepeatStride(intr, "dst", p.dstRepeatStride, 255, {});
    R::RepeatStride(intr, "src", p.src0RepeatStride, 255, {});
    const bool counter = BnbCounterMode();
    BnbOperand(intr, "dst", p.dstAddr, p.dstPos,
            BnbMaskedExtent(p.dstDtypeBytes, p.repeatTimes, p.dstBlockStride, p.dstRepeatStride, last, counter, count),
            p.dstSize);
    BnbOperand(intr, "src", p.src0Addr, p.src0Pos,
            BnbMaskedExtent(p.src0DtypeBytes, p.repeatTimes, p.src0BlockStride, p.src0RepeatStride, last, counter, count),
            p.src0Size);
}
void BnbScalarCount(AscendC::check::VecBinaryScalarApiParams &p, const char *intr)
{
    const uint64_t n = p.calCount;
    BnbOperand(intr, "dst", p.dstAddr, p.dstPos, n * p.dstDtypeBytes, p.dstSize);
    BnbOperand(intr, "src", p.src0Addr, p.src0Pos, n * p.src0DtypeBytes, p.src0Size);
    BnbNoPartialOverlap(intr, p.dstAddr, n * p.dstDtypeBytes, "src", p.src0Addr, n * p.src0DtypeBytes);
}

// ---- Duplicate ----
void BnbDup(AscendC::check::VecDupApiParams &p, const char *intr, int64_t last, uint64_t count)
{
    R::RepeatTimes(intr, p.repeatTimes, {});
    R::BlockStride(intr, "dst", p.dstBlockStride, 65535, true, {});
    R::RepeatStride(intr, "dst", p.dstRepeatStride, 255, {});
    BnbOperand(intr, "dst", p.dstAddr, p.dstPos,
            BnbMaskedExtent(p.dstDtypeBytes, p.repeatTimes, p.dstBlockStride, p.dstRepeatStride, last, BnbCounterMode(),
                         count),
            p.dstSize);
}

// Last element a mask enables in one repeat: continuous (first `mask`) or bitwise.
int64_t BnbLastOfCount(uint64_t elemBytes, uint64_t mask)
{
    const uint64_t per = R::REPEAT / elemBytes;
    return int64_t(std::min<uint64_t>(mask, per)) - 1;
}
int64_t BnbLastOfBits(const char *intr, uint64_t elemBytes, const uint64_t mask[])
{
    R::MaskWords(intr, elemBytes, mask[1], mask[0], {});
    return R::LastMaskElement(elemBytes, mask[1], mask[0]);
}

// ---- the reductions' common part: their parameter rules (`params`, ReduceRepeat's or ReduceDataBlock's) and src;
// returns the repeats that run (none without an active element) ----
using BnbReduceRules = void (*)(const char *, const R::Soc &, uint64_t, int64_t, int64_t, int64_t, int64_t, R::Src);
uint64_t BnbReduceSrc(AscendC::check::VecReduceApiParams &p, const char *intr, int64_t last, BnbReduceRules params)
{
    const R::Soc *soc = R::SocOfArch(__NPU_ARCH__);
    R::Require(soc != nullptr, intr, "no SoC line has this __NPU_ARCH__", "", {});
    params(intr, *soc, p.src0DtypeBytes, p.repeatTimes, p.dstRepeatStride, p.src0BlockStride, p.src0RepeatStride, {});
    const uint64_t repeats = last < 0 ? 0 : uint64_t(p.repeatTimes);
    const uint64_t srcBytes = BnbMaskedExtent(p.src0DtypeBytes, repeats, p.src0BlockStride, p.src0RepeatStride, last,
                                              false, 0);
    BnbOperand(intr, "src", p.src0Addr, p.src0Pos, srcBytes, p.src0Size);
    return repeats;
}

// ---- ReduceRepeat / WholeReduceSum (a result per repeat) ----
void BnbReduceRepeat(AscendC::check::VecReduceApiParams &p, const char *intr, int64_t last)
{
    const uint64_t repeats = BnbReduceSrc(p, intr, last, R::ReduceRepeatParams);
    // dst: its element's alignment only (ReduceRepeat.md 表3, SUM), a result every dstRepStride elements
    const uint64_t dstBytes = repeats == 0 ? 0 : ((repeats - 1) * p.dstRepeatStride + 1) * p.dstDtypeBytes;
    R::InUbPosition(intr, "dst", BnbIsUb(p.dstPos), BnbPosName(p.dstPos), {});
    const uint64_t off = p.dstAddr - BnbUbBase();
    R::Require(off % p.dstDtypeBytes == 0, intr, "UB address of dst not aligned to its element", "UB offset " + R::N(off),
               {});
    R::FitsTensor(intr, "dst", dstBytes, p.dstSize, {});
    R::InUb(intr, "dst", off, dstBytes, AscendC::TOTAL_UB_SIZE, {});
}

// ---- ReduceDataBlock / BlockReduceSum (a result per block) ----
void BnbBlockReduce(AscendC::check::VecReduceApiParams &p, const char *intr, int64_t last)
{
    const uint64_t repeats = BnbReduceSrc(p, intr, last, R::BlockReduceParams);
    // dst: a result per block with an active element, a repeat's 8 results dstRepStride sets of 8 apart
    const uint64_t perBlock = R::BLOCK / p.src0DtypeBytes;
    const uint64_t blocks = last < 0 ? 0 : uint64_t(last) / perBlock + 1;
    const uint64_t dstBytes = repeats == 0 ? 0 : ((repeats - 1) * p.dstRepeatStride * 8 + blocks) * p.dstDtypeBytes;
    R::InUbPosition(intr, "dst", BnbIsUb(p.dstPos), BnbPosName(p.dstPos), {});
    const uint64_t off = p.dstAddr - BnbUbBase();
    R::BlockReduceDst(intr, off, p.dstDtypeBytes, {});
    R::FitsTensor(intr, "dst", dstBytes, p.dstSize, {});
    R::InUb(intr, "dst", off, dstBytes, AscendC::TOTAL_UB_SIZE, {});
}

// ---- Copy, masked repeat form (UB -> UB) ----
void BnbMaskedCopy(AscendC::check::CopyApiParams &p, const char *intr, int64_t last)
{
    const R::Soc *soc = R::SocOfArch(__NPU_ARCH__);
    R::Require(soc != nullptr, intr, "no SoC line has this __NPU_ARCH__", "", {});
    R::MaskedCopyParams(intr, *soc, p.dstDtypeBytes, p.dstRepeatSize, p.srcRepeatSize, {});
    R::RepeatTimes(intr, p.repeatTimes, {});
    R::BlockStride(intr, "dst", p.dstStride, 65535, true, {});
    R::BlockStride(intr, "src", p.srcStride, 65535, false, {});
    const uint64_t d = BnbMaskedExtent(p.dstDtypeBytes, p.repeatTimes, p.dstStride, p.dstRepeatSize, last, false, 0);
    const uint64_t s = BnbMaskedExtent(p.srcDtypeBytes, p.repeatTimes, p.srcStride, p.srcRepeatSize, last, false, 0);
    BnbOperand(intr, "dst", p.dstAddr, p.dstPos, d, p.dstSize);
    BnbOperand(intr, "src", p.srcAddr, p.srcPos, s, p.srcSize);
    BnbNoPartialOverlap(intr, p.dstAddr, d, "src", p.srcAddr, s);
}

// ---- Brcb ----
void BnbBrcb(AscendC::check::VecBroadCastApiParams &p, uint32_t elemBytes, const char *intr)
{
    const R::Soc *soc = R::SocOfArch(__NPU_ARCH__);
    R::Require(soc != nullptr, intr, "no SoC line has this __NPU_ARCH__", "", {});
    // (UB in use is not known here: the 8 KB the Atlas inference AI Core keeps free is the simulator's check)
    R::BrcbParams(intr, *soc, elemBytes, p.dstBlockStride, 0, {});
    R::RepeatTimes(intr, p.repeatTimes, {});
    const uint64_t n = p.repeatTimes;
    const uint64_t d = n == 0 ? 0 : ((n - 1) * p.dstRepeatStride + 7 * uint64_t(p.dstBlockStride) + 1) * R::BLOCK;
    const uint64_t s = 8 * n * elemBytes;
    BnbOperand(intr, "dst", p.dstAddr, p.dstPos, d, p.dstSize);
    BnbOperand(intr, "src", p.srcAddr, p.srcPos, s, p.srcSize);
    R::Require(n == 0 || p.srcAddr + s <= p.dstAddr || p.dstAddr + d <= p.srcAddr, intr, "src and dst share memory",
               "", {});
}

// ---- data movement ----
void BnbCopy(AscendC::check::DataCopyBaseParams &p, const char *intr, bool pad)
{
    if (!pad) {
        R::CopyParams(intr, p.blockCount, p.blockLen, p.srcStride, p.dstStride, {});
    } else {
        R::Require(p.blockCount <= 4095, intr, "blockCount above 4095", "blockCount " + R::N(p.blockCount), {});
    }
    const bool toUb = BnbIsUb(p.dstPos), fromUb = BnbIsUb(p.srcPos);
    R::Require(toUb || fromUb, intr, "neither operand is a UB tensor",
               "dst " + BnbPosName(p.dstPos) + ", src " + BnbPosName(p.srcPos), {});
    if (toUb) {
        R::UbAligned(intr, "dst", p.dstAddr - BnbUbBase(), {});
    }
    if (fromUb) {
        R::UbAligned(intr, "src", p.srcAddr - BnbUbBase(), {});
    }
    if (!pad) {
        const uint64_t blk = uint64_t(p.blockLen) * R::BLOCK;
        if (toUb) {
            const uint64_t span = p.blockCount == 0 ? 0 : (p.blockCount - 1) * (blk + p.dstStride * R::BLOCK) + blk;
            R::InUb(intr, "dst", p.dstAddr - BnbUbBase(), span, AscendC::TOTAL_UB_SIZE, {});
        } else {
            R::GmElementAligned(intr, p.dstAddr, p.dstDtypeBytes, {});
        }
        if (fromUb) {
            const uint64_t span = p.blockCount == 0 ? 0 : (p.blockCount - 1) * (blk + p.srcStride * R::BLOCK) + blk;
            R::InUb(intr, "src", p.srcAddr - BnbUbBase(), span, AscendC::TOTAL_UB_SIZE, {});
        } else {
            R::GmElementAligned(intr, p.srcAddr, p.srcDtypeBytes, {});
        }
    }
}

// ---- Gather ----
// The repeat form: `last` the last element the mask enables in a repeat (-1: none).
void BnbGather(AscendC::check::VecGatherApiParams &p, const char *intr, int64_t last)
{
    const R::Soc *soc = R::SocOfArch(__NPU_ARCH__);
    R::Require(soc != nullptr, intr, "no SoC line has this __NPU_ARCH__", "", {});
    const uint64_t e = p.dstDtypeBytes, lanes = R::REPEAT / e;
    R::GatherParams(intr, *soc, e, p.srcBaseOffset, p.srcSize, {});
    R::RepeatTimes(intr, p.repeatTimes, {});
    const uint64_t n = last < 0 ? 0 : p.repeatTimes, active = uint64_t(last + 1);
    const uint64_t d = n == 0 ? 0 : (n - 1) * p.dstRepeatStride * R::BLOCK + active * e;
    const uint64_t o = n == 0 ? 0 : ((n - 1) * lanes + active) * p.offsetDtypeBytes;
    BnbOperand(intr, "dst", p.dstAddr, p.dstPos, d, p.dstSize);
    BnbOperand(intr, "src", p.srcAddr, p.srcPos, n == 0 ? 0 : e, p.srcSize);
    BnbOperand(intr, "srcOffset", p.offsetAddr, p.offsetPos, o, p.offsetSize);
    const uint32_t *po = reinterpret_cast<const uint32_t *>(static_cast<uintptr_t>(p.offsetAddr));
    for (uint64_t r = 0; r < n; ++r) {
        for (uint64_t i = r * lanes; i < r * lanes + active; ++i) {
            R::GatherOffset(intr, i, po[i], p.srcBaseOffset, e, p.srcSize, {});
        }
    }
    R::Require(n == 0 || p.dstAddr + d <= p.srcAddr || p.srcAddr + p.srcSize <= p.dstAddr, intr,
               "src and dst share memory", "", {});
}
}  // namespace

namespace AscendC {
namespace check {
bool CheckFuncGatherImpl(VecGatherApiParams &p, const uint64_t mask, const char *intr)
{
    BnbGather(p, intr, BnbLastOfCount(p.dstDtypeBytes, mask));
    return true;
}
bool CheckFuncGatherImpl(VecGatherApiParams &p, const uint64_t mask[], const char *intr)
{
    BnbGather(p, intr, BnbLastOfBits(intr, p.dstDtypeBytes, mask));
    return true;
}
// The count form: its repeats and its tail are checked by the repeat form the headers call next.
bool CheckFuncGatherImpl(VecGatherApiParams &p, const char *intr)
{
    R::GatherCount(intr, p.calCount, p.dstDtypeBytes, {});
    return true;
}
bool CheckFuncVecBinaryImpl(VecBinaryApiParams &p, const char *intr)
{
    BnbBinaryCount(p, intr);
    return true;
}
bool CheckFuncVecBinaryImpl(VecBinaryApiParams &p, const uint64_t mask, const char *intr)
{
    BnbBinary(p, intr, BnbLastOfCount(p.dstDtypeBytes, mask), mask);
    return true;
}
bool CheckFuncVecBinaryImplForMaskArray(VecBinaryApiParams &p, const uint64_t mask[], const char *intr)
{
    BnbBinary(p, intr, BnbLastOfBits(intr, p.dstDtypeBytes, mask), mask[0]);
    return true;
}
bool CheckFunVecBinaryScalarImpl(VecBinaryScalarApiParams &p, const char *intr)
{
    BnbScalarCount(p, intr);
    return true;
}
bool CheckFunVecBinaryScalarImpl(VecBinaryScalarApiParams &p, const uint64_t mask, const char *intr)
{
    BnbScalar(p, intr, BnbLastOfCount(p.dstDtypeBytes, mask), mask);
    return true;
}
bool CheckFunVecBinaryScalarImplForMaskArray(VecBinaryScalarApiParams &p, const uint64_t mask[], const char *intr)
{
    BnbScalar(p, intr, BnbLastOfBits(intr, p.dstDtypeBytes, mask), mask[0]);
    return true;
}
bool CheckFunDupImpl(VecDupApiParams &p, const char *intr)
{
    BnbOperand(intr, "dst", p.dstAddr, p.dstPos, uint64_t(p.calCount) * p.dstDtypeBytes, p.dstSize);
    return true;
}
bool CheckFunDupImpl(VecDupApiParams &p, const uint64_t mask, const char *intr)
{
    BnbDup(p, intr, BnbLastOfCount(p.dstDtypeBytes, mask), mask);
    return true;
}
bool CheckFunDupImplForMaskArray(VecDupApiParams &p, const uint64_t mask[], const char *intr)
{
    BnbDup(p, intr, BnbLastOfBits(intr, p.dstDtypeBytes, mask), mask[0]);
    return true;
}
// Whole-count reductions (ReduceSum(dst, src, work, count)).
bool CheckFunReduceImplMode2(VecReduceApiParams &p, const char *intr)
{
    BnbOperand(intr, "dst", p.dstAddr, p.dstPos, p.dstDtypeBytes, p.dstSize);
    BnbOperand(intr, "src", p.src0Addr, p.src0Pos, uint64_t(p.calCount) * p.src0DtypeBytes, p.src0Size);
    return true;
}
bool CheckFunReduceImpl(VecReduceApiParams &p, const char *intr) { return CheckFunReduceImplMode2(p, intr); }
bool CheckFunBcBImpl(VecBroadCastApiParams &p, uint32_t dtypeSize, const char *intr)
{
    BnbBrcb(p, dtypeSize, intr);
    return true;
}
bool CheckFuncCopyImpl(CopyApiParams &p, const uint64_t mask, const char *intr)
{
    BnbMaskedCopy(p, intr, BnbLastOfCount(p.dstDtypeBytes, mask));
    return true;
}
bool CheckFuncCopyImplForMaskArray(CopyApiParams &p, const uint64_t mask[], const char *intr)
{
    BnbMaskedCopy(p, intr, BnbLastOfBits(intr, p.dstDtypeBytes, mask));
    return true;
}
// The headers name ReduceDataBlock's (BlockReduceSum's) check "BlockReduceMax" and ReduceRepeat's
// "WholeReduceSum" (kernel_operator_vec_reduce_intf_impl.h): a result per block or per repeat.
bool BnbBlockReduceCheck(const char *intr) { return std::strncmp(intr, "BlockReduce", 11) == 0; }
bool CheckFunReduceOtherImpl(VecReduceApiParams &p, const uint64_t mask, const char *intr)
{
    R::ContinuousMask(intr, int64_t(mask), {});
    if (BnbBlockReduceCheck(intr)) {
        BnbBlockReduce(p, intr, BnbLastOfCount(p.src0DtypeBytes, mask));
        return true;
    }
    BnbReduceRepeat(p, intr, BnbLastOfCount(p.src0DtypeBytes, mask));
    return true;
}
bool CheckFunReduceOtherImplForMaskArray(VecReduceApiParams &p, const uint64_t mask[], const char *intr)
{
    if (BnbBlockReduceCheck(intr)) {
        BnbBlockReduce(p, intr, BnbLastOfBits(intr, p.src0DtypeBytes, mask));
        return true;
    }
    BnbReduceRepeat(p, intr, BnbLastOfBits(intr, p.src0DtypeBytes, mask));
    return true;
}
bool CheckFuncDataCopyImpl(DataCopyApiParams &p, const char *intr)
{
    BnbCopy(p, intr, false);
    return true;
}
bool CheckFuncDataCopyPadImpl(DataCopyPadApiParams &p, const char *intr)
{
    BnbCopy(p, intr, true);
    R::Require(uint64_t(p.leftPadding) * p.dstDtypeBytes <= R::BLOCK &&
                   uint64_t(p.rightPadding) * p.dstDtypeBytes <= R::BLOCK,
               intr, "padding above 32 bytes",
               "leftPadding " + R::N(p.leftPadding) + ", rightPadding " + R::N(p.rightPadding) + " elements", {});
    return true;
}
}  // namespace check
}  // namespace AscendC
