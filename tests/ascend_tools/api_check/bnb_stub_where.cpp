// Where a stand-in core stopped, in the kernel's own source: the call stack
// (backtrace + addr2line on the line tables, -g1) walked outward to the first
// frame outside the public headers, the stand-ins and the system headers.
// Used for the rule table's messages (bnb_rules::SourceLocator) and for the
// SIGABRT / SIGSEGV the public headers' own checks raise: their message goes
// to stdout, which is unbuffered here so a core that aborts still shows it.
// Plain C++ (no Ascend header).
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>
#include "../rules/bnb_rules.h"
#include "bnb_stub_runtime.h"

#ifndef BNB_SKIP_PREFIXES
#define BNB_SKIP_PREFIXES ""
#endif

namespace bnb_stub {
namespace {
int g_core = -1;

using Stack = std::vector<void *>;

// Call stacks recorded for the pipe-hazard tracker (CaptureTrace): an
// instruction is named only when it takes part in a hazard, so its stack is
// kept as return addresses and resolved then. A kernel has few distinct call
// stacks; each is stored once.
std::vector<Stack> g_traces(1);  // trace 0: none (the current stack)
std::map<Stack, uint32_t> g_traceIds;

Stack Current()
{
    void *addrs[64];
    const int n = backtrace(addrs, 64);
    return Stack(addrs, addrs + n);
}

// (function, "file:line") of every frame, innermost first, inlined frames expanded.
std::vector<std::pair<std::string, std::string>> Frames(const Stack &addrs)
{
    const int n = int(addrs.size());
    std::vector<std::pair<std::string, std::string>> out;
    for (int i = 0; i < n; ++i) {
        Dl_info info{};
        if (dladdr(addrs[i], &info) == 0 || info.dli_fname == nullptr) continue;
        // A return address points after the call: step back one byte into it.
        const uintptr_t rel = reinterpret_cast<uintptr_t>(addrs[i]) - reinterpret_cast<uintptr_t>(info.dli_fbase) - 1;
        const std::string exe = std::strchr(info.dli_fname, '/') ? info.dli_fname : "/proc/self/exe";
        char cmd[1024];
        std::snprintf(cmd, sizeof(cmd), "addr2line -f -i -C -e '%s' 0x%lx 2>/dev/null", exe.c_str(),
                      static_cast<unsigned long>(rel));
        FILE *p = popen(cmd, "r");
        if (p == nullptr) continue;
        char fn[2048], loc[2048];
        while (std::fgets(fn, sizeof(fn), p) && std::fgets(loc, sizeof(loc), p)) {
            fn[std::strcspn(fn, "\n")] = 0;
            loc[std::strcspn(loc, "\n")] = 0;
            std::string l = loc;
            const size_t d = l.find(" (discriminator");
            if (d != std::string::npos) l.resize(d);
            out.emplace_back(fn, l);
        }
        pclose(p);
    }
    return out;
}

bool Skipped(const std::string &loc)
{
    // Unknown frames, and the C library's (its line tables name relative paths).
    if (loc.empty() || loc[0] != '/' || loc.rfind("/usr/", 0) == 0) return true;
    const std::string prefixes = BNB_SKIP_PREFIXES;
    size_t start = 0;
    while (start <= prefixes.size()) {
        const size_t end = prefixes.find(':', start);
        const std::string pre = prefixes.substr(start, end == std::string::npos ? std::string::npos : end - start);
        if (!pre.empty() && loc.rfind(pre, 0) == 0) return true;
        if (end == std::string::npos) break;
        start = end + 1;
    }
    return loc.find("bnb_stub") != std::string::npos || loc.find("bnb_rules.h") != std::string::npos;
}

// The kernel frame and the innermost frame inside the headers.
std::pair<std::string, std::string> KernelAndInnermost(const Stack &stack)
{
    std::string kernel, inner;
    for (const auto &f : Frames(stack)) {
        const bool skip = Skipped(f.second);
        if (inner.empty() && skip && f.second.find("bnb_stub") == std::string::npos &&
            f.second.rfind("/usr/", 0) != 0 && f.second[0] == '/') {
            inner = f.second + " (" + f.first + ")";
        }
        if (!skip) {
            kernel = f.second;
            break;
        }
    }
    return {kernel, inner};
}

bnb_rules::Src Locate(uint32_t trace)
{
    static std::string where;  // keeps the file name alive for the Src (Where() copies it at once)
    const auto k = KernelAndInnermost(trace != 0 && trace < g_traces.size() ? g_traces[trace] : Current());
    if (k.first.empty()) return {};
    const size_t colon = k.first.rfind(':');
    where = k.first.substr(0, colon);
    return {where.c_str(), unsigned(std::strtoul(k.first.c_str() + colon + 1, nullptr, 10))};
}

void StopCore(const std::string &message)
{
    std::fflush(stdout);
    std::fprintf(stderr, "[bnb-check] core %d: %s\n", g_core, message.c_str());
    std::fflush(stderr);
    std::_Exit(bnb_rules::VIOLATION_EXIT);
}

void OnSignal(int sig)
{
    std::fflush(stdout);
    const auto k = KernelAndInnermost(Current());
    std::fprintf(stderr,
                 "[bnb-check] core %d: %s raised inside the public Ascend C headers' own checks (their message, if "
                 "any, is printed above) in %s, called from the kernel at %s\n",
                 g_core, sig == SIGABRT ? "SIGABRT" : strsignal(sig), k.second.empty() ? "?" : k.second.c_str(),
                 k.first.empty() ? "an unknown line" : k.first.c_str());
    std::fflush(stderr);
    signal(sig, SIG_DFL);
    raise(sig);
}
}  // namespace

uint32_t CaptureTrace()
{
    Stack s = Current();
    auto it = g_traceIds.find(s);
    if (it != g_traceIds.end()) return it->second;
    const uint32_t id = uint32_t(g_traces.size());
    g_traces.push_back(s);
    g_traceIds.emplace(std::move(s), id);
    return id;
}

void InstallCoreDiagnostics(int core)
{
    g_core = core;
    std::setvbuf(stdout, nullptr, _IONBF, 0);
    bnb_rules::SourceLocator() = Locate;
    bnb_rules::StopHandler() = StopCore;
    signal(SIGABRT, OnSignal);
    signal(SIGSEGV, OnSignal);
    signal(SIGBUS, OnSignal);
}
}  // namespace bnb_stub
