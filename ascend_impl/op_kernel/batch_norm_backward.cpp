// BatchNormBackward Ascend C kernel (aclnnBatchNormBackward semantics): the
// entry of the kernel class in batch_norm_backward_kernel.h (MODE_FULL), which
// describes the flow of one launch. Where to read on: how the work is cut into
// units and groups and shared among cores, batch_norm_kernel_work_split.h; the
// layouts, batch_norm_kernel_channel_first.h / _channel_last.h / _flat.h; the
// tails without DataCopyPad, batch_norm_kernel_copy.h.
#include "batch_norm_backward_kernel.h"

extern "C" __global__ __aicore__ void batch_norm_backward(GM_ADDR grad_out, GM_ADDR input, GM_ADDR weight,
                                                          GM_ADDR running_mean, GM_ADDR running_var,
                                                          GM_ADDR save_mean, GM_ADDR save_invstd,
                                                          GM_ADDR grad_input, GM_ADDR grad_weight,
                                                          GM_ADDR grad_bias, GM_ADDR workspace, GM_ADDR tiling)
{
#if BNB_SOC_HAS_SYNC_ALL
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0);  // vector-only kernel that uses the hardware SyncAll()
#endif
    REGISTER_TILING_DEFAULT(bnb::BatchNormBackwardTilingData);
    GET_TILING_DATA(tilingData, tiling);
    GM_ADDR params[bnb::PARAM_COUNT] = {weight, running_mean, running_var, save_mean, save_invstd};
    GM_ADDR user = AscendC::GetUserWorkspace(workspace);
#if defined(DTYPE_GRAD_OUT)
    bnb::RunBatchNormBackward<DTYPE_GRAD_OUT>(grad_out, input, params, grad_input, grad_weight, grad_bias, user,
                                              tilingData);
#else
    if (tilingData.dtype == bnb::ELEM_FLOAT32) {
        bnb::RunBatchNormBackward<float>(grad_out, input, params, grad_input, grad_weight, grad_bias, user, tilingData);
    } else if (tilingData.dtype == bnb::ELEM_FLOAT16) {
        bnb::RunBatchNormBackward<half>(grad_out, input, params, grad_input, grad_weight, grad_bias, user, tilingData);
    }
#if BNB_SOC_HAS_BF16
    else if (tilingData.dtype == bnb::ELEM_BFLOAT16) {
        bnb::RunBatchNormBackward<bfloat16_t>(grad_out, input, params, grad_input, grad_weight, grad_bias, user,
                                              tilingData);
    }
#endif
#endif
}
