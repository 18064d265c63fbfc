// The phases of a BatchNormBackward launch, one unit or one group at a time:
// - phase 1, reduce (ReduceUnit): a unit's partial sums of dy and dy * xhat
//   into the workspace;
// - finalise (GroupTotals, LoadCoefs, WriteParamGrads): a group's totals,
//   combined from its units' partials in unit order, then either its
//   grad_input coefficients or its grad_weight / grad_bias;
// - phase 2, apply (GradInputUnit, FlatRegionGradInput): grad_input of a unit
//   (or flat region) from its coefficients; zeros when masked.
// The layout-specific steps are those of the unit's strategy
// (batch_norm_kernel_channel_first.h / _channel_last.h / _flat.h); the
// SyncBatchNorm modes change the finalise step (batch_norm_kernel_sync.h).
//
// In one launch (flow: batch_norm_backward_kernel.h) Process calls these over
// the core's share (batch_norm_kernel_work_split.h).
#ifndef BATCH_NORM_KERNEL_PHASES_H
#define BATCH_NORM_KERNEL_PHASES_H
#include "batch_norm_kernel_channel_first.h"
#include "batch_norm_kernel_channel_last.h"
#include "batch_norm_kernel_flat.h"
#include "batch_norm_kernel_channel_vectors.h"
#include "batch_norm_kernel_sync.h"

