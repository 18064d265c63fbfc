// BatchNormBackward Ascend C kernel (aclnnBatchNormBackward semantics).
//
// Work is cut into units (one tile of one channel for channel-first data,
// one tile of one channel block for channel-last data); each core takes a
// contiguous run of units. Phase 1 writes each unit's partial sums
// (sum_dy, sum_dy_xhat, float32) to the workspace; every channel's totals are
// combined from its partials in unit order, so the result does not depend on
// the number of cores. Phase 2 writes grad_weight / grad_bias (per channel
// group) and the element-wise grad_input.
//
// Cross-core: on Atlas A2 / A3 / 350 the units of one channel may run on
// several cores and the hardware SyncAll() separates the phases. Atlas
// training / inference (ascend910 / ascend310p) have no SyncAll: there every
// group's units run on one core, which only reads partials it wrote itself.
//
// Tails without DataCopyPad (ascend910 / ascend310p): DataCopy moves whole
// 32-byte blocks (the GM address only needs element alignment). Reads take
// the block past a row end when it lies inside the tensor, else the block that
// ends at the tensor end (elements moved into place with scalar copies).
// Writes copy whole blocks of the row and then the block that ends exactly at
// the row end (gathered in a scratch block), so every write covers only
// elements the writer owns or recomputes bit-identically. Rows shorter than a
// block are written as contiguous regions (`flat`); a tensor or channel vector
// smaller than one block is written with scalar stores by a single core.
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
