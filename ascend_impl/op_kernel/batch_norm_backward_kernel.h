// The BatchNormBackward kernel class, shared by the three kernel entries:
// BatchNormBackward (batch_norm_backward.cpp, MODE_FULL) and the two steps of
// the SyncBatchNorm backward (batch_norm_reduce_backward.cpp, MODE_REDUCE;
// batch_norm_elemt_backward.cpp, MODE_ELEMT; see batch_norm_kernel_sync.h).
//
// One launch, core by core:
//   Init      KernelState::Init: GM tensors, UB carved by the tiling's UbPlan,
//             this core's share of units / groups / flat regions
//             (batch_norm_kernel_state.h, batch_norm_kernel_work_split.h).
//   SetSync   SyncBatchNorm steps only: the sums and, for ELEMT, 1 / sum(counter).
//   Process   (SyncAll is used only when the tiling says crossCore -- or, single
//             pass, softSync -- and more than one core runs: once after phase 1
//             (with L2 rounds: of each round), each core then combining the
//             channels its own units touch; the hardware form, or
//             on Atlas training / inference the software one, KernelState::SyncCores;
//             the host then sets schedule mode 1)
//             single pass (tiling STRATEGY_SINGLE_PASS, batch_norm_kernel_single_pass.h):
//             the core's whole channel groups, each read once; otherwise
//             whole groups per core (crossCore 0, channel-first): both phases
//             group by group (GroupByGroup); otherwise
//             phase 1: ReduceUnit over the core's units (partial sums to the
//             workspace), then SyncAll when units of one channel ran on several
//             cores; finalise: WriteParamGrads over the core's groups
//             (grad_weight / grad_bias, or the REDUCE outputs); phase 2:
//             GradInputUnit over its units, or FlatRegionGradInput over its
//             regions (batch_norm_kernel_phases.h).
// Each phase works through the strategy of the layout (channel-first rows,
// channel-last columns, flat regions: batch_norm_kernel_channel_first.h,
// _channel_last.h, _flat.h), moves data with GmUbCopy
// (batch_norm_kernel_copy.h) and reads / writes per-channel vectors through
// batch_norm_kernel_channel_vectors.h.
#ifndef BATCH_NORM_BACKWARD_KERNEL_H
#define BATCH_NORM_BACKWARD_KERNEL_H
#include "kernel_operator.h"
#include "batch_norm_backward_tiling.h"
#include "batch_norm_sync_tiling.h"
#include "batch_norm_soc_features.h"
#include "batch_norm_kernel_phases.h"
#include "batch_norm_kernel_single_pass.h"

namespace bnb {

// ChannelPipeline: units of each phase in a row. float32's phase 2 is light on the vector unit and its
// phase 1 on nothing but MTE2, so runs of a few units each keep MTE2 streaming; 16-bit types' phase 2
// (casts) is vector-bound, so the phases alternate unit by unit.
template <typename T>
__aicore__ inline constexpr uint64_t PipeBlock()
{
    return IsSame<T, float>::value ? 4 : 1;
}

template <typename T, uint32_t MODE = MODE_FULL>
class BatchNormBackwardKernel {
public:
    __aicore__ inline void Init(GM_ADDR gradOut, GM_ADDR input, GM_ADDR *params, GM_ADDR gradInput,
                                GM_ADDR gradWeight, GM_ADDR gradBias, GM_ADDR workspace,
                                const BatchNormBackwardTilingData &tiling)
    {
        k_.Init(gradOut, input, params, gradInput, gradWeight, gradBias, workspace, tiling);
    }

    // SyncBatchNorm steps: sum_dy / sum_dy_xmu (outputs of REDUCE, inputs of
    // ELEMT, stored in save_mean's dtype) and, for ELEMT, the count vector
    // (`counterLen` entries of CounterType) whose sum is the element count.
    __aicore__ inline void SetSync(GM_ADDR sumDy, GM_ADDR sumDyXmu, GM_ADDR counter, int64_t counterLen,
                                   uint32_t counterType)
    {
        SetSums(k_, sumDy, sumDyXmu);
        if constexpr (MODE == MODE_ELEMT) {
            k_.t.invCount = CountInverse(k_.copy, counter, counterLen, counterType);
        }
    }

    __aicore__ inline void Process()
    {
        if constexpr (MODE == MODE_FULL) {
            if (k_.t.strategy == STRATEGY_SINGLE_PASS) {
                single_pass::Runner<T> runner;  // whole channel groups per core, resident in UB
                runner.Run(k_);
                return;
            }
            if (k_.t.l2Rounds && SharedTotals<MODE>(k_)) {
                L2Rounds();
                return;
            }
        }
        const uint32_t mask = k_.t.outputMask;
        const bool wantInput = mask >> GRAD_INPUT & 1;
        const bool wantParams = (mask >> GRAD_WEIGHT & 1) || (mask >> GRAD_BIAS & 1);
        // REDUCE: phase 1 and its outputs; ELEMT: phase 2 only.
        const bool reduce = MODE == MODE_REDUCE || (MODE == MODE_FULL && (wantParams || (k_.t.training && wantInput)));
        if constexpr (MODE == MODE_FULL) {
            if (reduce && !k_.t.crossCore && ChannelFirst(k_.t) && !k_.t.flat) {
                GroupByGroup(wantInput);
                return;
            }
        }
        // Cross-core with the channel-first combine (CombineShare): the first phase-2 tile's loads are issued
        // before the SyncAll, so they land while the cores meet and combine (x and dy are inputs; the share's
        // combine uses no input queue).
        bool early = false, late = false;
        uint32_t issued = 0;
        if constexpr (MODE == MODE_FULL) {
            early = reduce && wantInput && !k_.t.flat && k_.t.crossCore && k_.t.usedCores > 1 &&
                    SharedTotals<MODE>(k_) && ChannelFirst(k_.t) && k_.share.unitBegin < k_.share.unitEnd;
        }
        if (reduce) {
            issued = Phase1(early);
            BNB_PERF_COMBINE_BEGIN();
        }
        if constexpr (MODE != MODE_ELEMT) {
            if (reduce && SharedTotals<MODE>(k_) && ChannelFirst(k_.t)) {
                // With the first tile early: the share's grad_weight / grad_bias after phase 2, from the
                // partials loaded here (one copy), so their stores land beside the last grad_input stores.
                const uint64_t core = AscendC::GetBlockIdx();
                // 16-bit types: the first tile's buffer is free again (cast before the SyncAll): the third
                // tile's loads go right behind the partials' copy.
                NextTile third;
                if (!IsSame<T, float>::value && issued == 2 && k_.share.unitBegin + 2 < k_.share.unitEnd) {
                    third = NextOf(k_.t, k_.share.unitBegin + 2, true, k_.t.training);
                }
                late = early && CombineShare<MODE>(k_, 0, uint64_t(k_.t.channels), core, SHARE_LOAD, &third);
                if (late && third.any) {
                    issued = 3;
                }
                if (!late) {
                    CombineShare<MODE>(k_, 0, uint64_t(k_.t.channels), core);
                }
            } else {
                ParamGrads(reduce);
            }
        }
        if constexpr (MODE == MODE_REDUCE) {
            BNB_PERF_COMBINE_END();
            return;
        }
        if (reduce && SharedTotals<MODE>(k_) && !OwnTotals<MODE>(k_)) {
            k_.SyncCores();  // the owners' totals (WriteParamGrads) are in the workspace for every core
        }
        if (reduce) {
            BNB_PERF_COMBINE_END();
        }
        if (k_.t.flat) {
            for (uint64_t f = k_.share.flatBegin; f < k_.share.flatEnd; ++f) {
                FlatRegionGradInput<MODE>(k_, f, wantInput);
            }
            return;
        }
        ApplyUnits(k_.share.unitBegin, k_.share.unitEnd, wantInput, issued);
        if constexpr (MODE == MODE_FULL) {
            if (late) {
                BNB_PERF_COMBINE_BEGIN();
                CombineShare<MODE>(k_, 0, uint64_t(k_.t.channels), AscendC::GetBlockIdx(), SHARE_CACHED);
                BNB_PERF_COMBINE_END();
            }
        }
    }

private:
    // Partial sums of the core's units; then every core waits for all (cross-core). `early`: the first
    // phase-2 tiles issued before the SyncAll, both buffers of the depth-2 queues (16-bit types: the first
    // tile also cast); returns how many were issued.
    __aicore__ inline uint32_t Phase1(bool early = false)
    {
        const uint64_t b = k_.share.unitBegin, e = k_.share.unitEnd;
        uint32_t issued = 0;
        ReduceUnits(b, e, !early);
        if (early) {
            IssueLoad(k_, UnitRows(k_.t, b, true), k_.t.training);
            for (issued = 1; issued < 2 && b + issued < e; ++issued) {
                IssueLoad(k_, UnitRows(k_.t, b + issued, true), k_.t.training);
            }
            if constexpr (!IsSame<T, float>::value) {
                // 16-bit types: the first tile's casts on the vector unit, idle until the SyncAll, and (its
                // group's statistics in UB) a * dy, a = weight * invstd as LoadCoefs forms it
                const TileRows r = UnitRows(k_.t, b, true);
                const uint32_t n = r.rows * k_.t.rowStride;
                TakeTile(k_, k_.t.training, n);
                k_.ub.taken = true;
                if (k_.statsGroup == r.group) {
                    AscendC::Mul(k_.ub.v.coefA, k_.ub.v.weight, k_.ub.v.invstd, k_.t.vecElems);
                    SetWaitFlag<AscendC::HardEvent::V_S>();
                    AscendC::Muls(k_.ub.dyF, k_.ub.dyF, k_.ub.v.coefA.GetValue(r.groupLane), n);
                    k_.ub.scaled = true;
                }
            }
            k_.WaitPartials();  // after the casts: they need not wait for the partials' store to land
        }
        if (k_.t.crossCore && k_.t.usedCores > 1) {
            k_.SyncCores();
        }
        return issued;
    }

