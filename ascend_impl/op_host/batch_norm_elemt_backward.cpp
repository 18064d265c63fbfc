// Ascend C op definition of BatchNormElemtBackward (the elementwise step of
// the SyncBatchNorm backward): signature and per-SoC AddConfig blocks
// generated from op_def/batch_norm_elemt_backward.yaml into
// batch_norm_elemt_backward_def.gen.h, InferShape / InferDataType, and the
// tiling function (the BatchNormBackward tiling plus the counter's length and
// type, batch_norm_sync_tiling_calc.h).
#include "batch_norm_elemt_backward_def.gen.h"
#include "batch_norm_sync_host.h"

namespace optiling {
static ge::graphStatus BatchNormElemtBackwardTiling(gert::TilingContext *context)
{
    using namespace bnb_gen_elemt;
    bnb::TilingInput in;
    uint64_t lib = 0;
    bnb_sync_host::FillInput(context, INPUT_GRAD_OUT, INPUT_MEAN, INPUT_INVSTD, INPUT_WEIGHT,
                             bnb_sync_host::ChannelLast(context->GetAttrs()->GetStr(ATTR_LAYOUT)), in, lib);
    const ge::DataType counterDtype = context->GetInputDesc(INPUT_COUNTER)->GetDataType();
    const uint32_t counterType = counterDtype == ge::DT_INT32   ? bnb::COUNTER_INT32
                                 : counterDtype == ge::DT_INT64 ? bnb::COUNTER_INT64
                                                                : bnb::COUNTER_FLOAT;
    const int64_t counterLen = context->GetInputShape(INPUT_COUNTER)->GetStorageShape().GetShapeSize();
    bnb::BatchNormSyncTilingData tiling;
    const std::string why = bnb::ComputeSyncTiling(false, in, counterLen, counterType, tiling);
    if (!why.empty()) {
        return bnb_host::TilingFailed(context, why);
    }
    return bnb_sync_host::Finish(context, false, tiling, lib);
}
}  // namespace optiling

namespace ge {
static ge::graphStatus BatchNormElemtBackwardInferShape(gert::InferShapeContext *context)
{
    using namespace bnb_gen_elemt;
    *context->GetOutputShape(OUTPUT_GRAD_INPUT) = *context->GetInputShape(INPUT_GRAD_OUT);
    return GRAPH_SUCCESS;
}

static ge::graphStatus BatchNormElemtBackwardInferDataType(gert::InferDataTypeContext *context)
{
    bnb_gen_elemt::SetOutputDataTypes(context);  // dtype_from of the prototype
    return GRAPH_SUCCESS;
}
}  // namespace ge

namespace ops {
class BatchNormElemtBackward : public OpDef {
public:
    explicit BatchNormElemtBackward(const char *name) : OpDef(name)
    {
        bnb_gen_elemt::DeclareSignature(*this);
        this->SetInferShape(ge::BatchNormElemtBackwardInferShape)
            .SetInferDataType(ge::BatchNormElemtBackwardInferDataType);
        this->AICore().SetTiling(optiling::BatchNormElemtBackwardTiling);
        bnb_gen_elemt::AddSocConfigs(*this);
    }
};
OP_ADD(BatchNormElemtBackward);
}  // namespace ops
