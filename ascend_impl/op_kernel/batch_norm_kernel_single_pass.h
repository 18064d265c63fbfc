// Single-pass strategy (tiling STRATEGY_SINGLE_PASS, channel-first only):
// a core owns whole channel groups (`balanced`: C * g / groups), and keeps
// `spChannels` adjacent channels' complete N x inner slices of grad_out and
// input in UB at once (a sub-group). Each element of x and dy is read from GM
// once and grad_input written once: 3 GM accesses per element, no workspace,
// no SyncAll (nothing crosses cores).
//
// One sub-group (channels cs .. cs + cnt of group g, lanes s0 .. of the
// group's channel vectors), UB layout [row][channel][spRowStride] so that one
// row of the sub-group is one contiguous burst in GM (cnt * inner elements):
//   load     MTE2, row by row, in up to SP_MAX_CHUNKS chunks of rows, each
//            chunk signalled to V with its own MTE2_V event;
//   reduce   V, chunk by chunk as it lands: xhat = (x - mean) * invstd
//            (float32: in place over x), sum dy and dy * xhat over the rows
//            into two float slabs, then one ReduceSum per channel;
//   finalise S after V_S: the sums into the group's totDy / totDyx lanes; V
//            after S_V: the coefficients a, k, b (as the two-pass LoadCoefs);
//   apply    V, chunk by chunk: dx = a * dy + k * xhat + b over whole rows
//            with per-element slabs of a, k, b; each chunk handed to MTE3 with
//            its own V_MTE3 event, so stores overlap the next chunk's compute;
//   release  V_MTE2 and MTE3_MTE2 before the next sub-group's loads reuse UB.
// grad_weight / grad_bias of the group are written once after its last
// sub-group (WriteParamGrads). The arithmetic per element is that of the
// two-pass strategy (Xhat, ApplyCoefs); the sums are over whole channels in a
// fixed order, so the result does not depend on the number of cores.
#ifndef BATCH_NORM_KERNEL_SINGLE_PASS_H
#define BATCH_NORM_KERNEL_SINGLE_PASS_H
#include "batch_norm_kernel_phases.h"

namespace bnb {
namespace single_pass {

using AscendC::HardEvent;

// Float slabs, in SinglePassPlan order (SP_SLABS, then SP_CAST_SLABS).
enum Slab : uint32_t {
    SLAB_MEAN, SLAB_INVSTD, SLAB_A, SLAB_K, SLAB_B, SLAB_SUM_DY, SLAB_SUM_DYX, SLAB_PROD, SLAB_DY_F, SLAB_X_F, SLAB_COUNT
};

template <typename T>
struct Buffers {
    AscendC::TBuf<AscendC::TPosition::VECCALC> dyBuf, xBuf, slotBuf;
    AscendC::TBuf<AscendC::TPosition::VECCALC> slabBuf[SLAB_COUNT];
    LocalTensor<T> dy, x;            // resident sub-group: [row][channel][spRowStride]
    LocalTensor<float> slab[SLAB_COUNT];
    LocalTensor<float> slotDy, slotDyx;  // one 32-byte slot per channel: ReduceSum results

