// Channel-first strategy ([outer, C, inner] with inner > 1, e.g. NCHW): a
// unit is up to tileRows rows (along N) by tileCols columns (along the
// spatial size) of ONE channel, so its statistics and coefficients are
// scalars (lane `groupLane` of the group's channel vectors) and its partial
// sums are two blocks [sum_dy, pad..][sum_dy_xhat, pad..] (UNIT_SLOT_FLOATS
// floats), written by ReduceSum straight into a UB batch of SLOTS_PER_LOAD
// units that goes to the workspace in one copy (KernelState::StoreBatch).
//
// In one launch (flow: batch_norm_backward_kernel.h) the phases
// (batch_norm_kernel_phases.h) call Unit, then Xhat (x - mean) / StorePartial
// in phase 1, CombinePartials when a group is finalised, and ApplyCoefs in phase 2;
// the channel-last twins are in batch_norm_kernel_channel_last.h.
#ifndef BATCH_NORM_KERNEL_CHANNEL_FIRST_H
#define BATCH_NORM_KERNEL_CHANNEL_FIRST_H
#include "batch_norm_kernel_state.h"

namespace bnb {
namespace channel_first {

// Unit u = (channel, row block, column block). `write`: the rows grad_input is
// written from; without DataCopyPad a ragged last column chunk then ends at the
// row end with whole blocks (it recomputes the overlapped elements identically).
__aicore__ inline TileRows Unit(const BatchNormBackwardTilingData &t, uint64_t u, bool write)
{
    TileRows r;
    const uint64_t perChannel = uint64_t(t.rowBlocks) * t.colBlocks;
    r.channel = u / perChannel;
    const uint64_t rb = (u % perChannel) / t.colBlocks;
    const uint64_t cb = u % t.colBlocks;
    uint64_t start = cb * t.tileCols;
    r.cols = uint32_t(Min(uint64_t(t.tileCols), uint64_t(t.inner) - start));
    if (write && t.shiftLast && cb + 1 == uint64_t(t.colBlocks)) {
        start = uint64_t(t.inner) - t.tileCols;
        r.cols = t.tileCols;
        r.overlapsPrev = cb > 0;
    }
    r.gmStride = uint64_t(t.channels) * t.inner;
    r.gmOffset = rb * t.tileRows * r.gmStride + uint64_t(r.channel) * t.inner + start;
    r.group = GroupOf(t, r.channel);
    r.groupLane = uint32_t(r.channel - GroupStart(t, r.group));
    r.rows = uint32_t(Min(uint64_t(t.tileRows), uint64_t(t.outer) - rb * t.tileRows));
    return r;
}

// xF = x - mean over the n tile elements (invstd is applied per channel: ReduceUnit, ApplyCoefs).
// (The scalars were loaded by LoadStats, which ends on a full barrier.)
__aicore__ inline void Xhat(KernelUb &ub, float mean, uint32_t n)
{
    AscendC::Adds(ub.xF, ub.xF, -mean, n);
}

// The scalars of a channel that a unit of it reads (phase 1: mean, invstd; phase 2 also a, k * invstd, b),
// from its lane of the group's vectors (after LoadStats / LoadCoefs, which end on a full barrier).
struct UnitScalars {
    float mean = 0.0f, invstd = 1.0f, a = 0.0f, k = 0.0f, b = 0.0f;
};

__aicore__ inline UnitScalars ScalarsOf(KernelUb &ub, uint32_t lane, bool coefs, bool training)
{
    UnitScalars s;
    if (coefs) {
        s.a = ub.v.coefA.GetValue(lane);
        if (!training) {
            return s;
        }
    }
    s.mean = ub.v.mean.GetValue(lane);
    s.invstd = ub.v.invstd.GetValue(lane);
    if (coefs) {
        s.k = ub.v.coefK.GetValue(lane) * s.invstd;
        s.b = ub.v.coefB.GetValue(lane);
    }
    return s;
}

// dst = a * dy (+ k * xhat + b in training: Muls, Axpy, Adds); dst is dyF, or (float32) the
// grad_input tile, which only the last step writes (ApplyCoefsLast: so a caller may take that tile
// after ApplyCoefsBody, and the wait for its buffer's last store holds only the last step). xF is x as
// loaded: invstd is applied per channel (k * invstd against x - mean), not per element, and
// with `foldMean` (16-bit types, as the single pass) the mean too: (k * invstd)
// * x + (b - k * invstd * mean), so x is not centred per element.
// (s: ScalarsOf the unit's lane; `scaled`: dyF holds a * dy already, `centred`: xF holds x - mean already,
// training only.)
// Every step but the last; returns the last step's addend (training).
__aicore__ inline float ApplyCoefsBody(KernelUb &ub, const UnitScalars &s, uint32_t n, bool training, bool foldMean,
                                       bool scaled = false, bool centred = false)
{
    if (!training) {
        return 0.0f;
    }
    const float a = s.a;
    const float mean = s.mean;
    const float k = s.k;
    float b = s.b;
    if (foldMean) {
        b -= k * mean;
    } else if (!centred) {
        AscendC::Adds(ub.xF, ub.xF, -mean, n);
    }
    if (!scaled) {
        AscendC::Muls(ub.dyF, ub.dyF, a, n);
    }
    AscendC::Axpy(ub.dyF, ub.xF, k, n);  // a * dy + k * x in one instruction (every SoC line has Axpy)
    return b;
}

// The last step, the only one that writes dst (`b`: ApplyCoefsBody's result).
__aicore__ inline void ApplyCoefsLast(KernelUb &ub, const UnitScalars &s, float b, uint32_t n, bool training,
                                      const LocalTensor<float> &dst)
{
    if (!training) {
        AscendC::Muls(dst, ub.dyF, s.a, n);
        return;
    }
    AscendC::Adds(dst, ub.dyF, b, n);
}

__aicore__ inline void ApplyCoefs(KernelUb &ub, const UnitScalars &s, uint32_t n, bool training,
                                  const LocalTensor<float> &dst, bool foldMean, bool scaled = false)
{
    const float b = ApplyCoefsBody(ub, s, n, training, foldMean, scaled);
    ApplyCoefsLast(ub, s, b, n, training, dst);
}

// One of the unit's partial sums from its row accumulator `acc` (cols wide) into `dst`: slot (sum dy), then
// slot[SLOT_FLOATS] (sum dy * (x - mean), which ReduceUnit then scales by invstd), the slot UNIT_SLOT_FLOATS
// floats of UB. Without float ReduceSum (tiling reduceSum 0) the sum is a block of lane partials
// (BlockTreeSum, over `acc` in place: the accumulators are set again for every unit), added up before the
// batch's store (KernelState::FoldBatchLanes) or, kept in UB, by the combine (LaneSum).
__aicore__ inline void StorePartial(KernelUb &ub, const BatchNormBackwardTilingData &t, const LocalTensor<float> &dst,
                                    const LocalTensor<float> &acc, uint32_t cols)
{
#if BNB_SOC_HAS_FLOAT_REDUCE_SUM
    if (HasFloatReduceSum(t)) {
        AscendC::ReduceSum(dst, acc, ub.reduceTmp, cols);
        return;
    }
#endif
    (void)t;
    BlockTreeSumTo(dst, acc, cols);
}

// Without float ReduceSum: whether PairTreeSumTo takes a unit's two row accumulators of `cols` floats.
__aicore__ inline bool PairTree(const BatchNormBackwardTilingData &t, uint32_t cols)
{
    return !HasFloatReduceSum(t) && cols > 2 * SLOT_FLOATS && cols % (2 * SLOT_FLOATS) == 0 &&
           cols / 2 / SLOT_FLOATS <= MAX_REPEAT_STRIDE;
}

// StorePartial of both sums at once (PairTree): BlockTreeSumTo of `dy` into slot and of `dyx` into
// slot[SLOT_FLOATS], the same Adds in the same order, so the same bits. The first level of dyx's tree
// writes its halves' sum beside dy's (dy's upper half, already added, is free), so the two trees are runs
// h = cols / 2 floats apart in `dy`; then a level whose upper part fits one repeat is one instruction, a
// repeat per run (a repeat reads and writes its own run only: 通用地址重叠约束), and the last step, two
// blocks onto one, writes both slots in one instruction; larger levels stay in the count form, run by run.
__aicore__ inline void PairTreeSumTo(const LocalTensor<float> &slot, const LocalTensor<float> &dy,
                                     const LocalTensor<float> &dyx, uint32_t cols)
{
    constexpr uint32_t LANES = uint32_t(AscendC::ONE_REPEAT_BYTE_SIZE) / sizeof(float);
    const uint32_t h = cols / 2;
    AscendC::Add(dy, dy, dy[h], int32_t(h));
    AscendC::Add(dy[h], dyx, dyx[h], int32_t(h));
    const uint8_t rep = Narrow<uint8_t>(h / SLOT_FLOATS, "repeat stride");
    uint32_t n = h;
    while (n > 2 * SLOT_FLOATS) {
        const uint32_t half = uint32_t(AlignUp((n + 1) / 2, SLOT_FLOATS));
        const uint32_t upper = n - half;
        if (upper <= LANES) {
            uint64_t mask[2] = {upper >= 64 ? ~0ull : (1ull << upper) - 1, 0};
            AscendC::Add(dy, dy, dy[half], mask, uint8_t(2), AscendC::BinaryRepeatParams(1, 1, 1, rep, rep, rep));
        } else {
            AscendC::Add(dy, dy, dy[half], int32_t(upper));
            AscendC::Add(dy[h], dy[h], dy[h + half], int32_t(upper));
        }
        n = half;
    }
    uint64_t mask[2] = {(1ull << SLOT_FLOATS) - 1, 0};
    AscendC::Add(slot, dy, dy[SLOT_FLOATS], mask, uint8_t(2),
                 AscendC::BinaryRepeatParams(1, 1, 1, uint8_t(1), rep, rep));
}

// Without float ReduceSum, 16-bit types without mul_add (ascend910's two passes, whose vector unit is the
// busiest pipe): whether InterleavedTreeSumTo takes a unit of `count` floats whose rows are contiguous
// (cols == rowStride: one run, so the sums need no rows).
constexpr uint32_t REPEAT_FLOATS = uint32_t(AscendC::ONE_REPEAT_BYTE_SIZE) / sizeof(float);
constexpr uint32_t REPEAT_PAIR_FLOATS = 2 * REPEAT_FLOATS;
__aicore__ inline bool InterleavedTree(const BatchNormBackwardTilingData &t, uint32_t cols, uint32_t count)
{
    return !HasFloatReduceSum(t) && cols == t.rowStride && count >= 4 * REPEAT_PAIR_FLOATS &&
           count <= t.tileRows * t.rowStride;
}

// Both sums of a unit, `dy` and `dyx` (`count` floats each, in float tiles of `room` floats), into slot and
// slot[SLOT_FLOATS] by one flat tree instead of two row trees and PairTreeSumTo: each sum's upper part (from
// a whole pair of repeats past the middle) onto its lower, count form, until a sum is whole pairs of
// repeats and twice it fits the tile; then one level per sum writes its two halves' sum into every other
// repeat behind dy's run (dy's at repeats 0, 2, 4, ..., dyx's at 1, 3, 5, ...: the repeat form with a
// destination repeat stride of two repeats), so each later level folds the upper pairs of repeats onto the
// lower for both sums in one instruction; the last pair's two repeats halve in place (a repeat per sum) and
// the last level writes both slots. Fewer instructions than the row trees' and the column trees' levels of
// each sum (the vector unit's issue cost); a fixed tree of `count` (not of the cores), so the same bits on
// any core count.
__aicore__ inline void InterleavedTreeSumTo(const LocalTensor<float> &slot, const LocalTensor<float> &dy,
                                            const LocalTensor<float> &dyx, uint32_t count, uint32_t room)
{
    constexpr uint32_t MAX_REPEATS = 255;  // uint8_t repeatTime
    uint32_t n = count;
    while (n % REPEAT_PAIR_FLOATS != 0 || 2 * n > room || n / REPEAT_PAIR_FLOATS > MAX_REPEATS) {
        const uint32_t h = uint32_t(AlignUp((n + 1) / 2, REPEAT_PAIR_FLOATS));
        AscendC::Add(dy, dy, dy[h], int32_t(n - h));
        AscendC::Add(dyx, dyx, dyx[h], int32_t(n - h));
        n = h;
    }
    const uint32_t h = n / 2;
    const LocalTensor<float> pairs = dy[n];  // behind dy's run, in its float tile
    constexpr uint8_t REP = uint8_t(REPEAT_FLOATS / SLOT_FLOATS);
    uint64_t full[2] = {~0ull, 0};
    const AscendC::BinaryRepeatParams apart(1, 1, 1, uint8_t(2 * REP), REP, REP);
    AscendC::Add(pairs, dy, dy[h], full, uint8_t(h / REPEAT_FLOATS), apart);
    AscendC::Add(pairs[REPEAT_FLOATS], dyx, dyx[h], full, uint8_t(h / REPEAT_FLOATS), apart);
    for (uint32_t m = h / REPEAT_FLOATS; m > 1;) {  // pairs of repeats
        const uint32_t hm = (m + 1) / 2;
        AscendC::Add(pairs, pairs, pairs[hm * REPEAT_PAIR_FLOATS], int32_t((m - hm) * REPEAT_PAIR_FLOATS));
        m = hm;
    }
    for (uint32_t w = REPEAT_FLOATS / 2; w >= 2 * SLOT_FLOATS; w /= 2) {
        uint64_t mask[2] = {(1ull << w) - 1, 0};
        AscendC::Add(pairs, pairs, pairs[w], mask, uint8_t(2), AscendC::BinaryRepeatParams(1, 1, 1, REP, REP, REP));
    }
    uint64_t mask[2] = {(1ull << SLOT_FLOATS) - 1, 0};
    AscendC::Add(slot, pairs, pairs[SLOT_FLOATS], mask, uint8_t(2),
                 AscendC::BinaryRepeatParams(1, 1, 1, uint8_t(1), REP, REP));
}

// totDy / totDyx lane lane0 + j = the sum of channel (c0 + j)'s partials, in unit order (j < n).
// The channels' partials are contiguous in the workspace: they come in copies
// of up to the whole UB batch (PartSlots units), across
// channel boundaries, so a core's share of small channels takes one round trip.
__aicore__ inline void CombineChannels(KernelUb &ub, const GlobalTensor<float> &part,
                                       const BatchNormBackwardTilingData &t, int64_t c0, uint32_t n,
                                       uint32_t lane0 = 0)
{
    const uint64_t perChannel = uint64_t(t.rowBlocks) * t.colBlocks;
    const uint64_t first = uint64_t(c0) * perChannel, last = first + uint64_t(n) * perChannel;
    const uint64_t batch = PartSlots(t);
    uint32_t j = lane0;
    uint64_t channelEnd = first + perChannel;
    float sumDy = 0.0f, sumDyx = 0.0f;
    for (uint64_t s0 = first; s0 < last; s0 += batch) {
        const uint32_t k = uint32_t(Min(batch, last - s0));
        AscendC::DataCopy(ub.partUb, part[s0 * UNIT_SLOT_FLOATS], k * UNIT_SLOT_FLOATS);
        SetWaitFlag<AscendC::HardEvent::MTE2_S>();  // the batch in UB before the scalar reads (not PIPE_ALL:
                                                    // stores still in flight need not land first)
        for (uint32_t s = 0; s < k; ++s) {
            sumDy += ub.partUb.GetValue(s * UNIT_SLOT_FLOATS);  // lane partials folded before the store
            sumDyx += ub.partUb.GetValue(s * UNIT_SLOT_FLOATS + SLOT_FLOATS);  // (FoldBatchLanes)
            if (s0 + s + 1 == channelEnd) {
                ub.v.totDy.SetValue(j, sumDy);
                ub.v.totDyx.SetValue(j, sumDyx);
                ++j;
                channelEnd += perChannel;
                sumDy = 0.0f;
                sumDyx = 0.0f;
            }
        }
        SetWaitFlag<AscendC::HardEvent::S_MTE2>();  // the scalar reads before the next batch lands
    }
}

// The two sums of slots [first, first + count) of `slots`, in slot order (`lanes`: each a block of lane
// partials, LaneSum).
__aicore__ inline void SlotSums(const LocalTensor<float> &slots, uint64_t first, uint64_t count, bool lanes,
                                float *sumDy, float *sumDyx)
{
    for (uint64_t s = first; s < first + count; ++s) {
        *sumDy += LaneSum(slots, uint32_t(s * UNIT_SLOT_FLOATS), lanes);
        *sumDyx += LaneSum(slots, uint32_t(s * UNIT_SLOT_FLOATS + SLOT_FLOATS), lanes);
    }
}

// The same for the n channels of a group whose partials are in UB: `slots` holds its units' partials in
// unit order, still from phase 1 (KernelState keepPartials) or loaded from the workspace (`stored`: their
// lane partials already folded, FoldBatchLanes).
__aicore__ inline void CombineSlots(KernelUb &ub, const LocalTensor<float> &slots, const BatchNormBackwardTilingData &t,
                                    bool stored, uint32_t n, uint32_t lane0 = 0)
{
    const uint64_t perChannel = uint64_t(t.rowBlocks) * t.colBlocks;
    const bool lanes = !stored && !HasFloatReduceSum(t);
    for (uint32_t j = 0; j < n; ++j) {
        float sumDy = 0.0f, sumDyx = 0.0f;
        SlotSums(slots, j * perChannel, perChannel, lanes, &sumDy, &sumDyx);
        ub.v.totDy.SetValue(lane0 + j, sumDy);
        ub.v.totDyx.SetValue(lane0 + j, sumDyx);
    }
}

// The same for one channel, lane `lane`, whose units' partials lie in a ring of `ring` slots from
// `first` (GroupByGroup's channel pipeline): the same order, so the same bits.
__aicore__ inline void CombineRing(KernelUb &ub, const BatchNormBackwardTilingData &t, const LocalTensor<float> &slots,
                                   uint64_t first, uint64_t count, uint64_t ring, uint32_t lane)
{
    const bool lanes = !HasFloatReduceSum(t);
    float sumDy = 0.0f, sumDyx = 0.0f;
    for (uint64_t s = 0; s < count; ++s) {
        const uint32_t at = uint32_t((first + s) % ring) * UNIT_SLOT_FLOATS;
        sumDy += LaneSum(slots, at, lanes);
        sumDyx += LaneSum(slots, at + SLOT_FLOATS, lanes);
    }
    ub.v.totDy.SetValue(lane, sumDy);
    ub.v.totDyx.SetValue(lane, sumDyx);
}

// The same for the channels of group g.
__aicore__ inline void CombinePartials(KernelUb &ub, const GlobalTensor<float> &part,
                                       const BatchNormBackwardTilingData &t, int64_t g)
{
    CombineChannels(ub, part, t, GroupStart(t, g), GroupCount(t, g));
}

}  // namespace channel_first
}  // namespace bnb
#endif  // BATCH_NORM_KERNEL_CHANNEL_FIRST_H
