// The performance model's launcher: the unchanged host tiling and kernel of
// BatchNormBackward run in the CPU build (tests/ascend_tools/sim) with the counters
// and pipe timeline of sim_perf.h switched on, for one SoC line of
// op_def/ascend_soc_capabilities.yaml (batch_norm_soc_caps.gen.h). Loaded
// through ctypes by bench/ascend_model.py (`bench --ascend`) and the tests.
//
//   skipData 1: check and count every instruction, move no data (whole
//               ResNet-50 layers in milliseconds); 0: the full CPU build
//               (the tests compare both counts).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include "kernel_operator.h"
#include "batch_norm_backward.cpp"
#include "batch_norm_backward_tiling_calc.h"
#include "batch_norm_soc_caps.gen.h"

// What one core did (times in ns).
struct BnbPerfCore {
    double endNs, busyS, busyV, busyMte2, busyMte3;
    uint64_t gmReadBytes, gmWriteBytes, actReadBytes, actWriteBytes, copies, bursts, minBurst, vectorInstrs,
        scalarOps, syncAlls, ubBytes, hbmReadBytes;
    double combineNs;  // the combine of the per-channel sums (sim_perf.h CombineBegin / End)
};

// The tiling's choices.
struct BnbPerfTiling {
    int64_t strategy, usedCores, crossCore, spChannels, groups, units, workspaceBytes, l2Rounds, groupWidth,
        l2Channels, softSync, plTail;
};

namespace {
struct Freer {
    void operator()(void *p) const { std::free(p); }
};
using Gm = std::unique_ptr<uint8_t, Freer>;

Gm Zeros(uint64_t bytes)
{
    // calloc: untouched pages cost nothing when the launch skips the data.
    return Gm(static_cast<uint8_t *>(std::calloc(bytes ? bytes : 1, 1)));
}

std::mutex g_launchLock;  // sim_perf.h holds one launch at a time

void Fail(const std::string &msg, char *err, int errLen)
{
    if (err && errLen > 0) {
        std::snprintf(err, errLen, "%s", msg.c_str());
    }
}

void FillLaunch(const bnb::SocCaps &caps, uint32_t usedCores, bool skipData, AscendC::perf::Launch &l)
{
    const double nsPerCycle = 1000.0 / caps.clockMhz;
    const double port = caps.coreGmBytesPerCycle / nsPerCycle;         // bytes per ns
    const double share = double(caps.gmGbps) / double(usedCores);       // GB/s = bytes per ns
    l.gmBytesPerNs = port < share ? port : share;
    l.l2BytesPerNs = caps.coreL2BytesPerCycle / nsPerCycle;
    l.l2Window = double(caps.l2Bytes) * caps.l2ReusePercent / 100.0;
    l.usedCores = usedCores;
    l.copyLatencyNs = caps.copyLatencyNs;
    l.vecNsPerRepeat = nsPerCycle;
    l.vecIssueNs = caps.vectorIssueCycles * nsPerCycle;
    l.vectorBytes = caps.vectorBytes;
    l.scalarNs = caps.scalarNs;
    l.syncAllNs = caps.syncAllNs;
    l.skipData = skipData;
    const char *trace = std::getenv("BNB_PERF_TRACE");
    l.traceCore = trace && *trace ? std::atoi(trace) : -1;
    for (auto &s : l.syncPs) {
        s.store(0);
    }
    for (auto &s : l.syncBytes) {
        s.store(0);
    }
}
}  // namespace

