// Packed slices of the single pass (tiling spQuantum, SoCs without
// DataCopyPad, batch_norm_kernel_single_pass.h): a sub-group's (row, channel)
// slices lie back to back in UB (spRowStride = inner), so a channel's floats
// in a slab row start and end inside 32-byte blocks. Where a channel splits
// into the blocks it shares with its neighbours (reached by the scalar unit)
// and the blocks wholly its own (vector instructions), and its sum from the
// two.
#ifndef BATCH_NORM_KERNEL_PACKED_H
#define BATCH_NORM_KERNEL_PACKED_H
#include "batch_norm_kernel_state.h"

namespace bnb {
namespace single_pass {

// Channel j of a sub-group is floats [lo, hi) = [j * inner, (j + 1) * inner)
// of a slab row. The blocks it shares with a neighbour (head [lo, bodyLo),
// tail [bodyHi, hi)) are reached by the scalar unit, those wholly its own
// (the body) by vector instructions, whose UB operands start on a block.
// Channel c's split depends on c mod spQuantum only (sub-groups start on a
// run), never on the cores.
struct PackedSpan {
    uint32_t lo, bodyLo, bodyHi, hi;
};

__aicore__ inline PackedSpan SpanOf(const BatchNormBackwardTilingData &t, uint32_t j)
{
    PackedSpan p;
    p.lo = j * uint32_t(t.inner);
    p.hi = p.lo + uint32_t(t.inner);
    p.bodyLo = uint32_t(Min(AlignUp(p.lo, SLOT_FLOATS), p.hi));
    const uint32_t down = p.hi / SLOT_FLOATS * SLOT_FLOATS;
    p.bodyHi = down > p.bodyLo ? down : p.bodyLo;
    return p;
}

// Scalar: head elements, the body's ReduceSum in `slot`, tail elements, in that order.
__aicore__ inline float PackedSum(const LocalTensor<float> &row, const LocalTensor<float> &slot, const PackedSpan &p)
{
    float sum = 0.0f;
    for (uint32_t e = p.lo; e < p.bodyLo; ++e) {
        sum += row.GetValue(e);
    }
    if (p.bodyHi > p.bodyLo) {
        sum += slot.GetValue(0);
    }
    for (uint32_t e = p.bodyHi; e < p.hi; ++e) {
        sum += row.GetValue(e);
    }
    return sum;
}

}  // namespace single_pass
}  // namespace bnb
#endif  // BATCH_NORM_KERNEL_PACKED_H
