// BatchNormBackward kernel class, shared by the BatchNormBackward kernel
// (batch_norm_backward.cpp) and the two SyncBatchNorm steps
// (batch_norm_reduce_backward.cpp: phase 1 only, batch_norm_elemt_backward.cpp:
// phase 2 only, with the totals and the count as inputs). See
// batch_norm_backward.cpp for the work split and the tail handling.
#ifndef BATCH_NORM_BACKWARD_KERNEL_H
#define BATCH_NORM_BACKWARD_KERNEL_H
#include "kernel_operator.h"
#include "batch_norm_backward_tiling.h"
#include "batch_norm_sync_tiling.h"
#include "batch_norm_soc_features.h"


namespace bnb {

// What one launch computes: the whole BatchNormBackward, or one step of the
// SyncBatchNorm backward (REDUCE: phase 1 + per-channel outputs; ELEMT:
// phase 2 with the totals read from its inputs and 1 / sum(counter)).
enum KernelMode : uint32_t { MODE_FULL = 0, MODE_REDUCE = 1, MODE_ELEMT = 2 };
// Per-channel tensors besides grad_weight / grad_bias (gradT_/gradF_ slots).
constexpr uint32_t SUM_DY = 2, SUM_DY_XMU = 3;

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

// Rows of a tile in GM and UB.
struct TileRows {
    uint64_t gmOffset;   // first element in GM
    uint64_t gmStride;   // elements between rows in GM
    uint32_t rows;
    uint32_t cols;
    int64_t channel;     // channel-first: the unit's channel
    int64_t group;
    uint32_t groupLane;  // channel-first: channel index inside its group
};

template <typename T, uint32_t MODE = MODE_FULL>
class BatchNormBackwardKernel {
public:
    __aicore__ inline void Init(GM_ADDR gradOut, GM_ADDR input, GM_ADDR *params, GM_ADDR gradInput,
                                GM_ADDR gradWeight, GM_ADDR gradBias, GM_ADDR workspace,
                                const BatchNormBackwardTilingData &tiling)
    {
        t_ = tiling;
        total_ = uint64_t(t_.outer) * t_.channels * t_.inner;
        const uint64_t total = total_;
        dy_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(gradOut), total);
        x_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(input), total);
        gi_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(gradInput), total);
        for (uint32_t i = 0; i < PARAM_COUNT; ++i) {
            present_[i] = params[i] != nullptr && (t_.present >> i & 1);
            paramT_[i].SetGlobalBuffer(reinterpret_cast<__gm__ T *>(params[i]), t_.channels);
            paramF_[i].SetGlobalBuffer(reinterpret_cast<__gm__ float *>(params[i]), t_.channels);
        }
        gradT_[0].SetGlobalBuffer(reinterpret_cast<__gm__ T *>(gradWeight), t_.channels);
        gradT_[1].SetGlobalBuffer(reinterpret_cast<__gm__ T *>(gradBias), t_.channels);
        gradF_[0].SetGlobalBuffer(reinterpret_cast<__gm__ float *>(gradWeight), t_.channels);
        gradF_[1].SetGlobalBuffer(reinterpret_cast<__gm__ float *>(gradBias), t_.channels);
        part_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(workspace), uint64_t(t_.units) * t_.partFloats);

        const UbPlan plan = MakeUbPlan(t_.tileRows, t_.rowStride, t_.vecElems, t_.layout, t_.dtype);
        pipe_.InitBuffer(inDy_, QUEUE_DEPTH, plan.tileBytes);
        pipe_.InitBuffer(inX_, QUEUE_DEPTH, plan.tileBytes);
        pipe_.InitBuffer(outGi_, QUEUE_DEPTH, plan.tileBytes);
        pipe_.InitBuffer(dyBuf_, plan.floatTileBytes);
        pipe_.InitBuffer(xBuf_, plan.floatTileBytes);
        pipe_.InitBuffer(accDyBuf_, plan.rowVecBytes);
        pipe_.InitBuffer(accDyxBuf_, plan.rowVecBytes);
        pipe_.InitBuffer(reduceTmpBuf_, plan.rowVecBytes);
        for (uint32_t i = 0; i < CHANNEL_VECS; ++i) {
            pipe_.InitBuffer(vecBuf_[i], plan.channelVecBytes);
        }
        pipe_.InitBuffer(partBuf_, plan.partBytes);
        pipe_.InitBuffer(tailBuf_, plan.tailBytes);

        dyF_ = dyBuf_.Get<float>();
        xF_ = xBuf_.Get<float>();
        accDy_ = accDyBuf_.Get<float>();
        accDyx_ = accDyxBuf_.Get<float>();
        reduceTmp_ = reduceTmpBuf_.Get<float>();
        partUb_ = partBuf_.Get<float>();
        weight_ = vecBuf_[0].Get<float>();
        mean_ = vecBuf_[1].Get<float>();
        invstd_ = vecBuf_[2].Get<float>();
        coefA_ = vecBuf_[3].Get<float>();
        coefB_ = vecBuf_[4].Get<float>();
        coefK_ = vecBuf_[5].Get<float>();
        totDy_ = vecBuf_[6].Get<float>();
        totDyx_ = vecBuf_[7].Get<float>();
        stage_ = vecBuf_[8].Get<float>();

        const uint64_t core = AscendC::GetBlockIdx(), cores = t_.usedCores;
        if (t_.crossCore) {
            unitBegin_ = uint64_t(t_.units) * core / cores;
            unitEnd_ = uint64_t(t_.units) * (core + 1) / cores;
            flatBegin_ = uint64_t(t_.flatUnits) * core / cores;
            flatEnd_ = uint64_t(t_.flatUnits) * (core + 1) / cores;
        } else {
            // Whole groups per core: its units (and flat regions) are those of its groups.
            groupBegin_ = uint64_t(t_.groups) * core / cores;
            groupEnd_ = uint64_t(t_.groups) * (core + 1) / cores;
            unitBegin_ = GroupUnitBegin(groupBegin_);
            unitEnd_ = GroupUnitBegin(groupEnd_);
            const uint64_t perGroup = t_.groups > 1 ? uint64_t(t_.outer) : uint64_t(t_.flatUnits);
            flatBegin_ = groupBegin_ * perGroup;
            flatEnd_ = groupEnd_ * perGroup;
        }
    }

    // SyncBatchNorm steps: sum_dy / sum_dy_xmu (outputs of REDUCE, inputs of
    // ELEMT, stored in save_mean's dtype) and, for ELEMT, the count vector
    // (`counterLen` entries of CounterType) whose sum is the element count.
    __aicore__ inline void SetSync(GM_ADDR sumDy, GM_ADDR sumDyXmu, GM_ADDR counter, int64_t counterLen,
                                   uint32_t counterType)
    {
        gradT_[SUM_DY].SetGlobalBuffer(reinterpret_cast<__gm__ T *>(sumDy), t_.channels);
        gradT_[SUM_DY_XMU].SetGlobalBuffer(reinterpret_cast<__gm__ T *>(sumDyXmu), t_.channels);
        gradF_[SUM_DY].SetGlobalBuffer(reinterpret_cast<__gm__ float *>(sumDy), t_.channels);
        gradF_[SUM_DY_XMU].SetGlobalBuffer(reinterpret_cast<__gm__ float *>(sumDyXmu), t_.channels);
        if constexpr (MODE == MODE_ELEMT) {
            float n = 0.0f;
            if (counterType == COUNTER_INT32) {
                GlobalTensor<int32_t> c;
                c.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t *>(counter), counterLen);
                Flush(c);
                int64_t total = 0;
                for (int64_t i = 0; i < counterLen; ++i) total += c.GetValue(uint64_t(i));
                n = float(total);
            } else if (counterType == COUNTER_INT64) {
                GlobalTensor<int64_t> c;
                c.SetGlobalBuffer(reinterpret_cast<__gm__ int64_t *>(counter), counterLen);
                Flush(c);
                int64_t total = 0;
                for (int64_t i = 0; i < counterLen; ++i) total += c.GetValue(uint64_t(i));
                n = float(total);
            } else {
                GlobalTensor<float> c;
                c.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(counter), counterLen);
                Flush(c);
                for (int64_t i = 0; i < counterLen; ++i) n += c.GetValue(uint64_t(i));
            }
            t_.invCount = n > 0.0f ? 1.0f / n : 0.0f;
        }
    }

    __aicore__ inline void Process()
    {
        if constexpr (MODE == MODE_REDUCE) {
            ProcessReduce();
            return;
        }
        const bool wantInput = t_.outputMask >> GRAD_INPUT & 1;
        const bool wantParams = (t_.outputMask >> GRAD_WEIGHT & 1) || (t_.outputMask >> GRAD_BIAS & 1);
        const bool reduce = MODE == MODE_FULL && (wantParams || (t_.training && wantInput));
        if (reduce) {
            for (uint64_t u = unitBegin_; u < unitEnd_; ++u) {
                ReduceUnit(u);
            }
            if (t_.crossCore && t_.usedCores > 1) {
                AscendC::PipeBarrier<PIPE_ALL>();
#if BNB_SOC_HAS_SYNC_ALL
                AscendC::SyncAll();
#endif
            }
        }
        if (MODE == MODE_FULL) {
            ParamGroups(reduce);
        }
        if (t_.flat) {
            for (uint64_t f = flatBegin_; f < flatEnd_; ++f) {
                FlatRegion(f, wantInput);
            }
            return;
        }
        for (uint64_t u = unitBegin_; u < unitEnd_; ++u) {
            GradInputUnit(u, wantInput);
        }
    }

