// Launcher of the CPU build: runs the unchanged kernel source core by core
// (one thread per core, SyncAll as a barrier) after the unchanged host
// tiling. Loaded by the ascend_sim tests through ctypes.
#include <string>
#include <thread>
#include <vector>
#include "kernel_operator.h"
#include "batch_norm_backward.cpp"
#include "batch_norm_backward_tiling_calc.h"

namespace {
void CopyError(const std::string &msg, char *err, int errLen)
{
    if (err && errLen > 0) {
        std::snprintf(err, errLen, "%s", msg.c_str());
    }
}
}  // namespace

// Tiling summary handed back to the tests.
struct SimTilingInfo {
    int64_t usedCores, layout, units, groups, tileRows, tileCols, rowBlocks, colBlocks, usePad, crossCore, flat, shiftLast,
        strategy, spChannels, l2Rounds, spQuantum, l2Channels, spSegSum, softSync, spBuffers, spSlabRows, spWhole, spLaneSums, plTail, plAhead, spSpare,
        spChunkRows, outBuffers, inBuffers, spEven, spLastRows;
};

namespace {
int g_forceTwoPass = 0;  // bnb_sim_force_two_pass: the tiling may not pick the single pass
uint64_t g_l2Bytes = 0;  // bnb_sim_set_l2_bytes: L2 the tiling sizes its rounds by (0: none)
}  // namespace

// L2 bytes of the next runs' tiling (small values force the two-pass L2 rounds on small shapes).
extern "C" void bnb_sim_set_l2_bytes(uint64_t bytes) { g_l2Bytes = bytes; }

// 1: the next runs use the two-pass strategy even where a channel group fits UB (tests of both strategies).
extern "C" void bnb_sim_force_two_pass(int on) { g_forceTwoPass = on; }
// A SoC line's event ids per HardEvent: the table's (op_def event_ids) and the rules' QueMaxEvent of its
// __NPU_ARCH__ (what the stand-in TPipe and SetFlag / WaitFlag enforce); -1 for an unknown line.
extern "C" void bnb_sim_event_ids(const char *soc, int *table, int *rules)
{
    const bnb_rules::Soc *s = bnb_rules::FindSoc(soc);
    *table = s ? int(s->eventIds) : -1;
    *rules = s ? bnb_rules::QueMaxEvent(s->npuArch) : -1;
}

extern "C" int bnb_sim_run(const char *soc, uint32_t ubBytes, uint32_t coreNum, const int64_t *shape, int rank,
                           int channelLast, int dtype, int training, float eps, int outputMask, void *gradOut,
                           void *input, void **params, uint32_t paramFloat32, int gradParamFloat32, void *gradInput,
                           void *gradWeight, void *gradBias, SimTilingInfo *info, char *err, int errLen)
{
    try {
        const AscendC::SimSoc &s = AscendC::SimFindSoc(soc);
        bnb::TilingInput in;
        in.shape.assign(shape, shape + rank);
        in.channelLast = channelLast;
        in.dtype = dtype;
        in.training = training;
        in.outputMask = outputMask;
        for (uint32_t i = 0; i < bnb::PARAM_COUNT; ++i) {
            in.present |= (params[i] != nullptr) << i;
        }
        in.paramFloat32 = paramFloat32;
        in.gradParamFloat32 = gradParamFloat32;
        in.eps = eps;
        in.ubBytes = ubBytes ? ubBytes : s.ubBytes;
        in.coreNum = coreNum ? coreNum : s.coreNum;
        in.hasDataCopyPad = s.hasDataCopyPad;
        in.hasSyncAll = s.hasSyncAll;
        in.hasSoftSyncAll = s.hasSoftSyncAll;
        in.hasDcci = s.hasDcci;
        in.hasBf16 = s.hasBf16;
        in.hasMulAdd = s.hasMulAdd;
        in.hasReduceRepeat = s.hasReduceRepeat;
        in.hasBlockCopy = s.hasBlockCopy;
        in.eventIds = s.eventIds;
        in.allowSinglePass = !g_forceTwoPass;
        in.l2Bytes = g_l2Bytes;
        bnb::BatchNormBackwardTilingData t;
        std::string why = bnb::ComputeTiling(in, t);
        if (!why.empty()) {
            CopyError("tiling: " + why, err, errLen);
            return 1;
        }
        *info = {t.usedCores, t.layout, t.units, t.groups, t.tileRows, t.tileCols, t.rowBlocks, t.colBlocks, t.usePad,
                 t.crossCore, t.flat, t.shiftLast, t.strategy, t.spChannels, t.l2Rounds, t.spQuantum, t.l2Channels,
                 t.spSegSum, t.softSync, t.spBuffers, t.spSlabRows, t.spWhole, t.spLaneSums, t.plTail, t.plAhead, t.spSpare,
                 t.spChunkRows, t.outBuffers, t.inBuffers, t.spEven, t.spLastRows};
        // Garbage, as the framework's workspace holds (the software SyncAll's flags must be zeroed by the kernel).
        std::vector<uint8_t> workspace(bnb::WorkspaceBytes(t), 0xA5);
        std::vector<uint8_t> tiling(reinterpret_cast<uint8_t *>(&t), reinterpret_cast<uint8_t *>(&t) + sizeof(t));
        AscendC::SimBarrier barrier(t.usedCores);
        std::vector<std::string> errors(t.usedCores);
        std::vector<std::thread> cores;
        for (uint32_t c = 0; c < t.usedCores; ++c) {
            cores.emplace_back([&, c] {
                AscendC::SimCore &core = AscendC::SimThisCore();
                core.Reset(s, in.ubBytes, c, t.usedCores);
                core.barrier = &barrier;
                core.scheduleMode = bnb::ScheduleMode(t);  // what the op_host tiling sets
                try {
                    auto p = reinterpret_cast<GM_ADDR *>(params);
                    batch_norm_backward(static_cast<GM_ADDR>(gradOut), static_cast<GM_ADDR>(input), p[0], p[1], p[2],
                                        p[3], p[4], static_cast<GM_ADDR>(gradInput), static_cast<GM_ADDR>(gradWeight),
                                        static_cast<GM_ADDR>(gradBias), workspace.data(), tiling.data());
                } catch (const std::exception &e) {
                    errors[c] = "core " + std::to_string(c) + ": " + e.what();
                    barrier.Abort();
                }
            });
        }
        for (auto &th : cores) {
            th.join();
        }
        for (const auto &e : errors) {
            if (!e.empty() && e.find("another core failed") == std::string::npos) {
                CopyError(e, err, errLen);
                return 2;
            }
        }
        return 0;
    } catch (const std::exception &e) {
        CopyError(e.what(), err, errLen);
        return 2;
    }
}
