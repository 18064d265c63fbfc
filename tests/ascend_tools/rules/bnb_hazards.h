// Pipe-hazard tracker of the project's Ascend C verification (used by the
// simulator, tests/ascend_tools/sim). Header-only, plain C++17.
//
// Model (基础API/同步控制/核内同步/核内同步能力概述.md, SetFlag-WaitFlag(ISASI).md,
// PipeBarrier(ISASI).md, TQueSync模板参数.md; 核间同步/SyncAll.md; 缓存控制/
// DataCacheCleanAndInvalid.md of the asc-devkit API reference):
// - Every instruction runs on one pipe: S (scalar, incl. GetValue / SetValue),
//   V (vector), MTE2 (GM -> UB), MTE3 (UB -> GM, UB -> UB). A pipe runs its own
//   instructions in order; different pipes run concurrently.
// - Two instructions on different pipes that touch overlapping UB or GM bytes,
//   at least one writing, must be ordered by SetFlag<A_B>/WaitFlag<A_B>,
//   PipeBarrier<PIPE_ALL>, a TQue hand-over (EnQue/DeQue, FreeTensor/AllocTensor)
//   or SyncAll; otherwise a hazard is reported naming both instructions.
//   Ordering is transitive (vector clocks per pipe).
// - Within MTE2 or MTE3, two copies writing overlapping bytes need
//   PipeBarrier<PIPE_MTE2/3> ("PIPE_MTE2/PIPE_MTE3在搬运地址有重叠的情况下需要开发者插入同步").
//   Vector-vector dependencies are ordered by the compiler's automatic PIPE_V
//   sync and scalar-scalar ones by the hardware (PipeBarrier(ISASI).md), so
//   they are not reported.
// - GM across cores: accesses of different cores between the same two SyncAll
//   calls must not conflict. Scalar GM accesses go through the core's data
//   cache: a scalar read of GM written by another core or by a DMA pipe needs
//   a DataCacheCleanAndInvalid after that write and before the read; a scalar
//   GM store must be written back by DataCacheCleanAndInvalid before any DMA
//   pipe or other core reads it. On SoCs without DataCacheCleanAndInvalid
//   (Atlas training / inference) such a read cannot be made safe and is reported.
#ifndef BNB_TOOLS_HAZARDS_H
#define BNB_TOOLS_HAZARDS_H
#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>
#include "bnb_rules.h"

namespace bnb_hazards {

enum Pipe : int { S = 0, V, MTE2, MTE3, NPIPE };
inline const char *PipeName(int p)
{
    static const char *names[] = {"PIPE_S", "PIPE_V", "PIPE_MTE2", "PIPE_MTE3"};
    return p >= 0 && p < NPIPE ? names[p] : "PIPE_?";
}

enum class Space { UB, GM };
struct Range {
    Space space;
    uint64_t lo, hi;  // bytes [lo, hi): UB offsets or GM addresses
};
inline bool Overlap(const Range &a, const Range &b) { return a.space == b.space && a.lo < b.hi && b.lo < a.hi; }
inline std::string Show(const Range &r)
{
    return std::string(r.space == Space::UB ? "UB" : "GM") + " bytes " +
           (r.space == Space::UB ? bnb_rules::N(r.lo) + ".." + bnb_rules::N(r.hi)
                                 : "+" + bnb_rules::N(r.hi - r.lo));
}

struct Instr {
    std::string what;
    bnb_rules::Src src;
    int pipe;
};
inline std::string Show(const Instr &i) { return i.what + " (" + PipeName(i.pipe) + ", " + bnb_rules::Where(i.src) + ")"; }

using Clock = std::array<uint64_t, NPIPE>;

// One core's pipes. The accesses not yet known to be ordered before every
// pipe are kept per space: UB in a list (few buffers, reused), GM by address
// (every tile its own bytes), so a check visits only what it may overlap.
class CoreTracker {
public:
    void Reset()
    {
        for (auto &v : known_) v.fill(0);
        issued_.fill(0);
        flags_.clear();
        Clear();
    }

