// Launcher of the CPU build for the SyncBatchNorm backward steps: runs the
// unchanged BatchNormReduceBackward / BatchNormElemtBackward kernel sources
// core by core after the unchanged host tiling (batch_norm_sync_tiling_calc.h).
// Loaded by test_sync_kernels_sim.py through ctypes.
#include <string>
#include <thread>
#include <vector>
#include "kernel_operator.h"
#include "batch_norm_reduce_backward.cpp"
#include "batch_norm_elemt_backward.cpp"
#include "batch_norm_sync_tiling_calc.h"

// mode 1: reduce, 2: elemt. params: weight (may be null), mean, invstd.
// f32Bits: bit 0 weight, bit 1 mean / invstd / sums stored as float32.
extern "C" int bnb_sim_sync_run(const char *soc, uint32_t ubBytes, uint32_t coreNum, const int64_t *shape, int rank,
                                int channelLast, int dtype, int mode, int outputMask, void *gradOut, void *input,
                                void *mean, void *invstd, void *weight, uint32_t f32Bits, int gradParamFloat32,
                                void *sumDy, void *sumDyXmu, void *counter, int64_t counterLen, int counterType,
                                void *gradInput, void *gradWeight, void *gradBias, int64_t *info, char *err,
                                int errLen)
{
    auto fail = [&](const std::string &msg, int rc) {
        if (err && errLen > 0) std::snprintf(err, errLen, "%s", msg.c_str());
        return rc;
    };
    try {
        const AscendC::SimSoc &s = AscendC::SimFindSoc(soc);
        const bool reduce = mode == 1;
        bnb::TilingInput in;
        in.shape.assign(shape, shape + rank);
        in.channelLast = channelLast;
        in.dtype = dtype;
        in.outputMask = outputMask;
        in.present = weight ? 1u << bnb::WEIGHT : 0;
        in.paramFloat32 = ((f32Bits & 1) ? 1u << bnb::WEIGHT : 0) |
                          ((f32Bits & 2) ? (1u << bnb::SAVE_MEAN) | (1u << bnb::SAVE_INVSTD) : 0);
        in.gradParamFloat32 = gradParamFloat32;
        in.ubBytes = ubBytes ? ubBytes : s.ubBytes;
        in.coreNum = coreNum ? coreNum : s.coreNum;
        in.hasDataCopyPad = s.hasDataCopyPad;
        in.hasSyncAll = s.hasSyncAll;
        in.hasDcci = s.hasDcci;
        in.hasBf16 = s.hasBf16;
        bnb::BatchNormSyncTilingData t;
        const std::string why = bnb::ComputeSyncTiling(reduce, in, counterLen, uint32_t(counterType), t);
        if (!why.empty()) return fail("tiling: " + why, 1);
        info[0] = t.base.usedCores;
        info[1] = t.base.layout;
        info[2] = t.base.units;
        info[3] = t.base.usePad;
        info[4] = t.base.crossCore;
        info[5] = t.base.flat;
        std::vector<uint8_t> workspace(bnb::SyncWorkspaceBytes(reduce, t) + 32, 0);
        std::vector<uint8_t> tiling(reinterpret_cast<uint8_t *>(&t), reinterpret_cast<uint8_t *>(&t) + sizeof(t));
        AscendC::SimBarrier barrier(t.base.usedCores);
        std::vector<std::string> errors(t.base.usedCores);
        std::vector<std::thread> cores;
        for (uint32_t c = 0; c < t.base.usedCores; ++c) {
            cores.emplace_back([&, c] {
                AscendC::SimCore &core = AscendC::SimThisCore();
                core.Reset(s, in.ubBytes, c, t.base.usedCores);
                core.barrier = &barrier;
                core.scheduleMode = bnb::ScheduleMode(t.base);  // what the op_host tiling sets
                try {
                    auto g = [](void *p) { return static_cast<GM_ADDR>(p); };
                    if (reduce) {
                        batch_norm_reduce_backward(g(gradOut), g(input), g(mean), g(invstd), g(weight), g(sumDy),
                                                   g(sumDyXmu), g(gradWeight), g(gradBias), workspace.data(),
                                                   tiling.data());
                    } else {
                        batch_norm_elemt_backward(g(gradOut), g(input), g(mean), g(invstd), g(weight), g(sumDy),
                                                  g(sumDyXmu), g(counter), g(gradInput), workspace.data(),
                                                  tiling.data());
                    }
                } catch (const std::exception &e) {
                    errors[c] = "core " + std::to_string(c) + ": " + e.what();
                    barrier.Abort();
                }
            });
        }
        for (auto &th : cores) th.join();
        for (const auto &e : errors) {
            if (!e.empty() && e.find("another core failed") == std::string::npos) return fail(e, 2);
        }
        return 0;
    } catch (const std::exception &e) {
        return fail(e.what(), 2);
    }
}