    __aicore__ inline void Init(AscendC::TPipe &pipe, const BatchNormBackwardTilingData &t)
    {
        const SinglePassPlan p = MakeSinglePassPlan(uint64_t(t.outer), t.spChannels, t.spRowStride, t.dtype);
        pipe.InitBuffer(dyBuf, p.residentBytes);
        pipe.InitBuffer(xBuf, p.residentBytes);
        for (uint32_t i = 0; i < SP_SLABS + p.castSlabs; ++i) {
            pipe.InitBuffer(slabBuf[i], p.slabBytes);
            slab[i] = slabBuf[i].template Get<float>();
        }
        pipe.InitBuffer(slotBuf, p.slotBytes);
        dy = dyBuf.template Get<T>();
        x = xBuf.template Get<T>();
        slotDy = slotBuf.template Get<float>();
        slotDyx = slotDy[t.spChannels * SLOT_FLOATS];
    }
};

// One sub-group: `cnt` channels from GM channel `cs`, lanes from `lane0` of the group's vectors.
struct SubGroup {
    int64_t cs;
    uint32_t cnt;
    uint32_t lane0;
    uint32_t len;  // elements of one row of the sub-group in UB: cnt * spRowStride
};

// Row n of the sub-group between GM and UB: cnt slices of `inner` elements,
// contiguous in GM from RowOffset; in UB each slice starts on a block
// (spRowStride apart).
__aicore__ inline uint64_t RowOffset(const BatchNormBackwardTilingData &t, const SubGroup &s, uint64_t n)
{
    return (n * uint64_t(t.channels) + uint64_t(s.cs)) * uint64_t(t.inner);
}

template <typename T>
__aicore__ inline void LoadRow(const KernelState<T> &k, const LocalTensor<T> &dst, const GlobalTensor<T> &src,
                               const SubGroup &s, uint64_t n)
{
    const uint64_t off = RowOffset(k.t, s, n);
#if BNB_SOC_HAS_DATA_COPY_PAD
    if (k.t.usePad) {
        AscendC::DataCopyExtParams p(Narrow<uint16_t>(s.cnt, "DataCopyPad blockCount"),
                                     Narrow<uint32_t>(k.t.inner * sizeof(T), "DataCopyPad blockLen"), 0, 0, 0);
        AscendC::DataCopyPadExtParams<T> pad(false, 0, 0, static_cast<T>(0));
        AscendC::DataCopyPad(dst, src[off], p, pad);
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
        AscendC::DataCopyExtParams p(Narrow<uint16_t>(s.cnt, "DataCopyPad blockCount"),
                                     Narrow<uint32_t>(k.t.inner * sizeof(T), "DataCopyPad blockLen"), 0, 0, 0);
        AscendC::DataCopyPad(dst[off], src, p);
        return;
    }
#endif
    AscendC::DataCopy(dst[off], src, Narrow<uint32_t>(s.cnt * k.t.inner, "DataCopy count"));
}

// slab[which] lane block j = the group vector's lane (lane0 + j), for the sub-group's channels.
template <typename T>
__aicore__ inline void Broadcast(const KernelState<T> &k, const Buffers<T> &b, uint32_t which,
                                 const LocalTensor<float> &vec, const SubGroup &s)
{
    const uint32_t rs = k.t.spRowStride;
    for (uint32_t j = 0; j < s.cnt; ++j) {
        AscendC::Duplicate(b.slab[which][j * rs], vec.GetValue(s.lane0 + j), Narrow<int32_t>(rs, "Duplicate count"));
    }
}

// Float view of row n: the resident row itself (float32) or its float copy in `slabIdx`.
template <typename T>
__aicore__ inline LocalTensor<float> FloatRow(const Buffers<T> &b, const LocalTensor<T> &resident, uint32_t slabIdx,
                                              uint64_t off, uint32_t len)
{
    if constexpr (IsSame<T, float>::value) {
        (void)b;
        (void)slabIdx;
        (void)len;
        return resident[off];
    } else {
        AscendC::Cast(b.slab[slabIdx], resident[off], AscendC::RoundMode::CAST_NONE, len);
        return b.slab[slabIdx];
    }
}

// xhat of row n in float (float32: in place over x, kept for apply).
template <typename T>
__aicore__ inline LocalTensor<float> XhatRow(const Buffers<T> &b, uint64_t off, uint32_t len)
{
    const LocalTensor<float> xr = FloatRow(b, b.x, SLAB_X_F, off, len);
    AscendC::Sub(xr, xr, b.slab[SLAB_MEAN], Narrow<int32_t>(len, "Sub count"));
    AscendC::Mul(xr, xr, b.slab[SLAB_INVSTD], Narrow<int32_t>(len, "Mul count"));
    return xr;
}

// Row sums of chunk rows [r0, r1) into the two sum slabs.
template <typename T>
__aicore__ inline void ReduceRows(const Buffers<T> &b, uint64_t r0, uint64_t r1, uint32_t len)
{
    for (uint64_t n = r0; n < r1; ++n) {
        const uint64_t off = n * len;
        const LocalTensor<float> xh = XhatRow(b, off, len);
        const LocalTensor<float> dyr = FloatRow(b, b.dy, SLAB_DY_F, off, len);
        AscendC::Add(b.slab[SLAB_SUM_DY], b.slab[SLAB_SUM_DY], dyr, Narrow<int32_t>(len, "Add count"));
        AscendC::Mul(b.slab[SLAB_PROD], xh, dyr, Narrow<int32_t>(len, "Mul count"));
        AscendC::Add(b.slab[SLAB_SUM_DYX], b.slab[SLAB_SUM_DYX], b.slab[SLAB_PROD], Narrow<int32_t>(len, "Add count"));
    }
}

// xhat of row n for the apply step: float32 keeps it in x since the reduce; otherwise recomputed.
template <typename T>
__aicore__ inline LocalTensor<float> ApplyXhat(const Buffers<T> &b, uint64_t off, uint32_t len)
{
    if constexpr (IsSame<T, float>::value) {
        (void)len;
        return b.x[off];
    } else {
        return XhatRow(b, off, len);
    }
}

// grad_input of chunk rows [r0, r1), in place over the resident dy (zeros when not wanted).
template <typename T>
__aicore__ inline void ApplyRows(const KernelState<T> &k, const Buffers<T> &b, uint64_t r0, uint64_t r1,
                                 uint32_t len, bool want)
{
    for (uint64_t n = r0; n < r1; ++n) {
        const uint64_t off = n * len;
        LocalTensor<float> dr;
        if constexpr (IsSame<T, float>::value) {
            dr = b.dy[off];
        } else {
            dr = b.slab[SLAB_DY_F];
            if (want) {
                AscendC::Cast(dr, b.dy[off], AscendC::RoundMode::CAST_NONE, len);
            }
        }
        if (!want) {
            AscendC::Duplicate(dr, 0.0f, Narrow<int32_t>(len, "Duplicate count"));
        } else {
            AscendC::Mul(dr, dr, b.slab[SLAB_A], Narrow<int32_t>(len, "Mul count"));
            if (k.t.training) {
                const LocalTensor<float> xh = ApplyXhat(b, off, len);
                AscendC::Mul(xh, xh, b.slab[SLAB_K], Narrow<int32_t>(len, "Mul count"));
                AscendC::Add(dr, dr, xh, Narrow<int32_t>(len, "Add count"));
                AscendC::Add(dr, dr, b.slab[SLAB_B], Narrow<int32_t>(len, "Add count"));
            }
        }
        if constexpr (!IsSame<T, float>::value) {
            AscendC::Cast(b.dy[off], dr, NarrowRound<T>(), len);
        }
    }
}

// The chunks of the rows: [ChunkBegin(c), ChunkBegin(c + 1)).
__aicore__ inline uint64_t ChunkBegin(const BatchNormBackwardTilingData &t, uint32_t c)
{
    return Min(uint64_t(c) * t.spChunkRows, uint64_t(t.outer));
}

__aicore__ inline uint32_t Chunks(const BatchNormBackwardTilingData &t)
{
    return uint32_t(CeilDiv(uint64_t(t.outer), t.spChunkRows));
}

template <typename T>
class Runner {
public:
    __aicore__ inline void Run(KernelState<T> &k)
    {
        b_.Init(k.pipe, k.t);
        chunksReleased_ = Chunks(k.t);
        const uint32_t mask = k.t.outputMask;
        want_ = mask >> GRAD_INPUT & 1;
        reduce_ = (mask >> GRAD_WEIGHT & 1) || (mask >> GRAD_BIAS & 1) || (k.t.training && want_);
        const GroupWalk w = ParamGroupsOfCore(k.t, k.share, AscendC::GetBlockIdx());
        for (uint64_t g = w.first; g < w.end; g += w.step) {
            Group(k, int64_t(g));
        }
        Release();
    }

private:
    __aicore__ inline void Group(KernelState<T> &k, int64_t g)
    {
        LoadStats(k, g);  // ends on a full barrier (once per group, outside the loop)
        AscendC::Duplicate(k.ub.v.totDy, 0.0f, Narrow<int32_t>(k.t.vecElems, "Duplicate count"));
        AscendC::Duplicate(k.ub.v.totDyx, 0.0f, Narrow<int32_t>(k.t.vecElems, "Duplicate count"));
        const uint32_t n = GroupCount(k.t, g);
        for (uint32_t s0 = 0; s0 < n; s0 += k.t.spChannels) {
            SubGroup s;
            s.cs = GroupStart(k.t, g) + s0;
            s.cnt = uint32_t(Min(k.t.spChannels, n - s0));
            s.lane0 = s0;
            s.len = s.cnt * k.t.spRowStride;
            Sub(k, s);
        }
        Release();
        AscendC::PipeBarrier<PIPE_ALL>();  // scalar-written totals before their copies (once per group)
        k.coefGroup = -1;
        WriteParamGrads<MODE_FULL>(k, g, false);
    }

