// How one launch's work is cut and shared among cores: the units, the channel
// groups and each core's share. Pure functions of the tiling
// (batch_norm_backward_tiling.h; the host chose every number there).
//
// - A unit is one tile: rows of one channel (channel-first,
//   batch_norm_kernel_channel_first.h) or rows of one chunk of channels
//   (channel-last, batch_norm_kernel_channel_last.h). Phase 1 writes one
//   partial sum per unit; phase 2 writes grad_input per unit. When rows are
//   shorter than one block and there is no DataCopyPad, phase 2 walks
//   contiguous regions instead (batch_norm_kernel_flat.h).
// - A channel group is the set of channels whose parameters and
//   grad_weight / grad_bias are loaded and written together: PARAM_CHUNK
//   channels (channel-first; the last group also takes the remainder; single
//   pass and the whole-channel reduce step: `balanced`, C / groups channels
//   each, in runs of spQuantum with the packed single pass) or one
//   column chunk (channel-last; with shiftLast the last one ends at C and
//   overlaps its neighbour). A group's units are contiguous.
// - Cores, two strategies (tiling `crossCore`):
//   cross-core (Atlas A2 / A3 / 350): every core takes a contiguous run of
//   units, so one channel's partials may come from several cores; the
//   hardware SyncAll() separates phase 1 from the combine, and core i then
//   finalises groups i, i + cores, ...
//   ascend910 / ascend310p with the software SyncAll (tiling softSync) take
//   the cross-core split too.
//   whole groups (ascend910 / ascend310p otherwise): every core takes a
//   contiguous run of groups and all their units, so it only ever combines
//   partial sums it wrote itself.
// Partials are always combined in unit order, so the result does not depend
// on the number of cores.
#ifndef BATCH_NORM_KERNEL_WORK_SPLIT_H
#define BATCH_NORM_KERNEL_WORK_SPLIT_H
#include "kernel_operator.h"
#include "batch_norm_backward_tiling.h"

