// Tiling data of BatchNormBackward: declared once, included by the host
// tiling (op_host/) and by the kernel. Every constant the two sides share
// lives here, and so does the UB plan both use (tiling checks it fits, the
// kernel carves exactly it).
#ifndef BATCH_NORM_BACKWARD_TILING_H
#define BATCH_NORM_BACKWARD_TILING_H
#include <cstdint>
#include "batch_norm_spec.gen.h"

#ifdef __aicore__
#define BNB_FN __aicore__ inline
#else
#define BNB_FN inline
#endif

namespace bnb {

// How the kernel sees the activation: [outer, C, inner] or [outer, C].
// How the work is done (tiling `strategy`): TWO_PASS reads grad_out / input
// once for the sums and again for grad_input (units, workspace partials);
// SINGLE_PASS keeps a group of adjacent channels' whole N x inner slices in UB
// (batch_norm_kernel_single_pass.h): x and dy read once, dx written once.
enum Strategy : uint32_t { STRATEGY_TWO_PASS = 0, STRATEGY_SINGLE_PASS = 1 };
enum Layout : uint32_t { LAYOUT_CHANNEL_FIRST = 0, LAYOUT_CHANNEL_LAST = 1 };
// Element type of grad_out / input / grad_input.
enum ElemType : uint32_t { ELEM_FLOAT32 = 0, ELEM_FLOAT16 = 1, ELEM_BFLOAT16 = 2 };
// The per-channel inputs in kernel argument order (enum Param), the output-mask
// bits (enum Output), the values of absent inputs and the rank bounds come from
// op_def/batch_norm_backward.yaml through batch_norm_spec.gen.h.

constexpr uint32_t BLOCK_BYTES = 32;
constexpr uint32_t QUEUE_DEPTH = 2;        // double-buffered GM<->UB queues
constexpr uint32_t TILE_QUEUES = 3;        // grad_out in, input in, grad_input out
constexpr uint32_t OUT_BUFFERS_IN_PLACE = 3;  // float32 on SoCs with DataCopyPad: grad_input queue buffers (its
                                              // stores land while the input tiles are computed in place; no
                                              // float tiles between), and every type's cross-core two passes
                                              // there (CrossCoreApply). Atlas training / inference: QUEUE_DEPTH
                                              // (the real TPipe has fewer event ids there)
constexpr uint32_t IN_BUFFERS_AHEAD = 3;  // grad_out / input queue buffers (and depth) where the channel pipeline
                                          // issues its loads two units ahead (tiling inBuffers)
constexpr uint32_t FLOAT_TILES = 2;        // float32 working copies of grad_out and input (16-bit types only:
                                           // float32 computes in place in the input queues' buffers)
constexpr uint32_t ROW_VECS = 3;           // two accumulators and the ReduceSum scratch
constexpr uint32_t CHANNEL_VECS = 10;      // weight, scaleK, mean, invstd, 3 coefficients, 2 totals, staging
constexpr uint32_t MAX_CORES = 64;         // upper bound of the launch's block dim
constexpr uint32_t PARAM_CHUNK = 64;       // channels per parameter group (channel-first)
constexpr uint32_t PARAM_CHUNK_NO_PAD = 16;  // the same without DataCopyPad: the narrowest whole blocks of
                                             // per-channel values (16 halves, two blocks of floats)
constexpr uint32_t SLOT_FLOATS = BLOCK_BYTES / sizeof(float);  // one block of floats: a ReduceSum result and pad
constexpr uint32_t UNIT_SLOT_FLOATS = 2 * SLOT_FLOATS;  // channel-first partials of a unit: [sum_dy pad][sum_dy_xhat pad]
constexpr uint32_t PART_HALVES = 2;       // channel-first partials: UB ping-pong halves of SLOTS_PER_LOAD units each
constexpr uint32_t SLOTS_PER_LOAD = 32;    // units' partials per copy (stored and combined)
constexpr uint32_t MAX_TILE_ROWS = 4095;   // DataCopy block count is 16-bit
constexpr uint64_t ROUND_UNIT_SPLIT = 64;  // software-SyncAll L2 rounds: the largest power of two the tiling seeks in
                                           // a channel's units (the most cores of any line)
constexpr uint32_t VEC_ALIGN = 16;         // channel vectors hold whole blocks of float16 and float32
constexpr uint32_t L2_ROUND_DIVISOR = 2;   // a round's grad_out + input take at most L2 / this (room for dx)
constexpr uint32_t IL_ROUND_DIVISOR = 3;   // ... of interleaved rounds (InterleavedRounds: a round's second reads,
                                           // the next one's first reads and dx share L2)
constexpr uint32_t PL_TAIL_SIXTEENTHS = 12; // partly pipelined channels (plTail): phase-2 units of a channel beside
constexpr uint32_t PL_AHEAD_SIXTEENTHS = 5;  // ... the next channel's first phase-1 units (TailPipelineInL2)
constexpr uint32_t PL_ROUND_AHEAD_SIXTEENTHS = 6; // ... and of the next L2 round's (rounds one after the other)
constexpr uint32_t PL_ROUND_AHEAD_TWO_SIXTEENTHS = 8;  // ... where the rounds' loads go two units ahead (inBuffers)
constexpr uint32_t PL_ROUND_TAIL_TWO_SIXTEENTHS = 14;  // ... the rounds' tail there (float32: AHEAD_TILE_LEAD)
constexpr uint32_t AHEAD_TILE_LEAD = 3;  // float32 serial rounds: phase-1 units loaded after the ahead tile
constexpr uint32_t SOFT_IL_L2_TENTHS = 3;  // ... of interleaved rounds with the software SyncAll (ilRounds), in
                                           // tenths of L2: a little less than a third, so a round's second reads
                                           // stay in the share of L2 the rounds count on

struct BatchNormBackwardTilingData {
    int64_t outer;         // N (channel-first) or all non-channel dims (channel-last)
    int64_t channels;      // C
    int64_t inner;         // spatial size (channel-first); 1 for channel-last
    int64_t rowBlocks;     // tiles along `outer`
    int64_t colBlocks;     // tiles along `inner` (channel-first) or along C (channel-last)
    int64_t units;         // work units: one tile of one channel (first) / of one channel block (last)
    int64_t groups;        // channel groups for parameters and grad_weight / grad_bias
    uint32_t layout;       // Layout
    uint32_t dtype;        // DataType of grad_out
    uint32_t training;
    uint32_t outputMask;   // bit per Output
    uint32_t present;      // bit per Param: input given
    uint32_t paramFloat32; // bit per Param: stored as float32 rather than grad_out's dtype
    uint32_t gradParamFloat32;  // grad_weight / grad_bias stored as float32
    uint32_t tileRows;
    uint32_t tileCols;
    uint32_t rowStride;    // UB elements between tile rows (tileCols rounded up to a block)
    uint32_t groupWidth;   // channels per group
    uint32_t vecElems;     // UB elements of one channel vector
    uint32_t partFloats;   // workspace floats per unit
    uint32_t usedCores;
    uint32_t usePad;       // 1: DataCopyPad for unaligned rows; 0: whole-block DataCopy (+ backtracked tails)
    uint32_t crossCore;    // 1: a channel's partial sums come from several cores (SyncAll between phases: the
                           // hardware one, or the software one with softSync)
                           // 0: every group's units run on one core
    uint32_t shiftLast;    // 1: the last column chunk starts at span - tileCols (whole blocks, overlaps its neighbour)
    uint32_t flat;         // 1: rows shorter than one block; grad_input is written as contiguous regions
    uint32_t hasDcci;      // DataCacheCleanAndInvalid exists (scalar GM writes are flushed with it)
    uint32_t vecPad;       // DataCopyPad exists: per-channel vectors move exactly with it whatever usePad
    uint32_t mulAdd;       // MulAddDst / FusedMulAdd exist (single pass: fused per-element steps)
    uint32_t flatUnits;    // flat: grad_input regions
    uint32_t flatCap;      // flat: elements per region (fits one tile)
    uint32_t strategy;     // Strategy
    uint32_t balanced;     // 1: group g is channels [C * g / groups, C * (g + 1) / groups) (single pass, whole-channel reduce)
    uint32_t spChannels;   // single pass: channels resident in UB at once (a sub-group of a group)
    uint32_t spRowStride;  // single pass: UB elements of one (row, channel) slice (inner rounded up to a block of T;
                           // packed: inner itself)
    uint32_t spChunkRows;  // single pass: rows per pipelined chunk (loads / stores overlap compute chunk by chunk)
    uint32_t spSlabRows;   // single pass: rows of the sub-group per vector instruction (the float slabs hold that
                           // many rows)
    uint32_t spAccRows;    // single pass: accumulator rows of the two sums, a multiple of spSlabRows (their slabs
                           // hold that many rows; row n sums into accumulator row n mod spAccRows)
    uint32_t spBuffers;    // single pass: resident sub-group buffers (2, or with spWhole up to SP_WHOLE_BUFFERS: the
                           // next sub-group loads while this one is reduced, applied and stored)
    uint32_t spQuantum;    // single pass, packed (no DataCopyPad, slices not whole blocks): > 0 = the fewest adjacent
                           // channels whose slices together are whole blocks; the slices lie packed in UB
                           // (spRowStride = inner), groups and sub-groups are multiples of it; 0: not packed
    uint32_t spSegSum;     // single pass: 1 = a sub-group's per-channel sums are one ReduceRepeat per sum (a slice
                           // of at most SP_SEG_MAX_INNER elements is one repeat) and its per-channel values are
                           // broadcast per block (Brcb, masked Copy); not packed; SoCs with reduce_repeat and
                           // block_copy
    uint32_t spWhole;      // single pass, 16-bit types: 1 = sub-groups of one channel whose float copies of x - mean
                           // and dy stay in UB from the reduce to the apply (SpWholePlan): per element one cast of
                           // each and a cast back, every per-channel value a scalar operand (no slabs of mean, a,
                           // k, b); SP_WHOLE_X = the float copy of x - mean alone holds all rows (SinglePassKeepX),
                           // k and b scalar operands; 0: the float copies hold spSlabRows rows and are cast again
                           // for the apply
    uint32_t spLaneSums;   // single pass, packed runs of a regular layout (LaneRunRegular): a sub-group's per-channel
                           // sums from lane partials, one block per channel, formed by block-strided masked Adds
                           // (no ReduceSum per channel, no scalar reads of the blocks two channels share), and its
                           // per-channel values broadcast by one masked Duplicate per channel; the partials'
                           // lanes summed by ReduceRepeat straight into the group's lanes (SP_LANES_REDUCE: SoCs
                           // with reduce_repeat) or by the scalar unit (SP_LANES_SCALAR); 0: neither
    uint32_t spSpare;      // single pass, one resident buffer: > 0 = that many spare chunks of spChunkRows rows; the
                           // buffer is a ring of Chunks + spSpare chunk slots and sub-group i's chunk c lies in slot
                           // (i x Chunks + c) mod the slots (SpRing), so the next sub-group's first spSpare chunks
                           // load into slots the current one does not use, while it finishes its reduce and its
                           // combine (one event id per slot); 0: chunk c of every sub-group at rows c x spChunkRows
    uint32_t spLastRows;   // single pass, no ring (spSpare 0): > 0 = the last chunk of a sub-group's rows is that many
                           // rows (one vector instruction's, spSlabRows), the others spChunkRows each before it,
                           // so the reduce after a sub-group's last loads land, and thus its combine, apply and
                           // stores, start an instruction's rows after them; and a has a slab of its own
                           // (SinglePassPlan::aSlab), filled for the core's last sub-group (applied from slabs)
                           // before the loads land; 0: every chunk spChunkRows rows
    uint32_t spEven;       // single pass: 1 = a group's sub-groups differ by at most one run of channels (the larger
                           // ones where the short one would go, Make), so none is a channel or two where the full
                           // ones reach SP_MIN_BURST_BYTES a row copy (BurstResident); 0: whole ones and one short
    uint32_t outBuffers;   // buffers of the grad_input queue (OutBuffers)
    uint32_t l2Rounds;     // two passes, cross-core: > 0 = channel groups per round; both passes run round by
                           // round, so a round's second read follows its first while it is still in L2
    uint32_t l2Channels;   // two passes, whole groups per core (no SyncAll): > 0 = channels of a group whose
                           // two passes run before the next ones', so their second read follows their first
                           // while it is still in L2; 0: the whole group at once
    uint32_t softSync;     // 1: the cores meet with the software SyncAll (SyncAll(gmWorkspace, ubWorkspace,
                           // usedCores); Atlas training / inference, which lack the hardware one): its flags
                           // follow the totals in the workspace (SyncFlagsOffset), zeroed by every core at the
                           // launch's start; its UB workspace SyncWorkBytes
    uint32_t partSlots;    // two passes, channel-first: units' partial sums partUb holds (PartSlots; 0: PART_HALVES x
                           // SLOTS_PER_LOAD). L2 rounds: enough for the channels a core's units of a round touch
                           // and for its share of the channels at the end, where UB has room, so each of those
                           // combines loads its partials in one copy
    uint32_t ilRounds;     // L2 rounds with the software SyncAll (softSync): 1 = interleaved as with the hardware
                           // one (InterleavedRounds), 0 = one after the other
    uint32_t plTail;       // ChannelPipeline, or L2 rounds one after the other: > 0 = the last plTail sixteenths
                           // of channel c's (round r's) phase-2 units run beside phase 1 of channel c + 1 (round
                           // r + 1): its first plAhead sixteenths, spread over them, its others after them; so
                           // MTE2 streams in the store-bound phase 2 while a block's second read follows its
                           // first within less traffic (L2) than with every unit of both phases interleaved;
                           // 0: ChannelPipeline all of them, in runs of PipeBlock; the rounds none
    uint32_t plAhead;      // with plTail: sixteenths of the next phase 1 among those plTail
    uint32_t inBuffers;    // buffers of the grad_out / input queues (0: QUEUE_DEPTH); IN_BUFFERS_AHEAD: the channel
                           // pipeline, or the software SyncAll's L2 rounds (Interleaved), issues each unit's
                           // loads two units ahead (TryLoadsTwoAhead)
    uint32_t reduceSum;    // 1: ReduceSum on float exists (SoCs with reduce_repeat); 0 (Atlas training, ascend910:
                           // half only): each float sum is a tree of Adds to one block of lane partials
                           // (BlockTreeSum) whose lanes the scalar unit adds in lane order (LaneSum)
    float eps;
    float invCount;        // 1 / (outer * inner), 0 when empty
};

// UB bytes of each buffer the kernel allocates, from the tiling.
struct UbPlan {
    uint32_t tileBytes;    // one queue buffer (grad_out dtype)
    uint32_t outBuffers;   // buffers of the grad_input queue
    uint32_t inBuffers;    // buffers of each input queue
    uint32_t floatTileBytes;
    uint32_t rowVecBytes;
    uint32_t channelVecBytes;
    uint32_t partBytes;
    uint32_t tailBytes;    // one block of scratch for backtracked tails
    BNB_FN uint64_t Total() const
    {
        return (uint64_t(TILE_QUEUES - 1) * inBuffers + outBuffers) * tileBytes +
               uint64_t(FLOAT_TILES) * floatTileBytes + uint64_t(ROW_VECS) * rowVecBytes + uint64_t(CHANNEL_VECS) * channelVecBytes + partBytes + tailBytes;
    }
};

BNB_FN uint32_t DtypeBytes(uint32_t dtype) { return dtype == ELEM_FLOAT32 ? 4 : 2; }

// Buffers of the grad_input queue: three for float32 (computed in place) where the SoC has DataCopyPad.
BNB_FN uint32_t OutBuffers(uint32_t dtype, bool hasDataCopyPad)
{
    return hasDataCopyPad ? OUT_BUFFERS_IN_PLACE : QUEUE_DEPTH;
}

BNB_FN UbPlan MakeUbPlan(uint32_t tileRows, uint32_t rowStride, uint32_t vecElems, uint32_t layout, uint32_t dtype,
                         uint32_t outBuffers, uint32_t partSlots = 0, uint32_t inBuffers = QUEUE_DEPTH)
{
    UbPlan p;
    const uint32_t tileElems = tileRows * rowStride;
    p.tileBytes = tileElems * DtypeBytes(dtype);
    p.floatTileBytes = dtype == ELEM_FLOAT32 ? 0 : tileElems * uint32_t(sizeof(float));
    p.outBuffers = outBuffers;
    p.inBuffers = inBuffers > QUEUE_DEPTH ? inBuffers : QUEUE_DEPTH;
    p.rowVecBytes = rowStride * sizeof(float);
    p.channelVecBytes = vecElems * sizeof(float);
    const uint32_t slots = partSlots > PART_HALVES * SLOTS_PER_LOAD ? partSlots : PART_HALVES * SLOTS_PER_LOAD;
    p.partBytes = (layout == LAYOUT_CHANNEL_FIRST ? slots * UNIT_SLOT_FLOATS : 2 * rowStride) * sizeof(float);
    p.tailBytes = BLOCK_BYTES;
    return p;
}

BNB_FN uint64_t CeilDiv(uint64_t a, uint64_t b) { return b == 0 ? 0 : (a + b - 1) / b; }
BNB_FN uint64_t AlignUp(uint64_t a, uint64_t b) { return CeilDiv(a, b) * b; }

// ---- single pass (STRATEGY_SINGLE_PASS): UB beyond the small two-pass plan ----
constexpr uint32_t SP_SLABS = 5;           // float slabs of the sub-group's rows: mean, a, 2 sums (then k, b), product
                                           // (SinglePassPlan: a and the product not always in slabs of their own)
constexpr uint32_t SP_CAST_SLABS = 2;      // float copies of one row of dy and x (grad_out not float32)
constexpr uint32_t SP_MAX_CHUNKS = 8;      // pipelined chunks of rows over all resident buffers (one event id each)
constexpr uint32_t SP_RING_SPARE = 2;      // spSpare: spare chunk slots of the resident ring, at most
constexpr uint64_t SP_MIN_BURST_BYTES = 512;  // single pass: a sub-group's rows move at least this many bytes a copy
                                            // where the group's channels allow it (BurstResident)
constexpr uint32_t SP_MAX_BUFFERS = 2;     // resident sub-group buffers (double buffering of sub-groups)
constexpr uint32_t SP_SLAB_ROWS = 4;       // rows per vector instruction, at most (fewer where UB is short)
constexpr uint32_t SP_WIDE_SLAB_ROWS = 8;  // ... 16-bit types without mul_add where as many channels fit (WideRows)
constexpr uint32_t SP_MIN_SUB_GROUPS = 4;  // double-buffered: a group cut into up to this many sub-groups ...
constexpr uint64_t SP_MIN_INSTR_ELEMS = 512;  // ... whose vector instructions span at least this many elements
constexpr uint64_t SP_HALF_ROWS_SUB_GROUPS = 128; // double-buffered at half the rows per instruction where a
                                                // tensor is at least this many one-buffer sub-groups
constexpr uint32_t SP_ROWS_PLAN = 1;       // rows of the two-pass plan kept beside (channel vectors, scratch)
constexpr uint64_t SP_SEG_MAX_INNER = 64;  // spSegSum: a channel's slice is one float repeat (256 bytes), at most
constexpr uint32_t SP_SEG_MAX_REPEAT = 255;  // ReduceRepeat repeatTime, at most (channels per instruction)
constexpr uint64_t SP_SEG_FEW_SUB_GROUPS = 3;    // spSegSum, float32, double-buffered: sub-groups of a group ...
constexpr uint64_t SP_SEG_FEW_MIN_CHANNELS = 4;  // ... where each is at least this many channels (half the rows)
constexpr uint32_t SP_SEG_PAIR_MAX_LANES = 128;  // spSegSum: one Brcb for k and b up to this many vector lanes
// spSegSum values: 1 = the per-channel values broadcast over their slices' spSlabRows rows in the slabs;
// SP_SEG_COMPACT = the slabs of mean, a, k and b hold one block per (row, channel) slice instead, read by the
// repeat forms of the vector instructions with block stride 0 (a repeat per slice: Sub, FusedMulAdd,
// MulAddDst); training on SoCs with mul_add, a slice of at least SP_SEG_COMPACT_MIN_STRIDE elements.
constexpr uint32_t SP_SEG_COMPACT = 2;
constexpr uint64_t SP_SEG_COMPACT_MIN_STRIDE = 56;  // spRowStride: a slice is at least 7 of a repeat's 8 blocks
                                                    // (a repeat per slice leaves at most one block idle)
// spWhole values: SP_WHOLE_ALL = both float copies hold all rows; SP_WHOLE_X = x - mean's alone.
constexpr uint32_t SP_WHOLE_ALL = 1;
constexpr uint32_t SP_WHOLE_X = 2;
constexpr uint32_t SP_WHOLE_SLAB_ROWS = 8;  // spWhole: accumulator rows of the two sums (rows per accumulation)
constexpr uint32_t SP_WHOLE_CHUNKS = 2;      // spWhole: chunks of a channel's rows (fewer, longer instructions)
constexpr uint32_t SP_WHOLE_BUFFERS = 3;     // spWhole: resident channels (a channel's stores land while the
                                             // next two channels' loads go to the other buffers)
static_assert(SP_WHOLE_BUFFERS >= SP_MAX_BUFFERS && SP_WHOLE_BUFFERS * SP_WHOLE_CHUNKS <= SP_MAX_CHUNKS,
              "spWhole's buffers and chunks: one event id per chunk of each buffer");
constexpr uint64_t SP_WHOLE_MIN_ELEMS = 4096;  // spWhole: a channel's outer x spRowStride elements at least (its
                                               // reductions and scalar hand-over are per channel)

// spLaneSums (tiling field).
enum LaneSums : uint32_t { SP_LANES_NONE = 0, SP_LANES_SCALAR = 1, SP_LANES_REDUCE = 2 };
constexpr uint64_t SP_LANE_MIN_BLOCKS = 3;  // spLaneSums: a channel's slice spans at least this many whole blocks
constexpr uint32_t MAX_REPEAT_STRIDE = 255;  // uint8_t repeat strides (BinaryRepeatParams, Duplicate), in blocks
constexpr uint64_t SP_LANE_MAX_BLOCKS = 6;  // ... and at most this many, so a slice and its lane offset fit one
                                            // float repeat (the masked Duplicate of a channel)

// A packed slice of `inner` floats in the float slabs (runs of qf = 8 / gcd(inner, 8) channels) is regular
// when channel j (< qf) of a run starts in block j * (inner / 8) at lane j * (inner mod 8): inner mod 8 is
// 1, 2 or 4 (then (qf - 1) * (inner mod 8) < 8). Its head, body and tail blocks are then one block stride
// apart from channel to channel (single_pass::LaneRun).
BNB_FN bool LaneRunRegular(uint64_t inner)
{
    const uint64_t r = inner % 8, m = inner / 8;
    return (r == 1 || r == 2 || r == 4) && m >= SP_LANE_MIN_BLOCKS && m <= SP_LANE_MAX_BLOCKS;
}

// UB bytes of the single-pass buffers for `channels` resident channels.
struct SinglePassPlan {
    uint32_t residentBytes;  // dy or x of the sub-group in T: outer rows x channels x rowStride, per buffer
    uint32_t buffers;        // resident buffers (tiling spBuffers)
    uint32_t slabBytes;      // slabRows float rows of the sub-group: slabRows x channels x rowStride floats
    uint32_t valueBytes;     // a slab of per-channel values (mean, a): slabBytes, or (SP_SEG_COMPACT) a block per
                             // slice of slabRows rows
    uint32_t accBytes;       // each of the two sums' slabs: accRows x channels x rowStride floats
    uint32_t slotBytes;      // per-channel sums: one 32-byte slot per channel, two sets (spSegSum: a block per
                             // lane of a Brcb, SegScratchBlocks)
    uint32_t castSlabs;
    uint32_t castBytes;      // dy's float copy (one of castSlabs): slabBytes, or (SP_WHOLE_ALL) all outer rows
    uint32_t xCastBytes;     // x's float copy: castBytes, or (SP_WHOLE_X) all outer rows
    uint32_t meanSlab;       // 1: the mean in a slab; 0 (SP_WHOLE_ALL): a scalar operand, as a
    uint32_t aSlab;          // 1: a in a slab of its own; 0: in the mean's (the reduce alone reads the mean, the
                             // apply alone a, and each sub-group broadcasts both), where the sums are segmented
                             // (more channels per sub-group at 7x7) or the SoC lacks mulAdd (the vector unit
                             // is the bound: more rows per instruction); elsewhere the rows UB allows stay;
                             // spWhole: none; tiling spLastRows (`ownA`): its own, filled for the core's last
                             // sub-group before that one's reduce
    uint32_t prodSlab;       // the product's slab: the sums of dy * (x - mean) without MulAddDst, or the work
                             // area of the per-channel ReduceSums (not spSegSum); SP_WHOLE_X: none (the product
                             // goes over dy's float copy, whose sum is taken before)
    BNB_FN uint64_t Total() const
    {
        return 2ull * buffers * residentBytes + uint64_t(meanSlab + aSlab) * valueBytes +
               uint64_t(prodSlab) * slabBytes + (castSlabs > 0 ? uint64_t(castBytes) + xCastBytes : 0) +
               2ull * accBytes + slotBytes;
    }
};

// spSegSum: the coefficients k and b take one Brcb over the pair [coefB | coefK] (the lanes of both) where
// the channel vectors are short (a repeat of Brcb costs a cycle, an instruction SP_SEG_PAIR_MAX_LANES / 8).
BNB_FN bool SegPairBrcb(uint32_t vecElems) { return vecElems <= SP_SEG_PAIR_MAX_LANES; }

// spSegSum: blocks of a Brcb of a sub-group's lanes (SP_SEG_MAX_REPEAT at most), from the block-aligned lane
// before its first one (and the same lanes of the second vector of a pair, SegPairBrcb).
BNB_FN uint32_t SegScratchBlocks(uint32_t channels, uint32_t vecElems)
{
    const uint32_t perCall = channels < SP_SEG_MAX_REPEAT ? channels : SP_SEG_MAX_REPEAT;
    const uint32_t lanes = (SegPairBrcb(vecElems) ? vecElems : 0) + perCall + SLOT_FLOATS - 1;
    return (lanes + SLOT_FLOATS - 1) / SLOT_FLOATS * SLOT_FLOATS;
}

// Sub-groups of one channel, 16-bit types without mul_add (ascend910's 28x28): every per-channel value is a
// scalar operand (single_pass ScalarValues), so no slab of mean or a, and the sum of dy * (x - mean) takes
// the product over dy's float copy once dy's sum has read it (the same product and sum), so no product's
// slab: that UB goes to the ring of chunk slots (SinglePassRing).
BNB_FN bool ScalarOneChannel(uint32_t channels, uint32_t dtype, uint32_t mulAdd, uint32_t segSum, uint32_t whole,
                             uint32_t ownA)
{
    return channels == 1 && dtype != ELEM_FLOAT32 && !mulAdd && !segSum && whole == 0 && !ownA;
}

BNB_FN SinglePassPlan MakeSinglePassPlan(uint64_t outer, uint32_t channels, uint32_t rowStride, uint32_t dtype,
                                         uint32_t buffers, uint32_t slabRows, uint32_t segSum, uint32_t vecElems,
                                         uint32_t mulAdd, uint32_t accRows, uint32_t whole = 0, uint32_t ownA = 0)
{
    SinglePassPlan p;
    p.residentBytes = uint32_t(outer * channels * rowStride * DtypeBytes(dtype));
    p.buffers = buffers;
    p.slabBytes = slabRows * channels * rowStride * uint32_t(sizeof(float));
    p.valueBytes = segSum == SP_SEG_COMPACT ? slabRows * channels * BLOCK_BYTES : p.slabBytes;
    p.accBytes = accRows * channels * rowStride * uint32_t(sizeof(float));
    const uint32_t seg = segSum ? SegScratchBlocks(channels, vecElems) : 0;
    const uint32_t slots = seg > 2u * channels ? seg : 2u * channels;
    p.slotBytes = slots * BLOCK_BYTES;
    p.castSlabs = dtype == ELEM_FLOAT32 ? 0 : SP_CAST_SLABS;
    const uint32_t allRows = uint32_t(outer * channels * rowStride * sizeof(float));
    p.castBytes = whole == SP_WHOLE_ALL ? allRows : p.slabBytes;
    p.xCastBytes = whole != 0 ? allRows : p.slabBytes;
    // ScalarOneChannel: the per-channel values are scalar operands and the product goes over dy's float copy
    const bool scalarOne = ScalarOneChannel(channels, dtype, mulAdd, segSum, whole, ownA);
    p.meanSlab = whole == SP_WHOLE_ALL || scalarOne ? 0 : 1;
    p.aSlab = ownA || !(whole == SP_WHOLE_ALL || segSum || !mulAdd) ? 1 : 0;
    p.prodSlab = (segSum && mulAdd) || whole == SP_WHOLE_X || scalarOne ? 0 : 1;
    return p;
}

// Tiling spSpare: chunk slots of the single pass's resident ring, and the elements of one (spChunkRows rows of
// spChannels slices, spRowStride apart); 0 slots without the ring.
BNB_FN uint32_t SpRingSlots(const BatchNormBackwardTilingData &t)
{
    return t.spSpare == 0 ? 0u : uint32_t(CeilDiv(uint64_t(t.outer), t.spChunkRows)) + t.spSpare;
}

BNB_FN uint64_t SpRingSlotElems(const BatchNormBackwardTilingData &t)
{
    return uint64_t(t.spChunkRows) * t.spChannels * t.spRowStride;
}

// Workspace: `units * partFloats` partial sums, then (cross-core) the
// finalised totals of every channel, sum_dy then sum_dy_xhat, each
// TotalsStride floats (single pass with softSync: the groups' totals,
// StashFloats), then (softSync) the software SyncAll's flags, one 32-byte
// block per core (SyncAll.md: at least cores x 32 bytes).
BNB_FN uint64_t TotalsStride(const BatchNormBackwardTilingData &t) { return AlignUp(uint64_t(t.channels), 8); }

BNB_FN uint64_t PartialFloats(const BatchNormBackwardTilingData &t) { return uint64_t(t.units) * t.partFloats; }

// The kernel calls SyncAll, either form (the host then sets schedule mode 1).
// Units' partial sums partUb holds (channel-first two passes): a combine loads at most this many in one copy.
BNB_FN uint32_t PartSlots(const BatchNormBackwardTilingData &t)
{
    return t.partSlots > PART_HALVES * SLOTS_PER_LOAD ? t.partSlots : PART_HALVES * SLOTS_PER_LOAD;
}

BNB_FN bool UsesSyncAll(const BatchNormBackwardTilingData &t)
{
    return (t.crossCore || t.softSync) && t.usedCores > 1;
}

// Two passes in L2 rounds (l2Rounds): phase 2 of a round runs beside phase 1 of the next between two SyncAlls
// (the kernel's Interleaved) where the cores meet with the hardware SyncAll, and with the software one where
// the tiling chose it (ilRounds: SoCs with mul_add, rounds of at least two channels in SOFT_IL_L2_TENTHS of
// L2); else the rounds run one after the other (ascend910, whose vector unit is the busiest pipe, and rounds
// that would be a channel each: the more rounds, the more software SyncAlls, each a few GM round trips;
// docs/ascend_kernel.md).
BNB_FN bool InterleavedRounds(const BatchNormBackwardTilingData &t) { return !t.softSync || t.ilRounds; }

// Two passes, whole groups per core (crossCore 0) with softSync (the host's TrySoftWholeChannels): groups
// narrower than a block of grad_weight / grad_bias, so their totals are stashed as the single pass's are and
// written in whole blocks after the one software SyncAll.
BNB_FN bool StashedTwoPass(const BatchNormBackwardTilingData &t)
{
    return t.strategy == STRATEGY_TWO_PASS && t.softSync && !t.crossCore;
}

// Single pass with softSync (and StashedTwoPass): each group's totals (sum_dy, then sum_dy_xhat), in a slot of
// whole blocks of its own, for the cores that write grad_weight / grad_bias after the SyncAll.
BNB_FN uint64_t StashSlotFloats(const BatchNormBackwardTilingData &t) { return AlignUp(t.groupWidth, 8); }
BNB_FN uint64_t StashFloats(const BatchNormBackwardTilingData &t)
{
    return (t.strategy == STRATEGY_SINGLE_PASS && t.softSync) || StashedTwoPass(t)
               ? uint64_t(t.groups) * 2 * StashSlotFloats(t)
               : 0;
}

// int32 flags of the software SyncAll: one block per core.
BNB_FN uint32_t SyncFlagInts(uint32_t cores) { return cores * (BLOCK_BYTES / sizeof(int32_t)); }
// Bytes of either workspace of the software SyncAll (GM flags, UB scratch): cores x 32 (SyncAll.md).
BNB_FN uint32_t SyncWorkBytes(uint32_t cores) { return cores * BLOCK_BYTES; }

// GM bytes of one launch's software SyncAll on `cores` cores, about: every core zeroes every flag (the
// kernel-side initialisation) and polls them all at least once.
BNB_FN uint64_t SoftSyncBytes(uint32_t cores) { return 2ull * cores * SyncWorkBytes(cores); }
constexpr uint64_t SP_SOFT_SYNC_SHARE = 256;  // single pass: softSync where SoftSyncBytes <= activation bytes / this

BNB_FN uint64_t SyncFlagsOffset(const BatchNormBackwardTilingData &t)
{
    return (PartialFloats(t) + (t.crossCore ? 2 * TotalsStride(t) : 0) + StashFloats(t)) * sizeof(float);
}

BNB_FN uint64_t WorkspaceBytes(const BatchNormBackwardTilingData &t)
{
    return SyncFlagsOffset(t) + (t.softSync ? SyncWorkBytes(t.usedCores) : 0);
}

}  // namespace bnb
#endif
