// Single-pass strategy (tiling STRATEGY_SINGLE_PASS, channel-first only):
// a core owns whole channel groups (`balanced`: C * g / groups), and keeps
// `spChannels` adjacent channels' complete N x inner slices of grad_out and
// input in UB at once (a sub-group). Each element of x and dy is read from GM
// once and grad_input written once: 3 GM accesses per element, no workspace,
// no SyncAll (nothing crosses cores; but softSync, below).
//
// One sub-group (channels cs .. cs + cnt of group g, lanes s0 .. of the
// group's channel vectors), UB layout [row][channel][spRowStride] so that one
// row of the sub-group is one contiguous burst in GM (cnt * inner elements;
// packed slices, spQuantum: spRowStride = inner, see PackedSpan):
//   load     MTE2, row by row, in up to SP_MAX_CHUNKS chunks of rows, each
//            chunk signalled to V with its own MTE2_V event (buffers x chunks
//            ids, within the SoC's event ids: the tiling);
//   reduce   V, chunk by chunk as it lands: xc = x - mean (float32: in
//            place over x), sum dy and dy * xc over the rows into two float
//            slabs, then one ReduceSum per channel (invstd is applied per
//            channel: grad_weight = invstd * sum(dy * xc), k * invstd);
//   finalise S after V_S: the sums into the group's totDy / totDyx lanes; V
//            after S_V: the coefficients a, k, b (as the two-pass LoadCoefs;
//            slices not packed: k and b by S with the sums, ScalarCoefs);
//            tiling spSegSum (a slice of at most one float repeat): V alone,
//            one ReduceRepeat per sum straight into the lanes, the values
//            broadcast per block (Brcb, masked Copy), no scalar hand-over;
//   apply    V, chunk by chunk: dx = a * dy + (k * invstd) * xc + b over
//            whole rows with per-element slabs of a, k * invstd, b (16-bit
//            types: b - k * invstd * mean against x, so xc is not
//            recomputed); where the SoC has MulAddDst / FusedMulAdd (tiling
//            mulAdd) the sums of dy * xc take one MulAddDst and dx is
//            FusedMulAdd(dy, a, b) then MulAddDst(k, x), over slabs even for
//            one channel (the same instructions whatever the sub-group);
//            each chunk handed to MTE3 with
//            its own V_MTE3 event, so stores overlap the next chunk's compute;
//   release  V_MTE2 and MTE3_MTE2 before the next sub-group's loads reuse UB.
// With two resident buffers (tiling spBuffers 2: a group of several channels
// whose two sub-groups fit) the sub-groups alternate between them and the
// loads of sub-group i + 1 are issued right after the reduce of sub-group i,
// so MTE2 streams while V and MTE3 finish sub-group i.
// Tiling spWhole (16-bit types): sub-groups of one channel in up to
// SP_WHOLE_BUFFERS buffers, the float copies of its x - mean and dy kept for
// all rows from the reduce to the apply (ReduceWholeRows, ApplyWholeRows):
// per element one cast of each and one back, every per-channel value a scalar
// operand, dy * a over all rows while the scalar unit takes the sums.
// grad_weight / grad_bias of the group are written once after its last
// sub-group (WriteParamGrads); with softSync (Atlas training / inference,
// groups narrower than a block of the per-channel vectors) the group's totals
// go to its workspace slot instead (Stash), and after the software SyncAll
// each core writes its whole blocks of channels (WriteShare). The sums are
// over whole channels in a fixed order, so the result does not depend on the
// number of cores.
#ifndef BATCH_NORM_KERNEL_SINGLE_PASS_H
#define BATCH_NORM_KERNEL_SINGLE_PASS_H
#include "batch_norm_kernel_phases.h"
#include "batch_norm_kernel_packed.h"

namespace bnb {
namespace single_pass {

using AscendC::HardEvent;

// Float slabs, in SinglePassPlan order (SP_SLABS, then SP_CAST_SLABS). The
// slabs of k and b are those of the two sums: they are broadcast after the
// sums are taken (Totals) and read before the next sub-group's sums begin (the
// vector unit runs in order). The slab of a may be that of the mean, and the
// product has none where nothing uses it (SinglePassPlan::aSlab, prodSlab).
// spWhole: no slabs of mean and a, and the float copies (SP_CAST_SLABS) hold
// all outer rows.
enum Slab : uint32_t {
    SLAB_MEAN, SLAB_A, SLAB_SUM_DY, SLAB_SUM_DYX, SLAB_PROD, SLAB_DY_F, SLAB_X_F, SLAB_COUNT
};
constexpr uint32_t SLAB_K = SLAB_SUM_DY, SLAB_B = SLAB_SUM_DYX;

// LaneGather's sets of slots' floats (spChannels blocks) in the product's slab: the broadcasts' offsets
// (three: one vector's lanes; then the pair [coefB | coefK]'s second half and first half, so k and b are one
// Gather, k's blocks first), then a block of zeros, then ScaledSpread's or BlockCoefs' weight blocks (two sets:
// [scaleK | -a / n], resp. [-a / n | scaleK]), then BlockCoefs' sums' blocks (two sets) and its row of -mean.
constexpr uint32_t LANE_GATHER_SETS = 3;
constexpr uint32_t LANE_WEIGHT_SETS = 2;
constexpr uint32_t BLOCK_SUM_SETS = 2;

// Tiling spLaneSums SP_LANES_REDUCE where the SoC has Gather and ReduceDataBlock on float (ascend310p), mulAdd
// (so the product's slab is free: MakeSinglePassPlan keeps it) and its room: the per-channel values reach
// their slabs by a Gather of blocks and SpreadRuns, and the lane partials are summed by ReduceDataBlock
// (LaneSums), not ReduceRepeat: no scalar read of a value, no instruction per channel. From the tiling alone.
__aicore__ inline bool LaneGather(const BatchNormBackwardTilingData &t, const SinglePassPlan &p, uint32_t slabElems)
{
#if BNB_SOC_HAS_GATHER && BNB_SOC_HAS_BLOCK_REDUCE_SUM
    return t.spLaneSums == SP_LANES_REDUCE && t.mulAdd && p.prodSlab && t.spQuantum % SLOT_FLOATS == 0 &&
           t.spChannels % SLOT_FLOATS == 0 &&
           (LANE_GATHER_SETS + LANE_WEIGHT_SETS) * t.spChannels * SLOT_FLOATS + SLOT_FLOATS <= slabElems;
#else
    (void)t;
    (void)p;
    (void)slabElems;
    return false;
#endif
}

// 16-bit types in training where the SoC fuses the multiply-adds (tiling mulAdd), in packed slices (no
// DataCopyPad: several short channels a sub-group, so several per-channel values a slab row, each filled on its
// own; a sub-group of one unpacked channel fills its slabs by one Duplicate, and its stores would trail the apply
// in longer steps), slabs of a slab's rows (not spWhole, not compact) and spSlabRows half a repeat's blocks: the
// apply takes twice spSlabRows rows an instruction, a repeat per block column (block p of every row, row blocks
// apart) with a, k and b read from rows 0 of their slabs (block stride 0), so those slabs need no row fills; the
// float copies of dy and x of those rows lie in two slabs' UB each ([SLAB_DY_F | SLAB_X_F], [SLAB_MEAN | its
// neighbour]), and a's row 0 in the dy * xhat sums' second row, free past the fold. The same operations on the
// same values per element, so the same bits. From the tiling.
template <typename T>
__aicore__ inline bool ColumnApply(const BatchNormBackwardTilingData &t)
{
#if BNB_SOC_HAS_MUL_ADD
    const uint32_t rowFloats = t.spChannels * t.spRowStride;
    return !IsSame<T, float>::value && t.mulAdd && t.training && t.spQuantum > 0 && !t.spWhole && t.spSegSum == 0 &&
           t.spAccRows > 1 &&
           2 * t.spSlabRows == SLOT_FLOATS && rowFloats % SLOT_FLOATS == 0 &&
           rowFloats / SLOT_FLOATS <= MAX_REPEAT_STRIDE;
#else
    (void)t;
    return false;
#endif
}

template <typename T>
struct Buffers {
    AscendC::TBuf<AscendC::TPosition::VECCALC> dyBuf, xBuf, slotBuf;
    AscendC::TBuf<AscendC::TPosition::VECCALC> slabBuf[SLAB_COUNT];
    LocalTensor<T> dyAll, xAll;      // spBuffers resident sub-groups, one after the other
    LocalTensor<T> dy, x;            // the one in use (Use): [row][channel][spRowStride]
    LocalTensor<float> slab[SLAB_COUNT];
    LocalTensor<float> sumPair;      // the slabs of the two sums (k, b), one buffer: [SLAB_SUM_DY | SLAB_SUM_DYX]
    uint32_t slabElems = 0, accElems = 0;  // a slab; a sum's slab (spAccRows rows)
    LocalTensor<float> slotDy, slotDyx;  // one 32-byte slot per channel: ReduceSum results
    LocalTensor<float> scratch;          // spSegSum: the slot buffer as BlockBroadcast's Brcb blocks
    uint32_t residentElems = 0;
    // Tiling spSpare: row n of the chunk being reduced, applied or stored is at n x len + shift of dy / x (the
    // ring's slot of the chunk less the chunk's first row); 0 without the ring.
    int64_t shift = 0;
    // A sub-group of one channel takes its per-channel values as scalar operands, not slabs (no
    // broadcasts; x - mean == x + (-mean) and the products are the same, so the results are too).
    bool scalar = false;
    float value[SLAB_PROD] = {};  // by Slab: mean, a, k, b
    // Runner::XcOrder: the reduce's product goes over dy's float copy (no product's slab); keepX (tiling spWhole
    // SP_WHOLE_X): x - mean's float copy holds all rows, row n at n x len.
    bool xcOrder = false, keepX = false;
    bool prodOverDy = false;  // the plan's ScalarOneChannel: no product's slab, the product over dy's float copy
    // WideApply: the apply's float rows of dy in the two sums' slabs (free from the hand-over of the sums to the
    // next reduce) and of x in the two cast slabs (one buffer), twice spSlabRows rows an instruction
    bool wide = false;
    // LaneGather (tiling spLaneSums SP_LANES_REDUCE with mulAdd: ascend310p), in the product's slab, which
    // nothing else uses there: Gather's offsets of the broadcasts (bcastOff: block j = channel j's lane, in
    // bytes; then blocks spChannels + j = lane vecElems + j, the pair's second half, and 2 spChannels + j =
    // lane j again), a block of zeros (SpreadRuns) and the weights' blocks (ScaledSpread).
    bool lanes = false;
    bool columns = false;  // ColumnApply (with its slabs' room)
    LocalTensor<uint32_t> bcastOff;
    LocalTensor<float> zero, weights;
    // lanes with ColumnApply and the product's slab's room, after the weights' blocks, for BLOCK_SUM_SETS sets and
    // a row of the sub-group's slices (Runner::BlockCoefs): the sums' blocks and -mean's row
    bool blockRoom = false;
    LocalTensor<float> sumBlocks, stageRow;
    // Rows 0 of k and b as ColumnApply reads them: those of their slabs, or (BlockCoefs) rows 1 and 0 of the
    // dy sums' slab (CoefRows)
    LocalTensor<float> colK, colB;

    __aicore__ inline void Init(AscendC::TPipe &pipe, const BatchNormBackwardTilingData &t)
    {
        const SinglePassPlan p =
            MakeSinglePassPlan(uint64_t(t.outer), t.spChannels, t.spRowStride, t.dtype, t.spBuffers, t.spSlabRows,
                               t.spSegSum, t.vecElems, t.mulAdd, t.spAccRows, t.spWhole, t.spLastRows > 0 ? 1 : 0);
        const uint32_t ringBytes = uint32_t(SpRingSlots(t) * SpRingSlotElems(t) * sizeof(T));
        pipe.InitBuffer(dyBuf, t.spSpare > 0 ? ringBytes : p.residentBytes * p.buffers);
        pipe.InitBuffer(xBuf, t.spSpare > 0 ? ringBytes : p.residentBytes * p.buffers);
        slabElems = p.slabBytes / uint32_t(sizeof(float));
        accElems = p.accBytes / uint32_t(sizeof(float));
        columns = ColumnApply<T>(t) && p.meanSlab && p.aSlab && p.castSlabs == 2;
        prodOverDy = !p.prodSlab && p.castSlabs > 0 && !t.mulAdd && t.spSegSum == 0;
        wide = prodOverDy && !p.meanSlab && t.training && !columns && p.accBytes == p.slabBytes &&
               p.castBytes == p.slabBytes && p.xCastBytes == p.slabBytes;
        for (uint32_t i = 0; i < SLAB_COUNT; ++i) {
            if (i == SLAB_SUM_DYX || (i == SLAB_MEAN && !p.meanSlab) || (i == SLAB_A && !p.aSlab) ||
                (i == SLAB_PROD && !p.prodSlab) || (i >= SLAB_DY_F && p.castSlabs == 0) ||
                (columns && (i == SLAB_A || i == SLAB_X_F)) || (wide && i == SLAB_X_F)) {
                continue;  // SLAB_SUM_DYX: in the buffer of SLAB_SUM_DY, right after it (FillPairRows)
            }
            const bool pair = i == SLAB_SUM_DY;
            const bool cast = i >= SLAB_DY_F;
            const bool value = i == SLAB_MEAN || i == SLAB_A;  // valueBytes: compact slabs (SP_SEG_COMPACT)
            const uint32_t castBytes = i == SLAB_X_F ? p.xCastBytes : p.castBytes;
            // ColumnApply: SLAB_MEAN's buffer holds SLAB_A's too, SLAB_DY_F's SLAB_X_F's (the apply's rows; no
            // SP_WHOLE_X there, so both copies are castBytes)
            // WideApply: SLAB_DY_F's buffer holds SLAB_X_F's too
            const uint32_t twice = (columns && (i == SLAB_MEAN || i == SLAB_DY_F)) || (wide && i == SLAB_DY_F) ? 2 : 1;
            const uint32_t bytes =
                twice * (pair ? 2 * p.accBytes : (cast ? castBytes : (value ? p.valueBytes : p.slabBytes)));
            pipe.InitBuffer(slabBuf[i], bytes);
            slab[i] = pair ? slabBuf[i].template Get<float>(accElems)
                           : (cast || value ? slabBuf[i].template Get<float>()
                                            : slabBuf[i].template Get<float>(slabElems));
            if (pair) {
                sumPair = slabBuf[i].template Get<float>(2 * accElems);
                slab[SLAB_SUM_DYX] = sumPair[accElems];
            }
        }
        if (!p.aSlab && p.meanSlab) {
            slab[SLAB_A] = slab[SLAB_MEAN];
        }
        if (columns || wide) {
            slab[SLAB_X_F] = slab[SLAB_DY_F][p.castBytes / uint32_t(sizeof(float))];
        }
        if (columns) {
            slab[SLAB_A] = slab[SLAB_SUM_DYX][accElems / t.spAccRows];  // a's row 0: the sums' row 1
        }
        pipe.InitBuffer(slotBuf, p.slotBytes);
        dyAll = dyBuf.template Get<T>();
        xAll = xBuf.template Get<T>();
        residentElems = p.residentBytes / uint32_t(sizeof(T));
        Use(0);
        slotDy = slotBuf.template Get<float>();
        scratch = slotDy;
        slotDyx = slotDy[t.spChannels * SLOT_FLOATS];
        lanes = LaneGather(t, p, slabElems);
        if (lanes) {
            const uint32_t sc = t.spChannels * SLOT_FLOATS;  // floats of one set of slots
            const LocalTensor<uint32_t> offs = slab[SLAB_PROD].template ReinterpretCast<uint32_t>();
            bcastOff = offs;
            zero = slab[SLAB_PROD][LANE_GATHER_SETS * sc];
            weights = slab[SLAB_PROD][LANE_GATHER_SETS * sc + SLOT_FLOATS];
            blockRoom = columns && 2 * t.spChannels <= SP_SEG_MAX_REPEAT &&
                        (LANE_GATHER_SETS + LANE_WEIGHT_SETS + BLOCK_SUM_SETS) * sc + SLOT_FLOATS +
                                t.spChannels * t.spRowStride <= slabElems;
            if (blockRoom) {
                sumBlocks = weights[LANE_WEIGHT_SETS * sc];
                stageRow = sumBlocks[BLOCK_SUM_SETS * sc];
            }
        }
        CoefRows(slab[SLAB_K], slab[SLAB_B]);
    }

    __aicore__ inline void CoefRows(const LocalTensor<float> &k, const LocalTensor<float> &b)
    {
        colK = k;
        colB = b;
    }

