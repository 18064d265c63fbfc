// Process-level part of the stand-ins for CANN's closed CPU-debug library:
// the globals the public headers declare extern, the per-core identity, the
// SyncAll barrier (process-shared) and the core runner. Compiled against the
// public headers for one SoC, like the kernel entries.
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>
#include "kernel_operator.h"
#include "../rules/bnb_rules.h"
#include "bnb_stub_runtime.h"

// The rule table's UB size for this core type is the headers' own.
namespace {
const bool g_ubAgrees = [] {
    const bnb_rules::Soc *soc = bnb_rules::SocOfArch(__NPU_ARCH__);
    if (soc != nullptr && soc->ubBytes != AscendC::TOTAL_UB_SIZE) {
        std::fprintf(stderr, "[bnb-check] rule table UB size %u differs from the headers' TOTAL_UB_SIZE %u\n",
                     soc->ubBytes, unsigned(AscendC::TOTAL_UB_SIZE));
        std::_Exit(bnb_rules::VIOLATION_EXIT);
    }
    return true;
}();
// ... and so are its event ids per HardEvent (kernel_macros.h QUE_MAX_EVENT), as the rules' QueMaxEvent.
const bool g_eventIdsAgree = [] {
    const bnb_rules::Soc *soc = bnb_rules::SocOfArch(__NPU_ARCH__);
    const int rules = bnb_rules::QueMaxEvent(__NPU_ARCH__);
    if ((soc != nullptr && soc->eventIds != uint32_t(AscendC::QUE_MAX_EVENT)) || rules != AscendC::QUE_MAX_EVENT) {
        std::fprintf(stderr, "[bnb-check] event ids: table %d, rules %d, the headers' QUE_MAX_EVENT %d\n",
                     soc != nullptr ? int(soc->eventIds) : -1, rules, int(AscendC::QUE_MAX_EVENT));
        std::_Exit(bnb_rules::VIOLATION_EXIT);
    }
    return true;
}();
}  // namespace

// ---- globals the public headers declare extern in CPU-debug mode ----
int32_t g_coreType = AscendC::AIV;
int32_t g_matmulCount = 0;
uint64_t g_tilingKey = 0;
int64_t block_idx = 0;
int64_t sub_block_idx = 0;
int64_t block_num = 1;
int64_t g_taskRation = 1;
uint64_t g_fixpipeNdNzParam = 0;
namespace AscendC {
bool g_isVdeq = false;
bool g_isAtomic = false;
AtomicType g_atomicType = SUM;

// Cross-process lock of the CPU-debug atomics (unused by our kernels, which
// never enable atomics): a process-shared rwlock is more than they need, so
// these abort if ever reached.
ProcessLock *ProcessLock::processLock = nullptr;
ProcessLock *ProcessLock::CreateLock() { bnb_stub::Unmodelled("ProcessLock"); }
int ProcessLock::Write() { bnb_stub::Unmodelled("ProcessLock"); }
int ProcessLock::Unlock() { bnb_stub::Unmodelled("ProcessLock"); }

// The source of the next vgather (Gather's CPU-debug hand-over of its source; bnb_stub_impl.h).
void SetModelGatherbSrc0Tensor(uint64_t src0, const uint32_t length) { bnb_stub::GatherSrc() = {src0, length}; }

// The closed library's argument checkers (check::*) are in bnb_stub_checks.cpp.
}  // namespace AscendC

namespace {
pthread_barrier_t *g_barrier = nullptr;  // in shared memory, one per launch
uint32_t g_barrierCount = 0;
uint32_t g_scheduleMode = 0;
}  // namespace

void __sync_all_stub(int32_t usedCores, bool isAIVOnly)
{
    (void)isAIVOnly;
    bnb_rules::Require(g_scheduleMode == 1, "SyncAll",
                       "the tiling must set SetScheduleMode(1) (batch mode) so every core of the launch runs "
                       "concurrently (SyncAll.md)",
                       "schedule mode " + std::to_string(g_scheduleMode), {});
    if (g_barrier == nullptr || (usedCores > 0 && uint32_t(usedCores) != g_barrierCount)) {
        std::fprintf(stderr, "SyncAll: %d cores asked, %u launched\n", usedCores, g_barrierCount);
        std::abort();
    }
    pthread_barrier_wait(g_barrier);
}

