// BatchNormReduceBackward Ascend C kernel (aclnnBatchNormReduceBackward
// semantics): the per-rank step of the SyncBatchNorm backward, the
// BatchNormBackward kernel class in MODE_REDUCE (batch_norm_kernel_sync.h):
//   sum_dy = sum(dy), sum_dy_xmu = sum(dy * (x - mean)),
//   grad_weight = sum_dy_xmu * invstd, grad_bias = sum_dy.
// Same work split, partial sums in unit order (deterministic, independent of
// the core count), same tail handling and cross-core rules.
#include "batch_norm_backward_kernel.h"

namespace bnb {
template <typename T>
__aicore__ inline void RunBatchNormReduceBackward(GM_ADDR gradOut, GM_ADDR input, GM_ADDR *params, GM_ADDR sumDy,
                                                  GM_ADDR sumDyXmu, GM_ADDR gradWeight, GM_ADDR gradBias,
                                                  GM_ADDR workspace, const BatchNormSyncTilingData &tiling)
{
    BatchNormBackwardKernel<T, MODE_REDUCE> op;
    op.Init(gradOut, input, params, nullptr, gradWeight, gradBias, workspace, tiling.base);
    op.SetSync(sumDy, sumDyXmu, nullptr, 0, 0);
    op.Process();
}
}  // namespace bnb

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
    if (tilingData.base.dtype == bnb::ELEM_FLOAT32) {
        bnb::RunBatchNormReduceBackward<float>(grad_out, input, params, sum_dy, sum_dy_xmu, grad_weight, grad_bias,
                                               user, tilingData);
    } else if (tilingData.base.dtype == bnb::ELEM_FLOAT16) {
        bnb::RunBatchNormReduceBackward<half>(grad_out, input, params, sum_dy, sum_dy_xmu, grad_weight, grad_bias,
                                              user, tilingData);
    }
#if BNB_SOC_HAS_BF16
    else if (tilingData.base.dtype == bnb::ELEM_BFLOAT16) {
        bnb::RunBatchNormReduceBackward<bfloat16_t>(grad_out, input, params, sum_dy, sum_dy_xmu, grad_weight, grad_bias,
                                                    user, tilingData);
    }
#endif
}