    __aicore__ inline void Use(uint32_t buf)
    {
        dy = dyAll[buf * residentElems];
        x = xAll[buf * residentElems];
    }
};

// One sub-group: `cnt` channels from GM channel `cs`, lanes from `lane0` of the group's vectors.
struct SubGroup {
    int64_t cs;
    uint32_t cnt;
    uint32_t lane0;
    uint32_t len;  // elements of one row of the sub-group in UB: cnt * spRowStride
    uint32_t buf;  // its resident buffer (Buffers::Use)
    uint32_t ring0;  // tiling spSpare: the ring's slot of its chunk 0
};

// Row n of the sub-group between GM and UB: cnt slices of `inner` elements,
// contiguous in GM from RowOffset; in UB each slice starts on a block
// (spRowStride apart).
__aicore__ inline uint64_t RowOffset(const BatchNormBackwardTilingData &t, const SubGroup &s, uint64_t n)
{
    return (n * uint64_t(t.channels) + uint64_t(s.cs)) * uint64_t(t.inner);
}

#if BNB_SOC_HAS_DATA_COPY_PAD
// DataCopyPad of one row of the sub-group: cnt slices of `inner` elements,
// contiguous in GM, each starting on a block in UB.
template <typename T>
__aicore__ inline AscendC::DataCopyExtParams RowCopyParams(const KernelState<T> &k, const SubGroup &s)
{
    return AscendC::DataCopyExtParams(Narrow<uint16_t>(s.cnt, "DataCopyPad blockCount"),
                                      Narrow<uint32_t>(k.t.inner * sizeof(T), "DataCopyPad blockLen"), 0, 0, 0);
}
#endif

template <typename T>
__aicore__ inline void LoadRow(const KernelState<T> &k, const LocalTensor<T> &dst, const GlobalTensor<T> &src,
                               const SubGroup &s, uint64_t n)
{
    const uint64_t off = RowOffset(k.t, s, n);
#if BNB_SOC_HAS_DATA_COPY_PAD
    if (k.t.usePad) {
        AscendC::DataCopyPadExtParams<T> pad(false, 0, 0, static_cast<T>(0));
        AscendC::DataCopyPad(dst, src[off], RowCopyParams(k, s), pad);
        return;
    }
#endif
    // slices are whole blocks (tiling)
    AscendC::DataCopy(dst, src[off], Narrow<uint32_t>(s.cnt * k.t.inner, "DataCopy count"));
}

template <typename T>
__aicore__ inline void StoreRow(const KernelState<T> &k, const GlobalTensor<T> &dst, const LocalTensor<T> &src,
                                const SubGroup &s, uint64_t n)
{
    const uint64_t off = RowOffset(k.t, s, n);
#if BNB_SOC_HAS_DATA_COPY_PAD
    if (k.t.usePad) {
        AscendC::DataCopyPad(dst[off], src, RowCopyParams(k, s));
        return;
    }
#endif
    AscendC::DataCopy(dst[off], src, Narrow<uint32_t>(s.cnt * k.t.inner, "DataCopy count"));
}

// A sub-group of one channel takes its per-channel values as scalar operands (no slabs) where the SoC
// lacks the fused steps (tiling mulAdd), which take slabs only.
template <typename T>
__aicore__ inline bool ScalarValues(const KernelState<T> &k, const SubGroup &s)
{
    return (s.cnt == 1 && !k.t.mulAdd) || k.t.spWhole == SP_WHOLE_ALL;
}

// Broadcast reads no value with the scalar unit (tiling spSegSum: per-block broadcasts).
template <typename T>
__aicore__ inline bool BlockBroadcasts(const KernelState<T> &k, const SubGroup &s)
{
    return k.t.spSegSum && !ScalarValues(k, s);
}

// Rows 1 .. spSlabRows - 1 of a slab copied from row 0, doubling.
template <typename T>
__aicore__ inline void FillSlabRows(const KernelState<T> &k, const LocalTensor<float> &slab, const SubGroup &s)
{
    for (uint32_t filled = 1; filled < k.t.spSlabRows;) {
        const uint32_t m = uint32_t(Min(filled, k.t.spSlabRows - filled));
        AscendC::DataCopy(slab[filled * s.len], slab, m * s.len);
        filled += m;
    }
}

// Rows 1 .. spSlabRows - 1 of the k and b slabs (one buffer, b right after k) copied from their rows 0
// together: one strided copy per doubling.
template <typename T>
__aicore__ inline void FillPairRows(const KernelState<T> &k, const Buffers<T> &b, const SubGroup &s)
{
    const uint32_t slabBlocks = b.accElems / SLOT_FLOATS;
    for (uint32_t filled = 1; filled < k.t.spSlabRows;) {
        const uint32_t m = uint32_t(Min(filled, k.t.spSlabRows - filled));
        const uint32_t blocks = m * s.len / SLOT_FLOATS, gap = slabBlocks - blocks;
        AscendC::DataCopy(b.sumPair[filled * s.len], b.sumPair,
                          AscendC::DataCopyParams(2, Narrow<uint16_t>(blocks, "DataCopy blockLen"),
                                                  Narrow<uint16_t>(gap, "DataCopy srcStride"),
                                                  Narrow<uint16_t>(gap, "DataCopy dstStride")));
        filled += m;
    }
}

// Rows past row 0 of slab `which` are read (all but ColumnApply's a, k and b, read from row 0 alone).
template <typename T>
__aicore__ inline bool NeedsRows(const Buffers<T> &b, uint32_t which)
{
    return !b.columns || which == SLAB_MEAN;
}

#if BNB_SOC_HAS_SEG_SUM
// Tiling spSegSum: row 0 of each of `count` slabs, channel j's spRowStride elements = vec[first[i] +
// lane0 + j] (a vector, or a pair of them: first 0 and vecElems), by the vector unit alone: one Brcb puts
// each lane of the block-aligned run holding those lanes into a block of the scratch (the slot buffer),
// then per slab a masked Copy repeats channel j's block over its slice (source block stride 0), a repeat
// per channel; SP_SEG_MAX_REPEAT channels a call.
template <typename T>
__aicore__ inline void BlockBroadcast(const KernelState<T> &k, const Buffers<T> &b, const SubGroup &s,
                                      uint32_t count, const LocalTensor<float> *slabs, const uint32_t *first,
                                      const LocalTensor<float> &vec)
{
    const uint32_t rs = k.t.spRowStride, blocks = rs / SLOT_FLOATS;
    for (uint32_t j = 0; j < s.cnt; j += SP_SEG_MAX_REPEAT) {
        const uint32_t n = uint32_t(Min(SP_SEG_MAX_REPEAT, s.cnt - j));
        const uint32_t lane = s.lane0 + j, a0 = lane / SLOT_FLOATS * SLOT_FLOATS, off = lane - a0;
        const uint32_t repeats = uint32_t(CeilDiv(first[count - 1] + off + n, SLOT_FLOATS));
        AscendC::Brcb(b.scratch, vec[a0], Narrow<uint8_t>(repeats, "Brcb repeatTime"),
                      AscendC::BrcbRepeatParams(1, uint16_t(SLOT_FLOATS)));
        if (k.t.spSegSum == SP_SEG_COMPACT) {
            // channel j's block into block (r * cnt + j) of the slab for each of the spSlabRows rows r (at most
            // a repeat's 8 blocks): a repeat per row, a block per channel (source repeat size 0) where the
            // channels fit a repeat and outnumber the rows, else a repeat per channel, a block per row
            // (source block stride 0); the fewer repeats
            const uint32_t rows = k.t.spSlabRows;
            const bool perRow = n <= SLOT_FLOATS && rows < n;
            for (uint32_t i = 0; i < count; ++i) {
                const LocalTensor<float> src = b.scratch[(first[i] + off) * SLOT_FLOATS];
                if (perRow) {
                    AscendC::Copy(slabs[i][j * SLOT_FLOATS], src, uint64_t(n * SLOT_FLOATS),
                                  Narrow<uint8_t>(rows, "Copy repeatTime"),
                                  AscendC::CopyRepeatParams(1, 1, Narrow<uint16_t>(s.cnt, "Copy dstRepeatSize"), 0));
                } else {
                    AscendC::Copy(slabs[i][j * SLOT_FLOATS], src, uint64_t(rows * SLOT_FLOATS),
                                  Narrow<uint8_t>(n, "Copy repeatTime"),
                                  AscendC::CopyRepeatParams(Narrow<uint16_t>(s.cnt, "Copy dstStride"), 0, 1, 1));
                }
            }
            continue;
        }
        for (uint32_t i = 0; i < count; ++i) {
            AscendC::Copy(slabs[i][j * rs], b.scratch[(first[i] + off) * SLOT_FLOATS], uint64_t(rs),
                          Narrow<uint8_t>(n, "Copy repeatTime"),
                          AscendC::CopyRepeatParams(1, 0, Narrow<uint16_t>(blocks, "Copy dstRepeatSize"), 1));
        }
    }
}

template <typename T>
__aicore__ inline void BlockBroadcast(const KernelState<T> &k, const Buffers<T> &b, const SubGroup &s,
                                      const LocalTensor<float> &slab, const LocalTensor<float> &vec)
{
    const uint32_t first = 0;
    BlockBroadcast(k, b, s, 1, &slab, &first, vec);
}

// The slabs of k and b (Coefs) from the pair [coefB | coefK] with one Brcb (SegPairBrcb), their rows
// filled together.
template <typename T>
__aicore__ inline void BroadcastCoefPair(const KernelState<T> &k, const Buffers<T> &b, const SubGroup &s)
{
    const LocalTensor<float> slabs[2] = {b.slab[SLAB_B], b.slab[SLAB_K]};
    const uint32_t first[2] = {0, k.t.vecElems};
    BlockBroadcast(k, b, s, 2, slabs, first, k.ub.v.coefPair);
    if (k.t.spSegSum != SP_SEG_COMPACT) {
        FillPairRows(k, b, s);
    }
}

// Tiling spSegSum SP_SEG_COMPACT: dst = op(src0, src1) over `repeats` slices (rows x channels of a
// sub-group, a repeat of the mask of a slice's spRowStride lanes each), in calls of at most
// SP_SEG_MAX_REPEAT; a compact source (c0 / c1) is a slab of a block per slice, read with block stride 0.
enum CompactOp : uint32_t { COMPACT_SUB, COMPACT_FUSED_MUL_ADD, COMPACT_MUL_ADD_DST };
template <typename T>
__aicore__ inline void CompactSlices(const KernelState<T> &k, CompactOp op, const LocalTensor<float> &dst,
                                     const LocalTensor<float> &src0, bool c0, const LocalTensor<float> &src1, bool c1,
                                     uint32_t repeats)
{
    const uint32_t rs = k.t.spRowStride;
    uint64_t mask[2] = {rs >= SLOT_FLOATS * SLOT_FLOATS ? ~0ull : (1ull << rs) - 1ull, 0};
    const uint8_t rep = Narrow<uint8_t>(rs / SLOT_FLOATS, "repeat stride");
    const AscendC::BinaryRepeatParams p(1, c0 ? 0 : 1, c1 ? 0 : 1, rep, c0 ? 1 : rep, c1 ? 1 : rep);
    for (uint32_t i = 0; i < repeats; i += SP_SEG_MAX_REPEAT) {
        const uint8_t n = uint8_t(Min(SP_SEG_MAX_REPEAT, repeats - i));
        const LocalTensor<float> d = dst[i * rs], s0 = src0[c0 ? i * SLOT_FLOATS : i * rs],
                                 s1 = src1[c1 ? i * SLOT_FLOATS : i * rs];
        if (op == COMPACT_SUB) {
            AscendC::Sub(d, s0, s1, mask, n, p);
        } else if (op == COMPACT_FUSED_MUL_ADD) {
            AscendC::FusedMulAdd(d, s0, s1, mask, n, p);
        } else {
            AscendC::MulAddDst(d, s0, s1, mask, n, p);
        }
    }
}
#endif

// The per-channel slabs hold a block per slice (tiling spSegSum SP_SEG_COMPACT).
template <typename T>
__aicore__ inline bool CompactSlabs(const KernelState<T> &k)
{
#if BNB_SOC_HAS_SEG_SUM
    return k.t.spSegSum == SP_SEG_COMPACT;
#else
    (void)k;
    return false;
#endif
}

// Row 0 of a slab: each channel's spRowStride elements (packed: its blocks of its own) = its value;
// false when the whole slab is filled (a sub-group of one channel, not packed: one Duplicate; spLaneSums:
// a masked Duplicate per channel over all rows).
template <typename T>
__aicore__ inline bool FillRow0(const KernelState<T> &k, const Buffers<T> &b, const SubGroup &s, uint32_t which,
                                const LocalTensor<float> &vec)
{
    const LocalTensor<float> &slab = b.slab[which];
#if BNB_SOC_HAS_SEG_SUM
    if (k.t.spSegSum) {
        BlockBroadcast(k, b, s, slab, vec);
        return k.t.spSegSum != SP_SEG_COMPACT;  // compact: every row's blocks written
    }
#endif
    if (s.cnt == 1 && k.t.spQuantum == 0) {
        const uint32_t rows = NeedsRows(b, which) ? k.t.spSlabRows : 1u;
        AscendC::Duplicate(slab, vec.GetValue(s.lane0), Narrow<int32_t>(rows * s.len, "Duplicate count"));
        return false;
    }
    const uint32_t rs = k.t.spRowStride;
    for (uint32_t i = 0; i < s.cnt; ++i) {
        // packed: the last channel first, each from the block its first float is in, so a channel's floats
        // in the block it shares with the one before are rewritten by that one (the vector unit runs in order)
        const uint32_t j = k.t.spQuantum == 0 ? i : s.cnt - 1 - i;
        const float v = vec.GetValue(s.lane0 + j);
        if (k.t.spLaneSums != SP_LANES_NONE) {
            DuplicateSpan(slab, v, SpanOf(k.t, j), NeedsRows(b, which) ? k.t.spSlabRows : 1u, s.len / SLOT_FLOATS);
            continue;
        }
        if (k.t.spQuantum == 0) {
            AscendC::Duplicate(slab[j * rs], v, Narrow<int32_t>(rs, "Duplicate count"));
            continue;
        }
        const PackedSpan p = SpanOf(k.t, j);
        const uint32_t from = p.lo / SLOT_FLOATS * SLOT_FLOATS;
        AscendC::Duplicate(slab[from], v, Narrow<int32_t>(p.hi - from, "Duplicate count"));
    }
    return k.t.spLaneSums == SP_LANES_NONE;  // spLaneSums: every row filled (DuplicateSpan)
}

#if BNB_SOC_HAS_GATHER
// Buffers::lanes, a full sub-group of one run whose k and b slabs' rows 0 are at most a repeat stride apart
// (pairBlocks): both rows 0 are two runs of one SpreadRuns.
template <typename T>
__aicore__ inline bool PairSpread(const KernelState<T> &k, const Buffers<T> &b, const SubGroup &s)
{
    const uint32_t pairBlocks = b.accElems / SLOT_FLOATS;
    return b.lanes && s.cnt == k.t.spChannels && s.cnt == LaneRunOf(k.t).qf && b.accElems % SLOT_FLOATS == 0 &&
           pairBlocks <= MAX_REPEAT_STRIDE;
}

// float32 with PairSpread: k and b are single products [-a / n | scaleK] x [totDy | totDyx] (Coefs), so the
// spread forms them per element from the sums' lanes and the weights' (WeightBlocks, gathered before the
// combine: they do not depend on the sums) in place of Coefs' Mul over the vectors: the same products.
template <typename T>
__aicore__ inline bool ScaledSpread(const KernelState<T> &k, const Buffers<T> &b, const SubGroup &s)
{
    return IsSame<T, float>::value && PairSpread(k, b, s);
}

// ScaledSpread: the sub-group's lanes of [-a / n | scaleK] into blocks, scaleK's first (bcastOff's last two sets).
template <typename T>
__aicore__ inline void WeightBlocks(const KernelState<T> &k, const Buffers<T> &b, const SubGroup &s)
{
    const uint32_t set = k.t.spChannels * SLOT_FLOATS;
    AscendC::Gather(b.weights, k.ub.v.weightPair, b.bcastOff[set], uint32_t(s.lane0 * sizeof(float)), 2 * set);
}

// ScaledSpread: the lanes of [totDy | totDyx] into blocks (totDyx's first), rows 0 of the k and b slabs = their
// products with the weights' blocks (SpreadRuns' Muls), the other rows copied.
template <typename T>
__aicore__ inline void BroadcastScaledPair(const KernelState<T> &k, Buffers<T> &b, const SubGroup &s)
{
    const uint32_t set = k.t.spChannels * SLOT_FLOATS;
    AscendC::Gather(b.scratch, k.ub.v.totPair, b.bcastOff[set], uint32_t(s.lane0 * sizeof(float)), 2 * set);
    SpreadRuns(b.sumPair, b.scratch, b.weights, LaneRunOf(k.t), 2 * s.cnt, b.accElems / SLOT_FLOATS, true);
    FillPairRows(k, b, s);
}

// BlockCoefs, at the reduce's start (they do not depend on the sums): [-a / n | scaleK] of the sub-group's
// channels into blocks (bcastOff's first two sets: lane j, then lane vecElems + j), and -mean's row, as Group
// forms stage, from the mean's row 0 (Reduce's broadcast) times -1.
template <typename T>
__aicore__ inline void CoefWeights(const KernelState<T> &k, const Buffers<T> &b, const SubGroup &s)
{
    const uint32_t set = k.t.spChannels * SLOT_FLOATS;
    AscendC::Gather(b.weights, k.ub.v.weightPair, b.bcastOff, uint32_t(s.lane0 * sizeof(float)), 2 * set);
    AscendC::Muls(b.stageRow, b.slab[SLAB_MEAN], -1.0f, Narrow<int32_t>(s.len, "Muls count"));
}

// BlockCoefs: rows 0 of b and k straight from the lane partials (LanePartials: [dy | dy * xhat], a block per
// channel and sum, in the slots). One ReduceDataBlock reads each block eight times (block stride 0), so every
// result of a repeat is that block's sum, LaneSums' tree of its lanes (the same bits), and the repeat's block
// holds it in each lane; one SpreadRuns of their products with the weights' blocks ([-a / n | scaleK], Coefs'
// Mul on the same values) forms b's runs (without the mean) and k's, b's row the dy sums' row 0 and k's its row
// 1 (s.len floats on: whole runs), which LanePartials has read; then b += k * -mean over the row (Coefs'
// MulAddDst per element). No Gather, no Mul over the vectors; the lanes of the group's totals are LaneSums'
// (after the apply: only the group's outputs read them).
template <typename T>
__aicore__ inline void CoefsFromBlocks(const KernelState<T> &k, Buffers<T> &b, const SubGroup &s)
{
    const uint32_t sums = 2 * s.cnt;
    AscendC::ReduceDataBlock<AscendC::ReduceType::SUM, float, float>(
        b.sumBlocks, b.slotDy, int32_t(SLOT_FLOATS * SLOT_FLOATS), Narrow<int32_t>(sums, "repeatTime"), 1, 0, 1);
    SpreadRuns(b.sumPair, b.sumBlocks, b.weights, LaneRunOf(k.t), sums, 0, true);
    AscendC::MulAddDst(b.sumPair, b.sumPair[s.len], b.stageRow, Narrow<int32_t>(s.len, "MulAddDst count"));
    b.CoefRows(b.sumPair[s.len], b.sumPair);
}

// Buffers::lanes: each vector's lanes of the sub-group into a block each in the slot buffer (a Gather of
// bcastOff: channel j's lane into block j), row 0 of its slab from them (SpreadRuns), the other rows copied
// (k and b together); no scalar read, so no V_S / S_V hand-over.
template <typename T>
__aicore__ inline void BroadcastLanes(const KernelState<T> &k, Buffers<T> &b, const SubGroup &s, uint32_t n,
                                      const uint32_t *which, const LocalTensor<float> *vec)
{
    const LaneRun u = LaneRunOf(k.t);
    const uint32_t set = k.t.spChannels * SLOT_FLOATS;
    const bool coefs = n == 2 && which[0] == SLAB_K && which[1] == SLAB_B;
    if (coefs && s.cnt == k.t.spChannels) {
        // a full sub-group: the lanes of both halves of [coefB | coefK] in one Gather (bcastOff's last two
        // sets: k's blocks, then b's)
        AscendC::Gather(b.scratch, k.ub.v.coefPair, b.bcastOff[set], uint32_t(s.lane0 * sizeof(float)), 2 * set);
        if (PairSpread(k, b, s)) {
            SpreadRuns(b.sumPair, b.scratch, b.zero, u, 2 * s.cnt, b.accElems / SLOT_FLOATS);
        } else {
            SpreadRuns(b.slab[SLAB_K], b.scratch, b.zero, u, s.cnt);
            SpreadRuns(b.slab[SLAB_B], b.scratch[set], b.zero, u, s.cnt);
        }
        if (NeedsRows(b, SLAB_K)) {
            FillPairRows(k, b, s);
        }
        return;
    }
    for (uint32_t i = 0; i < n; ++i) {
        const LocalTensor<float> blocks = b.scratch[i * set];  // the slot buffer holds two sets
        AscendC::Gather(blocks, vec[i], b.bcastOff, uint32_t(s.lane0 * sizeof(float)), s.cnt * SLOT_FLOATS);
        SpreadRuns(b.slab[which[i]], blocks, b.zero, u, s.cnt);
    }
    if (coefs) {
        if (NeedsRows(b, SLAB_K)) {
            FillPairRows(k, b, s);
        }
        return;
    }
    for (uint32_t i = 0; i < n; ++i) {
        if (NeedsRows(b, which[i])) {
            FillSlabRows(k, b.slab[which[i]], s);
        }
    }
}
#endif

// slab[which[i]] lane block j = the group vector vec[i]'s lane (lane0 + j), for
// the sub-group's channels, in each of the slab's spSlabRows rows (row 0 by
// FillRow0, the others copied from it, doubling: the k and b slabs, one buffer,
// together); one channel: the scalar. Packed: a Duplicate per channel, the blocks two
// channels share included (FillRow0; spLaneSums: masked, over every row). At most two slabs.
template <typename T>
__aicore__ inline void Broadcast(const KernelState<T> &k, Buffers<T> &b, const SubGroup &s, uint32_t n,
                                 const uint32_t *which, const LocalTensor<float> *vec)
{
    b.scalar = ScalarValues(k, s);
    if (b.scalar) {
        for (uint32_t i = 0; i < n; ++i) {
            b.value[which[i]] = vec[i].GetValue(s.lane0);
        }
        return;
    }
#if BNB_SOC_HAS_GATHER
    if (b.lanes) {
        BroadcastLanes(k, b, s, n, which, vec);
        return;
    }
#endif
    bool rows[2] = {false, false};
    for (uint32_t i = 0; i < n; ++i) {
        rows[i] = FillRow0(k, b, s, which[i], vec[i]) && NeedsRows(b, which[i]);
    }
    if (k.t.spQuantum > 0) {
        // the scalar reads of the values before the vector unit rewrites them (the scalar unit is ahead)
        AscendC::SetFlag<HardEvent::S_V>(0);
        AscendC::WaitFlag<HardEvent::S_V>(0);
    }
    if (n == 2 && rows[0] && rows[1] && which[0] == SLAB_K && which[1] == SLAB_B) {
        FillPairRows(k, b, s);
        return;
    }
    for (uint32_t i = 0; i < n; ++i) {
        if (rows[i]) {
            FillSlabRows(k, b.slab[which[i]], s);
        }
    }
}

template <typename T>
__aicore__ inline void Broadcast(const KernelState<T> &k, Buffers<T> &b, uint32_t which,
                                 const LocalTensor<float> &vec, const SubGroup &s)
{
    Broadcast(k, b, s, 1, &which, &vec);
}

template <typename T>
__aicore__ inline void Broadcast(const KernelState<T> &k, Buffers<T> &b, uint32_t which0,
                                 const LocalTensor<float> &vec0, uint32_t which1, const LocalTensor<float> &vec1,
                                 const SubGroup &s)
{
    const uint32_t which[2] = {which0, which1};
    const LocalTensor<float> vec[2] = {vec0, vec1};
    Broadcast(k, b, s, 2, which, vec);
}

// Float view of row n: the resident row itself (float32) or its float copy in `slabIdx`, from float `at` of it.
template <typename T>
__aicore__ inline LocalTensor<float> FloatRow(const Buffers<T> &b, const LocalTensor<T> &resident, uint32_t slabIdx,
                                              uint64_t off, uint32_t len, uint64_t at = 0)
{
    if constexpr (IsSame<T, float>::value) {
        (void)b;
        (void)slabIdx;
        (void)len;
        (void)at;
        return resident[off];
    } else {
        AscendC::Cast(b.slab[slabIdx][at], resident[off], AscendC::RoundMode::CAST_NONE, len);
        return b.slab[slabIdx][at];
    }
}

// v = v * (MUL) or + the per-channel value `which` over len elements: its slab, or the scalar
// (Buffers::scalar).
template <bool MUL, typename T>
__aicore__ inline void WithValue(const Buffers<T> &b, const LocalTensor<float> &v, uint32_t which, uint32_t len)
{
    const int32_t n = Narrow<int32_t>(len, "vector count");
    if (b.scalar) {
        if constexpr (MUL) {
            AscendC::Muls(v, v, b.value[which], n);
        } else {
            AscendC::Adds(v, v, b.value[which], n);
        }
    } else if constexpr (MUL) {
        AscendC::Mul(v, v, b.slab[which], n);
    } else {
        AscendC::Add(v, v, b.slab[which], n);
    }
}

// x - mean of row n in float (float32: in place over x, kept for apply). invstd is
// applied per channel, not per element: to the sum of dy * (x - mean) and to k.
template <typename T>
__aicore__ inline LocalTensor<float> CenteredRow(const KernelState<T> &k, const Buffers<T> &b, uint64_t off,
                                                 uint32_t len)
{
    // keepX: cast by ReduceRows, a chunk at a time
    const LocalTensor<float> xr = b.keepX ? b.slab[SLAB_X_F][off] : FloatRow(b, b.x, SLAB_X_F, off, len);
#if BNB_SOC_HAS_SEG_SUM
    if (CompactSlabs(k)) {
        CompactSlices(k, COMPACT_SUB, xr, xr, false, b.slab[SLAB_MEAN], true, len / k.t.spRowStride);
        return xr;
    }
#endif
    if (b.scalar) {
        AscendC::Adds(xr, xr, -b.value[SLAB_MEAN], Narrow<int32_t>(len, "Adds count"));
    } else {
        AscendC::Sub(xr, xr, b.slab[SLAB_MEAN], Narrow<int32_t>(len, "Sub count"));
    }
    return xr;
}

// The first spAccRows rows of the sums: the accumulator rows (sumDy, sumDyx) set to dy and dy * (x - mean)
// (the values 0 + dy and 0 + dy * (x - mean) would have), dy's float copy (16-bit types) cast straight
// into them.
template <typename T>
__aicore__ inline void ReduceFirstRows(const Buffers<T> &b, const LocalTensor<float> &sumDy,
                                       const LocalTensor<float> &sumDyx, const LocalTensor<float> &xh, uint64_t off,
                                       uint32_t elems)
{
    const int32_t count = Narrow<int32_t>(elems, "vector count");
    if constexpr (IsSame<T, float>::value) {
        AscendC::Adds(sumDy, b.dy[off], 0.0f, count);
    } else {
        AscendC::Cast(sumDy, b.dy[off], AscendC::RoundMode::CAST_NONE, elems);
    }
    AscendC::Mul(sumDyx, xh, sumDy, count);
}

// Row sums of chunk rows [r0, r1) into the two sum slabs, spSlabRows rows
// per instruction: row n adds into accumulator row n mod spAccRows (chunks
// start on a multiple of spSlabRows, which divides spAccRows), whatever the
// sub-group and the rows per instruction. Rows 0 .. spAccRows - 1 (whole
// instructions: spAccRows <= N) set the accumulators instead of adding to
// zeros (ReduceFirstRows), so nothing zeroes them.
template <typename T>
__aicore__ inline void ReduceRows(const KernelState<T> &k, const Buffers<T> &b, uint64_t r0, uint64_t r1,
                                  uint32_t len)
{
    if constexpr (!IsSame<T, float>::value) {
        if (b.keepX) {  // the kept float copy of x: the rows' cast in one instruction
            const uint64_t off = uint64_t(int64_t(r0 * len) + b.shift);
            AscendC::Cast(b.slab[SLAB_X_F][off], b.x[off], AscendC::RoundMode::CAST_NONE, uint32_t((r1 - r0) * len));
        }
    }
    for (uint64_t n = r0; n < r1; n += k.t.spSlabRows) {
        const uint32_t elems = uint32_t(Min(k.t.spSlabRows, r1 - n)) * len;
        const uint64_t off = uint64_t(int64_t(n * len) + b.shift);
        const uint32_t acc = uint32_t(n % k.t.spAccRows) * len;
        const LocalTensor<float> sumDy = b.slab[SLAB_SUM_DY][acc], sumDyx = b.slab[SLAB_SUM_DYX][acc];
        const LocalTensor<float> xh = CenteredRow(k, b, off, elems);
        if (n < k.t.spAccRows) {
            ReduceFirstRows(b, sumDy, sumDyx, xh, off, elems);
            continue;
        }
        const LocalTensor<float> dyr = FloatRow(b, b.dy, SLAB_DY_F, off, elems);
        AscendC::Add(sumDy, sumDy, dyr, Narrow<int32_t>(elems, "Add count"));
#if BNB_SOC_HAS_MUL_ADD
        if (k.t.mulAdd) {
            AscendC::MulAddDst(sumDyx, xh, dyr, Narrow<int32_t>(elems, "MulAddDst count"));
            continue;
        }
#endif
        if (b.xcOrder || b.prodOverDy) {  // the product over dy's float copy, whose sum is taken (the same product)
            AscendC::Mul(dyr, xh, dyr, Narrow<int32_t>(elems, "Mul count"));
            AscendC::Add(sumDyx, sumDyx, dyr, Narrow<int32_t>(elems, "Add count"));
            continue;
        }
        AscendC::Mul(b.slab[SLAB_PROD], xh, dyr, Narrow<int32_t>(elems, "Mul count"));
        AscendC::Add(sumDyx, sumDyx, b.slab[SLAB_PROD], Narrow<int32_t>(elems, "Add count"));
    }
}

// The accumulator rows of the two sum slabs added into row 0, halving: the last half of the m rows
// left (floor(m / 2) of them) onto the first, until one is left (a fixed tree whatever the sub-group:
// ceil(log2(spAccRows)) instructions per sum, not spAccRows - 1).
template <typename T>
__aicore__ inline void FoldSums(const KernelState<T> &k, const Buffers<T> &b, uint32_t len, uint32_t dyxAt = 0)
{
    for (uint32_t m = k.t.spAccRows; m > 1;) {
        const uint32_t h = m / 2;
        const int32_t count = Narrow<int32_t>(h * len, "Add count");
        AscendC::Add(b.slab[SLAB_SUM_DY], b.slab[SLAB_SUM_DY], b.slab[SLAB_SUM_DY][(m - h) * len], count);
        // dyxAt > 0 (Runner::PairDistance): the last fold of the dy * xhat sums into the dy sums' slab, dyxAt
        // floats after the dy sums (past row 0; the rows there were read by the dy sums' folds just before)
        const LocalTensor<float> to = dyxAt > 0 && m == 2 ? b.slab[SLAB_SUM_DY][dyxAt] : b.slab[SLAB_SUM_DYX];
        AscendC::Add(to, b.slab[SLAB_SUM_DYX], b.slab[SLAB_SUM_DYX][(m - h) * len], count);
        m -= h;
    }
}

// The x term of the apply step: float32 keeps x - mean in x since the reduce; 16-bit types take x
// itself, as float (Coefs folded mean into the slab of b).
template <typename T>
__aicore__ inline LocalTensor<float> ApplyX(const Buffers<T> &b, uint64_t off, uint32_t len)
{
    if constexpr (IsSame<T, float>::value) {
        (void)len;
        return b.x[off];
    } else {
        return FloatRow(b, b.x, b.wide ? SLAB_DY_F : SLAB_X_F, off, len);  // WideApply: both cast slabs' rows
    }
}

#if BNB_SOC_HAS_SEG_SUM
// ApplyRows' two fused steps with compact slabs (tiling spSegSum SP_SEG_COMPACT), the same arithmetic:
// dr = a * dr + b, then x = k * x + dr (float32 into x) or dr = x * k + dr, a repeat per slice, each
// per-channel value read from its block (block stride 0).
template <typename T>
__aicore__ inline void ApplyCompact(const KernelState<T> &k, const Buffers<T> &b, const LocalTensor<float> &dr,
                                    const LocalTensor<float> &res, bool floatToX, const LocalTensor<float> &xr,
                                    uint32_t elems)
{
    const uint32_t repeats = elems / k.t.spRowStride;
    CompactSlices(k, COMPACT_FUSED_MUL_ADD, dr, b.slab[SLAB_A], true, b.slab[SLAB_B], true, repeats);
    if (floatToX) {
        CompactSlices(k, COMPACT_FUSED_MUL_ADD, res, b.slab[SLAB_K], true, dr, false, repeats);  // x = k * x + dr
    } else {
        CompactSlices(k, COMPACT_MUL_ADD_DST, dr, xr, false, b.slab[SLAB_K], true, repeats);
    }
}
#endif

// Rows an apply instruction takes: twice spSlabRows with ColumnApply and WideApply (Buffers::wide).
template <typename T>
__aicore__ inline uint32_t ApplyStep(const KernelState<T> &k, const Buffers<T> &b)
{
    return b.columns || b.wide ? 2 * k.t.spSlabRows : k.t.spSlabRows;
}

#if BNB_SOC_HAS_MUL_ADD
// ColumnApply (16-bit types): grad_input of `rows` rows (at most a repeat's blocks) from `off`, dx = (a * dy + b) +
// k * x as ApplyRows' fused steps, a repeat per block column: each operand's block p of every row (rows len floats
// apart, block stride len / 8) against block p of the per-channel values' rows 0 (block stride 0); then cast into
// `out`. `dyCast`: dy's float rows are in place already (Runner::CastFirstDy).
template <typename T>
__aicore__ inline void ApplyColumns(const Buffers<T> &b, const LocalTensor<T> &out, uint64_t off, uint32_t rows,
                                    uint32_t len, bool want, int32_t dyFree, bool dyCast)
{
    const uint32_t elems = rows * len;
    const LocalTensor<float> &dr = b.slab[SLAB_DY_F], &xr = b.slab[SLAB_MEAN];
    if (want && !dyCast) {
        AscendC::Cast(dr, b.dy[off], AscendC::RoundMode::CAST_NONE, elems);
    }
    if (dyFree >= 0) {
        AscendC::SetFlag<HardEvent::V_MTE2>(dyFree);
    }
    if (!want) {
        AscendC::Duplicate(dr, 0.0f, Narrow<int32_t>(elems, "Duplicate count"));
    } else {
        const uint8_t rb = Narrow<uint8_t>(len / SLOT_FLOATS, "block stride");
        const uint8_t cols = Narrow<uint8_t>(len / SLOT_FLOATS, "repeatTime");
        uint64_t mask[2] = {MaskBits(0, rows * SLOT_FLOATS), 0};
        AscendC::FusedMulAdd(dr, b.slab[SLAB_A], b.colB, mask, cols, AscendC::BinaryRepeatParams(rb, 0, 0, 1, 1, 1));
        AscendC::Cast(xr, b.x[off], AscendC::RoundMode::CAST_NONE, elems);
        AscendC::MulAddDst(dr, xr, b.colK, mask, cols, AscendC::BinaryRepeatParams(rb, rb, 0, 1, 1, 1));
    }
    AscendC::Cast(out[off], dr, NarrowRound<T>(), elems);
}
#endif

// grad_input of chunk rows [r0, r1) (zeros when not wanted), spSlabRows rows per instruction, into the
// resident x (`toX`, Runner::OutIsX) or dy: float32 in place, 16-bit types cast from their float copy.
// float32 into x takes the same steps as into dy, their last addition's operands swapped (the same bits).
// dyFree >= 0 (16-bit types into x): the V_MTE2 event of that id is set once the rows' dy is cast.
// firstCast: ColumnApply, the first instruction's rows of dy are cast already (Runner::CastFirstDy).
template <typename T>
__aicore__ inline void ApplyRows(const KernelState<T> &k, const Buffers<T> &b, bool toX, uint64_t r0, uint64_t r1,
                                 uint32_t len, bool want, int32_t dyFree = -1, bool firstCast = false)
{
    const LocalTensor<T> &out = toX ? b.x : b.dy;
#if BNB_SOC_HAS_MUL_ADD
    if constexpr (!IsSame<T, float>::value) {
        if (b.columns) {
            const uint32_t step = ApplyStep(k, b);
            for (uint64_t n = r0; n < r1; n += step) {
                const uint32_t rows = uint32_t(Min(step, r1 - n));
                ApplyColumns(b, out, uint64_t(int64_t(n * len) + b.shift), rows, len, want,
                             n + step >= r1 ? dyFree : -1, firstCast && n == r0);
            }
            return;
        }
    }
#endif
    const uint32_t step = ApplyStep(k, b);
    for (uint64_t n = r0; n < r1; n += step) {
        const uint32_t elems = uint32_t(Min(step, r1 - n)) * len;
        const uint64_t off = uint64_t(int64_t(n * len) + b.shift);
        LocalTensor<float> dr;  // dy's float row, and grad_input's but for float32 into x
        if constexpr (IsSame<T, float>::value) {
            dr = b.dy[off];
        } else {
            dr = b.wide ? b.sumPair : b.slab[SLAB_DY_F];
            if (want) {
                AscendC::Cast(dr, b.dy[off], AscendC::RoundMode::CAST_NONE, elems);
            }
            if (dyFree >= 0 && n + step >= r1) {
                AscendC::SetFlag<HardEvent::V_MTE2>(dyFree);
            }
        }
        const bool floatToX = IsSame<T, float>::value && toX;
        const LocalTensor<float> res = floatToX ? ApplyX(b, off, elems) : dr;
        if (!want) {
            AscendC::Duplicate(res, 0.0f, Narrow<int32_t>(elems, "Duplicate count"));
#if BNB_SOC_HAS_MUL_ADD
        } else if (k.t.training && k.t.mulAdd) {
            // dx = (a * dy + b) + k * x, two instructions over the slabs (Buffers::scalar is never set here).
            const int32_t count = Narrow<int32_t>(elems, "vector count");
#if BNB_SOC_HAS_SEG_SUM
            if (CompactSlabs(k)) {
                ApplyCompact(k, b, dr, res, floatToX, ApplyX(b, off, elems), elems);
            } else
#endif
            {
                AscendC::FusedMulAdd(dr, b.slab[SLAB_A], b.slab[SLAB_B], count);
                if (floatToX) {
                    AscendC::FusedMulAdd(res, b.slab[SLAB_K], dr, count);  // x = k * x + dr
                } else {
                    AscendC::MulAddDst(dr, ApplyX(b, off, elems), b.slab[SLAB_K], count);
                }
            }
#endif
        } else {
            WithValue<true>(b, dr, SLAB_A, elems);
            if (k.t.training) {
                const LocalTensor<float> xh = ApplyX(b, off, elems);
                if (b.scalar && !floatToX) {
                    // one channel: k a scalar, so its product and the addition are one Axpy (dr += k * x)
                    AscendC::Axpy(dr, xh, b.value[SLAB_K], Narrow<int32_t>(elems, "Axpy count"));
                } else {
                    WithValue<true>(b, xh, SLAB_K, elems);
                    AscendC::Add(res, floatToX ? xh : dr, floatToX ? dr : xh, Narrow<int32_t>(elems, "Add count"));
                }
                WithValue<false>(b, res, SLAB_B, elems);
            }
        }
        if constexpr (!IsSame<T, float>::value) {
            AscendC::Cast(out[off], dr, NarrowRound<T>(), elems);
        }
    }
}

// Tiling spWhole (one channel per sub-group, its float copies of all rows kept): chunk rows [r0, r1) cast
// to float, x - mean in place (the scalar), then the sums' accumulator rows (spSlabRows at a time, row n into
// row n mod spSlabRows): dy * (x - mean) set by the first rows and MulAddDst after; dy's set by the first two
// rows' Add where there are two full ones (its first rows are kept for the apply, so not summed in place).
template <typename T>
__aicore__ inline void ReduceWholeRows(const KernelState<T> &k, const Buffers<T> &b, uint64_t r0, uint64_t r1,
                                       uint32_t len)
{
    const uint64_t off = r0 * len, rows = k.t.spSlabRows, outer = uint64_t(k.t.outer);
    const uint32_t elems = uint32_t((r1 - r0) * len);
    const int32_t count = Narrow<int32_t>(elems, "vector count");
    const LocalTensor<float> &xf = b.slab[SLAB_X_F], &dyf = b.slab[SLAB_DY_F];
    AscendC::Cast(xf[off], b.x[off], AscendC::RoundMode::CAST_NONE, elems);
    AscendC::Adds(xf[off], xf[off], -b.value[SLAB_MEAN], count);
    AscendC::Cast(dyf[off], b.dy[off], AscendC::RoundMode::CAST_NONE, elems);
    for (uint64_t n = r0; n < r1; n += rows) {
        const int32_t e = Narrow<int32_t>(Min(rows, r1 - n) * len, "vector count");
        const uint64_t o = n * len;
        if (n == 0) {
            AscendC::Mul(b.slab[SLAB_SUM_DYX], xf, dyf, e);
            if (outer < 2 * rows) {
                AscendC::Adds(b.slab[SLAB_SUM_DY], dyf, 0.0f, e);  // no full second step to pair these rows with
            }
            continue;
        }
        const bool pairFirst = n == rows && outer >= 2 * rows;
        AscendC::Add(b.slab[SLAB_SUM_DY], pairFirst ? dyf : b.slab[SLAB_SUM_DY], dyf[o], e);
        AscendC::MulAddDst(b.slab[SLAB_SUM_DYX], xf[o], dyf[o], e);
    }
}

// Tiling spWhole: grad_input of chunk rows [r0, r1) from the float copies, every per-channel value a scalar:
// dy * a (`scaled`: done for all rows before the hand-over of the sums, Finish), + (k * invstd) * (x - mean)
// (Axpy), + b, cast into `out` (zeros when not wanted). Nothing reduced (inference without grad_weight /
// grad_bias): dy cast here. dyFree >= 0: that V_MTE2 event once the rows' dy is read.
template <typename T>
__aicore__ inline void ApplyWholeRows(const KernelState<T> &k, const Buffers<T> &b, const LocalTensor<T> &out,
                                      uint64_t r0, uint64_t r1, uint32_t len, bool want, bool reduced, bool scaled,
                                      int32_t dyFree)
{
    const uint64_t off = r0 * len;
    const uint32_t elems = uint32_t((r1 - r0) * len);
    const int32_t count = Narrow<int32_t>(elems, "vector count");
    const LocalTensor<float> dr = b.slab[SLAB_DY_F][off];
    if (!want) {
        AscendC::Duplicate(dr, 0.0f, count);
    } else {
        if (!reduced) {
            AscendC::Cast(dr, b.dy[off], AscendC::RoundMode::CAST_NONE, elems);
        }
        if (!scaled) {
            AscendC::Muls(dr, dr, b.value[SLAB_A], count);
        }
        if (k.t.training) {
            AscendC::Axpy(dr, b.slab[SLAB_X_F][off], b.value[SLAB_K], count);
            AscendC::Adds(dr, dr, b.value[SLAB_B], count);
        }
    }
    if (dyFree >= 0) {
        AscendC::SetFlag<HardEvent::V_MTE2>(dyFree);
    }
    AscendC::Cast(out[off], dr, NarrowRound<T>(), elems);
}

// The chunks of the rows: [ChunkBegin(c), ChunkBegin(c + 1)).
// Tiling spLastRows: the last chunk that many rows, the others spChunkRows each before it.
__aicore__ inline uint32_t Chunks(const BatchNormBackwardTilingData &t)
{
    const uint64_t last = t.spLastRows;
    return uint32_t(CeilDiv(uint64_t(t.outer) - last, t.spChunkRows) + (last > 0 ? 1 : 0));
}

// chunks: Chunks(t), which the caller holds (a division: not once per chunk on the scalar unit).
__aicore__ inline uint64_t ChunkBegin(const BatchNormBackwardTilingData &t, uint32_t chunks, uint32_t c)
{
    const uint64_t outer = uint64_t(t.outer);
    return c >= chunks ? outer : Min(uint64_t(c) * t.spChunkRows, outer - t.spLastRows);
}

template <typename T>
class Runner {
public:
    __aicore__ inline void Run(KernelState<T> &k)
    {
        b_.Init(k.pipe, k.t);
        chunks_ = Chunks(k.t);
        slots_ = SpRingSlots(k.t);
        slotElems_ = SpRingSlotElems(k.t);
        const uint32_t mask = k.t.outputMask;
        want_ = mask >> GRAD_INPUT & 1;
        reduce_ = (mask >> GRAD_WEIGHT & 1) || (mask >> GRAD_BIAS & 1) || (k.t.training && want_);
        loads_ = reduce_ || want_;
        outX_ = reduce_ && (!IsSame<T, float>::value || (want_ && k.t.training));
        b_.xcOrder = XcOrder(k);
        b_.keepX = KeepX(k);
        // from the tiling alone: decided once, not per sub-group or channel on the scalar unit
        phases_ = PhaseCount(k);
        phaseSums_ = PhaseSumsOn(k);
        if (b_.xcOrder && !b_.keepX) {
            b_.slab[SLAB_A] = b_.slab[SLAB_PROD];  // the mean's slab keeps the mean for the apply (ApplyXcRows)
        }
        // KeepX: x's rows are free once reduced, so grad_input goes to dy's rows and, with one buffer (whose next
        // loads follow this sub-group's apply: ids of one set), the next sub-group's x rows load during this one's
        // combine and apply (Load, XEarly)
        outX_ = outX_ && !b_.keepX;
        xEarly_ = b_.keepX && loads_ && k.t.spBuffers == 1;
        const GroupWalk w = ParamGroupsOfCore(k.t, k.share, AscendC::GetBlockIdx());
        for (uint64_t g = w.first; g < w.end; g += w.step) {
            lastGroup_ = g + w.step >= w.end;
            Group(k, int64_t(g));
        }
        Release();
        if (k.t.softSync) {
            if (!synced_) {
                k.SyncCores();  // every group's totals are in the workspace
                BNB_PERF_COMBINE_BEGIN();
                LoadShare(k);
            } else {
                BNB_PERF_COMBINE_BEGIN();
            }
            WriteShare(k);
            BNB_PERF_COMBINE_END();
        }
    }

private:
    // Sub-group i of group g, in buffer i mod spBuffers. A group that is not whole sub-groups takes its
    // short one first where 16-bit types are double-buffered (bound by the vector unit, which waits for
    // the first sub-group's loads with nothing to overlap them), else last (float32: MTE2 is the bound,
    // and a short last sub-group shortens the apply and stores after the last loads; one buffer: each
    // sub-group's loads go into the chunks the previous one releases, which a longer one would reach
    // past). Which sub-group sums a channel changes nothing in its sums.
    // Tiling spEven: the same count of sub-groups, their sizes (in runs of spQuantum channels) differing by one
    // at most, the smaller ones where the short one would be.
    __aicore__ inline SubGroup Make(const KernelState<T> &k, int64_t g, uint32_t i) const
    {
        const uint32_t n = GroupCount(k.t, g), w = k.t.spChannels, subs = uint32_t(CeilDiv(n, w));
        const bool shortFirst = k.t.spBuffers > 1 && !IsSame<T, float>::value && subs > 0;
        uint32_t s0, cnt;
        if (k.t.spEven && subs > 0) {
            const uint32_t q = uint32_t(BalancedQuantum(k.t)), runs = n / q, base = runs / subs, extra = runs % subs;
            // sub-groups [0, big) or [subs - extra, subs) take base + 1 runs
            const uint32_t bigFrom = shortFirst ? subs - extra : 0, bigTo = shortFirst ? subs : extra;
            const uint32_t bigBefore = i <= bigFrom ? 0 : Min(i, bigTo) - bigFrom;
            s0 = (i * base + bigBefore) * q;
            cnt = (base + (i >= bigFrom && i < bigTo ? 1 : 0)) * q;
        } else {
            const uint32_t first = shortFirst ? n - (subs - 1) * w : w;
            s0 = i == 0 ? 0 : first + (i - 1) * w;
            cnt = uint32_t(Min(i == 0 ? first : w, n - s0));
        }
        SubGroup s;
        s.cs = GroupStart(k.t, g) + s0;
        s.cnt = cnt;
        s.lane0 = s0;
        s.len = s.cnt * k.t.spRowStride;
        s.buf = i % k.t.spBuffers;
        s.ring0 = slots_ > 0 ? uint32_t(uint64_t(i) * chunks_ % slots_) : 0u;  // each group starts on slot 0
        return s;
    }

