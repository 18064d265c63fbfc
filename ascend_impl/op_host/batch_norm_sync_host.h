// Host helpers shared by the op definitions of the two SyncBatchNorm backward
// steps: the SoC fields of the tiling input (as BatchNormBackward's tiling
// function fills them) and the dtype / layout mapping.
#ifndef BATCH_NORM_SYNC_HOST_H
#define BATCH_NORM_SYNC_HOST_H
#include <string>
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"
#include "batch_norm_sync_tiling_calc.h"

namespace bnb_sync_host {

inline bool ChannelLast(const char *layout)
{
    const std::string l = layout ? layout : "";
    return l == "NHWC" || l == "NDHWC";
}

inline uint32_t KernelDtype(ge::DataType dt)
{
    return dt == ge::DT_FLOAT16 ? bnb::DT_FLOAT16 : dt == ge::DT_BF16 ? bnb::DT_BFLOAT16 : bnb::DT_FLOAT;
}

// Shape of grad_out, dtype, per-channel inputs (weight optional; mean / invstd as
// save_mean / save_invstd) and the SoC's UB size, core count and features.
inline void FillInput(gert::TilingContext *context, int gradOutIndex, int meanIndex, int invstdIndex,
                      int weightIndex, bool channelLast, bnb::TilingInput &in, uint64_t &libWorkspace)
{
    auto platform = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());
    uint64_t ubBytes = 0;
    platform.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ubBytes);
    const auto soc = platform.GetSocVersion();
    const gert::Shape &shape = context->GetInputShape(gradOutIndex)->GetStorageShape();
    for (size_t i = 0; i < shape.GetDimNum(); ++i) {
        in.shape.push_back(shape.GetDim(i));
    }
    in.channelLast = channelLast;
    const ge::DataType dtype = context->GetInputDesc(gradOutIndex)->GetDataType();
    in.dtype = KernelDtype(dtype);
    auto f32 = [dtype](ge::DataType dt) { return dt == ge::DT_FLOAT && dtype != ge::DT_FLOAT; };
    if (context->GetOptionalInputShape(weightIndex) != nullptr) {
        in.present |= 1u << bnb::WEIGHT;
        if (f32(context->GetOptionalInputDesc(weightIndex)->GetDataType())) {
            in.paramFloat32 |= 1u << bnb::WEIGHT;
        }
    }
    if (f32(context->GetInputDesc(meanIndex)->GetDataType())) {
        in.paramFloat32 |= 1u << bnb::SAVE_MEAN;
    }
    if (f32(context->GetInputDesc(invstdIndex)->GetDataType())) {
        in.paramFloat32 |= 1u << bnb::SAVE_INVSTD;
    }
    in.ubBytes = uint32_t(ubBytes);
    in.coreNum = platform.GetCoreNumAiv();
    // Atlas training / inference: no DataCopyPad, no SyncAll, no DataCacheCleanAndInvalid.
    const bool legacy = soc == platform_ascendc::SocVersion::ASCEND910 || soc == platform_ascendc::SocVersion::ASCEND310P;
    in.hasDataCopyPad = !legacy;
    in.hasSyncAll = !legacy;
    in.hasDcci = !legacy;
    libWorkspace = platform.GetLibApiWorkSpaceSize();
}

inline ge::graphStatus Finish(gert::TilingContext *context, bool reduce, const bnb::BatchNormSyncTilingData &tiling,
                              uint64_t libWorkspace)
{
    *context->GetTilingData<bnb::BatchNormSyncTilingData>() = tiling;
    context->SetBlockDim(tiling.base.usedCores);  // <= the core count: SyncAll() needs every block resident
    size_t *workspace = context->GetWorkspaceSizes(1);
    workspace[0] = libWorkspace + bnb::SyncWorkspaceBytes(reduce, tiling);
    return ge::GRAPH_SUCCESS;
}

}  // namespace bnb_sync_host
#endif