    // An instruction on `pipe` reading `reads` and writing `writes`.
    void Op(int pipe, const Instr &in, const std::vector<Range> &reads, const std::vector<Range> &writes)
    {
        const uint64_t seq = ++issued_[pipe];
        for (const Range &r : reads) Check(pipe, in, r, false);
        for (const Range &w : writes) Check(pipe, in, w, true);
        for (const Range &w : writes) DropCovered(pipe, w, true);
        for (const Range &r : reads) DropCovered(pipe, r, false);
        for (const Range &r : reads) Log({r, false, pipe, seq, ++order_, in});
        for (const Range &w : writes) Log({w, true, pipe, seq, ++order_, in});
        if (ub_.size() + gm_.size() > pruneAt_) {
            Prune();
            pruneAt_ = std::max<size_t>(PRUNE_MIN, 2 * (ub_.size() + gm_.size()));  // amortised
        }
    }
    // SetFlag<from_to>(id) / WaitFlag<from_to>(id).
    // A second SetFlag on the same pipes and id before its WaitFlag is undefined behaviour (a
    // PipeBarrier<PIPE_ALL> after it hangs): SetFlag-WaitFlag(ISASI).md, 约束说明. The queues' own
    // hand-overs take their ids from the TPipe's pool, so a kernel id one of them holds set meets it.
    void SetFlag(int from, int to, int64_t id, const Instr &in)
    {
        auto &q = flags_[std::make_tuple(from, to, id)];
        bnb_rules::Require(q.empty(), in.what,
                           "SetFlag on an event id already set and not yet waited for: undefined behaviour",
                           std::string(PipeName(from)) + " -> " + PipeName(to) + ", event " + std::to_string(id),
                           in.src);
        Clock token = known_[from];
        token[from] = issued_[from];
        q.push_back(token);
    }
    void WaitFlag(int from, int to, int64_t id, const Instr &in)
    {
        auto &q = flags_[std::make_tuple(from, to, id)];
        bnb_rules::Require(!q.empty(), in.what,
                           "WaitFlag with no SetFlag pending: the core would wait forever",
                           std::string(PipeName(from)) + " -> " + PipeName(to) + ", event " + std::to_string(id),
                           in.src);
        Merge(to, q.front());
        q.pop_front();
    }
    // PipeBarrier<pipe>; NPIPE = PIPE_ALL (also SyncAll).
    void Barrier(int pipe)
    {
        if (pipe == NPIPE) {
            for (auto &v : known_) v = issued_;
            Clear();
            return;
        }
        known_[pipe][pipe] = issued_[pipe];
    }

private:
    struct Access {
        Range r;
        bool write;
        int pipe;
        uint64_t seq;
        uint64_t order;  // of logging, across pipes: the newest conflicting access is the one reported
        Instr in;
    };
    using GmLog = std::multimap<uint64_t, Access>;  // by r.lo

    void Merge(int to, const Clock &token)
    {
        for (int q = 0; q < NPIPE; ++q) known_[to][q] = std::max(known_[to][q], token[q]);
    }
    bool Ordered(int pipe, const Access &a, bool write) const
    {
        if (a.pipe == pipe) {
            // In-order pipes; only MTE2 / MTE3 write-after-write needs a PipeBarrier.
            const bool mte = pipe == MTE2 || pipe == MTE3;
            return !(mte && write && a.write) || known_[pipe][pipe] >= a.seq;
        }
        return known_[pipe][a.pipe] >= a.seq;
    }
    bool Conflicts(int pipe, const Access &a, const Range &r, bool write) const
    {
        return (a.write || write) && Overlap(a.r, r) && !Ordered(pipe, a, write);
    }
    // The GM entries that may overlap r: lo in [r.lo - longest, r.hi).
    GmLog::iterator GmFirst(const Range &r)
    {
        return gm_.lower_bound(r.lo > gmLongest_ ? r.lo - gmLongest_ : 0);
    }
    void Check(int pipe, const Instr &in, const Range &r, bool write)
    {
        const Access *hit = nullptr;
        if (r.space == Space::UB) {
            for (auto it = ub_.rbegin(); it != ub_.rend() && !hit; ++it) {
                if (Conflicts(pipe, *it, r, write)) hit = &*it;
            }
        } else {
            for (auto it = GmFirst(r); it != gm_.end() && it->first < r.hi; ++it) {
                if (Conflicts(pipe, it->second, r, write) && (!hit || it->second.order > hit->order)) {
                    hit = &it->second;
                }
            }
        }
        if (!hit) return;
        const Access &a = *hit;
        const char *kind = a.write ? (write ? "write-after-write" : "read-after-write") : "write-after-read";
        bnb_rules::Violation(in.what, std::string("pipe hazard, ") + kind + " on " + Show(r) + " with " + Show(a.in),
                             "nothing orders " + std::string(PipeName(a.pipe)) + " before " + PipeName(pipe) +
                                 ": SetFlag/WaitFlag, PipeBarrier, a TQue hand-over or SyncAll",
                             in.src);
    }
    // An older access on the same pipe inside a range the new instruction writes (or reads, when the old
    // one only read) can never be the hazard Check reports: whatever conflicts with it unordered also
    // conflicts with the newer access (same pipe, later sequence number, at least as strong), which is the
    // newer of the two. Dropping it keeps the log short in loops that reuse the same UB buffers between
    // barriers (the per-unit loops of the Atlas training / inference kernels made the check quadratic).
    void DropCovered(int pipe, const Range &by, bool write)
    {
        const auto covered = [&](const Access &a) {
            return a.pipe == pipe && (write || !a.write) && a.r.space == by.space && by.lo <= a.r.lo &&
                   a.r.hi <= by.hi;
        };
        if (by.space == Space::UB) {
            ub_.erase(std::remove_if(ub_.begin(), ub_.end(), covered), ub_.end());
            return;
        }
        for (auto it = gm_.lower_bound(by.lo); it != gm_.end() && it->first < by.hi;) {
            it = covered(it->second) ? gm_.erase(it) : std::next(it);
        }
    }
    void Log(Access a)
    {
        if (a.r.space == Space::UB) {
            ub_.push_back(std::move(a));
            return;
        }
        gmLongest_ = std::max(gmLongest_, a.r.hi - a.r.lo);
        const uint64_t lo = a.r.lo;
        gm_.emplace(lo, std::move(a));
    }
    // Drops what every pipe already knows to be done: no later access can conflict with it.
    bool Known(const Access &a) const
    {
        for (int p = 0; p < NPIPE; ++p) {
            if (known_[p][a.pipe] < a.seq) return false;
        }
        return true;
    }
    void Prune()
    {
        ub_.erase(std::remove_if(ub_.begin(), ub_.end(), [&](const Access &a) { return Known(a); }), ub_.end());
        for (auto it = gm_.begin(); it != gm_.end();) {
            it = Known(it->second) ? gm_.erase(it) : std::next(it);
        }
    }
    void Clear()
    {
        ub_.clear();
        gm_.clear();
        gmLongest_ = 0;
        pruneAt_ = PRUNE_MIN;
    }