    // The sub-groups are software-pipelined: the loads of sub-group i + 1 are
    // issued after the reduce of sub-group i and before its totals (the scalar
    // waits there), so with two buffers MTE2 streams on while V finishes i.
    __aicore__ inline void Group(KernelState<T> &k, int64_t g)
    {
        const uint32_t subs = uint32_t(CeilDiv(GroupCount(k.t, g), k.t.spChannels));
        const bool first = subs > 0 && loads_;
        if (k.t.training && k.statsGroup != g) {
            // The statistics' loads, then at once the first sub-group's, which need not wait for them to
            // land (Load: V takes them after their own MTE2_V event, set on the id of the sub-group's
            // last chunk before its rows are issued).
            IssueStatLoads(k, g, true);
            const SubGroup s0 = Make(k, g, 0);
            AscendC::SetFlag<HardEvent::MTE2_V>(LoadIdOf(s0, chunks_ - 1));
            if (first) {
                Load(k, s0, g);
            } else {
                AscendC::WaitFlag<HardEvent::MTE2_V>(LoadIdOf(s0, chunks_ - 1));
                FinishStatLoads(k, g, true);
            }
#if BNB_SOC_HAS_GATHER
            LaneTables(k);  // while the statistics land
#endif
            AscendC::SetFlag<HardEvent::V_S>(0);  // the scalar unit reads the statistics too (Broadcast)
            AscendC::WaitFlag<HardEvent::V_S>(0);
            if (FixStatTails(k, g)) {
                SetWaitFlag<HardEvent::S_V>();  // the tails' scalar writes before the vector unit reads them
                if (CastStatTails(k, g)) {
                    SetWaitFlag<HardEvent::V_S>();  // the casts before the scalar unit reads them (Broadcast)
                }
            }
        } else {
            LoadStats(k, g);  // ends on a full barrier (once per group, outside the loop)
            if (first) {
                Load(k, Make(k, g, 0));
            }
#if BNB_SOC_HAS_GATHER
            LaneTables(k);
#endif
        }
        AscendC::Duplicate(k.ub.v.totDy, 0.0f, Narrow<int32_t>(k.t.vecElems, "Duplicate count"));
        AscendC::Duplicate(k.ub.v.totDyx, 0.0f, Narrow<int32_t>(k.t.vecElems, "Duplicate count"));
        if (want_) {
            // a = weight * invstd does not depend on the sums: once per group, before any sub-group.
            AscendC::Mul(k.ub.v.coefA, k.ub.v.weight, k.ub.v.invstd, Narrow<int32_t>(k.t.vecElems, "Mul count"));
            if (k.t.training) {
                // -a / n, the factor of b, over weight (read by nothing else), and scaleK = -a / n * invstd^2,
                // that of k * invstd: Coefs takes both in one instruction
                const int32_t n = Narrow<int32_t>(k.t.vecElems, "vector count");
                AscendC::Muls(k.ub.v.weight, k.ub.v.coefA, -k.t.invCount, n);
                AscendC::Mul(k.ub.v.scaleK, k.ub.v.weight, k.ub.v.invstd, n);
                AscendC::Mul(k.ub.v.scaleK, k.ub.v.scaleK, k.ub.v.invstd, n);
                if (!IsSame<T, float>::value && k.t.mulAdd) {
                    // -mean over stage until WriteParamGrads (Coefs: b + k * -mean in one MulAddDst)
                    AscendC::Muls(k.ub.v.stage, k.ub.v.mean, -1.0f, Narrow<int32_t>(k.t.vecElems, "Muls count"));
                }
            }
            AscendC::SetFlag<HardEvent::V_S>(0);
            AscendC::WaitFlag<HardEvent::V_S>(0);
            if (AheadA(k) && lastGroup_ && subs > 0) {
                Broadcast(k, b_, SLAB_A, k.ub.v.coefA, Make(k, g, subs - 1));  // while the first loads land
            }
        }
        const bool twoBuffers = k.t.spBuffers > 1;
        for (uint32_t i = 0; i < subs; ++i) {
            const SubGroup s = Make(k, g, i);
            Reduce(k, s);
            if (twoBuffers && i + 1 < subs) {
                Load(k, Make(k, g, i + 1));  // into the other buffer
            }
            if (xEarly_ && i + 1 < subs) {
                LoadX(k, Make(k, g, i + 1));
            }
            // spSpare: the next sub-group's first chunks into the slots this one does not use, before its
            // combine and apply
            const uint32_t spare = slots_ > 0 && i + 1 < subs ? uint32_t(Min(k.t.spSpare, chunks_)) : 0u;
            if (spare > 0) {
                LoadRing(k, Make(k, g, i + 1), 0, spare);
            }
            syncGroup_ = k.t.softSync && lastGroup_ && i + 1 == subs && ShareInOneLoad(k) ? g : -1;
            Finish(k, s, lastGroup_ && i + 1 == subs);
            if (!twoBuffers && i + 1 < subs) {
                if (slots_ > 0) {
                    LoadRing(k, Make(k, g, i + 1), spare, chunks_);  // into the slots of this one, as released
                } else {
                    Load(k, Make(k, g, i + 1));  // into the same buffer, chunk by chunk as it is released
                }
            }
        }
        Release();
        if (!synced_) {
            CloseGroup(k, g);
        }
    }

