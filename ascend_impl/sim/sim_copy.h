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
inline uint32_t AlignBlk(uint64_t bytes) { return static_cast<uint32_t>((bytes + ONE_BLK_SIZE - 1) / ONE_BLK_SIZE * ONE_BLK_SIZE); }

inline void CheckBlocks(uint64_t bytes, const char *op)
{
    SimCheck(bytes % ONE_BLK_SIZE == 0, std::string(op) + ": length of " + std::to_string(bytes) +
                                            " bytes is not a multiple of 32 (use DataCopyPad)");
}

inline void CheckPadAvailable()
{
    SimCheck(SimThisCore().soc.hasDataCopyPad,
             std::string("DataCopyPad is not available on ") + SimThisCore().soc.name);
}

template <typename T>
uint64_t GmExtent(uint16_t count, uint64_t blockBytes, uint64_t strideBytes)
{
    uint64_t bytes = count == 0 ? 0 : (count - 1) * (blockBytes + strideBytes) + blockBytes;
    return (bytes + sizeof(T) - 1) / sizeof(T);
}

template <typename T>
uint64_t UbExtent(uint16_t count, uint64_t blockSpan, uint64_t gapBytes)
{
    uint64_t bytes = count == 0 ? 0 : (count - 1) * (blockSpan + gapBytes) + blockSpan;
    return (bytes + sizeof(T) - 1) / sizeof(T);
}
}  // namespace sim

// ---- DataCopy, count form ----
template <typename T>
void DataCopy(const LocalTensor<T> &dst, const GlobalTensor<T> &src, const uint32_t count)
{
    sim::CheckBlocks(uint64_t(count) * sizeof(T), "DataCopy GM->UB");
    perf::Copy(true, src.SimPtr(count, "DataCopy GM->UB"), 1, uint64_t(count) * sizeof(T));
    if (perf::SkipData()) return;
    std::memcpy(dst.SimPtr(count, "DataCopy GM->UB"), src.SimPtr(count, "DataCopy GM->UB"), count * sizeof(T));
}

template <typename T>
void DataCopy(const GlobalTensor<T> &dst, const LocalTensor<T> &src, const uint32_t count)
{
    sim::CheckBlocks(uint64_t(count) * sizeof(T), "DataCopy UB->GM");
    perf::Copy(false, dst.SimPtr(count, "DataCopy UB->GM"), 1, uint64_t(count) * sizeof(T));
    if (perf::SkipData()) return;
    std::memcpy(dst.SimPtr(count, "DataCopy UB->GM"), src.SimPtr(count, "DataCopy UB->GM"), count * sizeof(T));
}

template <typename T>
void DataCopy(const LocalTensor<T> &dst, const LocalTensor<T> &src, const uint32_t count)
{
    sim::CheckBlocks(uint64_t(count) * sizeof(T), "DataCopy UB->UB");
    perf::Vector(count, sizeof(T));
    if (perf::SkipData()) return;
    std::memmove(dst.SimPtr(count, "DataCopy UB->UB"), src.SimPtr(count, "DataCopy UB->UB"), count * sizeof(T));
}

