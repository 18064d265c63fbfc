// The SyncBatchNorm backward modes of the BatchNormBackward kernel. A
// SyncBatchNorm backward is two launches around an all-reduce of the sums:
// - MODE_REDUCE (batch_norm_reduce_backward.cpp): phase 1 with x - mean in
//   place of xhat, then per group sum_dy, sum_dy_xmu, grad_weight =
//   sum_dy_xmu * invstd and grad_bias = sum_dy (ReduceOutputs);
// - MODE_ELEMT (batch_norm_elemt_backward.cpp): phase 2 only, the group
//   totals read from the all-reduced sums (ElemtTotals) and 1 / n, n =
//   sum(counter) (CountInverse).
// Both run in training mode with weight / mean / invstd as the per-channel
// inputs (mean and invstd in the save_mean / save_invstd slots).
//
// In one launch (flow: batch_norm_backward_kernel.h) the phases
// (batch_norm_kernel_phases.h) call ElemtTotals / ReduceOutputs where the
// full BatchNormBackward combines partials / writes grad_weight and grad_bias.
#ifndef BATCH_NORM_KERNEL_SYNC_H
#define BATCH_NORM_KERNEL_SYNC_H
#include "batch_norm_kernel_channel_vectors.h"
#include "batch_norm_sync_tiling.h"

namespace bnb {

// What one launch computes: the whole BatchNormBackward, or one step of the
// SyncBatchNorm backward.
enum KernelMode : uint32_t { MODE_FULL = 0, MODE_REDUCE = 1, MODE_ELEMT = 2 };

// sum_dy / sum_dy_xmu: outputs of REDUCE, inputs of ELEMT.
template <typename T>
__aicore__ inline void SetSums(KernelState<T> &k, GM_ADDR sumDy, GM_ADDR sumDyXmu)
{
    k.SetChannelOut(SUM_DY, sumDy);
    k.SetChannelOut(SUM_DY_XMU, sumDyXmu);
}

// Sum of `len` counts of one type, read with scalar loads after a cache flush.
template <typename C, typename Acc>
__aicore__ inline Acc SumCounts(GmUbCopy &copy, GM_ADDR counter, int64_t len)
{
    GlobalTensor<C> c;
    c.SetGlobalBuffer(reinterpret_cast<__gm__ C *>(counter), len);
    copy.Flush(c);
    Acc total = 0;
    for (int64_t i = 0; i < len; ++i) total += c.GetValue(uint64_t(i));
    return total;
}

// 1 / n, n = the sum of the `len` entries of `counter` (CounterType `type`); 0 when n is 0.
__aicore__ inline float CountInverse(GmUbCopy &copy, GM_ADDR counter, int64_t len, uint32_t type)
{
    float n = 0.0f;
    if (type == COUNTER_INT32) {
        n = float(SumCounts<int32_t, int64_t>(copy, counter, len));
    } else if (type == COUNTER_INT64) {
        n = float(SumCounts<int64_t, int64_t>(copy, counter, len));
    } else {
        n = SumCounts<float, float>(copy, counter, len);
    }
    return n > 0.0f ? 1.0f / n : 0.0f;
}

// ELEMT: the totals of group g from the sums; sum(dy * xhat) = sum_dy_xmu * invstd.
template <typename T>
__aicore__ inline void ElemtTotals(KernelState<T> &k, int64_t g)
{
    const uint32_t n = GroupCount(k.t, g);
    ChannelVecs &v = k.ub.v;
    LoadStats(k, g);
    LoadSum(k, SUM_DY, GroupStart(k.t, g), n, v.totDy);
    LoadSum(k, SUM_DY_XMU, GroupStart(k.t, g), n, v.totDyx);
    AscendC::PipeBarrier<PIPE_ALL>();
    AscendC::Mul(v.totDyx, v.totDyx, v.invstd, k.t.vecElems);
    AscendC::PipeBarrier<PIPE_ALL>();
}

// REDUCE: the per-channel outputs of group g from its totals (the partials
// held dy * (x - mean)); an output whose mask bit is off is zero-filled
// (bit GRAD_INPUT: the two sums).
template <typename T>
__aicore__ inline void ReduceOutputs(KernelState<T> &k, int64_t g)
{
    const uint32_t mask = k.t.outputMask;
    const bool wantS = mask >> GRAD_INPUT & 1, wantW = mask >> GRAD_WEIGHT & 1, wantB = mask >> GRAD_BIAS & 1;
    ChannelVecs &v = k.ub.v;
    AscendC::Duplicate(v.coefA, 0.0f, k.t.vecElems);
    LoadStats(k, g);
    AscendC::Mul(v.coefB, v.totDyx, v.invstd, k.t.vecElems);
    AscendC::PipeBarrier<PIPE_ALL>();
    k.coefGroup = -1;
    WriteChannels(k, SUM_DY, g, wantS ? v.totDy : v.coefA);
    WriteChannels(k, SUM_DY_XMU, g, wantS ? v.totDyx : v.coefA);
    WriteChannels(k, OUT_GRAD_WEIGHT, g, wantW ? v.coefB : v.coefA);
    WriteChannels(k, OUT_GRAD_BIAS, g, wantB ? v.totDy : v.coefA);
}

}  // namespace bnb
#endif  // BATCH_NORM_KERNEL_SYNC_H