    // After the group's last sums: grad_weight / grad_bias of group g, or (softSync) its totals to its slot.
    __aicore__ inline void CloseGroup(KernelState<T> &k, int64_t g)
    {
        SetWaitFlag<HardEvent::S_V>();  // the scalar unit's reads of the vectors (Broadcast) before V writes them
        // grad_weight = invstd * sum(dy * (x - mean))
        AscendC::Mul(k.ub.v.totDyx, k.ub.v.totDyx, k.ub.v.invstd, Narrow<int32_t>(k.t.vecElems, "Mul count"));
        // the totals before their copies; the grad_input stores still in flight need not land first
        SetWaitFlag<HardEvent::V_MTE3>();
        k.coefGroup = -1;
        if (k.t.softSync) {
            StashGroupTotals(k, g);
        } else {
            WriteParamGrads<MODE_FULL>(k, g, false);
        }
    }

    // softSync, the core's last sub-group, once its coefficients are formed: where this core's share of
    // grad_weight / grad_bias is one load of slots (ShareInOneLoad), the group's totals go to its slot and
    // the cores meet before the sub-group's apply, so the share's slots land while V applies and its
    // stores follow the last grad_input rows (the same totals, so the same bits).
    __aicore__ inline void SyncBeforeLastApply(KernelState<T> &k, int64_t g)
    {
        CloseGroup(k, g);
        k.SyncCores();  // every group's totals are in the workspace
        BNB_PERF_COMBINE_BEGIN();
        LoadShare(k);
        BNB_PERF_COMBINE_END();
        synced_ = true;
    }

