// Small programs that break one hardware rule each; the ascend_sim tests
// check that the CPU build refuses every one of them (and accepts "ok").
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include "kernel_operator.h"

using namespace AscendC;

namespace {
float g_gm[1024];

// op(dst, src0, src1) on three initialised 64-float slices of one UB buffer.
template <typename Op>
void OnSlices(Op op)
{
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 3 * 256);
    LocalTensor<float> t = buf.Get<float>();
    Duplicate(t, 1.0f, 3 * 64);
    op(t, t[64], t[128]);
}

// Two VECOUT buffers stored and freed: each holds an MTE3_V event id until allocated again.
void StoreAndFreeTwo(TQue<QuePosition::VECOUT, 2> &q)
{
    GlobalTensor<float> gm;
    gm.SetGlobalBuffer(g_gm, 1024);
    for (int i = 0; i < 2; ++i) {
        LocalTensor<float> a = q.AllocTensor<float>();
        Duplicate(a, 1.0f, 64);
        q.EnQue(a);
        LocalTensor<float> b = q.DeQue<float>();
        DataCopy(gm[i * 64], b, 64);
        q.FreeTensor(b);
    }
}

// n MTE3_V event ids taken by the kernel, then given back.
void TakeMte3VIds(TPipe &pipe, int n)
{
    TEventID ids[8];
    for (int i = 0; i < n; ++i) ids[i] = pipe.AllocEventID<HardEvent::MTE3_V>();
    for (int i = 0; i < n; ++i) pipe.ReleaseEventID<HardEvent::MTE3_V>(ids[i]);
}

// A queue of two buffers and `tbufs` more buffers in one TPipe.
void ManyBuffers(int tbufs)
{
    TPipe pipe;
    TQue<QuePosition::VECIN, 2> q;
    pipe.InitBuffer(q, 2, 32);
    TBuf<TPosition::VECCALC> bufs[63];
    for (int i = 0; i < tbufs; ++i) pipe.InitBuffer(bufs[i], 32);
}

