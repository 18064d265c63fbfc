// The one table of Ascend C hardware / API rules the project's verification
// enforces, shared by the simulator (tests/ascend_tools/sim) and by the
// stand-ins of the closed CPU-debug library (tests/ascend_tools/api_check).
// Header-only, plain C++17, no dependency on either API build.
//
// Every rule cites the page of the public Ascend C API reference it comes
// from (asc-devkit, docs/zh/api/..., tested at commit 82b89a1; the same pages
// are published on hiascend.com). A violated rule stops the run through
// Violation(): the message names the intrinsic, the rule, the values and the
// kernel source line ("file:line"); the build decides how the run stops
// (the simulator throws AscendC::SimError, the stand-ins print to stderr and
// end the core process with exit code VIOLATION_EXIT).
#ifndef BNB_TOOLS_RULES_H
#define BNB_TOOLS_RULES_H
#include "../../../ascend_impl/op_host/batch_norm_soc_caps.gen.h"  // the chip capabilities, from op_def
#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace bnb_rules {

// ---- where in the kernel source ----
struct Src {
    const char *file = nullptr;
    unsigned line = 0;
    uint32_t trace = 0;  // file == nullptr: a call stack the build's locator recorded (0: the current one)
};
// As a default argument, records the caller's line (the kernel's call site).
inline Src Here(const char *file = __builtin_FILE(), unsigned line = __builtin_LINE()) { return {file, line}; }

// When a build cannot pass the call site (the stand-ins are called from inside
// the public headers), it installs a locator that finds it on the call stack:
// the current one (trace 0) or one it recorded earlier (the pipe-hazard
// tracker names the earlier of two instructions too).
using Locator = Src (*)(uint32_t trace);
inline Locator &SourceLocator()
{
    static Locator locator = nullptr;
    return locator;
}
inline std::string Where(Src src)
{
    if (src.file == nullptr && SourceLocator() != nullptr) {
        src = SourceLocator()(src.trace);
    }
    if (src.file == nullptr) {
        return "kernel source line unknown";
    }
    return std::string(src.file) + ":" + std::to_string(src.line);
}