    // softSync: this core's share of grad_weight / grad_bias, whole blocks of channels (ShareQuantum; the
    // last core takes the remainder), [*b, *e), and the groups g0..g1 they belong to.
    __aicore__ inline void ShareOfCore(const KernelState<T> &k, uint64_t *b, uint64_t *e) const
    {
        ChannelShareOfCore(0, uint64_t(k.t.channels), ShareQuantum(k), AscendC::GetBlockIdx(), k.t.usedCores, b, e);
    }
    // The share is one chunk whose slots fit partUb (unused by the single pass): one load, issued right
    // after the SyncAll (LoadShare).
    __aicore__ inline bool ShareInOneLoad(const KernelState<T> &k) const
    {
        uint64_t b = 0, e = 0;
        ShareOfCore(k, &b, &e);
        return e - b <= k.t.vecElems && (e == b || ShareSlotSpan(k.t, b, e - b) <= k.ub.partUb.GetSize());
    }
    __aicore__ inline void LoadShare(KernelState<T> &k)
    {
        uint64_t b = 0, e = 0;
        ShareOfCore(k, &b, &e);
        if (ShareInOneLoad(k) && e > b) {
            AscendC::DataCopy(k.ub.partUb, k.stash[uint64_t(GroupOf(k.t, int64_t(b))) * 2 * StashSlotFloats(k.t)],
                              uint32_t(ShareSlotSpan(k.t, b, e - b)));
            shareEvent_ = k.pipe.template AllocEventID<HardEvent::MTE2_S>();  // held across the apply
            AscendC::SetFlag<HardEvent::MTE2_S>(shareEvent_);
            shareLoaded_ = true;
        }
    }

    // softSync, after the SyncAll: grad_weight / grad_bias of this core's share of the channels, chunk by
    // chunk (ShareChunk), gathered from the groups' slots (GatherShareChunk; one chunk: from the slots
    // LoadShare brought).
    __aicore__ inline void WriteShare(KernelState<T> &k)
    {
        uint64_t b = 0, e = 0;
        ShareOfCore(k, &b, &e);
        for (uint64_t c0 = b; c0 < e;) {
            const uint64_t n = ShareChunk(c0, e, k.t.vecElems, ShareQuantum(k));
            bool loaded = false;
            if (shareLoaded_) {
                AscendC::WaitFlag<HardEvent::MTE2_S>(shareEvent_);
                k.pipe.template ReleaseEventID<HardEvent::MTE2_S>(shareEvent_);
                shareLoaded_ = false;
                loaded = true;
            }
            GatherShareChunk(k, c0, n, ShareSlotSpan(k.t, c0, n) <= k.ub.partUb.GetSize(), loaded);
            // the scalar unit's writes before V / MTE3 read them (the apply's grad_input stores, still in
            // flight, need not land first)
            SetWaitFlag<HardEvent::S_V>();
            SetWaitFlag<HardEvent::S_MTE3>();
            if (synced_ && c0 + n >= e) {
                LastShareOut(k, int64_t(c0), uint32_t(n));
            } else {
                WriteParamRange(k, int64_t(c0), uint32_t(n));
            }
            c0 += n;
        }
    }

    // WriteParamRange's stores of the launch's last per-channel outputs (the cores met before the last
    // apply: SyncBeforeLastApply), left in flight behind the apply's grad_input stores: nothing writes
    // their sources after them, and the launch ends when every store landed.
    __aicore__ inline void LastShareOut(KernelState<T> &k, int64_t c0, uint32_t n)
    {
        const bool wantW = k.t.outputMask >> GRAD_WEIGHT & 1, wantB = k.t.outputMask >> GRAD_BIAS & 1;
        if (!wantW || !wantB) {
            WriteParamRange(k, c0, n);
            return;
        }
        ChannelVecs &v = k.ub.v;
        if constexpr (!IsSame<T, float>::value) {
            if (!k.t.gradParamFloat32) {
                LocalTensor<T> staged = v.stage.template ReinterpretCast<T>();
                AscendC::Cast(staged, v.totDyx, NarrowRound<T>(), int32_t(n));
                AscendC::Cast(staged[k.t.vecElems], v.totDy, NarrowRound<T>(), int32_t(n));
                SetWaitFlag<HardEvent::V_MTE3>();
                k.copy.Out(k.gradT[OUT_GRAD_WEIGHT], staged, c0, 1, n, n, k.t.vecElems, true);
                k.copy.Out(k.gradT[OUT_GRAD_BIAS], staged[k.t.vecElems], c0, 1, n, n, k.t.vecElems, true);
                return;
            }
        }
        k.copy.Out(k.gradF[OUT_GRAD_WEIGHT], v.totDyx, c0, 1, n, n, k.t.vecElems, true);
        k.copy.Out(k.gradF[OUT_GRAD_BIAS], v.totDy, c0, 1, n, n, k.t.vecElems, true);
    }

    // Event ids of chunk c of buffer buf, fixed (the tiling keeps them below the SoC's QUE_MAX_EVENT:
    // SpEventSets). MTE2_V: a sub-group's loads are all waited for (Reduce) before the next sub-group's are
    // issued, so one set of ids, but where nothing is reduced (Finish waits for them after the next
    // sub-group's loads) one a buffer.
    __aicore__ inline int32_t LoadId(uint32_t buf, uint32_t c) const
    {
        return int32_t((reduce_ ? 0 : buf) * chunks_ + c);
    }
    // V_MTE2 / MTE3_MTE2, a chunk released (set by an apply, waited for by the next loads into its buffer,
    // ReleaseChunk): with up to two buffers those loads come before the next apply, so one set of ids; with
    // more, the previous sub-group's are still pending there: two sets, alternating, each buffer's kept.
    __aicore__ inline int32_t ReleaseId(uint32_t buf, uint32_t c) const
    {
        return int32_t(relSet_[buf] * chunks_ + c);
    }
    // Tiling spSpare with an event id past the ring's slots (the ring's SoCs have SP_MAX_CHUNKS) and rows to
    // reduce: the last chunk's rows are signalled to V in two halves of whole instructions (the first on id
    // slots_), so the reduce of a sub-group whose loads V waits for (a group's first) ends half a chunk's
    // instructions sooner after its last rows land. The first row of the second half, or 0: not split.
    __aicore__ inline uint64_t HalfRows(const KernelState<T> &k, uint32_t c) const
    {
        if (slots_ == 0 || slots_ >= SP_MAX_CHUNKS || !reduce_ || Whole(k) || c + 1 != chunks_) {
            return 0;
        }
        const uint64_t c0 = ChunkBegin(k.t, chunks_, c), rows = ChunkBegin(k.t, chunks_, c + 1) - c0;
        const uint64_t step = k.t.spSlabRows;
        return rows >= 2 * step ? c0 + rows / 2 / step * step : 0;
    }
    // Tiling spSpare: the ring's slot of chunk c of sub-group s.
    __aicore__ inline uint32_t SlotOf(const SubGroup &s, uint32_t c) const { return (s.ring0 + c) % slots_; }
    // Event ids of chunk c of sub-group s: its ring slot (spSpare) for every event, else LoadId (MTE2_V) and
    // ReleaseId (V_MTE2, MTE3_MTE2, and V_MTE3, set and waited for at once).
    __aicore__ inline int32_t LoadIdOf(const SubGroup &s, uint32_t c) const
    {
        return slots_ > 0 ? int32_t(SlotOf(s, c)) : LoadId(s.buf, c);
    }
    __aicore__ inline int32_t ReleaseIdOf(const SubGroup &s, uint32_t c) const
    {
        return slots_ > 0 ? int32_t(SlotOf(s, c)) : ReleaseId(s.buf, c);
    }
    // Buffers::shift of chunk c of sub-group s: its slot's first element less its first row's (0 without the ring).
    __aicore__ inline int64_t Shift(const KernelState<T> &k, const SubGroup &s, uint32_t c) const
    {
        return slots_ > 0 ? int64_t(SlotOf(s, c) * slotElems_) - int64_t(ChunkBegin(k.t, chunks_, c) * s.len) : 0;
    }

    // Tiling spSpare: chunks [from, to) of sub-group s into their ring slots, each once its slot's last
    // chunk is applied (V) and stored (MTE3); where grad_input goes to x's rows (OutIsX) and the slots are
    // this sub-group's predecessor's (from > 0: after its apply), the dy rows half the chunks ahead of the
    // x rows, as Load does.
    __aicore__ inline void LoadRing(KernelState<T> &k, const SubGroup &s, uint32_t from, uint32_t to,
                                    int64_t statsGroup = -1)
    {
        if (!loads_ || from >= to) {
            return;
        }
        b_.Use(s.buf);
        const bool dyFirst = OutIsX() && from > 0;
        const uint32_t lead = dyFirst ? (to - from + 1) / 2 : 0;
        for (uint32_t c = from; c < from + lead; ++c) {
            ReleaseSlot(SlotOf(s, c), true, false);
            LoadRows(k, s, c, true, false);
        }
        for (uint32_t c = from; c < to; ++c) {
            if (dyFirst && c + lead < to) {
                ReleaseSlot(SlotOf(s, c + lead), true, false);
                LoadRows(k, s, c + lead, true, false);
            }
            if (statsGroup >= 0 && c + 1 == chunks_) {
                AscendC::WaitFlag<HardEvent::MTE2_V>(LoadIdOf(s, c));
                FinishStatLoads(k, statsGroup);
            }
            ReleaseSlot(SlotOf(s, c), true, true);
            const uint64_t mid = HalfRows(k, c);
            if (mid > 0) {  // the first half signalled on its own id (Reduce)
                LoadRows(k, s, c, !dyFirst, reduce_, ChunkBegin(k.t, chunks_, c), mid);
                AscendC::SetFlag<HardEvent::MTE2_V>(int32_t(slots_));
                LoadRows(k, s, c, !dyFirst, reduce_, mid, ChunkBegin(k.t, chunks_, c + 1));
            } else {
                LoadRows(k, s, c, !dyFirst, reduce_);
            }
            AscendC::SetFlag<HardEvent::MTE2_V>(LoadIdOf(s, c));
        }
    }

    // Tiling spSpare: a ring slot is free once its last chunk's compute (V, `v`) and stores (MTE3, `mte3`)
    // are done; each wait once per use of the slot.
    __aicore__ inline void ReleaseSlot(uint32_t slot, bool v, bool mte3)
    {
        if (v && pendV_[slot]) {
            AscendC::WaitFlag<HardEvent::V_MTE2>(int32_t(slot));
            pendV_[slot] = false;
        }
        if (mte3 && pendM_[slot]) {
            AscendC::WaitFlag<HardEvent::MTE3_MTE2>(int32_t(slot));
            pendM_[slot] = false;
        }
    }

    // MTE2: the sub-group's rows into its buffer, chunk by chunk, each chunk signalled to V.
    // statsGroup >= 0: the group's statistics' loads are in flight, their MTE2_V event set on the last
    // chunk's id; V waits for them and casts them before that id is set again.
    __aicore__ inline void Load(KernelState<T> &k, const SubGroup &s, int64_t statsGroup = -1)
    {
        if (!loads_) {
            return;
        }
        if (slots_ > 0) {
            LoadRing(k, s, 0, chunks_, statsGroup);
            return;
        }
        b_.Use(s.buf);
        if (s.cnt > lastCnt_[s.buf]) {
            // a longer sub-group than the buffer's last (the short first one, Make): its chunk c reaches past
            // that one's, so all of that one is released first (long applied and stored by now)
            for (uint32_t c = 0; pending_[s.buf] && c < chunks_; ++c) {
                ReleaseChunk(s.buf, c, !xEarly_, true);
            }
        }
        lastCnt_[s.buf] = s.cnt;
        // grad_input in x's rows: the dy rows of a chunk go half the chunks ahead of its x rows, each as
        // soon as the apply of the buffer's last sub-group has read them (V), the x rows behind their
        // stores (MTE3), so MTE2 does not wait for a store to land before the next sub-group's first rows,
        // and V does not wait for all of dy before its first x rows.
        const bool dyFirst = OutIsX() && pending_[s.buf];
        const uint32_t lead = dyFirst ? (chunks_ + 1) / 2 : 0;
        for (uint32_t c = 0; c < lead; ++c) {
            ReleaseChunk(s.buf, c, true, false);
            LoadRows(k, s, c, true, false);
        }
        // XEarly: the x rows loaded already (LoadX), the dy rows, which hold the last sub-group's grad_input,
        // behind its stores
        const bool xAhead = xAhead_;
        xAhead_ = false;
        for (uint32_t c = 0; c < chunks_; ++c) {
            if (dyFirst && c + lead < chunks_) {
                ReleaseChunk(s.buf, c + lead, true, false);
                LoadRows(k, s, c + lead, true, false);
            }
            if (statsGroup >= 0 && c + 1 == chunks_) {
                AscendC::WaitFlag<HardEvent::MTE2_V>(LoadId(s.buf, c));
                FinishStatLoads(k, statsGroup, true);
            }
            ReleaseChunk(s.buf, c, !dyFirst && !xEarly_, true);  // the buffer's last sub-group's rows applied, stored
            LoadRows(k, s, c, !dyFirst, reduce_ && !xAhead);
            AscendC::SetFlag<HardEvent::MTE2_V>(LoadId(s.buf, c));
        }
    }

    // XEarly: the next sub-group's x rows into the buffer once this one's reduce has read all of x's (V_MTE2 set
    // by Reduce), before its combine and apply; its dy rows follow its stores (Load).
    __aicore__ inline void LoadX(KernelState<T> &k, const SubGroup &s)
    {
        WaitXReads(s.buf);
        for (uint32_t c = 0; c < chunks_; ++c) {
            LoadRows(k, s, c, false, true);
        }
        xAhead_ = true;
    }
    // XEarly: the reduce's reads of x's rows (its V_MTE2 events, one a chunk) before anything else is loaded there.
    __aicore__ inline void WaitXReads(uint32_t buf)
    {
        for (uint32_t c = 0; xPending_ && c < chunks_; ++c) {
            AscendC::WaitFlag<HardEvent::V_MTE2>(ReleaseId(buf, c));
        }
        xPending_ = false;
    }

    // Rows [r0, r1) of chunk c (all of it by default).
    __aicore__ inline void LoadRows(KernelState<T> &k, const SubGroup &s, uint32_t c, bool dy, bool x,
                                    uint64_t r0 = ~0ull, uint64_t r1 = 0)
    {
        const int64_t shift = Shift(k, s, c);
        const uint64_t lo = r0 == ~0ull ? ChunkBegin(k.t, chunks_, c) : r0;
        const uint64_t hi = r0 == ~0ull ? ChunkBegin(k.t, chunks_, c + 1) : r1;
        for (uint64_t n = lo; n < hi; ++n) {
            const uint64_t at = uint64_t(int64_t(n * s.len) + shift);
            if (dy) {
                LoadRow(k, b_.dy[at], k.dy, s, n);
            }
            if (x) {
                LoadRow(k, b_.x[at], k.x, s, n);
            }
        }
    }

    // grad_input goes to x's rows, which the apply has read before (16-bit types with x loaded; float32
    // in training with grad_input), so the stores read x and dy's rows are free for the next loads once
    // the apply has read them (V alone).
    __aicore__ inline bool OutIsX() const { return outX_; }
    __aicore__ inline const LocalTensor<T> &Out() const { return outX_ ? b_.x : b_.dy; }

    // V: x - mean and the row sums, chunk by chunk as the rows land.
    __aicore__ inline void Reduce(KernelState<T> &k, const SubGroup &s)
    {
        if (!reduce_) {
            return;
        }
        b_.Use(s.buf);
        Broadcast(k, b_, SLAB_MEAN, k.ub.v.mean, s);  // invstd is applied per channel (Coefs), never per element
#if BNB_SOC_HAS_GATHER
        if (BlockCoefs(k, s)) {
            CoefWeights(k, b_, s);  // while the first rows land (the last sub-group's combine has read them before)
        }
#endif
        for (uint32_t c = 0; c < chunks_; ++c) {
            const uint64_t mid = HalfRows(k, c);
            b_.shift = Shift(k, s, c);
            if (mid > 0) {  // the last chunk's first half as soon as it lands (LoadRing)
                AscendC::WaitFlag<HardEvent::MTE2_V>(int32_t(slots_));
                ReduceRows(k, b_, ChunkBegin(k.t, chunks_, c), mid, s.len);
                AscendC::WaitFlag<HardEvent::MTE2_V>(LoadIdOf(s, c));
                ReduceRows(k, b_, mid, ChunkBegin(k.t, chunks_, c + 1), s.len);
                continue;
            }
            AscendC::WaitFlag<HardEvent::MTE2_V>(LoadIdOf(s, c));
            if constexpr (!IsSame<T, float>::value) {
                if (Whole(k)) {
                    ReduceWholeRows(k, b_, ChunkBegin(k.t, chunks_, c), ChunkBegin(k.t, chunks_, c + 1), s.len);
                    continue;
                }
            }
            ReduceRows(k, b_, ChunkBegin(k.t, chunks_, c), ChunkBegin(k.t, chunks_, c + 1), s.len);
            if (xEarly_) {
                AscendC::SetFlag<HardEvent::V_MTE2>(ReleaseIdOf(s, c));  // x's rows are read (LoadX)
                xPending_ = true;
            }
        }
        b_.shift = 0;
        const bool pairs = PairTreesOn(k, s) && k.t.spAccRows > 1;
        const bool phased = phaseSums_ && PhaseJoined(k);
        const uint32_t dyxAt = LanesFolded(k, s) || phased ? s.len : (pairs ? PairDistance(k, s) : 0);
        FoldSums(k, b_, s.len, dyxAt);
    }