    __aicore__ inline void Sub(KernelState<T> &k, const SubGroup &s)
    {
        const uint32_t chunks = Chunks(k.t);
        if (reduce_ || want_) {
            for (uint32_t c = 0; c < chunks; ++c) {
                ReleaseChunk(c);  // the last sub-group's rows of this chunk are applied and stored
                for (uint64_t n = ChunkBegin(k.t, c); n < ChunkBegin(k.t, c + 1); ++n) {
                    LoadRow(k, b_.dy[n * s.len], k.dy, s, n);
                    if (reduce_) {
                        LoadRow(k, b_.x[n * s.len], k.x, s, n);
                    }
                }
                AscendC::SetFlag<HardEvent::MTE2_V>(int32_t(c));
            }
        }
        if (reduce_) {
            Broadcast(k, b_, SLAB_MEAN, k.ub.v.mean, s);
            Broadcast(k, b_, SLAB_INVSTD, k.ub.v.invstd, s);
            AscendC::Duplicate(b_.slab[SLAB_SUM_DY], 0.0f, Narrow<int32_t>(s.len, "Duplicate count"));
            AscendC::Duplicate(b_.slab[SLAB_SUM_DYX], 0.0f, Narrow<int32_t>(s.len, "Duplicate count"));
            for (uint32_t c = 0; c < chunks; ++c) {
                AscendC::WaitFlag<HardEvent::MTE2_V>(int32_t(c));
                ReduceRows(b_, ChunkBegin(k.t, c), ChunkBegin(k.t, c + 1), s.len);
            }
            BNB_PERF_COMBINE_BEGIN();
            Totals(k, s);
        } else if (want_) {
            for (uint32_t c = 0; c < chunks; ++c) {
                AscendC::WaitFlag<HardEvent::MTE2_V>(int32_t(c));
            }
        }
        Coefs(k, s);
        if (reduce_) {
            BNB_PERF_COMBINE_END();
        }
        for (uint32_t c = 0; c < chunks; ++c) {
            ApplyRows(k, b_, ChunkBegin(k.t, c), ChunkBegin(k.t, c + 1), s.len, want_);
            AscendC::SetFlag<HardEvent::V_MTE3>(int32_t(c));
            AscendC::WaitFlag<HardEvent::V_MTE3>(int32_t(c));
            for (uint64_t n = ChunkBegin(k.t, c); n < ChunkBegin(k.t, c + 1); ++n) {
                StoreRow(k, k.gi, b_.dy[n * s.len], s, n);
            }
            if (reduce_ || want_) {
                AscendC::SetFlag<HardEvent::V_MTE2>(int32_t(c));     // the next loads into this chunk wait for
                AscendC::SetFlag<HardEvent::MTE3_MTE2>(int32_t(c));  // its compute and its stores
            }
        }
        if (reduce_ || want_) {
            pending_ = true;
        } else {
            // Nothing loaded (all outputs masked): the next zeros wait for these stores.
            AscendC::SetFlag<HardEvent::MTE3_V>(0);
            AscendC::WaitFlag<HardEvent::MTE3_V>(0);
        }
    }