const std::map<std::string, std::function<void()>> &Cases()
{
    static const std::map<std::string, std::function<void()>> cases = {
        {"ok", [] {
             TPipe pipe;
             TQue<QuePosition::VECIN, 2> q;
             pipe.InitBuffer(q, 2, 256);
             GlobalTensor<float> gm;
             gm.SetGlobalBuffer(g_gm, 1024);
             LocalTensor<float> a = q.AllocTensor<float>();
             DataCopy(a, gm, 64);
             q.EnQue(a);
             LocalTensor<float> b = q.DeQue<float>();
             Adds(b, b, 1.0f, 64);
             q.FreeTensor(b);
         }},
        // Four VECIN buffers enqueued hold four MTE2_V event ids; one more for the kernel.
        {"event_ids_enqueued", [] {
             TPipe pipe;
             TQue<QuePosition::VECIN, 4> q;
             pipe.InitBuffer(q, 4, 256);
             GlobalTensor<float> gm;
             gm.SetGlobalBuffer(g_gm, 1024);
             for (int i = 0; i < 4; ++i) {
                 LocalTensor<float> a = q.AllocTensor<float>();
                 DataCopy(a, gm[i * 64], 64);
                 q.EnQue(a);
             }
             const TEventID id = pipe.AllocEventID<HardEvent::MTE2_V>();
             for (int i = 0; i < 4; ++i) {
                 LocalTensor<float> b = q.DeQue<float>();
                 q.FreeTensor(b);
             }
             pipe.ReleaseEventID<HardEvent::MTE2_V>(id);
         }},
        // Two VECOUT buffers freed after their stores hold two MTE3_V event ids; three more for the kernel.
        {"event_ids_freed", [] {
             TPipe pipe;
             TQue<QuePosition::VECOUT, 2> q;
             pipe.InitBuffer(q, 2, 256);
             StoreAndFreeTwo(q);
             TakeMte3VIds(pipe, 3);
         }},
        // The same, with the two buffers allocated again first: AllocTensor returned their ids.
        {"event_ids_freed_then_allocated", [] {
             TPipe pipe;
             TQue<QuePosition::VECOUT, 2> q;
             pipe.InitBuffer(q, 2, 256);
             StoreAndFreeTwo(q);
             LocalTensor<float> held[2];
             for (auto &t : held) t = q.AllocTensor<float>();
             TakeMte3VIds(pipe, 4);
             for (auto &t : held) q.FreeTensor(t);
         }},
        // 65 buffers in one TPipe (QBUF_MAX_LEN is 64, TQue and TBuf buffers together); 64 run.
        {"too_many_buffers", [] { ManyBuffers(63); }},
        {"max_buffers", [] { ManyBuffers(62); }},
        {"unaligned_datacopy", [] {
             TPipe pipe;
             TBuf<TPosition::VECCALC> buf;
             pipe.InitBuffer(buf, 256);
             GlobalTensor<float> gm;
             gm.SetGlobalBuffer(g_gm, 1024);
             DataCopy(buf.Get<float>(), gm, 7);  // 28 bytes
         }},
        {"unaligned_ub_address", [] {
             TPipe pipe;
             TBuf<TPosition::VECCALC> buf;
             pipe.InitBuffer(buf, 256);
             LocalTensor<float> t = buf.Get<float>();
             Adds(t[3], t[3], 1.0f, 8);
         }},
        {"ub_overflow", [] {
             TPipe pipe;
             TBuf<TPosition::VECCALC> a, b;
             pipe.InitBuffer(a, SimThisCore().ubBytes - 64);
             pipe.InitBuffer(b, 96);
         }},
        {"use_after_free", [] {
             TPipe pipe;
             TQue<QuePosition::VECIN, 1> q;
             pipe.InitBuffer(q, 1, 256);
             LocalTensor<float> a = q.AllocTensor<float>();
             q.FreeTensor(a);
             Duplicate(a, 0.0f, 8);
         }},
        {"queue_depth", [] {
             TPipe pipe;
             TQue<QuePosition::VECIN, 1> q;
             pipe.InitBuffer(q, 2, 256);
             q.EnQue(q.AllocTensor<float>());
             q.EnQue(q.AllocTensor<float>());
         }},
        {"alloc_beyond_buffers", [] {
             TPipe pipe;
             TQue<QuePosition::VECIN, 2> q;
             pipe.InitBuffer(q, 1, 256);
             q.AllocTensor<float>();
             q.AllocTensor<float>();
         }},
        {"gm_out_of_bounds", [] {
             TPipe pipe;
             TBuf<TPosition::VECCALC> buf;
             pipe.InitBuffer(buf, 256);
             GlobalTensor<float> gm;
             gm.SetGlobalBuffer(g_gm, 16);
             DataCopy(buf.Get<float>(), gm, 24);
         }},
        {"datacopypad", [] {
             TPipe pipe;
             TBuf<TPosition::VECCALC> buf;
             pipe.InitBuffer(buf, 256);
             GlobalTensor<float> gm;
             gm.SetGlobalBuffer(g_gm, 1024);
             DataCopyExtParams p(1, 7 * sizeof(float), 0, 0, 0);
             DataCopyPadExtParams<float> pad(false, 0, 0, 0.0f);
             DataCopyPad(buf.Get<float>(), gm, p, pad);
         }},
        {"mul_add_dst", [] { OnSlices([](auto d, auto a, auto b) { MulAddDst(d, a, b, 64); }); }},
        {"fused_mul_add", [] { OnSlices([](auto d, auto a, auto b) { FusedMulAdd(d, a, b, 64); }); }},
        {"sync_all", [] {
             KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0);
             SimBarrier one(1);
             SimThisCore().barrier = &one;
             SimThisCore().scheduleMode = 1;
             SyncAll();
         }},
        {"sync_all_without_schedule_mode", [] {
             KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0);
             SimBarrier one(1);
             SimThisCore().barrier = &one;
             SyncAll();
         }},
        {"sync_all_without_kernel_type", [] {
             SimBarrier one(1);
             SimThisCore().barrier = &one;
             SimThisCore().scheduleMode = 1;
             SyncAll();
         }},
        {"dcci", [] {
             GlobalTensor<float> gm;
             gm.SetGlobalBuffer(g_gm, 1024);
             gm.SetValue(0, 1.0f);
             DataCacheCleanAndInvalid<float, CacheLine::SINGLE_CACHE_LINE, DcciDst::CACHELINE_OUT>(gm);
         }},
    };
    return cases;
}
}  // namespace

// 0: ran clean; 2: refused (reason in err); 3: no such case.
extern "C" int bnb_sim_misuse(const char *soc, const char *name, char *err, int errLen)
{
    auto it = Cases().find(name);
    if (it == Cases().end()) {
        return 3;
    }
    try {
        SimThisCore().Reset(SimFindSoc(soc), SimFindSoc(soc).ubBytes, 0, 1);
        it->second();
        return 0;
    } catch (const SimError &e) {
        std::snprintf(err, errLen, "%s", e.what());
        return 2;
    }
}