namespace bnb {

__aicore__ inline uint64_t Min(uint64_t a, uint64_t b) { return a < b ? a : b; }
__aicore__ inline uint64_t Max(uint64_t a, uint64_t b) { return a > b ? a : b; }

__aicore__ inline bool ChannelFirst(const BatchNormBackwardTilingData &t) { return t.layout == LAYOUT_CHANNEL_FIRST; }

// Rows of a tile in GM and UB.
struct TileRows {
    uint64_t gmOffset;   // first element in GM
    uint64_t gmStride;   // elements between rows in GM
    uint32_t rows;
    uint32_t cols;
    int64_t channel;     // channel-first: the unit's channel
    int64_t group;
    uint32_t groupLane;  // channel-first: channel index inside its group
    bool overlapsPrev = false;  // shiftLast: its GM window overlaps an earlier unit's on this core
};

// ---- channel groups ----
// Balanced groups are cut in runs of this many channels (the packed single
// pass: channels % spQuantum == 0, tiling), so every group starts on one.
__aicore__ inline uint64_t BalancedQuantum(const BatchNormBackwardTilingData &t)
{
    return t.spQuantum > 1 ? t.spQuantum : 1;
}

__aicore__ inline int64_t GroupStart(const BatchNormBackwardTilingData &t, int64_t g)
{
    if (t.balanced) {
        const uint64_t q = BalancedQuantum(t);
        return int64_t(q * (uint64_t(t.channels) / q * uint64_t(g) / uint64_t(t.groups)));
    }
    if (!ChannelFirst(t) && t.shiftLast && g + 1 == t.groups) {
        return t.channels - t.groupWidth;
    }
    return g * t.groupWidth;
}

__aicore__ inline uint32_t GroupCount(const BatchNormBackwardTilingData &t, int64_t g)
{
    if (t.balanced) {
        return uint32_t(GroupStart(t, g + 1) - GroupStart(t, g));
    }
    if (ChannelFirst(t)) {
        return uint32_t(g + 1 == t.groups ? t.channels - GroupStart(t, g) : t.groupWidth);
    }
    return uint32_t(Min(uint64_t(t.groupWidth), uint64_t(t.channels - GroupStart(t, g))));
}

// Channel-first: the group of a channel (balanced: the last g whose GroupStart <= channel).
__aicore__ inline int64_t GroupOf(const BatchNormBackwardTilingData &t, int64_t channel)
{
    if (t.balanced) {
        const uint64_t q = BalancedQuantum(t);
        return int64_t(((uint64_t(channel) / q + 1) * uint64_t(t.groups) - 1) / (uint64_t(t.channels) / q));
    }
    const int64_t g = channel / t.groupWidth;
    return g < t.groups ? g : t.groups - 1;
}

// First unit of group g (units of one group are contiguous in both layouts).
__aicore__ inline uint64_t GroupUnitBegin(const BatchNormBackwardTilingData &t, uint64_t g)
{
    if (g >= uint64_t(t.groups)) {
        return t.units;
    }
    if (ChannelFirst(t)) {
        return uint64_t(GroupStart(t, g)) * t.rowBlocks * t.colBlocks;
    }
    return g * t.rowBlocks;
}

// ---- one core's share ----
struct CoreShare {
    uint64_t unitBegin = 0, unitEnd = 0;    // phase 1 and phase 2 units
    uint64_t groupBegin = 0, groupEnd = 0;  // whole groups: the groups it finalises
    uint64_t flatBegin = 0, flatEnd = 0;    // flat phase 2 regions
};

__aicore__ inline CoreShare ShareOfCore(const BatchNormBackwardTilingData &t, uint64_t core)
{
    const uint64_t cores = t.usedCores;
    CoreShare s;
    if (t.crossCore) {
        s.unitBegin = uint64_t(t.units) * core / cores;
        s.unitEnd = uint64_t(t.units) * (core + 1) / cores;
        s.flatBegin = uint64_t(t.flatUnits) * core / cores;
        s.flatEnd = uint64_t(t.flatUnits) * (core + 1) / cores;
    } else {
        // Whole groups per core: its units (and flat regions) are those of its groups.
        s.groupBegin = uint64_t(t.groups) * core / cores;
        s.groupEnd = uint64_t(t.groups) * (core + 1) / cores;
        s.unitBegin = GroupUnitBegin(t, s.groupBegin);
        s.unitEnd = GroupUnitBegin(t, s.groupEnd);
        const uint64_t perGroup = t.groups > 1 ? uint64_t(t.outer) : uint64_t(t.flatUnits);
        s.flatBegin = s.groupBegin * perGroup;
        s.flatEnd = s.groupEnd * perGroup;
    }
    return s;
}

// Core `core`'s share of channels [cb, ce) among `cores`, in whole runs of q channels so no two
// cores write one block of a per-channel output (the last core takes the remainder; with fewer
// than q channels in all, the last core takes them all). Sets [*b, *e).
__aicore__ inline void ChannelShareOfCore(uint64_t cb, uint64_t ce, uint64_t q, uint64_t core, uint64_t cores,
                                          uint64_t *b, uint64_t *e)
{
    const uint64_t runs = (ce - cb) / q > 0 ? (ce - cb) / q : 1;
    *b = Min(ce, cb + q * (runs * core / cores));
    *e = core + 1 == cores ? ce : Min(ce, cb + q * (runs * (core + 1) / cores));
}

// The groups whose grad_weight / grad_bias (or sums) this core writes:
// g = first, first + step, ... < end.
struct GroupWalk {
    uint64_t first, step, end;
};

__aicore__ inline GroupWalk ParamGroupsOfCore(const BatchNormBackwardTilingData &t, const CoreShare &s,
                                              uint64_t core)
{
    if (t.crossCore) {
        return {core, t.usedCores, uint64_t(t.groups)};
    }
    return {s.groupBegin, 1, s.groupEnd};
}

}  // namespace bnb
#endif  // BATCH_NORM_KERNEL_WORK_SPLIT_H
