// DataCopy / DataCopyPad (CPU build). DataCopy moves whole 32-byte blocks
// only; an unaligned length is an error (DataCopyPad is the way, on SoCs
// that have it).
#ifndef BNB_SIM_COPY_H
#define BNB_SIM_COPY_H
#include <string>
#include "sim_tensor.h"

namespace AscendC {

constexpr uint16_t DEFAULT_DATA_COPY_NBURST = 1;
constexpr uint16_t DEFAULT_DATA_COPY_STRIDE = 0;

// blockLen, srcStride, dstStride in 32-byte blocks.
struct DataCopyParams {
    DataCopyParams() {}
    DataCopyParams(const uint16_t count, const uint16_t len, const uint16_t srcStrideIn, const uint16_t dstStrideIn)
        : blockCount(count), blockLen(len), srcStride(srcStrideIn), dstStride(dstStrideIn) {}
    uint16_t blockCount = DEFAULT_DATA_COPY_NBURST;
    uint16_t blockLen = 0;
    uint16_t srcStride = DEFAULT_DATA_COPY_STRIDE;
    uint16_t dstStride = DEFAULT_DATA_COPY_STRIDE;
};

// blockLen in bytes; the GM-side stride in bytes, the UB-side stride in 32-byte blocks.
struct DataCopyExtParams {
    DataCopyExtParams() {}
    DataCopyExtParams(const uint16_t count, const uint32_t len, const uint32_t srcStrideIn, const uint32_t dstStrideIn,
                      const uint32_t rsvIn)
        : blockCount(count), blockLen(len), srcStride(srcStrideIn), dstStride(dstStrideIn), rsv(rsvIn) {}
    uint16_t blockCount = DEFAULT_DATA_COPY_NBURST;
    uint32_t blockLen = 0;
    uint32_t srcStride = DEFAULT_DATA_COPY_STRIDE;
    uint32_t dstStride = DEFAULT_DATA_COPY_STRIDE;
    uint32_t rsv = 0;
};

template <typename T>
struct DataCopyPadExtParams {
    DataCopyPadExtParams() {}
    DataCopyPadExtParams(const bool isPadValue, const uint8_t leftPadValue, const uint8_t rightPadValue, T padValue)
        : isPad(isPadValue), leftPadding(leftPadValue), rightPadding(rightPadValue), paddingValue(padValue) {}
    bool isPad = false;
    uint8_t leftPadding = 0;
    uint8_t rightPadding = 0;
    T paddingValue = 0;
};

namespace sim {
using bnb_rules::Src;
inline uint32_t AlignBlk(uint64_t bytes) { return static_cast<uint32_t>((bytes + ONE_BLK_SIZE - 1) / ONE_BLK_SIZE * ONE_BLK_SIZE); }

inline void CheckPadAvailable(Src src)
{
    SimCheck(SimThisCore().soc.hasDataCopyPad,
             std::string("DataCopyPad is not available on ") + SimThisCore().soc.name, src);
}

// Bytes spanned by `count` blocks of `blockBytes`, `gapBytes` apart.
inline uint64_t Span(uint64_t count, uint64_t blockBytes, uint64_t gapBytes)
{
    return count == 0 ? 0 : (count - 1) * (blockBytes + gapBytes) + blockBytes;
}
template <typename T>
uint64_t Elems(uint64_t bytes) { return (bytes + sizeof(T) - 1) / sizeof(T); }

// The pipe of a copy and its operands' ranges, for the hazard trackers.
template <typename T>
bnb_hazards::Range Rng(const LocalTensor<T> &t, uint64_t bytes) { return t.SimRange(Elems<T>(bytes)); }
template <typename T>
T *Gm(const GlobalTensor<T> &g, uint64_t bytes, const char *op, Src src)
{
    T *p = g.SimPtr(Elems<T>(bytes), op, src);
    bnb_rules::GmElementAligned(op, reinterpret_cast<uint64_t>(p), sizeof(T), src);
    return p;
}
inline bnb_hazards::Range GmRng(const void *p, uint64_t bytes)
{
    const auto a = reinterpret_cast<uint64_t>(p);
    return {bnb_hazards::Space::GM, a, a + bytes};
}
// Records one copy with the core's pipes and (its GM side) the launch's GM tracker.
using Ranges = std::vector<bnb_hazards::Range>;
// `data`: the bytes stored to the first write range's start (GM writes), laid out as the ranges are.
inline void Record(int pipe, const char *op, Src src, const Ranges &reads, const Ranges &writes,
                   const std::vector<const uint8_t *> &data = {})
{
    const bnb_hazards::Instr in{op, src, pipe};
    SimThisCore().pipes.Op(pipe, in, reads, writes);
    for (const auto &r : reads) {
        if (r.space == bnb_hazards::Space::GM) {
            SimThisCore().Gm().Access(SimThisCore().blockIdx, SimThisCore().epoch, in, r, false);
        }
    }
    for (size_t i = 0; i < writes.size(); ++i) {
        if (writes[i].space == bnb_hazards::Space::GM) {
            SimThisCore().Gm().Access(SimThisCore().blockIdx, SimThisCore().epoch, in, writes[i], true,
                                      i < data.size() ? data[i] : nullptr);
        }
    }
}
inline void Record(int pipe, const char *op, Src src, const bnb_hazards::Range &read, const bnb_hazards::Range &write,
                   const uint8_t *data = nullptr)
{
    Record(pipe, op, src, Ranges{read}, Ranges{write}, {data});
}
// Start of each UB block a strided copy stores to GM.
inline std::vector<const uint8_t *> Sources(const uint8_t *base, uint64_t count, uint64_t step)
{
    std::vector<const uint8_t *> out;
    for (uint64_t i = 0; i < count; ++i) out.push_back(base + i * step);
    return out;
}
// The blocks of a strided copy: `count` blocks of `blockBytes` from `base`, `gapBytes` apart.
inline Ranges Blocks(bnb_hazards::Space space, uint64_t base, uint64_t count, uint64_t blockBytes, uint64_t gapBytes)
{
    Ranges out;
    for (uint64_t i = 0; i < count; ++i) {
        const uint64_t lo = base + i * (blockBytes + gapBytes);
        out.push_back({space, lo, lo + blockBytes});
    }
    return out;
}
inline uint64_t Addr(const void *p) { return reinterpret_cast<uint64_t>(p); }
template <typename T>
uint64_t UbOff(const LocalTensor<T> &t) { return t.SimRange(0).lo; }
}  // namespace sim

// ---- DataCopy, count form: count * sizeof(T) whole 32-byte blocks ----
template <typename T>
void DataCopy(const LocalTensor<T> &dst, const GlobalTensor<T> &src, const uint32_t count,
              bnb_rules::Src at = bnb_rules::Here())
{
    const char *op = "DataCopy GM->UB";
    const uint64_t bytes = uint64_t(count) * sizeof(T);
    bnb_rules::CopyWholeBlocks(op, bytes, at);
    bnb_rules::CopyParams(op, 1, bytes / ONE_BLK_SIZE, 0, 0, at);
    T *d = dst.SimPtr(count, op, true, at, "dst");
    const T *s = sim::Gm(src, bytes, op, at);
    sim::Record(bnb_hazards::MTE2, op, at, sim::GmRng(s, bytes), dst.SimRange(count));
    perf::Copy(true, s, 1, bytes);
    if (perf::SkipData()) return;
    std::memcpy(d, s, bytes);
}

template <typename T>
void DataCopy(const GlobalTensor<T> &dst, const LocalTensor<T> &src, const uint32_t count,
              bnb_rules::Src at = bnb_rules::Here())
{
    const char *op = "DataCopy UB->GM";
    const uint64_t bytes = uint64_t(count) * sizeof(T);
    bnb_rules::CopyWholeBlocks(op, bytes, at);
    bnb_rules::CopyParams(op, 1, bytes / ONE_BLK_SIZE, 0, 0, at);
    const T *s = src.SimPtr(count, op, true, at, "src");
    T *d = sim::Gm(dst, bytes, op, at);
    sim::Record(bnb_hazards::MTE3, op, at, src.SimRange(count), sim::GmRng(d, bytes),
                reinterpret_cast<const uint8_t *>(s));
    perf::Copy(false, d, 1, bytes);
    if (perf::SkipData()) return;
    std::memcpy(d, s, bytes);
}

// UB -> UB (copy_ubuf_to_ubuf) is taken to run on the vector pipe (not stated on
// DataCopy（UBToUB连续数据搬运）.md; the model orders it like a vector instruction).
template <typename T>
void DataCopy(const LocalTensor<T> &dst, const LocalTensor<T> &src, const uint32_t count,
              bnb_rules::Src at = bnb_rules::Here())
{
    const char *op = "DataCopy UB->UB";
    const uint64_t bytes = uint64_t(count) * sizeof(T);
    bnb_rules::CopyWholeBlocks(op, bytes, at);
    bnb_rules::CopyParams(op, 1, bytes / ONE_BLK_SIZE, 0, 0, at);
    T *d = dst.SimPtr(count, op, true, at, "dst");
    const T *s = src.SimPtr(count, op, true, at, "src");
    bnb_rules::NoPartialOverlap(op, "dst", dst.SimRange(count).lo, bytes, "src", src.SimRange(count).lo, bytes, at);
    sim::Record(bnb_hazards::V, op, at, src.SimRange(count), dst.SimRange(count));
    perf::Vector(count, sizeof(T));
    if (perf::SkipData()) return;
    std::memmove(d, s, bytes);
}

// ---- DataCopy, strided blocks (all units 32 bytes) ----
namespace sim {
// A strided copy's checked fields: bytes per block, and the bytes its destination / source span
// (blockCount runs of blockLen blocks, dstStride / srcStride blocks between runs).
struct Strided {
    uint64_t blk, dstSpan, srcSpan;
};
inline Strided StridedOf(const char *op, const DataCopyParams &p, Src at)
{
    bnb_rules::CopyParams(op, p.blockCount, p.blockLen, p.srcStride, p.dstStride, at);
    const uint64_t blk = uint64_t(p.blockLen) * ONE_BLK_SIZE;
    return {blk, Span(p.blockCount, blk, uint64_t(p.dstStride) * ONE_BLK_SIZE),
            Span(p.blockCount, blk, uint64_t(p.srcStride) * ONE_BLK_SIZE)};
}
// The blocks of its destination (dstSide) or source side from `base`.
inline Ranges SideBlocks(bnb_hazards::Space space, uint64_t base, const DataCopyParams &p, uint64_t blk, bool dstSide)
{
    return Blocks(space, base, p.blockCount, blk, uint64_t(dstSide ? p.dstStride : p.srcStride) * ONE_BLK_SIZE);
}
inline void MoveBlocks(uint8_t *d, const uint8_t *s, const DataCopyParams &p, uint64_t blk)
{
    for (uint16_t i = 0; i < p.blockCount; ++i) {
        std::memmove(d + i * (blk + p.dstStride * ONE_BLK_SIZE), s + i * (blk + p.srcStride * ONE_BLK_SIZE), blk);
    }
}
}  // namespace sim

// UB -> UB (DataCopy（UBToUB高维切分数据搬运）.md): the vector pipe, as the count form.
template <typename T>
void DataCopy(const LocalTensor<T> &dst, const LocalTensor<T> &src, const DataCopyParams &p,
              bnb_rules::Src at = bnb_rules::Here())
{
    const char *op = "DataCopy UB->UB";
    const sim::Strided c = sim::StridedOf(op, p, at);
    uint8_t *d = reinterpret_cast<uint8_t *>(dst.SimPtr(sim::Elems<T>(c.dstSpan), op, true, at, "dst"));
    const uint8_t *s = reinterpret_cast<const uint8_t *>(src.SimPtr(sim::Elems<T>(c.srcSpan), op, true, at, "src"));
    const sim::Ranges reads = sim::SideBlocks(bnb_hazards::Space::UB, sim::UbOff(src), p, c.blk, false);
    const sim::Ranges writes = sim::SideBlocks(bnb_hazards::Space::UB, sim::UbOff(dst), p, c.blk, true);
    for (const auto &w : writes) {
        for (const auto &r : reads) {
            bnb_rules::NoPartialOverlap(op, "dst", w.lo, w.hi - w.lo, "src", r.lo, r.hi - r.lo, at);
        }
    }
    sim::Record(bnb_hazards::V, op, at, reads, writes);
    perf::Vector(uint64_t(p.blockCount) * c.blk / sizeof(T), sizeof(T));
    if (perf::SkipData()) return;
    sim::MoveBlocks(d, s, p, c.blk);
}

template <typename T>
void DataCopy(const LocalTensor<T> &dst, const GlobalTensor<T> &src, const DataCopyParams &p,
              bnb_rules::Src at = bnb_rules::Here())
{
    const char *op = "DataCopy GM->UB";
    const sim::Strided c = sim::StridedOf(op, p, at);
    uint8_t *d = reinterpret_cast<uint8_t *>(dst.SimPtr(sim::Elems<T>(c.dstSpan), op, true, at, "dst"));
    const uint8_t *s = reinterpret_cast<const uint8_t *>(sim::Gm(src, c.srcSpan, op, at));
    sim::Record(bnb_hazards::MTE2, op, at, sim::SideBlocks(bnb_hazards::Space::GM, sim::Addr(s), p, c.blk, false),
                sim::SideBlocks(bnb_hazards::Space::UB, sim::UbOff(dst), p, c.blk, true));
    perf::Copy(true, s, p.blockCount, c.blk);
    if (perf::SkipData()) return;
    sim::MoveBlocks(d, s, p, c.blk);
}

template <typename T>
void DataCopy(const GlobalTensor<T> &dst, const LocalTensor<T> &src, const DataCopyParams &p,
              bnb_rules::Src at = bnb_rules::Here())
{
    const char *op = "DataCopy UB->GM";
    const sim::Strided c = sim::StridedOf(op, p, at);
    const uint8_t *s = reinterpret_cast<const uint8_t *>(src.SimPtr(sim::Elems<T>(c.srcSpan), op, true, at, "src"));
    uint8_t *d = reinterpret_cast<uint8_t *>(sim::Gm(dst, c.dstSpan, op, at));
    sim::Record(bnb_hazards::MTE3, op, at, sim::SideBlocks(bnb_hazards::Space::UB, sim::UbOff(src), p, c.blk, false),
                sim::SideBlocks(bnb_hazards::Space::GM, sim::Addr(d), p, c.blk, true),
                sim::Sources(s, p.blockCount, c.blk + uint64_t(p.srcStride) * ONE_BLK_SIZE));
    perf::Copy(false, d, p.blockCount, c.blk);
    if (perf::SkipData()) return;
    sim::MoveBlocks(d, s, p, c.blk);
}

// ---- DataCopyPad: any byte length; each block starts 32-byte aligned in UB ----
template <typename T>
void DataCopyPad(const LocalTensor<T> &dst, const GlobalTensor<T> &src, const DataCopyExtParams &p,
                 const DataCopyPadExtParams<T> &pad, bnb_rules::Src at = bnb_rules::Here())
{
    const char *op = "DataCopyPad GM->UB";
    sim::CheckPadAvailable(at);
    const uint64_t lp = pad.isPad ? pad.leftPadding : 0, rp = pad.isPad ? pad.rightPadding : 0;
    bnb_rules::PadParams(op, p.blockCount, p.blockLen, sizeof(T), pad.leftPadding, pad.rightPadding, at);
    const uint64_t span = sim::AlignBlk(p.blockLen + (lp + rp) * sizeof(T));
    const uint64_t ubSpan = sim::Span(p.blockCount, span, uint64_t(p.dstStride) * ONE_BLK_SIZE);
    const uint64_t gmSpan = sim::Span(p.blockCount, p.blockLen, p.srcStride);
    uint8_t *d = reinterpret_cast<uint8_t *>(dst.SimPtr(sim::Elems<T>(ubSpan), op, true, at, "dst"));
    const uint8_t *s = reinterpret_cast<const uint8_t *>(src.SimPtr(sim::Elems<T>(gmSpan), op, at));
    sim::Record(bnb_hazards::MTE2, op, at, sim::Blocks(bnb_hazards::Space::GM, sim::Addr(s), p.blockCount, p.blockLen, p.srcStride),
                sim::Blocks(bnb_hazards::Space::UB, sim::UbOff(dst), p.blockCount, span,
                            uint64_t(p.dstStride) * ONE_BLK_SIZE));
    perf::Copy(true, s, p.blockCount, p.blockLen, p.srcStride);
    if (perf::SkipData()) return;
    for (uint16_t i = 0; i < p.blockCount; ++i) {
        uint8_t *blk = d + i * (span + uint64_t(p.dstStride) * ONE_BLK_SIZE);
        std::memset(blk, 0xFF, span);  // unspecified contents: NaN garbage unless padded
        T *e = reinterpret_cast<T *>(blk);
        for (uint64_t k = 0; k < lp; ++k) {
            e[k] = pad.paddingValue;
        }
        std::memcpy(blk + lp * sizeof(T), s + i * (uint64_t(p.blockLen) + p.srcStride), p.blockLen);
        for (uint64_t k = 0; k < rp; ++k) {
            e[lp + p.blockLen / sizeof(T) + k] = pad.paddingValue;
        }
    }
}

template <typename T>
void DataCopyPad(const GlobalTensor<T> &dst, const LocalTensor<T> &src, const DataCopyExtParams &p,
                 bnb_rules::Src at = bnb_rules::Here())
{
    const char *op = "DataCopyPad UB->GM";
    sim::CheckPadAvailable(at);
    bnb_rules::PadParams(op, p.blockCount, p.blockLen, sizeof(T), 0, 0, at);
    const uint64_t span = sim::AlignBlk(p.blockLen);
    const uint64_t ubSpan = sim::Span(p.blockCount, span, uint64_t(p.srcStride) * ONE_BLK_SIZE);
    const uint64_t gmSpan = sim::Span(p.blockCount, p.blockLen, p.dstStride);
    const uint8_t *s = reinterpret_cast<const uint8_t *>(src.SimPtr(sim::Elems<T>(ubSpan), op, true, at, "src"));
    uint8_t *d = reinterpret_cast<uint8_t *>(dst.SimPtr(sim::Elems<T>(gmSpan), op, at));
    sim::Record(bnb_hazards::MTE3, op, at,
                sim::Blocks(bnb_hazards::Space::UB, sim::UbOff(src), p.blockCount, p.blockLen,
                            span - p.blockLen + uint64_t(p.srcStride) * ONE_BLK_SIZE),
                sim::Blocks(bnb_hazards::Space::GM, sim::Addr(d), p.blockCount, p.blockLen, p.dstStride),
                sim::Sources(s, p.blockCount, span + uint64_t(p.srcStride) * ONE_BLK_SIZE));
    perf::Copy(false, d, p.blockCount, p.blockLen, p.dstStride);
    if (perf::SkipData()) return;
    for (uint16_t i = 0; i < p.blockCount; ++i) {
        std::memcpy(d + i * (uint64_t(p.blockLen) + p.dstStride), s + i * (span + uint64_t(p.srcStride) * ONE_BLK_SIZE),
                    p.blockLen);
    }
}

}  // namespace AscendC
#endif
