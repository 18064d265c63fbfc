// The pipe-hazard tracker of the real-API build: the stand-ins' instructions
// (bnb_stub_impl.h) feed the rule table's tracker (tests/ascend_tools/rules/
// bnb_hazards.h, the one the simulator uses) with their pipe and the UB / GM
// bytes they read and write; set_flag / wait_flag / pipe_barrier (called by
// the headers' SetFlag / WaitFlag / PipeBarrier and by their TQue EnQue /
// DeQue / AllocTensor / FreeTensor events) and SyncAll order them. Each UB
// operand must also stay inside the TPipe buffer its first byte lies in (the
// headers announce every InitBuffer through AscendCBufInit).
//
// A core is one process, so this state is the core's. The instruction's
// kernel line is recorded as a call stack and resolved only for a message.
#include <map>
#include "kernel_operator.h"
#include "../rules/bnb_hazards.h"
#include "bnb_stub_runtime.h"

namespace bnb_stub {
namespace {
namespace H = bnb_hazards;

uint64_t UbBase()
{
    return reinterpret_cast<uint64_t>(
        AscendC::ConstDefiner::Instance().hardwareCpuBufferMap.at(AscendC::Hardware::UB));
}
bool InUbSpace(uint64_t addr, uint64_t base) { return addr >= base && addr < base + AscendC::TOTAL_UB_SIZE; }

H::CoreTracker &Tracker()
{
    static H::CoreTracker tracker;
    return tracker;
}
std::map<uint64_t, uint64_t> &Buffers()  // UB offset of a TPipe buffer -> its end
{
    static std::map<uint64_t, uint64_t> buffers;
    return buffers;
}

int PipeOf(pipe_t p)
{
    switch (p) {
        case PIPE_S: return H::S;
        case PIPE_V: return H::V;
        case PIPE_MTE2: return H::MTE2;
        case PIPE_MTE3: return H::MTE3;
        case PIPE_ALL: return H::NPIPE;
        default: return -1;  // cube pipes: none of the vector core's
    }
}

// The operand's spans as tracker ranges; a UB operand must stay in its buffer.
void Ranges(const char *intr, const Operand &op, uint64_t base, const bnb_rules::Src &src, std::vector<H::Range> &out)
{
    if (op.spans.empty()) return;
    uint64_t lo = ~0ull, hi = 0;
    bool ub = false;
    for (const auto &s : op.spans) {
        const bool inUb = InUbSpace(s.first, base);
        ub = ub || inUb;
        const H::Range r = inUb ? H::Range{H::Space::UB, s.first - base, s.second - base}
                                : H::Range{H::Space::GM, s.first, s.second};
        lo = std::min(lo, r.lo), hi = std::max(hi, r.hi);
        out.push_back(r);
    }
    if (!ub) return;
    const auto &bufs = Buffers();
    auto it = bufs.upper_bound(lo);
    if (it == bufs.begin()) return;  // not in a TPipe buffer (the UB-range rules still apply)
    --it;
    if (lo < it->second) {
        bnb_rules::InBuffer(intr, op.name, lo, hi, it->first, it->second, src);
    }
}
}  // namespace

void PipeOp(pipe_t pipe, const char *intr, const std::vector<const Operand *> &reads,
            const std::vector<const Operand *> &writes)
{
    const int p = PipeOf(pipe);
    const bnb_rules::Src src{nullptr, 0, CaptureTrace()};
    const uint64_t base = UbBase();
    std::vector<H::Range> r, w;
    for (const Operand *o : reads) Ranges(intr, *o, base, src, r);
    for (const Operand *o : writes) Ranges(intr, *o, base, src, w);
    Tracker().Op(p, {intr, src, p}, r, w);
}

void PipeSetFlag(pipe_t from, pipe_t to, int64_t id)
{
    const int a = PipeOf(from), b = PipeOf(to);
    if (a >= 0 && b >= 0 && a != H::NPIPE && b != H::NPIPE) {
        Tracker().SetFlag(a, b, id, {"SetFlag", {nullptr, 0, CaptureTrace()}, a});
    }
}

void PipeWaitFlag(pipe_t from, pipe_t to, int64_t id)
{
    const int a = PipeOf(from), b = PipeOf(to);
    if (a >= 0 && b >= 0 && a != H::NPIPE && b != H::NPIPE) {
        Tracker().WaitFlag(a, b, id, {"WaitFlag", {nullptr, 0, CaptureTrace()}, b});
    }
}

void PipeBarrierOf(pipe_t pipe)
{
    const int p = PipeOf(pipe);
    if (p >= 0) {
        Tracker().Barrier(p);
    }
}

void PipeBuffers(uint64_t addr, uint64_t num, uint64_t len)
{
    const uint64_t base = UbBase();
    if (!InUbSpace(addr, base) || len == 0) return;
    auto &bufs = Buffers();
    const uint64_t lo = addr - base, hi = lo + num * len;
    // A new TPipe reuses the UB: buffers it overlaps are gone.
    for (auto it = bufs.begin(); it != bufs.end();) {
        it = (it->first < hi && lo < it->second) ? bufs.erase(it) : std::next(it);
    }
    for (uint64_t i = 0; i < num; ++i) {
        bufs[lo + i * len] = lo + (i + 1) * len;
    }
}
}  // namespace bnb_stub