    // Whole groups per core (crossCore 0, channel-first): both passes group by
    // group, so a group's second read follows its first within one group per
    // core (in L2), and the core that wrote a group's partials combines them:
    // nothing crosses cores, no SyncAll. A group of at most one batch of units
    // keeps its partials in UB and is combined from there (no GM round trip).
    __aicore__ inline void GroupByGroup(bool wantInput)
    {
        for (uint64_t g = k_.share.groupBegin; g < k_.share.groupEnd; ++g) {
            const uint64_t b = GroupUnitBegin(k_.t, g), e = GroupUnitBegin(k_.t, g + 1);
            if (k_.t.l2Channels > 0 && k_.t.l2Channels < GroupCount(k_.t, int64_t(g))) {
                ChannelsInL2(int64_t(g), wantInput);
                continue;
            }
            k_.keepPartials = e - b <= SLOTS_PER_LOAD;
            if (PipelinedChannels(int64_t(g), wantInput)) {
                ChannelPipeline(int64_t(g));
                continue;
            }
            ReduceUnits(b, e);
            BNB_PERF_COMBINE_BEGIN();
            if (StashedTwoPass(k_.t)) {
                GroupTotals<MODE>(k_, int64_t(g));
                StashGroupTotals(k_, int64_t(g));
            } else {
                WriteParamGrads<MODE>(k_, int64_t(g), true);
            }
            BNB_PERF_COMBINE_END();
            if (wantInput) {
                LoadCoefs<MODE>(k_, int64_t(g), true);  // from the totals just combined, not from GM again
            }
            ApplyUnits(b, e, wantInput);
        }
        if (StashedTwoPass(k_.t) && k_.t.usedCores > 1) {
            k_.SyncCores();  // every group's totals are in the workspace
            BNB_PERF_COMBINE_BEGIN();
            WriteStashedShare(k_);
            BNB_PERF_COMBINE_END();
        }
    }

    // Tiling l2Channels: group g's channels l2Channels at a time, both passes
    // each (their totals combined into their lanes in unit order, as
    // GroupTotals does, and the coefficients from them), so a channel's second
    // read follows its first within l2Channels channels per core; then the
    // group's grad_weight / grad_bias.
    __aicore__ inline void ChannelsInL2(int64_t g, bool wantInput)
    {
        const uint64_t perChannel = uint64_t(k_.t.rowBlocks) * k_.t.colBlocks;
        const uint64_t b = GroupUnitBegin(k_.t, uint64_t(g));
        const int64_t gs = GroupStart(k_.t, g);
        const uint32_t n = GroupCount(k_.t, g);
        ChannelVecs &v = k_.ub.v;
        AscendC::Duplicate(v.totDy, 0.0f, k_.t.vecElems);
        AscendC::Duplicate(v.totDyx, 0.0f, k_.t.vecElems);
        for (uint32_t c = 0; c < n; c += k_.t.l2Channels) {
            const uint32_t cnt = uint32_t(Min(k_.t.l2Channels, n - c));
            const uint64_t cb = b + c * perChannel, ce = cb + cnt * perChannel;
            k_.keepPartials = ce - cb <= SLOTS_PER_LOAD;
            ReduceUnits(cb, ce);
            BNB_PERF_COMBINE_BEGIN();
            AscendC::PipeBarrier<PIPE_ALL>();
            if (k_.keepPartials) {
                channel_first::CombineSlots(k_.ub, k_.ub.partUb[k_.partHalf * SLOTS_PER_LOAD * UNIT_SLOT_FLOATS],
                                            k_.t, false, cnt, c);
            } else {
                channel_first::CombineChannels(k_.ub, k_.part, k_.t, gs + c, cnt, c);
            }
            AscendC::PipeBarrier<PIPE_ALL>();
            BNB_PERF_COMBINE_END();
            if (wantInput) {
                k_.coefGroup = -1;
                LoadCoefs<MODE>(k_, g, true);  // from the lanes just combined
            }
            ApplyUnits(cb, ce, wantInput);
        }
        BNB_PERF_COMBINE_BEGIN();
        AscendC::PipeBarrier<PIPE_ALL>();
        GroupParamsOut(k_, g, gs, n);
        BNB_PERF_COMBINE_END();
    }

    // Whole channels per core, training with grad_input, a group of several channels whose partials stay
    // in UB: the channels pipelined (ChannelPipeline).
    __aicore__ inline bool PipelinedChannels(int64_t g, bool wantInput) const
    {
        return MODE == MODE_FULL && wantInput && k_.t.training && GroupCount(k_.t, g) > 1 &&
               uint64_t(k_.t.rowBlocks) * k_.t.colBlocks <= SLOTS_PER_LOAD;
    }

    // Group g channel by channel: once channel c's partials are in, its totals (its lane) and the
    // coefficients; then its phase-2 units alternate with the phase-1 units of channel c + 1, one
    // look-ahead chain of loads over both, so the second reads (L2) and the vector-heavy apply of c
    // overlap the first reads (GM) of c + 1. Each channel's sums are those of GroupByGroup (its units'
    // partials in unit order), so the same bits; grad_weight / grad_bias of the group at the end.
    // Step i of group g's channel pipeline (units from b, pc per channel, n channels): channel 0's phase-1
    // units, then per channel c its phase-2 units and channel c + 1's phase-1 units, in runs of
    // PipeBlock of each. *apply: a phase-2 step; *ch: its channel; *unit: the unit.
    __aicore__ inline void Step(uint64_t i, uint64_t b, uint64_t pc, uint32_t n, bool *apply, uint32_t *ch,
                                uint64_t *unit) const
    {
        if (i < pc) {
            *apply = false;
            *ch = 0;
            *unit = b + i;
            return;
        }
        i -= pc;
        const uint64_t pair = 2 * pc;
        if (k_.t.plTail > 0 && i < uint64_t(n - 1) * pair) {
            TailStep(i % pair, uint32_t(i / pair), b, pc, apply, ch, unit);
            return;
        }
        if (i >= uint64_t(n - 1) * pair) {
            *apply = true;
            *ch = n - 1;
            *unit = b + (n - 1) * pc + (i - uint64_t(n - 1) * pair);
            return;
        }
        const uint32_t c = uint32_t(i / pair);
        const uint64_t w = i % pair, blk = w / (2 * PipeBlock<T>()) * PipeBlock<T>();
        const uint64_t len = Min(PipeBlock<T>(), pc - blk), r = w - 2 * blk;
        *apply = r < len;
        *ch = *apply ? c : c + 1;
        *unit = b + uint64_t(*ch) * pc + blk + (*apply ? r : r - len);
    }

