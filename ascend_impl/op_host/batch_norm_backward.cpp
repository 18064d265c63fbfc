// Ascend C op definition of BatchNormBackward: signature, per-SoC AddConfig
// blocks and output dtypes (generated from op_def/ into
// batch_norm_backward_def.gen.h), InferShape, and the tiling function, which reads the
// SoC's UB size and core count from the platform and fills the tiling data
// declared in op_kernel/batch_norm_backward_tiling.h.
#include <string>
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"
#include "batch_norm_backward_def.gen.h"
#include "batch_norm_host_common.h"

namespace {
using namespace bnb_gen;
using bnb_host::ChannelLast;
using bnb_host::KernelDtype;
}  // namespace

namespace optiling {
static ge::graphStatus BatchNormBackwardTiling(gert::TilingContext *context)
{
    bnb::TilingInput in;
    const uint64_t libWorkspace = bnb_host::FillPlatform(context, in);
    bnb_host::FillShape(context, INPUT_GRAD_OUT, in);
    const auto *attrs = context->GetAttrs();
    in.training = *attrs->GetAttrPointer<bool>(ATTR_TRAINING);
    in.eps = *attrs->GetAttrPointer<float>(ATTR_EPS);
    // output_mask is ListInt in the op definition (matches the listInt CustomRegOp rows).
    const auto *mask = attrs->GetListInt(ATTR_OUTPUT_MASK);
    in.outputMask = 0;
    for (size_t i = 0; mask != nullptr && i < mask->GetSize() && i < bnb::OUTPUT_MASK_LENGTH; ++i) {
        in.outputMask |= uint32_t(mask->GetData()[i] != 0) << i;
    }
    in.channelLast = ChannelLast(attrs->GetStr(ATTR_LAYOUT));
    const ge::DataType dtype = context->GetInputDesc(INPUT_GRAD_OUT)->GetDataType();
    in.dtype = KernelDtype(dtype);
    for (uint32_t p = 0; p < bnb::PARAM_COUNT; ++p) {
        bnb_host::AddParam(context, INPUT_WEIGHT + int(p), p, true, dtype, in);
    }
    in.gradParamFloat32 = bnb_host::FloatBeside(context->GetOutputDesc(OUTPUT_GRAD_WEIGHT)->GetDataType(), dtype);

    bnb::BatchNormBackwardTilingData tiling;
    const std::string why = bnb::ComputeTiling(in, tiling);
    if (!why.empty()) {
        return bnb_host::TilingFailed(context, why);
    }
    // Workspace: the partial sums (no SyncAll flags: the hardware SyncAll() needs
    // none, and SoCs without it never sync across cores).
    return bnb_host::StoreTiling(context, tiling, tiling.usedCores, bnb::UsesSyncAll(tiling), libWorkspace,
                                 bnb::WorkspaceBytes(tiling));
}
}  // namespace optiling

namespace ge {
static ge::graphStatus BatchNormBackwardInferShape(gert::InferShapeContext *context)
{
    *context->GetOutputShape(OUTPUT_GRAD_INPUT) = *context->GetInputShape(INPUT_GRAD_OUT);
    bnb_host::SetChannelShapes(context, INPUT_GRAD_OUT, ATTR_LAYOUT, {OUTPUT_GRAD_WEIGHT, OUTPUT_GRAD_BIAS});
    return GRAPH_SUCCESS;
}

static ge::graphStatus BatchNormBackwardInferDataType(gert::InferDataTypeContext *context)
{
    bnb_gen::SetOutputDataTypes(context);  // dtype_from of the prototype
    return GRAPH_SUCCESS;
}
}  // namespace ge

namespace ops {
class BatchNormBackward : public OpDef {
public:
    explicit BatchNormBackward(const char *name) : OpDef(name)
    {
        bnb_gen::DeclareSignature(*this);
        this->SetInferShape(ge::BatchNormBackwardInferShape).SetInferDataType(ge::BatchNormBackwardInferDataType);
        this->AICore().SetTiling(optiling::BatchNormBackwardTiling);
        bnb_gen::AddSocConfigs(*this);
    }
};
OP_ADD(BatchNormBackward);
}  // namespace ops
