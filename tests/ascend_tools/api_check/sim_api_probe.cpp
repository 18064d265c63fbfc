// Every Ascend C API the project's simulator (tests/ascend_tools/sim) provides,
// called with the argument types the simulator declares. Compiled by
// scripts/check_ascend_api.sh against the simulator and against the public
// asc-devkit headers (CPU-debug mode, per SoC): when the simulator drifts from
// the real API -- a name, a parameter type, a template parameter, an enum
// value -- one of the two builds fails. Not a kernel: nothing here runs.
#include <cstdint>
#include "kernel_operator.h"
#include "batch_norm_soc_features.h"

namespace probe {
using namespace AscendC;

template <typename T>
__aicore__ inline void Vector(const LocalTensor<T> &a, const LocalTensor<T> &b, const LocalTensor<T> &c)
{
    const int32_t n = 64;
    Add(a, b, c, n);
    Sub(a, b, c, n);
    Mul(a, b, c, n);
    Div(a, b, c, n);
    const T s = static_cast<T>(2.0f);
    Adds(a, b, s, n);
    Muls(a, b, s, n);
    Axpy(a, b, s, n);
    Sqrt(a, b, n);
    Duplicate(a, s, n);
    uint64_t bits[2] = {0xFFull, 0};
    BinaryRepeatParams strided(uint8_t(1), uint8_t(1), uint8_t(6), uint8_t(8), uint8_t(8), uint8_t(49));
    strided.dstBlkStride = 1;
    strided.src0BlkStride = 1;
    strided.src1BlkStride = 6;
    strided.dstRepStride = 8;
    strided.src0RepStride = 8;
    strided.src1RepStride = 49;
    Add(a, b, c, bits, uint8_t(1), strided);
    Sub(a, b, c, bits, uint8_t(1), strided);
    Mul(a, b, c, bits, uint8_t(1), strided);
    Duplicate(a, s, bits, uint8_t(1), uint16_t(1), uint8_t(8));
    ReduceSum(a, b, c, n);
    DataCopy(a, b, uint32_t(n));
    DataCopy(a, b, DataCopyParams(uint16_t(2), uint16_t(1), uint16_t(1), uint16_t(1)));
#if BNB_SOC_HAS_MUL_ADD
    MulAddDst(a, b, c, n);
    FusedMulAdd(a, b, c, n);
#endif
#if BNB_SOC_HAS_SEG_SUM
    const int32_t mask = 8, repeats = 2, dstRep = 1, srcBlk = 1, srcRep = 1;
    ReduceRepeat<ReduceType::SUM, T, T>(a, b, mask, repeats, dstRep, srcBlk, srcRep);
    ReduceRepeat<ReduceType::SUM, T, T, true>(a, b, mask, repeats, dstRep, srcBlk, srcRep,
                                              ReduceOrder::ORDER_ONLY_VALUE);
    WholeReduceSum<T>(a, b, mask, repeats, dstRep, srcBlk, srcRep);
#endif
#if BNB_SOC_HAS_BLOCK_REDUCE_SUM
    ReduceDataBlock<ReduceType::SUM, T, T>(a, b, int32_t(64), int32_t(2), int32_t(1), int32_t(1), int32_t(8));
    BlockReduceSum<T>(a, b, int32_t(2), int32_t(64), int32_t(1), int32_t(1), int32_t(8));
#endif
#if BNB_SOC_HAS_SEG_SUM
    BrcbRepeatParams brcb(uint16_t(1), uint16_t(8));
    brcb.dstBlkStride = 1;
    brcb.dstRepStride = 8;
    Brcb(a, b, uint8_t(1), brcb);
    CopyRepeatParams copy(uint16_t(1), uint16_t(0), uint16_t(8), uint16_t(1));
    copy.dstStride = 1;
    copy.srcStride = 0;
    copy.dstRepeatSize = 8;
    copy.srcRepeatSize = 1;
    Copy(a, b, uint64_t(64), uint8_t(1), copy);
#endif
#if BNB_SOC_HAS_GATHER
    const LocalTensor<uint32_t> offsets = c.template ReinterpretCast<uint32_t>();
    Gather(a, b, offsets, uint32_t(0), uint32_t(n));
    Gather(a, b, offsets, uint32_t(0), uint64_t(64), uint8_t(1), uint16_t(8));
#endif
}

template <typename T>
__aicore__ inline void Copies(const LocalTensor<T> &ub, GlobalTensor<T> &gm)
{
    DataCopy(ub, gm, uint32_t(64));
    DataCopy(gm, ub, uint32_t(64));
    DataCopyParams blocks(uint16_t(2), uint16_t(1), uint16_t(0), uint16_t(0));
    blocks.blockCount = 1;
    blocks.blockLen = 1;
    blocks.srcStride = 0;
    blocks.dstStride = 0;
    DataCopy(ub, gm, blocks);
    DataCopy(gm, ub, blocks);
#if BNB_SOC_HAS_DATA_COPY_PAD
    DataCopyExtParams ext(uint16_t(1), uint32_t(6), uint32_t(0), uint32_t(0), uint32_t(0));
    ext.blockCount = 1;
    ext.blockLen = 8;
    ext.srcStride = 0;
    ext.dstStride = 0;
    ext.rsv = 0;
    DataCopyPadExtParams<T> pad(false, uint8_t(0), uint8_t(0), static_cast<T>(0));
    pad.isPad = false;
    pad.leftPadding = 0;
    pad.rightPadding = 0;
    pad.paddingValue = static_cast<T>(0);
    DataCopyPad(ub, gm, ext, pad);
    DataCopyPad(gm, ub, ext);
#endif
    GlobalTensor<T> view = gm[uint64_t(8)];
    const T v = view.GetValue(uint64_t(0));
    view.SetValue(uint64_t(1), v);
    const __gm__ T *addr = view.GetPhyAddr();
    (void)addr;
    const uint64_t size = view.GetSize();
    (void)size;
    gm.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(0x1000), uint64_t(64));
    gm.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(0x1000));