    // Tiling plTail: position w of channel c's pair of runs (its pc phase-2 units, channel c + 1's pc
    // phase-1 units): phase 2 alone up to its last plTail sixteenths, those with channel c + 1's first
    // plAhead sixteenths spread evenly among them (a phase-1 unit after each phase-2 unit that brings it
    // level), then channel c + 1's other phase-1 units.
    __aicore__ inline void TailStep(uint64_t w, uint32_t c, uint64_t b, uint64_t pc, bool *apply, uint32_t *ch,
                                    uint64_t *unit) const
    {
        const uint64_t tail = Max(1, pc * k_.t.plTail / 16), ahead = Max(1, pc * k_.t.plAhead / 16);
        const uint64_t alone = pc - tail;
        if (w < alone) {
            *apply = true;
            *ch = c;
            *unit = b + uint64_t(c) * pc + w;
            return;
        }
        if (w >= alone + tail + ahead) {
            *apply = false;
            *ch = c + 1;
            *unit = b + uint64_t(c + 1) * pc + (w - alone - tail);
            return;
        }
        // the window: after phase-2 unit j (0-based in the tail) come the phase-1 units up to
        // (j + 1) * ahead / tail
        uint64_t p2 = 0, p1 = 0;
        for (uint64_t pos = alone; pos < w; ++pos) {
            if (p1 < (p2 * ahead) / tail || p2 == tail) {
                ++p1;
            } else {
                ++p2;
            }
        }
        *apply = !(p1 < (p2 * ahead) / tail || p2 == tail);
        *ch = *apply ? c : c + 1;
        *unit = b + uint64_t(*ch) * pc + (*apply ? alone + p2 : p1);
    }

    __aicore__ inline void ChannelPipeline(int64_t g)
    {
        const uint64_t pc = uint64_t(k_.t.rowBlocks) * k_.t.colBlocks;
        const uint64_t b = GroupUnitBegin(k_.t, uint64_t(g));
        const uint32_t n = GroupCount(k_.t, g);
        const bool train = k_.t.training != 0;
        ChannelVecs &v = k_.ub.v;
        // The units' partials stay in UB, a ring of one batch (StoreBatch with keepPartials): channel c + 1's
        // are written only after channel c's totals are taken.
        k_.keepPartials = true;
        const LocalTensor<float> slots = k_.ub.partUb[k_.partHalf * SLOTS_PER_LOAD * UNIT_SLOT_FLOATS];
        LoadStats(k_, g);
        AscendC::Duplicate(v.totDy, 0.0f, k_.t.vecElems);
        AscendC::Duplicate(v.totDyx, 0.0f, k_.t.vecElems);
        const uint64_t steps = uint64_t(n) * pc * 2;  // pc phase-1 and pc phase-2 units per channel
        const uint64_t lastReduce = b + uint64_t(n) * pc - 1;
        // tiling inBuffers: each step issues the loads of the step two ahead (the third buffer of the input
        // queues), so a phase-1 unit's long first reads do not leave the next phase-2 unit's loads waiting
        // for a buffer its own landing and reduce free
        const uint64_t ahead = k_.t.inBuffers >= IN_BUFFERS_AHEAD ? 2 : 1;
        for (uint64_t i = 0; i < ahead && i < steps; ++i) {
            bool a = false;
            uint32_t c = 0;
            uint64_t u = 0;
            Step(i, b, pc, n, &a, &c, &u);
            IssueLoad(k_, UnitRows(k_.t, u, a), a ? train : true);
        }
        for (uint64_t i = 0; i < steps; ++i) {
            bool apply = false, nextApply = false;
            uint32_t ch = 0, nextCh = 0;
            uint64_t u = 0, nu = 0;
            Step(i, b, pc, n, &apply, &ch, &u);
            NextTile next;
            if (i + ahead < steps) {
                Step(i + ahead, b, pc, n, &nextApply, &nextCh, &nu);
                next = NextOf(k_.t, nu, nextApply, nextApply ? train : true);
            }
            if (!apply) {
                ReduceUnit<MODE>(k_, u, next, u == lastReduce);
                continue;
            }
            if (u == b + uint64_t(ch) * pc) {
                // channel ch's partials are all in: its totals (its lane), then the coefficients
                // (events, not PIPE_ALL: the tiles in flight need not land first)
                BNB_PERF_COMBINE_BEGIN();
                SetWaitFlag<AscendC::HardEvent::V_S>();  // its partials (V) before the scalar sums
                channel_first::CombineRing(k_.ub, k_.t, slots, uint64_t(ch) * pc, pc, SLOTS_PER_LOAD, ch);
                SetWaitFlag<AscendC::HardEvent::S_V>();  // its lane before the coefficients
                TrainingCoefs(k_);
                SetWaitFlag<AscendC::HardEvent::V_S>();  // before the scalar reads of the units (ApplyCoefs)
                k_.coefGroup = g;
                BNB_PERF_COMBINE_END();
            }
            GradInputUnit<MODE>(k_, u, true, next);
        }
        k_.WaitPartials();
        AscendC::PipeBarrier<PIPE_ALL>();  // the totals (and the group's last stores) before the copies
        BNB_PERF_COMBINE_BEGIN();
        GroupParamsOut(k_, g, GroupStart(k_.t, g), n);
        BNB_PERF_COMBINE_END();
    }

    // Phase 1 over units [b, e), each tile's loads issued one unit ahead (`wait`: then until its last
    // partials have left UB); the launch's first run (training, channel-first, no statistics in UB yet)
    // issues its statistics' loads first and the first two tiles' right behind them (StartRun), so MTE2
    // does not stand still while the statistics land.
    // `last` / `lastAfter`: the last unit's look-ahead (before its compute / once its casts freed a buffer).
    __aicore__ inline void ReduceUnits(uint64_t b, uint64_t e, bool wait = true, const NextTile &last = NextTile(),
                                       const NextTile *lastAfter = nullptr)
    {
        const bool two = b < e && StartRun(b, e);
        if (b < e && !two) {
            IssueLoad(k_, UnitRows(k_.t, b), true);
        }
        for (uint64_t u = b; u < e; ++u) {
            const bool issue = u + 1 < e && !(two && u == b);
            // !wait (Phase1 early: the SyncAll waits for the last copy to land): the batch leaves one unit
            // early too, so the last copy is one unit's partials
            const bool flush = u + 1 == e || (!wait && u + 2 == e);
            ReduceUnit<MODE>(k_, u, issue ? NextOf(k_.t, u + 1, false, true) : (u + 1 == e ? last : NextTile()),
                             flush, nullptr, u + 1 == e ? lastAfter : nullptr);
        }
        if (wait) {
            k_.WaitPartials();  // (else the caller's)
        }
    }

    // The statistics of unit b's group, then units b and b + 1's tiles (both buffers of the depth-2 queues),
    // none waiting for another: V takes the statistics after their own MTE2_V event (casts of 16-bit ones),
    // the scalar unit after V. Only where no statistics were loaded yet (training, channel-first): a later
    // group's loads wait for the vector unit's last reads of the vectors (IssueStatLoads), and its tiles
    // behind them would wait too. And only with DataCopyPad (vecPad): the statistics' event and the two
    // tiles' four EnQue events are five MTE2_V ids, and the real TPipe of dav-c100 has four
    // (QUE_MAX_EVENT; this CPU build's queues take no ids from the pool). False (nothing done) otherwise.
    __aicore__ inline bool StartRun(uint64_t b, uint64_t e)
    {
        const int64_t g = UnitRows(k_.t, b).group;
        if (MODE != MODE_FULL || !k_.t.training || !ChannelFirst(k_.t) || !k_.t.vecPad || k_.statsGroup >= 0 ||
            b + 1 >= e) {
            return false;
        }
        IssueStatLoads(k_, g);
        const AscendC::TEventID landed = k_.pipe.template AllocEventID<AscendC::HardEvent::MTE2_V>();
        AscendC::SetFlag<AscendC::HardEvent::MTE2_V>(landed);
        IssueLoad(k_, UnitRows(k_.t, b), true);
        IssueLoad(k_, UnitRows(k_.t, b + 1), true);
        AscendC::WaitFlag<AscendC::HardEvent::MTE2_V>(landed);
        k_.pipe.template ReleaseEventID<AscendC::HardEvent::MTE2_V>(landed);
        FinishStatLoads(k_, g);
        SetWaitFlag<AscendC::HardEvent::V_S>();  // the scalar unit reads the statistics (ReduceUnit)
        return true;
    }

    // Phase 2 over units [b, e) (`issued`: the loads of its first tiles in flight, Phase1; else the first
    // is issued here, and each unit issues the next one's).
    __aicore__ inline void ApplyUnits(uint64_t b, uint64_t e, bool want, uint32_t issued = 0)
    {
        k_.applyBegin = b;
        k_.applyEnd = e;
        if (want && b < e && issued == 0) {
            IssueLoad(k_, UnitRows(k_.t, b, true), k_.t.training);
            issued = 1;
        }
        for (uint64_t u = b; u < e; ++u) {
            GradInputUnit<MODE>(k_, u, want, want && u + 1 < e && u + 1 >= b + issued);
        }
    }

