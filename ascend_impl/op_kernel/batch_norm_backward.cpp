// BatchNormBackward Ascend C kernel (aclnnBatchNormBackward semantics).
//
// Work is cut into units (one tile of one channel for channel-first data,
// one tile of one channel block for channel-last data); each core takes a
// contiguous run of units. Phase 1 writes each unit's partial sums
// (sum_dy, sum_dy_xhat, float32) to the workspace; after SyncAll every
// channel's totals are combined from its partials in unit order, so the
// result does not depend on the number of cores. Phase 2 writes grad_weight /
// grad_bias (per channel group) and the element-wise grad_input.
#include "kernel_operator.h"
#include "batch_norm_backward_tiling.h"

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

template <typename T>
class BatchNormBackwardKernel {
public:
    __aicore__ inline void Init(GM_ADDR gradOut, GM_ADDR input, GM_ADDR *params, GM_ADDR gradInput,
                                GM_ADDR gradWeight, GM_ADDR gradBias, GM_ADDR workspace,
                                const BatchNormBackwardTilingData &tiling)
    {
        t_ = tiling;
        const uint64_t total = uint64_t(t_.outer) * t_.channels * t_.inner;
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
        sync_.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t *>(workspace), SYNC_INTS);
        part_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(workspace + SYNC_INTS * sizeof(int32_t)),
                              uint64_t(t_.units) * t_.partFloats);

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
        pipe_.InitBuffer(syncBuf_, plan.syncBytes);

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
        unitBegin_ = uint64_t(t_.units) * core / cores;
        unitEnd_ = uint64_t(t_.units) * (core + 1) / cores;
    }

    __aicore__ inline void Process()
    {
        const bool wantInput = t_.outputMask >> GRAD_INPUT & 1;
        const bool wantParams = (t_.outputMask >> GRAD_WEIGHT & 1) || (t_.outputMask >> GRAD_BIAS & 1);
        const bool reduce = wantParams || (t_.training && wantInput);
        if (reduce) {
            for (uint64_t u = unitBegin_; u < unitEnd_; ++u) {
                ReduceUnit(u);
            }
            if (t_.usedCores > 1) {
                AscendC::SyncAll(sync_, syncBuf_.Get<int32_t>());
            }
        }
        for (uint64_t g = AscendC::GetBlockIdx(); g < uint64_t(t_.groups); g += t_.usedCores) {
            WriteParamGrads(g, reduce);
        }
        for (uint64_t u = unitBegin_; u < unitEnd_; ++u) {
            GradInputUnit(u, wantInput);
        }
    }

