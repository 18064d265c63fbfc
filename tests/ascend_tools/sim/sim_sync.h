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
template <HardEvent event>
void SetFlag(int32_t eventId)
{
    const auto pipes = sim::EventPipes(event);
    perf::SetFlag(event, eventId);
    if (pipes.first >= 0) {
        SimThisCore().pipes.SetFlag(pipes.first, pipes.second, eventId);
    }
}
template <HardEvent event>
void WaitFlag(int32_t eventId, bnb_rules::Src at = bnb_rules::Here())
{
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
// mode; neither form of SyncAll exists on Atlas training / inference.
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