// ---- how a violation stops the run ----
constexpr int VIOLATION_EXIT = 86;  // exit code of a stand-in core stopped by a rule
using Stop = void (*)(const std::string &message);
inline void StopByExit(const std::string &message)
{
    std::fflush(stdout);
    std::fprintf(stderr, "[bnb-check] %s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(VIOLATION_EXIT);
}
inline Stop &StopHandler()
{
    static Stop stop = StopByExit;
    return stop;
}
// "<intrinsic>: <rule> (<values>) at <file>:<line>"; never returns.
[[noreturn]] inline void Violation(const std::string &intrinsic, const std::string &rule, const std::string &values,
                                   Src src)
{
    std::string msg = intrinsic + ": " + rule;
    if (!values.empty()) {
        msg += " (" + values + ")";
    }
    msg += " at " + Where(src);
    StopHandler()(msg);
    StopByExit(msg);  // a handler that returns still stops the run
    std::abort();
}
inline void Require(bool ok, const std::string &intrinsic, const std::string &rule, const std::string &values, Src src)
{
    if (!ok) {
        Violation(intrinsic, rule, values, src);
    }
}
inline std::string N(uint64_t v) { return std::to_string(v); }

// ---- SoC lines: what differs for these kernels ----
// The chip capabilities (UB size, cores, DataCopyPad, bf16, SyncAll, DataCacheCleanAndInvalid) are
// op_def/ascend_soc_capabilities.yaml's, with their public sources there; the stand-ins check the UB
// size against the headers' TOTAL_UB_SIZE per __NPU_ARCH__.
struct Soc {
    const char *name;
    int npuArch;            // __NPU_ARCH__ of the vector core
    uint32_t ubBytes;       // Unified Buffer per vector core
    uint32_t coreNum;       // vector cores
    bool hasDataCopyPad;    // DataCopyPad exists (not on Atlas training / Atlas inference AI Core)
    bool hasBf16;
    bool hasSyncAll;        // the hardware SyncAll(): Atlas A2 / A3 / 350 only
    bool hasSoftSyncAll;    // the software SyncAll(gmWorkspace, ubWorkspace, usedCores): every line here
    bool hasDcci;           // DataCacheCleanAndInvalid: Atlas A2 / A3 / 350 only
    bool hasMulAdd;         // MulAddDst / FusedMulAdd: not on dav-c100 (ascend910)
    bool hasReduceRepeat;   // ReduceRepeat<SUM> and ReduceSum on float: not on Atlas training (ascend910, half only)
    bool hasBlockCopy;      // Brcb and the masked UB -> UB Copy: not on Atlas training / inference
    uint32_t eventIds;      // event ids per HardEvent (the table's event_ids; QueMaxEvent of npuArch, checked)
};
// __NPU_ARCH__ of each line's vector core, as the headers define it: the one per-SoC fact here that
// is not a chip capability. Everything else comes from op_def/ascend_soc_capabilities.yaml through
// the generated batch_norm_soc_caps.gen.h, the table the host tiling reads too.
inline int NpuArchOf(const std::string &name)
{
    static const struct {
        const char *name;
        int arch;
    } arch[] = {{"ascend910", 1001}, {"ascend310p", 2002}, {"ascend910b", 2201}, {"ascend910_93", 2201},
                {"ascend950", 3510}};
    for (const auto &a : arch) {
        if (name == a.name) return a.arch;
    }
    std::fprintf(stderr, "bnb_rules: no __NPU_ARCH__ known for SoC line '%s'\n", name.c_str());
    std::abort();
}
// Event ids a TPipe hands out per HardEvent: QUE_MAX_EVENT (impl/basic_api/kernel_macros.h), 8 on the
// cores with __NPU_ARCH__ 2002, 2201, 3002, 3102, 3510 and 5102, 4 on the others (dav-c100). A queue's
// buffers draw from the same pool as the kernel's AllocEventID / FetchEventID (TQueBind::EnQue takes an
// id of the enqueue event until DeQue, FreeTensor one of the free event until AllocTensor takes the
// buffer again: impl/basic_api/kernel_tquebind_impl.h), and TPipe::AllocEventID asserts when none is left.
inline int QueMaxEvent(int npuArch)
{
    switch (npuArch) {
        case 2002: case 2201: case 3002: case 3102: case 3510: case 5102: return 8;
        default: return 4;
    }
}
inline const std::vector<Soc> &Socs()
{
    static const std::vector<Soc> table = [] {
        std::vector<Soc> t;
        for (const auto &c : bnb::SOC_CAPS) {
            t.push_back({c.name, NpuArchOf(c.name), c.ubBytes, c.vectorCores, c.dataCopyPad, c.bf16, c.syncAll,
                         c.softSyncAll, c.dcci, c.mulAdd, c.reduceRepeat, c.blockCopy, c.eventIds});
        }
        return t;
    }();
    return table;
}
inline const Soc *FindSoc(const std::string &name)
{
    for (const auto &s : Socs()) {
        if (name == s.name) return &s;
    }
    return nullptr;
}
inline const Soc *SocOfArch(int npuArch)
{
    for (const auto &s : Socs()) {
        if (s.npuArch == npuArch) return &s;
    }
    return nullptr;
}

// ---- storage and operands ----
constexpr uint64_t BLOCK = 32;     // DataBlock: unit of UB alignment and of DataCopy lengths
constexpr uint64_t REPEAT = 256;   // bytes one vector repeat processes (8 DataBlocks)
constexpr uint64_t CACHE_LINE = 64;  // scalar data cache line (DataCacheCleanAndInvalid SINGLE_CACHE_LINE)

// UB operands start 32-byte aligned (SIMD-API/通用说明和约束.md, 通用地址对齐约束, 表2:
// "Unified Buffer 32Byte对齐"; each DataCopy / DataCopyPad page repeats it for the UB side).
inline void UbAligned(const char *intr, const char *operand, uint64_t ubOffset, Src src)
{
    Require(ubOffset % BLOCK == 0, intr, std::string("UB address of ") + operand + " not 32-byte aligned",
            "UB offset " + N(ubOffset), src);
}
// Every byte an instruction touches lies inside the Unified Buffer of the core
// (DataCopyPad pages: "需要注意不要超过UB空间大小"; 高维切分.md: strides "不能超过UB大小限制").
inline void InUb(const char *intr, const char *operand, uint64_t ubOffset, uint64_t bytes, uint64_t ubBytes, Src src)
{
    Require(ubOffset + bytes <= ubBytes, intr, std::string(operand) + " runs past the end of UB",
            "UB bytes " + N(ubOffset) + ".." + N(ubOffset + bytes) + " of " + N(ubBytes), src);
}
// An operand's extent fits the LocalTensor it is given as (an instruction must
// not read or write past its tensor: LocalTensor简介.md / GetSize; the
// count / repeat of each vector page is bounded by the operand).
inline void FitsTensor(const char *intr, const char *operand, uint64_t needBytes, uint64_t haveBytes, Src src)
{
    Require(needBytes <= haveBytes, intr, std::string(operand) + ": access of " + N(needBytes) +
            " bytes exceeds the tensor", "tensor holds " + N(haveBytes) + " bytes", src);
}
// Each UB operand stays inside the TPipe buffer (TQue / TBuf InitBuffer) its
// first byte lies in: a tensor taken from a queue or a TBuf ends with its
// buffer (TPipe/InitBuffer.md; the next buffer belongs to another tensor).
inline void InBuffer(const char *intr, const char *operand, uint64_t lo, uint64_t hi, uint64_t bufLo, uint64_t bufHi,
                     Src src)
{
    Require(hi <= bufHi, intr, std::string(operand) + " runs past the end of its TPipe buffer",
            "UB bytes " + N(lo) + ".." + N(hi) + ", buffer " + N(bufLo) + ".." + N(bufHi), src);
}
// Vector operands live in UB: TPosition VECIN / VECOUT / VECCALC
// (SIMD-API/通用说明和约束.md, 表1 TPosition与物理内存映射关系; every vector page:
// "支持的TPosition为VECIN、VECCALC、VECOUT").
inline void InUbPosition(const char *intr, const char *operand, bool isUb, const std::string &position, Src src)
{
    Require(isUb, intr, std::string(operand) + " must be a UB tensor (VECIN / VECOUT / VECCALC)",
            "position " + position, src);
}
// GM operands of DataCopy are aligned to the element size
// (DataCopy（GM与UB连续数据搬运）.md, 约束说明: "位于Global Memory的地址必须按照对应数据类型所占字节数对齐").
inline void GmElementAligned(const char *intr, uint64_t addr, uint64_t elemBytes, Src src)
{
    Require(elemBytes == 0 || addr % elemBytes == 0, intr, "GM address not aligned to the element size",
            "address " + N(addr) + ", element " + N(elemBytes) + " bytes", src);
}
// Within one instruction source and destination overlap 100% or not at all
// (SIMD-API/通用说明和约束.md, 通用地址重叠约束: "源操作数与目的操作数必须100%完全重叠，不支持部分重叠").
inline void NoPartialOverlap(const char *intr, const char *a, uint64_t aLo, uint64_t aBytes, const char *b,
                             uint64_t bLo, uint64_t bBytes, Src src)
{
    const bool disjoint = aLo + aBytes <= bLo || bLo + bBytes <= aLo;
    const bool same = aLo == bLo && aBytes == bBytes;
    Require(disjoint || same || aBytes == 0 || bBytes == 0, intr,
            std::string(a) + " and " + b + " overlap partially",
            std::string(a) + " UB " + N(aLo) + "+" + N(aBytes) + ", " + b + " UB " + N(bLo) + "+" + N(bBytes), src);
}

// The same rule for an instruction of the repeat form (高维切分), repeat by repeat (SIMD-API/通用说明和约束.md,
// 通用地址重叠约束): within a repeat a source and the destination overlap 100% or not at all ("单次迭代内：
// 源操作数与目的操作数必须100%完全重叠，不支持部分重叠"); across repeats no earlier repeat's destination may
// overlap a later repeat's source ("多次迭代间：不支持前序迭代的目的操作数与后序迭代的源操作数重叠"), except,
// for Add / Sub / Mul / Max / Min / AddRelu / SubRelu on half, int32_t and float, the second source when
// src1RepStride or dstRepStride is 0 (`accumulates`). A later repeat's destination over an earlier repeat's
// source is not restricted. Each repeat is given as its operand's byte ranges (one per block it touches,
// in order); a repeat's extent is its first to its last byte.
struct Span {
    uint64_t lo = 0, hi = 0;
};
// The instructions whose destination may overlap later repeats' second source (the exception above).
inline bool AccumulatesAcrossRepeats(const std::string &intr)
{
    return intr == "Add" || intr == "Sub" || intr == "Mul" || intr == "Max" || intr == "Min" || intr == "AddRelu" ||
           intr == "SubRelu";
}
inline void RepeatwiseOverlap(const char *intr, const std::vector<std::vector<Span>> &dst, const char *srcName,
                              const std::vector<std::vector<Span>> &src, bool accumulates, Src at)
{
    auto extent = [](const std::vector<Span> &r) {
        Span e{~0ull, 0};
        for (const Span &b : r) {
            if (b.hi > b.lo) {
                e.lo = std::min(e.lo, b.lo);
                e.hi = std::max(e.hi, b.hi);
            }
        }
        return e.hi > 0 ? e : Span{};
    };
    auto meets = [](const Span &a, const Span &b) { return a.lo < b.hi && b.lo < a.hi; };
    std::vector<Span> de(dst.size()), se(src.size());
    for (size_t r = 0; r < dst.size(); ++r) de[r] = extent(dst[r]);
    for (size_t r = 0; r < src.size(); ++r) se[r] = extent(src[r]);
    for (size_t r = 0; r < dst.size() && r < src.size(); ++r) {
        NoPartialOverlap(intr, "dst", de[r].lo, de[r].hi - de[r].lo, srcName, se[r].lo, se[r].hi - se[r].lo, at);
    }
    if (accumulates) return;
    for (size_t r = 0; r < dst.size(); ++r) {
        for (size_t l = r + 1; l < src.size(); ++l) {
            if (!meets(de[r], se[l])) continue;
            for (const Span &d : dst[r]) {
                for (const Span &s : src[l]) {
                    if (d.hi > d.lo && s.hi > s.lo && meets(d, s)) {
                        Require(false, intr, std::string("an earlier repeat's dst overlaps a later repeat's ") + srcName,
                                "repeat " + N(r) + " dst UB " + N(d.lo) + "+" + N(d.hi - d.lo) + ", repeat " + N(l) +
                                    " " + srcName + " UB " + N(s.lo) + "+" + N(s.hi - s.lo),
                                at);
                    }
                }
            }
        }
    }
}

// ---- vector instructions (SIMD-API/基础API/Memory矢量计算/SIMD计算说明/高维切分.md, 掩码.md) ----
// "由于硬件限制，repeatTime不能超过255".
inline void RepeatTimes(const char *intr, uint64_t repeat, Src src)
{
    Require(repeat <= 255, intr, "repeat times above 255", "repeat " + N(repeat), src);
}
// BinaryRepeatParams: block and repeat strides are uint8_t; UnaryRepeatParams: block
// strides uint16_t, repeat strides uint8_t (辅助数据结构/BinaryRepeatParams.md,
// UnaryRepeatParams.md). "dstBlkStride不支持设置为0" (高维切分.md).
inline void BlockStride(const char *intr, const char *operand, uint64_t stride, uint64_t maxStride, bool isDst, Src src)
{
    Require(stride <= maxStride, intr, std::string(operand) + " block stride above " + N(maxStride),
            "stride " + N(stride), src);
    Require(!isDst || stride != 0, intr, "destination block stride 0 (undefined)", "", src);
}
inline void RepeatStride(const char *intr, const char *operand, uint64_t stride, uint64_t maxStride, Src src)
{
    Require(stride <= maxStride, intr, std::string(operand) + " repeat stride above " + N(maxStride),
            "stride " + N(stride), src);
}
// Bytes a strided vector operand spans: repeat r, DataBlock b of the last
// active element, both strides in DataBlocks.
inline uint64_t StridedExtent(uint64_t repeat, uint64_t lastBlock, uint64_t blkStride, uint64_t repStride)
{
    if (repeat == 0) return 0;
    return ((repeat - 1) * repStride + lastBlock * blkStride + 1) * BLOCK;
}
// Mask words per element width (掩码.md and each vector page, "逐bit模式"):
// 16-bit elements use both words; 32-bit elements maskHigh = 0; 64-bit
// elements maskLow < 2^32 and maskHigh = 0; a continuous mask is at most
// 256 / sizeof(T) (larger values act as the maximum, so they are accepted).
inline void MaskWords(const char *intr, uint64_t elemBytes, uint64_t maskHigh, uint64_t maskLow, Src src)
{
    if (elemBytes >= 4) {
        Require(maskHigh == 0, intr, "mask high word must be 0 for " + N(elemBytes * 8) + "-bit elements",
                "mask[1] = " + N(maskHigh), src);
    }
    if (elemBytes == 8) {
        Require(maskLow >> 32 == 0, intr, "mask low word has bits beyond 32 for 64-bit elements",
                "mask[0] = " + N(maskLow), src);
    }
}
// Index of the last element a normal-mode mask enables in one repeat (-1: none).
inline int64_t LastMaskElement(uint64_t elemBytes, uint64_t maskHigh, uint64_t maskLow)
{
    const uint64_t per = REPEAT / elemBytes;
    for (int64_t e = int64_t(per) - 1; e >= 0; --e) {
        const bool on = e < 64 ? (maskLow >> e & 1) : (maskHigh >> (e - 64) & 1);
        if (on) return e;
    }
    return -1;
}
// calCount of the "前n个数据计算" forms: not negative, and all operands hold it.
inline void CalCount(const char *intr, int64_t count, Src src)
{
    Require(count >= 0, intr, "negative element count", "count " + std::to_string(count), src);
}

// Continuous-mode mask of the repeat forms (掩码.md, "连续模式": mask∈[0, 256 / sizeof(T)]; a larger
// value acts as the maximum, 0 is a NOP, "若设成了负值可能产生未定义行为").
inline void ContinuousMask(const char *intr, int64_t mask, Src src)
{
    Require(mask >= 0, intr, "negative continuous mask (undefined)", "mask " + std::to_string(mask), src);
}
// Elements a continuous mask enables in one repeat of `elemBytes` elements.
inline uint64_t MaskElems(int64_t mask, uint64_t elemBytes)
{
    const uint64_t per = REPEAT / elemBytes;
    return mask < 0 ? 0 : std::min<uint64_t>(uint64_t(mask), per);
}
// ReduceDataBlock / BlockReduceSum (a sum per block, ReduceDataBlock.md): ReduceRepeat's ranges; float not on
// Atlas training ("支持half"), as ReduceRepeat's; dst starts on a repeat's 8 results (16 bytes for half, 32
// for float, 表: dst "16字节对齐(针对half) / 32字节对齐(针对float)"), its repeat stride in such sets.
inline void BlockReduceParams(const char *intr, const Soc &soc, uint64_t elemBytes, int64_t repeat, int64_t dstRep,
                              int64_t srcBlk, int64_t srcRep, Src src)
{
    Require(repeat >= 0 && repeat <= 255, intr, "repeatTime outside [0, 255]", "repeatTime " + std::to_string(repeat),
            src);
    Require(dstRep >= 0 && dstRep <= 65535 && srcBlk >= 0 && srcBlk <= 65535 && srcRep >= 0 && srcRep <= 65535,
            intr, "stride outside [0, 65535]",
            "dstRepStride " + std::to_string(dstRep) + ", srcBlkStride " + std::to_string(srcBlk) +
                ", srcRepStride " + std::to_string(srcRep),
            src);
    Require(elemBytes == 2 || soc.hasReduceRepeat, intr, std::string("float not supported on ") + soc.name + " (half only)",
            "", src);
}
// ReduceRepeat<ReduceType::SUM> (WholeReduceSum) (归约计算/ReduceRepeat.md): repeatTime∈[0, 255];
// dstRepStride, srcBlkStride, srcRepStride∈[0, 2^16 - 1]; "Atlas 训练系列产品不支持配置0" for dstRepStride;
// half and float, float not on Atlas training (its "支持half"); dst aligned to its element (表3:
// SUM half 2 bytes, float 4 bytes), src 32 bytes (通用地址对齐约束).
inline void ReduceRepeatParams(const char *intr, const Soc &soc, uint64_t elemBytes, int64_t repeat,
                               int64_t dstRep, int64_t srcBlk, int64_t srcRep, Src src)
{
    BlockReduceParams(intr, soc, elemBytes, repeat, dstRep, srcBlk, srcRep, src);
    Require(!(soc.npuArch == 1001 && dstRep == 0), intr, std::string("dstRepStride 0 not supported on ") + soc.name,
            "", src);
}
inline void BlockReduceDst(const char *intr, uint64_t ubOffset, uint64_t elemBytes, Src src)
{
    Require(ubOffset % (8 * elemBytes) == 0, intr, "UB address of dst not aligned to a repeat's 8 results",
            "UB offset " + N(ubOffset), src);
}
// ReduceSum (归约计算/ReduceSum.md, 数据类型): "Atlas 训练系列产品，支持half" (float only on the other lines,
// the same SoCs as ReduceRepeat's float); so are the other sums of the folder on Atlas training
// (ReduceDataBlock.md / ReducePairElem.md: BlockReduceSum / PairReduceSum, "支持half").
inline void ReduceSumType(const char *intr, const Soc &soc, uint64_t elemBytes, Src src)
{
    Require(elemBytes == 2 || soc.hasReduceRepeat, intr, std::string("float not supported on ") + soc.name + " (half only)",
            "", src);
}
// Brcb (数据填充/Brcb.md): repeatTime∈[0, 255] (its uint8_t); dst and src 32-byte aligned; 16- and 32-bit
// types (bfloat16 not on Atlas inference); not on Atlas training; dstBlkStride 0 undefined; src and dst
// never the same memory ("不支持源操作数与目的操作数使用同一块内存地址"); the Atlas inference AI Core
// keeps 8 KB of UB free for the instruction ("需要预留8KB的Unified Buffer空间").
constexpr uint64_t BRCB_RESERVED_UB_310P = 8192;
inline void BrcbParams(const char *intr, const Soc &soc, uint64_t elemBytes, uint64_t dstBlkStride, uint64_t ubUsed,
                       Src src)
{
    Require(soc.npuArch != 1001, intr, std::string("not supported on ") + soc.name, "", src);
    Require(elemBytes == 2 || elemBytes == 4, intr, "16- or 32-bit elements only", "element " + N(elemBytes) + " bytes",
            src);
    Require(dstBlkStride != 0, intr, "dstBlkStride 0 (undefined)", "", src);
    if (soc.npuArch == 2002) {
        Require(ubUsed + BRCB_RESERVED_UB_310P <= soc.ubBytes, intr,
                "needs 8 KB of UB left free for its temporary data on " + std::string(soc.name),
                "UB in use " + N(ubUsed) + " of " + N(soc.ubBytes), src);
    }
}
// Gather (Memory矢量计算/离散与聚合/Gather.md): dst[i] = src[(srcBaseAddr + srcOffset[i]) / sizeof(T)];
// 产品支持情况: not on Atlas training (dav-c100), on the Atlas inference AI Core, A2, A3 and 950;
// 16- and 32-bit types on these lines (8-bit on the 950 only, and only in the count form); dst, src and
// srcOffset 32-byte aligned; srcBaseAddr and every offset multiples of sizeof(T) (约束说明: else "数据发生错位",
// no error on a board), the addressed element inside src (the headers' CPU check: srcBaseAddr below
// src's size; "偏移地址后不能超出UB大小数据的范围"); src and dst never the same memory; repeatTime∈[0, 255]
// with 8 DataBlocks a repeat; the count form is count / (256 / sizeof(T)) repeats in a uint8_t
// (kernel_operator_vec_gather_intf_impl.h), so count below 256 repeats.
inline void GatherParams(const char *intr, const Soc &soc, uint64_t elemBytes, uint64_t srcBaseAddr, uint64_t srcBytes,
                         Src src)
{
    Require(soc.npuArch != 1001, intr, std::string("not supported on ") + soc.name, "", src);
    Require(elemBytes == 2 || elemBytes == 4 || (elemBytes == 1 && soc.npuArch == 3510), intr,
            "16- or 32-bit elements only on " + std::string(soc.name), "element " + N(elemBytes) + " bytes", src);
    Require(srcBaseAddr % elemBytes == 0, intr, "srcBaseAddr not a multiple of the element size",
            "srcBaseAddr " + N(srcBaseAddr) + ", element " + N(elemBytes) + " bytes", src);
    Require(srcBaseAddr < srcBytes, intr, "srcBaseAddr outside src",
            "srcBaseAddr " + N(srcBaseAddr) + ", src " + N(srcBytes) + " bytes", src);
}
inline void GatherOffset(const char *intr, uint64_t i, uint64_t offset, uint64_t srcBaseAddr, uint64_t elemBytes,
                         uint64_t srcBytes, Src src)
{
    Require(offset % elemBytes == 0, intr, "srcOffset not a multiple of the element size",
            "srcOffset[" + N(i) + "] " + N(offset) + ", element " + N(elemBytes) + " bytes", src);
    Require(srcBaseAddr + offset + elemBytes <= srcBytes, intr, "srcOffset outside src",
            "srcBaseAddr " + N(srcBaseAddr) + " + srcOffset[" + N(i) + "] " + N(offset) + ", src " + N(srcBytes) +
                " bytes",
            src);
}
inline void GatherCount(const char *intr, uint64_t count, uint64_t elemBytes, Src src)
{
    Require(count / (REPEAT / elemBytes) <= 255, intr, "count above 255 repeats (the count form's uint8_t repeatTime)",
            "count " + N(count), src);
}
// Copy, masked repeat form (数据搬运/Copy（UBToUB掩码式高维数据搬运）.md): not on Atlas training / inference;
// 16- and 32-bit types; repeatTime∈[0, 255] (its uint8_t); CopyRepeatParams dstStride / srcStride∈[0, 65535],
// dstRepeatSize / srcRepeatSize∈[0, 4095] DataBlocks; both addresses 32-byte aligned.
inline void CopyRepeatSizes(const char *intr, uint64_t dstRepeatSize, uint64_t srcRepeatSize, Src src)
{
    Require(dstRepeatSize <= 4095 && srcRepeatSize <= 4095, intr, "repeat size above 4095 blocks",
            "dstRepeatSize " + N(dstRepeatSize) + ", srcRepeatSize " + N(srcRepeatSize), src);
}
inline void MaskedCopyParams(const char *intr, const Soc &soc, uint64_t elemBytes, uint64_t dstRepeatSize,
                             uint64_t srcRepeatSize, Src src)
{
    Require(soc.npuArch != 1001 && soc.npuArch != 2002, intr, std::string("not supported on ") + soc.name, "", src);
    Require(elemBytes == 2 || elemBytes == 4, intr, "16- or 32-bit elements only", "element " + N(elemBytes) + " bytes",
            src);
    CopyRepeatSizes(intr, dstRepeatSize, srcRepeatSize, src);
}

// ---- DataCopy (数据搬运/DataCopy（GM与UB连续数据搬运）.md, DataCopy（GM与UB高维切分数据搬运）.md) ----
// Count form: "count * sizeof(T)需要32字节对齐" (a board silently rounds the length down).
inline void CopyWholeBlocks(const char *intr, uint64_t bytes, Src src)
{
    Require(bytes % BLOCK == 0, intr, "length of " + N(bytes) + " bytes is not a multiple of 32 (use DataCopyPad)",
            "length " + N(bytes) + " bytes", src);
}
// DataCopyParams: blockCount∈[0, 4095]; blockLen∈[0, 65535] DataBlocks; srcGap / dstGap∈[0, 65535] DataBlocks.
inline void CopyParams(const char *intr, uint64_t blockCount, uint64_t blockLen, uint64_t srcGap, uint64_t dstGap,
                       Src src)
{
    Require(blockCount <= 4095, intr, "blockCount above 4095", "blockCount " + N(blockCount), src);
    Require(blockLen <= 65535, intr, "blockLen above 65535 blocks", "blockLen " + N(blockLen), src);
    Require(srcGap <= 65535 && dstGap <= 65535, intr, "stride above 65535 blocks",
            "srcStride " + N(srcGap) + ", dstStride " + N(dstGap), src);
}
// DataCopyPad (数据搬运/DataCopyPad（GMToUB非对齐数据搬运）.md, DataCopyPad（UBToGM非对齐数据搬运）.md):
// blockCount∈[0, 4095], blockLen∈[0, 2097151] bytes and a multiple of sizeof(T);
// leftPadding / rightPadding each at most 32 bytes.
inline void PadParams(const char *intr, uint64_t blockCount, uint64_t blockLen, uint64_t elemBytes, uint64_t left,
                      uint64_t right, Src src)
{
    Require(blockCount <= 4095, intr, "blockCount above 4095", "blockCount " + N(blockCount), src);
    Require(blockLen <= 2097151, intr, "blockLen above 2097151 bytes", "blockLen " + N(blockLen), src);
    Require(elemBytes == 0 || blockLen % elemBytes == 0, intr, "blockLen not a whole number of elements",
            "blockLen " + N(blockLen) + ", element " + N(elemBytes) + " bytes", src);
    Require(left * elemBytes <= BLOCK && right * elemBytes <= BLOCK, intr, "padding above 32 bytes",
            "leftPadding " + N(left) + ", rightPadding " + N(right) + " elements", src);
}
// The intrinsic fields the public headers hand the copy engine are narrow
// (uint16_t burst count / length / gaps): a value that does not fit is a
// wrap on a board, never a silent one here.
inline void FitsField(const char *intr, const char *field, uint64_t value, uint64_t maxValue, Src src)
{
    Require(value <= maxValue, intr, std::string(field) + " does not fit its " + N(maxValue) + "-max field",
            field + std::string(" ") + N(value), src);
}

// A value the kernel narrows into an API field (its own cast, bnb::Narrow of
// ascend_impl/op_kernel/batch_norm_kernel_narrow.h) must fit that field:
// reported at the kernel's call with the unnarrowed value, before it wraps.
template <typename To, typename From>
inline void Narrowing(const char *field, From value, Src src)
{
    static_assert(std::is_integral<To>::value && std::is_integral<From>::value, "integer narrowing only");
    const bool negative = std::is_signed<From>::value && value < 0;
    const bool fits = negative ? std::is_signed<To>::value &&
                                     static_cast<int64_t>(value) >= static_cast<int64_t>(std::numeric_limits<To>::min())
                               : static_cast<uint64_t>(value) <= static_cast<uint64_t>(std::numeric_limits<To>::max());
    Require(fits, field, "value does not fit the " + std::to_string(sizeof(To) * 8) + "-bit " +
                             (std::is_signed<To>::value ? "signed" : "unsigned") + " field it is cast to (it would wrap)",
            "value " + (negative ? std::to_string(static_cast<int64_t>(value)) : N(static_cast<uint64_t>(value))),
            src);
}

// ---- TPipe::InitBuffer (数据结构/TPipe/InitBuffer.md): all buffers of a core fit its UB ----
// `ubBytes` is the UB the launch was given (the tiling's GetCoreMemSize(UB)), `socUbBytes` the line's
// TOTAL_UB_SIZE: what lies above it is not the kernel's even where the UB is larger. On the 950
// (NPU架构版本3510.md, 存储单元: ASC_UB_SIZE = 248 x 1024 by default) the compiler keeps 6 KB for the SIMD
// VF stack and the APIs 2 KB, the space the repeat (高维切分) forms of Add, FusedMulAdd, ReduceRepeat, Copy,
// ... take ("tensor高维切分计算占用8KB Unified Buffer", 基础算术/Add.md, 归约计算/ReduceRepeat.md), and TPipe
// asserts every buffer below TMP_UB_OFFSET (dav_3510/kernel_tpipe_impl_c310.h).
inline void UbCapacity(const char *socName, uint64_t used, uint64_t more, uint64_t ubBytes, Src src,
                       uint64_t socUbBytes = UINT64_MAX)
{
    Require(used + more <= ubBytes, "InitBuffer",
            std::string("UB overflow on ") + socName + ": " + N(more) + " more bytes with " + N(used) + " of " +
                N(ubBytes) + " in use",
            "", src);
    Require(used + more <= socUbBytes, "InitBuffer",
            std::string("UB past TOTAL_UB_SIZE on ") + socName + ": " + N(used + more) + " of " +
                N(socUbBytes) + " bytes (the rest is reserved for the compiler and the APIs' temporary data)",
            "", src);
}

}  // namespace bnb_rules
#endif