    // Tiling l2Rounds: both passes round by round (l2Rounds groups each), the
    // round's units shared by all cores, so its second read follows its first
    // while it is still in L2. One SyncAll per round, after which each core
    // combines the channels its own units of the round touch (CombineOwnChannels,
    // in LoadCoefs; their partials in one copy where partUb holds them, tiling
    // partSlots), so no core waits for another's combine; grad_weight / grad_bias
    // of every channel at the end (CombineShare: an even share of the channels per
    // core; without DataCopyPad whole blocks of channels), from the partials of all
    // rounds, which the last SyncAll left in the workspace. (A round's totals were
    // published between two SyncAlls per round before: the combine, the wait for
    // the slowest combiner and a second SyncAll on every round.)
    // Between two SyncAlls a core runs phase 2 of round r and phase 1 of round r + 1 interleaved
    // (Interleaved), so the second reads (L2) and the vector-heavy apply of one round overlap the first
    // reads (GM) of the next; where the scalars of their channels do not fit IL_CHANNELS, one after the other.
    __aicore__ inline void L2Rounds()
    {
        const uint64_t core = AscendC::GetBlockIdx(), groups = uint64_t(k_.t.groups);
        uint64_t b = 0, e = 0, nb = 0, ne = 0;
        RoundUnits(0, core, &b, &e);
        if (k_.t.l2Rounds < groups) {
            RoundUnits(k_.t.l2Rounds, core, &nb, &ne);
        }
        Ahead ahead = PlanAhead(b, e, nb, ne, 2 * uint64_t(k_.t.l2Rounds) < groups);
        bool heldShare = false;  // the share's partials in partUb (serial rounds: the last round's Taken)
        if (!Taken(b, e, false, &ahead) && !FirstPairAhead(b, e, nb, ne, &ahead)) {
            ReduceUnits(b, e);
        }
        for (uint64_t g0 = 0; g0 < groups; g0 += k_.t.l2Rounds) {
            const bool more = g0 + k_.t.l2Rounds < groups;
            uint64_t nnb = 0, nne = 0;
            if (g0 + 2 * uint64_t(k_.t.l2Rounds) < groups) {
                RoundUnits(g0 + 2 * k_.t.l2Rounds, core, &nnb, &nne);
            }
            k_.SyncCores();
            // (the last round's scalars too: its phase 2, LastApply, reloads its statistics beside its partials
            // as every round does, and the round before it then takes no statistics' round trip between its
            // combine and its first store)
            Ahead next = more ? PlanAhead(nb, ne, nnb, nne) : Ahead();
            next.pair = more && PairAhead(nb, ne, nnb, nne);
            const bool ran = more ? Interleaved(b, e, nb, ne, ahead.done ? ahead.rs : nullptr, &next, ahead.issued,
                                                ahead.second, &ahead)
                                  : LastApply(b, e, ahead, &heldShare);
            if (!ran) {
                if (!Taken(b, e, true, nullptr, !more && Serial() ? &heldShare : nullptr, ahead.issued,
                           ahead.second)) {
                    ApplyUnits(b, e, true, ahead.issued ? (ahead.second ? 2 : 1) : 0);
                }
                if (more) {
                    k_.cachedLo = k_.cachedHi = 0;  // phase 1 refills partUb
                    if (!Taken(nb, ne, false, &next)) {
                        ReduceUnits(nb, ne);
                    }
                }
            }
            ahead = next;
            b = nb;
            e = ne;
            nb = nnb;
            ne = nne;
        }
        BNB_PERF_COMBINE_BEGIN();
        CombineShare<MODE>(k_, 0, uint64_t(k_.t.channels), core, heldShare ? SHARE_HELD : SHARE_ALL);
        BNB_PERF_COMBINE_END();
    }

    // This core's units [*b, *e) of the L2 round that starts at group g0.
    __aicore__ inline void RoundUnits(uint64_t g0, uint64_t core, uint64_t *b, uint64_t *e) const
    {
        const uint64_t cores = k_.t.usedCores;
        const uint64_t g1 = Min(g0 + k_.t.l2Rounds, uint64_t(k_.t.groups));
        const uint64_t ub = GroupUnitBegin(k_.t, g0), ue = GroupUnitBegin(k_.t, g1);
        *b = ub + (ue - ub) * core / cores;
        *e = ub + (ue - ub) * (core + 1) / cores;
    }

    // Channels that units [b, e) touch (b < e).
    __aicore__ inline uint64_t ChannelSpan(uint64_t b, uint64_t e) const
    {
        const uint64_t pc = uint64_t(k_.t.rowBlocks) * k_.t.colBlocks;
        return (e - 1) / pc + 1 - b / pc;
    }

    // The scalars of the channels of units [b, e) (at most IL_CHANNELS) into s[0..], channel b / pc first
    // (`coefs`: phase 2's, LoadCoefs per group, its combine included; else phase 1's, LoadStats).
    static constexpr uint64_t IL_CHANNELS = 8;
    __aicore__ inline void TakeScalars(uint64_t b, uint64_t e, bool coefs, channel_first::UnitScalars *s)
    {
        const uint64_t c0 = b / (uint64_t(k_.t.rowBlocks) * k_.t.colBlocks);
        for (uint64_t c = c0; c < c0 + ChannelSpan(b, e); ++c) {
            const int64_t g = GroupOf(k_.t, int64_t(c));
            if (coefs) {
                LoadCoefs<MODE>(k_, g);
            } else {
                LoadStats(k_, g);
            }
            const uint32_t lane = uint32_t(int64_t(c) - GroupStart(k_.t, g));
            s[c - c0] = channel_first::ScalarsOf(k_.ub, lane, coefs, true);
            if (!coefs && (PreApplies() || (IsSame<T, float>::value && Serial() && k_.t.training))) {
                // a = weight * invstd, as LoadCoefs forms it (one rounding), for CentreAndScale's a * dy
                s[c - c0].a = k_.ub.v.weight.GetValue(lane) * s[c - c0].invstd;
            }
        }
    }

    // Rounds one after the other: what the path from a round's SyncAll to its phase 2 needs from no other
    // core goes before the SyncAll, so its round trips overlap the drain of the round's last partials and
    // not that path: the first phase-2 tile's loads of units [ab, ae) (AheadTile: the last phase-1 unit's
    // look-ahead) and, right after that unit, the scalars of the next round's units [rb, re) (RunAhead:
    // their statistics; LoadCoefs then reloads this round's beside its partials). `want`: Interleaved will
    // run both (serial, Fits).
    // `tile`: the first phase-2 tile alone (where the next round's statistics are not taken ahead: the last
    // rounds, and with no next round), so phase 2 does not issue it after the SyncAll, where the combine's
    // partials would queue behind its loads; `issued`: AheadTile issued it (phase 2 then does not).
    // Without float ReduceSum only (ascend910).
    // Interleaved rounds where the period's last steps issue the next one's first loads (PairAhead): the
    // next round's statistics taken so too (`want`), and those loads (`issued`, `second`; `pair`).
    struct Ahead {
        bool want = false, tile = false, done = false, issued = false;
        int64_t early = -1;  // EarlyStats: the group whose statistics' loads it issued
        bool second = false;  // SecondTile: the second phase-2 tile's loads issued too
        bool lead = false;    // AheadTileLead: the tile issued before the round's last phase-1 units' loads
        bool pair = false;    // PairAhead: the next period's first two steps' loads issued by this one's last two
        bool scale = false;   // a: the first phase-2 tile's a = weight * invstd (RunAhead scales its dy)
        float a = 0.0f;
        float mean = 0.0f;    // its channel's mean (float32: RunAhead centres its x too)
        uint64_t ab = 0, ae = 0, rb = 0, re = 0;
        channel_first::UnitScalars rs[IL_CHANNELS];
    };

    __aicore__ inline Ahead PlanAhead(uint64_t ab, uint64_t ae, uint64_t rb, uint64_t re, bool stats = true) const
    {
        Ahead a;
        a.want = stats && (Serial() ? Fits(ab, ae, rb, re) : PairAhead(ab, ae, rb, re));
        a.tile = !a.want && Serial() && !HasFloatReduceSum(k_.t) && ab < ae && ChannelSpan(ab, ae) <= IL_CHANNELS;
        a.ab = ab;
        a.ae = ae;
        a.rb = rb;
        a.re = re;
        return a;
    }