namespace bnb {

// The rows of unit u in its layout (`write`: the rows grad_input is written from).
__aicore__ inline TileRows UnitRows(const BatchNormBackwardTilingData &t, uint64_t u, bool write = false)
{
    return ChannelFirst(t) ? channel_first::Unit(t, u, write) : channel_last::Unit(t, u);
}

// xF = (x - mean) * invstd over the tile (REDUCE: x - mean), channel-last (channel-first applies invstd
// per channel: ReduceUnit, channel_first::ApplyCoefs).
template <uint32_t MODE, typename T>
__aicore__ inline void Xhat(KernelState<T> &k, const TileRows &r, uint32_t n)
{
    (void)n;
    channel_last::Xhat(k.ub, r, k.t.rowStride, MODE != MODE_REDUCE);
}

// ---- tile I/O ----
// Double buffering: the loads of a tile are issued (IssueLoad) one unit
// ahead of its compute (TakeTile), into the other buffer of the depth-2
// queues, so MTE2 brings tile u + 1 while V computes tile u and MTE3 stores
// tile u - 1 (the queues' hand-overs are the MTE2 -> V / V -> MTE3 events).
template <typename T>
__aicore__ inline void IssueLoad(KernelState<T> &k, const TileRows &r, bool withX)
{
    KernelUb &ub = k.ub;
    LocalTensor<T> dyIn = ub.inDy.template AllocTensor<T>();
    k.copy.In(dyIn, k.dy, r.gmOffset, r.rows, r.cols, r.gmStride, k.t.rowStride, k.total);
    ub.inDy.EnQue(dyIn);
    if (withX) {
        LocalTensor<T> xIn = ub.inX.template AllocTensor<T>();
        k.copy.In(xIn, k.x, r.gmOffset, r.rows, r.cols, r.gmStride, k.t.rowStride, k.total);
        ub.inX.EnQue(xIn);
    }
}

// The oldest issued tile of one input (its queue `in`) into its float tile `f`: float32 computes in place in
// the dequeued buffer (`held` until ReleaseTile), other types are cast into `f`.
template <typename T, typename Q>
__aicore__ inline void TakeInput(Q &in, LocalTensor<float> &f, bool &held, uint32_t n)
{
    if constexpr (IsSame<T, float>::value) {
        (void)n;
        f = in.template DeQue<float>();
        held = true;
    } else {
        LocalTensor<T> t = in.template DeQue<T>();
        ToFloat(f, t, n);
        in.FreeTensor(t);
    }
}

// TakeTile's halves: dy of the oldest issued tile into dyF, then x into xF (its loads land after dy's, so
// phase 1 sums dy's rows in between).
template <typename T>
__aicore__ inline void TakeDy(KernelState<T> &k, uint32_t n)
{
    TakeInput<T>(k.ub.inDy, k.ub.dyF, k.ub.dyHeld, n);
}

template <typename T>
__aicore__ inline void TakeX(KernelState<T> &k, uint32_t n)
{
    TakeInput<T>(k.ub.inX, k.ub.xF, k.ub.xHeld, n);
}

// n elements of the oldest issued tile into the float tiles: float32 computes
// in place in the dequeued buffers (held until ReleaseTile, so the load two
// units ahead waits for this unit's compute), other types are cast into dyF / xF.
template <typename T>
__aicore__ inline void TakeTile(KernelState<T> &k, bool withX, uint32_t n)
{
    KernelUb &ub = k.ub;
    if (ub.taken) {
        ub.taken = false;
        return;
    }
    if (ub.aheadHeld) {
        ub.dyF = ub.aheadDy;
        ub.xF = ub.aheadX;
        ub.dyHeld = true;
        ub.xHeld = withX;
        ub.aheadHeld = false;
        return;
    }
    TakeDy(k, n);
    if (withX) {
        TakeX(k, n);
    }
}

// float32: the oldest issued tile dequeued and kept aside (its buffers held) for the next TakeTile, so the
// units whose loads were issued after it take theirs first (BatchNormBackwardKernel::AheadTileLead).
template <typename T>
__aicore__ inline void HoldTile(KernelState<T> &k, bool withX)
{
    if constexpr (IsSame<T, float>::value) {
        KernelUb &ub = k.ub;
        ub.aheadDy = ub.inDy.template DeQue<float>();
        if (withX) {
            ub.aheadX = ub.inX.template DeQue<float>();
        }
        ub.aheadHeld = true;
    } else {
        (void)k;
        (void)withX;
    }
}

// float32: the tile's queue buffers back to the loads, once the unit's compute no longer reads them.
template <typename T>
__aicore__ inline void ReleaseTile(KernelState<T> &k)
{
    if constexpr (IsSame<T, float>::value) {
        KernelUb &ub = k.ub;
        if (ub.dyHeld) {
            ub.inDy.FreeTensor(ub.dyF);
            ub.dyHeld = false;
        }
        if (ub.xHeld) {
            ub.inX.FreeTensor(ub.xF);
            ub.xHeld = false;
        }
    } else {
        (void)k;
    }
}

// One tile without look-ahead (flat regions).
template <typename T>
__aicore__ inline void LoadTile(KernelState<T> &k, const TileRows &r, bool withX, uint32_t n)
{
    IssueLoad(k, r, withX);
    TakeTile(k, withX, n);
}

// The grad_input tile of the unit (its buffer's previous store has left UB: the queue's hand-over).
template <typename T>
__aicore__ inline LocalTensor<T> OutTile(KernelState<T> &k)
{
    return k.ub.outGi.template AllocTensor<T>();
}

// grad_input zeros (masked) into `out`: float32 straight, other types through dyF (returns `out` is written).
template <typename T>
__aicore__ inline bool ZeroTile(KernelState<T> &k, const LocalTensor<T> &out, uint32_t n)
{
    if constexpr (IsSame<T, float>::value) {
        AscendC::Duplicate(out, 0.0f, n);
        return true;
    } else {
        (void)out;
        AscendC::Duplicate(k.ub.dyF, 0.0f, n);
        return false;
    }
}

// The tile's grad_input `out` to GM (flat: one contiguous region): n floats of
// dyF converted into it first unless `written`; the input tiles released.
template <typename T>
__aicore__ inline void StoreGradInput(KernelState<T> &k, const TileRows &r, LocalTensor<T> &out, uint32_t n,
                                      bool flat, bool written)
{
    KernelUb &ub = k.ub;
    if (!written) {
        FromFloat(out, ub.dyF, n);
    }
    ReleaseTile(k);
    ub.outGi.EnQue(out);
    LocalTensor<T> ready = ub.outGi.template DeQue<T>();
    if (r.overlapsPrev) {
        // Its GM window overlaps an earlier store of this core (same bytes, recomputed): MTE3 copies
        // to overlapping addresses must be ordered by the kernel (PipeBarrier(ISASI).md).
        AscendC::PipeBarrier<PIPE_MTE3>();
    }
    if (flat) {
        AscendC::PipeBarrier<PIPE_ALL>();
        k.copy.OutRow(k.gi, ready, r.gmOffset, r.cols);
    } else {
        if (k.t.shiftLast) {
            // The shifted last chunk overlaps its neighbour's blocks in GM, and
            // the queue's two buffers do not order consecutive stores.
            AscendC::PipeBarrier<PIPE_MTE3>();
        }
        k.copy.Out(k.gi, ready, r.gmOffset, r.rows, r.cols, r.gmStride, k.t.rowStride);
    }
    ub.outGi.FreeTensor(ready);
}

// The tile whose loads a unit issues before its own compute (look-ahead): none, or the rows of the next
// unit in the core's order, which may be of the other phase (GroupByGroup's channel pipeline).
struct NextTile {
    bool any = false;
    TileRows rows;
    bool withX = false;
};

__aicore__ inline NextTile NextOf(const BatchNormBackwardTilingData &t, uint64_t u, bool write, bool withX)
{
    NextTile n;
    n.any = true;
    n.rows = UnitRows(t, u, write);
    n.withX = withX;
    return n;
}

template <typename T>
__aicore__ inline void IssueNext(KernelState<T> &k, const NextTile &next)
{
    if (next.any) {
        IssueLoad(k, next.rows, next.withX);
    }
}

// acc[0, cols) = the sum of the `rows` rows of `src` (`stride` apart), in row order: the first two rows' sum
// sets the accumulator (the values 0 + ... had), no zeroing (one row: zeroed, then added).
__aicore__ inline void RowSums(const LocalTensor<float> &acc, const LocalTensor<float> &src, uint32_t stride,
                               uint32_t rows, uint32_t cols)
{
    if (rows < 2) {
        AscendC::Duplicate(acc, 0.0f, stride);
    } else {
        AscendC::Add(acc, src, src[stride], cols);
    }
    for (uint32_t row = rows < 2 ? 0 : 2; row < rows; ++row) {
        AscendC::Add(acc, acc, src[row * stride], cols);
    }
}

// RowSums of rows that may be overwritten: the upper rows folded onto the lower in place, whole rows per
// instruction (fewer instructions than a row at a time), down to two, whose sum sets `acc`. A fixed tree
// of the row count (the tiling's, not the cores').
__aicore__ inline void RowTreeSums(const LocalTensor<float> &acc, const LocalTensor<float> &src, uint32_t stride,
                                   uint32_t rows, uint32_t cols)
{
    uint32_t n = rows;
    while (n > 2) {
        const uint32_t h = (n + 1) / 2;
        AscendC::Add(src, src, src[h * stride], int32_t((n - h) * stride));
        n = h;
    }
    RowSums(acc, src, stride, n, cols);
}

// ---- phase 1: partial sums of one unit (its tile issued before; `next` issued before its compute;
// `flush`: the last unit of a run, its batch of partials leaves; `given`: channel-first, its channel's
// mean and invstd taken ahead, so the group's statistics need not be in UB; `afterX`: channel-first, loads
// issued once the unit took x, whose casts freed its buffers, 16-bit types) ----
template <uint32_t MODE, typename T>
__aicore__ inline void ReduceUnit(KernelState<T> &k, uint64_t u, const NextTile &next, bool flush,
                                  const channel_first::UnitScalars *given = nullptr, const NextTile *afterX = nullptr)
{
    KernelUb &ub = k.ub;
    const uint32_t stride = k.t.rowStride;
    const TileRows r = UnitRows(k.t, u);
    const uint32_t n = r.rows * stride;
    if (given == nullptr) {
        LoadStats(k, r.group);
    }
    IssueNext(k, next);
    LocalTensor<float> slot;
    bool pair = false, flatTree = false;
    if (ChannelFirst(k.t)) {
        // dy's row sums and their partial first, while x's loads (issued after dy's) land; then the row
        // sums of dy * (x - mean), one MulAddDst per row where the SoC has it; invstd once per unit, on
        // its sum (MODE_REDUCE: x - mean itself)
        // (16-bit types without mul_add, where the vector unit is the busiest pipe: dy's sums last, folded
        // in place in dyF, a float copy that x's product no longer needs, RowTreeSums; a unit whose rows are
        // contiguous: both sums by one flat tree, InterleavedTreeSumTo)
        const bool fused = BNB_SOC_HAS_MUL_ADD && k.t.mulAdd;
        const bool dyLast = !IsSame<T, float>::value && !fused;
        flatTree = dyLast && channel_first::InterleavedTree(k.t, r.cols, n);
        pair = !flatTree && dyLast && channel_first::PairTree(k.t, r.cols);  // both sums' column trees at once
        TakeDy(k, n);
        slot = k.PartialSlot(u);
        if (!dyLast) {
            RowSums(ub.accDy, ub.dyF, stride, r.rows, r.cols);
            channel_first::StorePartial(ub, k.t, slot, ub.accDy, r.cols);
        }
        TakeX(k, n);
        if (afterX != nullptr) {
            IssueNext(k, *afterX);
        }
        channel_first::Xhat(k.ub, given != nullptr ? given->mean : ub.v.mean.GetValue(r.groupLane), n);
        if (!fused) {
            AscendC::Mul(ub.xF, ub.xF, ub.dyF, n);
        }
        if (fused) {
            // the first row's products set the accumulator (the values 0 + ... had), no zeroing
            AscendC::Mul(ub.accDyx, ub.xF, ub.dyF, r.cols);
#if BNB_SOC_HAS_MUL_ADD
            for (uint32_t row = 1; row < r.rows; ++row) {
                AscendC::MulAddDst(ub.accDyx, ub.xF[row * stride], ub.dyF[row * stride], r.cols);
            }
#endif
        } else if (flatTree) {
            channel_first::InterleavedTreeSumTo(slot, ub.dyF, ub.xF, n, k.t.tileRows * stride);
        } else {
            RowTreeSums(ub.accDyx, ub.xF, stride, r.rows, r.cols);
        }
        if (dyLast && !flatTree) {
            RowTreeSums(ub.accDy, ub.dyF, stride, r.rows, r.cols);
            if (!pair) {
                channel_first::StorePartial(ub, k.t, slot, ub.accDy, r.cols);
            }
        }
    } else {
        TakeTile(k, true, n);
        Xhat<MODE>(k, r, n);
        AscendC::Mul(ub.xF, ub.xF, ub.dyF, n);  // dy * xhat
        k.WaitPartials();  // the previous unit's partials have left the accumulators
        AscendC::Duplicate(ub.accDy, 0.0f, stride);
        AscendC::Duplicate(ub.accDyx, 0.0f, stride);
        for (uint32_t row = 0; row < r.rows; ++row) {
            AscendC::Add(ub.accDy, ub.accDy, ub.dyF[row * stride], r.cols);
            AscendC::Add(ub.accDyx, ub.accDyx, ub.xF[row * stride], r.cols);
        }
    }
    ReleaseTile(k);
    if (ChannelFirst(k.t)) {
        if (pair) {
            channel_first::PairTreeSumTo(slot, ub.accDy, ub.accDyx, r.cols);
        } else if (!flatTree) {
            channel_first::StorePartial(ub, k.t, slot[SLOT_FLOATS], ub.accDyx, r.cols);
        }
        if constexpr (MODE != MODE_REDUCE) {
            // invstd once per unit, on its sum (one element, not a row of column sums; without float
            // ReduceSum on each of the sum's lane partials)
            AscendC::Muls(slot[SLOT_FLOATS], slot[SLOT_FLOATS],
                          given != nullptr ? given->invstd : ub.v.invstd.GetValue(r.groupLane),
                          HasFloatReduceSum(k.t) ? 1 : int32_t(SLOT_FLOATS));
        }
        k.StoreBatch(flush);
    } else {
        channel_last::StorePartials(ub, k.part, k.t, u);
        k.PartialsSent();
    }
}

// Unit u of a run whose next unit is u + 1 (`next`), else the last.
template <uint32_t MODE, typename T>
__aicore__ inline void ReduceUnit(KernelState<T> &k, uint64_t u, bool next)
{
    ReduceUnit<MODE>(k, u, next ? NextOf(k.t, u + 1, false, true) : NextTile(), !next);
}

// ---- finalise: totals, coefficients, per-channel outputs of one group ----
// totDy / totDyx of group g: combined from the partial sums in unit order
// (ELEMT: from the all-reduced sums).
template <uint32_t MODE, typename T>
__aicore__ inline void GroupTotals(KernelState<T> &k, int64_t g)
{
    if constexpr (MODE == MODE_ELEMT) {
        ElemtTotals(k, g);
        return;
    }
    ChannelVecs &v = k.ub.v;
    AscendC::Duplicate(v.totDy, 0.0f, k.t.vecElems);
    AscendC::Duplicate(v.totDyx, 0.0f, k.t.vecElems);
    AscendC::PipeBarrier<PIPE_ALL>();
    if (ChannelFirst(k.t) && k.keepPartials) {
        channel_first::CombineSlots(k.ub, k.ub.partUb[k.partHalf * SLOTS_PER_LOAD * UNIT_SLOT_FLOATS], k.t, false,
                                    GroupCount(k.t, g));
    } else if (ChannelFirst(k.t)) {
        channel_first::CombinePartials(k.ub, k.part, k.t, g);
    } else {
        channel_last::CombinePartials(k.ub, k.part, k.t, g);
    }
    AscendC::PipeBarrier<PIPE_ALL>();
}

// Parallel combine (cross-core, several cores): the owner of group g (core
// g mod cores, WriteParamGrads) combines its partials once and publishes the
// totals in the workspace; after one SyncAll every core reads them with two
// vector copies instead of combining the partials again.
template <uint32_t MODE, typename T>
__aicore__ inline bool SharedTotals(const KernelState<T> &k)
{
    return MODE == MODE_FULL && k.t.crossCore && k.t.usedCores > 1 && k.t.training &&
           (k.t.outputMask >> GRAD_INPUT & 1);
}

// Channel-first shared totals: no core publishes them (CombineShare writes only grad_weight /
// grad_bias); each combines the few channels its own phase-2 units touch (CombineOwnChannels), so
// phase 1 (of each L2 round) is followed by one SyncAll, not two. With L2 rounds a core reads the whole
// partials of the channels its fraction of a round touches (64 bytes per unit; a few channels).
template <uint32_t MODE, typename T>
__aicore__ inline bool OwnTotals(const KernelState<T> &k)
{
    return SharedTotals<MODE>(k) && ChannelFirst(k.t);
}

// The channels [*ca, *cb) of group g that units [k.applyBegin, k.applyEnd) touch (empty when *ca >= *cb),
// and the units per channel.
template <typename T>
__aicore__ inline uint64_t OwnChannels(const KernelState<T> &k, int64_t g, uint64_t *ca, uint64_t *cb)
{
    const uint64_t perChannel = uint64_t(k.t.rowBlocks) * k.t.colBlocks;
    const uint64_t gs = uint64_t(GroupStart(k.t, g)), ge = gs + GroupCount(k.t, g);
    const uint64_t first = k.applyBegin / perChannel, end = (k.applyEnd + perChannel - 1) / perChannel;
    *ca = first > gs ? first : gs;
    *cb = end < ge ? end : ge;
    return perChannel;
}

// The totals of the channels of group g that units [k.applyBegin, k.applyEnd) touch, from the partials in
// GM (after the SyncAll that ended their phase 1) into their lanes: the arithmetic of GroupTotals, so the
// same bits on any core.
template <typename T>
__aicore__ inline void CombineOwnChannels(KernelState<T> &k, int64_t g)
{
    uint64_t ca = 0, cb = 0;
    const uint64_t perChannel = OwnChannels(k, g, &ca, &cb);
    const uint64_t gs = uint64_t(GroupStart(k.t, g));
    ChannelVecs &v = k.ub.v;
    AscendC::Duplicate(v.totDy, 0.0f, k.t.vecElems);
    AscendC::Duplicate(v.totDyx, 0.0f, k.t.vecElems);
    // Events, not PIPE_ALL: the grad_weight / grad_bias stores of CombineShare need not land first.
    SetWaitFlag<AscendC::HardEvent::V_S>();  // the zeros before the scalar unit's totals
    if (ca < cb && ca * perChannel >= k.cachedLo && cb * perChannel <= k.cachedHi) {
        // CombineShare loaded these partials with its own (one copy): summed from UB, the same arithmetic
        channel_first::CombineSlots(k.ub, k.ub.partUb[(ca * perChannel - k.cachedLo) * UNIT_SLOT_FLOATS], k.t,
                                    true, uint32_t(cb - ca), uint32_t(ca - gs));
    } else if (ca < cb) {
        channel_first::CombineChannels(k.ub, k.part, k.t, int64_t(ca), uint32_t(cb - ca), uint32_t(ca - gs));
    }
    SetWaitFlag<AscendC::HardEvent::S_V>();  // the totals before the coefficients (LoadCoefs)
}

// L2 rounds: the partials CombineOwnChannels will need for group g, issued before the statistics'
// loads so their latencies overlap: with partSlots, those of every channel the core's units of the round
// touch when they fit partUb, so the round's later groups combine from UB without a round trip (phase 2
// writes no partials), else those of group g (else CombineOwnChannels loads them itself). Returns
// whether it issued them (the caller waits MTE2_S before the scalar unit reads them); nothing when an
// earlier prefetch of the round holds them.
template <typename T>
__aicore__ inline bool PrefetchOwnPartials(KernelState<T> &k, int64_t g)
{
    uint64_t ca = 0, cb = 0;
    const uint64_t perChannel = OwnChannels(k, g, &ca, &cb);
    if (ca >= cb || (ca * perChannel >= k.cachedLo && cb * perChannel <= k.cachedHi)) {
        return false;
    }
    const uint64_t slots = PartSlots(k.t);
    const uint64_t all0 = k.applyBegin / perChannel, all1 = CeilDiv(k.applyEnd, perChannel);
    if (k.t.partSlots > 0 && (all1 - all0) * perChannel <= slots) {
        ca = all0;
        cb = all1;
    } else if ((cb - ca) * perChannel > slots) {
        return false;
    }
    VectorAndScalarBeforeMte2();  // the scalar and vector units are done with partUb
    AscendC::DataCopy(k.ub.partUb, k.part[ca * perChannel * UNIT_SLOT_FLOATS],
                      uint32_t((cb - ca) * perChannel * UNIT_SLOT_FLOATS));
    k.cachedLo = ca * perChannel;
    k.cachedHi = cb * perChannel;
    return true;
}

template <typename T>
__aicore__ inline void PublishTotals(KernelState<T> &k, int64_t c0, uint32_t n)
{
    k.copy.Out(k.totals, k.ub.v.totDy, uint64_t(c0), 1, n, n, k.t.vecElems, true);
    k.copy.Out(k.totals, k.ub.v.totDyx, TotalsStride(k.t) + uint64_t(c0), 1, n, n, k.t.vecElems, true);
}

template <typename T>
__aicore__ inline void LoadTotals(KernelState<T> &k, int64_t g)
{
    const int64_t c0 = GroupStart(k.t, g);
    const uint32_t n = GroupCount(k.t, g);
    const uint64_t limit = 2 * TotalsStride(k.t);
    k.copy.In(k.ub.v.totDy, k.totals, uint64_t(c0), 1, n, n, k.t.vecElems, limit, true);
    k.copy.In(k.ub.v.totDyx, k.totals, TotalsStride(k.t) + uint64_t(c0), 1, n, n, k.t.vecElems, limit,
              true);
    SetWaitFlag<AscendC::HardEvent::MTE2_V>();  // a look-ahead tile may hold a queue's MTE2_V event
}

// Training: b = -a * sum_dy / n, k = -a * sum(dy * xhat) / n over the group's lanes, from totDy / totDyx
// (`withA`: a = weight * invstd first).
template <typename T>
__aicore__ inline void TrainingCoefs(KernelState<T> &k, bool withA = true)
{
    ChannelVecs &v = k.ub.v;
    if (withA) {
        AscendC::Mul(v.coefA, v.weight, v.invstd, k.t.vecElems);
    }
    AscendC::Muls(v.coefB, v.coefA, -k.t.invCount, k.t.vecElems);
    AscendC::Mul(v.coefK, v.coefB, v.totDyx, k.t.vecElems);
    AscendC::Mul(v.coefB, v.coefB, v.totDy, k.t.vecElems);
}

// Coefficients of group g: grad_input = a * dy + k * xhat + b, with
// a = weight * invstd and, in training, b = -a * sum_dy / n, k = -a * sum(dy * xhat) / n.
// `totalsInUb`: the group's totals were just combined into totDy / totDyx (WriteParamGrads).
template <uint32_t MODE, typename T>
__aicore__ inline void LoadCoefs(KernelState<T> &k, int64_t g, bool totalsInUb = false)
{
    const bool prefetched = k.t.l2Rounds && k.t.training && k.coefGroup != g && OwnTotals<MODE>(k) &&
                            PrefetchOwnPartials(k, g);
    LoadStats(k, g);
    if (k.coefGroup == g) {
        return;
    }
    if (prefetched) {
        SetWaitFlag<AscendC::HardEvent::MTE2_S>();
    }
    ChannelVecs &v = k.ub.v;
    AscendC::Mul(v.coefA, v.weight, v.invstd, k.t.vecElems);
    if (k.t.training) {
        if (OwnTotals<MODE>(k)) {
            BNB_PERF_COMBINE_BEGIN();
            CombineOwnChannels(k, g);
            BNB_PERF_COMBINE_END();
        } else if (SharedTotals<MODE>(k)) {
            LoadTotals(k, g);
        } else if (!totalsInUb) {
            GroupTotals<MODE>(k, g);
        }
        TrainingCoefs(k, false);
    }
    AscendC::PipeBarrier<PIPE_ALL>();
    k.coefGroup = g;
}

// L2 rounds with each core combining its own channels (OwnTotals), right after a SyncAll, where the scalar
// unit forms phase 2's scalars channel by channel (OwnChannelScalars): group g's statistics unless in UB
// (their tails deferred) and the partials of the core's first channel, an MTE2_S event (landed[0]), then the
// partials of its other channels of g and a second event (landed[1], where it has any), so tile loads issued
// next (the look-ahead of the steps after the SyncAll) run beside the combine and the first channel's
// scalars wait for no other channel's partials. Returns the number of events set (0: nothing issued, where
// the partials do not fit partUb).
template <uint32_t MODE, typename T>
__aicore__ inline uint32_t IssueCoefLoads(KernelState<T> &k, int64_t g, AscendC::TEventID landed[2])
{
    uint64_t ca = 0, cb = 0;
    const uint64_t pc = OwnChannels(k, g, &ca, &cb);
    if (!k.t.l2Rounds || !k.t.training || !OwnTotals<MODE>(k) || ca >= cb || (cb - ca) * pc > PartSlots(k.t)) {
        return 0;
    }
    if (k.statsGroup != g) {
        IssueStatLoads(k, g, true);  // (first: the scalar and vector units are done with partUb too)
        k.statsGroup = -1;           // being overwritten: FinishCoefLoads sets it
    } else {
        VectorAndScalarBeforeMte2();  // the scalar and vector units are done with partUb
    }
    uint32_t events = 0;
    for (uint64_t c = ca; c < cb; c = c == ca ? c + 1 : cb) {
        const uint64_t n = c == ca ? 1 : cb - c;
        AscendC::DataCopy(k.ub.partUb[(c - ca) * pc * UNIT_SLOT_FLOATS], k.part[c * pc * UNIT_SLOT_FLOATS],
                          uint32_t(n * pc * UNIT_SLOT_FLOATS));
        landed[events] = k.pipe.template AllocEventID<AscendC::HardEvent::MTE2_S>();
        AscendC::SetFlag<AscendC::HardEvent::MTE2_S>(landed[events]);
        ++events;
    }
    k.cachedLo = ca * pc;
    k.cachedHi = cb * pc;
    return events;
}

// One of IssueCoefLoads' events: its loads landed (the scalar unit waits).
template <typename T>
__aicore__ inline void WaitCoefLoads(KernelState<T> &k, AscendC::TEventID landed)
{
    AscendC::WaitFlag<AscendC::HardEvent::MTE2_S>(landed);
    k.pipe.template ReleaseEventID<AscendC::HardEvent::MTE2_S>(landed);
}

// IssueCoefLoads' first event: the statistics finished (FinishDeferredStatLoads, the vector unit behind the
// scalar unit's wait) where it issued them, and the first channel's partials in UB.
template <typename T>
__aicore__ inline void FinishCoefLoads(KernelState<T> &k, int64_t g, AscendC::TEventID landed)
{
    WaitCoefLoads(k, landed);
    if (k.statsGroup != g) {
        SetWaitFlag<AscendC::HardEvent::S_V>();  // the casts of the landed statistics
        FinishDeferredStatLoads(k, g);
    }
}

// Channel c's (lane `lane` of its group) scalars by the scalar unit alone, its partials in partUb from
// slot `lo`'s unit on (IssueCoefLoads): the sums as CombineSlots forms them, a, k and b as LoadCoefs' vector
// steps (TrainingCoefs, one rounding each, in their order) and ScalarsOf's k * invstd, so the same bits,
// without the vector unit's steps and the waits for them.
template <typename T>
__aicore__ inline channel_first::UnitScalars OwnChannelScalars(KernelState<T> &k, uint64_t c, uint32_t lane,
                                                               uint64_t lo)
{
    const uint64_t pc = uint64_t(k.t.rowBlocks) * k.t.colBlocks;
    float sumDy = 0.0f, sumDyx = 0.0f;
    channel_first::SlotSums(k.ub.partUb, c * pc - lo, pc, false, &sumDy, &sumDyx);
    const ChannelVecs &v = k.ub.v;
    channel_first::UnitScalars s;
    s.mean = v.mean.GetValue(lane);
    s.invstd = v.invstd.GetValue(lane);
    s.a = v.weight.GetValue(lane) * s.invstd;
    const float scale = s.a * -k.t.invCount;
    s.k = (scale * sumDyx) * s.invstd;
    s.b = scale * sumDy;
    return s;
}

// grad_weight = sum(dy * xhat), grad_bias = sum(dy) of channels [c0, c0 + n)
// from the totals in totDyx / totDy (zeros where masked).
template <typename T>
__aicore__ inline void WriteParamRange(KernelState<T> &k, int64_t c0, uint32_t n)
{
    const bool wantW = k.t.outputMask >> GRAD_WEIGHT & 1, wantB = k.t.outputMask >> GRAD_BIAS & 1;
    ChannelVecs &v = k.ub.v;
    if (!wantW || !wantB) {
        AscendC::Duplicate(v.coefA, 0.0f, k.t.vecElems);
        AscendC::PipeBarrier<PIPE_ALL>();
        k.coefGroup = -1;
    }
    if constexpr (!IsSame<T, float>::value) {
        if (!k.t.gradParamFloat32) {
            WriteChannelPairT(k, OUT_GRAD_WEIGHT, OUT_GRAD_BIAS, c0, n, wantW ? v.totDyx : v.coefA,
                              wantB ? v.totDy : v.coefA);
            return;
        }
    }
    WriteChannelRange(k, OUT_GRAD_WEIGHT, c0, n, wantW ? v.totDyx : v.coefA, true);  // both stores in flight,
    WriteChannelRange(k, OUT_GRAD_BIAS, c0, n, wantB ? v.totDy : v.coefA);          // one barrier
}

// grad_weight / grad_bias of group g; `reduced`: phase 1 ran, so the totals
// are combined first. REDUCE: its four per-channel outputs instead.
template <uint32_t MODE, typename T>
__aicore__ inline void WriteParamGrads(KernelState<T> &k, int64_t g, bool reduced)
{
    if (reduced) {
        GroupTotals<MODE>(k, g);
        if (SharedTotals<MODE>(k)) {
            PublishTotals(k, GroupStart(k.t, g), GroupCount(k.t, g));
        }
    }
    if constexpr (MODE == MODE_REDUCE) {
        ReduceOutputs(k, g);
        return;
    }
    WriteParamRange(k, GroupStart(k.t, g), GroupCount(k.t, g));
}

// Channels per block of the narrowest per-channel output (grad_weight / grad_bias; the tiling's
// NoPadGroupWidth): 8 when they are float, else 16.
template <typename T>
__aicore__ inline uint64_t ShareQuantum(const KernelState<T> &k)
{
    return IsSame<T, float>::value || k.t.gradParamFloat32 ? BLOCK_BYTES / sizeof(float) : PARAM_CHUNK_NO_PAD;
}

// softSync (the single pass; StashedTwoPass: two passes, whole groups per core): group g's totals, in
// totDy / totDyx as WriteParamRange would write them, to its slot of the workspace (whole blocks, the slot
// its own) instead.
template <typename T>
__aicore__ inline void StashGroupTotals(KernelState<T> &k, int64_t g)
{
    const uint64_t slot = StashSlotFloats(k.t);
    const uint32_t n = uint32_t(AlignUp(GroupCount(k.t, g), SLOT_FLOATS));
    AscendC::DataCopy(k.stash[uint64_t(g) * 2 * slot], k.ub.v.totDy, n);
    AscendC::DataCopy(k.stash[(uint64_t(g) * 2 + 1) * slot], k.ub.v.totDyx, n);
    AscendC::PipeBarrier<PIPE_ALL>();  // landed before the next group's totals overwrite the lanes
}

// Group g's grad_weight / grad_bias from totDy / totDyx: written (n channels from c0), or stashed
// (StashedTwoPass; WriteStashedShare writes them after the SyncAll).
template <typename T>
__aicore__ inline void GroupParamsOut(KernelState<T> &k, int64_t g, int64_t c0, uint32_t n)
{
    if (StashedTwoPass(k.t)) {
        StashGroupTotals(k, g);
        return;
    }
    WriteParamRange(k, c0, n);
}

// softSync shares (the single pass's WriteShare, StashedTwoPass's WriteStashedShare): the next chunk of
// this core's share [c0, e) of the channels, at most vecElems (a multiple of the block, at least two: no
// chunk but the last shorter than a block of q channels).
__aicore__ inline uint64_t ShareChunk(uint64_t c0, uint64_t e, uint64_t vec, uint64_t q)
{
    uint64_t n = Min(vec, e - c0);
    if (e - c0 - n > 0 && e - c0 - n < q) {
        n -= q;  // the rest (then more than a block, at most two) is the last chunk
    }
    return n;
}

// Floats of the workspace slots of the groups of channels [c0, c0 + n), contiguous there.
__aicore__ inline uint64_t ShareSlotSpan(const BatchNormBackwardTilingData &t, uint64_t c0, uint64_t n)
{
    const int64_t g0 = GroupOf(t, int64_t(c0)), g1 = GroupOf(t, int64_t(c0 + n - 1));
    return uint64_t(g1 - g0 + 1) * 2 * StashSlotFloats(t);
}

// softSync shares, after the SyncAll: the totals of channels [c0, c0 + n) gathered from the slots of the
// groups they belong to into totDy / totDyx by the scalar unit; from partUb where the chunk's slots fit
// there (`together`: one copy, or already there and waited for, `loaded`), else group by group through
// coefB / coefK.
template <typename T>
__aicore__ inline void GatherShareChunk(KernelState<T> &k, uint64_t c0, uint64_t n, bool together, bool loaded)
{
    const uint64_t slot = StashSlotFloats(k.t);
    ChannelVecs &v = k.ub.v;
    const int64_t g0 = GroupOf(k.t, int64_t(c0)), g1 = GroupOf(k.t, int64_t(c0 + n - 1));
    if (together && !loaded) {
        AscendC::DataCopy(k.ub.partUb, k.stash[uint64_t(g0) * 2 * slot], uint32_t(ShareSlotSpan(k.t, c0, n)));
        SetWaitFlag<AscendC::HardEvent::MTE2_S>();
    }
    for (int64_t g = g0; g <= g1; ++g) {
        const uint64_t gs = uint64_t(GroupStart(k.t, g)), ge = gs + GroupCount(k.t, g);
        LocalTensor<float> dy = v.coefB, dyx = v.coefK;
        if (together) {
            dy = k.ub.partUb[uint32_t(uint64_t(g - g0) * 2 * slot)];
            dyx = k.ub.partUb[uint32_t((uint64_t(g - g0) * 2 + 1) * slot)];
        } else {
            const uint32_t len = uint32_t(AlignUp(ge - gs, SLOT_FLOATS));
            AscendC::DataCopy(v.coefB, k.stash[uint64_t(g) * 2 * slot], len);
            AscendC::DataCopy(v.coefK, k.stash[(uint64_t(g) * 2 + 1) * slot], len);
            SetWaitFlag<AscendC::HardEvent::MTE2_S>();
        }
        for (uint64_t ch = gs > c0 ? gs : c0; ch < ge && ch < c0 + n; ++ch) {
            v.totDy.SetValue(uint32_t(ch - c0), dy.GetValue(uint32_t(ch - gs)));
            v.totDyx.SetValue(uint32_t(ch - c0), dyx.GetValue(uint32_t(ch - gs)));
        }
        if (!together) {
            SetWaitFlag<AscendC::HardEvent::S_MTE2>();  // read before the next group's slot lands there
        }
    }
}

// StashedTwoPass, after the SyncAll: grad_weight / grad_bias of this core's share of the channels, whole
// blocks of them (ShareQuantum; the last core takes the remainder), chunk by chunk (ShareChunk), gathered
// from the groups' slots (GatherShareChunk; no partials are held any more, so partUb is free).
template <typename T>
__aicore__ inline void WriteStashedShare(KernelState<T> &k)
{
    const uint64_t q = ShareQuantum(k);
    uint64_t b = 0, e = 0;
    ChannelShareOfCore(0, uint64_t(k.t.channels), q, AscendC::GetBlockIdx(), k.t.usedCores, &b, &e);
    for (uint64_t c0 = b; c0 < e;) {
        const uint64_t n = ShareChunk(c0, e, k.t.vecElems, q);
        GatherShareChunk(k, c0, n, ShareSlotSpan(k.t, c0, n) <= k.ub.partUb.GetSize(), false);
        AscendC::PipeBarrier<PIPE_ALL>();
        WriteParamRange(k, int64_t(c0), uint32_t(n));
        c0 += n;
    }
    k.coefGroup = -1;  // coefB / coefK held the slots
}

// Parallel combine of channels [cb, ce) (channel-first, shared totals): core
// `core` of the launch combines its even share of them, at most vecElems at a
// time, from their partials in unit order (the arithmetic of GroupTotals),
// publishes the totals where the cores do not combine their own (channel-last)
// and writes their grad_weight / grad_bias, so no
// core combines more than ceil((ce - cb) / cores) channels whatever the groups.
// Without DataCopyPad (vecPad 0) the shares are whole blocks of channels (ShareQuantum; the last share
// takes the remainder), so no two cores write one block of grad_weight / grad_bias.
// `step`: SHARE_ALL all of it; SHARE_LOAD only the one copy of `together` below (false, nothing done, when
// the partials are not one batch; `behind`: a tile whose loads go right after it), SHARE_CACHED the rest after it (the partials still in partUb: phase 2
// writes none), so the share's stores need not land before phase 2 starts.
constexpr uint32_t SHARE_ALL = 0;
constexpr uint32_t SHARE_LOAD = 1;
constexpr uint32_t SHARE_CACHED = 2;
// SHARE_HELD: as SHARE_CACHED, the share's partials loaded into partUb by LoadSharePartials (L2 rounds:
// during the last round's phase 2), else as SHARE_ALL.
constexpr uint32_t SHARE_HELD = 3;

// This core's share of channels [cb, ce) (CombineShare's).
template <typename T>
__aicore__ inline void ShareOf(const KernelState<T> &k, uint64_t cb, uint64_t ce, uint64_t core, uint64_t *b,
                               uint64_t *e)
{
    ChannelShareOfCore(cb, ce, k.t.vecPad ? 1 : ShareQuantum(k), core, k.t.usedCores, b, e);
}

// L2 rounds, after the last round's coefficients (its own partials no longer read): the partials of this
// core's share of channels [cb, ce) into partUb in one copy, in flight beside phase 2's loads, for
// CombineShare(SHARE_HELD). False (nothing issued) when they are not one batch of vecElems channels.
template <uint32_t MODE, typename T>
__aicore__ inline bool LoadSharePartials(KernelState<T> &k, uint64_t cb, uint64_t ce, uint64_t core)
{
    uint64_t b = 0, e = 0;
    ShareOf(k, cb, ce, core, &b, &e);
    const uint64_t pc = uint64_t(k.t.rowBlocks) * k.t.colBlocks;
    if (!OwnTotals<MODE>(k) || b >= e || e - b > k.t.vecElems || (e - b) * pc > PartSlots(k.t)) {
        return false;
    }
    VectorAndScalarBeforeMte2();  // the scalar and vector units are done with partUb
    AscendC::DataCopy(k.ub.partUb, k.part[b * pc * UNIT_SLOT_FLOATS], uint32_t((e - b) * pc * UNIT_SLOT_FLOATS));
    k.cachedLo = b * pc;
    k.cachedHi = e * pc;
    return true;
}

template <uint32_t MODE, typename T>
__aicore__ inline bool CombineShare(KernelState<T> &k, uint64_t cb, uint64_t ce, uint64_t core,
                                    uint32_t step = SHARE_ALL, const NextTile *behind = nullptr)
{
    uint64_t b = 0, e = 0;
    ShareOf(k, cb, ce, core, &b, &e);
    ChannelVecs &v = k.ub.v;
    // OwnTotals: the partials of the share and of the channels this core's units touch in one copy, when
    // they are one batch (CombineOwnChannels sums its own from UB then).
    const uint64_t pc = uint64_t(k.t.rowBlocks) * k.t.colBlocks;
    const bool held = step == SHARE_HELD && b < e && e - b <= k.t.vecElems && b * pc >= k.cachedLo &&
                      e * pc <= k.cachedHi;
    if (step == SHARE_HELD) {
        step = held ? SHARE_CACHED : SHARE_ALL;
        if (held) {
            SetWaitFlag<AscendC::HardEvent::MTE2_S>();  // LoadSharePartials' copy landed
        }
    }
    const uint64_t lo = held ? k.cachedLo : Min(b, k.share.unitBegin / pc) * pc;
    const uint64_t hi = held ? k.cachedHi : (e > CeilDiv(k.share.unitEnd, pc) ? e : CeilDiv(k.share.unitEnd, pc)) * pc;
    const bool together = held || (OwnTotals<MODE>(k) && b < e && e - b <= k.t.vecElems &&
                                   hi - lo <= PartSlots(k.t));
    if (step == SHARE_LOAD) {
        if (!together) {
            return false;
        }
        AscendC::PipeBarrier<PIPE_ALL>();
        AscendC::DataCopy(k.ub.partUb, k.part[lo * UNIT_SLOT_FLOATS], uint32_t((hi - lo) * UNIT_SLOT_FLOATS));
        if (behind != nullptr && behind->any) {
            // a tile's loads behind the copy (`behind`), the scalar unit waiting for the partials only
            const AscendC::TEventID landed = k.pipe.template AllocEventID<AscendC::HardEvent::MTE2_S>();
            AscendC::SetFlag<AscendC::HardEvent::MTE2_S>(landed);
            IssueNext(k, *behind);
            AscendC::WaitFlag<AscendC::HardEvent::MTE2_S>(landed);
            k.pipe.template ReleaseEventID<AscendC::HardEvent::MTE2_S>(landed);
        } else {
            SetWaitFlag<AscendC::HardEvent::MTE2_S>();
        }
        k.cachedLo = lo;
        k.cachedHi = hi;
        k.coefGroup = -1;
        return true;
    }
    if (step == SHARE_ALL) {
        k.cachedLo = k.cachedHi = 0;
    }
    for (uint64_t c0 = b; c0 < e; c0 += k.t.vecElems) {
        const uint32_t n = uint32_t(Min(k.t.vecElems, e - c0));
        AscendC::Duplicate(v.totDy, 0.0f, k.t.vecElems);
        AscendC::Duplicate(v.totDyx, 0.0f, k.t.vecElems);
        if (step == SHARE_CACHED) {
            SetWaitFlag<AscendC::HardEvent::V_S>();  // the zeros before the scalar sums (events: phase 2's
                                                     // stores in flight need not land first)
        } else {
            AscendC::PipeBarrier<PIPE_ALL>();
        }
        if (together) {
            if (step == SHARE_ALL) {
                AscendC::DataCopy(k.ub.partUb, k.part[lo * UNIT_SLOT_FLOATS],
                                  uint32_t((hi - lo) * UNIT_SLOT_FLOATS));
                SetWaitFlag<AscendC::HardEvent::MTE2_S>();
            }
            channel_first::CombineSlots(k.ub, k.ub.partUb[(b * pc - lo) * UNIT_SLOT_FLOATS], k.t, true, n);
            k.cachedLo = lo;
            k.cachedHi = hi;
        } else {
            channel_first::CombineChannels(k.ub, k.part, k.t, int64_t(c0), n);
        }
        if (step == SHARE_CACHED) {
            SetWaitFlag<AscendC::HardEvent::S_V>();    // the totals before their casts (16-bit outputs)
            SetWaitFlag<AscendC::HardEvent::S_MTE3>();  // or their stores (float outputs)
        } else {
            AscendC::PipeBarrier<PIPE_ALL>();
        }
        if (!OwnTotals<MODE>(k)) {
            PublishTotals(k, int64_t(c0), n);
        }
        WriteParamRange(k, int64_t(c0), n);
    }
    k.coefGroup = -1;
    return true;
}

// ---- phase 2: grad_input of one unit (zeros when masked); its tile issued before, `next` before its compute;
// `given`: channel-first, its channel's scalars taken ahead (the group's coefficients need not be in UB) ----
template <uint32_t MODE, typename T>
__aicore__ inline void GradInputUnit(KernelState<T> &k, uint64_t u, bool want, const NextTile &next,
                                     const channel_first::UnitScalars *given = nullptr)
{
    const TileRows r = UnitRows(k.t, u, true);
    const uint32_t n = r.rows * k.t.rowStride;
    LocalTensor<T> out;
    bool written = false;
    if (!want) {
        out = OutTile(k);
        written = ZeroTile(k, out, n);
    } else {
        if (given == nullptr) {
            LoadCoefs<MODE>(k, r.group);
        }
        IssueNext(k, next);
        TakeTile(k, k.t.training, n);
        channel_first::UnitScalars s;
        if (given != nullptr) {
            s = *given;
        } else if (ChannelFirst(k.t)) {
            s = channel_first::ScalarsOf(k.ub, r.groupLane, true, k.t.training);
        }
        if (!ChannelFirst(k.t)) {
            if (k.t.training) {
                Xhat<MODE>(k, r, n);
            }
            channel_last::ApplyCoefs(k.ub, r, k.t.rowStride, k.t.training);
        } else if constexpr (IsSame<T, float>::value) {
            // channel-first: x - mean and invstd inside ApplyCoefs (per channel, not per element); only its
            // last step writes out, so the tile is taken after the others: the wait for its buffer's last
            // store to land then holds one instruction, not the unit's whole apply
            const float b = channel_first::ApplyCoefsBody(k.ub, s, n, k.t.training, false, k.ub.scaled, k.ub.centred);
            out = OutTile(k);
            channel_first::ApplyCoefsLast(k.ub, s, b, n, k.t.training, out);
            written = true;
        } else {
            channel_first::ApplyCoefs(k.ub, s, n, k.t.training, k.ub.dyF, true, k.ub.scaled);
        }
        k.ub.scaled = false;
        k.ub.centred = false;
        if (!written) {
            out = OutTile(k);  // after the compute: the wait for the buffer's last store holds no tile
        }
    }
    StoreGradInput(k, r, out, n, false, written);
}

template <uint32_t MODE, typename T>
__aicore__ inline void GradInputUnit(KernelState<T> &k, uint64_t u, bool want, bool next)
{
    GradInputUnit<MODE>(k, u, want, next ? NextOf(k.t, u + 1, true, k.t.training) : NextTile());
}

// ---- phase 2, rows shorter than one block: grad_input of one contiguous region ----
template <uint32_t MODE, typename T>
__aicore__ inline void FlatRegionGradInput(KernelState<T> &k, uint64_t f, bool want)
{
    const flat::Region region = flat::RegionOf(k.t, f, k.total, BLOCK_BYTES / sizeof(T));
    if (region.len == 0) {
        return;
    }
    // The region as one row (the copies then move it exactly: no DataCopyPad here).
    TileRows r;
    r.gmOffset = region.start;
    r.gmStride = region.len;
    r.rows = 1;
    r.cols = uint32_t(region.len);
    r.channel = -1;
    r.group = region.group;
    r.groupLane = 0;
    const uint32_t n = uint32_t(AlignUp(region.len, VEC_ALIGN));
    LocalTensor<T> out;
    bool written = false;
    if (!want) {
        out = OutTile(k);
        written = ZeroTile(k, out, n);
    } else {
        LoadTile(k, r, k.t.training, n);
        LoadCoefs<MODE>(k, region.group);
        AscendC::PipeBarrier<PIPE_ALL>();
        flat::Apply(k.ub, k.t, region, !IsSame<T, float>::value);
        AscendC::PipeBarrier<PIPE_ALL>();
        out = OutTile(k);
    }
    StoreGradInput(k, r, out, n, true, written);
}

}  // namespace bnb
#endif  // BATCH_NORM_KERNEL_PHASES_H
