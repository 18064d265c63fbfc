// GM <-> UB copies and the float casts of the BatchNormBackward kernels.
//
// In one launch (flow: batch_norm_backward_kernel.h) every tile of grad_out /
// input / grad_input, every channel vector and every partial sum moves through
// GmUbCopy; the layout strategies (batch_norm_kernel_channel_first.h,
// _channel_last.h, _flat.h) only compute on what it brought into UB, as float.
//
// A row that is not whole 32-byte blocks moves one of two ways:
// - DataCopyPad (Atlas A2 / A3 / 350; tiling `usePad`): exact rows, GM and UB
//   strides given to the copy.
// - whole-block DataCopy only (ascend910 / ascend310p, where the DataCopyPad
//   calls are compiled out): a read takes the block past the row end when it
//   lies inside the tensor, else the block that ends at the tensor end (the
//   tail moved into place with scalar copies); a write copies the row's whole
//   blocks, then the block that ends exactly at the row end (gathered in a
//   one-block scratch), so it only covers elements the writer owns or
//   recomputes bit-identically. Shorter than one block: scalar stores.
#ifndef BATCH_NORM_KERNEL_COPY_H
#define BATCH_NORM_KERNEL_COPY_H
#include "kernel_operator.h"
#include "batch_norm_backward_tiling.h"
#include "batch_norm_soc_features.h"
#include "batch_norm_kernel_narrow.h"

namespace bnb {

using AscendC::GlobalTensor;
using AscendC::LocalTensor;

template <typename A, typename B>
struct IsSame {
    static constexpr bool value = false;
};
template <typename A>
struct IsSame<A, A> {
    static constexpr bool value = true;
};

// Rounding of float -> T. float -> half takes CAST_NONE, which rounds to
// nearest even when precision is lost (the only float -> half mode of
// dav-c100 / dav-m200: CAST_RINT is refused there); float -> bfloat16 says
// CAST_RINT explicitly.
template <typename T>
__aicore__ inline constexpr AscendC::RoundMode NarrowRound()
{
    return IsSame<T, bfloat16_t>::value ? AscendC::RoundMode::CAST_RINT : AscendC::RoundMode::CAST_NONE;
}

// n elements of T -> float (a plain copy for float).
template <typename T>
__aicore__ inline void ToFloat(const LocalTensor<float> &dst, const LocalTensor<T> &src, uint32_t n)
{
    if constexpr (IsSame<T, float>::value) {
        AscendC::DataCopy(dst, src, n);
    } else {
        AscendC::Cast(dst, src, AscendC::RoundMode::CAST_NONE, n);
    }
}

// n floats -> T, rounded by NarrowRound (a plain copy for float).
template <typename T>
__aicore__ inline void FromFloat(const LocalTensor<T> &dst, const LocalTensor<float> &src, uint32_t n)
{
    if constexpr (IsSame<T, float>::value) {
        AscendC::DataCopy(dst, src, n);
    } else {
        AscendC::Cast(dst, src, NarrowRound<T>(), n);
    }
}

// The copies of one launch; owns the one-block scratch of the whole-block tails.
class GmUbCopy {
public:
    __aicore__ inline void Init(AscendC::TPipe &pipe, uint32_t scratchBytes, bool usePad, bool hasDcci,
                                bool vecPad)
    {
        pipe.InitBuffer(scratch_, scratchBytes);
        usePad_ = usePad;
        hasDcci_ = hasDcci;
        vecPad_ = vecPad;
    }

    // Writes scalar GM stores back to GM (where DataCacheCleanAndInvalid exists).
    template <typename U>
    __aicore__ inline void Flush(const GlobalTensor<U> &gm)
    {
        (void)gm;
#if BNB_SOC_HAS_DCCI
        if (hasDcci_) {
            AscendC::DataCacheCleanAndInvalid<U, AscendC::CacheLine::ENTIRE_DATA_CACHE,
                                              AscendC::DcciDst::CACHELINE_OUT>(gm);
        }
#endif
    }

    // UB dst[0, cols) = GM src[off, off + cols) exactly, with whole blocks only
    // (never reading at or past `limit`, the tensor's element count).
    template <typename U>
    __aicore__ inline void InRow(const LocalTensor<U> &dst, const GlobalTensor<U> &src, uint64_t off, uint32_t cols,
                                 uint64_t limit)
    {
        const uint32_t perBlock = BLOCK_BYTES / sizeof(U);
        const uint32_t full = cols / perBlock * perBlock;
        if (full > 0) {
            AscendC::DataCopy(dst, src[off], full);
        }
        const uint32_t tail = cols - full;
        if (tail == 0) {
            return;
        }
        const uint64_t ts = off + full;
        if (ts + perBlock <= limit) {
            AscendC::DataCopy(dst[full], src[ts], perBlock);  // the block past the row end is inside the tensor
            return;
        }
        AscendC::PipeBarrier<PIPE_ALL>();
        if (limit >= perBlock) {
            const uint64_t bs = limit - perBlock;  // the block ending at the tensor end
            LocalTensor<U> scratch = scratch_.Get<U>();
            AscendC::DataCopy(scratch, src[bs], perBlock);
            AscendC::PipeBarrier<PIPE_ALL>();
            for (uint32_t j = 0; j < tail; ++j) {
                dst.SetValue(full + j, scratch.GetValue(uint32_t(ts - bs) + j));
            }
        } else {
            for (uint32_t j = 0; j < tail; ++j) {  // tensor smaller than one block
                dst.SetValue(full + j, src.GetValue(ts + j));
            }
        }
        AscendC::PipeBarrier<PIPE_ALL>();
    }