    // The look-ahead of the last phase-1 unit before the SyncAll: the first phase-2 tile of the next round,
    // so its loads land while that unit computes and its partials drain (the SyncAll's first barrier waits
    // for them), not after the SyncAll.
    __aicore__ inline NextTile AheadTile(Ahead *a) const
    {
        if (a == nullptr || !(a->want || a->tile)) {
            return NextTile();
        }
        a->issued = true;
        return NextOf(k_.t, a->ab, true, k_.t.training != 0);
    }

    // Before the last phase-1 unit's partials are waited for (Taken, Interleaved). 16-bit types: the first
    // phase-2 tile, once AheadTile issued it, cast first, while the round's last partials drain, by a vector
    // unit otherwise idle until the SyncAll (its phase-2 unit finds it taken).
    // 16-bit types without float ReduceSum, once the last phase-1 unit of a round took its tile (its casts
    // free both buffers of the input queues): the loads of the second phase-2 tile of the round, behind the
    // first (AheadTile), so they land while that unit computes and its partials drain, not after the
    // SyncAll, where the first phase-2 unit, its dy scaled ahead (RunAhead), waited for them. Phase 2 then
    // issues the third tile's loads from its second unit on (`second`).
    // Float32 with the ahead tile held (AheadTileLead): the same, into the buffer the round's last-but-one
    // phase-1 unit freed, while MTE2 would otherwise idle until the SyncAll.
    __aicore__ inline NextTile SecondTile(Ahead *a) const
    {
        if ((IsSame<T, float>::value ? a == nullptr || !a->lead : HasFloatReduceSum(k_.t)) || a == nullptr ||
            !a->issued || a->ab + 1 >= a->ae) {
            return NextTile();
        }
        a->second = true;
        return NextOf(k_.t, a->ab + 1, true, k_.t.training != 0);
    }

    // The first phase-2 tile's a, from the scalars of the phase-1 units [b, e) it is one of (TakeScalars).
    __aicore__ inline void TakeCoefA(Ahead *a, uint64_t b, uint64_t e, const channel_first::UnitScalars *s) const
    {
        if (a != nullptr && a->issued && a->ab >= b && a->ab < e) {
            const uint64_t pc = uint64_t(k_.t.rowBlocks) * k_.t.colBlocks;
            a->a = s[a->ab / pc - b / pc].a;
            a->mean = s[a->ab / pc - b / pc].mean;
            a->scale = true;
        }
    }

    // Without float ReduceSum (and where a float32 round pre-applies, PreApplies: its vector instructions would
    // otherwise hold the statistics' loads), before the last phase-1 unit of a round (its units take their
    // scalars from TakeScalars, not the statistics' vectors): the loads of the next round's first group's
    // statistics, so they land while that unit computes and RunAhead only casts them (LoadStats' round trip
    // came after the round's last vector instruction, between the partials' landing and the SyncAll).
    __aicore__ inline void EarlyStats(Ahead *a)
    {
        if (a == nullptr || !a->want || !k_.t.training || (HasFloatReduceSum(k_.t) && !PreApplies())) {
            return;
        }
        const int64_t g = GroupOf(k_.t, int64_t(a->rb / (uint64_t(k_.t.rowBlocks) * k_.t.colBlocks)));
        if (k_.statsGroup == g) {
            return;
        }
        IssueStatLoads(k_, g, true);  // a tail past the vector's end deferred (FinishDeferredStatLoads)
        k_.statsGroup = -1;  // being overwritten: FinishStatLoads (RunAhead) sets it
        a->early = g;
    }

    // Whether the first phase-2 tile of a serial round takes the steps of its apply that need no other core
    // before the round's SyncAll (RunAhead): 16-bit types without float ReduceSum (a * dy, after their casts),
    // float32 where the round's phase 2 ends beside the next round's phase 1 (plTail: x - mean and a * dy, in
    // place), where the grad_input stores otherwise start that much later after the SyncAll.
    __aicore__ inline bool PreApplies() const
    {
        return IsSame<T, float>::value ? k_.t.plTail > 0 && k_.t.training : !HasFloatReduceSum(k_.t);
    }

    // Float32 training: the first phase-2 tile (a.ab's, its loads issued) taken, x - mean and a * dy in place
    // (the steps of its apply that need no other core; ApplyCoefsBody then skips them: the same
    // instructions on the same operands).
    __aicore__ inline void CentreAndScale(const Ahead &a)
    {
        const uint32_t n = UnitRows(k_.t, a.ab, true).rows * k_.t.rowStride;
        TakeTile(k_, true, n);
        k_.ub.taken = true;
        AscendC::Adds(k_.ub.xF, k_.ub.xF, -a.mean, n);
        AscendC::Muls(k_.ub.dyF, k_.ub.dyF, a.a, n);
        k_.ub.centred = true;
        k_.ub.scaled = true;
    }

    __aicore__ inline void RunAhead(Ahead *a)
    {
        if constexpr (IsSame<T, float>::value) {
            // the vector unit is idle until the SyncAll anyway; the round's last partials have left
            if (a != nullptr && a->issued && a->scale && PreApplies()) {
                CentreAndScale(*a);
            }
        } else {
            if (a != nullptr && a->issued) {
                const TileRows r = UnitRows(k_.t, a->ab, true);
                TakeTile(k_, k_.t.training != 0, r.rows * k_.t.rowStride);
                k_.ub.taken = true;
                if (a->scale && k_.t.training && !HasFloatReduceSum(k_.t)) {
                    // a * dy too (its unit's first apply step, which needs no other core): the vector unit
                    // is idle until the partials have landed anyway
                    AscendC::Muls(k_.ub.dyF, k_.ub.dyF, a->a, r.rows * k_.t.rowStride);
                    k_.ub.scaled = true;
                }
            }
        }
        if (a == nullptr || !a->want) {
            return;
        }
        if (a->early >= 0) {
            SetWaitFlag<AscendC::HardEvent::MTE2_V>();  // EarlyStats' loads landed
            FinishDeferredStatLoads(k_, a->early);  // (ends with their casts before the scalar reads)
        }
        TakeScalars(a->rb, a->re, false, a->rs);
        a->done = true;
    }

    // The order of Interleaved's steps: PipeBlock units of each phase in turn, phase 2 first, the rest of
    // either at the end.
    // `serial`: every phase-2 unit first, then the phase-1 units.
    // `tail` > 0 (serial, tiling plTail): phase 2 alone up to its last `tail` units, those with the first
    // `ahead` phase-1 units spread evenly among them, then the other phase-1 units.
    struct InterleaveOrder {
        uint64_t a, ae, r, re;
        bool serial = false;
        uint64_t tail = 0, ahead = 0;
        uint32_t run = 0;
        bool turnApply = true;
        uint64_t p2 = 0, p1 = 0;
        __aicore__ inline void Take(bool *apply, uint64_t *u)
        {
            if (serial && tail > 0) {
                const bool window = ae - a <= tail;
                *apply = a < ae && !(window && r < re && p1 < ahead && p1 < p2 * ahead / tail);
                if (window) {
                    ++(*apply ? p2 : p1);
                }
                *u = *apply ? a++ : r++;
                return;
            }
            *apply = a < ae && (r >= re || turnApply || serial);
            *u = *apply ? a++ : r++;
            if (++run >= PipeBlock<T>()) {
                run = 0;
                turnApply = !turnApply;
            }
        }
    };

    // Interleaved's steps whose loads are issued and whose compute is yet to come, in order (at most one
    // per buffer of the input queues but the current step's).
    struct StepQueue {
        static constexpr uint32_t CAPACITY = 3;
        bool apply[CAPACITY] = {};
        uint64_t unit[CAPACITY] = {};
        uint32_t head = 0, size = 0;
        __aicore__ inline void Push(bool a, uint64_t u)
        {
            apply[(head + size) % CAPACITY] = a;
            unit[(head + size) % CAPACITY] = u;
            ++size;
        }
        __aicore__ inline void Push(InterleaveOrder *order)
        {
            bool a = false;
            uint64_t u = 0;
            order->Take(&a, &u);
            Push(a, u);
        }
        // The oldest (none left: a phase-1 step of unit 0, which no step runs).
        __aicore__ inline void Pop(bool *a, uint64_t *u)
        {
            *a = size > 0 && apply[head];
            *u = size > 0 ? unit[head] : 0;
            if (size > 0) {
                head = (head + 1) % CAPACITY;
                --size;
            }
        }
        __aicore__ inline bool FrontApply() const { return apply[head]; }
        __aicore__ inline uint64_t FrontUnit() const { return unit[head]; }
        __aicore__ inline bool BackApply() const { return apply[(head + size - 1) % CAPACITY]; }
        __aicore__ inline uint64_t BackUnit() const { return unit[(head + size - 1) % CAPACITY]; }
    };

