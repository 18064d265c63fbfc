// BatchNormElemtBackward Ascend C kernel (aclnnBatchNormElemtBackward
// semantics): the elementwise step of the SyncBatchNorm backward, the
// BatchNormBackward kernel class in MODE_ELEMT (batch_norm_kernel_sync.h):
// phase 2 in training mode, with the group-wide totals read from sum_dy / sum_dy_xmu
// (sum(dy * xhat) = sum_dy_xmu * invstd) and 1 / n, n = sum(counter):
//   grad_input = (dy - sum_dy / n - (x - mean) * invstd^2 * sum_dy_xmu / n) * invstd * weight
// No cross-core synchronisation: every unit only reads its inputs.
#include "batch_norm_backward_kernel.h"

namespace bnb {
template <typename T>
__aicore__ inline void RunBatchNormElemtBackward(GM_ADDR gradOut, GM_ADDR input, GM_ADDR *params, GM_ADDR sumDy,
                                                 GM_ADDR sumDyXmu, GM_ADDR counter, GM_ADDR gradInput,
                                                 GM_ADDR workspace, const BatchNormSyncTilingData &tiling)
{
    BatchNormBackwardKernel<T, MODE_ELEMT> op;
    op.Init(gradOut, input, params, gradInput, nullptr, nullptr, workspace, tiling.base);
    op.SetSync(sumDy, sumDyXmu, counter, tiling.counterLen, tiling.counterType);
    op.Process();
}
}  // namespace bnb

extern "C" __global__ __aicore__ void batch_norm_elemt_backward(GM_ADDR grad_out, GM_ADDR input, GM_ADDR mean,
                                                                GM_ADDR invstd, GM_ADDR weight, GM_ADDR sum_dy,
                                                                GM_ADDR sum_dy_xmu, GM_ADDR counter,
                                                                GM_ADDR grad_input, GM_ADDR workspace, GM_ADDR tiling)
{
    REGISTER_TILING_DEFAULT(bnb::BatchNormSyncTilingData);
    GET_TILING_DATA(tilingData, tiling);
    GM_ADDR params[bnb::PARAM_COUNT] = {weight, nullptr, nullptr, mean, invstd};
    GM_ADDR user = AscendC::GetUserWorkspace(workspace);
    if (tilingData.base.dtype == bnb::ELEM_FLOAT32) {
        bnb::RunBatchNormElemtBackward<float>(grad_out, input, params, sum_dy, sum_dy_xmu, counter, grad_input, user,
                                              tilingData);
    } else if (tilingData.base.dtype == bnb::ELEM_FLOAT16) {
        bnb::RunBatchNormElemtBackward<half>(grad_out, input, params, sum_dy, sum_dy_xmu, counter, grad_input, user,
                                             tilingData);
    }
#if BNB_SOC_HAS_BF16
    else if (tilingData.base.dtype == bnb::ELEM_BFLOAT16) {
        bnb::RunBatchNormElemtBackward<bfloat16_t>(grad_out, input, params, sum_dy, sum_dy_xmu, counter, grad_input,
                                                   user, tilingData);
    }
#endif
}