private:
    __aicore__ inline bool First() const { return t_.layout == LAYOUT_CHANNEL_FIRST; }

    __aicore__ inline TileRows Unit(uint64_t u) const
    {
        TileRows r;
        uint64_t rb, cb;
        if (First()) {
            const uint64_t perChannel = uint64_t(t_.rowBlocks) * t_.colBlocks;
            r.channel = u / perChannel;
            rb = (u % perChannel) / t_.colBlocks;
            cb = u % t_.colBlocks;
            r.gmStride = uint64_t(t_.channels) * t_.inner;
            r.gmOffset = rb * t_.tileRows * r.gmStride + r.channel * t_.inner + cb * t_.tileCols;
            r.cols = uint32_t(Min(uint64_t(t_.tileCols), uint64_t(t_.inner) - cb * t_.tileCols));
            r.group = r.channel / t_.groupWidth;
            r.groupLane = uint32_t(r.channel % t_.groupWidth);
        } else {
            cb = u / t_.rowBlocks;
            rb = u % t_.rowBlocks;
            r.channel = -1;
            r.gmStride = t_.channels;
            r.gmOffset = rb * t_.tileRows * r.gmStride + cb * t_.tileCols;
            r.cols = uint32_t(Min(uint64_t(t_.tileCols), uint64_t(t_.channels) - cb * t_.tileCols));
            r.group = cb;
            r.groupLane = 0;
        }
        r.rows = uint32_t(Min(uint64_t(t_.tileRows), uint64_t(t_.outer) - rb * t_.tileRows));
        return r;
    }

    __aicore__ static inline uint64_t Min(uint64_t a, uint64_t b) { return a < b ? a : b; }

    // ---- data movement ----
    template <typename U>
    __aicore__ inline void CopyIn(const LocalTensor<U> &dst, const GlobalTensor<U> &src, uint32_t rows, uint32_t cols,
                                  uint64_t gmStride, uint32_t ubStride)
    {
        if (t_.usePad) {
            const uint32_t perBlock = BLOCK_BYTES / sizeof(U);
            const uint32_t gap = (ubStride - uint32_t(AlignUp(cols, perBlock))) * sizeof(U) / BLOCK_BYTES;
            AscendC::DataCopyExtParams p(uint16_t(rows), uint32_t(cols * sizeof(U)),
                                         uint32_t((gmStride - cols) * sizeof(U)), gap, 0);
            AscendC::DataCopyPadExtParams<U> pad(false, 0, 0, static_cast<U>(0));
            AscendC::DataCopyPad(dst, src, p, pad);
        } else {
            for (uint32_t r = 0; r < rows; ++r) {
                AscendC::DataCopy(dst[r * ubStride], src[r * gmStride], cols);
            }
        }
    }

    template <typename U>
    __aicore__ inline void CopyOut(const GlobalTensor<U> &dst, const LocalTensor<U> &src, uint32_t rows, uint32_t cols,
                                   uint64_t gmStride, uint32_t ubStride)
    {
        if (t_.usePad) {
            const uint32_t perBlock = BLOCK_BYTES / sizeof(U);
            const uint32_t gap = (ubStride - uint32_t(AlignUp(cols, perBlock))) * sizeof(U) / BLOCK_BYTES;
            AscendC::DataCopyExtParams p(uint16_t(rows), uint32_t(cols * sizeof(U)), gap,
                                         uint32_t((gmStride - cols) * sizeof(U)), 0);
            AscendC::DataCopyPad(dst, src, p);
        } else {
            for (uint32_t r = 0; r < rows; ++r) {
                AscendC::DataCopy(dst[r * gmStride], src[r * ubStride], cols);
            }
        }
    }

    // grad_out (and input when `withX`) of a unit into the float tiles.
    __aicore__ inline void LoadTile(const TileRows &r, bool withX)
    {
        LocalTensor<T> dyIn = inDy_.template AllocTensor<T>();
        CopyIn(dyIn, dy_[r.gmOffset], r.rows, r.cols, r.gmStride, t_.rowStride);
        inDy_.EnQue(dyIn);
        if (withX) {
            LocalTensor<T> xIn = inX_.template AllocTensor<T>();
            CopyIn(xIn, x_[r.gmOffset], r.rows, r.cols, r.gmStride, t_.rowStride);
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
            AscendC::Cast(dst, src, AscendC::RoundMode::CAST_RINT, n);
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
        if constexpr (!IsSame<T, float>::value) {
            if (!(t_.paramFloat32 >> which & 1)) {
                LocalTensor<T> staged = stage_.template ReinterpretCast<T>();
                CopyIn(staged, paramT_[which][c0], 1, count, count, t_.vecElems);
                AscendC::PipeBarrier<PIPE_ALL>();
                AscendC::Cast(dst, staged, AscendC::RoundMode::CAST_NONE, count);
                return;
            }
        }
        CopyIn(dst, paramF_[which][c0], 1, count, count, t_.vecElems);
        AscendC::PipeBarrier<PIPE_ALL>();
    }

    __aicore__ inline int64_t GroupStart(int64_t g) const { return g * t_.groupWidth; }
    __aicore__ inline uint32_t GroupCount(int64_t g) const
    {
        return uint32_t(Min(uint64_t(t_.groupWidth), uint64_t(t_.channels - GroupStart(g))));
    }

    // weight, mean and invstd of group g (the mode's statistics).
    __aicore__ inline void LoadStats(int64_t g)
    {
        if (statsGroup_ == g) {
            return;
        }
        const int64_t c0 = GroupStart(g);
        const uint32_t n = GroupCount(g);
        LoadParam(WEIGHT, c0, n, weight_, 1.0f);
        if (t_.training) {
            LoadParam(SAVE_MEAN, c0, n, mean_, 0.0f);
            LoadParam(SAVE_INVSTD, c0, n, invstd_, 1.0f);
        } else {
            LoadParam(RUNNING_MEAN, c0, n, mean_, 0.0f);
            LoadParam(RUNNING_VAR, c0, n, invstd_, 1.0f);
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
            if (!t_.gradParamFloat32) {
                LocalTensor<T> staged = stage_.template ReinterpretCast<T>();
                AscendC::Cast(staged, src, AscendC::RoundMode::CAST_RINT, n);
                AscendC::PipeBarrier<PIPE_ALL>();
                CopyOut(gradT_[which][c0], staged, 1, n, n, t_.vecElems);
                AscendC::PipeBarrier<PIPE_ALL>();
                return;
            }
        }
        CopyOut(gradF_[which][c0], src, 1, n, n, t_.vecElems);
        AscendC::PipeBarrier<PIPE_ALL>();
    }

    __aicore__ inline void WriteParamGrads(int64_t g, bool reduced)
    {
        if (reduced) {
            GroupTotals(g);
        }
        const bool wantW = t_.outputMask >> GRAD_WEIGHT & 1, wantB = t_.outputMask >> GRAD_BIAS & 1;
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
            AscendC::Muls(xF_, xF_, invstd, n);
        } else {
            for (uint32_t row = 0; row < r.rows; ++row) {
                const LocalTensor<float> xr = xF_[row * t_.rowStride];
                AscendC::Sub(xr, xr, mean_, r.cols);
                AscendC::Mul(xr, xr, invstd_, r.cols);
            }
        }
    }

    // ---- phase 2: grad_input of one unit (zeros when masked) ----
    __aicore__ inline void GradInputUnit(uint64_t u, bool want)
    {
        const TileRows r = Unit(u);
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
        CopyOut(gi_[r.gmOffset], ready, r.rows, r.cols, r.gmStride, t_.rowStride);
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

    BatchNormBackwardTilingData t_;
    AscendC::TPipe pipe_;
    AscendC::TQue<AscendC::QuePosition::VECIN, QUEUE_DEPTH> inDy_, inX_;
    AscendC::TQue<AscendC::QuePosition::VECOUT, QUEUE_DEPTH> outGi_;
    AscendC::TBuf<AscendC::TPosition::VECCALC> dyBuf_, xBuf_, accDyBuf_, accDyxBuf_, reduceTmpBuf_, partBuf_, syncBuf_;
    AscendC::TBuf<AscendC::TPosition::VECCALC> vecBuf_[CHANNEL_VECS];
    GlobalTensor<T> dy_, x_, gi_, paramT_[PARAM_COUNT], gradT_[2];
    GlobalTensor<float> paramF_[PARAM_COUNT], gradF_[2], part_;
    GlobalTensor<int32_t> sync_;
    LocalTensor<float> dyF_, xF_, accDy_, accDyx_, reduceTmp_, partUb_;
    LocalTensor<float> weight_, mean_, invstd_, coefA_, coefB_, coefK_, totDy_, totDyx_, stage_;
    bool present_[PARAM_COUNT];
    uint64_t unitBegin_ = 0, unitEnd_ = 0;
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

extern "C" __global__ __aicore__ void batch_norm_backward(GM_ADDR grad_out, GM_ADDR input, GM_ADDR weight,
                                                          GM_ADDR running_mean, GM_ADDR running_var,
                                                          GM_ADDR save_mean, GM_ADDR save_invstd,
                                                          GM_ADDR grad_input, GM_ADDR grad_weight,
                                                          GM_ADDR grad_bias, GM_ADDR workspace, GM_ADDR tiling)
{
    REGISTER_TILING_DEFAULT(bnb::BatchNormBackwardTilingData);
    GET_TILING_DATA(tilingData, tiling);
    GM_ADDR params[bnb::PARAM_COUNT] = {weight, running_mean, running_var, save_mean, save_invstd};
    GM_ADDR user = AscendC::GetUserWorkspace(workspace);
#if defined(DTYPE_GRAD_OUT)
    bnb::RunBatchNormBackward<DTYPE_GRAD_OUT>(grad_out, input, params, grad_input, grad_weight, grad_bias, user,
                                              tilingData);
#else
    if (tilingData.dtype == bnb::DT_FLOAT) {
        bnb::RunBatchNormBackward<float>(grad_out, input, params, grad_input, grad_weight, grad_bias, user, tilingData);
    } else if (tilingData.dtype == bnb::DT_FLOAT16) {
        bnb::RunBatchNormBackward<half>(grad_out, input, params, grad_input, grad_weight, grad_bias, user, tilingData);
    } else {
        bnb::RunBatchNormBackward<bfloat16_t>(grad_out, input, params, grad_input, grad_weight, grad_bias, user,
                                              tilingData);
    }
#endif
}