private:
    __aicore__ inline void ParamGroups(bool reduce)
    {
        if (t_.crossCore) {
            for (uint64_t g = AscendC::GetBlockIdx(); g < uint64_t(t_.groups); g += t_.usedCores) {
                WriteParamGrads(g, reduce);
            }
        } else {
            for (uint64_t g = groupBegin_; g < groupEnd_; ++g) {
                WriteParamGrads(g, reduce);
            }
        }
    }

    // REDUCE: phase 1 (partial sums of dy and dy * (x - mean)), then per group
    // sum_dy, sum_dy_xmu (mask bit 0), grad_weight = sum_dy_xmu * invstd (bit 1),
    // grad_bias = sum_dy (bit 2); masked outputs are zero-filled.
    __aicore__ inline void ProcessReduce()
    {
        for (uint64_t u = unitBegin_; u < unitEnd_; ++u) {
            ReduceUnit(u);
        }
        if (t_.crossCore && t_.usedCores > 1) {
            AscendC::PipeBarrier<PIPE_ALL>();
#if BNB_SOC_HAS_SYNC_ALL
            AscendC::SyncAll();
#endif
        }
        ParamGroups(true);
    }

    __aicore__ inline bool First() const { return t_.layout == LAYOUT_CHANNEL_FIRST; }

    // A unit's rows. `write`: the rows grad_input is written from; without
    // DataCopyPad a ragged last channel-first chunk then ends at the row end
    // with whole blocks (it recomputes the overlapped elements identically).
    __aicore__ inline TileRows Unit(uint64_t u, bool write = false) const
    {
        TileRows r;
        uint64_t rb, cb;
        if (First()) {
            const uint64_t perChannel = uint64_t(t_.rowBlocks) * t_.colBlocks;
            r.channel = u / perChannel;
            rb = (u % perChannel) / t_.colBlocks;
            cb = u % t_.colBlocks;
            uint64_t start = cb * t_.tileCols;
            r.cols = uint32_t(Min(uint64_t(t_.tileCols), uint64_t(t_.inner) - start));
            if (write && t_.shiftLast && cb + 1 == uint64_t(t_.colBlocks)) {
                start = uint64_t(t_.inner) - t_.tileCols;
                r.cols = t_.tileCols;
            }
            r.gmStride = uint64_t(t_.channels) * t_.inner;
            r.gmOffset = rb * t_.tileRows * r.gmStride + uint64_t(r.channel) * t_.inner + start;
            r.group = GroupOf(r.channel);
            r.groupLane = uint32_t(r.channel - GroupStart(r.group));
        } else {
            cb = u / t_.rowBlocks;
            rb = u % t_.rowBlocks;
            r.channel = -1;
            r.gmStride = t_.channels;
            r.gmOffset = rb * t_.tileRows * r.gmStride + uint64_t(GroupStart(cb));
            r.cols = GroupCount(cb);
            r.group = cb;
            r.groupLane = 0;
        }
        r.rows = uint32_t(Min(uint64_t(t_.tileRows), uint64_t(t_.outer) - rb * t_.tileRows));
        return r;
    }

    // First unit of group g (units of one group are contiguous in both layouts).
    __aicore__ inline uint64_t GroupUnitBegin(uint64_t g) const
    {
        if (g >= uint64_t(t_.groups)) {
            return t_.units;
        }
        if (First()) {
            return uint64_t(GroupStart(g)) * t_.rowBlocks * t_.colBlocks;
        }
        return g * t_.rowBlocks;
    }

    __aicore__ static inline uint64_t Min(uint64_t a, uint64_t b) { return a < b ? a : b; }

    // ---- data movement ----
    template <typename U>
    __aicore__ inline void Flush(const GlobalTensor<U> &gm)
    {
        (void)gm;
#if BNB_SOC_HAS_DCCI
        if (t_.hasDcci) {
            AscendC::DataCacheCleanAndInvalid<U, AscendC::CacheLine::ENTIRE_DATA_CACHE,
                                              AscendC::DcciDst::CACHELINE_OUT>(gm);
        }
#endif
    }

    // UB dst[0, cols) = GM src[off, off + cols) exactly, with whole blocks only
    // (never reading at or past `limit`, the tensor's element count).
    template <typename U>
    __aicore__ inline void CopyInRow(const LocalTensor<U> &dst, const GlobalTensor<U> &src, uint64_t off,
                                     uint32_t cols, uint64_t limit)
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
            LocalTensor<U> scratch = tailBuf_.Get<U>();
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
    __aicore__ inline void CopyOutRow(GlobalTensor<U> dst, const LocalTensor<U> &src, uint64_t off, uint32_t cols)
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
            LocalTensor<U> scratch = tailBuf_.Get<U>();
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

    template <typename U>
    __aicore__ inline void CopyIn(const LocalTensor<U> &dst, const GlobalTensor<U> &src, uint64_t off, uint32_t rows,
                                  uint32_t cols, uint64_t gmStride, uint32_t ubStride, uint64_t limit)
    {
#if BNB_SOC_HAS_DATA_COPY_PAD
        if (t_.usePad) {
            const uint64_t gapBytes = (gmStride - cols) * sizeof(U);
            if (gapBytes <= 0xFFFFFFFFull) {
                const uint32_t perBlock = BLOCK_BYTES / sizeof(U);
                const uint32_t gap = (ubStride - uint32_t(AlignUp(cols, perBlock))) * sizeof(U) / BLOCK_BYTES;
                AscendC::DataCopyExtParams p(uint16_t(rows), uint32_t(cols * sizeof(U)), uint32_t(gapBytes), gap, 0);
                AscendC::DataCopyPadExtParams<U> pad(false, 0, 0, static_cast<U>(0));
                AscendC::DataCopyPad(dst, src[off], p, pad);
                return;
            }
            // GM row gap beyond the 32-bit stride field: one copy per row.
            AscendC::DataCopyExtParams p(1, uint32_t(cols * sizeof(U)), 0, 0, 0);
            AscendC::DataCopyPadExtParams<U> pad(false, 0, 0, static_cast<U>(0));
            for (uint32_t r = 0; r < rows; ++r) {
                AscendC::DataCopyPad(dst[r * ubStride], src[off + r * gmStride], p, pad);
            }
            return;
        }
#endif
        for (uint32_t r = 0; r < rows; ++r) {
            CopyInRow(dst[r * ubStride], src, off + r * gmStride, cols, limit);
        }
    }

    template <typename U>
    __aicore__ inline void CopyOut(const GlobalTensor<U> &dst, const LocalTensor<U> &src, uint64_t off, uint32_t rows,
                                   uint32_t cols, uint64_t gmStride, uint32_t ubStride)
    {
#if BNB_SOC_HAS_DATA_COPY_PAD
        if (t_.usePad) {
            const uint64_t gapBytes = (gmStride - cols) * sizeof(U);
            if (gapBytes <= 0xFFFFFFFFull) {
                const uint32_t perBlock = BLOCK_BYTES / sizeof(U);
                const uint32_t gap = (ubStride - uint32_t(AlignUp(cols, perBlock))) * sizeof(U) / BLOCK_BYTES;
                AscendC::DataCopyExtParams p(uint16_t(rows), uint32_t(cols * sizeof(U)), gap, uint32_t(gapBytes), 0);
                AscendC::DataCopyPad(dst[off], src, p);
                return;
            }
            AscendC::DataCopyExtParams p(1, uint32_t(cols * sizeof(U)), 0, 0, 0);
            for (uint32_t r = 0; r < rows; ++r) {
                AscendC::DataCopyPad(dst[off + r * gmStride], src[r * ubStride], p);
            }
            return;
        }
#endif
        for (uint32_t r = 0; r < rows; ++r) {
            CopyOutRow(dst, src[r * ubStride], off + r * gmStride, cols);
        }
    }

    // grad_out (and input when `withX`) of a unit into the float tiles.
    __aicore__ inline void LoadTile(const TileRows &r, bool withX)
    {
        LocalTensor<T> dyIn = inDy_.template AllocTensor<T>();
        CopyIn(dyIn, dy_, r.gmOffset, r.rows, r.cols, r.gmStride, t_.rowStride, total_);
        inDy_.EnQue(dyIn);
        if (withX) {
            LocalTensor<T> xIn = inX_.template AllocTensor<T>();
            CopyIn(xIn, x_, r.gmOffset, r.rows, r.cols, r.gmStride, t_.rowStride, total_);
            inX_.EnQue(xIn);
        }
        const uint32_t n = r.rows * t_.rowStride;
        LocalTensor<T> dyT = inDy_.template DeQue<T>();
        ToFloat(dyF_, dyT, n);
        inDy_.FreeTensor(dyT);
        if (withX) {
            LocalTensor<T> xT = inX_.template DeQue<T>();
            ToFloat(xF_, xT, n);
            inX_.FreeTensor(xT);
        }
    }

    __aicore__ inline void ToFloat(const LocalTensor<float> &dst, const LocalTensor<T> &src, uint32_t n)
    {
        if constexpr (IsSame<T, float>::value) {
            AscendC::DataCopy(dst, src, n);
        } else {
            AscendC::Cast(dst, src, AscendC::RoundMode::CAST_NONE, n);
        }
    }

    __aicore__ inline void FromFloat(const LocalTensor<T> &dst, const LocalTensor<float> &src, uint32_t n)
    {
        if constexpr (IsSame<T, float>::value) {
            AscendC::DataCopy(dst, src, n);
        } else {
            AscendC::Cast(dst, src, NarrowRound<T>(), n);
        }
    }

    // ---- per-channel vectors ----
    __aicore__ inline void LoadParam(uint32_t which, int64_t c0, uint32_t count, const LocalTensor<float> &dst,
                                     float absent)
    {
        if (!present_[which]) {
            AscendC::Duplicate(dst, absent, t_.vecElems);
            return;
        }
        LoadChannels(paramT_[which], paramF_[which], t_.paramFloat32 >> which & 1, c0, count, dst);
    }

    // Channels [c0, c0 + count) of a per-channel vector stored as T (srcT) or,
    // when isFloat (or T is float), as float (srcF), into dst as float.
    __aicore__ inline void LoadChannels(const GlobalTensor<T> &srcT, const GlobalTensor<float> &srcF, bool isFloat,
                                        int64_t c0, uint32_t count, const LocalTensor<float> &dst)
    {
        if constexpr (!IsSame<T, float>::value) {
            if (!isFloat) {
                LocalTensor<T> staged = stage_.template ReinterpretCast<T>();
                CopyIn(staged, srcT, c0, 1, count, count, t_.vecElems, t_.channels);
                AscendC::PipeBarrier<PIPE_ALL>();
                AscendC::Cast(dst, staged, AscendC::RoundMode::CAST_NONE, count);
                return;
            }
        }
        CopyIn(dst, srcF, c0, 1, count, count, t_.vecElems, t_.channels);
        AscendC::PipeBarrier<PIPE_ALL>();
    }

    // A per-channel float vector stored in save_mean's dtype (sum_dy / sum_dy_xmu).
    __aicore__ inline bool SumFloat32() const { return t_.paramFloat32 >> SAVE_MEAN & 1; }

    __aicore__ inline void LoadSum(uint32_t which, int64_t c0, uint32_t count, const LocalTensor<float> &dst)
    {
        AscendC::Duplicate(dst, 0.0f, t_.vecElems);
        AscendC::PipeBarrier<PIPE_ALL>();
        LoadChannels(gradT_[which], gradF_[which], SumFloat32(), c0, count, dst);
    }

    // Channel-first: groups of groupWidth channels, the last one also takes the
    // remainder. Channel-last: column chunks; with shiftLast the last one ends at C.
    __aicore__ inline int64_t GroupStart(int64_t g) const
    {
        if (!First() && t_.shiftLast && g + 1 == t_.groups) {
            return t_.channels - t_.groupWidth;
        }
        return g * t_.groupWidth;
    }
    __aicore__ inline uint32_t GroupCount(int64_t g) const
    {
        if (First()) {
            return uint32_t(g + 1 == t_.groups ? t_.channels - GroupStart(g) : t_.groupWidth);
        }
        return uint32_t(Min(uint64_t(t_.groupWidth), uint64_t(t_.channels - GroupStart(g))));
    }
    __aicore__ inline int64_t GroupOf(int64_t channel) const
    {
        const int64_t g = channel / t_.groupWidth;
        return g < t_.groups ? g : t_.groups - 1;
    }

    // weight, mean and invstd of group g (the mode's statistics).
    __aicore__ inline void LoadStats(int64_t g)
    {
        if (statsGroup_ == g) {
            return;
        }
        const int64_t c0 = GroupStart(g);
        const uint32_t n = GroupCount(g);
        LoadParam(WEIGHT, c0, n, weight_, DEFAULT_WEIGHT);
        if (t_.training) {  // save_mean / save_invstd are required then
            LoadParam(SAVE_MEAN, c0, n, mean_, 0.0f);
            LoadParam(SAVE_INVSTD, c0, n, invstd_, 1.0f);
        } else {
            LoadParam(RUNNING_MEAN, c0, n, mean_, DEFAULT_RUNNING_MEAN);
            LoadParam(RUNNING_VAR, c0, n, invstd_, DEFAULT_RUNNING_VAR);
            AscendC::Adds(invstd_, invstd_, t_.eps, t_.vecElems);
            AscendC::Sqrt(invstd_, invstd_, t_.vecElems);
            AscendC::Duplicate(coefB_, 1.0f, t_.vecElems);
            AscendC::Div(invstd_, coefB_, invstd_, t_.vecElems);
        }
        AscendC::PipeBarrier<PIPE_ALL>();
        statsGroup_ = g;
        coefGroup_ = -1;
    }

    // Totals of group g, combined from the partial sums in unit order.
    __aicore__ inline void GroupTotals(int64_t g)
    {
        const uint32_t n = GroupCount(g);
        if constexpr (MODE == MODE_ELEMT) {
            // The group-wide sums are inputs; the coefficients want sum(dy * xhat).
            LoadStats(g);
            LoadSum(SUM_DY, GroupStart(g), n, totDy_);
            LoadSum(SUM_DY_XMU, GroupStart(g), n, totDyx_);
            AscendC::PipeBarrier<PIPE_ALL>();
            AscendC::Mul(totDyx_, totDyx_, invstd_, t_.vecElems);
            AscendC::PipeBarrier<PIPE_ALL>();
            return;
        }
        AscendC::Duplicate(totDy_, 0.0f, t_.vecElems);
        AscendC::Duplicate(totDyx_, 0.0f, t_.vecElems);
        AscendC::PipeBarrier<PIPE_ALL>();
        if (First()) {
            const uint64_t perChannel = uint64_t(t_.rowBlocks) * t_.colBlocks;
            for (uint32_t j = 0; j < n; ++j) {
                const uint64_t base = (GroupStart(g) + j) * perChannel;
                float sumDy = 0.0f, sumDyx = 0.0f;
                for (uint64_t s0 = 0; s0 < perChannel; s0 += SLOTS_PER_LOAD) {
                    const uint32_t k = uint32_t(Min(SLOTS_PER_LOAD, perChannel - s0));
                    AscendC::DataCopy(partUb_, part_[(base + s0) * SLOT_FLOATS], k * SLOT_FLOATS);
                    AscendC::PipeBarrier<PIPE_ALL>();
                    for (uint32_t s = 0; s < k; ++s) {
                        sumDy += partUb_.GetValue(s * SLOT_FLOATS);
                        sumDyx += partUb_.GetValue(s * SLOT_FLOATS + 1);
                    }
                    AscendC::PipeBarrier<PIPE_ALL>();
                }
                totDy_.SetValue(j, sumDy);
                totDyx_.SetValue(j, sumDyx);
            }
        } else {
            for (int64_t rb = 0; rb < t_.rowBlocks; ++rb) {
                AscendC::DataCopy(partUb_, part_[uint64_t(g * t_.rowBlocks + rb) * t_.partFloats], t_.partFloats);
                AscendC::PipeBarrier<PIPE_ALL>();
                AscendC::Add(totDy_, totDy_, partUb_, n);
                AscendC::Add(totDyx_, totDyx_, partUb_[t_.rowStride], n);
                AscendC::PipeBarrier<PIPE_ALL>();
            }
        }
        AscendC::PipeBarrier<PIPE_ALL>();
    }

    // Training coefficients: grad_input = a * dy + k * xhat + b.
    __aicore__ inline void LoadCoefs(int64_t g)
    {
        LoadStats(g);
        if (coefGroup_ == g) {
            return;
        }
        AscendC::Mul(coefA_, weight_, invstd_, t_.vecElems);
        if (t_.training) {
            GroupTotals(g);
            AscendC::Muls(coefB_, coefA_, -t_.invCount, t_.vecElems);
            AscendC::Mul(coefK_, coefB_, totDyx_, t_.vecElems);
            AscendC::Mul(coefB_, coefB_, totDy_, t_.vecElems);
        }
        AscendC::PipeBarrier<PIPE_ALL>();
        coefGroup_ = g;
    }

    __aicore__ inline void WriteChannels(uint32_t which, int64_t g, const LocalTensor<float> &src)
    {
        const int64_t c0 = GroupStart(g);
        const uint32_t n = GroupCount(g);
        if constexpr (!IsSame<T, float>::value) {
            if (which >= SUM_DY ? !SumFloat32() : !t_.gradParamFloat32) {
                LocalTensor<T> staged = stage_.template ReinterpretCast<T>();
                AscendC::Cast(staged, src, NarrowRound<T>(), n);
                AscendC::PipeBarrier<PIPE_ALL>();
                CopyOut(gradT_[which], staged, c0, 1, n, n, t_.vecElems);
                AscendC::PipeBarrier<PIPE_ALL>();
                return;
            }
        }
        CopyOut(gradF_[which], src, c0, 1, n, n, t_.vecElems);
        AscendC::PipeBarrier<PIPE_ALL>();
    }

    __aicore__ inline void WriteParamGrads(int64_t g, bool reduced)
    {
        if (reduced) {
            GroupTotals(g);
        }
        const bool wantW = t_.outputMask >> GRAD_WEIGHT & 1, wantB = t_.outputMask >> GRAD_BIAS & 1;
        if constexpr (MODE == MODE_REDUCE) {
            // Partials hold dy * (x - mean) here (Xhat skips invstd).
            const bool wantS = t_.outputMask >> GRAD_INPUT & 1;
            AscendC::Duplicate(coefA_, 0.0f, t_.vecElems);
            LoadStats(g);
            AscendC::Mul(coefB_, totDyx_, invstd_, t_.vecElems);
            AscendC::PipeBarrier<PIPE_ALL>();
            coefGroup_ = -1;
            WriteChannels(SUM_DY, g, wantS ? totDy_ : coefA_);
            WriteChannels(SUM_DY_XMU, g, wantS ? totDyx_ : coefA_);
            WriteChannels(0, g, wantW ? coefB_ : coefA_);
            WriteChannels(1, g, wantB ? totDy_ : coefA_);
            return;
        }
        if (!wantW || !wantB) {
            AscendC::Duplicate(coefA_, 0.0f, t_.vecElems);
            AscendC::PipeBarrier<PIPE_ALL>();
            coefGroup_ = -1;
        }
        WriteChannels(0, g, wantW ? totDyx_ : coefA_);
        WriteChannels(1, g, wantB ? totDy_ : coefA_);
    }

    // ---- phase 1: partial sums of one unit ----
    __aicore__ inline void ReduceUnit(uint64_t u)
    {
        const TileRows r = Unit(u);
        LoadTile(r, true);
        LoadStats(r.group);
        const uint32_t n = r.rows * t_.rowStride;
        Xhat(r, n);
        AscendC::Mul(xF_, xF_, dyF_, n);  // dy * xhat
        AscendC::Duplicate(accDy_, 0.0f, t_.rowStride);
        AscendC::Duplicate(accDyx_, 0.0f, t_.rowStride);
        for (uint32_t row = 0; row < r.rows; ++row) {
            AscendC::Add(accDy_, accDy_, dyF_[row * t_.rowStride], r.cols);
            AscendC::Add(accDyx_, accDyx_, xF_[row * t_.rowStride], r.cols);
        }
        if (First()) {
            AscendC::ReduceSum(partUb_, accDy_, reduceTmp_, r.cols);
            AscendC::ReduceSum(partUb_[SLOT_FLOATS], accDyx_, reduceTmp_, r.cols);
            AscendC::PipeBarrier<PIPE_ALL>();
            partUb_.SetValue(1, partUb_.GetValue(SLOT_FLOATS));
            AscendC::PipeBarrier<PIPE_ALL>();
            AscendC::DataCopy(part_[u * SLOT_FLOATS], partUb_, SLOT_FLOATS);
        } else {
            AscendC::PipeBarrier<PIPE_ALL>();
            AscendC::DataCopy(part_[u * t_.partFloats], accDy_, t_.rowStride);
            AscendC::DataCopy(part_[u * t_.partFloats + t_.rowStride], accDyx_, t_.rowStride);
        }
        AscendC::PipeBarrier<PIPE_ALL>();
    }

    // xF_ = (x - mean) * invstd over the tile.
    __aicore__ inline void Xhat(const TileRows &r, uint32_t n)
    {
        if (First()) {
            AscendC::PipeBarrier<PIPE_ALL>();
            const float mean = mean_.GetValue(r.groupLane), invstd = invstd_.GetValue(r.groupLane);
            AscendC::Adds(xF_, xF_, -mean, n);
            if (MODE != MODE_REDUCE) {
                AscendC::Muls(xF_, xF_, invstd, n);
            }
        } else {
            for (uint32_t row = 0; row < r.rows; ++row) {
                const LocalTensor<float> xr = xF_[row * t_.rowStride];
                AscendC::Sub(xr, xr, mean_, r.cols);
                if (MODE != MODE_REDUCE) {
                    AscendC::Mul(xr, xr, invstd_, r.cols);
                }
            }
        }
    }

    // ---- phase 2: grad_input of one unit (zeros when masked) ----
    __aicore__ inline void GradInputUnit(uint64_t u, bool want)
    {
        const TileRows r = Unit(u, true);
        const uint32_t n = r.rows * t_.rowStride;
        if (!want) {
            AscendC::Duplicate(dyF_, 0.0f, n);
        } else {
            LoadTile(r, t_.training);
            LoadCoefs(r.group);
            if (t_.training) {
                Xhat(r, n);
            }
            ApplyCoefs(r, n);
        }
        LocalTensor<T> out = outGi_.template AllocTensor<T>();
        FromFloat(out, dyF_, n);
        outGi_.EnQue(out);
        LocalTensor<T> ready = outGi_.template DeQue<T>();
        CopyOut(gi_, ready, r.gmOffset, r.rows, r.cols, r.gmStride, t_.rowStride);
        outGi_.FreeTensor(ready);
    }

    // dyF_ = a * dy (+ k * xhat + b in training).
    __aicore__ inline void ApplyCoefs(const TileRows &r, uint32_t n)
    {
        if (First()) {
            AscendC::PipeBarrier<PIPE_ALL>();
            const float a = coefA_.GetValue(r.groupLane);
            AscendC::Muls(dyF_, dyF_, a, n);
            if (t_.training) {
                const float k = coefK_.GetValue(r.groupLane), b = coefB_.GetValue(r.groupLane);
                AscendC::Muls(xF_, xF_, k, n);
                AscendC::Add(dyF_, dyF_, xF_, n);
                AscendC::Adds(dyF_, dyF_, b, n);
            }
            return;
        }
        for (uint32_t row = 0; row < r.rows; ++row) {
            const LocalTensor<float> dr = dyF_[row * t_.rowStride];
            AscendC::Mul(dr, dr, coefA_, r.cols);
            if (t_.training) {
                const LocalTensor<float> xr = xF_[row * t_.rowStride];
                AscendC::Mul(xr, xr, coefK_, r.cols);
                AscendC::Add(dr, dr, xr, r.cols);
                AscendC::Add(dr, dr, coefB_, r.cols);
            }
        }
    }

    // ---- phase 2, rows shorter than one block: grad_input of one contiguous region ----
    __aicore__ inline void FlatRegion(uint64_t f, bool want)
    {
        const uint32_t perBlock = BLOCK_BYTES / sizeof(T);
        int64_t g = 0;
        uint64_t s, len;
        if (t_.groups > 1) {  // one row's channels of one group: >= groupWidth * inner elements
            g = int64_t(f / uint64_t(t_.outer));
            const uint64_t n = f % uint64_t(t_.outer);
            s = n * uint64_t(t_.channels) * t_.inner + uint64_t(GroupStart(g)) * t_.inner;
            len = uint64_t(GroupCount(g)) * t_.inner;
        } else {  // the whole tensor in tiles; a short last tile ends at the tensor end
            s = f * t_.flatCap;
            len = Min(t_.flatCap, total_ - s);
            if (len < perBlock && total_ >= perBlock) {
                s = total_ - perBlock;
                len = perBlock;
            }
        }
        if (len == 0) {
            return;
        }
        const uint32_t n = uint32_t(AlignUp(len, VEC_ALIGN));
        if (!want) {
            AscendC::Duplicate(dyF_, 0.0f, n);
        } else {
            LocalTensor<T> dyIn = inDy_.template AllocTensor<T>();
            CopyInRow(dyIn, dy_, s, uint32_t(len), total_);
            inDy_.EnQue(dyIn);
            if (t_.training) {
                LocalTensor<T> xIn = inX_.template AllocTensor<T>();
                CopyInRow(xIn, x_, s, uint32_t(len), total_);
                inX_.EnQue(xIn);
            }
            LocalTensor<T> dyT = inDy_.template DeQue<T>();
            ToFloat(dyF_, dyT, n);
            inDy_.FreeTensor(dyT);
            if (t_.training) {
                LocalTensor<T> xT = inX_.template DeQue<T>();
                ToFloat(xF_, xT, n);
                inX_.FreeTensor(xT);
            }
            LoadCoefs(g);
            AscendC::PipeBarrier<PIPE_ALL>();
            // Scalar per element, in the same operation order as ApplyCoefs / Xhat.
            const int64_t c0 = GroupStart(g);
            int64_t lane = -1;
            float a = 0.0f, k = 0.0f, b = 0.0f, mean = 0.0f, invstd = 0.0f;
            for (uint32_t j = 0; j < uint32_t(len); ++j) {
                const int64_t l = int64_t(((s + j) / uint64_t(t_.inner)) % uint64_t(t_.channels)) - c0;
                if (l != lane) {
                    lane = l;
                    a = coefA_.GetValue(uint32_t(l));
                    if (t_.training) {
                        k = coefK_.GetValue(uint32_t(l));
                        b = coefB_.GetValue(uint32_t(l));
                        mean = mean_.GetValue(uint32_t(l));
                        invstd = invstd_.GetValue(uint32_t(l));
                    }
                }
                float v = dyF_.GetValue(j) * a;
                if (t_.training) {
                    const float xh = (xF_.GetValue(j) + (-mean)) * invstd;
                    v = v + xh * k;
                    v = v + b;
                }
                dyF_.SetValue(j, v);
            }
            AscendC::PipeBarrier<PIPE_ALL>();
        }
        LocalTensor<T> out = outGi_.template AllocTensor<T>();
        FromFloat(out, dyF_, n);
        outGi_.EnQue(out);
        LocalTensor<T> ready = outGi_.template DeQue<T>();
        AscendC::PipeBarrier<PIPE_ALL>();
        CopyOutRow(gi_, ready, s, uint32_t(len));
        outGi_.FreeTensor(ready);
    }

    BatchNormBackwardTilingData t_;
    AscendC::TPipe pipe_;
    AscendC::TQue<AscendC::QuePosition::VECIN, QUEUE_DEPTH> inDy_, inX_;
    AscendC::TQue<AscendC::QuePosition::VECOUT, QUEUE_DEPTH> outGi_;
    AscendC::TBuf<AscendC::TPosition::VECCALC> dyBuf_, xBuf_, accDyBuf_, accDyxBuf_, reduceTmpBuf_, partBuf_, tailBuf_;
    AscendC::TBuf<AscendC::TPosition::VECCALC> vecBuf_[CHANNEL_VECS];
    GlobalTensor<T> dy_, x_, gi_, paramT_[PARAM_COUNT], gradT_[4];
    GlobalTensor<float> paramF_[PARAM_COUNT], gradF_[4], part_;
    LocalTensor<float> dyF_, xF_, accDy_, accDyx_, reduceTmp_, partUb_;
    LocalTensor<float> weight_, mean_, invstd_, coefA_, coefB_, coefK_, totDy_, totDyx_, stage_;
    bool present_[PARAM_COUNT];
    uint64_t total_ = 0;
    uint64_t unitBegin_ = 0, unitEnd_ = 0, groupBegin_ = 0, groupEnd_ = 0, flatBegin_ = 0, flatEnd_ = 0;
    int64_t statsGroup_ = -1, coefGroup_ = -1;
};

template <typename T>
__aicore__ inline void RunBatchNormBackward(GM_ADDR gradOut, GM_ADDR input, GM_ADDR *params, GM_ADDR gradInput,
                                            GM_ADDR gradWeight, GM_ADDR gradBias, GM_ADDR workspace,
                                            const BatchNormBackwardTilingData &tiling)
{
    BatchNormBackwardKernel<T> op;
    op.Init(gradOut, input, params, gradInput, gradWeight, gradBias, workspace, tiling);
    op.Process();
}

}  // namespace bnb

#endif
