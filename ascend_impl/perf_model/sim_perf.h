// Performance model of the CPU build (tests/ascend_tools/sim): while a launch runs
// under perf_launch.cpp, every copy, vector instruction, scalar UB / GM
// access, event, queue hand-over, barrier and SyncAll of each core is counted
// and placed on a per-core timeline of four pipes (S, V, MTE2, MTE3).
//
// Timeline rules (one core):
//   - the scalar unit issues instructions in program order; an instruction on
//     pipe P starts at max(P free, issue time) and occupies P for its cost:
//       vector  (vector_issue_cycles + repeats) / clock, a repeat being
//               vector_bytes of the wider operand type;
//       copy    bytes / (the core's GM share), its data landing
//               copy_latency_ns later (copies stream back to back; a
//               consumer waits for the landing);
//       scalar  scalar_ns (UB) or copy_latency_ns (GM);
//   - SetFlag<A_B> records when everything issued to A so far has finished,
//     WaitFlag<A_B> holds B until then; TQue EnQue / DeQue and FreeTensor /
//     AllocTensor are the same hand-overs (VECIN: MTE2 -> V, VECOUT: V ->
//     MTE3); PipeBarrier<PIPE_ALL> joins every pipe; SyncAll joins every pipe
//     of every core (plus sync_all_ns);
//   - a core's GM share is min(core_gm_bytes_per_cycle x clock,
//     gm_gbps / cores used); its loads (MTE2) and its stores (MTE3) each
//     move at that rate (the SoC files give reads and writes a port rate
//     each), and only the launch-wide bound (modeled time at least all GM
//     bytes / gm_gbps, bench/ascend_model.py) holds their sum to the chip's.
// The model trusts the kernel's synchronisation: a missing flag makes it
// optimistic (the hazard checks of the CPU build are what catch that).
// L2: a read of grad_out / input finds a 32-byte block in L2 when the chip
// moved at most `l2Window` bytes (L2 x l2_reuse_percent) since that block was
// last touched (the chip-wide byte count is exact at each SyncAll and, in
// between, this core's bytes times the cores used); a block not found is
// fetched whole from GM. A hit costs bytes / the core's L2 rate; GM read
// traffic is the missed blocks.
// Not modelled: bank conflicts, burst-size efficiency (the smallest burst is
// reported instead), L2 hits of anything but the activations.
//
// With `skipData` the CPU build checks and counts everything but moves and
// computes no data, so whole ResNet-50 layers run in milliseconds.
#ifndef BNB_SIM_PERF_H
#define BNB_SIM_PERF_H
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include "sim_runtime.h"
#include "sim_types.h"

namespace AscendC {
template <typename T>
class LocalTensor;

namespace perf {

template <typename X>
struct IsLocal {
    static constexpr bool value = false;
};
template <typename T>
struct IsLocal<LocalTensor<T>> {
    static constexpr bool value = true;
};

enum Pipe : uint32_t { P_S = 0, P_V, P_MTE2, P_MTE3, P_COUNT };
constexpr uint32_t MAX_ACT = 3;      // activation tensors told apart in the counts (grad_out, input, grad_input)
constexpr uint32_t SYNC_SLOTS = 256;  // SyncAll generations in flight
constexpr uint64_t L2_LINE = 32;      // bytes the L2 model tracks together (one MTE block)

// The figures of one launch (perf_launch.cpp fills them from batch_norm_soc_caps.gen.h).
struct Launch {
    double gmBytesPerNs = 1;     // one core's GM share
    double l2BytesPerNs = 1;     // one core's L2 read rate
    double l2Window = 0;         // bytes the chip may move between two touches of a line for an L2 hit
    uint32_t usedCores = 1;
    std::unique_ptr<std::atomic<uint64_t>[]> lineStamp[MAX_ACT];  // chip bytes when each line was last touched
    std::atomic<uint64_t> syncBytes[SYNC_SLOTS];                   // bytes all cores moved in one sync interval
    double copyLatencyNs = 0;
    double vecNsPerRepeat = 1;
    double vecIssueNs = 0;
    double vectorBytes = 256;
    double scalarNs = 0;
    double syncAllNs = 0;
    bool skipData = false;
    int32_t traceCore = -1;  // BNB_PERF_TRACE: this core's pipe timeline to stderr (Trace), -1 none
    const uint8_t *actLo[MAX_ACT] = {};
    const uint8_t *actHi[MAX_ACT] = {};
    std::atomic<uint64_t> syncPs[SYNC_SLOTS];  // max over cores of each SyncAll's arrival, picoseconds
};

inline Launch *&ThisLaunch()
{
    static Launch *launch = nullptr;  // one launch at a time (perf_launch.cpp holds a lock)
    return launch;
}

// What one core did.
struct Core {
    double freeAt[P_COUNT] = {};  // pipe busy until
    double doneAt[P_COUNT] = {};  // everything issued to the pipe finished (copies: landed)
    double busy[P_COUNT] = {};    // summed cost per pipe
    double issue = 0;             // scalar issue time
    uint64_t gmReadBytes = 0, gmWriteBytes = 0, actReadBytes = 0, actWriteBytes = 0;
    uint64_t hbmReadBytes = 0;  // reads that reach GM (HBM): activation blocks missed in L2, everything else
    uint64_t epochBytes = 0, sinceSync = 0;  // chip bytes up to the last SyncAll; this core's since
    uint64_t copies = 0, bursts = 0, minBurst = UINT64_MAX, vectorInstrs = 0, scalarOps = 0, syncAlls = 0;
    uint32_t syncGen = 0;
    double combineFrom = 0, combineNs = 0;     // CombineBegin's time; the combine's time so far
    std::map<uint32_t, double> events;         // (HardEvent, id) -> time set
    std::map<const void *, double> slotReady;  // TQue buffer -> hand-over time
    std::map<const void *, double> slotFree;   // TQue buffer -> free time

