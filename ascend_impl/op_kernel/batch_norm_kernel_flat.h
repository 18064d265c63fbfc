// Flat strategy for phase 2 (tiling `flat`): rows shorter than one 32-byte
// block on a SoC without DataCopyPad cannot be written row by row with whole
// blocks, so grad_input is written as contiguous multi-row regions instead,
// element by element with scalar coefficients (phase 1 still goes through the
// channel-first / channel-last units).
//
// In one launch (flow: batch_norm_backward_kernel.h) phase 2
// (batch_norm_kernel_phases.h, FlatRegionGradInput) takes Region f of its
// share, loads it, loads the coefficients of its group and calls Apply.
#ifndef BATCH_NORM_KERNEL_FLAT_H
#define BATCH_NORM_KERNEL_FLAT_H
#include "batch_norm_kernel_state.h"

namespace bnb {
namespace flat {

// `len` elements from GM element `start`, all in channel group `group`.
struct Region {
    int64_t group;
    uint64_t start;
    uint64_t len;
};

// Region f: one row's channels of one group when there are several groups
// (>= groupWidth * inner elements); otherwise the whole tensor cut in tiles
// of flatCap elements, a short last one moved back to end at the tensor end.
__aicore__ inline Region RegionOf(const BatchNormBackwardTilingData &t, uint64_t f, uint64_t total,
                                  uint32_t perBlock)
{
    Region r;
    r.group = 0;
    if (t.groups > 1) {
        r.group = int64_t(f / uint64_t(t.outer));
        const uint64_t n = f % uint64_t(t.outer);
        r.start = n * uint64_t(t.channels) * t.inner + uint64_t(GroupStart(t, r.group)) * t.inner;
        r.len = uint64_t(GroupCount(t, r.group)) * t.inner;
    } else {
        r.start = f * t.flatCap;
        r.len = Min(t.flatCap, total - r.start);
        if (r.len < perBlock && total >= perBlock) {
            r.start = total - perBlock;
            r.len = perBlock;
        }
    }
    return r;
}

// dyF[j] = a * dy (+ k * xhat + b in training) for every element of the
// region, with the scalars of its channel: per element, in the same operation
// order as channel_first::ApplyCoefs (k * invstd against x - mean; with
// `foldMean`, 16-bit types, (k * invstd) * x + (b - k * invstd * mean)).
__aicore__ inline void Apply(KernelUb &ub, const BatchNormBackwardTilingData &t, const Region &r, bool foldMean)
{
    const int64_t c0 = GroupStart(t, r.group);
    int64_t lane = -1;
    float a = 0.0f, k = 0.0f, b = 0.0f, mean = 0.0f;
    for (uint32_t j = 0; j < uint32_t(r.len); ++j) {
        const int64_t l = int64_t(((r.start + j) / uint64_t(t.inner)) % uint64_t(t.channels)) - c0;
        if (l != lane) {
            lane = l;
            a = ub.v.coefA.GetValue(uint32_t(l));
            if (t.training) {
                k = ub.v.coefK.GetValue(uint32_t(l)) * ub.v.invstd.GetValue(uint32_t(l));
                b = ub.v.coefB.GetValue(uint32_t(l));
                mean = foldMean ? 0.0f : ub.v.mean.GetValue(uint32_t(l));
                if (foldMean) {
                    b -= k * ub.v.mean.GetValue(uint32_t(l));
                }
            }
        }
        float v = ub.dyF.GetValue(j) * a;
        if (t.training) {
            const float xc = foldMean ? ub.xF.GetValue(j) : ub.xF.GetValue(j) + (-mean);
            v = v + xc * k;
            v = v + b;
        }
        ub.dyF.SetValue(j, v);
    }
}

}  // namespace flat
}  // namespace bnb
#endif  // BATCH_NORM_KERNEL_FLAT_H
