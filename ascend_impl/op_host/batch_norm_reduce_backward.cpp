// Ascend C op definition of BatchNormReduceBackward (the per-rank step of the
// SyncBatchNorm backward): signature and per-SoC AddConfig blocks generated
// from op_def/batch_norm_reduce_backward.yaml into
// batch_norm_reduce_backward_def.gen.h, InferShape / InferDataType, and the
// tiling function (the BatchNormBackward tiling, batch_norm_sync_tiling_calc.h).
#include "batch_norm_reduce_backward_def.gen.h"
#include "batch_norm_sync_host.h"

namespace optiling {
static ge::graphStatus BatchNormReduceBackwardTiling(gert::TilingContext *context)
{
    using namespace bnb_gen_reduce;
    const auto *attrs = context->GetAttrs();
    bnb::TilingInput in;
    uint64_t lib = 0;
    bnb_sync_host::FillInput(context, INPUT_GRAD_OUT, INPUT_MEAN, INPUT_INVSTD, INPUT_WEIGHT,
                             bnb_sync_host::ChannelLast(attrs->GetStr(ATTR_LAYOUT)), in, lib);
    // Mask bit i is the flag MASK_BIT_i_ATTR (mask_attrs of the prototype).
    in.outputMask = uint32_t(*attrs->GetAttrPointer<bool>(MASK_BIT_0_ATTR)) |
                    uint32_t(*attrs->GetAttrPointer<bool>(MASK_BIT_1_ATTR)) << 1 |
                    uint32_t(*attrs->GetAttrPointer<bool>(MASK_BIT_2_ATTR)) << 2;
    in.gradParamFloat32 = bnb_host::FloatBeside(context->GetOutputDesc(OUTPUT_GRAD_WEIGHT)->GetDataType(),
                                                context->GetInputDesc(INPUT_GRAD_OUT)->GetDataType());
    bnb::BatchNormSyncTilingData tiling;
    const std::string why = bnb::ComputeSyncTiling(true, in, 0, 0, tiling);
    if (!why.empty()) {
        return bnb_host::TilingFailed(context, why);
    }
    return bnb_sync_host::Finish(context, true, tiling, lib);
}
}  // namespace optiling

namespace ge {
static ge::graphStatus BatchNormReduceBackwardInferShape(gert::InferShapeContext *context)
{
    using namespace bnb_gen_reduce;
    bnb_host::SetChannelShapes(context, INPUT_GRAD_OUT, ATTR_LAYOUT,
                               {OUTPUT_SUM_DY, OUTPUT_SUM_DY_XMU, OUTPUT_GRAD_WEIGHT, OUTPUT_GRAD_BIAS});
    return GRAPH_SUCCESS;
}

static ge::graphStatus BatchNormReduceBackwardInferDataType(gert::InferDataTypeContext *context)
{
    bnb_gen_reduce::SetOutputDataTypes(context);  // dtype_from of the prototype
    return GRAPH_SUCCESS;
}
}  // namespace ge

namespace ops {
class BatchNormReduceBackward : public OpDef {
public:
    explicit BatchNormReduceBackward(const char *name) : OpDef(name)
    {
        bnb_gen_reduce::DeclareSignature(*this);
        this->SetInferShape(ge::BatchNormReduceBackwardInferShape)
            .SetInferDataType(ge::BatchNormReduceBackwardInferDataType);
        this->AICore().SetTiling(optiling::BatchNormReduceBackwardTiling);
        bnb_gen_reduce::AddSocConfigs(*this);
    }
};
OP_ADD(BatchNormReduceBackward);
}  // namespace ops
