// What one launch of a BatchNormBackward kernel holds: its tiling, its GM
// tensors, its UB carved exactly as the tiling's UbPlan says (the host checked
// that plan fits), its copies and its share of the work.
//
// Flow of one launch (batch_norm_backward_kernel.h): KernelState::Init fills
// all of this; the phases (batch_norm_kernel_phases.h) then read and write it,
// with the layout strategies (batch_norm_kernel_channel_first.h, _channel_last.h,
// _flat.h) computing on the UB views of KernelUb.
#ifndef BATCH_NORM_KERNEL_STATE_H
#define BATCH_NORM_KERNEL_STATE_H
#include "kernel_operator.h"
#include "batch_norm_backward_tiling.h"
#include "batch_norm_kernel_copy.h"
#include "batch_norm_kernel_work_split.h"

namespace bnb {

// Float sums without ReduceSum (tiling reduceSum 0, Atlas training: ReduceSum.md's "Atlas 训练系列产品，支持half"):
// the `count` floats of `src` (32-byte aligned; overwritten) halved in place by a fixed tree of Adds, the
// upper part (from a whole block past the middle) onto the lower, down to one block; its `n` <= SLOT_FLOATS
// lanes added onto `dst` (one block, zeroed by the caller), which then holds the lane partials for LaneSum.
// The tree depends on `count` alone (not on cores).
__aicore__ inline void BlockTreeSum(const LocalTensor<float> &dst, const LocalTensor<float> &src, uint32_t count)
{
    uint32_t n = count;
    while (n > SLOT_FLOATS) {
        const uint32_t h = uint32_t(AlignUp((n + 1) / 2, SLOT_FLOATS));
        AscendC::Add(src, src, src[h], int32_t(n - h));
        n = h;
    }
    if (n > 0) {
        AscendC::Add(dst, dst, src, int32_t(n));
    }
}

// BlockTreeSum onto a `dst` it sets rather than adds onto (no zeroing): above two blocks the tree's last
// step, two blocks onto one, writes `dst` itself (the same sums: what was added onto zero).
__aicore__ inline void BlockTreeSumTo(const LocalTensor<float> &dst, const LocalTensor<float> &src, uint32_t count)
{
    if (count <= 2 * SLOT_FLOATS) {
        AscendC::Duplicate(dst, 0.0f, SLOT_FLOATS);
        BlockTreeSum(dst, src, count);
        return;
    }
    uint32_t n = count;
    while (n > 2 * SLOT_FLOATS) {  // BlockTreeSum's steps, down to two blocks (each step ends on a whole block)
        const uint32_t h = uint32_t(AlignUp((n + 1) / 2, SLOT_FLOATS));
        AscendC::Add(src, src, src[h], int32_t(n - h));
        n = h;
    }
    AscendC::Add(dst, src, src[SLOT_FLOATS], int32_t(SLOT_FLOATS));
}

// The sum in a block at `at` of `v` (scalar reads, after the vector writes): its first lane where
// ReduceSum wrote it (`lanes` false), else BlockTreeSum's lane partials added pairwise in a fixed order.
__aicore__ inline float LaneSum(const LocalTensor<float> &v, uint32_t at, bool lanes)
{
    static_assert(SLOT_FLOATS == 8, "LaneSum adds the 8 lanes of a float block");
    if (!lanes) {
        return v.GetValue(at);
    }
    const float s01 = v.GetValue(at) + v.GetValue(at + 1), s23 = v.GetValue(at + 2) + v.GetValue(at + 3);
    const float s45 = v.GetValue(at + 4) + v.GetValue(at + 5), s67 = v.GetValue(at + 6) + v.GetValue(at + 7);
    return (s01 + s23) + (s45 + s67);
}

// LaneSum of a block that held the first n lanes at `at` of `v` added onto zeros (n <= SLOT_FLOATS): the
// same additions, in the same order, so the same bits, without the zeroed block.
__aicore__ inline float TreeLaneSum(const LocalTensor<float> &v, uint32_t at, uint32_t n)
{
    float l[SLOT_FLOATS];
    for (uint32_t i = 0; i < SLOT_FLOATS; ++i) {
        l[i] = i < n ? 0.0f + v.GetValue(at + i) : 0.0f;
    }
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

// The lanes BlockTreeSum / BlockTreeLevels leave of `count` floats.
__aicore__ inline uint32_t TreeLanes(uint32_t count)
{
    uint32_t n = count;
    while (n > SLOT_FLOATS) {
        n = uint32_t(AlignUp((n + 1) / 2, SLOT_FLOATS));
    }
    return n;
}

// Tiling reduceSum, compiled out where the SoC has no float ReduceSum.
__aicore__ inline bool HasFloatReduceSum(const BatchNormBackwardTilingData &t)
{
#if BNB_SOC_HAS_FLOAT_REDUCE_SUM
    return t.reduceSum != 0;
#else
    (void)t;
    return false;
#endif
}

// The per-channel outputs, by slot: grad_weight and grad_bias, and the
// SyncBatchNorm sums (outputs of the reduce step, inputs of the elemt step).
constexpr uint32_t OUT_GRAD_WEIGHT = 0, OUT_GRAD_BIAS = 1, SUM_DY = 2, SUM_DY_XMU = 3, CHANNEL_OUTS = 4;

// The per-channel float vectors (vecElems floats each; CHANNEL_VECS of them). Three pairs share a buffer,
// the second right after the first, so one instruction takes both (the single pass's coefficients):
// [weight | scaleK], [coefB | coefK], [totDy | totDyx], each also as one view (the *Pair tensors).
struct ChannelVecs {
    LocalTensor<float> weight, mean, invstd;  // statistics of the group in UB (LoadStats)
    LocalTensor<float> scaleK;                // single pass: -a / n * invstd^2, the factor of k * invstd
    LocalTensor<float> coefA, coefB, coefK;   // grad_input = a * dy + k * xhat + b
    LocalTensor<float> totDy, totDyx;         // group totals of dy and dy * xhat
    LocalTensor<float> stage;                 // a channel vector in T on its way to / from GM
    LocalTensor<float> weightPair, coefPair, totPair;
};
constexpr uint32_t CHANNEL_PAIRS = 3;

// UB of one launch, in the order UbPlan counts it.
struct KernelUb {
    // depth: the most EnQues without a DeQue between (TQue.md): IN_BUFFERS_AHEAD where the channel pipeline issues
    // a unit's loads while the two before it are still queued (tiling inBuffers), else two
    AscendC::TQue<AscendC::QuePosition::VECIN, IN_BUFFERS_AHEAD> inDy, inX;
    AscendC::TQue<AscendC::QuePosition::VECOUT, QUEUE_DEPTH> outGi;
    AscendC::TBuf<AscendC::TPosition::VECCALC> dyBuf, xBuf, accDyBuf, accDyxBuf, reduceTmpBuf, partBuf;
    AscendC::TBuf<AscendC::TPosition::VECCALC> vecBuf[CHANNEL_VECS - CHANNEL_PAIRS];
    LocalTensor<float> dyF, xF;               // float tiles of grad_out and input (float32: the dequeued tiles)
    bool dyHeld = false, xHeld = false;       // float32: dyF / xF are queue buffers not yet freed (ReleaseTile)
    bool taken = false;                       // the next TakeTile's tile is in dyF / xF already (Phase1 early)
    bool scaled = false;                      // ... and dyF holds a * dy (the next GradInputUnit's)
    bool centred = false;                     // ... and xF holds x - mean (float32: in place)
    LocalTensor<float> aheadDy, aheadX;       // float32: a dequeued tile kept for the next TakeTile (HoldTile)
    bool aheadHeld = false;
    LocalTensor<float> accDy, accDyx;         // per-row accumulators of a unit
    LocalTensor<float> reduceTmp;             // ReduceSum scratch
    LocalTensor<float> partUb;                // partial sums on their way to / from the workspace
    ChannelVecs v;

    // Every buffer but the copies' scratch (GmUbCopy::Init, right after).
    __aicore__ inline void Init(AscendC::TPipe &pipe, const UbPlan &plan)
    {
        pipe.InitBuffer(inDy, plan.inBuffers, plan.tileBytes);
        pipe.InitBuffer(inX, plan.inBuffers, plan.tileBytes);
        pipe.InitBuffer(outGi, plan.outBuffers, plan.tileBytes);
        if (plan.floatTileBytes > 0) {  // float32: dyF / xF are the input queues' buffers (TakeTile)
            pipe.InitBuffer(dyBuf, plan.floatTileBytes);
            pipe.InitBuffer(xBuf, plan.floatTileBytes);
            dyF = dyBuf.Get<float>();
            xF = xBuf.Get<float>();
        }
        pipe.InitBuffer(accDyBuf, plan.rowVecBytes);
        pipe.InitBuffer(accDyxBuf, plan.rowVecBytes);
        pipe.InitBuffer(reduceTmpBuf, plan.rowVecBytes);
        const uint32_t n = plan.channelVecBytes / uint32_t(sizeof(float));
        InitPair(pipe, vecBuf[0], n, v.weightPair, v.weight, v.scaleK);
        InitVec(pipe, vecBuf[1], n, v.mean);
        InitVec(pipe, vecBuf[2], n, v.invstd);
        InitVec(pipe, vecBuf[3], n, v.coefA);
        InitPair(pipe, vecBuf[4], n, v.coefPair, v.coefB, v.coefK);
        InitPair(pipe, vecBuf[5], n, v.totPair, v.totDy, v.totDyx);
        InitVec(pipe, vecBuf[6], n, v.stage);
        pipe.InitBuffer(partBuf, plan.partBytes);

        accDy = accDyBuf.Get<float>();
        accDyx = accDyxBuf.Get<float>();
        reduceTmp = reduceTmpBuf.Get<float>();
        partUb = partBuf.Get<float>();
    }

private:
    __aicore__ inline static void InitVec(AscendC::TPipe &pipe, AscendC::TBuf<AscendC::TPosition::VECCALC> &buf,
                                          uint32_t n, LocalTensor<float> &vec)
    {
        pipe.InitBuffer(buf, n * uint32_t(sizeof(float)));
        vec = buf.Get<float>(n);
    }
    __aicore__ inline static void InitPair(AscendC::TPipe &pipe, AscendC::TBuf<AscendC::TPosition::VECCALC> &buf,
                                           uint32_t n, LocalTensor<float> &pair, LocalTensor<float> &first,
                                           LocalTensor<float> &second)
    {
        pipe.InitBuffer(buf, 2 * n * uint32_t(sizeof(float)));
        pair = buf.Get<float>(2 * n);
        first = buf.Get<float>(n);
        second = pair[n];
    }
};

// Pipe `from` of event E finished its earlier work before pipe `to` goes on,
// on an event id nothing else holds now (TPipe::FetchEventID): the queues'
// EnQue / FreeTensor events take ids from the same pool, so a fixed id could
// be one a queue has set and not yet waited for, and this wait would return
// on that queue's set instead of ours.
template <AscendC::HardEvent E>
__aicore__ inline void SetWaitFlag()
{
    const int32_t id = static_cast<int32_t>(::GetTPipePtr()->FetchEventID(E));
    AscendC::SetFlag<E>(id);
    AscendC::WaitFlag<E>(id);
}

// The vector and scalar units' earlier work ends before MTE2 goes on: V -> S, then S -> MTE2. Not a
// V_MTE2 event: the input queues' freed buffers each hold a V_MTE2 id until they are allocated again,
// and with QUE_MAX_EVENT ids per event (4 on some cores) they can hold them all.
__aicore__ inline void VectorAndScalarBeforeMte2()
{
    SetWaitFlag<AscendC::HardEvent::V_S>();
    SetWaitFlag<AscendC::HardEvent::S_MTE2>();
}

template <typename T>
struct KernelState {
    BatchNormBackwardTilingData t;
    AscendC::TPipe pipe;
    KernelUb ub;
    GmUbCopy copy;
    GlobalTensor<T> dy, x, gi;                    // grad_out, input, grad_input
    GlobalTensor<T> paramT[PARAM_COUNT];          // per-channel inputs stored as T ...
    GlobalTensor<float> paramF[PARAM_COUNT];      // ... or as float (tiling paramFloat32)
    GlobalTensor<T> gradT[CHANNEL_OUTS];          // per-channel outputs as T ...
    GlobalTensor<float> gradF[CHANNEL_OUTS];      // ... or as float
    GlobalTensor<float> part;                     // workspace: the units' partial sums
    GlobalTensor<float> totals;                   // workspace (cross-core): every channel's totals, by their owners
    GlobalTensor<float> stash;                    // workspace (single pass, softSync): each group's totals
    GlobalTensor<int32_t> syncGm;                 // workspace (softSync): the software SyncAll's flags
    AscendC::TBuf<AscendC::TPosition::VECCALC> syncBuf;
    LocalTensor<int32_t> syncUb;                  // softSync: the software SyncAll's UB workspace
    bool present[PARAM_COUNT];
    uint64_t total = 0;                           // elements of grad_out
    CoreShare share;
    int64_t statsGroup = -1, coefGroup = -1;      // the group whose stats / coefficients are in UB
    AscendC::TEventID partEvent[PART_HALVES] = {};  // MTE3 -> V: a batch of partial sums has left UB
    bool partPending[PART_HALVES] = {};             // partEvent set, not yet waited for
    uint32_t partHalf = 0, partFill = 0;            // channel-first: the batch being filled, its units so far
    uint64_t partFirst = 0;                         // ... and its first unit
    uint32_t partFolded = 0;                        // FoldBehind: the batch's first slots whose lanes are folded
    bool foldPending = false;                       // ... foldEvent set behind the last slot's vector work
    AscendC::TEventID foldEvent = 0;
    uint64_t applyBegin = 0, applyEnd = 0;  // the phase-2 units being run (OwnTotals: the channels to combine)
    bool keepPartials = false;  // GroupByGroup, a group within one batch: its partials stay in UB (batch partHalf)
    uint64_t cachedLo = 0, cachedHi = 0;  // OwnTotals: units whose partials CombineShare left in partUb

    __aicore__ inline void Init(GM_ADDR gradOut, GM_ADDR input, GM_ADDR *params, GM_ADDR gradInput,
                                GM_ADDR gradWeight, GM_ADDR gradBias, GM_ADDR workspace,
                                const BatchNormBackwardTilingData &tiling)
    {
        t = tiling;
        total = uint64_t(t.outer) * t.channels * t.inner;
        dy.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(gradOut), total);
        x.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(input), total);
        gi.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(gradInput), total);
        for (uint32_t i = 0; i < PARAM_COUNT; ++i) {
            present[i] = params[i] != nullptr && (t.present >> i & 1);
            paramT[i].SetGlobalBuffer(reinterpret_cast<__gm__ T *>(params[i]), t.channels);
            paramF[i].SetGlobalBuffer(reinterpret_cast<__gm__ float *>(params[i]), t.channels);
        }
        SetChannelOut(OUT_GRAD_WEIGHT, gradWeight);
        SetChannelOut(OUT_GRAD_BIAS, gradBias);
        part.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(workspace), PartialFloats(t));
        if (t.crossCore) {
            totals.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(workspace) + PartialFloats(t),
                                   2 * TotalsStride(t));
        }
        if (StashFloats(t) > 0) {
            stash.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(workspace) + PartialFloats(t), StashFloats(t));
        }

        const UbPlan plan = MakeUbPlan(t.tileRows, t.rowStride, t.vecElems, t.layout, t.dtype, t.outBuffers,
                                       t.partSlots, t.inBuffers);
        ub.Init(pipe, plan);
        copy.Init(pipe, plan.tailBytes, t.usePad != 0, t.hasDcci != 0, t.vecPad != 0);
        share = ShareOfCore(t, AscendC::GetBlockIdx());
        for (uint32_t h = 0; h < PART_HALVES; ++h) {
            partEvent[h] = pipe.template AllocEventID<AscendC::HardEvent::MTE3_V>();
        }
        if (t.softSync) {
            InitSoftSync(workspace);
        }
    }

    // The software SyncAll's workspaces. Its GM flags must be zero before the first call and the
    // framework's workspace is not (SyncAll.md: zero it on the host, or on every core in the kernel,
    // the whole of it): every core zeroes all of them here; a core still polling its first call
    // re-writes its own flag, so a later core's zeroing cannot lose it, and the flags count the calls,
    // so the launch's later calls need no zeroing.
    __aicore__ inline void InitSoftSync(GM_ADDR workspace)
    {
        const uint32_t ints = SyncFlagInts(t.usedCores);
        syncGm.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t *>(workspace + SyncFlagsOffset(t)), ints);
        pipe.InitBuffer(syncBuf, SyncWorkBytes(t.usedCores));
        syncUb = syncBuf.Get<int32_t>();
        AscendC::Duplicate(syncBuf.Get<float>(), 0.0f, int32_t(ints));  // +0.0f: all bits zero
        SetWaitFlag<AscendC::HardEvent::V_MTE3>();
        AscendC::DataCopy(syncGm, syncUb, ints);
    }

    // Every core of the launch has reached this point: the hardware SyncAll, or the software one
    // (softSync: Atlas training / inference). Either orders every pipe first.
    __aicore__ inline void SyncCores()
    {
        AscendC::PipeBarrier<PIPE_ALL>();
        if (t.softSync) {
            AscendC::SyncAll(syncGm, syncUb, int32_t(t.usedCores));
            return;
        }
#if BNB_SOC_HAS_SYNC_ALL
        AscendC::SyncAll();
#endif
    }

    // Before V writes batch h again: its copy to GM is done.
    __aicore__ inline void WaitPartials(uint32_t h)
    {
        if (partPending[h]) {
            AscendC::WaitFlag<AscendC::HardEvent::MTE3_V>(partEvent[h]);
            partPending[h] = false;
        }
    }

    __aicore__ inline void WaitPartials()
    {
        for (uint32_t h = 0; h < PART_HALVES; ++h) {
            WaitPartials(h);
        }
    }

    // Channel-last: the unit's partial rows left from the accumulators (batch 0).
    __aicore__ inline void PartialsSent()
    {
        AscendC::SetFlag<AscendC::HardEvent::MTE3_V>(partEvent[0]);
        partPending[0] = true;
    }

    // Channel-first: the UB slot of unit u's partial sums in the current batch
    // (consecutive units of a core fill it; a new batch first waits for its
    // previous copy to GM); StoreBatch after the slot is written.
    __aicore__ inline LocalTensor<float> PartialSlot(uint64_t u)
    {
        if (partFill == 0) {
            WaitPartials(partHalf);
            partFirst = u;
        }
        return ub.partUb[(partHalf * SLOTS_PER_LOAD + partFill) * UNIT_SLOT_FLOATS];
    }

    // Without float ReduceSum: the batch's lane partials (BlockTreeSum) added up by the scalar unit into each
    // block's first lane (LaneSum) before the copy, while the copy waits anyway, so the combines from the
    // workspace read one value per sum as with ReduceSum.
    // The slots [partFolded, to) of the batch are folded so (LaneSum into their first lanes).
    __aicore__ inline void FoldSlots(uint32_t to)
    {
        const LocalTensor<float> batch = ub.partUb[partHalf * SLOTS_PER_LOAD * UNIT_SLOT_FLOATS];
        for (uint32_t b = partFolded * UNIT_SLOT_FLOATS; b < to * UNIT_SLOT_FLOATS; b += SLOT_FLOATS) {
            batch.SetValue(b, LaneSum(batch, b, true));
        }
        partFolded = to;
    }

    // A slot written that does not send its batch: the previous slot's lanes folded behind the vector unit,
    // which computes this unit meanwhile (its event, foldEvent, set after that slot's vector work and
    // waited for after this unit's was issued), so the scalar unit's reads do not hold the issue of a
    // unit's vector instructions (the vector unit stood idle while a whole batch was folded); the same
    // LaneSums, so the same bits. The event id is held from a batch's first slot to its copy.
    __aicore__ inline void FoldBehind()
    {
        if (foldPending) {
            AscendC::WaitFlag<AscendC::HardEvent::V_S>(foldEvent);
            FoldSlots(partFill - 1);
        } else {
            foldEvent = pipe.template AllocEventID<AscendC::HardEvent::V_S>();
        }
        AscendC::SetFlag<AscendC::HardEvent::V_S>(foldEvent);
        foldPending = true;
    }

    __aicore__ inline void FoldBatchLanes()
    {
        if (foldPending) {
            AscendC::WaitFlag<AscendC::HardEvent::V_S>(foldEvent);
            pipe.template ReleaseEventID<AscendC::HardEvent::V_S>(foldEvent);
            foldPending = false;
        }
        SetWaitFlag<AscendC::HardEvent::V_S>();
        FoldSlots(partFill);
        partFolded = 0;
        SetWaitFlag<AscendC::HardEvent::S_MTE3>();
    }

    // One more slot written; a full batch (or `flush`: the end of the core's run) goes to GM in one copy.
    __aicore__ inline void StoreBatch(bool flush)
    {
        if (++partFill < SLOTS_PER_LOAD && !flush) {
            if (!keepPartials && !HasFloatReduceSum(t)) {
                FoldBehind();
            }
            return;
        }
        if (keepPartials) {
            partFill = 0;  // combined from UB (GroupTotals); the next group refills the same batch
            return;
        }
        SetWaitFlag<AscendC::HardEvent::V_MTE3>();  // not a fixed id: an enqueued output buffer may hold it
        if (!HasFloatReduceSum(t)) {
            FoldBatchLanes();
        }
        AscendC::DataCopy(part[partFirst * UNIT_SLOT_FLOATS], ub.partUb[partHalf * SLOTS_PER_LOAD * UNIT_SLOT_FLOATS],
                          partFill * UNIT_SLOT_FLOATS);
        AscendC::SetFlag<AscendC::HardEvent::MTE3_V>(partEvent[partHalf]);
        partPending[partHalf] = true;
        partHalf = (partHalf + 1) % PART_HALVES;
        partFill = 0;
    }

    // Per-channel output `which` at `addr`, seen as T and as float.
    __aicore__ inline void SetChannelOut(uint32_t which, GM_ADDR addr)
    {
        gradT[which].SetGlobalBuffer(reinterpret_cast<__gm__ T *>(addr), t.channels);
        gradF[which].SetGlobalBuffer(reinterpret_cast<__gm__ float *>(addr), t.channels);
    }
};

}  // namespace bnb
#endif  // BATCH_NORM_KERNEL_STATE_H