extern "C" int bnb_perf_run(const char *soc, const int64_t *shape, int rank, int dtype, int training, int outputMask,
                            int skipData, int forceTwoPass, BnbPerfTiling *tilingOut, BnbPerfCore *coresOut,
                            int maxCores, char *err, int errLen)
{
    try {
        const bnb::SocCaps *caps = bnb::FindSocCaps(soc);
        if (caps == nullptr) {
            Fail(std::string("unknown SoC ") + soc, err, errLen);
            return 1;
        }
        const AscendC::SimSoc &simSoc = AscendC::SimFindSoc(soc);
        bnb::TilingInput in;
        in.shape.assign(shape, shape + rank);
        in.dtype = uint32_t(dtype);
        in.training = training != 0;
        in.outputMask = uint32_t(outputMask);
        const uint32_t given = training ? bnb::PARAMS_USED_IN_TRAINING : bnb::PARAMS_USED_IN_INFERENCE;
        in.present = given;
        in.ubBytes = caps->ubBytes;
        in.l2Bytes = caps->l2Bytes;
        in.coreNum = caps->vectorCores;
        in.hasDataCopyPad = caps->dataCopyPad;
        in.hasSyncAll = caps->syncAll;
        in.hasSoftSyncAll = caps->softSyncAll;
        in.hasDcci = caps->dcci;
        in.hasBf16 = caps->bf16;
        in.hasMulAdd = caps->mulAdd;
        in.hasReduceRepeat = caps->reduceRepeat;
        in.hasBlockCopy = caps->blockCopy;
        in.eventIds = caps->eventIds;
        in.allowSinglePass = forceTwoPass == 0;
        bnb::BatchNormBackwardTilingData t;
        const std::string why = bnb::ComputeTiling(in, t);
        if (!why.empty()) {
            Fail("tiling: " + why, err, errLen);
            return 1;
        }
        if (int(t.usedCores) > maxCores) {
            Fail("more cores than the result holds", err, errLen);
            return 1;
        }
        *tilingOut = {t.strategy, t.usedCores, t.crossCore, t.spChannels, t.groups, t.units,
                      int64_t(bnb::WorkspaceBytes(t)), t.l2Rounds, t.groupWidth, t.l2Channels, t.softSync, t.plTail};

        const uint64_t total = uint64_t(t.outer) * uint64_t(t.channels) * uint64_t(t.inner);
        const uint64_t bytes = total * bnb::DtypeBytes(in.dtype);
        Gm dy = Zeros(bytes), x = Zeros(bytes), gi = Zeros(bytes), gw = Zeros(uint64_t(t.channels) * 4),
           gb = Zeros(uint64_t(t.channels) * 4), ws = Zeros(bnb::WorkspaceBytes(t));
        std::vector<Gm> params;
        GM_ADDR p[bnb::PARAM_COUNT] = {};
        for (uint32_t i = 0; i < bnb::PARAM_COUNT; ++i) {
            params.push_back(Zeros(uint64_t(t.channels) * 4));
            p[i] = (given >> i & 1) ? params.back().get() : nullptr;
        }
        std::vector<uint8_t> tiling(reinterpret_cast<uint8_t *>(&t), reinterpret_cast<uint8_t *>(&t) + sizeof(t));

        std::lock_guard<std::mutex> lock(g_launchLock);
        auto launch = std::make_unique<AscendC::perf::Launch>();
        FillLaunch(*caps, t.usedCores, skipData != 0, *launch);
        const uint8_t *acts[] = {dy.get(), x.get(), gi.get()};
        for (uint32_t i = 0; i < AscendC::perf::MAX_ACT; ++i) {
            launch->actLo[i] = acts[i];
            launch->actHi[i] = acts[i] + bytes;
            const uint64_t lines = bytes / AscendC::perf::L2_LINE + 1;
            launch->lineStamp[i].reset(new std::atomic<uint64_t>[lines]);
            for (uint64_t j = 0; j < lines; ++j) {
                launch->lineStamp[i][j].store(0);
            }
        }
        AscendC::perf::ThisLaunch() = launch.get();
        AscendC::SimBarrier barrier(t.usedCores);
        std::vector<std::string> errors(t.usedCores);
        std::vector<std::thread> threads;
        for (uint32_t c = 0; c < t.usedCores; ++c) {
            threads.emplace_back([&, c] {
                AscendC::SimCore &core = AscendC::SimThisCore();
                core.Reset(simSoc, in.ubBytes, c, t.usedCores);
                core.barrier = &barrier;
                core.scheduleMode = bnb::ScheduleMode(t);  // what the op_host tiling sets
                AscendC::perf::Core &pc = AscendC::perf::ThisCore();
                pc = AscendC::perf::Core{};
                try {
                    batch_norm_backward(dy.get(), x.get(), p[0], p[1], p[2], p[3], p[4], gi.get(), gw.get(), gb.get(),
                                        ws.get(), tiling.data());
                } catch (const std::exception &e) {
                    errors[c] = "core " + std::to_string(c) + ": " + e.what();
                    barrier.Abort();
                }
                using AscendC::perf::P_MTE2;
                using AscendC::perf::P_MTE3;
                using AscendC::perf::P_S;
                using AscendC::perf::P_V;
                coresOut[c] = {pc.End(), pc.busy[P_S], pc.busy[P_V], pc.busy[P_MTE2], pc.busy[P_MTE3],
                               pc.gmReadBytes, pc.gmWriteBytes, pc.actReadBytes, pc.actWriteBytes, pc.copies,
                               pc.bursts, pc.minBurst, pc.vectorInstrs, pc.scalarOps, pc.syncAlls, core.ubUsed,
                               pc.hbmReadBytes, pc.combineNs};
            });
        }
        for (auto &th : threads) {
            th.join();
        }
        AscendC::perf::ThisLaunch() = nullptr;
        for (const auto &e : errors) {
            if (!e.empty() && e.find("another core failed") == std::string::npos) {
                Fail(e, err, errLen);
                return 2;
            }
        }
        return 0;
    } catch (const std::exception &e) {
        AscendC::perf::ThisLaunch() = nullptr;
        Fail(e.what(), err, errLen);
        return 2;
    }
}
