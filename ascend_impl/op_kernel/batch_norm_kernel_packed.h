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

// Scalar: head elements, the body's ReduceSum in `slot` (`lanes`: BlockTreeSum's lane partials, LaneSum),
// tail elements, in that order.
__aicore__ inline float PackedSum(const LocalTensor<float> &row, const LocalTensor<float> &slot, const PackedSpan &p,
                                  bool lanes)
{
    float sum = 0.0f;
    for (uint32_t e = p.lo; e < p.bodyLo; ++e) {
        sum += row.GetValue(e);
    }
    if (p.bodyHi > p.bodyLo) {
        sum += LaneSum(slot, 0, lanes);
    }
    for (uint32_t e = p.bodyHi; e < p.hi; ++e) {
        sum += row.GetValue(e);
    }
    return sum;
}

// PackedSum with the body's lane partials read where BlockTreeLevels left them (TreeLaneSum: `n` lanes from
// `tree`, as if added onto a zeroed slot), so no slot is zeroed or added onto; the same bits.
__aicore__ inline float PackedTreeSum(const LocalTensor<float> &row, const LocalTensor<float> &tree, uint32_t n,
                                      const PackedSpan &p)
{
    float sum = 0.0f;
    for (uint32_t e = p.lo; e < p.bodyLo; ++e) {
        sum += row.GetValue(e);
    }
    if (p.bodyHi > p.bodyLo) {
        sum += TreeLaneSum(tree, 0, n);
    }
    for (uint32_t e = p.bodyHi; e < p.hi; ++e) {
        sum += row.GetValue(e);
    }
    return sum;
}

// Tiling spLaneSums (LaneRunRegular): the float slabs of a sub-group are runs of qf channels, runBlocks
// blocks each (qf * m + 1); channel j of a run has its head in lanes [j * r, 8) of block j * m, its body in
// blocks j * m + 1 .. j * m + m - 1 and its tail in lanes [0, (j + 1) * r) of block (j + 1) * m, so one
// instruction with block stride m reaches the same block of every channel of a run (a block per channel,
// a repeat per run).
struct LaneRun {
    uint32_t qf, m, r, runBlocks;
};

__aicore__ inline LaneRun LaneRunOf(const BatchNormBackwardTilingData &t)
{
    LaneRun u;
    u.m = uint32_t(t.inner) / SLOT_FLOATS;
    u.r = uint32_t(t.inner) % SLOT_FLOATS;
    u.qf = SLOT_FLOATS / u.r;
    u.runBlocks = u.qf * u.m + 1;
    return u;
}

// Bits [lo, hi) of a normal-mode mask word (hi <= 64).
__aicore__ inline uint64_t MaskBits(uint32_t lo, uint32_t hi)
{
    const uint64_t upTo = hi >= 64 ? ~0ull : (1ull << hi) - 1;
    return upTo & ~((1ull << lo) - 1);
}

// The lane masks of a run's channels (a block each, u.qf of them per repeat): `all` every lane of the run's
// body blocks, `head` / `tail` channel j's lanes of the block it shares with its neighbour before / after;
// and the run's strides, narrowed to a repeat's fields.
struct LaneMasks {
    uint64_t all[2] = {0, 0};
    uint64_t head[2] = {0, 0};
    uint64_t tail[2] = {0, 0};
    uint8_t m = 0, qf = 0, run = 0;
};

__aicore__ inline LaneMasks LaneMasksOf(const LaneRun &u)
{
    LaneMasks k;
    k.all[0] = MaskBits(0, u.qf * SLOT_FLOATS);
    for (uint32_t j = 0; j < u.qf; ++j) {
        k.head[0] |= MaskBits(j * SLOT_FLOATS + j * u.r, (j + 1) * SLOT_FLOATS);
        k.tail[0] |= MaskBits(j * SLOT_FLOATS, j * SLOT_FLOATS + (j + 1) * u.r);
    }
    k.m = Narrow<uint8_t>(u.m, "block stride");
    k.qf = Narrow<uint8_t>(u.qf, "repeat stride");
    k.run = Narrow<uint8_t>(u.runBlocks, "repeat stride");
    return k;
}

