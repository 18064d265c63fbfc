// Pipeline and cross-core synchronisation (CPU build). Each core runs as a
// thread; SyncAll is a barrier across the cores of the launch.
#ifndef BNB_SIM_SYNC_H
#define BNB_SIM_SYNC_H
#include <condition_variable>
#include <mutex>
#include "sim_tensor.h"
#include "sim_kernel_type.h"

namespace AscendC {

namespace sim {
inline int PipeOf(pipe_t p)
{
    switch (p) {
        case PIPE_S: return bnb_hazards::S;
        case PIPE_V: return bnb_hazards::V;
        case PIPE_MTE2: return bnb_hazards::MTE2;
        case PIPE_MTE3: return bnb_hazards::MTE3;
        case PIPE_ALL: return bnb_hazards::NPIPE;
        default: return -1;  // cube pipes: nothing of the vector core's
    }
}
// Source and destination pipe of a HardEvent the vector core uses (-1: not modelled).
inline std::pair<int, int> EventPipes(HardEvent e)
{
    using namespace bnb_hazards;
    switch (e) {
        case HardEvent::MTE2_V: return {MTE2, V};
        case HardEvent::V_MTE2: return {V, MTE2};
        case HardEvent::MTE3_V: return {MTE3, V};
        case HardEvent::V_MTE3: return {V, MTE3};
        case HardEvent::MTE3_MTE2: return {MTE3, MTE2};
        case HardEvent::MTE2_MTE3: return {MTE2, MTE3};
        case HardEvent::S_V: return {S, V};
        case HardEvent::V_S: return {V, S};
        case HardEvent::S_MTE2: return {S, MTE2};
        case HardEvent::MTE2_S: return {MTE2, S};
        case HardEvent::S_MTE3: return {S, MTE3};
        case HardEvent::MTE3_S: return {MTE3, S};
        default: return {-1, -1};
    }
}
}  // namespace sim

// PipeBarrier<PIPE_ALL> orders everything before it; PipeBarrier<pipe> orders
// that pipe's instructions among themselves (PipeBarrier(ISASI).md).
template <pipe_t pipe>
void PipeBarrier()
{
    perf::Barrier(pipe == PIPE_ALL);
    const int p = sim::PipeOf(pipe);
    if (p >= 0) {
        SimThisCore().pipes.Barrier(p);
    }
}

// SetFlag<A_B>(id) on pipe A, WaitFlag<A_B>(id) on pipe B: B's later
// instructions start after A's earlier ones end (SetFlag-WaitFlag(ISASI).md).
// The id must be one of the core's QUE_MAX_EVENT (SetFlagImpl / WaitFlagImpl assert it:
// impl/basic_api/kernel_event.h, kernel_macros.h; bnb_rules::QueMaxEvent).
inline void SimCheckEventId(const char *op, int32_t eventId, bnb_rules::Src at)
{
    const int max = bnb_rules::QueMaxEvent(SimThisCore().soc.npuArch);
    SimCheck(eventId >= 0 && eventId < max,
             std::string(op) + ": event id " + std::to_string(eventId) + " outside [0, " + std::to_string(max) +
                 ") on " + SimThisCore().soc.name + " (QUE_MAX_EVENT)",
             at);
}
template <HardEvent event>
void SetFlag(int32_t eventId, bnb_rules::Src at = bnb_rules::Here())
{
    SimCheckEventId("SetFlag", eventId, at);
    const auto pipes = sim::EventPipes(event);
    perf::SetFlag(event, eventId);
    if (pipes.first >= 0) {
        SimThisCore().pipes.SetFlag(pipes.first, pipes.second, eventId, {"SetFlag", at, pipes.first});
    }
}
template <HardEvent event>
void WaitFlag(int32_t eventId, bnb_rules::Src at = bnb_rules::Here())
{
    SimCheckEventId("WaitFlag", eventId, at);
    const auto pipes = sim::EventPipes(event);
    perf::WaitFlag(event, eventId);
    if (pipes.first >= 0) {
        SimThisCore().pipes.WaitFlag(pipes.first, pipes.second, eventId, {"WaitFlag", at, pipes.second});
    }
}

enum class CacheLine : uint64_t { SINGLE_CACHE_LINE = 0, ENTIRE_DATA_CACHE };
enum class DcciDst : uint64_t { CACHELINE_ALL = 0, CACHELINE_UB, CACHELINE_OUT, CACHELINE_ATOMIC };

// Hardware all-core barrier (Atlas A2 / A3 / 350). The real API requires the
// kernel type KERNEL_TYPE_MIX_AIV_1_0 for a vector-only kernel in separated
// mode; it does not exist on Atlas training / inference (the software form below does).
// It also orders every pipe of the core (all earlier work is done before it
// returns) and starts a new GM epoch of the launch (cross-core races).
template <bool isAIVOnly = true>
void SyncAll(bnb_rules::Src at = bnb_rules::Here())
{
    SimCore &core = SimThisCore();
    SimCheck(core.soc.hasSyncAll, std::string("SyncAll is not available on ") + core.soc.name, at);
    SimCheck(core.kernelType == KERNEL_TYPE_MIX_AIV_1_0,
             "SyncAll(): a vector-only kernel must declare KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0)", at);
    SimCheck(core.barrier != nullptr, "SyncAll(): no launch barrier (cores not run together)", at);
    SimCheck(core.scheduleMode == 1,
             "SyncAll(): the tiling must set SetScheduleMode(1) (batch mode) so every core of the launch runs "
             "concurrently (SyncAll.md)", at);
    core.pipes.Barrier(bnb_hazards::NPIPE);
    perf::SyncAllArrive();
    core.barrier->Wait();
    perf::SyncAllLeave();
    core.epoch++;
}

// Software all-core barrier (SyncAll.md, 软同步; asc-devkit SoftSyncAllImpl on every line, the only
// form on Atlas training / inference): each core's flag is the first int32 of its 32-byte block
// blockIdx of gmWorkspace; a call reads this core's flag, writes it + 1 and polls every core's flags
// (read into ubWorkspace) until their sum reaches cores x its value, so a second call in one launch
// needs no new zeroing (the flags count the calls). The first call re-writes its flag on every poll,
// so another core zeroing the whole workspace at its start (the documented kernel-side
// initialisation) cannot lose it. The rules of the documentation are checked: gmWorkspace and
// ubWorkspace of at least cores x 32 bytes, int32 (the prototype), ubWorkspace in VECIN / VECCALC /
// VECOUT, usedCores within the launch's block dim (the CPU build models only all of them), a block dim within the chip's cores (else the
// scheduler runs blocks in rounds and the poll never ends), and gmWorkspace zero before the first
// use: a flag that does not hold the number of this core's earlier calls is refused. The cores meet
// at the launch barrier (the poll's outcome); the flags are written for real. The performance model
// counts the GM round trips: read and write this core's flag, then one poll read of every flag after
// the last core's flag landed, each at the SoC's copy latency (no figure of its own).
template <bool isAIVOnly = true>
void SyncAll(const GlobalTensor<int32_t> &gmWorkspace, const LocalTensor<int32_t> &ubWorkspace,
             const int32_t usedCores = 0, bnb_rules::Src at = bnb_rules::Here())
{
    SimCore &core = SimThisCore();
    const char *what = "SyncAll(gmWorkspace, ubWorkspace, usedCores)";
    SimCheck(core.soc.hasSoftSyncAll, std::string("the software SyncAll is not available on ") + core.soc.name, at);
    SimCheck(core.barrier != nullptr, std::string(what) + ": no launch barrier (cores not run together)", at);
    SimCheck(usedCores >= 0 && uint32_t(usedCores) <= core.blockNum,
             std::string(what) + ": usedCores " + std::to_string(usedCores) + " exceeds the launch's block dim " +
                 std::to_string(core.blockNum), at);
    SimCheck(core.blockNum <= core.soc.coreNum,
             std::string(what) + ": block dim " + std::to_string(core.blockNum) + " exceeds the " +
                 std::to_string(core.soc.coreNum) + " cores of " + core.soc.name +
                 " (blocks run in rounds and the poll never ends)", at);
    const uint32_t n = usedCores > 0 ? uint32_t(usedCores) : core.blockNum;
    const uint64_t need = uint64_t(n) * ONE_BLK_SIZE;
    SimCheck(gmWorkspace.GetSize() * sizeof(int32_t) >= need,
             std::string(what) + ": gmWorkspace of " + std::to_string(gmWorkspace.GetSize() * sizeof(int32_t)) +
                 " bytes, needs at least cores x 32 = " + std::to_string(need), at);
    SimCheck(uint64_t(ubWorkspace.GetSize()) * sizeof(int32_t) >= need,
             std::string(what) + ": ubWorkspace of " + std::to_string(ubWorkspace.GetSize() * sizeof(int32_t)) +
                 " bytes, needs at least cores x 32 = " + std::to_string(need), at);
    const auto pos = static_cast<TPosition>(ubWorkspace.GetPosition());
    SimCheck(pos == TPosition::VECIN || pos == TPosition::VECCALC || pos == TPosition::VECOUT,
             std::string(what) + ": ubWorkspace must be in VECIN, VECCALC or VECOUT", at);
    SimCheck(n == core.blockNum, std::string(what) + ": usedCores " + std::to_string(n) + " below the block dim " +
                                     std::to_string(core.blockNum) + " is not modelled by the CPU build", at);
    core.pipes.Barrier(bnb_hazards::NPIPE);  // the real one starts with PipeBarrier<PIPE_ALL>
    int32_t *flags = const_cast<int32_t *>(gmWorkspace.GetPhyAddr());
    int32_t *mine = flags + uint64_t(core.blockIdx) * (ONE_BLK_SIZE / sizeof(int32_t));
    perf::Barrier(true);
    perf::Copy(true, mine, 1, ONE_BLK_SIZE);  // this core's flag block in, MTE2_S
    perf::Barrier(true);
    perf::Scalar(false);
    perf::Scalar(false);
    const int32_t seen = __atomic_load_n(mine, __ATOMIC_SEQ_CST);
    SimCheck(seen == int32_t(core.softSyncs),
             std::string(what) + ": gmWorkspace not zero before its first use (core " +
                 std::to_string(core.blockIdx) + "'s flag holds " + std::to_string(seen) + " after " +
                 std::to_string(core.softSyncs) + " calls; SyncAll.md: zero it on the host, or on every core "
                 "in the kernel before the first call)", at);
    __atomic_store_n(mine, seen + 1, __ATOMIC_SEQ_CST);
    perf::Copy(false, mine, 1, ONE_BLK_SIZE);  // S_MTE3, the flag out, MTE3_MTE2: it landed
    perf::Barrier(true);
    perf::SyncAllArrive();
    core.barrier->Wait();
    perf::SyncAllLeave(false);
    if (core.softSyncs == 0) {
        __atomic_store_n(mine, 1, __ATOMIC_SEQ_CST);  // the first call's polls re-write the flag
    }
    perf::Copy(true, flags, 1, need);  // the poll that sees every flag, MTE2_S, then the count
    perf::Barrier(true);
    for (uint32_t i = 0; i < n; ++i) {
        perf::Scalar(false);
    }
    core.softSyncs++;
    core.epoch++;
}

// Scalar GM accesses go through a per-core data cache; this writes back /
// invalidates it (the line of dst, or the whole cache). The CPU build has no
// cache: it checks availability and tells the GM tracker what was flushed.
template <typename T, CacheLine entireType, DcciDst dcciDst>
void DataCacheCleanAndInvalid(const GlobalTensor<T> &dst, bnb_rules::Src at = bnb_rules::Here())
{
    SimCore &core = SimThisCore();
    SimCheck(core.soc.hasDcci, std::string("DataCacheCleanAndInvalid is not available on ") + core.soc.name, at);
    const auto a = reinterpret_cast<uint64_t>(dst.GetPhyAddr()) / bnb_rules::CACHE_LINE * bnb_rules::CACHE_LINE;
    core.Gm().Dcci(core.blockIdx, core.epoch, {bnb_hazards::Space::GM, a, a + bnb_rules::CACHE_LINE},
                   entireType == CacheLine::ENTIRE_DATA_CACHE);
}

}  // namespace AscendC
#endif
