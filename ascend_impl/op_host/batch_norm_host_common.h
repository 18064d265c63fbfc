// Host-side helpers shared by the op definitions of BatchNormBackward and of
// the SyncBatchNorm steps: layout attribute, kernel dtype code, grad_out's
// shape, the per-channel inputs' bits, what the platform offers (UB size,
// cores, SoC features), storing a tiling, and the per-channel output shapes.
#ifndef BATCH_NORM_HOST_COMMON_H
#define BATCH_NORM_HOST_COMMON_H

#include <cstdio>
#include <initializer_list>
#include <string>
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"
#include "batch_norm_backward_tiling_calc.h"

// Error log of a failing tiling function: OP_LOGE of CANN's opbase (log/log.h),
// as the ops-nn operators log. A toolkit without opbase gets the same call
// form written to stderr.
#if defined(__has_include)
#if __has_include("log/log.h")
#include "log/log.h"
#endif
#endif
#ifndef OP_LOGE
#define OP_LOGE(opName, fmt, ...) std::fprintf(stderr, "[ERROR] OpName:[%s] " fmt "\n", (opName), ##__VA_ARGS__)
#endif

namespace bnb_host {

// Logs why the tiling of `context`'s node failed and returns the failure.
inline ge::graphStatus TilingFailed(gert::TilingContext *context, const std::string &why)
{
    const char *name = context->GetNodeName();
    OP_LOGE(name != nullptr ? name : "BatchNormBackward", "tiling failed: %s", why.c_str());
    return ge::GRAPH_FAILED;
}

// The `layout` attribute (data_format of op_def/batch_norm_backward.yaml).
inline bool ChannelLast(const char *layout)
{
    const std::string l = layout ? layout : "";
    for (const char *name : bnb::CHANNEL_LAST_LAYOUTS) {
        if (l == name) {
            return true;
        }
    }
    return false;
}

inline uint32_t KernelDtype(ge::DataType dt)
{
    return dt == ge::DT_FLOAT16 ? bnb::ELEM_FLOAT16 : dt == ge::DT_BF16 ? bnb::ELEM_BFLOAT16 : bnb::ELEM_FLOAT32;
}

// A per-channel tensor stored as float32 beside a float16 / bfloat16 grad_out:
// the kernel reads / writes it as float (paramFloat32 / gradParamFloat32 bits).
inline bool FloatBeside(ge::DataType dt, ge::DataType gradOut)
{
    return dt == ge::DT_FLOAT && gradOut != ge::DT_FLOAT;
}

// Per-channel input `p` (enum Param) at input `index`: its present bit (an
// optional one only when given) and its float32 bit.
inline void AddParam(gert::TilingContext *context, int index, uint32_t p, bool optional, ge::DataType gradOut,
                     bnb::TilingInput &in)
{
    if (optional && context->GetOptionalInputShape(index) == nullptr) {
        return;
    }
    in.present |= 1u << p;
    const auto *desc = optional ? context->GetOptionalInputDesc(index) : context->GetInputDesc(index);
    if (FloatBeside(desc->GetDataType(), gradOut)) {
        in.paramFloat32 |= 1u << p;
    }
}

inline void FillShape(gert::TilingContext *context, int index, bnb::TilingInput &in)
{
    const gert::Shape &shape = context->GetInputShape(index)->GetStorageShape();
    for (size_t i = 0; i < shape.GetDimNum(); ++i) {
        in.shape.push_back(shape.GetDim(i));
    }
}

// UB size, AIV core count and SoC features; returns the library's workspace size.
inline uint64_t FillPlatform(gert::TilingContext *context, bnb::TilingInput &in)
{
    auto platform = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());
    uint64_t ubBytes = 0;
    platform.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ubBytes);
    const auto soc = platform.GetSocVersion();
    // The 950's UB is 256 KB, of which a kernel built without --cce-disable-vf-stack-reserved-ubuf and
    // --cce-disable-asc-reserved-ubuf (their APIs are the ones this kernel calls) may use 248 KB: the rest
    // is the SIMD VF stack and the temporary data of the repeat (高维切分) forms (NPU架构版本3510.md,
    // ASC_UB_SIZE; TOTAL_UB_SIZE of the headers). GetCoreMemSize may report the whole UB.
    constexpr uint64_t UB_KERNEL_BYTES_950 = 248 * 1024;
    if (soc == platform_ascendc::SocVersion::ASCEND950 && ubBytes > UB_KERNEL_BYTES_950) {
        ubBytes = UB_KERNEL_BYTES_950;
    }
    in.ubBytes = uint32_t(ubBytes);
    uint64_t l2Bytes = 0;
    platform.GetCoreMemSize(platform_ascendc::CoreMemType::L2, l2Bytes);
    in.l2Bytes = l2Bytes;
    in.coreNum = platform.GetCoreNumAiv();
    // Atlas training / inference: no DataCopyPad, no hardware SyncAll, no DataCacheCleanAndInvalid,
    // no bfloat16 kernels (op_kernel/batch_norm_backward_kernel.h, BNB_SOC_LEGACY).
    const bool legacy = soc == platform_ascendc::SocVersion::ASCEND910 || soc == platform_ascendc::SocVersion::ASCEND310P;
    in.hasDataCopyPad = !legacy;
    in.hasSyncAll = !legacy;
    in.hasSoftSyncAll = true;  // SyncAll(gmWorkspace, ubWorkspace, usedCores) on every line (SyncAll.md)
    in.hasDcci = !legacy;
    in.hasBf16 = !legacy;
    in.hasMulAdd = soc != platform_ascendc::SocVersion::ASCEND910;  // dav-c100 has no MulAddDst / FusedMulAdd
    in.hasReduceRepeat = soc != platform_ascendc::SocVersion::ASCEND910;  // Atlas training: half only
    in.hasBlockCopy = !legacy;  // Brcb / masked Copy: not on Atlas training / inference
    // QUE_MAX_EVENT (asc-devkit kernel_macros.h): 4 event ids per HardEvent on dav-c100, 8 on the others
    constexpr uint32_t EVENT_IDS_DAV_C100 = 4, EVENT_IDS = 8;
    in.eventIds = soc == platform_ascendc::SocVersion::ASCEND910 ? EVENT_IDS_DAV_C100 : EVENT_IDS;
    return platform.GetLibApiWorkSpaceSize();
}