    // What LoadsBesideCombine leaves to Interleaved: how many steps' loads it issued (`pre`), and whether the
    // scalars of the core's later channels of phase 2 are still to be formed (`others`: once IssueCoefLoads'
    // second event, `landed`, says their partials landed in partUb from slot `lo`'s unit on).
    struct BesideCombine {
        uint32_t pre = 0;
        bool others = false;
        AscendC::TEventID landed = 0;
        uint64_t lo = 0;
    };

    // Interleaved rounds right after the SyncAll, where the period's first two steps' loads went before it
    // (PairAhead, FirstPairAhead; `paired`) and its phase-1 scalars were taken there (`scalarsTaken`), phase 2
    // [ab, ae) within one group: the loads of the steps after those two, one per free buffer of the input
    // queues (the second step's is held, the first step's too unless its tile was cast already), issued
    // right behind the loads of the group's statistics and partials (IssueCoefLoads), so MTE2 streams
    // through the partials' round trip and the combine, where it stood idle until the first step issued its
    // look-ahead; and the first channel's scalars into as[0] by the scalar unit (OwnChannelScalars), where
    // a full barrier waited for every load in flight and every channel's combine (the cores whose units
    // span two channels came to each SyncAll last). The same loads into the same buffers, and the same
    // values. Nothing done (pre 0) where any of that does not hold.
    __aicore__ inline BesideCombine LoadsBesideCombine(uint64_t ab, uint64_t ae, bool scalarsTaken, bool paired,
                                                       uint64_t steps, InterleaveOrder *order, StepQueue *held,
                                                       channel_first::UnitScalars *as, const Ahead *current)
    {
        BesideCombine r;
        const uint64_t pc = uint64_t(k_.t.rowBlocks) * k_.t.colBlocks, c0 = ab / pc;
        const int64_t g = GroupOf(k_.t, int64_t(c0));
        const bool alone = AloneAhead(paired, held);
        if (!(alone || (!Serial() && paired && held->size == 1 && scalarsTaken)) ||
            GroupOf(k_.t, int64_t(c0 + ChannelSpan(ab, ae) - 1)) != g) {
            return r;
        }
        const uint64_t buffers = Max(k_.t.inBuffers, QUEUE_DEPTH);  // (tiling inBuffers 0: QUEUE_DEPTH)
        const uint64_t n = Min(buffers - (alone || k_.ub.taken ? 1 : 2), StepQueue::CAPACITY - 1);
        AscendC::TEventID landed[2] = {0, 0};
        const uint32_t events = n == 0 || steps < n + 2 ? 0 : IssueCoefLoads<MODE>(k_, g, landed);
        if (events == 0) {
            return r;
        }
        const bool train = k_.t.training != 0;
        for (uint64_t i = 0; i < n; ++i) {
            held->Push(order);
            IssueLoad(k_, UnitRows(k_.t, held->BackUnit(), held->BackApply()), held->BackApply() ? train : true);
        }
        if (IsSame<T, float>::value && k_.t.training && alone && current != nullptr && current->scale &&
            current->ab == ab) {
            CentreAndScale(*current);  // the vector unit, idle until the partials land
        }
        FinishCoefLoads(k_, g, landed[0]);
        BNB_PERF_COMBINE_BEGIN();
        as[0] = OwnChannelScalars(k_, c0, uint32_t(int64_t(c0) - GroupStart(k_.t, g)), k_.cachedLo);
        SetWaitFlag<AscendC::HardEvent::S_V>();  // the scalar reads of partUb before phase 1 writes it
        BNB_PERF_COMBINE_END();
        r.pre = uint32_t(n);
        r.others = events > 1;
        r.landed = landed[1];
        r.lo = k_.cachedLo;
        return r;
    }

    // Serial rounds loading one step ahead whose first phase-2 tile alone went before the SyncAll (AheadTile;
    // `first`), still in its queue buffer: LoadsBesideCombine issues the second tile's loads into the buffer
    // the round's last phase-1 unit freed, beside the partials' round trip and the combine (phase 2's first
    // unit issued them after the combine, and its second unit then waited for their landing), and float32
    // takes the first tile's x - mean and a * dy meanwhile (CentreAndScale, from the scalars its phase 1
    // took: TakeScalars, TakeCoefA), so after the combine its apply is two instructions. Where the next
    // round's phase-1 scalars were not taken before the SyncAll (`scalarsTaken`), Interleaved's TakeScalars
    // loads their statistics behind the tile's loads, over the vectors OtherChannelScalars reads: those
    // scalars are formed first then.
    __aicore__ inline bool AloneAhead(bool first, const StepQueue *held) const
    {
        return Serial() && first && held->size == 0 && !k_.ub.taken;
    }

    // LoadsBesideCombine's later channels of phase 2 [ab, ae): their scalars into as[1..], before the first
    // step that needs them or writes partials into partUb (a phase-1 step), so the scalar unit sums them
    // while the vector unit applies the first channel's units.
    __aicore__ inline void OtherChannelScalars(uint64_t ab, uint64_t ae, BesideCombine *bc,
                                               channel_first::UnitScalars *as)
    {
        const uint64_t pc = uint64_t(k_.t.rowBlocks) * k_.t.colBlocks, c0 = ab / pc;
        const int64_t g = GroupOf(k_.t, int64_t(c0));
        WaitCoefLoads(k_, bc->landed);
        BNB_PERF_COMBINE_BEGIN();
        for (uint64_t c = c0 + 1; c < c0 + ChannelSpan(ab, ae); ++c) {
            as[c - c0] = OwnChannelScalars(k_, c, uint32_t(int64_t(c) - GroupStart(k_.t, g)), bc->lo);
        }
        SetWaitFlag<AscendC::HardEvent::S_V>();  // the scalar reads of partUb before phase 1 writes it
        BNB_PERF_COMBINE_END();
        bc->others = false;
    }