// Block j of `part` (a block per channel of the sub-group) = the lane-wise sum of channel j's floats in row
// `row` of a sum slab: its body blocks in order, then its head's and its tail's lanes (masked Adds, the
// other lanes of those blocks are its neighbours'). The same sums for every sub-group of the launch, so
// their order depends on the shape only. pairBlocks > 0 (a sub-group of one run): the same for the second
// sum too, its slab pairBlocks blocks after `row`, its partials partBlocks blocks after `part`, a repeat
// each.
__aicore__ inline void LanePartials(const LocalTensor<float> &part, const LocalTensor<float> &row, const LaneRun &u,
                                    uint32_t cnt, uint32_t pairBlocks = 0, uint32_t partBlocks = 0)
{
    LaneMasks k = LaneMasksOf(u);
    uint64_t *all = k.all, *head = k.head, *tail = k.tail;
    const uint8_t m = k.m, qf = k.qf, run = k.run;
    const AscendC::BinaryRepeatParams first(1, m, m, qf, run, run), acc(1, 1, m, qf, qf, run);
    const uint32_t runs = cnt / u.qf;
    if (pairBlocks > 0) {
        // one run per sum: a repeat per sum (the second sum's slab pairBlocks on, its partials partBlocks on)
        const uint8_t ps = Narrow<uint8_t>(partBlocks, "repeat stride"), ss = Narrow<uint8_t>(pairBlocks, "repeat stride");
        const AscendC::BinaryRepeatParams first2(1, m, m, ps, ss, ss), acc2(1, 1, m, ps, ps, ss);
        AscendC::Add(part, row[SLOT_FLOATS], row[2 * SLOT_FLOATS], all, uint8_t(2), first2);
        for (uint32_t b = 3; b < u.m; ++b) {
            AscendC::Add(part, part, row[b * SLOT_FLOATS], all, uint8_t(2), acc2);
        }
        AscendC::Add(part, part, row, head, uint8_t(2), acc2);
        AscendC::Add(part, part, row[u.m * SLOT_FLOATS], tail, uint8_t(2), acc2);
        return;
    }
    for (uint32_t r0 = 0; r0 < runs; r0 += SP_SEG_MAX_REPEAT) {
        const uint8_t n = uint8_t(Min(SP_SEG_MAX_REPEAT, runs - r0));
        const LocalTensor<float> p = part[r0 * u.qf * SLOT_FLOATS], s = row[r0 * u.runBlocks * SLOT_FLOATS];
        AscendC::Add(p, s[SLOT_FLOATS], s[2 * SLOT_FLOATS], all, n, first);
        for (uint32_t b = 3; b < u.m; ++b) {
            AscendC::Add(p, p, s[b * SLOT_FLOATS], all, n, acc);
        }
        AscendC::Add(p, p, s, head, n, acc);
        AscendC::Add(p, p, s[u.m * SLOT_FLOATS], tail, n, acc);
    }
}