// The tiling data, the block dim (<= the core count: SyncAll() needs every
// block resident, which schedule mode 1 asks for when the kernel syncs) and
// the workspace: the Ascend C library's system area, then `kernelBytes` for
// the kernel.
template <typename Tiling>
inline ge::graphStatus StoreTiling(gert::TilingContext *context, const Tiling &tiling, uint32_t usedCores,
                                   uint32_t scheduleMode, uint64_t libWorkspace, uint64_t kernelBytes)
{
    *context->GetTilingData<Tiling>() = tiling;
    context->SetBlockDim(usedCores);
    context->SetScheduleMode(scheduleMode);  // bnb::ScheduleMode: batch mode whenever the kernel runs SyncAll
    size_t *workspace = context->GetWorkspaceSizes(1);
    workspace[0] = libWorkspace + kernelBytes;
    return ge::GRAPH_SUCCESS;
}

// InferShape: outputs `outs` are 1-D, one entry per channel of grad_out (input gradOutIndex).
inline void SetChannelShapes(gert::InferShapeContext *context, int gradOutIndex, int layoutAttr,
                             std::initializer_list<int> outs)
{
    const gert::Shape *gradOut = context->GetInputShape(gradOutIndex);
    const bool last = ChannelLast(context->GetAttrs()->GetStr(layoutAttr));
    const int64_t channels = gradOut->GetDim(last ? gradOut->GetDimNum() - 1 : 1);
    for (int out : outs) {
        gert::Shape *s = context->GetOutputShape(out);
        s->SetDimNum(1);
        s->SetDim(0, channels);
    }
}

}  // namespace bnb_host

#endif  // BATCH_NORM_HOST_COMMON_H