    double End() const
    {
        double t = issue;
        for (uint32_t p = 0; p < P_COUNT; ++p) {
            t = std::max({t, freeAt[p], doneAt[p]});
        }
        return t;
    }
};

inline Core &ThisCore()
{
    thread_local Core core;
    return core;
}

inline bool On() { return ThisLaunch() != nullptr; }
inline bool SkipData() { return On() && ThisLaunch()->skipData; }

// The traced core's timeline (perf_launch.cpp: environment variable BNB_PERF_TRACE=<core>), one line per
// instruction or hold: what, pipe, from, to (ns); for reading what serialises, never parsed by the model.
inline bool Tracing() { return On() && ThisLaunch()->traceCore == int32_t(SimThisCore().blockIdx); }
inline void Trace(const char *what, uint32_t pipe, double from, double to)
{
    static const char *const names[] = {"S", "V", "MTE2", "MTE3"};
    std::fprintf(stderr, "%-6s %-4s %12.1f %12.1f\n", what, pipe < 4 ? names[pipe] : "-", from, to);
}

// An instruction of `cost` ns on pipe p, landing `latency` ns after it leaves the pipe.
inline void Issue(Pipe p, double cost, double latency = 0)
{
    Core &c = ThisCore();
    const double start = std::max(c.freeAt[p], c.issue);
    c.freeAt[p] = start + cost;
    c.doneAt[p] = std::max(c.doneAt[p], c.freeAt[p] + latency);
    c.busy[p] += cost;  // issuing costs the scalar unit nothing beside the kernel's own scalar work
    if (Tracing()) {
        Trace("op", p, start, start + cost);
    }
}

inline uint32_t ActIndex(const void *gm)
{
    const Launch *l = ThisLaunch();
    const auto *a = static_cast<const uint8_t *>(gm);
    for (uint32_t i = 0; i < MAX_ACT; ++i) {
        if (a >= l->actLo[i] && a < l->actHi[i]) {
            return i;
        }
    }
    return MAX_ACT;
}

// Stamps the blocks a copy touches of activation `ai`; returns the bytes of the blocks a read must fetch.
inline uint64_t TouchLines(uint32_t ai, const void *gm, uint64_t bursts, uint64_t burstBytes, uint64_t gmGap,
                           bool read)
{
    Launch *l = ThisLaunch();
    Core &c = ThisCore();
    if (!l->lineStamp[ai]) {
        return 0;
    }
    const uint64_t now = c.epochBytes + c.sinceSync * l->usedCores + 1;
    const uint64_t base = uint64_t(static_cast<const uint8_t *>(gm) - l->actLo[ai]);
    const uint64_t step = burstBytes + (gmGap == 1 ? 0 : gmGap);  // gmGap 1: runs told apart only
    uint64_t fetched = 0;
    for (uint64_t b = 0; b < bursts; ++b) {
        const uint64_t lo = base + b * step, hi = lo + burstBytes;
        for (uint64_t line = lo / L2_LINE; line * L2_LINE < hi; ++line) {
            const uint64_t prev = l->lineStamp[ai][line].exchange(now);
            // (Stamps of two cores between SyncAlls are estimates: a later one may read as earlier.)
            if (read && (prev == 0 || (now > prev && now - prev > uint64_t(l->l2Window)))) {
                fetched += L2_LINE;
            }
        }
    }
    return fetched;
}

// A GM <-> UB copy (toUb: GM -> UB on MTE2, else UB -> GM on MTE3) of `bursts` runs of `burstBytes`,
// `gmGap` bytes apart in GM (runs without a gap are one burst).
inline void Copy(bool toUb, const void *gm, uint64_t bursts, uint64_t burstBytes, uint64_t gmGap = 1)
{
    if (!On() || bursts == 0) {
        return;
    }
    Core &c = ThisCore();
    const uint64_t bytes = bursts * burstBytes;
    const uint32_t ai = ActIndex(gm);
    const bool act = ai < MAX_ACT;
    (toUb ? c.gmReadBytes : c.gmWriteBytes) += bytes;
    uint64_t fromGm = bytes;  // bytes of this copy that travel to / from GM
    if (act) {
        (toUb ? c.actReadBytes : c.actWriteBytes) += bytes;
        const uint64_t fetched = TouchLines(ai, gm, bursts, burstBytes, gmGap, toUb);
        if (toUb) {
            fromGm = fetched;
        }
    }
    if (toUb) {
        c.hbmReadBytes += fromGm;
    }
    const uint64_t hit = bytes > fromGm ? bytes - fromGm : 0;
    c.sinceSync += bytes;
    ++c.copies;
    const uint64_t runs = gmGap == 0 ? 1 : bursts;
    c.bursts += runs;
    if (act) {
        c.minBurst = std::min(c.minBurst, bytes / runs);  // activation bursts only
    }
    const Launch *l = ThisLaunch();
    Issue(toUb ? P_MTE2 : P_MTE3, double(fromGm) / l->gmBytesPerNs + double(hit) / l->l2BytesPerNs,
          l->copyLatencyNs);
}

// A vector instruction over `count` elements of `elemBytes` (the wider operand); `passes` for multi-pass ones.
inline void Vector(uint64_t count, uint64_t elemBytes, double passes = 1)
{
    if (!On()) {
        return;
    }
    const Launch *l = ThisLaunch();
    const double repeats = std::max(1.0, double((count * elemBytes + uint64_t(l->vectorBytes) - 1) /
                                               uint64_t(l->vectorBytes)));
    ++ThisCore().vectorInstrs;
    Issue(P_V, l->vecIssueNs + passes * repeats * l->vecNsPerRepeat);
}

// A scalar access to UB (gm false) or GM.
inline void Scalar(bool gm)
{
    if (!On()) {
        return;
    }
    Core &c = ThisCore();
    ++c.scalarOps;
    const Launch *l = ThisLaunch();
    const double cost = gm ? l->copyLatencyNs : l->scalarNs;
    c.issue = std::max(c.issue, c.freeAt[P_S]) + cost;
    c.freeAt[P_S] = c.issue;
    c.doneAt[P_S] = c.issue;
    c.busy[P_S] += cost;
}

inline bool PipesOf(HardEvent e, Pipe &src, Pipe &dst)
{
    switch (e) {
        case HardEvent::MTE2_V: src = P_MTE2; dst = P_V; return true;
        case HardEvent::V_MTE2: src = P_V; dst = P_MTE2; return true;
        case HardEvent::MTE3_V: src = P_MTE3; dst = P_V; return true;
        case HardEvent::V_MTE3: src = P_V; dst = P_MTE3; return true;
        case HardEvent::V_V: src = P_V; dst = P_V; return true;
        case HardEvent::MTE3_MTE2: src = P_MTE3; dst = P_MTE2; return true;
        case HardEvent::MTE2_MTE3: src = P_MTE2; dst = P_MTE3; return true;
        case HardEvent::S_V: src = P_S; dst = P_V; return true;
        case HardEvent::V_S: src = P_V; dst = P_S; return true;
        case HardEvent::S_MTE2: src = P_S; dst = P_MTE2; return true;
        case HardEvent::MTE2_S: src = P_MTE2; dst = P_S; return true;
        case HardEvent::S_MTE3: src = P_S; dst = P_MTE3; return true;
        case HardEvent::MTE3_S: src = P_MTE3; dst = P_S; return true;
        default: return false;
    }
}

inline double Finished(Pipe p)
{
    const Core &c = ThisCore();
    return std::max({c.freeAt[p], c.doneAt[p], p == P_S ? c.issue : 0.0});
}

inline void Hold(Pipe p, double t)
{
    Core &c = ThisCore();
    if (Tracing() && t > c.freeAt[p]) {
        Trace("hold", p, c.freeAt[p], t);
    }
    if (p == P_S) {
        c.issue = std::max(c.issue, t);
    }
    c.freeAt[p] = std::max(c.freeAt[p], t);
}

inline void SetFlag(HardEvent e, int32_t id)
{
    Pipe s, d;
    if (On() && PipesOf(e, s, d)) {
        // The set itself is issued in program order: it cannot finish before the issue point.
        ThisCore().events[uint32_t(e) << 8 | uint32_t(id & 0xFF)] = std::max(Finished(s), ThisCore().issue);
    }
}

inline void WaitFlag(HardEvent e, int32_t id)
{
    Pipe s, d;
    if (On() && PipesOf(e, s, d)) {
        auto &ev = ThisCore().events;
        const auto it = ev.find(uint32_t(e) << 8 | uint32_t(id & 0xFF));
        if (it != ev.end()) {
            Hold(d, it->second);
            ev.erase(it);
        }
    }
}

// Every pipe waits for every other (PipeBarrier<PIPE_ALL>); a single-pipe barrier orders nothing across pipes.
inline void Barrier(bool all)
{
    if (!On() || !all) {
        return;
    }
    Core &c = ThisCore();
    const double t = c.End();
    c.issue = t;
    for (uint32_t p = 0; p < P_COUNT; ++p) {
        c.freeAt[p] = c.doneAt[p] = t;
    }
}

// TQue hand-overs: VECIN buffers go MTE2 -> V, VECOUT buffers V -> MTE3.
inline void EnQue(const void *slot, bool vecIn)
{
    if (On()) {
        ThisCore().slotReady[slot] = std::max(Finished(vecIn ? P_MTE2 : P_V), ThisCore().issue);
    }
}
inline void DeQue(const void *slot, bool vecIn)
{
    if (On()) {
        Hold(vecIn ? P_V : P_MTE3, ThisCore().slotReady[slot]);
    }
}
inline void Free(const void *slot, bool vecIn)
{
    if (On()) {
        ThisCore().slotFree[slot] = std::max(Finished(vecIn ? P_V : P_MTE3), ThisCore().issue);
    }
}
inline void Alloc(const void *slot, bool vecIn)
{
    if (On()) {
        const auto it = ThisCore().slotFree.find(slot);
        if (it != ThisCore().slotFree.end()) {
            Hold(vecIn ? P_MTE2 : P_V, it->second);
        }
    }
}

// The combine of the per-channel sums (the kernel's BNB_PERF_COMBINE_BEGIN /
// _END marks): the time the vector pipe's finish moves between the two marks,
// summed. Two passes across cores: from leaving the SyncAll after phase 1 (of
// each L2 round) to the end of each core's combines of its own channels, and
// the share's combine (grad_weight / grad_bias); single pass: the ReduceSums,
// the scalar hand-over and the coefficient vectors of each sub-group.
inline void CombineBegin()
{
    if (On()) {
        ThisCore().combineFrom = Finished(P_V);
        if (Tracing()) {
            Trace("comb{", P_V, ThisCore().combineFrom, ThisCore().combineFrom);
        }
    }
}
inline void CombineEnd()
{
    if (On()) {
        Core &c = ThisCore();
        c.combineNs += std::max(0.0, Finished(P_V) - c.combineFrom);
        if (Tracing()) {
            Trace("comb}", P_V, c.combineFrom, Finished(P_V));
        }
    }
}

// SyncAll, in two halves around the cores' barrier: arrive publishes this
// core's finish, leave takes the latest of all cores.
inline void SyncAllArrive()
{
    if (!On()) {
        return;
    }
    Core &c = ThisCore();
    Launch *l = ThisLaunch();
    l->syncBytes[(c.syncGen + 2) % SYNC_SLOTS].store(0);  // not in use until two SyncAlls from now
    l->syncBytes[c.syncGen % SYNC_SLOTS] += c.sinceSync;
    const uint64_t ps = uint64_t(c.End() * 1000.0);
    std::atomic<uint64_t> &slot = ThisLaunch()->syncPs[c.syncGen % SYNC_SLOTS];
    uint64_t cur = slot.load();
    while (cur < ps && !slot.compare_exchange_weak(cur, ps)) {
    }
}
// `hardware`: the hardware SyncAll's figure (syncAllNs) is added; the software form costs only the GM
// round trips the CPU build counts around it.
inline void SyncAllLeave(bool hardware = true)
{
    if (!On()) {
        return;
    }
    Core &c = ThisCore();
    const double t = double(ThisLaunch()->syncPs[c.syncGen % SYNC_SLOTS].load()) / 1000.0 +
                     (hardware ? ThisLaunch()->syncAllNs : 0.0);
    c.epochBytes += ThisLaunch()->syncBytes[c.syncGen % SYNC_SLOTS].load();
    c.sinceSync = 0;
    ++c.syncGen;
    ++c.syncAlls;
    c.issue = t;
    for (uint32_t p = 0; p < P_COUNT; ++p) {
        c.freeAt[p] = c.doneAt[p] = t;
    }
}

}  // namespace perf
}  // namespace AscendC
#undef BNB_PERF_COMBINE_BEGIN
#undef BNB_PERF_COMBINE_END
#define BNB_PERF_COMBINE_BEGIN() AscendC::perf::CombineBegin()
#define BNB_PERF_COMBINE_END() AscendC::perf::CombineEnd()
#endif