// The levels of BlockTreeSum on `trees` runs at once (tiling reduceSum 0): run i's `count` floats at
// src[i * stride] (overwritten; stride a multiple of SLOT_FLOATS, at most MAX_REPEAT_STRIDE blocks, count <=
// stride), halved in place by the same tree of Adds, so the same bits: a level is one instruction per repeat
// of its upper part, a repeat per run, where that is fewer instructions than one per run (else BlockTreeSum's
// count form, run by run). A repeat reads and writes its own run only, so no repeat's destination is a later
// repeat's source (通用地址重叠约束). Returns the lanes left per run (<= SLOT_FLOATS), from each run's start.
__aicore__ inline uint32_t BlockTreeLevels(const LocalTensor<float> &src, uint32_t stride, uint32_t trees,
                                           uint32_t count)
{
    const uint8_t rep = Narrow<uint8_t>(stride / SLOT_FLOATS, "repeat stride");
    const AscendC::BinaryRepeatParams tree(1, 1, 1, rep, rep, rep);
    constexpr uint32_t LANES = uint32_t(AscendC::ONE_REPEAT_BYTE_SIZE) / sizeof(float);
    uint32_t n = count;
    while (n > SLOT_FLOATS) {
        const uint32_t h = uint32_t(AlignUp((n + 1) / 2, SLOT_FLOATS));
        const uint32_t chunks = uint32_t(CeilDiv(n - h, LANES));
        if (chunks < trees) {
            for (uint32_t o = 0; o < n - h; o += LANES) {
                uint64_t mask[2] = {MaskBits(0, Min(LANES, n - h - o)), 0};
                AscendC::Add(src[o], src[o], src[h + o], mask, Narrow<uint8_t>(trees, "repeat times"), tree);
            }
        } else {
            for (uint32_t i = 0; i < trees; ++i) {
                const LocalTensor<float> r = src[i * stride];
                AscendC::Add(r, r, r[h], int32_t(n - h));
            }
        }
        n = h;
    }
    return n;
}

// Tiling spLaneSums: channel j's floats = v in `rows` rows of a slab (rowBlocks blocks apart), one masked
// Duplicate over the blocks it touches (a slice and its lane offset fit one repeat, a repeat per row), so
// the blocks it shares with its neighbours need no scalar writes and the rows no copies.
__aicore__ inline void DuplicateSpan(const LocalTensor<float> &slab, float v, const PackedSpan &p, uint32_t rows,
                                     uint32_t rowBlocks)
{
    const uint32_t base = p.lo / SLOT_FLOATS * SLOT_FLOATS;
    uint64_t mask[2] = {MaskBits(p.lo - base, p.hi - base), 0};
    if (rowBlocks <= MAX_REPEAT_STRIDE) {
        AscendC::Duplicate(slab[base], v, mask, uint8_t(rows), uint16_t(1), uint8_t(rowBlocks));
        return;
    }
    for (uint32_t r = 0; r < rows; ++r) {  // rows too far apart for a repeat stride: a call per row
        AscendC::Duplicate(slab[r * rowBlocks * SLOT_FLOATS + base], v, mask, uint8_t(1), uint16_t(1), uint8_t(8));
    }
}

// Channel j's floats of `rows` rows (rowBlocks blocks apart) times (MUL) or plus v in place, a masked repeat per
// row and piece of the span (a repeat's floats from its first block; one piece where the span is within a
// repeat, as DuplicateSpan's), up to SP_SEG_MAX_REPEAT rows a call (rows too far apart for a repeat stride: a
// call per row, the same arithmetic): a per-channel value as the scalar operand, no slab of it.
constexpr uint32_t SPAN_PIECE_FLOATS = uint32_t(AscendC::ONE_REPEAT_BYTE_SIZE) / sizeof(float);
template <bool MUL>
__aicore__ inline void WithSpanValue(const LocalTensor<float> &rows0, float v, const PackedSpan &p, uint32_t rows,
                                     uint32_t rowBlocks)
{
    const bool strided = rowBlocks <= MAX_REPEAT_STRIDE;
    const uint8_t stride = strided ? uint8_t(rowBlocks) : uint8_t(SLOT_FLOATS);
    const AscendC::UnaryRepeatParams params(1, 1, stride, stride);
    const uint32_t perCall = strided ? SP_SEG_MAX_REPEAT : 1u;
    for (uint32_t base = p.lo / SLOT_FLOATS * SLOT_FLOATS; base < p.hi; base += SPAN_PIECE_FLOATS) {
        uint64_t mask[2] = {MaskBits(Max(p.lo, base) - base, Min(p.hi, base + SPAN_PIECE_FLOATS) - base), 0};
        for (uint32_t r0 = 0; r0 < rows; r0 += perCall) {
            const uint8_t n = uint8_t(Min(perCall, rows - r0));
            const LocalTensor<float> at = rows0[r0 * rowBlocks * SLOT_FLOATS + base];
            if constexpr (MUL) {
                AscendC::Muls(at, at, v, mask, n, params);
            } else {
                AscendC::Adds(at, at, v, mask, n, params);
            }
        }
    }
}