    // The sub-group's totals and coefficients, then grad_input chunk by chunk, each chunk's stores
    // overlapping the next chunk's compute, and the chunk released for the buffer's next loads.
    // `last`: the core's last sub-group, whose apply nothing follows on the vector unit.
    __aicore__ inline void Finish(KernelState<T> &k, const SubGroup &s, bool last)
    {
        b_.Use(s.buf);
        // The slab of a goes to V between the per-channel ReduceSums and the scalar hand-over of their
        // results (SumsToLanes), so V broadcasts it while the scalar unit moves the sums, not after.
        const bool handOver = reduce_ && !SegmentedSums(k) && !ReducedLanes(k);
        const bool scaled = Whole(k) && want_ && handOver;
        const bool slabs = SlabsLast(k, last);
        const bool spanCoefs = handOver && SpanCoefs(k, slabs);  // k and b to their slabs in the hand-over
        bool firstCast = false;  // CastFirstDy
        if (want_ && !handOver) {
            Broadcast(k, b_, SLAB_A, k.ub.v.coefA, s);
#if BNB_SOC_HAS_GATHER
            if (k.t.training && ScaledSpread(k, b_, s)) {
                WeightBlocks(k, b_, s);
            }
#endif
        }
        if (reduce_) {
            BNB_PERF_COMBINE_BEGIN();
            Totals(k, s);
            if (handOver) {
                BNB_PERF_COMBINE_END();  // the broadcast of a (or dy * a) is not the combine's
                if (ScalarApplyOn(k) && !slabs) {
                    WithSpanValues<true>(k, s, b_.dy.template ReinterpretCast<float>(), k.ub.v.coefA, 0,
                                         uint32_t(k.t.outer));  // a is known
                } else if (want_ && !(slabs && AheadA(k))) {
                    Broadcast(k, b_, SLAB_A, k.ub.v.coefA, s);
                }
                firstCast = CastFirstDy(k, s);
                if (scaled) {
                    // spWhole: dy * a over all rows while the scalar unit takes the sums (a is known)
                    AscendC::Muls(b_.slab[SLAB_DY_F], b_.slab[SLAB_DY_F], b_.value[SLAB_A],
                                  Narrow<int32_t>(uint64_t(k.t.outer) * s.len, "Muls count"));
                }
                BNB_PERF_COMBINE_BEGIN();
                SumsToLanes(k, s, spanCoefs);
            }
        } else if (want_) {
            for (uint32_t c = 0; c < chunks_; ++c) {
                AscendC::WaitFlag<HardEvent::MTE2_V>(LoadIdOf(s, c));
            }
        }
        Coefs(k, s, slabs && !spanCoefs);
        if (reduce_) {
            BNB_PERF_COMBINE_END();
        }
        if (loads_ && slots_ == 0) {
            relSet_[s.buf] = k.t.spBuffers > SP_MAX_BUFFERS ? releases_++ % 2 : 0u;  // ReleaseId
            // Another buffer's release on the same ids not yet waited for (no next loads into it: the group's
            // last sub-groups) is waited for first, so no id is set twice before its wait (MTE2 has no more
            // loads of the group to go on with).
            for (uint32_t b = 0; b < SP_WHOLE_BUFFERS; ++b) {
                for (uint32_t c = 0; b != s.buf && relSet_[b] == relSet_[s.buf] && pending_[b] && c < chunks_; ++c) {
                    ReleaseChunk(b, c);
                }
            }
        }
        if (syncGroup_ >= 0) {
            SyncBeforeLastApply(k, syncGroup_);
        }
        // 16-bit types into x: a chunk's dy rows are free for the next loads once cast (ApplyRows)
        const bool dyFreeEarly = loads_ && outX_ && !IsSame<T, float>::value;
        // ScalarApplyOn: x = (x - mean) * k + b over all rows at once (the fewest instructions), then a chunk's
        // dy * a added before its stores; the core's last sub-group from slabs (SlabsLast), its stores, which
        // nothing else overlaps, after each instruction's rows
        const bool scalarApply = ScalarApplyOn(k);
        if (scalarApply && !last) {  // (KeepX: channel by channel in the hand-over, ShiftChannel)
            ScaleShiftX(k, s, 0, uint32_t(k.t.outer));
        }
        for (uint32_t c = 0; c < chunks_; ++c) {
            b_.shift = Shift(k, s, c);
            if constexpr (!IsSame<T, float>::value) {
                if (Whole(k)) {
                    ApplyWholeRows(k, b_, Out(), ChunkBegin(k.t, chunks_, c), ChunkBegin(k.t, chunks_, c + 1), s.len,
                                   want_, reduce_, scaled, dyFreeEarly ? ReleaseIdOf(s, c) : -1);
                }
            }
            // the ring (spSpare): a chunk's rows go to MTE3 an instruction's rows (spSlabRows) at a time, each
            // as soon as applied, so after the launch's last instruction only its own rows' stores are left
            const uint64_t c0 = ChunkBegin(k.t, chunks_, c), c1 = ChunkBegin(k.t, chunks_, c + 1);
            // (XEarly: the same, so the dy rows that hold grad_input are released, and the next sub-group's first
            // dy rows loaded, an instruction's rows sooner; SlabsLast: the core's last stores begin an
            // instruction's rows after its coefficients)
            const uint64_t step =
                (slots_ > 0 && !Whole(k)) || xEarly_ || slabs ? uint64_t(ApplyStep(k, b_)) : c1 - c0;
            for (uint64_t r0 = c0; r0 < c1; r0 += step) {
                const uint64_t r1 = Min(r0 + step, c1);
                if (slabs) {
                    SlabsInScalarOrder(k, r0, r1, s.len);
                } else if (scalarApply) {
                    const LocalTensor<float> x = b_.x[r0 * s.len].template ReinterpretCast<float>();
                    AscendC::Add(x, x, b_.dy[r0 * s.len].template ReinterpretCast<float>(),
                                 Narrow<int32_t>((r1 - r0) * s.len, "Add count"));
                } else if (b_.xcOrder) {
                    if constexpr (!IsSame<T, float>::value) {  // XcOrder: 16-bit types only
                        ApplyXcRows(k, r0, r1, s.len, dyFreeEarly && r1 == c1 ? ReleaseIdOf(s, c) : -1);
                    }
                } else if (!Whole(k)) {
                    ApplyRows(k, b_, outX_, r0, r1, s.len, want_, dyFreeEarly && r1 == c1 ? ReleaseIdOf(s, c) : -1,
                              firstCast && c == 0 && r0 == c0);
                }
                AscendC::SetFlag<HardEvent::V_MTE3>(ReleaseIdOf(s, c));
                AscendC::WaitFlag<HardEvent::V_MTE3>(ReleaseIdOf(s, c));
                for (uint64_t n = r0; n < r1; ++n) {
                    StoreRow(k, k.gi, Out()[uint64_t(int64_t(n * s.len) + b_.shift)], s, n);
                }
            }
            if (loads_) {
                if (!dyFreeEarly && !xEarly_) {
                    AscendC::SetFlag<HardEvent::V_MTE2>(ReleaseIdOf(s, c));  // the next loads into this chunk wait for
                }
                AscendC::SetFlag<HardEvent::MTE3_MTE2>(ReleaseIdOf(s, c));  // its compute and its stores
                if (slots_ > 0) {
                    pendV_[SlotOf(s, c)] = pendM_[SlotOf(s, c)] = true;
                }
            }
        }
        b_.shift = 0;
#if BNB_SOC_HAS_GATHER
        if (LanesLater(k, s)) {
            LaneSums(k, s);
        }
#endif
        if (loads_) {
            pending_[s.buf] = slots_ == 0;  // the ring's slots: pendV_ / pendM_
        } else {
            // Nothing loaded (all outputs masked): the next zeros wait for these stores.
            AscendC::SetFlag<HardEvent::MTE3_V>(0);
            AscendC::WaitFlag<HardEvent::MTE3_V>(0);
        }
    }

    // ColumnApply with the scalar hand-over of the sums: the first apply instruction's dy rows cast while the
    // scalar unit takes the sums (they do not depend on them), so the vector unit has that to do meanwhile.
    __aicore__ inline bool CastFirstDy(const KernelState<T> &k, const SubGroup &s)
    {
        if constexpr (IsSame<T, float>::value) {
            (void)k, (void)s;
            return false;  // (ColumnApply: 16-bit types only)
        } else {
            if (!b_.columns || !want_) {
                return false;
            }
            const uint64_t rows = Min(uint64_t(ApplyStep(k, b_)), ChunkBegin(k.t, chunks_, 1));
            AscendC::Cast(b_.slab[SLAB_DY_F], b_.dy[uint64_t(Shift(k, s, 0))], AscendC::RoundMode::CAST_NONE,
                          uint32_t(rows * s.len));
            return true;
        }
    }

    // Tiling spWhole (16-bit types only).
    __aicore__ inline bool Whole(const KernelState<T> &k) const
    {
        return !IsSame<T, float>::value && k.t.spWhole == SP_WHOLE_ALL;
    }
    // Buffers::lanes, a full sub-group (its slots of the two sums adjacent) and accumulator rows to fold: the
    // last fold of the dy * xhat sums goes to the dy sums' row 1 (FoldSums), so the sums of both are runs one
    // runBlocks apart and LanePartials takes them in one set of calls (the same Adds).
    __aicore__ inline bool LanesFolded(const KernelState<T> &k, const SubGroup &s) const
    {
        return b_.lanes && s.cnt == k.t.spChannels && k.t.spAccRows > 1;
    }
    // Tiling spLaneSums SP_LANES_REDUCE: the lane partials summed by ReduceRepeat straight into the lanes.
    __aicore__ inline bool ReducedLanes(const KernelState<T> &k) const
    {
#if BNB_SOC_HAS_REDUCE_REPEAT
        return k.t.spLaneSums == SP_LANES_REDUCE;
#else
        (void)k;
        return false;
#endif
    }

    __aicore__ inline bool SegmentedSums(const KernelState<T> &k) const
    {
#if BNB_SOC_HAS_SEG_SUM
        return k.t.spSegSum != 0;
#else
        (void)k;
        return false;
#endif
    }

#if BNB_SOC_HAS_GATHER
    // Buffers::lanes: each channel's 8 lane partials of a sum (a block per channel and sum in the slot buffer,
    // LanePartials) summed by ReduceDataBlock straight into the group's lanes, a result per block: its tree
    // of adjacent pairs ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) is ReduceRepeat's over those lanes.
    // A repeat is 8 channels (whole runs: cnt is a multiple of them); a sub-group of one repeat takes both
    // sums in one call, [totDy | totDyx] vecElems apart and the dy * xhat slots spChannels blocks on.
    __aicore__ inline void LaneSums(KernelState<T> &k, const SubGroup &s)
    {
        const int32_t mask = int32_t(SLOT_FLOATS * SLOT_FLOATS);
        const int32_t reps = Narrow<int32_t>(s.cnt / SLOT_FLOATS, "repeatTime");
        if (reps == 1 && k.t.vecElems % SLOT_FLOATS == 0) {
            AscendC::ReduceDataBlock<AscendC::ReduceType::SUM, float, float>(
                k.ub.v.totPair[s.lane0], b_.slotDy, mask, 2, int32_t(k.t.vecElems / SLOT_FLOATS), 1,
                int32_t(k.t.spChannels));
            return;
        }
        AscendC::ReduceDataBlock<AscendC::ReduceType::SUM, float, float>(k.ub.v.totDy[s.lane0], b_.slotDy, mask, reps,
                                                                          1, 1, int32_t(SLOT_FLOATS));
        AscendC::ReduceDataBlock<AscendC::ReduceType::SUM, float, float>(k.ub.v.totDyx[s.lane0], b_.slotDyx, mask,
                                                                          reps, 1, 1, int32_t(SLOT_FLOATS));
    }

    // Buffers::lanes with ColumnApply (16-bit types in training) and the room (Buffers::blockRoom), a full
    // sub-group whose lane partials of both sums are one set of slots (LanesFolded), grad_input wanted: k and b
    // from the lane partials' blocks (CoefsFromBlocks), not from the group's lanes. The same bits as that way.
    __aicore__ inline bool BlockCoefs(const KernelState<T> &k, const SubGroup &s) const
    {
        return b_.blockRoom && want_ && k.t.training && LanesFolded(k, s);
    }
    // BlockCoefs: the lanes of the group's totals (LaneSums) once the sub-group is applied, where nothing reads
    // them before the group's end (not SyncBeforeLastApply's sub-group), so the apply does not wait for them.
    __aicore__ inline bool LanesLater(const KernelState<T> &k, const SubGroup &s) const
    {
        return BlockCoefs(k, s) && syncGroup_ < 0;
    }

    // Buffers::lanes: the offsets of LaneGather's Gathers (bytes), once per launch, by the scalar unit
    // while the first loads are in flight: bcastOff block j = channel j's lane, block spChannels + j lane
    // vecElems + j (the pair's second half), block 2 spChannels + j lane j; and the zero block of SpreadRuns.
    __aicore__ inline void LaneTables(KernelState<T> &k)
    {
        if (!b_.lanes || tables_) {
            return;
        }
        tables_ = true;
        const uint32_t sc = k.t.spChannels, f = uint32_t(sizeof(float));
        for (uint32_t i = 0; i < sc * SLOT_FLOATS; ++i) {
            b_.bcastOff.SetValue(i, i / SLOT_FLOATS * f);
            b_.bcastOff.SetValue(sc * SLOT_FLOATS + i, (k.t.vecElems + i / SLOT_FLOATS) * f);
            b_.bcastOff.SetValue(2 * sc * SLOT_FLOATS + i, i / SLOT_FLOATS * f);
        }
        SetWaitFlag<HardEvent::S_V>();
        AscendC::Duplicate(b_.zero, 0.0f, int32_t(SLOT_FLOATS));
    }
#endif

    // Per channel: ReduceSum of the two row-sum slabs, then (S, SumsToLanes) into the group's lanes. Packed: the
    // ReduceSum of the body, the shared blocks' elements added by the scalar unit (head, body, tail:
    // a fixed order).
    __aicore__ inline void Totals(KernelState<T> &k, const SubGroup &s)
    {
        const uint32_t rs = k.t.spRowStride;
#if BNB_SOC_HAS_SEG_SUM
        if (SegmentedSums(k)) {
            SegmentedTotals(k, s);
            return;
        }
#endif
        if (k.t.spLaneSums != SP_LANES_NONE) {
            // a block of lane partials per channel in the slots, then its lanes summed
            const LaneRun u = LaneRunOf(k.t);
            const uint32_t slabBlocks = b_.slabElems / SLOT_FLOATS;
            if (LanesFolded(k, s)) {
                // the dy * xhat sums right after the dy sums' row (Reduce), their slots after the dy sums'
                // (cnt == spChannels): both as runs of one call, a repeat per run
                LanePartials(b_.slotDy, b_.slab[SLAB_SUM_DY], u, 2 * s.cnt);
            } else if (s.cnt == u.qf && slabBlocks <= MAX_REPEAT_STRIDE && k.t.spChannels <= MAX_REPEAT_STRIDE) {
                LanePartials(b_.slotDy, b_.sumPair, u, s.cnt, slabBlocks, k.t.spChannels);
            } else {
                LanePartials(b_.slotDy, b_.slab[SLAB_SUM_DY], u, s.cnt);
                LanePartials(b_.slotDyx, b_.slab[SLAB_SUM_DYX], u, s.cnt);
            }
#if BNB_SOC_HAS_GATHER
            if (b_.lanes) {
                if (!LanesLater(k, s)) {
                    LaneSums(k, s);
                }
                return;
            }
#endif
#if BNB_SOC_HAS_REDUCE_REPEAT
            if (ReducedLanes(k)) {
                for (uint32_t j = 0; j < s.cnt; j += SP_SEG_MAX_REPEAT) {
                    const int32_t n = int32_t(Min(SP_SEG_MAX_REPEAT, s.cnt - j));
                    AscendC::ReduceRepeat<AscendC::ReduceType::SUM, float, float>(
                        k.ub.v.totDy[s.lane0 + j], b_.slotDy[j * SLOT_FLOATS], int32_t(SLOT_FLOATS), n, 1, 1, 1);
                    AscendC::ReduceRepeat<AscendC::ReduceType::SUM, float, float>(
                        k.ub.v.totDyx[s.lane0 + j], b_.slotDyx[j * SLOT_FLOATS], int32_t(SLOT_FLOATS), n, 1, 1, 1);
                }
                return;
            }
#endif
            AscendC::SetFlag<HardEvent::V_S>(1);  // waited for in SumsToLanes
            return;
        }
        if (PairTreesOn(k, s)) {
            PairTrees(k, s);  // the scalar unit reads each tree's lanes where it left them (SumsToLanes)
            return;
        }
#if BNB_SOC_HAS_BLOCK_REDUCE_SUM
        if (phaseSums_) {
            PhaseSums(k, s);
            AscendC::SetFlag<HardEvent::V_S>(1);  // waited for in SumsToLanes
            return;
        }
#endif
        if (!HasFloatReduceSum(k.t)) {  // the slots BlockTreeSum adds onto
            AscendC::Duplicate(b_.slotDy, 0.0f, s.cnt * SLOT_FLOATS);
            AscendC::Duplicate(b_.slotDyx, 0.0f, s.cnt * SLOT_FLOATS);
        }
        for (uint32_t j = 0; j < s.cnt; ++j) {
            uint32_t from = j * rs, count = uint32_t(k.t.inner);
            if (k.t.spQuantum > 0) {
                const PackedSpan p = SpanOf(k.t, j);
                from = p.bodyLo;
                count = p.bodyHi - p.bodyLo;
            }
            if (count == 0) {
                continue;
            }
#if BNB_SOC_HAS_FLOAT_REDUCE_SUM
            if (HasFloatReduceSum(k.t)) {
                AscendC::ReduceSum(b_.slotDy[j * SLOT_FLOATS], b_.slab[SLAB_SUM_DY][from], b_.slab[SLAB_PROD],
                                   Narrow<int32_t>(count, "ReduceSum count"));
                AscendC::ReduceSum(b_.slotDyx[j * SLOT_FLOATS], b_.slab[SLAB_SUM_DYX][from], b_.slab[SLAB_PROD],
                                   Narrow<int32_t>(count, "ReduceSum count"));
                continue;
            }
#endif
            // no float ReduceSum: lane partials per channel (the sums' slabs are not read past here but
            // for the packed head / tail elements, outside the body the tree folds)
            BlockTreeSum(b_.slotDy[j * SLOT_FLOATS], b_.slab[SLAB_SUM_DY][from], count);
            BlockTreeSum(b_.slotDyx[j * SLOT_FLOATS], b_.slab[SLAB_SUM_DYX][from], count);
        }
        AscendC::SetFlag<HardEvent::V_S>(1);  // waited for in SumsToLanes (id 1: Broadcast may take id 0 between)
    }