    // Phase 2 of units [ab, ae) and phase 1 of units [rb, re) in InterleaveOrder, each step issuing the loads
    // of the step after it (tiling inBuffers: two after it) before its own compute (one look-ahead chain over
    // both phases); every channel's scalars taken first (the round's combines, then the next round's
    // statistics; after a SyncAll that the period's first loads crossed, the first channel's only,
    // LoadsBesideCombine, and the others' before their first step, OtherChannelScalars), so no unit loads a
    // group's vectors. The same arithmetic per unit as ApplyUnits and ReduceUnits. False (nothing run) when
    // either range is empty or touches more than IL_CHANNELS channels.
    // Rounds one after the other (not InterleavedRounds: each round's second reads must follow its first
    // within the L2 the rounds are sized for) take the same path in the serial order: all of phase 2, then
    // phase 1 of the next round on the same look-ahead chain, the first tile's loads issued before the
    // scalars, so no full barrier between the two phases waits for phase 2's last stores to land and the
    // next round's first loads run beside them.
    // `taken`: serial only, the first phase-2 tile's loads were issued and the next round's scalars taken
    // (into taken[]) before the SyncAll (RunAhead); `ahead`: what to take so before the next one; `current`:
    // what was taken so before this one (its first tile's a and mean: LoadsBesideCombine).
    // `share` (serial, phase 2 alone: the last round, rb == re): the share's partials loaded once the
    // coefficients are taken (LoadSharePartials; *share whether it did), as Taken does.
    __aicore__ inline bool Interleaved(uint64_t ab, uint64_t ae, uint64_t rb, uint64_t re,
                                       const channel_first::UnitScalars *taken = nullptr, Ahead *ahead = nullptr,
                                       bool issued = false, bool second = false, const Ahead *current = nullptr,
                                       bool *share = nullptr)
    {
        const bool alone = share != nullptr && Serial() && rb == re && ab < ae && ChannelSpan(ab, ae) <= IL_CHANNELS;
        if (!Fits(ab, ae, rb, re) && !alone) {
            return false;
        }
        const uint64_t pc = uint64_t(k_.t.rowBlocks) * k_.t.colBlocks;
        const bool train = k_.t.training != 0;
        const bool serial = Serial();
        channel_first::UnitScalars as[IL_CHANNELS], rs[IL_CHANNELS];
        k_.applyBegin = ab;
        k_.applyEnd = ae;
        InterleaveOrder order{ab, ae, rb, re, serial};
        uint64_t lead = 0;
        if (serial && k_.t.plTail > 0) {
            order.ahead = Max(1, (re - rb) * k_.t.plAhead / 16);
            lead = AheadTileLead(ahead, re - rb, order.ahead);
            if (lead > 0) {
                ahead->lead = true;
            }
            order.tail = Max(1, (ae - ab) * (lead > 0 ? k_.t.plTail : Min(k_.t.plTail, PL_TAIL_SIXTEENTHS)) / 16);
        }
        bool apply = false;
        uint64_t u = 0;
        order.Take(&apply, &u);
        if (serial && taken == nullptr && !(issued && apply)) {
            IssueLoad(k_, UnitRows(k_.t, u, apply), apply ? train : true);
        }
        const uint64_t steps = (ae - ab) + (re - rb);
        // tiling inBuffers: each step issues the loads of the step two ahead (the input queues' third buffer),
        // so a phase-1 unit's long first reads do not leave the next phase-2 unit's loads waiting for a buffer
        // that only the landing and compute of the unit before it free (the grad_input stores then stood idle)
        const uint64_t depth = k_.t.inBuffers >= IN_BUFFERS_AHEAD && steps > 1 ? 2 : 1;
        StepQueue held;  // depth 2: the steps after the current one whose loads are issued, in order
        if (depth == 2) {
            held.Push(&order);
        }
        // the tiles that went before the SyncAll are those LoadsBesideCombine builds on: both on interleaved
        // rounds (PairAhead), the first alone on serial ones (AloneAhead)
        const bool aheadAsPlanned = issued && second != serial;
        BesideCombine beside = LoadsBesideCombine(ab, ae, taken != nullptr, aheadAsPlanned, steps, &order, &held,
                                                  as, current);
        if (beside.pre == 0) {
            TakeScalars(ab, ae, true, as);
        } else if (beside.others && taken == nullptr) {
            OtherChannelScalars(ab, ae, &beside, as);  // before TakeScalars reloads the statistics
        }
        if (taken != nullptr) {
            for (uint64_t i = 0; i < ChannelSpan(rb, re); ++i) {
                rs[i] = taken[i];
            }
        } else if (rb < re) {
            TakeScalars(rb, re, false, rs);
        }
        k_.cachedLo = k_.cachedHi = 0;  // phase 1 refills partUb
        if (alone) {
            *share = LoadSharePartials<MODE>(k_, 0, uint64_t(k_.t.channels), AscendC::GetBlockIdx());
        }
        if (!serial && !issued) {
            IssueLoad(k_, UnitRows(k_.t, u, apply), apply ? train : true);
        }
        // SecondTile: the second phase-2 unit's loads went before the SyncAll; PairAhead: the second step's
        if (depth == 2 && !(second && (held.FrontApply() || !serial))) {
            IssueLoad(k_, UnitRows(k_.t, held.FrontUnit(), held.FrontApply()), held.FrontApply() ? train : true);
        }
        InterleaveOrder following{0, 0, 0, 0, false};  // PairAhead: the next period's steps
        if (ahead != nullptr && ahead->pair) {
            following = InterleaveOrder{ahead->ab, ahead->ae, ahead->rb, ahead->re, false};
        }
        for (uint64_t left = steps, early = beside.pre; left > 0; --left) {
            if (beside.others && !(apply && u / pc == ab / pc)) {
                OtherChannelScalars(ab, ae, &beside, as);
            }
            NextTile next;
            bool nextApply = false;
            uint64_t nu = 0;
            const bool oneAhead = lead > 0 && left < depth + lead;  // after the early ahead tile
            if (ahead != nullptr && ahead->pair && left <= depth) {
                next = PairTile(&following, ahead, left == depth);
            } else if (left == depth + lead) {
                next = AheadTile(ahead);
            } else if (left > (oneAhead ? 1 : depth) && early > 0) {
                --early;  // (its step's loads went out beside the combine)
            } else if (left > (oneAhead ? 1 : depth)) {
                order.Take(&nextApply, &nu);
                next = NextOf(k_.t, nu, nextApply, nextApply ? train : true);
                if (depth == 2 && !oneAhead) {
                    held.Push(nextApply, nu);  // the step just taken, whose loads this one issues
                }
            }
            if (depth == 2 ? !oneAhead : held.size > 0) {
                held.Pop(&nextApply, &nu);  // the step after this one (depth 1: LoadsBesideCombine's)
            }
            if (lead > 0 && left == lead) {
                HoldTile(k_, train);  // the ahead tile, queued before this unit's, kept for RunAhead
            }
            if (apply) {
                GradInputUnit<MODE>(k_, u, true, second && depth == 1 && u == ab ? NextTile() : next,
                                    &as[u / pc - ab / pc]);
            } else {
                NextTile after;
                if (left == 1) {
                    EarlyStats(ahead);
                    after = SecondTile(ahead);
                }
                ReduceUnit<MODE>(k_, u, next, LastOfBatch(u, re), &rs[u / pc - rb / pc], &after);
            }
            apply = nextApply;
            u = nu;
        }
        TakeCoefA(ahead, rb, re, rs);
        RunAhead(ahead);
        k_.WaitPartials();
        return true;
    }

    // The last round's phase 2 (units [b, e), `ahead` what its phase 1 issued before the SyncAll), on
    // Interleaved's path where the rounds are serial, so its second tile's loads and the first tile's centring
    // go beside the combine as in the rounds before it; the share's partials then load behind its coefficients
    // (*share). False (nothing run) where the rounds interleave.
    __aicore__ inline bool LastApply(uint64_t b, uint64_t e, const Ahead &ahead, bool *share)
    {
        return Serial() && Interleaved(b, e, e, e, nullptr, nullptr, ahead.issued, ahead.second, &ahead, share);
    }

    // Serial float32 rounds ending beside the next round's first units (tiling plTail) with loads two steps
    // ahead: the number of the round's last phase-1 units whose loads go after the ahead tile's (AheadTile,
    // held aside until RunAhead: HoldTile), so that tile's second reads come that many first reads sooner
    // after their first reads (in the previous round's window) and the window may open earlier within
    // the reuse distance L2 gives (tiling PL_ROUND_TAIL_TWO_SIXTEENTHS). Those units then load one step
    // ahead, enough where the phase-1 loads alone keep MTE2 busy; all of them phase-1 units (the window
    // ends before), so none takes the held tile. Without the ahead tile (the last rounds) the window
    // opens no earlier than PL_TAIL_SIXTEENTHS (Interleaved).
    __aicore__ inline uint64_t AheadTileLead(const Ahead *a, uint64_t units, uint64_t window) const
    {
        if (!IsSame<T, float>::value || a == nullptr || !(a->want || a->tile) || !PreApplies() ||
            k_.t.inBuffers < IN_BUFFERS_AHEAD || units <= window + AHEAD_TILE_LEAD) {
            return 0;
        }
        return AHEAD_TILE_LEAD;
    }

    // Rounds one after the other (the software SyncAll without ilRounds).
    __aicore__ inline bool Serial() const { return !InterleavedRounds(k_.t); }

    // Interleaved rounds with the software SyncAll (ilRounds) and loads two steps ahead (tiling inBuffers),
    // where the next period (phase 2 of units [ab, ae), phase 1 of [rb, re)) is Interleaved too: the period's
    // last two steps issue the loads of that period's first two, the look-ahead chain running on through the
    // SyncAll, so MTE2 works while the round's last unit lands and reduces and its partials drain (it stood
    // idle from the last unit's loads until after the combine and the next statistics); RunAhead casts the
    // first (a phase-2 tile) while the cores meet.
    __aicore__ inline bool PairAhead(uint64_t ab, uint64_t ae, uint64_t rb, uint64_t re) const
    {
        return !Serial() && k_.t.softSync && k_.t.inBuffers >= IN_BUFFERS_AHEAD && Fits(ab, ae, rb, re);
    }

    // PairAhead for the launch's first phase 1 (units [b, e), alone): its last unit issues the loads of the
    // first period's first two steps (phase-2 unit b, then phase-1 unit rb once its own casts freed a buffer)
    // and the first is cast while the cores meet. False (nothing run) where the first period is not PairAhead.
    __aicore__ inline bool FirstPairAhead(uint64_t b, uint64_t e, uint64_t rb, uint64_t re, Ahead *a)
    {
        if (!PairAhead(b, e, rb, re) || e - b < 2) {
            return false;
        }
        const bool train = k_.t.training != 0;
        const NextTile second = NextOf(k_.t, rb, false, true);
        ReduceUnits(b, e, true, NextOf(k_.t, b, true, train), &second);
        const TileRows r = UnitRows(k_.t, b, true);
        TakeTile(k_, train, r.rows * k_.t.rowStride);
        k_.ub.taken = true;
        a->issued = true;
        a->second = true;
        a->done = false;
        return true;
    }

