// CPU build of the Ascend C API subset used by the BatchNormBackward kernel:
// runtime state (per-core context, SoC limits) and the error every violated
// hardware rule raises. Header-only; see tests/ascend_tools/sim/README.md.
#ifndef BNB_SIM_RUNTIME_H
#define BNB_SIM_RUNTIME_H
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>
#include "../rules/bnb_hazards.h"
#include "../rules/bnb_rules.h"

#define __aicore__
#define __global__
#define __gm__
#define GM_ADDR uint8_t *

namespace AscendC {

// Raised for every rule the hardware (or the real headers) would refuse.
struct SimError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

inline void SimCheck(bool ok, const std::string &what)
{
    if (!ok) {
        throw SimError(what);
    }
}
// The same, naming the kernel source line.
inline void SimCheck(bool ok, const std::string &what, bnb_rules::Src src)
{
    if (!ok) {
        throw SimError(what + " at " + bnb_rules::Where(src));
    }
}
// The rule table (bnb_rules.h) stops a simulated run by throwing.
inline void SimStop(const std::string &message) { throw SimError(message); }
inline const bool g_simRulesInstalled = (bnb_rules::StopHandler() = SimStop, true);

constexpr uint32_t ONE_BLK_SIZE = 32;       // bytes per data block (DataCopy and UB alignment unit)
constexpr uint32_t ONE_REPEAT_BYTE_SIZE = 256;  // bytes one vector repeat processes

// What differs between SoCs for this kernel: the one table of the
// verification tooling (tests/ascend_tools/rules/bnb_rules.h). The kernel
// never hard-codes these: the host tiling reads GetCoreMemSize(UB) from the
// platform on a board.
using SimSoc = bnb_rules::Soc;
inline const std::vector<SimSoc> &SimSocTable() { return bnb_rules::Socs(); }

inline const SimSoc &SimFindSoc(const std::string &name)
{
    const SimSoc *s = bnb_rules::FindSoc(name);
    if (s == nullptr) {
        throw SimError("unknown SoC '" + name + "'");
    }
    return *s;
}

// Reusable barrier for the cores of one launch (SyncAll); it also holds the
// launch's GM hazard tracker (cross-core races, the scalar data cache).
class SimBarrier : public bnb_hazards::GmTracker {
public:
    explicit SimBarrier(uint32_t n) : n_(n) {}
    void Wait()
    {
        std::unique_lock<std::mutex> lock(m_);
        uint64_t gen = gen_;
        if (++waiting_ == n_) {
            waiting_ = 0;
            ++gen_;
            cv_.notify_all();
            return;
        }
        cv_.wait(lock, [&] { return gen != gen_ || aborted_; });
        SimCheck(!aborted_, "SyncAll: another core failed");
    }
    void Abort()
    {
        std::lock_guard<std::mutex> lock(m_);
        aborted_ = true;
        cv_.notify_all();
    }

private:
    std::mutex m_;
    std::condition_variable cv_;
    uint32_t n_, waiting_ = 0;
    uint64_t gen_ = 0;
    bool aborted_ = false;
};

// One simulated vector core: its Unified Buffer and identity.
struct SimCore {
    SimSoc soc;
    uint32_t ubBytes = 0;
    uint32_t blockIdx = 0;
    uint32_t blockNum = 1;
    std::vector<uint8_t> ubStorage;
    uint8_t *ub = nullptr;  // 32-byte aligned start of the UB
    uint32_t ubUsed = 0;    // bytes handed out by TPipe::InitBuffer
    SimBarrier *barrier = nullptr;  // shared by the cores of one launch
    int kernelType = -1;      // set by KERNEL_TASK_TYPE_DEFAULT
    bnb_hazards::CoreTracker pipes;  // this core's pipes (hazard tracker)
    uint32_t epoch = 0;              // SyncAll calls so far
    uint32_t softSyncs = 0;          // software SyncAll calls so far (what this core's flag must hold)
    uint32_t scheduleMode = 0;       // the launch's TilingContext::SetScheduleMode (1: batch mode)

    void Reset(const SimSoc &s, uint32_t ubSize, uint32_t idx, uint32_t num)
    {
        soc = s;
        ubBytes = ubSize;
        blockIdx = idx;
        blockNum = num;
        ubStorage.assign(ubSize + ONE_BLK_SIZE, 0xA5);  // garbage, as a real UB holds
        auto base = reinterpret_cast<uintptr_t>(ubStorage.data());
        ub = ubStorage.data() + ((ONE_BLK_SIZE - base % ONE_BLK_SIZE) % ONE_BLK_SIZE);
        ubUsed = 0;
        kernelType = -1;
        pipes.Reset();
        epoch = 0;
        softSyncs = 0;
        scheduleMode = 0;
        barrier = nullptr;
        alone.Clear();
    }
    bnb_hazards::GmTracker alone;  // GM tracker of a core run on its own
    // The launch's GM tracker (the core's own when run alone).
    bnb_hazards::GmTracker &Gm()
    {
        bnb_hazards::GmTracker &gm = barrier ? *barrier : alone;
        gm.SetHasDcci(soc.hasDcci);
        return gm;
    }
    void GmAccess(const bnb_hazards::Instr &in, const void *addr, uint64_t bytes, bool write,
                  const void *data = nullptr)
    {
        const auto a = reinterpret_cast<uint64_t>(addr);
        Gm().Access(blockIdx, epoch, in, {bnb_hazards::Space::GM, a, a + bytes}, write,
                    static_cast<const uint8_t *>(data));
    }
    bool InUb(const void *p) const
    {
        auto a = static_cast<const uint8_t *>(p);
        return a >= ub && a < ub + ubBytes;
    }
    uint32_t UbOffset(const void *p) const
    {
        return static_cast<uint32_t>(static_cast<const uint8_t *>(p) - ub);
    }
};

inline SimCore &SimThisCore()
{
    thread_local SimCore core;
    return core;
}

inline int64_t GetBlockIdx() { return SimThisCore().blockIdx; }
inline int64_t GetBlockNum() { return SimThisCore().blockNum; }

// Custom-op projects reserve a system area at the head of the workspace; the
// CPU build has none, so the user area starts at the pointer itself.
inline GM_ADDR GetUserWorkspace(GM_ADDR workspace) { return workspace; }

}  // namespace AscendC

#endif