#if BNB_SOC_HAS_GATHER
// Tiling spLaneSums SP_LANES_REDUCE (LaneGather): row 0 of a slab of `cnt` channels (whole runs), channel j's
// floats = block j of `blocks` (its value in each lane), by Subs of a zero block (x - 0 is x, -0 and NaN
// included) with the lane masks of LanePartials: the tails a repeat per run (block stride m, a block per
// channel of a run); the heads with the bodies a repeat per block of a run, or the heads a repeat per run and
// the bodies a repeat per run of a body block, the fewer calls. runStride > 0: the runs that many blocks
// apart in `slab` (the rows 0 of two slabs of a run each), not back to back. scale: `zero` is a block per
// channel as `blocks` is, and the floats are their products (Muls), not the values.
__aicore__ inline void SpreadRuns(const LocalTensor<float> &slab, const LocalTensor<float> &blocks,
                                  const LocalTensor<float> &zero, const LaneRun &u, uint32_t cnt,
                                  uint32_t runStride = 0, bool scale = false)
{
    LaneMasks k = LaneMasksOf(u);
    uint64_t *all = k.all, *head = k.head, *tail = k.tail;
    const uint32_t stride = runStride > 0 ? runStride : u.runBlocks;
    const uint8_t m = k.m, qf = k.qf, run = Narrow<uint8_t>(stride, "repeat stride");
    const uint8_t zb = scale ? 1 : 0, zr = scale ? qf : 0;  // the second operand's block / repeat strides
    const AscendC::BinaryRepeatParams perRun(m, 1, zb, run, qf, zr), perBlock(m, 1, zb, 1, 0, 0);
    const auto spread = [&](const LocalTensor<float> &d, const LocalTensor<float> &v, const LocalTensor<float> &z,
                            uint64_t *mask, uint8_t n, const AscendC::BinaryRepeatParams &p) {
        if (scale) {
            AscendC::Mul(d, v, z, mask, n, p);
        } else {
            AscendC::Sub(d, v, z, mask, n, p);
        }
    };
    const uint32_t runs = cnt / u.qf;
    for (uint32_t r0 = 0; r0 < runs; r0 += SP_SEG_MAX_REPEAT) {
        const uint8_t n = uint8_t(Min(SP_SEG_MAX_REPEAT, runs - r0));
        const LocalTensor<float> d = slab[r0 * stride * SLOT_FLOATS], v = blocks[r0 * u.qf * SLOT_FLOATS];
        const LocalTensor<float> z = scale ? zero[r0 * u.qf * SLOT_FLOATS] : zero;
        if (uint32_t(n) + 1 < u.m) {
            // a call per run, a repeat per block from the head's: every lane of the head block too, its lanes
            // before the head (the channel before's) then rewritten by the tails' call, after (V in order)
            for (uint32_t i = 0; i < n; ++i) {
                const uint32_t at = i * u.qf * SLOT_FLOATS;
                spread(d[i * stride * SLOT_FLOATS], v[at], scale ? z[at] : z, all, uint8_t(u.m), perBlock);
            }
            spread(d[u.m * SLOT_FLOATS], v, z, tail, n, perRun);
            continue;
        }
        spread(d, v, z, head, n, perRun);
        spread(d[u.m * SLOT_FLOATS], v, z, tail, n, perRun);
        for (uint32_t b = 1; b < u.m; ++b) {  // a call per body block, a repeat per run
            spread(d[b * SLOT_FLOATS], v, z, all, n, perRun);
        }
    }
}
#endif

}  // namespace single_pass
}  // namespace bnb
#endif  // BATCH_NORM_KERNEL_PACKED_H
