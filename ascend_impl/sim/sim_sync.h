// Pipeline and cross-core synchronisation (CPU build). Each core runs as a
// thread; SyncAll is a barrier across the cores of the launch.
#ifndef BNB_SIM_SYNC_H
#define BNB_SIM_SYNC_H
#include <condition_variable>
#include <mutex>
#include "sim_tensor.h"
#include "sim_kernel_type.h"

namespace AscendC {

// Reusable barrier for the cores of one launch.
class SimBarrier {
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

template <pipe_t pipe>
void PipeBarrier()
{
    perf::Barrier(pipe == PIPE_ALL);
}

template <HardEvent event>
void SetFlag(int32_t id)
{
    perf::SetFlag(event, id);
}
template <HardEvent event>
void WaitFlag(int32_t id)
{
    perf::WaitFlag(event, id);
}

enum class CacheLine : uint64_t { SINGLE_CACHE_LINE = 0, ENTIRE_DATA_CACHE };
enum class DcciDst : uint64_t { CACHELINE_ALL = 0, CACHELINE_UB, CACHELINE_OUT, CACHELINE_ATOMIC };

// Hardware all-core barrier (Atlas A2 / A3 / 350). The real API requires the
// kernel type KERNEL_TYPE_MIX_AIV_1_0 for a vector-only kernel in separated
// mode; neither form of SyncAll exists on Atlas training / inference.
template <bool isAIVOnly = true>
void SyncAll()
{
    SimCore &core = SimThisCore();
    SimCheck(core.soc.hasSyncAll, std::string("SyncAll is not available on ") + core.soc.name);
    SimCheck(core.kernelType == KERNEL_TYPE_MIX_AIV_1_0,
             "SyncAll(): a vector-only kernel must declare KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0)");
    perf::SyncAllArrive();
    static_cast<SimBarrier *>(core.barrier)->Wait();
    perf::SyncAllLeave();
}

// Scalar GM accesses go through a per-core data cache; this writes back /
// invalidates it. The CPU build has no cache: it checks availability only.
template <typename T, CacheLine entireType, DcciDst dcciDst>
void DataCacheCleanAndInvalid(const GlobalTensor<T> &dst)
{
    (void)dst;
    SimCheck(SimThisCore().soc.hasDcci,
             std::string("DataCacheCleanAndInvalid is not available on ") + SimThisCore().soc.name);
}

}  // namespace AscendC
#endif
