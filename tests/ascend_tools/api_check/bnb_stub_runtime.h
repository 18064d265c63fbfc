// Core runner of the real-API CPU build (see bnb_api_launch.cpp): one forked
// process per core, as CANN's CPU-debug runner does.
#ifndef BNB_API_CHECK_STUB_RUNTIME_H
#define BNB_API_CHECK_STUB_RUNTIME_H
#include <cstdint>
#include <functional>
#include <string>

namespace bnb_stub {
struct LaunchConfig {
    uint32_t blockNum = 1;
    std::function<void()> kernel;  // the entry call, run once per core
    int timeoutSeconds = 300;
    uint32_t scheduleMode = 0;  // what the tiling set (TilingContext::SetScheduleMode); SyncAll needs 1
};
// Runs every core to its end; returns "" or what went wrong.
std::string RunCores(const LaunchConfig &cfg);
// In a core process: unbuffered stdout, a rule violation or a signal from the
// headers' own checks reported with the kernel source line (bnb_stub_where.cpp).
void InstallCoreDiagnostics(int core);
// The current call stack, kept for a later message (bnb_rules::Src::trace).
uint32_t CaptureTrace();
}  // namespace bnb_stub
#endif
