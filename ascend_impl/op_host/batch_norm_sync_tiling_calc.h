// Host tiling of the two SyncBatchNorm backward steps: the BatchNormBackward
// tiling (batch_norm_backward_tiling_calc.h) in training mode with weight,
// save_mean (= mean) and save_invstd (= invstd) as the per-channel inputs,
// plus the count vector of the elementwise step.
#ifndef BATCH_NORM_SYNC_TILING_CALC_H
#define BATCH_NORM_SYNC_TILING_CALC_H
#include "batch_norm_backward_tiling_calc.h"
#include "../op_kernel/batch_norm_sync_tiling.h"

namespace bnb {

// `in`: shape, layout, dtype, SoC fields, present / paramFloat32 bits (WEIGHT,
// SAVE_MEAN, SAVE_INVSTD), gradParamFloat32. reduce: outputMask is the
// (input_g, weight_g, bias_g) mask; elemt: grad_input only.
inline std::string ComputeSyncTiling(bool reduce, TilingInput in, int64_t counterLen, uint32_t counterType,
                                     BatchNormSyncTilingData &t)
{
    t = BatchNormSyncTilingData{};
    in.training = true;
    in.allowSinglePass = false;  // each step reads grad_out / input once already
    in.hasSoftSyncAll = false;   // without the hardware SyncAll the steps keep whole groups per core
    in.present |= (1u << SAVE_MEAN) | (1u << SAVE_INVSTD);
    in.present &= (1u << WEIGHT) | (1u << SAVE_MEAN) | (1u << SAVE_INVSTD);
    if (!reduce) {
        in.outputMask = 1u << GRAD_INPUT;
        if (counterLen < 0 || counterType > COUNTER_INT64) {
            return "bad counter";
        }
    }
    const std::string why = ComputeTiling(in, t.base);
    if (why.empty() && reduce) {
        TryWholeChannels(in, t.base);
    }
    t.counterLen = reduce ? 0 : counterLen;
    t.counterType = reduce ? 0 : counterType;
    return why;
}

// Workspace: the partial sums of the reduce step; the elementwise step needs none.
inline uint64_t SyncWorkspaceBytes(bool reduce, const BatchNormSyncTilingData &t)
{
    return reduce ? WorkspaceBytes(t.base) : 0;
}

}  // namespace bnb
#endif
