// One kernel fragment per rule of the rule table (tests/ascend_tools/rules)
// and per hazard the pipe tracker must see; each breaks it on the line marked
// "PROBE <case>" (the tests check the message names that line). "*_ok" cases
// are the legal twins and must run clean. Run on 1 core, or on 2 cores with a
// SyncAll barrier for the cross-core cases.
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>
#include "kernel_operator.h"
#include "batch_norm_kernel_narrow.h"  // the kernels' narrowing of API arguments

using namespace AscendC;

namespace {
alignas(64) float g_gm[4096];
alignas(64) float g_big[4096 * 8];

struct Ub {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    explicit Ub(uint32_t bytes) { pipe.InitBuffer(buf, bytes); }
    LocalTensor<float> F(uint32_t n) { return buf.Get<float>(n); }
};
GlobalTensor<float> Gm(float *p = g_gm, uint64_t n = 4096)
{
    GlobalTensor<float> g;
    g.SetGlobalBuffer(p, n);
    return g;
}

// The software SyncAll's workspaces: `gmInts` int32 flags in GM, `ubBytes` of UB in `pos`.
alignas(64) int32_t g_flags[64 * 8];
template <TPosition pos = TPosition::VECCALC>
struct SoftSync {
    TPipe pipe;
    TBuf<TPosition::VECCALC> data;
    TBuf<pos> work;
    GlobalTensor<int32_t> gm;
    SoftSync(uint32_t gmInts, uint32_t ubBytes)
    {
        pipe.InitBuffer(data, 8192);
        pipe.InitBuffer(work, ubBytes);
        gm.SetGlobalBuffer(g_flags, gmInts);
    }
    LocalTensor<int32_t> Ub() { return work.template Get<int32_t>(); }
    LocalTensor<float> F(uint32_t n) { return data.Get<float>(n); }
    // Every core zeroes every flag (SyncAll.md's kernel-side initialisation).
    void Zero()
    {
        Duplicate(work.template Get<float>(), 0.0f, int32_t(gm.GetSize()));
        SetFlag<HardEvent::V_MTE3>(0);
        WaitFlag<HardEvent::V_MTE3>(0);
        DataCopy(gm, Ub(), uint32_t(gm.GetSize()));
    }
};

using Case = std::function<void(uint32_t core)>;
const std::map<std::string, Case> &Cases()
{
    static const std::map<std::string, Case> cases = {
        // ---- rules ----
        {"operand_past_tensor", [](uint32_t) {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             Muls(a, a, 2.0f, 2048);  // PROBE operand_past_tensor
         }},
        {"partial_overlap", [](uint32_t) {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             Add(a[8], a, a, 64);  // PROBE partial_overlap
         }},
        {"negative_count", [](uint32_t) {
             Ub ub(8192);
             Duplicate(ub.F(1024), 0.0f, -1);  // PROBE negative_count
         }},
        {"datacopy_block_count", [](uint32_t) {
             Ub ub(4096 * 32);
             DataCopy(ub.F(4096 * 8), Gm(g_big, 4096 * 8), DataCopyParams(4096, 1, 0, 0));  // PROBE datacopy_block_count
         }},
        {"datacopy_gm_misaligned", [](uint32_t) {
             Ub ub(8192);
             GlobalTensor<float> g;
             g.SetGlobalBuffer(reinterpret_cast<float *>(reinterpret_cast<uint8_t *>(g_gm) + 2), 64);
             DataCopy(ub.F(1024), g, 8);  // PROBE datacopy_gm_misaligned
         }},
        {"datacopypad_padding", [](uint32_t) {
             Ub ub(8192);
             DataCopyExtParams p(1, 8, 0, 0, 0);
             DataCopyPadExtParams<float> pad(true, 9, 0, 0.0f);
             DataCopyPad(ub.F(1024), Gm(), p, pad);  // PROBE datacopypad_padding
         }},
        {"datacopypad_block_len", [](uint32_t) {
             Ub ub(8192);
             DataCopyPad(Gm(), ub.F(1024), DataCopyExtParams(1, 2097152, 0, 0, 0));  // PROBE datacopypad_block_len
         }},
        {"datacopypad_element", [](uint32_t) {
             Ub ub(8192);
             DataCopyPad(Gm(), ub.F(1024), DataCopyExtParams(1, 6, 0, 0, 0));  // PROBE datacopypad_element
         }},
        // ---- narrowing at the kernel's call: reported with the unnarrowed value ----
        {"narrow_block_count", [](uint32_t) {
             volatile uint32_t rows = 65536 + 8;  // would wrap to 8 rows
             const uint16_t count = bnb::Narrow<uint16_t>(uint32_t(rows), "DataCopyPad blockCount");  // PROBE narrow_block_count
             DataCopyExtParams p(count, 32, 0, 0, 0);
             (void)p;
         }},
        {"narrow_count", [](uint32_t) {
             volatile uint64_t n = (uint64_t(1) << 32) + 64;  // would wrap to 64 elements
             Ub ub(8192);
             Duplicate(ub.F(1024), 0.0f, bnb::Narrow<int32_t>(uint64_t(n), "Duplicate count"));  // PROBE narrow_count
         }},
        // ---- pipe hazards inside a core ----
        {"raw_mte2_v", [](uint32_t) {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             DataCopy(a, Gm(), 64);
             Adds(a, a, 1.0f, 64);  // PROBE raw_mte2_v
         }},
        {"raw_mte2_v_ok", [](uint32_t) {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             DataCopy(a, Gm(), 64);
             SetFlag<HardEvent::MTE2_V>(0);
             WaitFlag<HardEvent::MTE2_V>(0);
             Adds(a, a, 1.0f, 64);
         }},
        {"raw_v_mte3", [](uint32_t) {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             Duplicate(a, 1.0f, 64);
             DataCopy(Gm(), a, 64);  // PROBE raw_v_mte3
         }},
        {"war_v_mte2", [](uint32_t) {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024), b = ub.F(1024)[512];
             Duplicate(a, 1.0f, 1024);
             PipeBarrier<PIPE_ALL>();
             Adds(b, a, 1.0f, 64);
             DataCopy(a, Gm(), 64);  // PROBE war_v_mte2
         }},
        {"raw_v_s", [](uint32_t) {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             Duplicate(a, 1.0f, 64);
             (void)a.GetValue(3);  // PROBE raw_v_s
         }},
        {"raw_v_s_ok", [](uint32_t) {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             Duplicate(a, 1.0f, 64);
             SetFlag<HardEvent::V_S>(1);
             WaitFlag<HardEvent::V_S>(1);
             (void)a.GetValue(3);
         }},
        {"waw_mte2_mte2", [](uint32_t) {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             DataCopy(a, Gm(), 64);
             DataCopy(a, Gm()[64], 64);  // PROBE waw_mte2_mte2
         }},
        {"waw_mte2_mte2_ok", [](uint32_t) {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             DataCopy(a, Gm(), 64);
             PipeBarrier<PIPE_MTE2>();
             DataCopy(a, Gm()[64], 64);
         }},
        {"set_twice", [](uint32_t) {
             SetFlag<HardEvent::MTE2_V>(1);
             SetFlag<HardEvent::MTE2_V>(1);  // PROBE set_twice
         }},
        {"wait_without_set", [](uint32_t) {
             WaitFlag<HardEvent::MTE2_V>(5);  // PROBE wait_without_set
         }},
        {"queue_orders_ok", [](uint32_t) {
             TPipe pipe;
             TQue<QuePosition::VECIN, 1> in;
             TQue<QuePosition::VECOUT, 1> out;
             pipe.InitBuffer(in, 1, 256);
             pipe.InitBuffer(out, 1, 256);
             for (int i = 0; i < 2; ++i) {
                 LocalTensor<float> a = in.AllocTensor<float>();
                 DataCopy(a, Gm()[i * 64], 64);
                 in.EnQue(a);
                 LocalTensor<float> b = in.DeQue<float>();
                 LocalTensor<float> c = out.AllocTensor<float>();
                 Adds(c, b, 1.0f, 64);
                 in.FreeTensor(b);
                 out.EnQue(c);
                 LocalTensor<float> d = out.DeQue<float>();
                 DataCopy(Gm()[i * 64], d, 64);
                 out.FreeTensor(d);
             }
         }},
        {"queue_reuse_without_free", [](uint32_t) {
             TPipe pipe;
             TQue<QuePosition::VECIN, 1> in;
             pipe.InitBuffer(in, 1, 256);
             LocalTensor<float> a = in.AllocTensor<float>();
             DataCopy(a, Gm(), 64);
             in.EnQue(a);
             LocalTensor<float> b = in.DeQue<float>();
             Adds(b, b, 1.0f, 64);
             DataCopy(b, Gm()[64], 64);  // PROBE queue_reuse_without_free
         }},
        // ---- GM and the scalar data cache (one core) ----
        {"scalar_read_after_mte3", [](uint32_t) {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             Duplicate(a, 1.0f, 64);
             PipeBarrier<PIPE_ALL>();
             DataCopy(Gm(), a, 64);
             PipeBarrier<PIPE_ALL>();
             (void)Gm().GetValue(3);  // PROBE scalar_read_after_mte3
         }},
        {"scalar_read_after_mte3_ok", [](uint32_t) {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             Duplicate(a, 1.0f, 64);
             PipeBarrier<PIPE_ALL>();
             DataCopy(Gm(), a, 64);
             PipeBarrier<PIPE_ALL>();
             DataCacheCleanAndInvalid<float, CacheLine::SINGLE_CACHE_LINE, DcciDst::CACHELINE_OUT>(Gm());
             (void)Gm().GetValue(3);
         }},
        {"scalar_store_then_mte2", [](uint32_t) {
             Ub ub(8192);
             Gm().SetValue(2, 5.0f);
             PipeBarrier<PIPE_ALL>();
             DataCopy(ub.F(1024), Gm(), 64);  // PROBE scalar_store_then_mte2
         }},
        {"scalar_store_then_mte2_ok", [](uint32_t) {
             Ub ub(8192);
             Gm().SetValue(2, 5.0f);
             DataCacheCleanAndInvalid<float, CacheLine::SINGLE_CACHE_LINE, DcciDst::CACHELINE_OUT>(Gm());
             PipeBarrier<PIPE_ALL>();
             DataCopy(ub.F(1024), Gm(), 64);
         }},
        // ---- across cores (2 cores) ----
        {"cross_core_race", [](uint32_t core) {
             KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0);
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             Duplicate(a, float(core + 1), 64);
             PipeBarrier<PIPE_ALL>();
             DataCopy(Gm(), a, 64);  // PROBE cross_core_race
         }},
        {"cross_core_sync_ok", [](uint32_t core) {
             KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0);
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             if (core == 0) {
                 Duplicate(a, 3.0f, 64);
                 PipeBarrier<PIPE_ALL>();
                 DataCopy(Gm(), a, 64);
             }
             SyncAll();
             if (core == 1) {
                 DataCopy(a, Gm(), 64);
                 DataCacheCleanAndInvalid<float, CacheLine::ENTIRE_DATA_CACHE, DcciDst::CACHELINE_OUT>(Gm());
                 (void)Gm().GetValue(1);
             }
         }},
        {"cross_core_scalar_stale", [](uint32_t core) {
             KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0);
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             if (core == 0) {
                 Duplicate(a, 3.0f, 64);
                 PipeBarrier<PIPE_ALL>();
                 DataCopy(Gm(), a, 64);
             }
             SyncAll();
             if (core == 1) {
                 (void)Gm().GetValue(1);  // PROBE cross_core_scalar_stale
             }
         }},
        // ---- the software SyncAll (SyncAll.md, 软同步), 2 cores ----
        {"soft_sync_orders_gm_ok", [](uint32_t core) {
             SoftSync<> s(16, 64);
             s.Zero();
             LocalTensor<float> a = s.F(1024);
             if (core == 0) {
                 Duplicate(a, 3.0f, 64);
                 PipeBarrier<PIPE_ALL>();
                 DataCopy(Gm(), a, 64);
             }
             SyncAll(s.gm, s.Ub(), 2);
             if (core == 1) {
                 DataCopy(a, Gm(), 64);
             }
             SyncAll(s.gm, s.Ub(), 2);  // a second call in the launch: the flags count, no new zeroing
             if (core == 0) {
                 DataCopy(Gm(), a, 64);
             }
         }},
        {"soft_sync_race", [](uint32_t core) {
             SoftSync<> s(16, 64);
             s.Zero();
             LocalTensor<float> a = s.F(1024);
             SyncAll(s.gm, s.Ub(), 2);
             Duplicate(a, float(core + 1), 64);
             PipeBarrier<PIPE_ALL>();
             DataCopy(Gm(), a, 64);  // PROBE soft_sync_race
         }},
        {"soft_sync_not_zeroed", [](uint32_t core) {
             SoftSync<> s(16, 64);
             if (core == 0) {
                 for (int32_t &f : g_flags) f = 0x5A5A5A5A;  // what a fresh workspace may hold
             }
             SyncAll(s.gm, s.Ub(), 1);  // PROBE soft_sync_not_zeroed
         }},
        {"soft_sync_gm_small", [](uint32_t) {
             SoftSync<> s(8, 64);
             s.Zero();
             SyncAll(s.gm, s.Ub(), 2);  // PROBE soft_sync_gm_small
         }},
        {"soft_sync_ub_small", [](uint32_t) {
             SoftSync<> s(16, 32);
             SyncAll(s.gm, s.Ub(), 2);  // PROBE soft_sync_ub_small
         }},
        {"soft_sync_ub_position", [](uint32_t) {
             SoftSync<TPosition::A1> s(16, 64);
             SyncAll(s.gm, s.Ub(), 2);  // PROBE soft_sync_ub_position
         }},
        {"soft_sync_used_cores", [](uint32_t) {
             SoftSync<> s(24, 96);
             SyncAll(s.gm, s.Ub(), 3);  // PROBE soft_sync_used_cores
         }},
    };
    return cases;
}
}  // namespace

// 0: ran clean; 2: refused (reason in err); 3: no such case.
extern "C" int bnb_sim_rule_probe(const char *soc, const char *name, int cores, char *err, int errLen)
{
    auto it = Cases().find(name);
    if (it == Cases().end()) {
        return 3;
    }
    const SimSoc &s = SimFindSoc(soc);
    SimBarrier barrier{uint32_t(cores)};
    std::vector<std::string> errors(cores);
    std::vector<std::thread> threads;
    for (int c = 0; c < cores; ++c) {
        threads.emplace_back([&, c] {
            SimCore &core = SimThisCore();
            core.Reset(s, s.ubBytes, uint32_t(c), uint32_t(cores));
            core.barrier = &barrier;
            core.scheduleMode = 1;
            try {
                it->second(uint32_t(c));
            } catch (const SimError &e) {
                errors[c] = e.what();
                barrier.Abort();
            }
        });
    }
    for (auto &t : threads) {
        t.join();
    }
    for (const auto &e : errors) {
        if (!e.empty() && e.find("another core failed") == std::string::npos) {
            std::snprintf(err, errLen, "%s", e.c_str());
            return 2;
        }
    }
    return 0;
}
