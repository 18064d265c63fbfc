// Per-channel vectors of a channel group between GM and UB: the parameters
// and statistics in (weight, mean, invstd of the mode), the per-channel
// outputs out (grad_weight, grad_bias, and the SyncBatchNorm sums). Always
// float in UB; in GM each is stored as T or as float (tiling paramFloat32 /
// gradParamFloat32; the sums follow save_mean's dtype).
//
// In one launch (flow: batch_norm_backward_kernel.h) the phases
// (batch_norm_kernel_phases.h) call LoadStats before they touch a unit of a
// new group and WriteChannels when they finalise a group; the SyncBatchNorm
// steps (batch_norm_kernel_sync.h) read and write the sums through LoadSum /
// WriteChannels.
#ifndef BATCH_NORM_KERNEL_CHANNEL_VECTORS_H
#define BATCH_NORM_KERNEL_CHANNEL_VECTORS_H
#include "batch_norm_kernel_state.h"

namespace bnb {

// Channels [c0, c0 + count) of a per-channel vector stored as T (srcT) or,
// when isFloat (or T is float), as float (srcF), into dst as float.
// `batched`: a float load is left in flight (the caller ends a batch of
// loads with one PipeBarrier<PIPE_ALL>, so their latencies overlap).
template <typename T>
__aicore__ inline void LoadChannels(KernelState<T> &k, const GlobalTensor<T> &srcT, const GlobalTensor<float> &srcF,
                                    bool isFloat, int64_t c0, uint32_t count, const LocalTensor<float> &dst,
                                    bool batched = false)
{
    if constexpr (!IsSame<T, float>::value) {
        if (!isFloat) {
            LocalTensor<T> staged = k.ub.v.stage.template ReinterpretCast<T>();
            k.copy.In(staged, srcT, c0, 1, count, count, k.t.vecElems, k.t.channels, true);
            AscendC::PipeBarrier<PIPE_ALL>();
            AscendC::Cast(dst, staged, AscendC::RoundMode::CAST_NONE, count);
            AscendC::PipeBarrier<PIPE_ALL>();  // the next load reuses `stage`: the Cast must have read it
            return;
        }
    }
    k.copy.In(dst, srcF, c0, 1, count, count, k.t.vecElems, k.t.channels, true);
    if (!batched) {
        AscendC::PipeBarrier<PIPE_ALL>();
    }
}

// Per-channel input `which` (enum Param), or `absent` everywhere when it is not given.
template <typename T>
__aicore__ inline void LoadParam(KernelState<T> &k, uint32_t which, int64_t c0, uint32_t count,
                                 const LocalTensor<float> &dst, float absent, bool batched = false)
{
    if (!k.present[which]) {
        AscendC::Duplicate(dst, absent, k.t.vecElems);
        return;
    }
    LoadChannels(k, k.paramT[which], k.paramF[which], k.t.paramFloat32 >> which & 1, c0, count, dst, batched);
}

// The SyncBatchNorm sums are stored in save_mean's dtype.
template <typename T>
__aicore__ inline bool SumFloat32(const KernelState<T> &k)
{
    return k.t.paramFloat32 >> SAVE_MEAN & 1;
}

// Per-channel sum `which` (SUM_DY / SUM_DY_XMU) into dst, zero past `count`.
template <typename T>
__aicore__ inline void LoadSum(KernelState<T> &k, uint32_t which, int64_t c0, uint32_t count,
                               const LocalTensor<float> &dst)
{
    AscendC::Duplicate(dst, 0.0f, k.t.vecElems);
    AscendC::PipeBarrier<PIPE_ALL>();
    LoadChannels(k, k.gradT[which], k.gradF[which], SumFloat32(k), c0, count, dst);
}

// Training: the statistics of the mode, in LoadStats order (weight, save_mean, save_invstd).
constexpr uint32_t TRAIN_STATS = 3;

// Training statistic i of the group in UB (float), and where it lands first when it is stored in a 16-bit
// type: the two halves of `stage` (vecElems floats hold 2 x vecElems of T), then coefB (the group's
// coefficients are computed after its statistics, coefGroup -1), so the three loads are in flight together.
template <typename T>
__aicore__ inline LocalTensor<float> StatDst(KernelState<T> &k, uint32_t i)
{
    return i == 0 ? k.ub.v.weight : (i == 1 ? k.ub.v.mean : k.ub.v.invstd);
}
template <typename T>
__aicore__ inline LocalTensor<T> StatStaging(KernelState<T> &k, uint32_t i)
{
    return i == 2 ? k.ub.v.coefB.template ReinterpretCast<T>()
                  : k.ub.v.stage.template ReinterpretCast<T>()[i * k.t.vecElems];
}
__aicore__ inline void StatParam(uint32_t i, uint32_t *which, float *absent)
{
    *which = i == 0 ? uint32_t(WEIGHT) : (i == 1 ? uint32_t(SAVE_MEAN) : uint32_t(SAVE_INVSTD));
    *absent = i == 0 ? DEFAULT_WEIGHT : (i == 1 ? 0.0f : 1.0f);
}
template <typename T>
__aicore__ inline bool StatCast(const KernelState<T> &k, uint32_t which)
{
    return !IsSame<T, float>::value && k.present[which] && !(k.t.paramFloat32 >> which & 1);
}
// Elements of one 32-byte block of statistic `which` in GM (T where it is cast, else float).
template <typename T>
__aicore__ inline uint32_t StatBlockElems(const KernelState<T> &k, uint32_t which)
{
    return StatCast(k, which) ? uint32_t(BLOCK_BYTES / sizeof(T)) : SLOT_FLOATS;
}

// Where a deferred tail block lands: statistic i's float vector, from the block after the group's lanes.
__aicore__ inline uint32_t StatTailSpot(uint32_t n)
{
    return uint32_t(AlignUp(n, SLOT_FLOATS));
}

// Statistic i of group g, moved with whole blocks, whose last lanes lie in a block that would reach past
// the vector's end in GM (the last group of a vector that is not whole blocks of the group): GmUbCopy::InRow
// moves them through its one-block scratch behind two full barriers, a round trip per statistic. Deferred
// (IssueStatLoads' deferTails), the block that ends at the vector's end lands in the statistic's float
// vector past the group's lanes (StatTailSpot, where the vector has room), in flight with the other loads,
// and FixStatTails moves its lanes into place with the scalar unit once they landed: one round trip for
// all (16-bit statistics: into their staging, cast after, CastStatTails).
template <typename T>
__aicore__ inline bool DeferredStatTail(const KernelState<T> &k, int64_t g, uint32_t which)
{
#if BNB_SOC_HAS_DATA_COPY_PAD
    if (k.t.usePad || k.t.vecPad) {
        return false;
    }
#endif
    if (!k.present[which]) {
        return false;
    }
    const uint64_t c0 = uint64_t(GroupStart(k.t, g)), limit = uint64_t(k.t.channels);
    const uint32_t n = GroupCount(k.t, g), pb = StatBlockElems(k, which), full = n / pb * pb;
    return n % pb != 0 && c0 + full + pb > limit && limit >= pb &&
           AlignUp(n, SLOT_FLOATS) + SLOT_FLOATS <= k.t.vecElems;
}

// Training: the loads of group g's statistics, issued together (none waits for another); they overwrite
// what the scalar and vector units read of the last group. FinishStatLoads, once they landed, completes
// them (LoadStats between a full barrier; the single pass issues its first loads of x and dy between, and
// defers the tails, DeferredStatTail, to FixStatTails).
template <typename T>
__aicore__ inline void IssueStatLoads(KernelState<T> &k, int64_t g, bool deferTails = false)
{
    const int64_t c0 = GroupStart(k.t, g);
    const uint32_t n = GroupCount(k.t, g);
    VectorAndScalarBeforeMte2();
    for (uint32_t i = 0; i < TRAIN_STATS; ++i) {
        uint32_t which = 0;
        float absent = 0.0f;
        StatParam(i, &which, &absent);
        if (!k.present[which]) {
            AscendC::Duplicate(StatDst(k, i), absent, k.t.vecElems);
        } else if (deferTails && DeferredStatTail(k, g, which)) {
            const uint32_t pb = StatBlockElems(k, which), full = n / pb * pb;
            const uint64_t bs = uint64_t(k.t.channels) - pb;
            if (StatCast(k, which)) {
                if constexpr (!IsSame<T, float>::value) {
                    if (full > 0) {
                        AscendC::DataCopy(StatStaging(k, i), k.paramT[which][uint64_t(c0)], full);
                    }
                    AscendC::DataCopy(StatDst(k, i)[StatTailSpot(n)].template ReinterpretCast<T>(),
                                      k.paramT[which][bs], pb);
                }
            } else {
                if (full > 0) {
                    AscendC::DataCopy(StatDst(k, i), k.paramF[which][uint64_t(c0)], full);
                }
                AscendC::DataCopy(StatDst(k, i)[StatTailSpot(n)], k.paramF[which][bs], pb);
            }
        } else if (StatCast(k, which)) {
            if constexpr (!IsSame<T, float>::value) {
                k.copy.In(StatStaging(k, i), k.paramT[which], c0, 1, n, n, k.t.vecElems, k.t.channels, true);
            }
        } else {
            k.copy.In(StatDst(k, i), k.paramF[which], c0, 1, n, n, k.t.vecElems, k.t.channels, true);
        }
    }
}

// After IssueStatLoads(deferTails) landed (the scalar unit behind them): the deferred tails into place,
// float statistics into their vector, 16-bit ones into their staging (CastStatTails casts them). Returns
// whether it wrote any (then the vector unit waits for the scalar writes, S_V, before it reads them).
template <typename T>
__aicore__ inline bool FixStatTails(KernelState<T> &k, int64_t g)
{
    const uint64_t c0 = uint64_t(GroupStart(k.t, g));
    const uint32_t n = GroupCount(k.t, g);
    bool wrote = false;
    for (uint32_t i = 0; i < TRAIN_STATS; ++i) {
        uint32_t which = 0;
        float absent = 0.0f;
        StatParam(i, &which, &absent);
        if (!DeferredStatTail(k, g, which)) {
            continue;
        }
        const uint32_t pb = StatBlockElems(k, which), full = n / pb * pb;
        const uint32_t from = uint32_t(c0 + full - (uint64_t(k.t.channels) - pb));  // the tail's first lane
        const LocalTensor<float> dst = StatDst(k, i);
        if (StatCast(k, which)) {
            if constexpr (!IsSame<T, float>::value) {
                const LocalTensor<T> land = dst[StatTailSpot(n)].template ReinterpretCast<T>();
                const LocalTensor<T> staged = StatStaging(k, i);
                for (uint32_t j = full; j < n; ++j) {
                    staged.SetValue(j, land.GetValue(from + j - full));
                }
            }
        } else {
            const LocalTensor<float> land = dst[StatTailSpot(n)];
            for (uint32_t j = full; j < n; ++j) {
                dst.SetValue(j, land.GetValue(from + j - full));
            }
        }
        wrote = true;
    }
    return wrote;
}

// Which 16-bit statistics CastStats casts: all, or only those whose tail IssueStatLoads deferred (or not).
enum StatPick : uint32_t { STATS_ALL, STATS_NOT_DEFERRED, STATS_DEFERRED };

// Group g's 16-bit statistics, landed in their staging, cast to float (the `pick` of them). Returns whether
// it cast any.
template <typename T>
__aicore__ inline bool CastStats(KernelState<T> &k, int64_t g, StatPick pick)
{
    bool cast = false;
    if constexpr (!IsSame<T, float>::value) {
        const uint32_t n = GroupCount(k.t, g);
        for (uint32_t i = 0; i < TRAIN_STATS; ++i) {
            uint32_t which = 0;
            float absent = 0.0f;
            StatParam(i, &which, &absent);
            if (!StatCast(k, which) ||
                (pick != STATS_ALL && DeferredStatTail(k, g, which) != (pick == STATS_DEFERRED))) {
                continue;
            }
            AscendC::Cast(StatDst(k, i), StatStaging(k, i), AscendC::RoundMode::CAST_NONE, n);
            cast = true;
        }
    } else {
        (void)k;
        (void)g;
        (void)pick;
    }
    return cast;
}

// After FixStatTails and its S_V: the deferred 16-bit statistics cast to float (FinishStatLoads left them).
// Returns whether it cast any.
template <typename T>
__aicore__ inline bool CastStatTails(KernelState<T> &k, int64_t g)
{
    return CastStats(k, g, STATS_DEFERRED);
}

// Training, on the vector unit once IssueStatLoads' loads landed: the 16-bit statistics cast to float.
// deferTails: as IssueStatLoads was; the deferred ones are cast by CastStatTails.
template <typename T>
__aicore__ inline void FinishStatLoads(KernelState<T> &k, int64_t g, bool deferTails = false)
{
    CastStats(k, g, deferTails ? STATS_NOT_DEFERRED : STATS_ALL);
    k.statsGroup = g;
    k.coefGroup = -1;
}

// After IssueStatLoads(k, g, deferTails) landed (the vector unit behind them): FinishStatLoads, then the
// deferred tails (FixStatTails' scalar writes, their casts); ends with the casts before the scalar unit's reads.
template <typename T>
__aicore__ inline void FinishDeferredStatLoads(KernelState<T> &k, int64_t g)
{
    FinishStatLoads(k, g, true);
    SetWaitFlag<AscendC::HardEvent::V_S>();  // the landed tails' blocks (MTE2, then V) before the scalar reads
    if (FixStatTails(k, g)) {
        SetWaitFlag<AscendC::HardEvent::S_V>();  // the tails' scalar writes before their casts
        if (CastStatTails(k, g)) {
            SetWaitFlag<AscendC::HardEvent::V_S>();
        }
    }
}

// weight, mean and invstd of group g (the mode's statistics), unless already in UB:
// training: save_mean / save_invstd (required then); inference: running_mean
// and 1 / sqrt(running_var + eps).
template <typename T>
__aicore__ inline void LoadStats(KernelState<T> &k, int64_t g)
{
    if (k.statsGroup == g) {
        return;
    }
    if (k.t.training) {
        // the three loads in flight together, one barrier for them; a tail block that would reach past the
        // vector's end in GM deferred (DeferredStatTail), not a round trip of its own per statistic
        IssueStatLoads(k, g, true);
        AscendC::PipeBarrier<PIPE_ALL>();
        FinishDeferredStatLoads(k, g);
        AscendC::PipeBarrier<PIPE_ALL>();
        return;
    }
    const int64_t c0 = GroupStart(k.t, g);
    const uint32_t n = GroupCount(k.t, g);
    ChannelVecs &v = k.ub.v;
    LoadParam(k, WEIGHT, c0, n, v.weight, DEFAULT_WEIGHT);
    LoadParam(k, RUNNING_MEAN, c0, n, v.mean, DEFAULT_RUNNING_MEAN);
    LoadParam(k, RUNNING_VAR, c0, n, v.invstd, DEFAULT_RUNNING_VAR);
    AscendC::Adds(v.invstd, v.invstd, k.t.eps, k.t.vecElems);
    AscendC::Sqrt(v.invstd, v.invstd, k.t.vecElems);
    AscendC::Duplicate(v.coefB, 1.0f, k.t.vecElems);
    AscendC::Div(v.invstd, v.coefB, v.invstd, k.t.vecElems);
    AscendC::PipeBarrier<PIPE_ALL>();
    k.statsGroup = g;
    k.coefGroup = -1;
}

// Per-channel output `which` (OUT_GRAD_WEIGHT, OUT_GRAD_BIAS, SUM_DY, SUM_DY_XMU)
// of channels [c0, c0 + n) from src. `batched`: a float store is left in
// flight (the caller's next write ends on the full barrier for both, and src
// is not written before it).
template <typename T>
__aicore__ inline void WriteChannelRange(KernelState<T> &k, uint32_t which, int64_t c0, uint32_t n,
                                         const LocalTensor<float> &src, bool batched = false)
{
    if constexpr (!IsSame<T, float>::value) {
        if (which >= SUM_DY ? !SumFloat32(k) : !k.t.gradParamFloat32) {
            LocalTensor<T> staged = k.ub.v.stage.template ReinterpretCast<T>();
            AscendC::Cast(staged, src, NarrowRound<T>(), n);
            AscendC::PipeBarrier<PIPE_ALL>();
            k.copy.Out(k.gradT[which], staged, c0, 1, n, n, k.t.vecElems, true);
            AscendC::PipeBarrier<PIPE_ALL>();
            return;
        }
    }
    k.copy.Out(k.gradF[which], src, c0, 1, n, n, k.t.vecElems, true);
    if (!batched) {
        AscendC::PipeBarrier<PIPE_ALL>();
    }
}

// Outputs `which0` and `which1` (both stored in T, the same conversion) of channels [c0, c0 + n) from
// src0 / src1: both cast into the two halves of `stage` (vecElems floats hold 2 x vecElems of T), both
// stores in flight together, a V_MTE3 event after the casts and one barrier after the stores.
template <typename T>
__aicore__ inline void WriteChannelPairT(KernelState<T> &k, uint32_t which0, uint32_t which1, int64_t c0, uint32_t n,
                                         const LocalTensor<float> &src0, const LocalTensor<float> &src1)
{
    LocalTensor<T> staged = k.ub.v.stage.template ReinterpretCast<T>();
    AscendC::Cast(staged, src0, NarrowRound<T>(), n);
    AscendC::Cast(staged[k.t.vecElems], src1, NarrowRound<T>(), n);
    SetWaitFlag<AscendC::HardEvent::V_MTE3>();  // the casts before their stores (stores still in flight, such
                                                // as PublishTotals', need not land first)
    k.copy.Out(k.gradT[which0], staged, c0, 1, n, n, k.t.vecElems, true);
    k.copy.Out(k.gradT[which1], staged[k.t.vecElems], c0, 1, n, n, k.t.vecElems, true);
    AscendC::PipeBarrier<PIPE_ALL>();
}

// The same for the channels of group g.
template <typename T>
__aicore__ inline void WriteChannels(KernelState<T> &k, uint32_t which, int64_t g, const LocalTensor<float> &src)
{
    WriteChannelRange(k, which, GroupStart(k.t, g), GroupCount(k.t, g), src);
}

}  // namespace bnb
#endif  // BATCH_NORM_KERNEL_CHANNEL_VECTORS_H