namespace {
int64_t g_pendingFlag = -1;  // flag of the last ffts_cross_core_sync of this core
}  // namespace

void ffts_cross_core_sync(pipe_t pipe, uint64_t config)
{
    (void)pipe;
    const uint64_t mode = (config >> 4) & 0x3, flag = (config >> 8) & 0xf;
    if (mode != 0) {
        bnb_stub::Unmodelled("ffts_cross_core_sync (group modes)");
    }
    g_pendingFlag = int64_t(flag);
}

void wait_flag_dev(int64_t flagId)
{
    if (flagId != g_pendingFlag) {
        bnb_stub::Unmodelled("wait_flag_dev without a matching all-core ffts_cross_core_sync");
    }
    g_pendingFlag = -1;
    __sync_all_stub(int32_t(g_barrierCount), true);
    bnb_stub::PipeBarrierOf(PIPE_ALL);  // every pipe's earlier work is done (the headers' SyncAll barriers first)
}

void __ib_set_stub(int32_t, int32_t, bool) { bnb_stub::Unmodelled("IBSet"); }
void __ib_wait_stub(int32_t, int32_t, bool) { bnb_stub::Unmodelled("IBWait"); }

namespace bnb_stub {
std::string RunCores(const LaunchConfig &cfg)
{
    void *mem = mmap(nullptr, sizeof(pthread_barrier_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        return "mmap failed";
    }
    pthread_barrierattr_t attr;
    pthread_barrierattr_init(&attr);
    pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    g_barrier = static_cast<pthread_barrier_t *>(mem);
    g_barrierCount = cfg.blockNum;
    g_scheduleMode = cfg.scheduleMode;
    pthread_barrier_init(g_barrier, &attr, cfg.blockNum);
    std::fflush(nullptr);
    std::vector<pid_t> pids;
    for (uint32_t c = 0; c < cfg.blockNum; ++c) {
        const pid_t pid = fork();
        if (pid < 0) {
            for (pid_t p : pids) kill(p, SIGKILL);
            return "fork failed";
        }
        if (pid == 0) {
            InstallCoreDiagnostics(int(c));
            block_idx = c;
            block_num = cfg.blockNum;
            sub_block_idx = 0;
            g_taskRation = 1;
            g_coreType = AscendC::AIV;
            cfg.kernel();
            std::fflush(nullptr);
            _exit(0);
        }
        pids.push_back(pid);
    }
    std::string failure;
    size_t left = pids.size();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(cfg.timeoutSeconds);
    while (left > 0) {
        int status = 0;
        const pid_t done = waitpid(-1, &status, WNOHANG);
        if (done == 0) {
            if (std::chrono::steady_clock::now() > deadline) {
                failure = "timeout: a core did not finish";
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            continue;
        }
        if (done < 0) {
            break;
        }
        --left;
        size_t core = 0;
        while (core < pids.size() && pids[core] != done) ++core;
        if (core < pids.size()) pids[core] = 0;
        if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && failure.empty()) {
            failure = "core " + std::to_string(core) + (WIFSIGNALED(status)
                                                            ? " killed by signal " + std::to_string(WTERMSIG(status))
                                                            : " exited with " + std::to_string(WEXITSTATUS(status)));
            break;
        }
    }
    if (!failure.empty()) {
        for (pid_t p : pids) {
            if (p > 0) kill(p, SIGKILL);
        }
        while (waitpid(-1, nullptr, 0) > 0) {
        }
    }
    pthread_barrier_destroy(g_barrier);
    munmap(mem, sizeof(pthread_barrier_t));
    g_barrier = nullptr;
    return failure;
}
}  // namespace bnb_stub
