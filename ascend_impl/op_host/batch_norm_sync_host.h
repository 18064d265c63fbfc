// Host helpers shared by the op definitions of the two SyncBatchNorm backward
// steps: the SoC fields of the tiling input (as BatchNormBackward's tiling
// function fills them) and the dtype / layout mapping.
#ifndef BATCH_NORM_SYNC_HOST_H
#define BATCH_NORM_SYNC_HOST_H
#include <string>
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"
#include "batch_norm_host_common.h"
#include "batch_norm_sync_tiling_calc.h"

namespace bnb_sync_host {

using bnb_host::ChannelLast;
using bnb_host::KernelDtype;

// Shape of grad_out, dtype, per-channel inputs (weight optional; mean / invstd as
// save_mean / save_invstd) and the SoC's UB size, core count and features.
inline void FillInput(gert::TilingContext *context, int gradOutIndex, int meanIndex, int invstdIndex,
                      int weightIndex, bool channelLast, bnb::TilingInput &in, uint64_t &libWorkspace)
{
    libWorkspace = bnb_host::FillPlatform(context, in);
    bnb_host::FillShape(context, gradOutIndex, in);
    in.channelLast = channelLast;
    const ge::DataType dtype = context->GetInputDesc(gradOutIndex)->GetDataType();
    in.dtype = KernelDtype(dtype);
    bnb_host::AddParam(context, weightIndex, bnb::WEIGHT, true, dtype, in);
    bnb_host::AddParam(context, meanIndex, bnb::SAVE_MEAN, false, dtype, in);
    bnb_host::AddParam(context, invstdIndex, bnb::SAVE_INVSTD, false, dtype, in);
}

inline ge::graphStatus Finish(gert::TilingContext *context, bool reduce, const bnb::BatchNormSyncTilingData &tiling,
                              uint64_t libWorkspace)
{
    // Only the reduce step syncs (after its partial sums); the elementwise step never does.
    return bnb_host::StoreTiling(context, tiling, tiling.base.usedCores, reduce ? bnb::ScheduleMode(tiling.base) : 0,
                                 libWorkspace, bnb::SyncWorkspaceBytes(reduce, tiling));
}

}  // namespace bnb_sync_host
#endif