    // No float ReduceSum, sums not by lanes (PairTreesOn): the sub-group's sums by BlockTreeLevels, the
    // dy * xhat sums PairDistance floats after the dy sums (FoldSums' last fold leaves them there, in the dy
    // sums' slab, where the sums have rows, spAccRows > 1; else the pair buffer's second half). Where the
    // channels' bodies lie in `phases` equally spaced runs (Runs), with the dy * xhat sums right after the dy
    // sums' runs of each phase, all sums of a phase are runs of one tree (a repeat per sum), else each
    // channel's two sums are.
    struct TreeRuns {
        uint32_t phases = 0, stride = 0, pair = 0;  // phases 0: no such layout
    };
    __aicore__ inline TreeRuns Runs(const KernelState<T> &k, const SubGroup &s) const
    {
        TreeRuns r;
        if (k.t.spQuantum == 0) {
            r.phases = 1;
            r.stride = k.t.spRowStride;
        } else if (s.cnt == 2) {  // two packed channels: one stride between their bodies if they are as long
            const PackedSpan p0 = SpanOf(k.t, 0), p1 = SpanOf(k.t, 1);
            if (p1.bodyHi - p1.bodyLo == p0.bodyHi - p0.bodyLo) {
                r.phases = 1;
                r.stride = p1.bodyLo - p0.bodyLo;
            }
        } else {  // packed: channels `phases` apart have their bodies alike, phases * inner floats apart
            uint32_t ph = SLOT_FLOATS;
            while (ph > 1 && (ph / 2) * uint32_t(k.t.inner) % SLOT_FLOATS == 0) {
                ph /= 2;
            }
            if (s.cnt % ph == 0) {
                r.phases = ph;
                r.stride = ph * uint32_t(k.t.inner);
            }
        }
        r.pair = r.phases > 0 ? r.stride * (s.cnt / r.phases) : 0;
        const bool fits = r.phases > 0 && r.stride % SLOT_FLOATS == 0 && r.stride / SLOT_FLOATS <= MAX_REPEAT_STRIDE &&
                          2 * s.cnt <= MAX_REPEAT_STRIDE && r.phases <= MAX_REPEAT_STRIDE &&
                          (k.t.spAccRows > 1 ? r.pair >= s.len && r.pair + s.len <= b_.accElems
                                             : r.pair == b_.accElems);
        return fits ? r : TreeRuns();
    }
    __aicore__ inline uint32_t PairDistance(const KernelState<T> &k, const SubGroup &s) const
    {
        const TreeRuns r = Runs(k, s);
        if (r.phases > 0) {
            return r.pair;
        }
        return k.t.spAccRows > 1 ? s.len : b_.accElems;
    }
    // Packed slices where the SoC has float ReduceSum and ReduceDataBlock (ascend310p's 14x14 slices): channels
    // PhaseCount apart have their bodies alike, so the sums of a phase (its channels' dy sums, then their dy *
    // xhat sums, folded into the dy sums' row 1) are runs equally spaced; each body is folded onto its first
    // repeat by Adds (a repeat per sum of a phase), that repeat's blocks summed by ReduceDataBlock into a block
    // per sum, and those blocks' lanes by one more (PhaseSums): a few instructions a sub-group where a ReduceSum
    // per channel and sum was, where that is fewer instructions. From the tiling alone, so every sub-group of a
    // launch sums so (the additions' order depends on the shape only, never the cores).
    __aicore__ inline uint32_t PhaseCount(const KernelState<T> &k) const
    {
        uint32_t ph = SLOT_FLOATS;
        while (ph > 1 && (ph / 2) * uint32_t(k.t.inner) % SLOT_FLOATS == 0) {
            ph /= 2;
        }
        return ph;
    }
    __aicore__ inline bool PhaseSumsOn(const KernelState<T> &k) const
    {
#if BNB_SOC_HAS_BLOCK_REDUCE_SUM
        constexpr uint32_t LANES = uint32_t(AscendC::ONE_REPEAT_BYTE_SIZE) / sizeof(float);
        const uint32_t ph = PhaseCount(k), q = k.t.spQuantum;
        if (!HasFloatReduceSum(k.t) || q == 0 || q % ph != 0 || k.t.spLaneSums != SP_LANES_NONE || SegmentedSums(k) ||
            ph * uint32_t(k.t.inner) / SLOT_FLOATS > MAX_REPEAT_STRIDE || k.t.spRowStride < 2 * SLOT_FLOATS) {
            return false;
        }
        // fewer instructions than the ReduceSums of a sub-group of one run of channels (the fewest; its Adds and
        // ReduceDataBlocks per phase, then the lanes' calls), each body at least a repeat: from the shape and the
        // SoC, never the sub-group's channels, which depend on the cores
        bool bodies = true;
        const uint32_t sums = 2 * q;
        uint32_t instrs = (sums >= SLOT_FLOATS ? 1u : 0u) + (sums % SLOT_FLOATS != 0 ? 1u : 0u);
        for (uint32_t j = 0; j < ph; ++j) {
            uint32_t from = 0, count = 0;
            Body(k, j, from, count);
            bodies = bodies && count >= LANES;
            instrs += uint32_t(CeilDiv(count, LANES));
        }
        return bodies && instrs < sums;
#else
        (void)k;
        return false;
#endif
    }
    // PhaseSumsOn: the dy * xhat sums a row after the dy sums (FoldSums' last fold), so a phase's sums of both
    // are runs of one call; one accumulator row: in their own slab, a call each.
    __aicore__ inline bool PhaseJoined(const KernelState<T> &k) const { return k.t.spAccRows > 1; }
    // PhaseSumsOn: where channel j's dy sum is in the slots (its dy * xhat sum: the channels of its phase later).
    __aicore__ inline uint32_t PhaseSumAt(const SubGroup &s, uint32_t j) const
    {
        const uint32_t per = s.cnt / phases_;
        return (j % phases_) * 2 * per + j / phases_;
    }
#if BNB_SOC_HAS_BLOCK_REDUCE_SUM
    // PhaseSumsOn: a phase's sums are runs PhaseCount slices apart from its first body (its channels' dy sums,
    // then their dy * xhat sums, PhaseJoined): the repeats past a body's first added onto it (the last one masked
    // to the body's end), then each first repeat's blocks summed (ReduceDataBlock, in the product's slab, free
    // here: a block per sum, phase by phase), then each block's lanes into the slots (whole repeats of blocks,
    // then the rest). The same instructions on every sum, however the channels fall into calls.
    __aicore__ inline void PhaseSums(KernelState<T> &k, const SubGroup &s)
    {
        constexpr uint32_t LANES = uint32_t(AscendC::ONE_REPEAT_BYTE_SIZE) / sizeof(float);
        const uint32_t phases = phases_, per = s.cnt / phases, rs = phases * uint32_t(k.t.inner) / SLOT_FLOATS;
        const bool joined = PhaseJoined(k);
        const uint32_t runs = joined ? 2 * per : per;
        const uint8_t stride = Narrow<uint8_t>(rs, "repeat stride");
        const AscendC::BinaryRepeatParams fold(1, 1, 1, stride, stride, stride);
        const LocalTensor<float> &blocks = b_.slab[SLAB_PROD];
        for (uint32_t ph = 0; ph < phases; ++ph) {
            uint32_t from = 0, count = 0;
            Body(k, ph, from, count);
            for (uint32_t set = 0; set < (joined ? 1u : 2u); ++set) {
                for (uint32_t r0 = 0; r0 < runs; r0 += SP_SEG_MAX_REPEAT) {
                    const uint32_t n = uint32_t(Min(SP_SEG_MAX_REPEAT, runs - r0));
                    const LocalTensor<float> first = b_.sumPair[from + set * b_.accElems + r0 * rs * SLOT_FLOATS];
                    for (uint32_t o = LANES; o < count; o += LANES) {
                        uint64_t mask[2] = {MaskBits(0, Min(LANES, count - o)), 0};
                        AscendC::Add(first, first, first[o], mask, uint8_t(n), fold);
                    }
                    const uint32_t at = ph * 2 * per + set * per + r0;
                    AscendC::ReduceDataBlock<AscendC::ReduceType::SUM, float, float>(
                        blocks[at * SLOT_FLOATS], first, int32_t(LANES), int32_t(n), 1, 1, int32_t(rs));
                }
            }
        }
        const uint32_t sums = 2 * s.cnt, whole = sums / SLOT_FLOATS, rest = sums % SLOT_FLOATS;
        if (whole > 0) {
            AscendC::ReduceDataBlock<AscendC::ReduceType::SUM, float, float>(
                b_.slotDy, blocks, int32_t(LANES), int32_t(whole), 1, 1, int32_t(SLOT_FLOATS));
        }
        if (rest > 0) {
            AscendC::ReduceDataBlock<AscendC::ReduceType::SUM, float, float>(
                b_.slotDy[whole * SLOT_FLOATS], blocks[whole * LANES], int32_t(rest * SLOT_FLOATS), 1, 1, 1,
                int32_t(SLOT_FLOATS));
        }
    }
#endif
    __aicore__ inline bool PairTreesOn(const KernelState<T> &k, const SubGroup &s) const
    {
        const uint32_t d = PairDistance(k, s);
        return !HasFloatReduceSum(k.t) && k.t.spLaneSums == SP_LANES_NONE && !SegmentedSums(k) &&
               d % SLOT_FLOATS == 0 && d / SLOT_FLOATS <= MAX_REPEAT_STRIDE && k.t.spChannels <= MAX_REPEAT_STRIDE;
    }
    // The folded dy * xhat sums of the sub-group.
    __aicore__ inline LocalTensor<float> DyxSums(const KernelState<T> &k, const SubGroup &s) const
    {
        if (phaseSums_ && PhaseJoined(k)) {
            return b_.sumPair[s.len];  // the dy sums' row 1 (FoldSums)
        }
        return PairTreesOn(k, s) ? b_.sumPair[PairDistance(k, s)] : b_.slab[SLAB_SUM_DYX];
    }

    // Channel j's body in the sums' slab: its first float and its count.
    __aicore__ inline void Body(const KernelState<T> &k, uint32_t j, uint32_t &from, uint32_t &count) const
    {
        from = j * k.t.spRowStride;
        count = uint32_t(k.t.inner);
        if (k.t.spQuantum > 0) {
            const PackedSpan p = SpanOf(k.t, j);
            from = p.bodyLo;
            count = p.bodyHi - p.bodyLo;
        }
    }

    // Channel j's lanes are left at its body's start (Body) in the dy sums, PairDistance floats on in the
    // dy * xhat sums (TreeLanes of its body's floats), where SumsToLanes reads them.
    __aicore__ inline void PairTrees(KernelState<T> &k, const SubGroup &s)
    {
        const uint32_t d = PairDistance(k, s);
        const TreeRuns r = Runs(k, s);
        if (r.phases > 0) {
            const uint32_t per = s.cnt / r.phases;  // channels of a phase
            for (uint32_t ph = 0; ph < r.phases; ++ph) {
                uint32_t from = 0, count = 0;
                Body(k, ph, from, count);
                if (count > 0) {  // channel ph + i * phases: run i (dy), run per + i (dy * xhat)
                    BlockTreeLevels(b_.sumPair[from], r.stride, 2 * per, count);
                }
            }
        } else {
            for (uint32_t j = 0; j < s.cnt; ++j) {
                uint32_t from = 0, count = 0;
                Body(k, j, from, count);
                if (count > 0) {
                    BlockTreeLevels(b_.sumPair[from], d, 2, count);  // the channel's two sums, d apart: a repeat each
                }
            }
        }
        AscendC::SetFlag<HardEvent::V_S>(1);  // waited for in SumsToLanes
    }

    // After Totals' ReduceSums (not spSegSum): their results (S, after V_S) into the group's lanes, and
    // (training with grad_input) the sub-group's coefficients from them (ScalarCoefs); `spanCoefs`: each
    // channel's k and b then to their slabs (SpanCoefsOfChannel).
    __aicore__ inline void SumsToLanes(KernelState<T> &k, const SubGroup &s, bool spanCoefs)
    {
        AscendC::WaitFlag<HardEvent::V_S>(1);
        const bool lanes = !HasFloatReduceSum(k.t);  // BlockTreeSum's lane partials (Totals)
        const bool trees = PairTreesOn(k, s);
        const uint32_t d = trees ? PairDistance(k, s) : 0;
        for (uint32_t j = 0; j < s.cnt; ++j) {
            float dy = 0.0f, dyx = 0.0f;
            if (trees) {  // the lanes where PairTrees left them
                uint32_t from = 0, count = 0;
                Body(k, j, from, count);
                const uint32_t n = TreeLanes(count);
                if (k.t.spQuantum == 0) {
                    dy = TreeLaneSum(b_.sumPair, from, n);
                    dyx = TreeLaneSum(b_.sumPair, from + d, n);
                } else {
                    const PackedSpan p = SpanOf(k.t, j);
                    dy = PackedTreeSum(b_.slab[SLAB_SUM_DY], b_.sumPair[from], n, p);
                    dyx = PackedTreeSum(DyxSums(k, s), b_.sumPair[from + d], n, p);
                }
            } else if (k.t.spQuantum == 0) {
                dy = LaneSum(b_.slotDy, j * SLOT_FLOATS, lanes);
                dyx = LaneSum(b_.slotDyx, j * SLOT_FLOATS, lanes);
            } else if (k.t.spLaneSums != SP_LANES_NONE) {
                for (uint32_t l = 0; l < SLOT_FLOATS; ++l) {  // the lane partials in lane order
                    dy += b_.slotDy.GetValue(j * SLOT_FLOATS + l);
                    dyx += b_.slotDyx.GetValue(j * SLOT_FLOATS + l);
                }
            } else if (phaseSums_) {  // PhaseSums' slots
                const PackedSpan p = SpanOf(k.t, j);
                const uint32_t at = PhaseSumAt(s, j), per = s.cnt / phases_;
                dy = PackedSum(b_.slab[SLAB_SUM_DY], b_.slotDy[at], p, false);
                dyx = PackedSum(DyxSums(k, s), b_.slotDy[at + per], p, false);
            } else {
                const PackedSpan p = SpanOf(k.t, j);
                dy = PackedSum(b_.slab[SLAB_SUM_DY], b_.slotDy[j * SLOT_FLOATS], p, lanes);
                dyx = PackedSum(DyxSums(k, s), b_.slotDyx[j * SLOT_FLOATS], p, lanes);
            }
            k.ub.v.totDy.SetValue(s.lane0 + j, dy);
            k.ub.v.totDyx.SetValue(s.lane0 + j, dyx);
            if (ScalarCoefsOn(k)) {
                float kk = 0.0f, b = 0.0f;
                ScalarCoefs(k, s.lane0 + j, dy, dyx, kk, b);
                if (spanCoefs) {
                    SpanCoefsOfChannel(k, s, j, kk, b);
                }
            }
            if (b_.keepX) {
                ShiftChannel(k, s, j);
            }
        }
        AscendC::SetFlag<HardEvent::S_V>(0);
        AscendC::WaitFlag<HardEvent::S_V>(0);
    }

    // KeepX: channel j's x - mean times k plus b over all rows (ScaleShiftX's steps) as soon as the scalar unit
    // has formed its k and b (SumsToLanes), so the vector unit works through the hand-over of the channels after
    // it rather than waiting for all of them; not the combine's time.
    __aicore__ inline void ShiftChannel(KernelState<T> &k, const SubGroup &s, uint32_t j)
    {
        SetWaitFlag<HardEvent::S_V>();
        BNB_PERF_COMBINE_END();
        const uint32_t l = s.lane0 + j, rows = uint32_t(k.t.outer), rowBlocks = s.len / SLOT_FLOATS;
        WithSpanValue<true>(b_.slab[SLAB_X_F], k.ub.v.coefK.GetValue(l), SpanOf(k.t, j), rows, rowBlocks);
        WithSpanValue<false>(b_.slab[SLAB_X_F], k.ub.v.coefB.GetValue(l), SpanOf(k.t, j), rows, rowBlocks);
        BNB_PERF_COMBINE_BEGIN();
    }

    // Training with grad_input, sums handed over by the scalar unit: k and b formed by the scalar unit
    // (ScalarCoefs), which holds the sums already, so the vector unit neither forms them nor waits for the
    // scalar unit a second time before the broadcasts. Slices not packed (few channels per sub-group), or
    // packed without lane sums where the SoC fuses the multiply-adds (ascend310p's 14x14 slices: a few
    // channels a sub-group, whose packed sums the scalar unit finishes anyway; the lane sums' runs are many
    // channels, whose scalar steps would outlast Coefs' vector ones), or where the apply takes the values as
    // scalar operands (ScalarApplyOn). Decided from the shape and the SoC alone.
    __aicore__ inline bool ScalarCoefsOn(const KernelState<T> &k) const
    {
        const bool packedScalar = k.t.mulAdd && k.t.spLaneSums == SP_LANES_NONE;
        return want_ && k.t.training && !SegmentedSums(k) &&
               (k.t.spQuantum == 0 || packedScalar || ScalarApplyOn(k) || XcOrder(k));
    }