    // GM dst[off, off + cols) = UB src[0, cols) exactly; every block written
    // lies inside [off, off + cols).
    template <typename U>
    __aicore__ inline void OutRow(GlobalTensor<U> dst, const LocalTensor<U> &src, uint64_t off, uint32_t cols)
    {
        const uint32_t perBlock = BLOCK_BYTES / sizeof(U);
        const uint32_t full = cols / perBlock * perBlock;
        if (full > 0) {
            AscendC::DataCopy(dst[off], src, full);
        }
        const uint32_t tail = cols - full;
        if (tail == 0) {
            return;
        }
        AscendC::PipeBarrier<PIPE_ALL>();
        if (cols >= perBlock) {
            LocalTensor<U> scratch = scratch_.Get<U>();
            for (uint32_t j = 0; j < perBlock; ++j) {
                scratch.SetValue(j, src.GetValue(cols - perBlock + j));
            }
            AscendC::PipeBarrier<PIPE_ALL>();
            AscendC::DataCopy(dst[off + cols - perBlock], scratch, perBlock);
        } else {
            // Shorter than one block: the whole tensor / vector is this small and
            // has a single writer core; scalar stores, then flush the data cache.
            for (uint32_t j = 0; j < cols; ++j) {
                dst.SetValue(off + j, src.GetValue(j));
            }
            Flush(dst);
        }
        AscendC::PipeBarrier<PIPE_ALL>();
    }

    // `rows` rows of `cols` elements: GM rows gmStride apart -> UB rows ubStride apart.
    // `vector`: a per-channel vector, moved with DataCopyPad wherever the SoC has
    // it (a core's few channels of a vector: no scalar GM stores, no tails).
    template <typename U>
    __aicore__ inline void In(const LocalTensor<U> &dst, const GlobalTensor<U> &src, uint64_t off, uint32_t rows,
                              uint32_t cols, uint64_t gmStride, uint32_t ubStride, uint64_t limit, bool vector = false)
    {
#if BNB_SOC_HAS_DATA_COPY_PAD
        if (usePad_ || (vector && vecPad_)) {
            const uint64_t gapBytes = (gmStride - cols) * sizeof(U);
            if (gapBytes <= MAX_PAD_GAP_BYTES) {
                const uint32_t gap = UbGapBlocks<U>(cols, ubStride);
                AscendC::DataCopyExtParams p(Narrow<uint16_t>(rows, "DataCopyPad blockCount"),
                                             Narrow<uint32_t>(cols * sizeof(U), "DataCopyPad blockLen"),
                                             uint32_t(gapBytes), gap, 0);
                AscendC::DataCopyPadExtParams<U> pad(false, 0, 0, static_cast<U>(0));
                AscendC::DataCopyPad(dst, src[off], p, pad);
                return;
            }
            // GM row gap beyond the 32-bit stride field: one copy per row.
            AscendC::DataCopyExtParams p(1, Narrow<uint32_t>(cols * sizeof(U), "DataCopyPad blockLen"), 0, 0, 0);
            AscendC::DataCopyPadExtParams<U> pad(false, 0, 0, static_cast<U>(0));
            for (uint32_t r = 0; r < rows; ++r) {
                AscendC::DataCopyPad(dst[r * ubStride], src[off + r * gmStride], p, pad);
            }
            return;
        }
#endif
        for (uint32_t r = 0; r < rows; ++r) {
            InRow(dst[r * ubStride], src, off + r * gmStride, cols, limit);
        }
    }

    // `rows` rows of `cols` elements: UB rows ubStride apart -> GM rows gmStride apart.
    template <typename U>
    __aicore__ inline void Out(const GlobalTensor<U> &dst, const LocalTensor<U> &src, uint64_t off, uint32_t rows,
                               uint32_t cols, uint64_t gmStride, uint32_t ubStride, bool vector = false)
    {
#if BNB_SOC_HAS_DATA_COPY_PAD
        if (usePad_ || (vector && vecPad_)) {
            const uint64_t gapBytes = (gmStride - cols) * sizeof(U);
            if (gapBytes <= MAX_PAD_GAP_BYTES) {
                const uint32_t gap = UbGapBlocks<U>(cols, ubStride);
                AscendC::DataCopyExtParams p(Narrow<uint16_t>(rows, "DataCopyPad blockCount"),
                                             Narrow<uint32_t>(cols * sizeof(U), "DataCopyPad blockLen"), gap,
                                             uint32_t(gapBytes), 0);
                AscendC::DataCopyPad(dst[off], src, p);
                return;
            }
            AscendC::DataCopyExtParams p(1, Narrow<uint32_t>(cols * sizeof(U), "DataCopyPad blockLen"), 0, 0, 0);
            for (uint32_t r = 0; r < rows; ++r) {
                AscendC::DataCopyPad(dst[off + r * gmStride], src[r * ubStride], p);
            }
            return;
        }
#endif
        for (uint32_t r = 0; r < rows; ++r) {
            OutRow(dst, src[r * ubStride], off + r * gmStride, cols);
        }
    }

private:
    // DataCopyPad strides: the GM gap between rows is a 32-bit byte count; the
    // UB gap counts whole blocks after a row rounded up to a block.
    static constexpr uint64_t MAX_PAD_GAP_BYTES = 0xFFFFFFFFull;
    template <typename U>
    __aicore__ static inline uint32_t UbGapBlocks(uint32_t cols, uint32_t ubStride)
    {
        const uint32_t perBlock = BLOCK_BYTES / sizeof(U);
        return (ubStride - uint32_t(AlignUp(cols, perBlock))) * sizeof(U) / BLOCK_BYTES;
    }

    AscendC::TBuf<AscendC::TPosition::VECCALC> scratch_;
    bool usePad_ = false;
    bool hasDcci_ = false;
    bool vecPad_ = false;
};

}  // namespace bnb
#endif  // BATCH_NORM_KERNEL_COPY_H