    // Per channel: ReduceSum of the two row-sum slabs, then (S) into the group's lanes.
    __aicore__ inline void Totals(KernelState<T> &k, const SubGroup &s)
    {
        const uint32_t rs = k.t.spRowStride;
        for (uint32_t j = 0; j < s.cnt; ++j) {
            AscendC::ReduceSum(b_.slotDy[j * SLOT_FLOATS], b_.slab[SLAB_SUM_DY][j * rs], b_.slab[SLAB_PROD],
                               Narrow<int32_t>(k.t.inner, "ReduceSum count"));
            AscendC::ReduceSum(b_.slotDyx[j * SLOT_FLOATS], b_.slab[SLAB_SUM_DYX][j * rs], b_.slab[SLAB_PROD],
                               Narrow<int32_t>(k.t.inner, "ReduceSum count"));
        }
        AscendC::SetFlag<HardEvent::V_S>(0);
        AscendC::WaitFlag<HardEvent::V_S>(0);
        for (uint32_t j = 0; j < s.cnt; ++j) {
            k.ub.v.totDy.SetValue(s.lane0 + j, b_.slotDy.GetValue(j * SLOT_FLOATS));
            k.ub.v.totDyx.SetValue(s.lane0 + j, b_.slotDyx.GetValue(j * SLOT_FLOATS));
        }
        AscendC::SetFlag<HardEvent::S_V>(0);
        AscendC::WaitFlag<HardEvent::S_V>(0);
    }

