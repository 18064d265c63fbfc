// BatchNormReduceBackward Ascend C kernel (aclnnBatchNormReduceBackward
// semantics): the per-rank step of the SyncBatchNorm backward, the
// BatchNormBackward kernel class in MODE_REDUCE (batch_norm_kernel_sync.h):
//   sum_dy = sum(dy), sum_dy_xmu = sum(dy * (x - mean)),
//   grad_weight = sum_dy_xmu * invstd, grad_bias = sum_dy.
// Same work split, partial sums in unit order (deterministic, independent of
// the core count), same tail handling and cross-core rules.
#include "batch_norm_backward_kernel.h"

extern "C" __global__ __aicore__ void batch_norm_reduce_backward(GM_ADDR grad_out, GM_ADDR input, GM_ADDR mean,
                                                                 GM_ADDR invstd, GM_ADDR weight, GM_ADDR sum_dy,
                                                                 GM_ADDR sum_dy_xmu, GM_ADDR grad_weight,
                                                                 GM_ADDR grad_bias, GM_ADDR workspace, GM_ADDR tiling)
{
#if BNB_SOC_HAS_SYNC_ALL
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0);  // vector-only kernel that uses the hardware SyncAll()
#endif
    REGISTER_TILING_DEFAULT(bnb::BatchNormSyncTilingData);
    GET_TILING_DATA(tilingData, tiling);
    GM_ADDR params[bnb::PARAM_COUNT] = {weight, nullptr, nullptr, mean, invstd};
    GM_ADDR user = AscendC::GetUserWorkspace(workspace);
    bnb::DispatchSyncBatchNormStep<bnb::MODE_REDUCE>(grad_out, input, params, nullptr, grad_weight, grad_bias,
                                                     sum_dy, sum_dy_xmu, nullptr, user, tilingData);
}
