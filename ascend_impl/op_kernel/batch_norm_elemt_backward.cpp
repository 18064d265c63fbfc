// BatchNormElemtBackward Ascend C kernel (aclnnBatchNormElemtBackward
// semantics): the elementwise step of the SyncBatchNorm backward, the
// BatchNormBackward kernel class in MODE_ELEMT (batch_norm_kernel_sync.h):
// phase 2 in training mode, with the group-wide totals read from sum_dy / sum_dy_xmu
// (sum(dy * xhat) = sum_dy_xmu * invstd) and 1 / n, n = sum(counter):
//   grad_input = (dy - sum_dy / n - (x - mean) * invstd^2 * sum_dy_xmu / n) * invstd * weight
// No cross-core synchronisation: every unit only reads its inputs.
#include "batch_norm_backward_kernel.h"

extern "C" __global__ __aicore__ void batch_norm_elemt_backward(GM_ADDR grad_out, GM_ADDR input, GM_ADDR mean,
                                                                GM_ADDR invstd, GM_ADDR weight, GM_ADDR sum_dy,
                                                                GM_ADDR sum_dy_xmu, GM_ADDR counter,
                                                                GM_ADDR grad_input, GM_ADDR workspace, GM_ADDR tiling)
{
    REGISTER_TILING_DEFAULT(bnb::BatchNormSyncTilingData);
    GET_TILING_DATA(tilingData, tiling);
    GM_ADDR params[bnb::PARAM_COUNT] = {weight, nullptr, nullptr, mean, invstd};
    GM_ADDR user = AscendC::GetUserWorkspace(workspace);
    bnb::DispatchSyncBatchNormStep<bnb::MODE_ELEMT>(grad_out, input, params, grad_input, nullptr, nullptr,
                                                    sum_dy, sum_dy_xmu, counter, user, tilingData);
}