    // a = weight * invstd; training: b = -a * sum_dy / n, k = -a * sum(dy * xhat) / n
    // (the two-pass LoadCoefs), then the sub-group's slabs of a, k, b.
    __aicore__ inline void Coefs(KernelState<T> &k, const SubGroup &s)
    {
        if (!want_) {
            return;
        }
        ChannelVecs &v = k.ub.v;
        AscendC::Mul(v.coefA, v.weight, v.invstd, Narrow<int32_t>(k.t.vecElems, "Mul count"));
        if (k.t.training) {
            AscendC::Muls(v.coefB, v.coefA, -k.t.invCount, Narrow<int32_t>(k.t.vecElems, "Muls count"));
            AscendC::Mul(v.coefK, v.coefB, v.totDyx, Narrow<int32_t>(k.t.vecElems, "Mul count"));
            AscendC::Mul(v.coefB, v.coefB, v.totDy, Narrow<int32_t>(k.t.vecElems, "Mul count"));
        }
        AscendC::SetFlag<HardEvent::V_S>(0);
        AscendC::WaitFlag<HardEvent::V_S>(0);
        Broadcast(k, b_, SLAB_A, v.coefA, s);
        if (k.t.training) {
            Broadcast(k, b_, SLAB_K, v.coefK, s);
            Broadcast(k, b_, SLAB_B, v.coefB, s);
        }
    }

    // Chunk c of the previous sub-group's UB is free once its compute (V) and
    // stores (MTE3) are done: the next sub-group's loads into chunk c overlap
    // the apply and stores of the chunks after it (a next sub-group of no more
    // channels puts chunk c's rows no later in UB than this one did).
    __aicore__ inline void ReleaseChunk(uint32_t c)
    {
        if (pending_) {
            AscendC::WaitFlag<HardEvent::V_MTE2>(int32_t(c));
            AscendC::WaitFlag<HardEvent::MTE3_MTE2>(int32_t(c));
        }
        if (c + 1 == chunksReleased_) {
            pending_ = false;
        }
    }

    // All of the previous sub-group's UB (the end of a group or of the launch).
    __aicore__ inline void Release()
    {
        for (uint32_t c = 0; pending_ && c < chunksReleased_; ++c) {
            ReleaseChunk(c);
        }
    }

    Buffers<T> b_;
    bool want_ = false, reduce_ = false, pending_ = false;
    uint32_t chunksReleased_ = 1;  // chunks per sub-group (their events are set together)
};

}  // namespace single_pass
}  // namespace bnb
#endif  // BATCH_NORM_KERNEL_SINGLE_PASS_H