    std::array<Clock, NPIPE> known_{};  // known_[p][q]: q's instructions up to this seq are done, seen from p
    Clock issued_{};
    std::map<std::tuple<int, int, int64_t>, std::deque<Clock>> flags_;
    std::vector<Access> ub_;
    GmLog gm_;
    uint64_t gmLongest_ = 0;  // longest GM range logged since the last Clear
    uint64_t order_ = 0;
    static constexpr size_t PRUNE_MIN = 4096;
    size_t pruneAt_ = PRUNE_MIN;
};

// GM shared by the cores of one launch: cross-core races and the scalar data cache.
class GmTracker {
public:
    explicit GmTracker(bool hasDcci = true) : hasDcci_(hasDcci) {}
    void SetHasDcci(bool v) { hasDcci_ = v; }
    void Clear()
    {
        std::lock_guard<std::mutex> lock(m_);
        tick_ = 0;
        epoch_ = 0;
        reads_.clear();
        maxRead_ = 0;
        writes_.clear();
        maxWrite_ = 0;
        dcci_.clear();
    }

    // A GM access by `core` in its `epoch` (number of SyncAll calls so far);
    // `data`: the bytes a write stores (two cores storing the same bytes to
    // the same GM, as overlapping tail windows do, is not a race).
    void Access(uint32_t core, uint32_t epoch, const Instr &in, const Range &r, bool write,
                const uint8_t *data = nullptr)
    {
        std::lock_guard<std::mutex> lock(m_);
        const uint64_t tick = ++tick_;
        const bool scalar = in.pipe == S;
        if (epoch > epoch_) {  // every core passed a SyncAll: older reads can no longer race
            epoch_ = epoch;
            reads_.clear();
            maxRead_ = 0;
        }
        if (write) {
            const Entry *race = nullptr;  // the earliest read it races with
            for (auto it = reads_.lower_bound(r.lo > maxRead_ ? r.lo - maxRead_ : 0);
                 it != reads_.end() && it->first < r.hi; ++it) {
                const Entry &e = it->second;
                if (e.core != core && e.epoch == epoch && Overlap(e.r, r) && (!race || e.tick < race->tick)) {
                    race = &e;
                }
            }
            if (race) Race(in, r, *race);
        }
        const auto first = writes_.lower_bound(r.lo > maxWrite_ ? r.lo - maxWrite_ : 0);
        for (auto it = first; it != writes_.end() && it->first < r.hi; ++it) {
            const Entry &e = it->second;
            if (!Overlap(e.r, r)) continue;
            if (e.core != core && e.epoch == epoch && !SameBytes(e, r, write ? data : nullptr)) {
                Race(in, r, e);
            }
            const bool visible = e.core == core ? Flushed(core, e, tick) : Flushed(core, e, tick, epoch);
            if (scalar && !write && !(e.core == core && e.in.pipe == S) && !visible) {
                bnb_rules::Violation(in.what, "scalar GM read of data written by " +
                                                  (e.core == core ? std::string("this core's ")
                                                                  : "core " + std::to_string(e.core) + "'s ") +
                                                  Show(e.in) + " without DataCacheCleanAndInvalid in between",
                                     hasDcci_ ? "the data cache may return stale bytes"
                                              : "this SoC has no DataCacheCleanAndInvalid, so it cannot be made safe",
                                     in.src);
            }
            if (e.in.pipe == S && !(scalar && e.core == core) && !Cleaned(e)) {
                bnb_rules::Violation(in.what, "reads GM a scalar store left in the data cache: " + Show(e.in),
                                     hasDcci_ ? "no DataCacheCleanAndInvalid wrote it back"
                                              : "this SoC has no DataCacheCleanAndInvalid to write it back",
                                     in.src);
            }
        }
        Entry entry{r, write, core, epoch, tick, in,
                    write && data ? std::vector<uint8_t>(data, data + (r.hi - r.lo)) : std::vector<uint8_t>{}};
        if (write) {
            maxWrite_ = std::max(maxWrite_, r.hi - r.lo);
            writes_.emplace(r.lo, std::move(entry));
        } else {
            maxRead_ = std::max(maxRead_, r.hi - r.lo);
            reads_.emplace(r.lo, std::move(entry));
        }
    }
    // DataCacheCleanAndInvalid by `core`: `r` = the line(s), or everything when `entire`.
    void Dcci(uint32_t core, uint32_t epoch, const Range &r, bool entire)
    {
        std::lock_guard<std::mutex> lock(m_);
        dcci_.push_back({core, epoch, ++tick_, r, entire});
    }

private:
    struct Entry {
        Range r;
        bool write;
        uint32_t core, epoch;
        uint64_t tick;
        Instr in;
        std::vector<uint8_t> bytes;  // what a write stored
    };
    [[noreturn]] static void Race(const Instr &in, const Range &r, const Entry &e)
    {
        bnb_rules::Violation(in.what, "cross-core GM race on " + Show(r) + " with core " + std::to_string(e.core) +
                                          "'s " + Show(e.in),
                             "both between the same two SyncAll calls", in.src);
    }
    static bool SameBytes(const Entry &e, const Range &r, const uint8_t *data)
    {
        if (!e.write || data == nullptr || e.bytes.empty()) return false;
        const uint64_t lo = std::max(e.r.lo, r.lo), hi = std::min(e.r.hi, r.hi);
        return std::equal(e.bytes.begin() + (lo - e.r.lo), e.bytes.begin() + (hi - e.r.lo), data + (lo - r.lo));
    }
    struct Flush {
        uint32_t core, epoch;
        uint64_t tick;
        Range r;
        bool entire;
    };
    static bool Covers(const Flush &f, const Range &r) { return f.entire || Overlap(f.r, r); }
    // Same core: a flush issued after the write. Other core: one after a later SyncAll.
    bool Flushed(uint32_t core, const Entry &w, uint64_t now) const
    {
        for (const Flush &f : dcci_) {
            if (f.core == core && f.tick > w.tick && f.tick < now && Covers(f, w.r)) return true;
        }
        return false;
    }
    bool Flushed(uint32_t core, const Entry &w, uint64_t now, uint32_t epoch) const
    {
        for (const Flush &f : dcci_) {
            if (f.core == core && f.epoch > w.epoch && f.epoch <= epoch && f.tick < now && Covers(f, w.r)) return true;
        }
        return false;
    }
    bool Cleaned(const Entry &w) const
    {
        for (const Flush &f : dcci_) {
            if (f.core == w.core && f.tick > w.tick && Covers(f, w.r)) return true;
        }
        return false;
    }

    std::mutex m_;
    bool hasDcci_;
    uint64_t tick_ = 0;
    uint32_t epoch_ = 0;
    // Reads of the current epoch (older ones cannot race), by start address: without SyncAll (Atlas
    // training / inference) the epoch never ends, and a scan of every read made each write quadratic.
    std::multimap<uint64_t, Entry> reads_;
    uint64_t maxRead_ = 0;  // longest read (bounds the search)
    std::multimap<uint64_t, Entry> writes_;  // by start address
    uint64_t maxWrite_ = 0;                  // longest write (bounds the search)
    std::vector<Flush> dcci_;
};

}  // namespace bnb_hazards
#endif
