// Illegal calls, one per case, built against the public asc-devkit headers and
// the project's stand-ins exactly like the kernels (scripts/check_ascend_api.sh
// --probe); each must stop its core with a message that names the rule and
// this file's line (marked "PROBE <case>"). "ok" is the legal baseline.
//
// Usage: probe_api_probes CASE  (exit 0: ran clean; otherwise the core's failure)
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include "kernel_operator.h"
#include "batch_norm_kernel_narrow.h"  // the kernels' narrowing of API arguments
#include "bnb_stub_runtime.h"

using namespace AscendC;

namespace {
alignas(64) float g_gm[8192];

struct Ub {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    explicit Ub(uint32_t bytes) { pipe.InitBuffer(buf, bytes); }
    LocalTensor<float> F(uint32_t n) { return buf.Get<float>(n); }
};
// Two 4096-byte queue buffers side by side (the probes overrun the first).
template <TPosition pos>
struct TwoQueues {
    TPipe pipe;
    TQue<pos, 1> q0, q1;
    TwoQueues()
    {
        pipe.InitBuffer(q0, 1, 4096);
        pipe.InitBuffer(q1, 1, 4096);
    }
    LocalTensor<float> First() { return q0.template AllocTensor<float>(); }
};
// Two 4096-byte TBufs side by side.
struct TwoBufs {
    TPipe pipe;
    TBuf<TPosition::VECCALC> b0, b1;
    TwoBufs()
    {
        pipe.InitBuffer(b0, 4096);
        pipe.InitBuffer(b1, 4096);
    }
};
GlobalTensor<float> Gm()
{
    GlobalTensor<float> g;
    g.SetGlobalBuffer(g_gm, 8192);
    return g;
}

const std::map<std::string, std::function<void()>> &Cases()
{
    static const std::map<std::string, std::function<void()>> cases = {
        {"ok", [] {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             GlobalTensor<float> g = Gm();
             DataCopy(a, g, 1024);
             PipeBarrier<PIPE_ALL>();
             Add(a, a, a, 1024);
             Muls(a, a, 2.0f, 1024);
             PipeBarrier<PIPE_ALL>();
             DataCopy(g, a, 1024);
         }},
        {"add_unaligned", [] {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             Add(a[1], a[1], a[1], 64);  // PROBE add_unaligned
         }},
        {"muls_past_tensor", [] {
             Ub ub(16384);
             LocalTensor<float> a = ub.F(1024);
             Muls(a, a, 2.0f, 2048);  // PROBE muls_past_tensor
         }},
        {"datacopy_7_floats", [] {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             DataCopy(a, Gm(), 7);  // PROBE datacopy_7_floats
         }},
        {"datacopy_ub_plus_4", [] {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             DataCopy(a[1], Gm(), 8);  // PROBE datacopy_ub_plus_4
         }},
        {"add_repeat_255", [] {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             Add(a, a, a, 64, 255, {1, 1, 1, 8, 8, 8});  // PROBE add_repeat_255
         }},
        {"add_mask_high_word", [] {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             uint64_t mask[2] = {~0ull, 1};
             Add(a, a, a, mask, 1, {1, 1, 1, 8, 8, 8});  // PROBE add_mask_high_word
         }},
        {"add_dst_block_stride_0", [] {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             Add(a, a, a, 64, 1, {0, 1, 1, 8, 8, 8});  // PROBE add_dst_block_stride_0
         }},
        {"add_partial_overlap", [] {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             Add(a[8], a, a, 64);  // PROBE add_partial_overlap
         }},
        {"add_earlier_dst_later_src1", [] {  // 通用地址重叠约束: repeat 0 writes what repeat 1 reads as src1
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             Add(a[64], a[64], a, 64, 2, {1, 1, 1, 8, 8, 8});  // PROBE add_earlier_dst_later_src1
         }},
        {"datacopy_block_count", [] {
             Ub ub(4096 * 32);
             LocalTensor<float> a = ub.F(4096 * 8);
             DataCopyParams p(4096, 1, 0, 0);
             GlobalTensor<float> g;
             static float big[4096 * 8];
             g.SetGlobalBuffer(big, 4096 * 8);
             DataCopy(a, g, p);  // PROBE datacopy_block_count
         }},
        {"datacopypad_padding", [] {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             DataCopyExtParams p(1, 8, 0, 0, 0);
             DataCopyPadExtParams<float> pad(true, 9, 0, 0.0f);
             DataCopyPad(a, Gm(), p, pad);  // PROBE datacopypad_padding
         }},
        {"datacopypad_block_len", [] {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             DataCopyExtParams p(1, 2097152, 0, 0, 0);
             DataCopyPadExtParams<float> pad(false, 0, 0, 0.0f);
             DataCopyPad(Gm(), a, p);  // PROBE datacopypad_block_len
         }},
        // ---- narrowing at the kernel's call: reported with the unnarrowed value ----
        {"narrow_block_count", [] {
             volatile uint32_t rows = 65536 + 8;  // would wrap to 8 rows
             const uint16_t count = bnb::Narrow<uint16_t>(uint32_t(rows), "DataCopyPad blockCount");  // PROBE narrow_block_count
             DataCopyExtParams p(count, 32, 0, 0, 0);
             (void)p;
         }},
        {"narrow_count", [] {
             volatile uint64_t n = (uint64_t(1) << 32) + 64;  // would wrap to 64 elements
             Ub ub(8192);
             Duplicate(ub.F(1024), 0.0f, bnb::Narrow<int32_t>(uint64_t(n), "Duplicate count"));  // PROBE narrow_count
         }},
        // ---- pipe hazards (the rule table's tracker, fed by the stand-ins) ----
        {"raw_mte2_v_no_wait", [] {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             DataCopy(a, Gm(), 1024);
             Add(a, a, a, 1024);  // PROBE raw_mte2_v_no_wait
         }},
        {"raw_v_mte3_no_barrier", [] {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             Duplicate(a, 1.0f, 1024);
             DataCopy(Gm(), a, 1024);  // PROBE raw_v_mte3_no_barrier
         }},
        {"war_v_mte2_no_wait", [] {
             Ub ub(8192);
             LocalTensor<float> a = ub.F(1024);
             Duplicate(a, 1.0f, 1024);
             SetFlag<HardEvent::V_MTE3>(0);
             WaitFlag<HardEvent::V_MTE3>(0);
             DataCopy(Gm(), a, 1024);
             DataCopy(a, Gm()[1024], 1024);  // PROBE war_v_mte2_no_wait
         }},
        {"gm_raw_mte3_mte2", [] {
             Ub ub(16384);
             LocalTensor<float> a = ub.F(1024), b = ub.buf.Get<float>()[2048];
             Duplicate(a, 1.0f, 1024);
             PipeBarrier<PIPE_ALL>();
             DataCopy(Gm(), a, 1024);
             DataCopy(b, Gm(), 1024);  // PROBE gm_raw_mte3_mte2
         }},
        {"wait_without_set", [] {
             WaitFlag<HardEvent::MTE2_V>(3);  // PROBE wait_without_set
         }},
        {"fixed_event_id_vs_queue", [] {  // the queue's EnQue holds MTE2_V id 0, set: a second SetFlag on it
             TPipe pipe;
             TQue<TPosition::VECIN, 1> in;
             TBuf<TPosition::VECCALC> other;
             pipe.InitBuffer(in, 1, 4096);
             pipe.InitBuffer(other, 4096);
             LocalTensor<float> x = in.AllocTensor<float>(), y = other.Get<float>();
             DataCopy(x, Gm(), 1024);
             in.EnQue(x);  // look-ahead: dequeued later
             DataCopy(y, Gm()[1024], 1024);
             SetFlag<HardEvent::MTE2_V>(0);  // PROBE fixed_event_id_vs_queue
             WaitFlag<HardEvent::MTE2_V>(0);  // (would return on the queue's set)
             Muls(y, y, 2.0f, 1024);
         }},
        {"flags_order_it", [] {  // legal: the same copies ordered by flags and a queue
             TPipe pipe;
             TQue<TPosition::VECIN, 1> in;
             TQue<TPosition::VECOUT, 1> out;
             pipe.InitBuffer(in, 1, 4096);
             pipe.InitBuffer(out, 1, 4096);
             LocalTensor<float> x = in.AllocTensor<float>();
             DataCopy(x, Gm(), 1024);
             in.EnQue(x);
             x = in.DeQue<float>();
             LocalTensor<float> y = out.AllocTensor<float>();
             Muls(y, x, 2.0f, 1024);
             in.FreeTensor(x);
             out.EnQue(y);
             y = out.DeQue<float>();
             DataCopy(Gm()[1024], y, 1024);
             out.FreeTensor(y);
             SetFlag<HardEvent::MTE3_MTE2>(0);
             WaitFlag<HardEvent::MTE3_MTE2>(0);
             x = in.AllocTensor<float>();
             DataCopy(x, Gm()[1024], 1024);
             in.EnQue(x);
             x = in.DeQue<float>();
             in.FreeTensor(x);
         }},
        // ---- each UB operand stays in its own TPipe buffer ----
        {"datacopy_past_queue_buffer", [] {
             TwoQueues<TPosition::VECIN> ub;
             LocalTensor<float> x = ub.First();
             DataCopy(x, Gm(), 2048);  // PROBE datacopy_past_queue_buffer
         }},
        {"datacopy_params_past_buffer", [] {
             TwoQueues<TPosition::VECIN> ub;
             LocalTensor<float> x = ub.First();
             DataCopy(x, Gm(), DataCopyParams(2, 128, 0, 0));  // PROBE datacopy_params_past_buffer
         }},
        {"datacopypad_past_buffer", [] {
             TwoQueues<TPosition::VECOUT> ub;
             LocalTensor<float> x = ub.First();
             DataCopyExtParams p(2, 4096, 0, 0, 0);
             DataCopyPadExtParams<float> pad(false, 0, 0, 0.0f);
             DataCopyPad(x, Gm(), p, pad);  // PROBE datacopypad_past_buffer
         }},
        {"cast_past_buffer", [] {
             TwoBufs ub;
             LocalTensor<float> x = ub.b0.Get<float>();
             LocalTensor<half> y = ub.b1.Get<half>();
             Cast(x, y, RoundMode::CAST_NONE, 2048);  // PROBE cast_past_buffer
         }},
        {"reducesum_past_buffer", [] {
             TwoBufs ub;
             LocalTensor<float> x = ub.b0.Get<float>(), w = ub.b1.Get<float>();
             ReduceSum(x, x, w, 2048);  // PROBE reducesum_past_buffer
         }},
        {"setsize_past_buffer", [] {  // SetSize checks against UB only; the tensor now overlaps the next buffer
             TwoQueues<TPosition::VECIN> ub;
             LocalTensor<float> x = ub.First();
             x.SetSize(2048);
             Muls(x, x, 2.0f, 2048);  // PROBE setsize_past_buffer
         }},
    };
    return cases;
}
}  // namespace

int main(int argc, char **argv)
{
    if (argc != 2 || Cases().count(argv[1]) == 0) {
        std::fprintf(stderr, "usage: %s CASE\n", argv[0]);
        return 3;
    }
    bnb_stub::LaunchConfig cfg;
    cfg.blockNum = 1;
    cfg.kernel = Cases().at(argv[1]);
    cfg.timeoutSeconds = 60;
    const std::string failure = bnb_stub::RunCores(cfg);
    if (!failure.empty()) {
        std::fprintf(stderr, "%s\n", failure.c_str());
        return 2;
    }
    return 0;
}