    // PairAhead: the loads of the next step of the next period (`first`: its first, a phase-2 unit).
    __aicore__ inline NextTile PairTile(InterleaveOrder *following, Ahead *a, bool first) const
    {
        bool apply = false;
        uint64_t u = 0;
        following->Take(&apply, &u);
        if (first) {
            a->issued = true;
        } else {
            a->second = true;
        }
        return NextOf(k_.t, u, apply, apply ? k_.t.training != 0 : true);
    }

    // Whether phase-1 unit u of a run ending at e sends the batch of partials (StoreBatch's flush). Serial
    // rounds without float ReduceSum also send it one unit early: the scalar unit folds the lanes of the
    // batch's other units (FoldBatchLanes) while the last unit's tile still streams in, so between the
    // round's last vector instruction and its SyncAll only that unit's lanes are folded and stored.
    __aicore__ inline bool LastOfBatch(uint64_t u, uint64_t e) const
    {
        return u + 1 == e || (Serial() && !HasFloatReduceSum(k_.t) && u + 2 == e);
    }

    // Whether Interleaved runs phase 2 of units [ab, ae) and phase 1 of [rb, re): both non-empty, neither
    // touching more than IL_CHANNELS channels.
    __aicore__ inline bool Fits(uint64_t ab, uint64_t ae, uint64_t rb, uint64_t re) const
    {
        return ab < ae && rb < re && ChannelSpan(ab, ae) <= IL_CHANNELS && ChannelSpan(rb, re) <= IL_CHANNELS;
    }

    // Rounds one after the other (not InterleavedRounds): phase 2 (`apply`) or phase 1 of units [b, e) with
    // every channel's scalars taken first (TakeScalars), the first tile's loads issued before them, so a
    // run that crosses channels does not stop at each one to load its group's vectors (a full barrier).
    // The same arithmetic per unit as ApplyUnits and ReduceUnits. False (nothing run) when the range is
    // empty, touches more than IL_CHANNELS channels, or the rounds interleave.
    // `share` (phase 2 of the last round): the share's partials loaded once the coefficients are taken
    // (LoadSharePartials; *share whether it did).
    __aicore__ inline bool Taken(uint64_t b, uint64_t e, bool apply, Ahead *ahead = nullptr, bool *share = nullptr,
                                 bool issued = false, bool second = false)
    {
        if (InterleavedRounds(k_.t) || b >= e || ChannelSpan(b, e) > IL_CHANNELS) {
            return false;
        }
        const uint64_t pc = uint64_t(k_.t.rowBlocks) * k_.t.colBlocks;
        const bool withX = apply ? k_.t.training != 0 : true;
        channel_first::UnitScalars s[IL_CHANNELS];
        if (apply) {
            k_.applyBegin = b;
            k_.applyEnd = e;
        }
        if (!(issued && apply)) {
            const int64_t early = apply ? -1 : StatsBeforeTile(b);
            IssueLoad(k_, UnitRows(k_.t, b, apply), withX);
            StatsLanded(early);
        }
        TakeScalars(b, e, apply, s);
        if (share != nullptr) {
            *share = LoadSharePartials<MODE>(k_, 0, uint64_t(k_.t.channels), AscendC::GetBlockIdx());
        }
        for (uint64_t u = b; u < e; ++u) {
            const NextTile next = u + 1 < e ? NextOf(k_.t, u + 1, apply, withX) : AheadTile(apply ? nullptr : ahead);
            if (apply) {
                GradInputUnit<MODE>(k_, u, true, second && u == b ? NextTile() : next, &s[u / pc - b / pc]);
            } else {
                NextTile after;
                if (u + 1 == e) {
                    EarlyStats(ahead);
                    after = SecondTile(ahead);
                }
                ReduceUnit<MODE>(k_, u, next, LastOfBatch(u, e), &s[u / pc - b / pc], &after);
            }
        }
        if (!apply) {
            TakeCoefA(ahead, b, e, s);
            RunAhead(ahead);
            k_.WaitPartials();
        }
        return true;
    }

    // Phase 1 of units [b, ...) whose first group's statistics are not in UB (the launch's first round): their
    // loads go out before the first tile's, with an event of their own (statsEvent), so the scalars wait for
    // them alone, not (LoadStats' full barrier) for the tile too, and the next tile's loads follow the first
    // at once instead of a copy latency later. Returns the group (-1: nothing issued; StatsLanded then does
    // nothing).
    __aicore__ inline int64_t StatsBeforeTile(uint64_t b)
    {
        const int64_t g = GroupOf(k_.t, int64_t(b / (uint64_t(k_.t.rowBlocks) * k_.t.colBlocks)));
        if (!k_.t.training || k_.statsGroup == g) {
            return -1;
        }
        IssueStatLoads(k_, g, true);  // a tail past the vector's end deferred (FinishDeferredStatLoads)
        k_.statsGroup = -1;           // being overwritten: FinishDeferredStatLoads sets it
        statsEvent_ = k_.pipe.template AllocEventID<AscendC::HardEvent::MTE2_V>();
        AscendC::SetFlag<AscendC::HardEvent::MTE2_V>(statsEvent_);
        return g;
    }

    // StatsBeforeTile's loads of group g landed (the vector unit waits, then the scalar unit behind it).
    __aicore__ inline void StatsLanded(int64_t g)
    {
        if (g < 0) {
            return;
        }
        AscendC::WaitFlag<AscendC::HardEvent::MTE2_V>(statsEvent_);
        k_.pipe.template ReleaseEventID<AscendC::HardEvent::MTE2_V>(statsEvent_);
        FinishDeferredStatLoads(k_, g);  // (ends with their casts before the scalar reads)
    }

    __aicore__ inline uint64_t GroupEnd(uint64_t g1)
    {
        return g1 >= uint64_t(k_.t.groups) ? uint64_t(k_.t.channels) : uint64_t(GroupStart(k_.t, int64_t(g1)));
    }

    __aicore__ inline void ParamGrads(bool reduced)
    {
        const GroupWalk w = ParamGroupsOfCore(k_.t, k_.share, AscendC::GetBlockIdx());
        for (uint64_t g = w.first; g < w.end; g += w.step) {
            WriteParamGrads<MODE>(k_, g, reduced);
        }
    }

    KernelState<T> k_;
    AscendC::TEventID statsEvent_ = 0;  // StatsBeforeTile's
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

// A SyncBatchNorm step (MODE_REDUCE or MODE_ELEMT) in T: the sums and, for ELEMT, the counter.
template <typename T, uint32_t MODE>
__aicore__ inline void RunSyncBatchNormStep(GM_ADDR gradOut, GM_ADDR input, GM_ADDR *params, GM_ADDR gradInput,
                                            GM_ADDR gradWeight, GM_ADDR gradBias, GM_ADDR sumDy, GM_ADDR sumDyXmu,
                                            GM_ADDR counter, GM_ADDR workspace, const BatchNormSyncTilingData &tiling)
{
    BatchNormBackwardKernel<T, MODE> op;
    op.Init(gradOut, input, params, gradInput, gradWeight, gradBias, workspace, tiling.base);
    op.SetSync(sumDy, sumDyXmu, counter, tiling.counterLen, tiling.counterType);
    op.Process();
}

// RunSyncBatchNormStep in the element type of the tiling (bfloat16 only where the core has it).
template <uint32_t MODE>
__aicore__ inline void DispatchSyncBatchNormStep(GM_ADDR gradOut, GM_ADDR input, GM_ADDR *params, GM_ADDR gradInput,
                                                 GM_ADDR gradWeight, GM_ADDR gradBias, GM_ADDR sumDy, GM_ADDR sumDyXmu,
                                                 GM_ADDR counter, GM_ADDR workspace,
                                                 const BatchNormSyncTilingData &tiling)
{
    if (tiling.base.dtype == ELEM_FLOAT32) {
        RunSyncBatchNormStep<float, MODE>(gradOut, input, params, gradInput, gradWeight, gradBias, sumDy, sumDyXmu,
                                          counter, workspace, tiling);
    } else if (tiling.base.dtype == ELEM_FLOAT16) {
        RunSyncBatchNormStep<half, MODE>(gradOut, input, params, gradInput, gradWeight, gradBias, sumDy, sumDyXmu,
                                         counter, workspace, tiling);
    }
#if BNB_SOC_HAS_BF16
    else if (tiling.base.dtype == ELEM_BFLOAT16) {
        RunSyncBatchNormStep<bfloat16_t, MODE>(gradOut, input, params, gradInput, gradWeight, gradBias, sumDy,
                                               sumDyXmu, counter, workspace, tiling);
    }
#endif
}

}  // namespace bnb

#endif
