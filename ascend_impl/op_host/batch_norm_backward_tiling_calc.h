// Host-side tiling of BatchNormBackward as a pure function of shapes,
// attributes and the SoC's limits (UB bytes, cores, DataCopyPad). Called
// by the op_host tiling function and by the CPU build's launcher.
#ifndef BATCH_NORM_BACKWARD_TILING_CALC_H
#define BATCH_NORM_BACKWARD_TILING_CALC_H
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>
#include "../op_kernel/batch_norm_backward_tiling.h"

namespace bnb {

struct TilingInput {
    std::vector<int64_t> shape;   // grad_out shape, rank MIN_RANK..MAX_RANK
    bool channelLast = false;
    uint32_t dtype = ELEM_FLOAT32;
    bool training = true;
    uint32_t outputMask = 7;
    uint32_t present = 0;         // bit per Param
    uint32_t paramFloat32 = 0;    // bit per Param
    bool gradParamFloat32 = false;
    float eps = 1e-5f;
    uint32_t ubBytes = 0;
    uint32_t coreNum = 1;
    bool hasDataCopyPad = true;
    bool hasSyncAll = true;       // hardware SyncAll (Atlas A2 / A3 / 350)
    bool hasSoftSyncAll = true;   // the software SyncAll (every line; used where the hardware one is missing)
    bool hasDcci = true;          // DataCacheCleanAndInvalid (Atlas A2 / A3 / 350)
    bool hasBf16 = true;          // bfloat16 kernels are built (not on Atlas training / inference)
    bool hasMulAdd = false;       // MulAddDst / FusedMulAdd (not on Atlas training, ascend910)
    bool hasReduceRepeat = false; // ReduceRepeat<SUM> and ReduceSum on float (not on Atlas training, ascend910)
    bool hasBlockCopy = false;    // Brcb and the masked UB -> UB Copy (not on Atlas training / inference)
    uint32_t eventIds = 4;        // event ids per HardEvent (QUE_MAX_EVENT: 4 on dav-c100, 8 on the others; the
                                  // SoC table's event_ids): the single pass's chunks x buffers stay below it
    bool allowSinglePass = true;  // BatchNormBackward; the SyncBatchNorm steps read each tensor once anyway
    uint64_t l2Bytes = 0;         // L2 of the chip (0: unknown, no L2 rounds)
};

// L2 rounds: the partial slots of the channels a core's units of one round touch (the most of any core: its
// share of the round's units, plus one channel they may straddle), which each round's combine loads in one copy.
inline uint64_t OwnRoundSlots(const BatchNormBackwardTilingData &t)
{
    const uint64_t pc = uint64_t(t.rowBlocks) * uint64_t(t.colBlocks);
    const uint64_t cores = std::max<uint32_t>(t.usedCores, 1);
    const uint64_t roundChannels = uint64_t(t.l2Rounds) * t.groupWidth;
    const uint64_t roundUnits = std::min<uint64_t>(roundChannels, uint64_t(t.channels)) * pc;
    return std::min<uint64_t>(CeilDiv(CeilDiv(roundUnits, cores), pc) + 1, roundChannels) * pc;
}

// Two passes across cores, channel-first, training: when grad_out + input
// exceed the L2 budget, the channels are cut into rounds whose grad_out +
// input fit it, each round into about one group per core (so the
// combine of a round runs on many cores at once), and the kernel runs both
// passes round by round (one SyncAll per round): a round's second read follows
// its first within that many bytes. The budget is L2 / L2_ROUND_DIVISOR where
// the rounds run one after the other (the software SyncAll, but ilRounds); with
// the hardware SyncAll the kernel runs phase 2 of a round beside phase 1 of the
// next (L2Rounds, Interleaved), so two rounds share L2: L2 / IL_ROUND_DIVISOR
// (software SyncAll, ilRounds: SOFT_IL_L2_TENTHS of L2).
inline void TryL2Rounds(const TilingInput &in, BatchNormBackwardTilingData &t)
{
    if (t.strategy != STRATEGY_TWO_PASS || !t.crossCore || t.layout != LAYOUT_CHANNEL_FIRST || !in.training ||
        in.l2Bytes == 0 || t.channels <= 1) {
        return;
    }
    const uint64_t perChannel = 2ull * uint64_t(t.outer) * uint64_t(t.inner) * DtypeBytes(in.dtype);
    // With the software SyncAll the rounds interleave (ilRounds) where the SoC has mul_add (the vector unit
    // is not the busiest pipe) and two channels fit a round of SOFT_IL_L2_TENTHS of L2 (fewer would double
    // the software SyncAlls, each a few GM round trips, for the overlap of one channel's units).
    const uint64_t softIlBudget = in.l2Bytes * SOFT_IL_L2_TENTHS / 10;
    t.ilRounds = t.softSync && in.hasMulAdd && 2 * perChannel <= softIlBudget ? 1 : 0;
    const uint64_t budget = t.ilRounds ? softIlBudget
                                       : in.l2Bytes / (InterleavedRounds(t) ? IL_ROUND_DIVISOR : L2_ROUND_DIVISOR);
    if (perChannel * uint64_t(t.channels) <= budget) {
        return;  // the whole tensor pair fits: one round is the plain two-pass order
    }
    // No group wider than before (the channel vectors of the UB plan hold it); the
    // last group is the remainder (these SoCs write short vectors exactly).
    // Interleaved: the fewest rounds that fit, of even size (a last round of a few channels has little
    // to overlap its neighbour with). With the software SyncAll rounds as large as fit, the last the rest.
    const uint64_t fitChannels = std::max<uint64_t>(1, budget / perChannel);
    const uint64_t rounds = CeilDiv(uint64_t(t.channels), fitChannels);
    const uint64_t roundChannels = InterleavedRounds(t) ? CeilDiv(uint64_t(t.channels), rounds) : fitChannels;
    // With the software SyncAll each core loads the vectors of the groups its units of a round touch, one
    // round trip and full barrier per group, and no core combines for another: there a group is as wide as
    // the round (at most the plan's), so that is one load however many channels the core's units cross.
    uint64_t width = std::max<uint64_t>(
        1, std::min<uint64_t>(t.softSync ? roundChannels : CeilDiv(roundChannels, std::max<uint32_t>(t.usedCores, 1)),
                              t.groupWidth));
    if (t.softSync && !t.ilRounds && roundChannels > width && t.vecElems > width) {
        // Rounds one after the other, each a fixed cost (its SyncAll and round trips): the round's channels in
        // as few groups as the channel vectors (vecElems) hold, of even width, so a round is not cut to a
        // multiple of the plan's narrower width, where that saves rounds.
        const uint64_t even = roundChannels / CeilDiv(roundChannels, uint64_t(t.vecElems));
        const uint64_t c = uint64_t(t.channels);
        if (CeilDiv(c, roundChannels / even * even) < CeilDiv(c, roundChannels / width * width)) {
            width = even;
        }
    }
    t.groupWidth = uint32_t(width);
    t.groups = int64_t(CeilDiv(uint64_t(t.channels), width));
    // Rounds one after the other on SoCs without DataCopyPad that fuse the multiply-adds (Atlas inference:
    // phase 2 bound by its stores, MTE2 mostly idle in it): the last PL_TAIL_SIXTEENTHS of a core's
    // phase-2 units of a round run beside the first PL_ROUND_AHEAD_SIXTEENTHS of its phase-1 units of the
    // next (plTail), as TailPipelineInL2 does for whole channels.
    if (!InterleavedRounds(t) && in.hasMulAdd && !in.hasDataCopyPad) {
        t.plTail = PL_TAIL_SIXTEENTHS;
        t.plAhead = PL_ROUND_AHEAD_SIXTEENTHS;
    }
    t.l2Rounds = uint32_t(std::max<uint64_t>(
        1, InterleavedRounds(t) ? std::min<uint64_t>(CeilDiv(uint64_t(t.groups), rounds), fitChannels / width)
                                : roundChannels / width));
    // Each core combines the channels its units of a round touch (after the round's SyncAll), and at the
    // end its share of all channels (grad_weight / grad_bias): partUb holds the partials of either where
    // UB has room, so each combine loads them in one copy (one round trip, issued beside the statistics').
    // With the software SyncAll a round is one group (above) and the shares are whole blocks of channels
    // (NoPadGroupWidth, the last core the remainder).
    const uint64_t pc = uint64_t(t.rowBlocks) * uint64_t(t.colBlocks);
    const uint64_t cores = std::max<uint32_t>(t.usedCores, 1);
    const uint64_t own = OwnRoundSlots(t);
    // (the kernel's ChannelShareOfCore: with the software SyncAll whole blocks of grad_weight / grad_bias,
    // ShareQuantum channels, the last core takes the remainder)
    uint64_t shareChannels = CeilDiv(uint64_t(t.channels), cores);
    if (t.softSync) {
        const uint64_t c = uint64_t(t.channels);
        const uint64_t q = in.dtype == ELEM_FLOAT32 || t.gradParamFloat32 ? BLOCK_BYTES / sizeof(float) : PARAM_CHUNK_NO_PAD;
        const uint64_t runs = std::max<uint64_t>(c / q, 1);
        for (uint64_t core = 0; core < cores; ++core) {
            const uint64_t b = std::min(c, q * (runs * core / cores));
            const uint64_t e = core + 1 == cores ? c : std::min(c, q * (runs * (core + 1) / cores));
            shareChannels = std::max(shareChannels, e - b);
        }
    }
    const uint64_t share = shareChannels * pc;
    const uint64_t want = std::max(own, share);
    const uint64_t used = MakeUbPlan(t.tileRows, t.rowStride, t.vecElems, t.layout, in.dtype, t.outBuffers).Total() +
                          (t.softSync ? SyncWorkBytes(uint32_t(cores)) : 0);
    const uint64_t slotBytes = UNIT_SLOT_FLOATS * sizeof(float);
    const uint64_t room = uint64_t(PART_HALVES) * SLOTS_PER_LOAD + (in.ubBytes > used ? (in.ubBytes - used) / slotBytes : 0);
    const uint64_t slots = std::min(want, room);
    t.partSlots = slots > uint64_t(PART_HALVES) * SLOTS_PER_LOAD ? uint32_t(slots) : 0;
}

// Whole groups per core (crossCore 0), BatchNormBackward in training with grad_input, a channel's
// partials in one UB batch: the kernel pipelines a group's channels (ChannelPipeline: channel c's second
// read beside channel c + 1's first), so two channels per core are in flight between a first read and
// its second. Whether those of every core fit L2 / L2_ROUND_DIVISOR: then that order keeps the second
// reads in L2 without l2Channels (whose channels run one after another, not pipelined).
inline bool ChannelPipelineInL2(const TilingInput &in, const BatchNormBackwardTilingData &t)
{
    if (t.strategy != STRATEGY_TWO_PASS || t.crossCore || t.layout != LAYOUT_CHANNEL_FIRST || t.flat ||
        !in.allowSinglePass /* BatchNormBackward, not a SyncBatchNorm step */ || !in.training ||
        !(in.outputMask >> GRAD_INPUT & 1) || in.l2Bytes == 0 ||
        uint64_t(t.rowBlocks) * uint64_t(t.colBlocks) > SLOTS_PER_LOAD) {
        return false;
    }
    const uint64_t perChannel = 2ull * uint64_t(t.outer) * uint64_t(t.inner) * DtypeBytes(in.dtype);
    return 2 * perChannel * std::max<uint32_t>(t.usedCores, 1) <= in.l2Bytes / L2_ROUND_DIVISOR;
}

// Whole groups per core, where one channel per core fits the L2 budget but two do not (ChannelPipelineInL2
// false; l2Channels would be 1): on SoCs without DataCopyPad that fuse the multiply-adds (Atlas inference;
// phase 2 is bound by its grad_input stores, so MTE2 stands mostly idle in it) the channels are pipelined
// only in part (plTail): the last PL_TAIL_SIXTEENTHS of channel c's phase-2 units run beside the first
// PL_AHEAD_SIXTEENTHS of channel c + 1's phase-1 units, the rest of each phase alone. A block of c + 1 read
// in that window is read again after the rest of c's phase 2 and c + 1's phase 1, within about one channel
// per core more than the plain order (the l2Channels bound), where the full pipeline would take two.
inline bool TailPipelineInL2(const TilingInput &in, BatchNormBackwardTilingData &t)
{
    if (!in.hasMulAdd || in.hasDataCopyPad || t.strategy != STRATEGY_TWO_PASS || t.crossCore ||
        t.layout != LAYOUT_CHANNEL_FIRST || t.flat || !in.allowSinglePass || !in.training ||
        !(in.outputMask >> GRAD_INPUT & 1) || in.l2Bytes == 0) {
        return false;
    }
    const uint64_t pc = uint64_t(t.rowBlocks) * uint64_t(t.colBlocks);
    const uint64_t tail = pc * PL_TAIL_SIXTEENTHS / 16, ahead = pc * PL_AHEAD_SIXTEENTHS / 16;
    if (pc > SLOTS_PER_LOAD || tail == 0 || ahead == 0) {
        return false;
    }
    t.plTail = PL_TAIL_SIXTEENTHS;
    t.plAhead = PL_AHEAD_SIXTEENTHS;
    return true;
}

// Two passes, whole groups per core (no SyncAll: crossCore 0), channel-first:
// when grad_out + input of one group on every core exceed L2 /
// L2_ROUND_DIVISOR but those of a few channels do not, the kernel runs both
// passes over that many channels of a group at a time (GroupByGroup), so their
// second read follows their first while it is in L2; grad_weight / grad_bias
// still leave per group.
inline void TryL2Channels(const TilingInput &in, BatchNormBackwardTilingData &t)
{
    if (t.strategy != STRATEGY_TWO_PASS || t.crossCore || t.layout != LAYOUT_CHANNEL_FIRST || t.flat ||
        in.l2Bytes == 0 || t.groups <= 0) {
        return;
    }
    const uint64_t perChannel = 2ull * uint64_t(t.outer) * uint64_t(t.inner) * DtypeBytes(in.dtype);
    const uint64_t fit = in.l2Bytes / L2_ROUND_DIVISOR / (perChannel * std::max<uint32_t>(t.usedCores, 1));
    const uint64_t last = uint64_t(t.channels) - uint64_t(t.groups - 1) * t.groupWidth;  // takes the remainder
    const uint64_t widest = std::max<uint64_t>(t.groupWidth, last);
    if (ChannelPipelineInL2(in, t)) {
        return;
    }
    if (fit == 1 && widest > 1 && TailPipelineInL2(in, t)) {
        return;
    }
    if (fit >= 1 && fit < widest) {
        t.l2Channels = uint32_t(fit);
    }
}

// Two passes, channel-first, without DataCopyPad (QUEUE_DEPTH grad_input buffers, OutBuffers): a third
// grad_input buffer where the SoC's event ids hold it (a freed buffer holds an MTE3_V id until it is allocated
// again, beside the partials' PART_HALVES and one of the kernel's own: QUE_MAX_EVENT is 4 on ascend910, 8 on
// ascend310p) and UB has room for it with the tiles already chosen (and the software SyncAll's workspace), so
// the vector unit runs a unit further ahead of the grad_input stores: phase 2 is bound by them there, and a
// vector unit held by a full queue holds the input buffers the next loads wait for.
inline void TryThirdOutBuffer(const TilingInput &in, BatchNormBackwardTilingData &t)
{
    if (in.hasDataCopyPad || t.strategy != STRATEGY_TWO_PASS || t.layout != LAYOUT_CHANNEL_FIRST || t.flat ||
        t.outBuffers >= OUT_BUFFERS_IN_PLACE || OUT_BUFFERS_IN_PLACE + PART_HALVES + 1 > in.eventIds) {
        return;
    }
    const uint64_t cores = std::min<uint64_t>(in.coreNum, MAX_CORES);
    const uint64_t plan =
        MakeUbPlan(t.tileRows, t.rowStride, t.vecElems, t.layout, in.dtype, OUT_BUFFERS_IN_PLACE).Total();
    if (plan + SyncWorkBytes(uint32_t(cores)) <= in.ubBytes) {
        t.outBuffers = OUT_BUFFERS_IN_PLACE;
    }
}

// Whole channels per core, pipelined (ChannelPipeline), on SoCs without DataCopyPad that fuse the multiply-adds
// (Atlas inference: phase 1 bound by its first reads, phase 2 by its grad_input stores): the input queues take
// IN_BUFFERS_AHEAD buffers and each step issues the loads of the step two ahead, where the SoC's event ids hold
// them (each buffer an MTE2_V id while queued and a V_MTE2 id once freed, beside one of the kernel's own) and
// UB has room -- in place of the third grad_input buffer (TryThirdOutBuffer) where both do not fit. With one
// unit ahead a phase-1 unit's first reads left the next phase-2 unit's loads behind them waiting for a buffer
// that only that unit's landing and reduce free, and the stores stood idle meanwhile.
// The same for the software SyncAll's L2 rounds whose phase 2 runs beside phase-1 units of the next round
// (Interleaved: ilRounds, or serial rounds with plTail), where those units stalled the stores the same way;
// for the serial ones partUb may shrink to the round's own partials (OwnRoundSlots: the final share's then
// come from GM, once) to make room, and the window takes more of the next round's units
// (PL_ROUND_AHEAD_TWO_SIXTEENTHS).
inline void TryLoadsTwoAhead(const TilingInput &in, BatchNormBackwardTilingData &t)
{
    const bool channelPipeline = !t.crossCore && uint64_t(t.rowBlocks) * uint64_t(t.colBlocks) <= SLOTS_PER_LOAD;
    const bool tailRounds = t.crossCore && t.softSync && t.l2Rounds > 0 && !t.ilRounds && t.plTail > 0;
    const bool mixedRounds = tailRounds || (t.crossCore && t.softSync && t.l2Rounds > 0 && t.ilRounds);
    if (in.hasDataCopyPad || !in.hasMulAdd || !in.allowSinglePass || !in.training ||
        !(in.outputMask >> GRAD_INPUT & 1) || t.strategy != STRATEGY_TWO_PASS || !(channelPipeline || mixedRounds) ||
        t.layout != LAYOUT_CHANNEL_FIRST || t.flat || t.groups <= 0 || 2 * IN_BUFFERS_AHEAD + 2 > in.eventIds) {
        return;
    }
    const uint64_t sync = t.softSync ? SyncWorkBytes(t.usedCores) : 0;
    const uint32_t own = tailRounds && t.partSlots > 0 ? uint32_t(std::min<uint64_t>(OwnRoundSlots(t), t.partSlots))
                                                       : t.partSlots;
    for (const uint32_t out : {t.outBuffers, QUEUE_DEPTH}) {
        for (const uint32_t slots : {t.partSlots, own}) {
            if (MakeUbPlan(t.tileRows, t.rowStride, t.vecElems, t.layout, in.dtype, out, slots, IN_BUFFERS_AHEAD)
                        .Total() + sync <= in.ubBytes) {
                t.outBuffers = out;
                t.inBuffers = IN_BUFFERS_AHEAD;
                t.partSlots = slots > uint32_t(PART_HALVES) * SLOTS_PER_LOAD ? slots : 0;
                t.plAhead = tailRounds ? PL_ROUND_AHEAD_TWO_SIXTEENTHS : t.plAhead;
                // float32: the ahead tile's second reads come AHEAD_TILE_LEAD first reads sooner (the
                // kernel's AheadTileLead), so the window may open that much earlier in the round
                t.plTail = tailRounds && in.dtype == ELEM_FLOAT32 ? PL_ROUND_TAIL_TWO_SIXTEENTHS : t.plTail;
                return;
            }
        }
    }
}

// Two passes: tile columns preferred at least this wide (ComputeTiling).
constexpr uint64_t MIN_TILE_COLS = 1024;

// Whole channels per core (two passes across cores, channel-first: the
// SyncBatchNorm reduce step and, in training, BatchNormBackward): when every
// core can take whole channels with a balance within WHOLE_CHANNEL_SLACK of
// the even split (or a channel is one unit anyway), the channels are cut into
// balanced groups, contiguous runs of them per core, and no channel's
// partials come from two cores: no SyncAll, no schedule mode 1 -- the rule of
// the main kernel's single pass. The sums are formed in the same unit order
// either way. `l2Groups`: at least as many groups per core as it takes for the
// grad_out + input of one group on every core to fit L2 / L2_ROUND_DIVISOR
// (BatchNormBackward runs both passes group by group, so a group's second read
// follows its first while it is in L2, as with TryL2Rounds). Returns whether
// it applied.
constexpr double WHOLE_CHANNEL_SLACK = 1.125;
inline bool TryWholeChannels(const TilingInput &in, BatchNormBackwardTilingData &t, bool l2Groups = false)
{
    if (t.strategy != STRATEGY_TWO_PASS || !t.crossCore || t.usedCores <= 1 || t.layout != LAYOUT_CHANNEL_FIRST ||
        t.flat || t.channels <= 0) {
        return false;
    }
    const uint64_t c = uint64_t(t.channels), n = std::min<uint64_t>(in.coreNum, MAX_CORES);
    const uint64_t perChannel = uint64_t(t.rowBlocks) * uint64_t(t.colBlocks);
    if (perChannel != 1 && double(CeilDiv(c, n) * n) > WHOLE_CHANNEL_SLACK * double(c)) {
        return false;
    }
    const uint64_t cores = std::min<uint64_t>(c, n);
    uint64_t perCore = 1;
    if (l2Groups && in.l2Bytes > 0) {
        const uint64_t pair = 2ull * uint64_t(t.outer) * uint64_t(t.inner) * DtypeBytes(in.dtype) * c;
        perCore = std::max<uint64_t>(1, CeilDiv(pair, in.l2Bytes / L2_ROUND_DIVISOR));
        if (perCore * cores > c) {
            return false;  // one channel per core is more than the budget: TryL2Rounds shares channels over cores
        }
    }
    const uint64_t groups = std::min<uint64_t>(c, std::max<uint64_t>(cores * perCore, CeilDiv(c, t.vecElems)));
    t.balanced = 1;
    t.groups = int64_t(groups);
    t.groupWidth = uint32_t(CeilDiv(c, groups));  // the widest group (balanced: C * g / groups)
    t.crossCore = 0;
    t.l2Rounds = 0;
    t.usedCores = uint32_t(cores);
    return true;
}

// Channels of a group without DataCopyPad: one block of the narrowest
// per-channel vector in GM (whole-block loads of weight / mean / invstd and
// writes of grad_weight / grad_bias, the tails moved back): 8 channels when
// all of them are float32, else PARAM_CHUNK_NO_PAD. (The SyncBatchNorm sums
// follow save_mean's dtype, one of the inputs checked here.)
inline uint64_t NoPadGroupWidth(const TilingInput &in)
{
    const uint32_t loaded = in.present & (in.training ? PARAMS_USED_IN_TRAINING : PARAMS_USED_IN_INFERENCE);
    const bool vectorsFloat = in.dtype == ELEM_FLOAT32 || (in.gradParamFloat32 && (in.paramFloat32 & loaded) == loaded);
    return vectorsFloat ? BLOCK_BYTES / sizeof(float) : PARAM_CHUNK_NO_PAD;
}

// Two passes on a SoC with the software SyncAll, without DataCopyPad, that fuses the multiply-adds (Atlas
// inference), BatchNormBackward in training with grad_input, channel-first, whole groups per core that leave
// cores idle (a group is at least one block of the per-channel vectors, NoPadGroupWidth: a 64-channel 16-bit
// layer runs on 4 of 8 cores): where every core can take whole channels, at least two (so they pipeline,
// ChannelPipeline), balanced within WHOLE_CHANNEL_SLACK, and two channels of every core fit L2 /
// L2_ROUND_DIVISOR (ChannelPipelineInL2), one group of whole channels per core instead, grad_weight /
// grad_bias of the groups stashed in the workspace and written in whole blocks after one software SyncAll
// (StashedTwoPass, as the single pass's softSync), rather than the cross-core L2 rounds of TrySoftSync (a
// SyncAll and a combine per round). Returns whether it applied.
inline bool TrySoftWholeChannels(const TilingInput &in, BatchNormBackwardTilingData &t)
{
    if (in.hasSyncAll || !in.hasSoftSyncAll || in.hasDataCopyPad || !in.hasMulAdd || !in.allowSinglePass ||
        t.strategy != STRATEGY_TWO_PASS || t.crossCore || t.layout != LAYOUT_CHANNEL_FIRST || t.flat || t.usePad ||
        t.shiftLast || !in.training || !(in.outputMask >> GRAD_INPUT & 1) || t.groups <= 0 || in.l2Bytes == 0) {
        return false;
    }
    const uint64_t eb = DtypeBytes(in.dtype), c = uint64_t(t.channels);
    const uint64_t cores = std::min<uint64_t>(in.coreNum, MAX_CORES);
    if (uint64_t(t.inner) * eb % BLOCK_BYTES != 0 || cores <= t.usedCores || c < 2 * cores ||
        double(CeilDiv(c, cores) * cores) > WHOLE_CHANNEL_SLACK * double(c) ||
        uint64_t(t.rowBlocks) * uint64_t(t.colBlocks) > SLOTS_PER_LOAD) {
        return false;
    }
    const uint64_t plan = MakeUbPlan(t.tileRows, t.rowStride, t.vecElems, t.layout, in.dtype, t.outBuffers).Total();
    if (plan + SyncWorkBytes(uint32_t(cores)) > in.ubBytes) {
        return false;
    }
    BatchNormBackwardTilingData w = t;
    w.balanced = 1;
    w.groups = int64_t(cores);
    w.groupWidth = uint32_t(CeilDiv(c, cores));  // the widest group (balanced: C * g / groups)
    w.usedCores = uint32_t(cores);
    w.l2Channels = 0;
    w.plTail = 0;
    w.plAhead = 0;
    if (w.groupWidth > w.vecElems || !ChannelPipelineInL2(in, w)) {
        return false;
    }
    w.softSync = 1;
    t = w;
    return true;
}

// Two passes on a SoC with the software SyncAll but not the hardware one
// (Atlas training / inference), BatchNormBackward in training with
// grad_input (not the SyncBatchNorm steps: ComputeSyncTiling), channel-first: whole groups per core leave cores idle (a group
// is at least one block of the per-channel vectors, NoPadGroupWidth: a
// 64-channel float32 layer runs on 8 cores) and, where one group on every
// core exceeds L2 / L2_ROUND_DIVISOR and no few channels of it fit
// (TryL2Channels found none), read the second pass from GM. Then, when every
// row is whole blocks (so no block of grad_input is shared by two cores'
// units) and the software SyncAll's UB workspace fits beside the plan, the
// launch runs cross-core instead, as on the lines with the hardware SyncAll:
// units over all cores and, where the tensor exceeds the L2 budget, the L2
// rounds (softSync: one software SyncAll per round, each core combining the
// channels its own units touch; grad_weight / grad_bias written at the end
// in whole blocks of channels).
inline void TrySoftSync(const TilingInput &in, BatchNormBackwardTilingData &t)
{
    if (in.hasSyncAll || !in.hasSoftSyncAll || t.strategy != STRATEGY_TWO_PASS || t.crossCore ||
        t.layout != LAYOUT_CHANNEL_FIRST || t.flat || t.usePad || t.shiftLast || !in.training ||
        !(in.outputMask >> GRAD_INPUT & 1) || t.groups <= 0) {
        return;
    }
    const uint64_t eb = DtypeBytes(in.dtype), inner = uint64_t(t.inner);
    if (inner * eb % BLOCK_BYTES != 0 || uint64_t(t.channels) < NoPadGroupWidth(in)) {
        return;
    }
    const uint64_t cores = std::min<uint64_t>({uint64_t(t.units), in.coreNum, MAX_CORES});
    const uint64_t perChannel = 2ull * uint64_t(t.outer) * inner * eb;
    const uint64_t last = uint64_t(t.channels) - uint64_t(t.groups - 1) * t.groupWidth;
    const uint64_t widest = std::max<uint64_t>(t.groupWidth, last);
    const bool secondFromGm = in.l2Bytes > 0 && t.l2Channels == 0 && t.plTail == 0 && !ChannelPipelineInL2(in, t) &&
                              widest * perChannel * t.usedCores > in.l2Bytes / L2_ROUND_DIVISOR;
    if (cores <= 1 || (cores <= t.usedCores && !secondFromGm)) {
        return;
    }
    const uint64_t plan = MakeUbPlan(t.tileRows, t.rowStride, t.vecElems, t.layout, in.dtype, t.outBuffers).Total();
    if (plan + SyncWorkBytes(uint32_t(cores)) > in.ubBytes) {
        return;
    }
    t.crossCore = 1;
    t.softSync = 1;
    t.l2Channels = 0;
    t.usedCores = uint32_t(cores);
    TryL2Rounds(in, t);
}

// Tiling spSpare (SinglePassRing): the rows of a chunk where one resident buffer of `channels` as a ring of chunk
// slots with `spare` spare ones fits UB beside `fixed` bytes; 0 where it does not.
inline uint64_t RingChunkRows(const TilingInput &in, uint64_t fixed, uint64_t outer, uint64_t channels,
                              uint64_t rowStride, uint32_t slabRows, uint32_t segSum, uint32_t vecElems,
                              uint32_t accRows, uint32_t spare)
{
    const uint64_t eb = DtypeBytes(in.dtype);
    const SinglePassPlan p = MakeSinglePassPlan(outer, uint32_t(channels), uint32_t(rowStride), in.dtype, 1, slabRows,
                                                segSum, vecElems, in.hasMulAdd ? 1 : 0, accRows);
    // a slot is an event id (below QUE_MAX_EVENT); with fewer ids than SP_MAX_CHUNKS one is kept for the last
    // chunk's first half (the kernel's HalfRows signals it on the id past the slots)
    const uint64_t ids = in.eventIds < SP_MAX_CHUNKS ? in.eventIds - 1 : SP_MAX_CHUNKS;
    if (ids <= spare) {
        return 0;
    }
    const uint64_t rows = AlignUp(CeilDiv(outer, std::min<uint64_t>(ids - spare, outer)), slabRows);
    const uint64_t chunks = CeilDiv(outer, rows);
    const uint64_t ring = (chunks + spare) * rows * channels * rowStride * eb;
    if (chunks < 2 || chunks + spare > ids || ring >= (1ull << 31)) {
        return 0;
    }
    return fixed + p.Total() - 2ull * p.residentBytes + 2ull * ring <= in.ubBytes ? rows : 0;
}

// The SoC and dtype take the ring of chunk slots (SinglePassRing): 16-bit types in training, packed copies (no
// DataCopyPad); without mul_add (the vector unit the bound) it still keeps that unit from waiting for the next
// sub-group's rows, where the spare slot fits (one channel per sub-group: ScalarOneChannel's smaller plan).
inline bool RingSoc(const TilingInput &in)
{
    return DtypeBytes(in.dtype) == 2 && in.training && !in.hasDataCopyPad;
}

// The UB a one-core single-pass launch of `channels` holds beside its sub-groups: the widest channel
// vectors (*vecAll elements) and, without DataCopyPad, the software SyncAll's UB for every core. The
// row and accumulator choices below are made against it, so they depend on the shape and the SoC alone.
inline uint64_t OneCoreFixedUb(const TilingInput &in, uint64_t channels, uint32_t *vecAll)
{
    *vecAll = uint32_t(AlignUp(std::max<uint64_t>(channels, 2 * NoPadGroupWidth(in)), VEC_ALIGN));
    return MakeUbPlan(SP_ROWS_PLAN, VEC_ALIGN, *vecAll, LAYOUT_CHANNEL_FIRST, in.dtype,
                      OutBuffers(in.dtype, in.hasDataCopyPad))
               .Total() +
           (in.hasDataCopyPad ? 0 : SyncWorkBytes(MAX_CORES));
}

// Single pass: a tensor of many sub-groups that one buffer holds one at a time (16-bit types: a 28x28
// channel, a run of 14x14 ones) is double-buffered with half the rows per vector instruction (smaller
// slabs) where two buffers of as many channels fit so, so a sub-group's loads overlap the previous one's
// apply and stores instead of following them. Decided from the shape and the SoC alone, with the channel
// vectors of a one-core launch (the widest) and the software SyncAll's UB for every core, so the rows per
// instruction, and with them the order of the sums, do not depend on the cores. Only where the SoC fuses
// the multiply-adds (mul_add): without, the vector unit is the bound and the shorter instructions' issue
// cost outweighs the overlap; and only with at least SP_HALF_ROWS_SUB_GROUPS sub-groups, below which the
// pipeline's fill and drain outweigh it (the model's numbers: docs/ascend_kernel.md, "Double buffering at
// half the rows"). Not where the SoC takes the ring of chunk slots (RingSoc) and one spare slot fits beside
// one buffer at the full rows (decided with the same one-core plan): the ring overlaps the loads as well
// without halving the instructions.
inline bool HalfRowsDoubleBuffered(const TilingInput &in, uint64_t outer, uint64_t channels, uint64_t q,
                                   uint64_t rowStride, uint32_t segSum, uint32_t slabRows)
{
    if (!in.hasMulAdd || slabRows < 2) {
        return false;
    }
    uint32_t vecAll = 0;
    const uint64_t fixed = OneCoreFixedUb(in, channels, &vecAll);
    const auto most = [&](uint32_t buffers, uint32_t rows) -> uint64_t {
        for (uint64_t g = std::min<uint64_t>(channels, MAX_TILE_ROWS) / q * q; g >= q; g -= q) {
            if (fixed + MakeSinglePassPlan(outer, uint32_t(g), uint32_t(rowStride), in.dtype, buffers, rows, segSum,
                                           vecAll, in.hasMulAdd ? 1 : 0, rows).Total() <= in.ubBytes) {
                return g;
            }
        }
        return 0;
    };
    const uint64_t one = most(1, slabRows), two = most(SP_MAX_BUFFERS, slabRows / 2);
    if (one > 0 && RingSoc(in) &&
        RingChunkRows(in, fixed, outer, one, rowStride, slabRows, segSum, vecAll, slabRows, 1) > 0) {
        return false;  // the ring of chunk slots at the full rows instead (SinglePassRing)
    }
    return one > 0 && CeilDiv(channels, one) >= SP_HALF_ROWS_SUB_GROUPS && two >= one &&
           two * (slabRows / 2) * rowStride >= SP_MIN_INSTR_ELEMS;
}

// Single pass, 16-bit types in training with grad_input, packed runs (no DataCopyPad), no mul_add and no float
// ReduceRepeat (ascend910's 14x14 and 7x7 slices): grad_input is (k * (x - mean) + b) + a * dy from the reduce's
// x - mean, b without the mean folded in (single_pass XcOrder), with SP_SLAB_ROWS accumulator rows (WideAccRows
// not taken). From the shape and the SoC alone. Where one run's float copy of x - mean over all rows fits beside
// this launch's buffers (no product's slab: the product goes over dy's float copy), it is kept from the reduce to
// the apply (tiling spWhole SP_WHOLE_X): x is not cast again, and k and b are the scalar operands of masked
// repeats per channel over all rows, not slabs broadcast in the combine; else the apply recomputes x - mean from
// slabs in the same order, so the bits depend on neither that choice nor the cores.
inline bool SinglePassXcOrder(const TilingInput &in, uint64_t q)
{
    return DtypeBytes(in.dtype) == 2 && !in.hasMulAdd && !in.hasReduceRepeat && in.training &&
           (in.outputMask >> GRAD_INPUT & 1) && q > 1;
}

// Single pass, 16-bit types without mul_add (ascend910: the vector unit is the bound, 13 instructions per
// element, each paying its issue cycles): the sums take SP_WIDE_SLAB_ROWS accumulator rows, so that the
// instructions may cover as many rows (Single pass, the rows per instruction), where one run of q channels
// fits so beside the fixed buffers of a one-core launch (the widest channel vectors, the software SyncAll's
// UB for every core) at SP_SLAB_ROWS rows per instruction: decided from the shape and the SoC alone, so the
// sums' order does not depend on the cores (the rows per instruction may: they do not change it). Not the
// lane sums (7x7: LaneRunRegular), whose short groups gained nothing, nor SinglePassXcOrder's packed runs (the
// float copy of x - mean over all rows takes that UB).
inline bool WideAccRows(const TilingInput &in, uint64_t outer, uint64_t inner, uint64_t channels, uint64_t q,
                        uint64_t rowStride, uint32_t segSum)
{
    if (in.hasMulAdd || in.dtype == ELEM_FLOAT32 || outer < SP_WIDE_SLAB_ROWS || (q > 1 && LaneRunRegular(inner)) ||
        SinglePassXcOrder(in, q)) {
        return false;
    }
    uint32_t vecAll = 0;
    const uint64_t fixed = OneCoreFixedUb(in, channels, &vecAll);
    return fixed + MakeSinglePassPlan(outer, uint32_t(q), uint32_t(rowStride), in.dtype, 1, SP_SLAB_ROWS, segSum, vecAll,
                                      0, SP_WIDE_SLAB_ROWS)
                       .Total() <=
           in.ubBytes;
}

// Single pass, 16-bit types (tiling spWhole): sub-groups of one channel whose float copies of x - mean and dy
// stay in UB from the reduce to the apply, where one buffer of them fits beside the fixed buffers of a
// one-core launch (so the choice, and with it the order of the sums, does not depend on the cores) and a
// channel is at least SP_WHOLE_MIN_ELEMS elements (its two ReduceSums and scalar hand-over are per channel).
// Per element a cast of x and of dy and a cast back, not two of each: 8 vector instructions, not 10, each
// over a chunk of the channel's rows (SP_WHOLE_CHUNKS), every per-channel value a scalar operand (no
// slabs of mean, a, k and b to fill, no broadcasts in the combine). Where the SoC fuses the multiply-adds
// (the sums' MulAddDst) and not packed (DataCopyPad; a slice starts on a block); not with the segmented sums
// (7x7: many channels per instruction).
inline bool SinglePassWhole(const TilingInput &in, uint64_t outer, uint64_t channels, uint64_t q, uint64_t rowStride,
                            uint32_t segSum)
{
    if (DtypeBytes(in.dtype) != 2 || q != 1 || segSum || !in.hasMulAdd || !in.hasDataCopyPad ||
        outer * rowStride < SP_WHOLE_MIN_ELEMS) {
        return false;
    }
    const uint32_t vecAll = uint32_t(AlignUp(std::max<uint64_t>(channels, 2 * NoPadGroupWidth(in)), VEC_ALIGN));
    const uint64_t fixed =
        MakeUbPlan(SP_ROWS_PLAN, VEC_ALIGN, vecAll, LAYOUT_CHANNEL_FIRST, in.dtype, OutBuffers(in.dtype, in.hasDataCopyPad))
            .Total();
    const uint32_t rows = uint32_t(std::min<uint64_t>(SP_WHOLE_SLAB_ROWS, outer));
    return fixed + MakeSinglePassPlan(outer, 1, uint32_t(rowStride), in.dtype, 1, rows, segSum, vecAll, 1, rows,
                                      SP_WHOLE_ALL)
                           .Total() <=
           in.ubBytes;
}

// Single pass, one resident buffer of 16-bit types, packed (no DataCopyPad; RingSoc) (tiling spSpare): the
// buffer becomes a ring of chunk slots with up to SP_RING_SPARE spare ones, so the next sub-group's first
// chunks load while this one finishes its reduce (the last loads' latency), its combine and its first apply,
// where MTE2 otherwise waits for the apply to release a chunk. The chunks are then larger (their slots are
// event ids: chunks + spare within SP_MAX_CHUNKS and the SoC's, RingChunkRows), which changes when rows are
// loaded, never which rows an instruction sums (the accumulator rows do not depend on the chunks), so the
// bits do not change. Where the spare slots fit beside the rest (the fixed buffers of this launch); the most
// spare slots that fit.
inline void SinglePassRing(const TilingInput &in, BatchNormBackwardTilingData &t, uint64_t fixed)
{
    if (t.spBuffers != 1 || t.spWhole || !RingSoc(in)) {
        return;
    }
    for (uint32_t spare = SP_RING_SPARE; spare >= 1; --spare) {
        const uint64_t rows = RingChunkRows(in, fixed, uint64_t(t.outer), t.spChannels, t.spRowStride, t.spSlabRows,
                                            t.spSegSum, t.vecElems, t.spAccRows, spare);
        if (rows > 0) {
            t.spChunkRows = uint32_t(rows);
            t.spSpare = spare;
            return;
        }
    }
}

// The single pass's sets of fixed event ids, one id a chunk each (batch_norm_kernel_single_pass.h, LoadId /
// ReleaseId): MTE2_V one where the loads are reduced (all waited for before the next sub-group's loads),
// else one a buffer (waited for after them); V_MTE2 / MTE3_MTE2 (a chunk released) one with up to two
// buffers (waited for by the next loads into the buffer, before the next apply), else two, alternating.
inline uint32_t SpEventSets(uint32_t buffers, bool reduces)
{
    return std::max<uint32_t>(reduces ? 1 : buffers, buffers > SP_MAX_BUFFERS ? 2 : 1);
}

// The single pass's tiling fields: groups, `resident` channels per sub-group in `buffers` buffers, `slabRows`
// rows per vector instruction, the rows in up to `chunks` chunks (each starting on a multiple of slabRows:
// the accumulator rows do not depend on the chunks).
inline void SinglePassFields(BatchNormBackwardTilingData &t, uint64_t groups, uint64_t maxCount, uint32_t vecElems,
                             uint64_t resident, uint64_t rowStride, uint32_t buffers, uint64_t q, uint32_t segSum,
                             uint32_t slabRows, uint32_t chunks, bool soft)
{
    const uint64_t outer = uint64_t(t.outer);
    t.strategy = STRATEGY_SINGLE_PASS;
    t.balanced = 1;
    t.groups = int64_t(groups);
    t.groupWidth = uint32_t(maxCount);
    t.vecElems = vecElems;
    t.tileRows = SP_ROWS_PLAN;
    t.tileCols = VEC_ALIGN;
    t.rowStride = VEC_ALIGN;
    t.rowBlocks = 0;
    t.colBlocks = 0;
    t.units = 0;
    t.shiftLast = 0;
    t.crossCore = 0;
    t.spChannels = uint32_t(resident);
    t.spRowStride = uint32_t(rowStride);
    t.spBuffers = buffers;
    t.spQuantum = q > 1 ? uint32_t(q) : 0;
    t.spSegSum = segSum;
    t.spSlabRows = slabRows;
    t.spAccRows = slabRows;
    t.softSync = soft ? 1 : 0;
    t.spChunkRows = uint32_t(AlignUp(CeilDiv(outer, std::min<uint64_t>(chunks, outer)), slabRows));
    t.usedCores = uint32_t(groups);
}

// Single pass (tiling spLastRows), float32 in regular lane runs without mul_add, in training with grad_input,
// two buffers, no ring (ascend910's 7x7 slices): the core's last sub-group is applied from slabs a store per
// instruction's rows (the kernel's SlabsLast), so after its last loads land nothing but that chunk's reduce,
// the sums' hand-over, the apply and the stores is left; its last chunk is then one vector instruction's
// rows, the others as even as whole instructions allow before it, the same count of chunks (so of event
// ids), and a's slab its own where UB has room (filled before the loads land). Elsewhere the first chunks'
// longer loads cost more than that saves. Chunks start on whole
// instructions and the accumulator rows are the rows', so the sums, and the bits, do not change.
inline void SinglePassLastRows(const TilingInput &in, BatchNormBackwardTilingData &t, uint32_t chunks, uint64_t fixed)
{
    const uint64_t outer = uint64_t(t.outer), slab = t.spSlabRows;
    const bool tail = in.dtype == ELEM_FLOAT32 && !in.hasMulAdd && in.training && (in.outputMask >> GRAD_INPUT & 1) &&
                      t.spLaneSums == SP_LANES_SCALAR && t.spBuffers > 1 && t.spSpare == 0 && !t.spWhole;
    if (!tail || chunks < 2 || outer <= slab * chunks ||
        fixed + MakeSinglePassPlan(outer, t.spChannels, t.spRowStride, in.dtype, t.spBuffers, t.spSlabRows, t.spSegSum,
                                   t.vecElems, 0, t.spAccRows, t.spWhole, 1).Total() > in.ubBytes) {
        return;  // (a's own slab: Runner::AheadA)
    }
    const uint64_t last = outer % slab == 0 ? slab : outer % slab;  // the rows of the last instruction
    t.spLastRows = uint32_t(last);
    t.spChunkRows = uint32_t(AlignUp(CeilDiv(outer - last, uint64_t(chunks - 1)), slab));
}

// Single pass, where even sub-groups (EvenBursts) do not help: the sub-group size (channels) near
// `resident`, in runs of q, whose every sub-group moves at least SP_MIN_BURST_BYTES a row copy (a row of a
// sub-group is its channels' slices, adjacent in GM), where the full ones already do: a group of n channels
// is whole sub-groups and one shorter, and that short one could be a channel or two of a 7x7 slice, a copy
// of a few hundred bytes. Of the sizes from the smallest whose full sub-groups still reach the burst up to
// `most` (what fits), the one closest to `resident` (the smaller on a tie) whose remainders, on both group
// sizes of the balanced split (`count`, `count` - q), are zero or reach it. Which sub-group sums a channel
// changes nothing in its sums, so the bits do not change.
inline uint64_t BurstResident(uint64_t resident, uint64_t most, uint64_t count, bool unequal, uint64_t q,
                              uint64_t channelBytes)
{
    const auto ok = [&](uint64_t r) {
        const auto rest = [&](uint64_t n) { return n % r == 0 || (n % r) * channelBytes >= SP_MIN_BURST_BYTES; };
        return rest(count) && (!unequal || count <= q || rest(count - q));
    };
    if (resident == 0 || resident * channelBytes < SP_MIN_BURST_BYTES || ok(resident)) {
        return resident;
    }
    const uint64_t lo = AlignUp(CeilDiv(SP_MIN_BURST_BYTES, channelBytes), q);
    for (uint64_t d = q; d <= std::max(resident, most); d += q) {
        if (resident >= lo + d && ok(resident - d)) {
            return resident - d;
        }
        if (resident + d <= std::min(most, count) && ok(resident + d)) {
            return resident + d;
        }
    }
    return resident;
}

// Single pass (tiling spEven): where the short sub-group of `resident`-channel ones would copy less than
// SP_MIN_BURST_BYTES a row but sub-groups of even sizes (the same count, differing by a run at most, Make)
// do not; else BurstResident looks for another size.
inline bool EvenBursts(uint64_t resident, uint64_t count, bool unequal, uint64_t q, uint64_t channelBytes)
{
    if (resident == 0 || resident * channelBytes < SP_MIN_BURST_BYTES) {
        return false;
    }
    const auto shortOk = [&](uint64_t n) {
        return n % resident == 0 || (n % resident) * channelBytes >= SP_MIN_BURST_BYTES;
    };
    const auto evenOk = [&](uint64_t n) {
        const uint64_t runs = n / q, subs = CeilDiv(runs, resident / q);
        return subs == 0 || runs / subs * q * channelBytes >= SP_MIN_BURST_BYTES;
    };
    const bool shortFine = shortOk(count) && (!unequal || count <= q || shortOk(count - q));
    return !shortFine && evenOk(count) && (!unequal || count <= q || evenOk(count - q));
}

// Single pass (STRATEGY_SINGLE_PASS), channel-first: when the whole N x inner
// slices of at least one channel fit in UB beside the small fixed buffers,
// every core takes whole channel groups (balanced: C * g / groups, in runs
// of spQuantum when packed), keeps
// `spChannels` adjacent channels resident at a time, and reads x and dy once.
// Returns false (t unchanged) when it does not apply.
inline bool TrySinglePass(const TilingInput &in, BatchNormBackwardTilingData &t)
{
    const uint32_t eb = DtypeBytes(in.dtype);
    const uint64_t inner = uint64_t(t.inner), outer = uint64_t(t.outer), channels = uint64_t(t.channels);
    if (!in.allowSinglePass || t.layout != LAYOUT_CHANNEL_FIRST || t.flat || outer == 0 || channels == 0 || inner == 0) {
        return false;
    }
    // Without DataCopyPad a row of a sub-group moves with whole-block copies:
    // slices that are not whole blocks lie packed in UB (spRowStride = inner)
    // and go in runs of q adjacent channels, the fewest whose slices together
    // are whole blocks (2 at 14x14 float32, 8 at 7x7); C must be runs of q.
    const uint64_t q = !in.hasDataCopyPad && inner * eb % BLOCK_BYTES != 0
                           ? BLOCK_BYTES / std::gcd<uint64_t>(inner * eb, BLOCK_BYTES)
                           : 1;
    if (channels % q != 0) {
        return false;
    }
    const uint64_t rowStride = q > 1 ? inner : AlignUp(inner, BLOCK_BYTES / eb);
    // The per-channel sums of a sub-group in one segmented reduction per sum (a repeat per channel) and the
    // per-channel values broadcast per block: where a slice is at most one float repeat, not packed, and the
    // SoC has ReduceRepeat on float, Brcb and the masked Copy. The choice depends on the shape and the SoC
    // only, so every sub-group of a launch sums the same way.
    // In training on SoCs with mul_add, where a slice is nearly a float repeat (SP_SEG_COMPACT_MIN_STRIDE), the
    // slabs of mean, a, k and b hold a block per slice (SP_SEG_COMPACT), read with block stride 0 by the
    // repeat forms of the fused steps: no masked Copy over each slice and no row fills, the same arithmetic.
    const bool segOk = in.hasReduceRepeat && in.hasBlockCopy && q == 1 && inner <= SP_SEG_MAX_INNER;
    const uint32_t segSum = !segOk ? 0
                            : in.training && in.hasMulAdd && rowStride >= SP_SEG_COMPACT_MIN_STRIDE ? SP_SEG_COMPACT
                                                                                                    : 1;
    if (2 * outer * rowStride * eb * q >= in.ubBytes) {
        return false;  // not even one run of channels
    }
    // Groups: one per core, runs of q channels each; without DataCopyPad each
    // at least a block of the narrowest per-channel vector (NoPadGroupWidth),
    // unless that leaves cores idle and the software SyncAll exists (Atlas
    // training / inference): then a run per group at least, each group's
    // totals go to its own slot of the workspace, and after one SyncAll every
    // core writes grad_weight / grad_bias of its whole blocks of channels
    // (softSync; the channel vectors at least two such blocks wide).
    // The SyncAll costs GM traffic where the single pass moves only its 3 accesses (SoftSyncBytes): it is
    // taken where that stays within 1 / SP_SOFT_SYNC_SHARE of the activations' bytes.
    const uint64_t width = in.hasDataCopyPad ? 1 : std::min<uint64_t>(channels, NoPadGroupWidth(in));
    const uint64_t runs = channels / q, cores = std::min<uint64_t>(in.coreNum, MAX_CORES);
    const uint64_t softCores = std::min<uint64_t>(cores, runs);
    const bool soft = !in.hasDataCopyPad && !in.hasSyncAll && in.hasSoftSyncAll && runs >= 2 &&
                      channels >= NoPadGroupWidth(in) && runs / CeilDiv(width, q) < softCores &&
                      SoftSyncBytes(uint32_t(softCores)) * SP_SOFT_SYNC_SHARE <= 3 * outer * inner * channels * eb;
    const uint64_t minWidth = soft ? q : width;
    const uint64_t groups = std::max<uint64_t>(1, std::min<uint64_t>(runs / CeilDiv(minWidth, q), cores));
    const uint64_t maxCount = CeilDiv(runs, groups) * q;
    const uint32_t vecElems =
        uint32_t(AlignUp(soft ? std::max<uint64_t>(maxCount, 2 * NoPadGroupWidth(in)) : maxCount, VEC_ALIGN));
    const uint64_t fixed =
        MakeUbPlan(SP_ROWS_PLAN, VEC_ALIGN, vecElems, LAYOUT_CHANNEL_FIRST, in.dtype, t.outBuffers).Total() +
        (soft ? SyncWorkBytes(uint32_t(groups)) : 0);
    // WideAccRows: the accumulator rows of the sums, whatever the rows per instruction (0: as many as those)
    const uint32_t accWide = WideAccRows(in, outer, inner, channels, q, rowStride, segSum) ? SP_WIDE_SLAB_ROWS : 0;
    // SinglePassXcOrder: x - mean's float copy over all rows where one run fits so (tiling spWhole SP_WHOLE_X)
    uint32_t keepX = 0;
    const auto fits = [&](uint64_t g, uint32_t buffers, uint32_t slabRows, uint32_t accRows = 0) {
        return fixed + MakeSinglePassPlan(outer, uint32_t(g), uint32_t(rowStride), in.dtype, buffers, slabRows,
                                          segSum, vecElems, in.hasMulAdd ? 1 : 0,
                                          accRows ? accRows : std::max(slabRows, accWide), keepX)
                               .Total() <= in.ubBytes;
    };
    // Chunks of rows per buffer: the kernel's fixed event ids are sets of one id a chunk (SpEventSets), which
    // must stay below the SoC's ids per HardEvent (QUE_MAX_EVENT: SetFlag / WaitFlag assert it), so chunks
    // x sets is at most in.eventIds. Where the chunks start changes when copies overlap, not what is
    // computed (each starts on a multiple of the rows per instruction, the accumulator rows are the rows'),
    // so the results keep their bits.
    const bool reduces = (in.outputMask >> GRAD_WEIGHT & 1) || (in.outputMask >> GRAD_BIAS & 1) ||
                         (in.training && (in.outputMask >> GRAD_INPUT & 1));
    const auto chunksOf = [&](uint32_t buffers, uint32_t most) {
        return std::max<uint32_t>(1, std::min(most, in.eventIds / SpEventSets(buffers, reduces)));
    };
    if (SinglePassWhole(in, outer, channels, q, rowStride, segSum)) {
        // as many buffers as fit beside this launch's channel vectors (one at least: SinglePassWhole); they
        // change when loads and stores overlap, not what is computed
        const uint32_t rows = uint32_t(std::min<uint64_t>(SP_WHOLE_SLAB_ROWS, outer));
        uint32_t buffers = SP_WHOLE_BUFFERS;
        while (buffers > 1 && (SpEventSets(buffers, reduces) > in.eventIds ||
                               fixed + MakeSinglePassPlan(outer, 1, uint32_t(rowStride), in.dtype, buffers, rows,
                                                          segSum, vecElems, 1, rows, SP_WHOLE_ALL).Total() > in.ubBytes)) {
            --buffers;
        }
        SinglePassFields(t, groups, maxCount, vecElems, 1, rowStride, buffers, q, segSum, rows,
                         chunksOf(buffers, SP_WHOLE_CHUNKS), soft);
        t.spWhole = SP_WHOLE_ALL;
        return true;
    }
    // Rows per vector instruction: SP_SLAB_ROWS (at most N), fewer only where one channel would not fit.
    // (accWide: SP_WIDE_SLAB_ROWS where those fit, else SP_SLAB_ROWS, which divides it and fits: WideAccRows.)
    uint32_t slabRows = uint32_t(std::min<uint64_t>(
        accWide > 0 && fits(q, 1, SP_WIDE_SLAB_ROWS) ? SP_WIDE_SLAB_ROWS : SP_SLAB_ROWS, outer));
    while (slabRows > 1 && !fits(q, 1, slabRows)) {
        --slabRows;
    }
    if (SinglePassXcOrder(in, q)) {
        keepX = SP_WHOLE_X;  // the plan `fits` takes
        if (!fits(q, 1, slabRows)) {
            keepX = 0;
        }
    }
    // The most channels (runs of q) `buffers` resident sub-groups of that many fit beside the fixed buffers
    // (0: none).
    const auto fitting = [&](uint32_t buffers) -> uint64_t {
        for (uint64_t g = std::min<uint64_t>(maxCount, MAX_TILE_ROWS) / q * q; g >= q; g -= q) {
            if (fits(g, buffers, slabRows)) {
                return g;
            }
        }
        return 0;
    };
    uint64_t resident = fitting(1);
    if (resident == 0) {
        return false;
    }
    // Double buffering (float32; 16-bit types only where one buffer cannot
    // hold the whole group: a group that fits one sub-group has nothing to
    // overlap across sub-groups): two sub-groups whose vector instructions still span at
    // least SP_MIN_INSTR_ELEMS elements; the group cut into up to
    // SP_MIN_SUB_GROUPS of them, so the loads of one overlap the compute and
    // stores of another.
    uint32_t buffers = 1;
    if (HalfRowsDoubleBuffered(in, outer, channels, q, rowStride, segSum, slabRows)) {
        slabRows /= 2;
        buffers = SP_MAX_BUFFERS;
        resident = std::min<uint64_t>(
            fitting(SP_MAX_BUFFERS), std::max<uint64_t>(resident, AlignUp(CeilDiv(maxCount, SP_MIN_SUB_GROUPS), q)));
    }
    const uint64_t minChannels = AlignUp(CeilDiv(SP_MIN_INSTR_ELEMS, uint64_t(slabRows) * rowStride), q);
    const uint64_t resident2 = buffers == 1 && (in.dtype == ELEM_FLOAT32 || resident < maxCount) && maxCount > minChannels
                                   ? fitting(SP_MAX_BUFFERS)
                                   : 0;
    // Accumulator rows of the sums: the rows per instruction, but below (where only the instructions are
    // cut, so the sums keep their order).
    const uint32_t accRows = std::max(slabRows, accWide);
    if (resident2 >= minChannels && resident2 > 0) {
        buffers = SP_MAX_BUFFERS;
        resident = std::min<uint64_t>(
            resident2, std::max<uint64_t>(minChannels, AlignUp(CeilDiv(maxCount, SP_MIN_SUB_GROUPS), q)));
        // float32 segmented sums (7x7): MTE2 is the bound and the vector unit has room, while each
        // sub-group pays a combine (its sums and coefficients, the k and b rows filled once per doubling of
        // the rows per instruction). A group of at least SP_SEG_FEW_SUB_GROUPS x SP_SEG_FEW_MIN_CHANNELS
        // channels is cut into SP_SEG_FEW_SUB_GROUPS sub-groups at half the rows per instruction, where
        // two buffers of them fit: fewer combines, each with a row fill fewer. The sums keep spAccRows
        // accumulator rows, so their order, and the bits, do not change (the choice depends on the cores).
        // Smaller groups keep their sub-groups (fewer channels at half the rows: too short instructions).
        const uint64_t few = AlignUp(CeilDiv(maxCount, SP_SEG_FEW_SUB_GROUPS), q);
        if (segSum && in.dtype == ELEM_FLOAT32 && slabRows % 2 == 0 && few >= SP_SEG_FEW_MIN_CHANNELS &&
            fits(few, SP_MAX_BUFFERS, slabRows / 2, accRows)) {
            slabRows /= 2;
            resident = few;
        }
    }
    // Bursts: no short sub-group of a channel or two where the full ones reach SP_MIN_BURST_BYTES.
    uint64_t most = resident;
    while (most + q <= std::min<uint64_t>(maxCount, MAX_TILE_ROWS) &&
           fits(most + q, buffers, slabRows, std::max(accRows, slabRows))) {
        most += q;
    }
    const bool unequal = groups * maxCount != channels;
    const bool even = EvenBursts(resident, maxCount, unequal, q, inner * eb);
    if (!even) {
        resident = BurstResident(resident, most, maxCount, unequal, q, inner * eb);
    }
    SinglePassFields(t, groups, maxCount, vecElems, resident, rowStride, buffers, q, segSum, slabRows,
                     chunksOf(buffers, SP_MAX_CHUNKS / buffers), soft);
    t.spEven = even ? 1 : 0;
    t.spAccRows = std::max(accRows, slabRows);
    t.spWhole = keepX;
    // Packed runs of a regular layout: lane partials by block-strided masked Adds, summed by ReduceRepeat where
    // the SoC has it on float, else by the scalar unit; the per-channel values by a masked Duplicate each.
    // From the shape and the SoC only (never the resident channels), so the sums' order does not depend on
    // the cores.
    t.spLaneSums = q > 1 && LaneRunRegular(inner) ? (in.hasReduceRepeat ? SP_LANES_REDUCE : SP_LANES_SCALAR)
                                                  : SP_LANES_NONE;
    SinglePassRing(in, t, fixed);
    SinglePassLastRows(in, t, chunksOf(buffers, SP_MAX_CHUNKS / buffers), fixed);
    return true;
}

// Fills `t`; returns "" or the reason the shape cannot run.
inline std::string ComputeTiling(const TilingInput &in, BatchNormBackwardTilingData &t)
{
    t = BatchNormBackwardTilingData{};
    const auto &s = in.shape;
    if (s.size() < MIN_RANK || s.size() > MAX_RANK) {
        return "rank must be " + std::to_string(MIN_RANK) + ".." + std::to_string(MAX_RANK);
    }
    if (in.dtype > ELEM_BFLOAT16 || (in.dtype == ELEM_BFLOAT16 && !in.hasBf16)) {
        return "element type " + std::to_string(in.dtype) + " has no kernel on this SoC";
    }
    int64_t outer = 1, inner = 1, channels;
    if (in.channelLast) {
        channels = s.back();
        for (size_t i = 0; i + 1 < s.size(); ++i) outer *= s[i];
    } else {
        channels = s[1];
        outer = s[0];
        for (size_t i = 2; i < s.size(); ++i) inner *= s[i];
    }
    // inner == 1 is channel-last [outer, C] in memory.
    t.layout = (in.channelLast || inner == 1) ? LAYOUT_CHANNEL_LAST : LAYOUT_CHANNEL_FIRST;
    t.outer = outer;
    t.channels = channels;
    t.inner = t.layout == LAYOUT_CHANNEL_LAST ? 1 : inner;
    t.dtype = in.dtype;
    t.training = in.training;
    t.outputMask = in.outputMask;
    t.present = in.present;
    t.paramFloat32 = in.paramFloat32;
    t.gradParamFloat32 = in.gradParamFloat32;
    t.eps = in.eps;
    t.reduceSum = in.hasReduceRepeat ? 1 : 0;  // float ReduceSum: the same lines as float ReduceRepeat
    const uint64_t count = uint64_t(outer) * uint64_t(t.inner);
    t.invCount = count ? 1.0f / float(count) : 0.0f;

    const bool first = t.layout == LAYOUT_CHANNEL_FIRST;
    const uint32_t eb = DtypeBytes(in.dtype);
    const uint64_t perBlock = BLOCK_BYTES / eb;
    const uint64_t span = first ? uint64_t(t.inner) : uint64_t(channels);  // elements along a tile row
    const uint64_t total = uint64_t(outer) * uint64_t(channels) * uint64_t(t.inner);
    // Channel-first parameter groups: PARAM_CHUNK channels each (without
    // DataCopyPad NoPadGroupWidth, so more cores get groups of their own),
    // the remainder merged into the last group, so no group is shorter than
    // min(C, width) (whole-block writes of grad_weight / grad_bias without DataCopyPad).
    const uint64_t c1 = uint64_t(std::max<int64_t>(channels, 1));
    const uint64_t firstWidth = std::min<uint64_t>(c1, in.hasDataCopyPad ? PARAM_CHUNK : NoPadGroupWidth(in));
    const uint64_t firstGroups = std::max<uint64_t>(1, c1 / firstWidth);
    const uint64_t vecFirst = AlignUp(c1 - (firstGroups - 1) * firstWidth, VEC_ALIGN);

    // Whole-block copies only when every row, stride and channel slice is whole blocks.
    const bool spanAligned = span * eb % BLOCK_BYTES == 0 && uint64_t(channels) * eb % BLOCK_BYTES == 0;
    const bool unaligned = !(spanAligned && channels % VEC_ALIGN == 0);
    t.usePad = (unaligned && in.hasDataCopyPad) ? 1 : 0;
    // Rows shorter than one block cannot be written row by row with whole
    // blocks: grad_input is then written as contiguous multi-row regions.
    t.flat = (!t.usePad && unaligned && span < perBlock) ? 1 : 0;
    t.hasDcci = in.hasDcci ? 1 : 0;
    t.vecPad = in.hasDataCopyPad ? 1 : 0;
    t.mulAdd = in.hasMulAdd ? 1 : 0;
    t.outBuffers = OutBuffers(in.dtype, in.hasDataCopyPad);

    // Tiles: the span cut into balanced column chunks (whole vector blocks),
    // as many rows as fit beside them; of the chunk counts whose plan fits UB
    // the one with the largest tile (the fewest chunks on a tie), preferring
    // chunks of at least MIN_TILE_COLS columns (each tile row costs vector
    // instructions of its own: the row sums) and, with whole-block copies,
    // chunks that divide the span (a ragged last chunk is shifted back and
    // moves the overlap twice). More chunks than the first whose rows reach
    // every row only shrink the tile.
    const uint64_t span1 = std::max<uint64_t>(span, 1);
    const uint64_t minCols = std::min<uint64_t>(span1, MIN_TILE_COLS);
    const uint64_t wantRows = uint64_t(std::max<int64_t>(outer, 1));
    uint64_t bestElems = 0, lastCols = 0;
    uint32_t bestRank = 0;  // 1 + wide (2) + even (1)
    // Without DataCopyPad and the hardware SyncAll (the software SyncAll's lines), float32 channel-first tiles
    // take a row count that divides N where one at least half as large fits, so every unit of a channel is
    // the same size and an even split of a round's units over the cores is an even split of its elements
    // (a short last row block left the cores that drew it idle at every SyncAll). 16-bit types only where
    // the SoC fuses the multiply-adds (ascend310p, whose GM is the bound): without them (ascend910) the
    // vector unit is the bound and the smaller tiles cost it more than the balance gave back.
    const bool evenRows = first && !t.flat && !in.hasDataCopyPad && !in.hasSyncAll &&
                          (in.dtype == ELEM_FLOAT32 || in.hasMulAdd);
    // There, on SoCs without mul_add (ascend910: its fp32 56x56 / 112x112 layers take the software SyncAll's
    // L2 rounds, TryL2Rounds, of a few channels each, where every round ends on a SyncAll that waits for the
    // core with the most units of the round), a tile of the chosen rank whose units per channel hold a
    // higher power of two (up to ROUND_UNIT_SPLIT) replaces it where at least half as large (the most such,
    // then more rows, then the larger), so a round's units split evenly over a power-of-two core count (the
    // smaller tile's cost stays below the balance's gain, as evenRows). From the shape and the SoC only,
    // neither the cores nor L2: the tile, and so the order of the sums, never depends on them.
    const bool roundBalance = evenRows && in.hasSoftSyncAll && !in.hasMulAdd;
    // The power of two (at most ROUND_UNIT_SPLIT) that divides the units per channel of `rows` x `cols` tiles.
    auto splitOf = [&](uint64_t rows, uint64_t cols) {
        const uint64_t units = CeilDiv(wantRows, std::max<uint64_t>(rows, 1)) * CeilDiv(span1, cols);
        uint64_t p = 1;
        while (p < ROUND_UNIT_SPLIT && units % (2 * p) == 0) {
            p *= 2;
        }
        return p;
    };
    struct Balanced {
        uint64_t split = 0, rows = 0, cols = 0;
        uint32_t stride = 0, vec = 0;
    };
    Balanced balanced[5];  // per rank: the tile with the most split, then the most rows, then the most elements
    for (uint64_t chunks = 1;; ++chunks) {
        const uint64_t cols = chunks == 1 ? span1 : AlignUp(CeilDiv(span1, chunks), VEC_ALIGN);
        if (chunks > 1 && (cols >= lastCols || cols >= span1)) {
            if (lastCols <= VEC_ALIGN) {
                break;  // rounded up to whole vector blocks: no narrower chunk left
            }
            continue;
        }
        lastCols = cols;
        const uint32_t stride = uint32_t(AlignUp(cols, VEC_ALIGN));
        const uint32_t vec = first ? uint32_t(vecFirst) : stride;
        const uint64_t fixed = MakeUbPlan(0, stride, vec, t.layout, in.dtype, t.outBuffers).Total();
        const uint64_t perRow = MakeUbPlan(1, stride, vec, t.layout, in.dtype, t.outBuffers).Total() - fixed;
        const uint64_t rows = in.ubBytes > fixed ? (in.ubBytes - fixed) / perRow : 0;
        // The flat path wants room for a whole parameter group's region of one row.
        const uint64_t flatNeed = t.flat ? CeilDiv(AlignUp(uint64_t(vec) * t.inner, VEC_ALIGN), stride) : 1;
        const uint64_t want = std::max<uint64_t>(wantRows, flatNeed);
        uint64_t tileRows = std::min<uint64_t>({rows, MAX_TILE_ROWS, want});
        if (evenRows && tileRows > 1 && tileRows < wantRows) {
            uint64_t d = tileRows;
            while (wantRows % d != 0) {
                --d;
            }
            tileRows = 2 * d >= tileRows ? d : tileRows;
        }
        const uint32_t rank = 1 + (cols >= minCols ? 2 : 0) + (t.usePad || span1 % cols == 0 ? 1 : 0);
        if (roundBalance && rows >= 1 && tileRows >= flatNeed) {
            Balanced &b = balanced[rank];
            const uint64_t split = splitOf(tileRows, cols);
            if (split > b.split || (split == b.split && (tileRows > b.rows ||
                                                         (tileRows == b.rows && tileRows * cols > b.rows * b.cols)))) {
                b = Balanced{split, tileRows, cols, stride, vec};
            }
        }
        if (rows >= 1 && tileRows >= flatNeed && (rank > bestRank || (rank == bestRank && tileRows * cols > bestElems))) {
            bestRank = rank;
            bestElems = tileRows * cols;
            t.tileCols = uint32_t(cols);
            t.rowStride = stride;
            t.vecElems = vec;
            t.tileRows = uint32_t(tileRows);
        }
        const bool allRows = tileRows >= std::min<uint64_t>(want, MAX_TILE_ROWS);
        if ((bestRank == 4 && allRows) || (bestRank >= 3 && cols < minCols) || cols <= VEC_ALIGN) {
            break;
        }
    }
    if (bestElems == 0) {
        return "UB of " + std::to_string(in.ubBytes) + " bytes is too small for one " + (t.flat ? "region" : "tile");
    }
    if (roundBalance && balanced[bestRank].split > splitOf(t.tileRows, t.tileCols) &&
        2 * balanced[bestRank].rows * balanced[bestRank].cols >= bestElems) {
        const Balanced &b = balanced[bestRank];
        t.tileCols = uint32_t(b.cols);
        t.rowStride = b.stride;
        t.vecElems = b.vec;
        t.tileRows = uint32_t(b.rows);
    }
    t.rowBlocks = CeilDiv(uint64_t(outer), t.tileRows);
    t.colBlocks = CeilDiv(span, t.tileCols);
    // Without DataCopyPad a ragged last column chunk is moved back so it ends at
    // the row end: every chunk is whole blocks; channel-last groups then overlap
    // and compute the overlapped channels identically.
    t.shiftLast = (!t.usePad && t.colBlocks > 1 && span % t.tileCols != 0) ? 1 : 0;
    if (first) {
        t.units = channels * t.rowBlocks * t.colBlocks;
        t.groupWidth = uint32_t(firstWidth);
        t.groups = channels > 0 ? int64_t(firstGroups) : 0;
        t.partFloats = UNIT_SLOT_FLOATS;
    } else {
        t.units = t.rowBlocks * t.colBlocks;
        t.groupWidth = t.tileCols;
        t.groups = t.colBlocks;
        t.partFloats = 2 * t.rowStride;
    }
    if (t.flat) {
        // One region per (group, row) when groups > 1 (each >= PARAM_CHUNK * inner
        // elements); otherwise the whole tensor is one contiguous run cut in tiles.
        t.flatCap = uint32_t(uint64_t(t.tileRows) * t.rowStride);
        t.flatUnits = uint32_t(t.groups > 1 ? uint64_t(t.groups) * uint64_t(outer) : CeilDiv(total, t.flatCap));
    }
    // Cross-core combine needs SyncAll (Atlas A2 / A3 / 350; elsewhere the
    // software one, TrySoftSync). Otherwise each group's units run on one
    // core, so no core reads another core's partials.
    t.crossCore = in.hasSyncAll ? 1 : 0;
    const uint64_t work = t.crossCore ? std::max<uint64_t>(uint64_t(t.units), uint64_t(t.groups)) : uint64_t(t.groups);
    t.usedCores = uint32_t(std::max<uint64_t>(1, std::min<uint64_t>({work, in.coreNum, MAX_CORES})));
    if (t.flat && total < perBlock) {
        t.usedCores = 1;  // a tensor smaller than one block is written with scalar stores by one core
    }
    if (!TrySinglePass(in, t) && !(in.allowSinglePass && in.training && TryWholeChannels(in, t, true))) {
        TryThirdOutBuffer(in, t);
        TryL2Rounds(in, t);
        TryL2Channels(in, t);
        if (!TrySoftWholeChannels(in, t)) {
            TrySoftSync(in, t);
        }
        TryLoadsTwoAhead(in, t);
    }
    return "";
}

// Schedule mode of the launch (TilingContext::SetScheduleMode): 1, batch mode
// (every core of the launch starts together), whenever the kernel
// synchronises its cores with SyncAll -- the hardware SyncAll waits for all
// cores and deadlocks when some are not scheduled (SyncAll.md, 约束说明: "建议开启
// batchmode模式"); CANN's own batch_norm_grad_v3 tiling sets it the same way.
// 0 when nothing crosses cores (the single pass never syncs: crossCore 0).
inline uint32_t ScheduleMode(const BatchNormBackwardTilingData &t) { return UsesSyncAll(t) ? 1 : 0; }

}  // namespace bnb
#endif
