// Channel-last strategy ([outer, C], e.g. NHWC, or NCHW with H * W = 1): a
// unit is up to tileRows rows (along everything but C) by one column chunk of
// channels (one channel group), so its statistics and coefficients are
// vectors applied row by row, and its partial sums are two rows of rowStride
// floats (sum_dy and sum_dy_xhat per channel), partFloats per unit.
//
// In one launch (flow: batch_norm_backward_kernel.h) the phases
// (batch_norm_kernel_phases.h) call Unit, then Xhat / StorePartials in phase 1,
// CombinePartials when a group is finalised, and Xhat / ApplyCoefs in phase 2;
// the channel-first twins are in batch_norm_kernel_channel_first.h.
#ifndef BATCH_NORM_KERNEL_CHANNEL_LAST_H
#define BATCH_NORM_KERNEL_CHANNEL_LAST_H
#include "batch_norm_kernel_state.h"

namespace bnb {
namespace channel_last {

// Unit u = (column chunk = group, row block).
__aicore__ inline TileRows Unit(const BatchNormBackwardTilingData &t, uint64_t u)
{
    TileRows r;
    const uint64_t cb = u / t.rowBlocks;
    const uint64_t rb = u % t.rowBlocks;
    r.channel = -1;
    r.gmStride = t.channels;
    r.gmOffset = rb * t.tileRows * r.gmStride + uint64_t(GroupStart(t, cb));
    r.cols = GroupCount(t, cb);
    r.group = cb;
    r.groupLane = 0;
    r.rows = uint32_t(Min(uint64_t(t.tileRows), uint64_t(t.outer) - rb * t.tileRows));
    r.overlapsPrev = !t.balanced && t.shiftLast && cb > 0 && cb + 1 == uint64_t(t.groups);  // shifted (GroupStart)
    return r;
}

// Each row of xF = (x - mean) (* invstd when `scale`), channel by channel.
__aicore__ inline void Xhat(KernelUb &ub, const TileRows &r, uint32_t rowStride, bool scale)
{
    for (uint32_t row = 0; row < r.rows; ++row) {
        const LocalTensor<float> xr = ub.xF[row * rowStride];
        AscendC::Sub(xr, xr, ub.v.mean, r.cols);
        if (scale) {
            AscendC::Mul(xr, xr, ub.v.invstd, r.cols);
        }
    }
}

// Each row of dyF = a * dy (+ k * xhat + b in training), channel by channel.
__aicore__ inline void ApplyCoefs(KernelUb &ub, const TileRows &r, uint32_t rowStride, bool training)
{
    for (uint32_t row = 0; row < r.rows; ++row) {
        const LocalTensor<float> dr = ub.dyF[row * rowStride];
        AscendC::Mul(dr, dr, ub.v.coefA, r.cols);
        if (training) {
            const LocalTensor<float> xr = ub.xF[row * rowStride];
            AscendC::Mul(xr, xr, ub.v.coefK, r.cols);
            AscendC::Add(dr, dr, xr, r.cols);
            AscendC::Add(dr, dr, ub.v.coefB, r.cols);
        }
    }
}

// The unit's two partial rows in the workspace: the row accumulators as they are.
__aicore__ inline void StorePartials(KernelUb &ub, const GlobalTensor<float> &part,
                                     const BatchNormBackwardTilingData &t, uint64_t u)
{
    SetWaitFlag<AscendC::HardEvent::V_MTE3>();
    AscendC::DataCopy(part[u * t.partFloats], ub.accDy, t.rowStride);
    AscendC::DataCopy(part[u * t.partFloats + t.rowStride], ub.accDyx, t.rowStride);
}

// totDy / totDyx += the partial rows of group g's units, in unit order.
__aicore__ inline void CombinePartials(KernelUb &ub, const GlobalTensor<float> &part,
                                       const BatchNormBackwardTilingData &t, int64_t g)
{
    const uint32_t n = GroupCount(t, g);
    for (int64_t rb = 0; rb < t.rowBlocks; ++rb) {
        AscendC::DataCopy(ub.partUb, part[uint64_t(g * t.rowBlocks + rb) * t.partFloats], t.partFloats);
        AscendC::PipeBarrier<PIPE_ALL>();
        AscendC::Add(ub.v.totDy, ub.v.totDy, ub.partUb, n);
        AscendC::Add(ub.v.totDyx, ub.v.totDyx, ub.partUb[t.rowStride], n);
        AscendC::PipeBarrier<PIPE_ALL>();
    }
}

}  // namespace channel_last
}  // namespace bnb
#endif  // BATCH_NORM_KERNEL_CHANNEL_LAST_H