// ---- DataCopy, strided blocks (all units 32 bytes) ----
namespace sim {
// Bytes a strided copy spans in UB / GM (the UB side must also be block-aligned).
template <typename T>
uint64_t Extent(const LocalTensor<T> &, uint16_t n, uint64_t blk, uint64_t gap) { return UbExtent<T>(n, blk, gap); }
template <typename T>
uint64_t Extent(const GlobalTensor<T> &, uint16_t n, uint64_t blk, uint64_t gap) { return GmExtent<T>(n, blk, gap); }

// p.blockCount runs of p.blockLen blocks, gaps of p.srcStride / p.dstStride blocks.
template <typename D, typename S>
void CopyStridedBlocks(const D &dst, const S &src, const DataCopyParams &p, const char *what)
{
    const uint64_t blk = uint64_t(p.blockLen) * ONE_BLK_SIZE;
    uint8_t *d = reinterpret_cast<uint8_t *>(
        dst.SimPtr(Extent(dst, p.blockCount, blk, p.dstStride * ONE_BLK_SIZE), what));
    const uint8_t *s = reinterpret_cast<const uint8_t *>(
        src.SimPtr(Extent(src, p.blockCount, blk, p.srcStride * ONE_BLK_SIZE), what));
    perf::Copy(perf::IsLocal<D>::value, perf::IsLocal<D>::value ? static_cast<const void *>(s) : d, p.blockCount, blk);
    if (perf::SkipData()) return;
    for (uint16_t i = 0; i < p.blockCount; ++i) {
        std::memcpy(d + i * (blk + p.dstStride * ONE_BLK_SIZE), s + i * (blk + p.srcStride * ONE_BLK_SIZE), blk);
    }
}
}  // namespace sim

template <typename T>
void DataCopy(const LocalTensor<T> &dst, const GlobalTensor<T> &src, const DataCopyParams &p)
{
    sim::CopyStridedBlocks(dst, src, p, "DataCopy GM->UB");
}

template <typename T>
void DataCopy(const GlobalTensor<T> &dst, const LocalTensor<T> &src, const DataCopyParams &p)
{
    sim::CopyStridedBlocks(dst, src, p, "DataCopy UB->GM");
}

// ---- DataCopyPad: any byte length; each block starts 32-byte aligned in UB ----
template <typename T>
void DataCopyPad(const LocalTensor<T> &dst, const GlobalTensor<T> &src, const DataCopyExtParams &p,
                 const DataCopyPadExtParams<T> &pad)
{
    sim::CheckPadAvailable();
    SimCheck(p.blockLen % sizeof(T) == 0, "DataCopyPad: blockLen not a whole number of elements");
    const uint64_t lp = pad.isPad ? pad.leftPadding : 0, rp = pad.isPad ? pad.rightPadding : 0;
    SimCheck((lp + rp) * sizeof(T) <= ONE_BLK_SIZE, "DataCopyPad: padding above 32 bytes");
    const uint64_t span = sim::AlignBlk(p.blockLen + (lp + rp) * sizeof(T));
    uint8_t *d = reinterpret_cast<uint8_t *>(
        dst.SimPtr(sim::UbExtent<T>(p.blockCount, span, uint64_t(p.dstStride) * ONE_BLK_SIZE), "DataCopyPad GM->UB"));
    const uint8_t *s = reinterpret_cast<const uint8_t *>(
        src.SimPtr(sim::GmExtent<T>(p.blockCount, p.blockLen, p.srcStride), "DataCopyPad GM->UB"));
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
void DataCopyPad(const GlobalTensor<T> &dst, const LocalTensor<T> &src, const DataCopyExtParams &p)
{
    sim::CheckPadAvailable();
    SimCheck(p.blockLen % sizeof(T) == 0, "DataCopyPad: blockLen not a whole number of elements");
    const uint64_t span = sim::AlignBlk(p.blockLen);
    uint8_t *d = reinterpret_cast<uint8_t *>(
        dst.SimPtr(sim::GmExtent<T>(p.blockCount, p.blockLen, p.dstStride), "DataCopyPad UB->GM"));
    const uint8_t *s = reinterpret_cast<const uint8_t *>(
        src.SimPtr(sim::UbExtent<T>(p.blockCount, span, uint64_t(p.srcStride) * ONE_BLK_SIZE), "DataCopyPad UB->GM"));
    perf::Copy(false, d, p.blockCount, p.blockLen, p.dstStride);
    if (perf::SkipData()) return;
    for (uint16_t i = 0; i < p.blockCount; ++i) {
        std::memcpy(d + i * (uint64_t(p.blockLen) + p.dstStride), s + i * (span + uint64_t(p.srcStride) * ONE_BLK_SIZE),
                    p.blockLen);
    }
}

}  // namespace AscendC
#endif
