// Pipeline and cross-core synchronisation (CPU build). Each core runs as a
// thread; SyncAll is a barrier across the cores of the launch.
#ifndef BNB_SIM_SYNC_H
#define BNB_SIM_SYNC_H
#include <condition_variable>
#include <mutex>
#include "sim_tensor.h"

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
void PipeBarrier() {}

template <HardEvent event>
void SetFlag(int32_t) {}
template <HardEvent event>
void WaitFlag(int32_t) {}

// Soft synchronisation: gmWorkspace >= blockNum * 32 bytes (zeroed), ubWorkspace >= blockNum * 32 bytes.
template <bool isAIVOnly = true>
void SyncAll(const GlobalTensor<int32_t> &gmWorkspace, const LocalTensor<int32_t> &ubWorkspace,
             const int32_t usedCores = 0)
{
    SimCore &core = SimThisCore();
    const uint64_t need = uint64_t(usedCores ? usedCores : core.blockNum) * ONE_BLK_SIZE / sizeof(int32_t);
    SimCheck(usedCores >= 0 && uint32_t(usedCores) <= core.blockNum, "SyncAll: usedCores above the block count");
    SimCheck(usedCores == 0 || uint32_t(usedCores) == core.blockNum,
             "SyncAll: this CPU build models all-core synchronisation only");
    gmWorkspace.SimPtr(need, "SyncAll (gmWorkspace)");
    ubWorkspace.SimPtr(need, "SyncAll (ubWorkspace)");
    static_cast<SimBarrier *>(core.barrier)->Wait();
}

}  // namespace AscendC
#endif