    // 16-bit types in training with grad_input in packed runs, no mul_add, sums not by ReduceRepeat (the host's
    // SinglePassXcOrder; ascend910's 14x14 and 7x7 slices): grad_input is (k * (x - mean) + b) + a * dy from the
    // reduce's x - mean, b without the mean folded in (ScalarCoefs), the product of the sums over dy's float copy.
    // From the shape and the SoC only, so the bits do not depend on KeepX.
    __aicore__ inline bool XcOrder(const KernelState<T> &k) const
    {
        return !IsSame<T, float>::value && !k.t.mulAdd && k.t.spQuantum > 1 && k.t.spLaneSums != SP_LANES_REDUCE &&
               want_ && reduce_ && k.t.training && slots_ == 0;
    }
    // XcOrder with x - mean's float copy over all rows (tiling spWhole SP_WHOLE_X): the apply casts x no more,
    // and k and b are scalar operands over all rows (ShiftChannel), not slabs broadcast in the combine.
    __aicore__ inline bool KeepX(const KernelState<T> &k) const { return XcOrder(k) && k.t.spWhole == SP_WHOLE_X; }
    // The per-channel k and b are scalar operands of the apply (ScaleShiftX, ShiftChannel): no slabs of them.
    __aicore__ inline bool ScalarKB(const KernelState<T> &k) const { return ScalarApplyOn(k) || KeepX(k); }

    // XcOrder (16-bit types; instantiated for them alone): grad_input of rows [r0, r1), spSlabRows rows an
    // instruction, as (k * (x - mean) + b) + a * dy cast into grad_input's rows: KeepX from the kept copy
    // (ShiftChannel made it k * (x - mean) + b, the sum goes over it and the rows' cast is one instruction), else
    // x - mean again (CenteredRow) times k's slab plus b's.
    // dyFree >= 0: that V_MTE2 event once the rows' dy is cast.
    __aicore__ inline void ApplyXcRows(const KernelState<T> &k, uint64_t r0, uint64_t r1, uint32_t len,
                                       int32_t dyFree)
    {
        for (uint64_t n = r0; n < r1; n += k.t.spSlabRows) {
            const uint32_t elems = uint32_t(Min(k.t.spSlabRows, r1 - n)) * len;
            const uint64_t off = n * len;
            const int32_t count = Narrow<int32_t>(elems, "vector count");
            const LocalTensor<float> xs = b_.keepX ? b_.slab[SLAB_X_F][off] : CenteredRow(k, b_, off, elems);
            if (!b_.keepX) {
                AscendC::Mul(xs, xs, b_.slab[SLAB_K], count);
                AscendC::Add(xs, xs, b_.slab[SLAB_B], count);
            }
            const LocalTensor<float> &dr = b_.slab[SLAB_DY_F];
            AscendC::Cast(dr, b_.dy[off], AscendC::RoundMode::CAST_NONE, elems);
            if (dyFree >= 0 && n + k.t.spSlabRows >= r1) {
                AscendC::SetFlag<HardEvent::V_MTE2>(dyFree);
            }
            AscendC::Mul(dr, dr, b_.slab[SLAB_A], count);
            if (b_.keepX) {
                AscendC::Add(xs, xs, dr, count);
            } else {
                AscendC::Add(dr, xs, dr, count);
                AscendC::Cast(Out()[off], dr, NarrowRound<T>(), elems);
            }
        }
        if (b_.keepX) {
            const uint64_t off = r0 * len;
            AscendC::Cast(Out()[off], b_.slab[SLAB_X_F][off], NarrowRound<T>(), uint32_t((r1 - r0) * len));
        }
    }

    // Float32 in training with grad_input in packed runs (no mul_add; lane sums by the scalar unit where the runs
    // are regular, SP_LANES_SCALAR, or no lane sums: a channel wider than a repeat takes a masked repeat per
    // piece of it) and rows one span of UB (no ring): the per-channel values are the scalar
    // operands of masked repeats over all the sub-group's rows (WithSpanValue), not slabs of a Duplicate per
    // channel and value: dy * a while the scalar unit takes the sums and forms k and b (ScalarCoefs), then x =
    // (x - mean) * k + b, and per chunk one Add of dy * a before its stores; per element the same operations
    // but the order of the last two additions (the sums of the launch are not changed). From the shape and
    // the SoC only.
    __aicore__ inline bool ScalarApplyOn(const KernelState<T> &k) const
    {
        return IsSame<T, float>::value && want_ && reduce_ && k.t.training && outX_ && !k.t.mulAdd &&
               k.t.spQuantum > 1 && k.t.spLaneSums != SP_LANES_REDUCE && !SegmentedSums(k) && slots_ == 0;
    }

    // ScalarApplyOn: `count` rows from row r0 of `rows` (dy or x of the sub-group) times (MUL) or plus each
    // channel's lane of vec.
    template <bool MUL>
    __aicore__ inline void WithSpanValues(const KernelState<T> &k, const SubGroup &s, const LocalTensor<float> &rows,
                                          const LocalTensor<float> &vec, uint32_t r0, uint32_t count)
    {
        const LocalTensor<float> f = rows[r0 * s.len];
        for (uint32_t j = 0; j < s.cnt; ++j) {
            WithSpanValue<MUL>(f, vec.GetValue(s.lane0 + j), SpanOf(k.t, j), count, s.len / SLOT_FLOATS);
        }
    }
    // ScalarApplyOn, the core's last sub-group (`last`): a masked repeat per row, channel and piece of a channel
    // (WithSpanValue) makes a chunk's instructions more than its stores, which nothing else overlaps at the end
    // (channels wider than a repeat: several pieces each; 7x7: eight channels' instructions a row); so a, k
    // and b go to slabs as without ScalarApplyOn, with the operations in the order of ScalarApplyOn's (the same
    // bits whichever sub-group is the last), and the stores follow each instruction's rows.
    __aicore__ inline bool SlabsLast(const KernelState<T> &k, bool last) const
    {
        return last && ScalarApplyOn(k);
    }
    // Tiling spLastRows: a's slab is its own (SinglePassPlan::aSlab), so the core's last sub-group (SlabsLast) has
    // it filled at the start of its group (Group), while V waits for the first loads, not after its last ones.
    __aicore__ inline bool AheadA(const KernelState<T> &k) const { return k.t.spLastRows > 0 && ScalarApplyOn(k); }
    // SlabsLast with lane sums (a masked Duplicate a channel over every row of a slab, DuplicateSpan): channel
    // j's k and b go to their slabs as soon as the scalar unit has formed them (SumsToLanes), so the vector
    // unit fills them through the hand-over of the channels after it, not after all of them (the same values).
    __aicore__ inline bool SpanCoefs(const KernelState<T> &k, bool slabs) const
    {
        return slabs && k.t.spLaneSums != SP_LANES_NONE;
    }
    __aicore__ inline void SpanCoefsOfChannel(KernelState<T> &k, const SubGroup &s, uint32_t j, float kk, float b)
    {
        SetWaitFlag<HardEvent::S_V>();  // the scalar unit's values before the vector unit's (next) slab writes
        BNB_PERF_COMBINE_END();  // the apply's slabs (ScalarApplyOn's other sub-groups take no slabs)
        const uint32_t rowBlocks = s.len / SLOT_FLOATS;
        DuplicateSpan(b_.slab[SLAB_K], kk, SpanOf(k.t, j), k.t.spSlabRows, rowBlocks);
        DuplicateSpan(b_.slab[SLAB_B], b, SpanOf(k.t, j), k.t.spSlabRows, rowBlocks);
        BNB_PERF_COMBINE_BEGIN();
    }
    // SlabsLast: rows [r0, r1) as (k * (x - mean) + b) + a * dy, a slab's rows (spSlabRows) an instruction.
    __aicore__ inline void SlabsInScalarOrder(const KernelState<T> &k, uint64_t r0, uint64_t r1, uint32_t len)
    {
        for (uint64_t n = r0; n < r1; n += k.t.spSlabRows) {
            const uint32_t elems = uint32_t(Min(k.t.spSlabRows, r1 - n)) * len;
            const LocalTensor<float> x = b_.x[n * len].template ReinterpretCast<float>();
            const LocalTensor<float> dy = b_.dy[n * len].template ReinterpretCast<float>();
            WithValue<true>(b_, dy, SLAB_A, elems);
            WithValue<true>(b_, x, SLAB_K, elems);
            WithValue<false>(b_, x, SLAB_B, elems);
            AscendC::Add(x, x, dy, Narrow<int32_t>(elems, "Add count"));
        }
    }
    // x = (x - mean) * k + b over `count` rows from r0.
    __aicore__ inline void ScaleShiftX(const KernelState<T> &k, const SubGroup &s, uint32_t r0, uint32_t count)
    {
        const LocalTensor<float> x = b_.x.template ReinterpretCast<float>();
        WithSpanValues<true>(k, s, x, k.ub.v.coefK, r0, count);
        WithSpanValues<false>(k, s, x, k.ub.v.coefB, r0, count);
    }

    // Lane l's k and b into coefK / coefB by the scalar unit, the products and sums of Coefs' vector
    // steps in their order (the sums are in its registers already: no vector step and no second wait
    // for the vector unit before Broadcast reads them).
    __aicore__ inline void ScalarCoefs(KernelState<T> &k, uint32_t l, float dy, float dyx, float &kOut, float &bOut)
    {
        ChannelVecs &v = k.ub.v;
        float b = v.weight.GetValue(l) * dy;
        const float kk = v.scaleK.GetValue(l) * dyx;
        if constexpr (!IsSame<T, float>::value) {
            // (spWhole applies k * invstd to x - mean itself: b as for float32)
#if BNB_SOC_HAS_MUL_ADD
            if (k.t.mulAdd && !Whole(k)) {
                b = kk * v.stage.GetValue(l) + b;  // MulAddDst(coefB, coefK, -mean)
            } else
#endif
            if (!Whole(k) && !XcOrder(k)) {
                const float km = kk * v.mean.GetValue(l);
                b = b - km;
            }
        }
        v.coefB.SetValue(l, b);
        v.coefK.SetValue(l, kk);
        kOut = kk;
        bOut = b;
    }

#if BNB_SOC_HAS_SEG_SUM
    // Tiling spSegSum (a slice of at most one float repeat): each sum of the sub-group's channels is one
    // ReduceRepeat, a repeat per channel (spRowStride apart) over its `inner` elements, written straight
    // into the group's lanes; no ReduceSum, no scalar hand-over. A channel's sum is the instruction's
    // binary tree over its slice, whatever the sub-group (at most SP_SEG_MAX_REPEAT channels a call).
    __aicore__ inline void SegmentedTotals(KernelState<T> &k, const SubGroup &s)
    {
        const int32_t mask = Narrow<int32_t>(k.t.inner, "ReduceRepeat mask");
        const int32_t repStride = Narrow<int32_t>(k.t.spRowStride * sizeof(float) / BLOCK_BYTES, "srcRepStride");
        if (ScalarValues(k, s)) {
            // The scalar reads of the previous sub-group's coefficients (Broadcast) before Coefs rewrites
            // them (S_V: the scalar unit is ahead, so the vector unit does not wait).
            AscendC::SetFlag<HardEvent::S_V>(0);
            AscendC::WaitFlag<HardEvent::S_V>(0);
        }
        for (uint32_t j = 0; j < s.cnt; j += SP_SEG_MAX_REPEAT) {
            const int32_t n = int32_t(Min(SP_SEG_MAX_REPEAT, s.cnt - j));
            const uint32_t lane = s.lane0 + j, from = j * k.t.spRowStride;
            AscendC::ReduceRepeat<AscendC::ReduceType::SUM, float, float>(
                k.ub.v.totDy[lane], b_.slab[SLAB_SUM_DY][from], mask, n, 1, 1, repStride);
            AscendC::ReduceRepeat<AscendC::ReduceType::SUM, float, float>(
                k.ub.v.totDyx[lane], b_.slab[SLAB_SUM_DYX][from], mask, n, 1, 1, repStride);
        }
    }
#endif

    // Training: b = -a * sum_dy / n, k = -a * sum(dy * xhat) / n (the two-pass
    // LoadCoefs; a = weight * invstd and -a / n are computed once per group; totDyx holds
    // sum(dy * (x - mean)) until the group ends), then the sub-group's slabs of
    // k * invstd (applied to x - mean) and b (over the sum slabs, whose sums
    // Totals has taken; that of a: Finish, before the combine).
    // `slabs`: SlabsLast, k and b as slabs though the scalar unit formed them.
    __aicore__ inline void Coefs(KernelState<T> &k, const SubGroup &s, bool slabs)
    {
        if (!want_ || !k.t.training) {
            return;
        }
        if (ScalarCoefsOn(k)) {
            // the scalar unit formed them in SumsToLanes (ScalarCoefs); ScalarApplyOn reads them as scalars
            if (!ScalarKB(k) || slabs) {
                Broadcast(k, b_, SLAB_K, k.ub.v.coefK, SLAB_B, k.ub.v.coefB, s);
            }
            return;
        }
#if BNB_SOC_HAS_GATHER
        if (ScaledSpread(k, b_, s)) {
            BroadcastScaledPair(k, b_, s);  // the products per element, no Mul over the vectors
            return;
        }
        if (BlockCoefs(k, s)) {
            CoefsFromBlocks(k, b_, s);  // no Mul over the vectors, no Gather
            return;
        }
        b_.CoefRows(b_.slab[SLAB_K], b_.slab[SLAB_B]);
#endif
        ChannelVecs &v = k.ub.v;
        // [coefB | coefK] = [-a / n | scaleK] * [totDy | totDyx] (Group), one instruction over the pairs
        AscendC::Mul(v.coefPair, v.weightPair, v.totPair, Narrow<int32_t>(2 * k.t.vecElems, "Mul count"));
        if constexpr (!IsSame<T, float>::value) {
            // 16-bit types apply k * xhat + b as (k * invstd) * x + (b - k * invstd * mean): per element
            // a cast of x, not the recomputed x - mean (an instruction fewer).
#if BNB_SOC_HAS_MUL_ADD
            if (k.t.mulAdd) {
                AscendC::MulAddDst(v.coefB, v.coefK, v.stage, Narrow<int32_t>(k.t.vecElems, "MulAddDst count"));
            } else
#endif
            {
                AscendC::Mul(v.stage, v.coefK, v.mean, Narrow<int32_t>(k.t.vecElems, "Mul count"));
                AscendC::Sub(v.coefB, v.coefB, v.stage, Narrow<int32_t>(k.t.vecElems, "Sub count"));
            }
        }
#if BNB_SOC_HAS_SEG_SUM
        if (BlockBroadcasts(k, s) && SegPairBrcb(k.t.vecElems)) {
            BroadcastCoefPair(k, b_, s);
            return;
        }
#endif
        if (!BlockBroadcasts(k, s) && !b_.lanes) {
            AscendC::SetFlag<HardEvent::V_S>(0);  // Broadcast reads the coefficients with the scalar unit
            AscendC::WaitFlag<HardEvent::V_S>(0);
        }
        Broadcast(k, b_, SLAB_K, v.coefK, SLAB_B, v.coefB, s);
    }

    // Chunk c of buffer buf's previous sub-group is free once its compute (V)
    // and stores (MTE3) are done: the next loads into chunk c overlap the apply
    // and stores of the chunks after it (a next sub-group of no more channels
    // puts chunk c's rows no later in UB than this one did). `v` / `mte3`:
    // which of the two waits (each once per chunk; the MTE3 wait of the last
    // chunk ends the buffer's release).
    __aicore__ inline void ReleaseChunk(uint32_t buf, uint32_t c, bool v = true, bool mte3 = true)
    {
        if (pending_[buf] && v) {
            AscendC::WaitFlag<HardEvent::V_MTE2>(ReleaseId(buf, c));
        }
        if (pending_[buf] && mte3) {
            AscendC::WaitFlag<HardEvent::MTE3_MTE2>(ReleaseId(buf, c));
        }
        if (mte3 && c + 1 == chunks_) {
            pending_[buf] = false;
        }
    }

    // All of the previous sub-groups' UB (the end of a group or of the launch).
    __aicore__ inline void Release()
    {
        for (uint32_t slot = 0; slot < slots_; ++slot) {
            ReleaseSlot(slot, true, true);
        }
        WaitXReads(0);
        for (uint32_t buf = 0; buf < SP_WHOLE_BUFFERS; ++buf) {
            for (uint32_t c = 0; pending_[buf] && c < chunks_; ++c) {
                ReleaseChunk(buf, c, !xEarly_, true);
            }
        }
    }

    Buffers<T> b_;
    bool tables_ = false;      // LaneTables has run
    bool lastGroup_ = false;   // Group: the core's last group
    int64_t syncGroup_ = -1;   // Finish: the cores meet before this sub-group's apply (SyncBeforeLastApply)
    bool synced_ = false;      // they have met (softSync)
    bool shareLoaded_ = false;  // LoadShare's copy is in flight (its MTE2_S event set)
    AscendC::TEventID shareEvent_ = 0;
    bool want_ = false, reduce_ = false, loads_ = false, outX_ = false;
    bool xEarly_ = false;  // KeepX with one buffer: a chunk's x rows released once reduced (V_MTE2 set by Reduce)
    bool xPending_ = false;  // XEarly: Reduce's V_MTE2 events not yet waited for (WaitXReads)
    bool xAhead_ = false;    // XEarly: the next sub-group's x rows are loaded (LoadX)
    uint32_t phases_ = 1;     // PhaseCount
    bool phaseSums_ = false;  // PhaseSumsOn
    bool pending_[SP_WHOLE_BUFFERS] = {};  // the most buffers of any tiling
    uint32_t lastCnt_[SP_WHOLE_BUFFERS] = {};  // channels of the last sub-group loaded into each buffer
    uint32_t chunks_ = 1;  // chunks per sub-group (their events are set together)
    uint32_t relSet_[SP_WHOLE_BUFFERS] = {};  // each buffer's set of release ids (ReleaseId)
    uint32_t releases_ = 0;  // sub-groups applied with loads, without the ring (the sets alternate)
    uint32_t slots_ = 0;   // tiling spSpare: chunk slots of the ring (SpRingSlots), 0 without
    uint64_t slotElems_ = 0;
    bool pendV_[SP_MAX_CHUNKS] = {}, pendM_[SP_MAX_CHUNKS] = {};  // a ring slot's V_MTE2 / MTE3_MTE2 event is set
};

}  // namespace single_pass
}  // namespace bnb
#endif  // BATCH_NORM_KERNEL_SINGLE_PASS_H