#if BNB_SOC_HAS_DCCI
    DataCacheCleanAndInvalid<T, CacheLine::ENTIRE_DATA_CACHE, DcciDst::CACHELINE_OUT>(gm);
#endif
}

__aicore__ inline void Pipes(GM_ADDR workspace)
{
    TPipe pipe;
    TQue<QuePosition::VECIN, 2> in;
    TQue<QuePosition::VECOUT, 2> out;
    TBuf<TPosition::VECCALC> calc;
    pipe.InitBuffer(in, uint8_t(2), uint32_t(1024));
    pipe.InitBuffer(out, uint8_t(2), uint32_t(1024));
    pipe.InitBuffer(calc, uint32_t(1024));
    LocalTensor<float> a = in.AllocTensor<float>();
    in.EnQue(a);
    LocalTensor<float> b = in.DeQue<float>();
    LocalTensor<float> c = calc.Get<float>();
    LocalTensor<float> d = calc.Get<float>(uint32_t(64));
    LocalTensor<half> h = c.ReinterpretCast<half>();
    LocalTensor<float> e = c[uint32_t(8)];
    const float x = e.GetValue(uint32_t(0));
    e.SetValue(uint32_t(1), x);
    const uint32_t n = e.GetSize();
    (void)n;
    const int32_t pos = e.GetPosition();
    (void)pos;
    Vector(b, c, d);
    Vector(h, h, h);
    Cast(h, c, RoundMode::CAST_RINT, uint32_t(64));
    Cast(c, h, RoundMode::CAST_NONE, uint32_t(64));
#if BNB_SOC_HAS_BF16
    LocalTensor<bfloat16_t> bf = c.ReinterpretCast<bfloat16_t>();
    Cast(bf, c, RoundMode::CAST_RINT, uint32_t(64));
    Cast(c, bf, RoundMode::CAST_NONE, uint32_t(64));
#endif
    in.FreeTensor(b);
    LocalTensor<float> o = out.AllocTensor<float>();
    out.EnQue(o);
    LocalTensor<float> p = out.DeQue<float>();
    out.FreeTensor(p);
    GlobalTensor<float> gf;
    GlobalTensor<half> gh;
    Copies(c, gf);
    Copies(h, gh);
    PipeBarrier<PIPE_ALL>();
    PipeBarrier<PIPE_V>();
    PipeBarrier<PIPE_MTE2>();
    PipeBarrier<PIPE_MTE3>();
    const int32_t ev = static_cast<int32_t>(pipe.FetchEventID(HardEvent::V_MTE3));
    SetFlag<HardEvent::V_MTE3>(ev);
    WaitFlag<HardEvent::V_MTE3>(ev);
    SetFlag<HardEvent::MTE2_V>(ev);
    WaitFlag<HardEvent::MTE2_V>(ev);
    const TEventID held = pipe.AllocEventID<HardEvent::MTE3_V>();
    SetFlag<HardEvent::MTE3_V>(held);
    WaitFlag<HardEvent::MTE3_V>(held);
    SetFlag<HardEvent::V_S>(ev);
    WaitFlag<HardEvent::V_S>(ev);
    SetFlag<HardEvent::S_MTE3>(ev);
    WaitFlag<HardEvent::S_MTE3>(ev);
    pipe.ReleaseEventID<HardEvent::MTE3_V>(held);
    TPipe *current = GetTPipePtr();
    (void)current;
    const int64_t idx = GetBlockIdx() + GetBlockNum();
    (void)idx;
    GM_ADDR user = GetUserWorkspace(workspace);
    (void)user;
#if BNB_SOC_HAS_SYNC_ALL
    SyncAll();
    SyncAll<true>();
#endif
#if BNB_SOC_HAS_SOFT_SYNC_ALL
    GlobalTensor<int32_t> flags;
    flags.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t *>(workspace), uint64_t(64));
    LocalTensor<int32_t> flagsUb = calc.Get<int32_t>();
    DataCopy(flags, flagsUb, uint32_t(64));
    SyncAll(flags, flagsUb, int32_t(1));
    SyncAll<true>(flags, flagsUb);
#endif
    pipe.Destroy();
}
}  // namespace probe

extern "C" __global__ __aicore__ void bnb_sim_api_probe(GM_ADDR workspace)
{
#if BNB_SOC_HAS_SYNC_ALL
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0);
#endif
    const KernelMetaType types[] = {KERNEL_TYPE_AIV_ONLY, KERNEL_TYPE_MIX_AIV_1_0};
    (void)types;
    const AscendC::RoundMode modes[] = {AscendC::RoundMode::CAST_NONE, AscendC::RoundMode::CAST_RINT,
                                        AscendC::RoundMode::CAST_FLOOR, AscendC::RoundMode::CAST_CEIL,
                                        AscendC::RoundMode::CAST_ROUND, AscendC::RoundMode::CAST_TRUNC,
                                        AscendC::RoundMode::CAST_ODD};
    (void)modes;
    const uint32_t blk = AscendC::ONE_BLK_SIZE + AscendC::ONE_REPEAT_BYTE_SIZE;
    (void)blk;
    probe::Pipes(workspace);
}
