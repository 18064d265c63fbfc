// Entry points of the SyncBatchNorm backward steps (see bn_sync.h):
//
//   BatchNormReduceBackwardInit / BatchNormReduceBackward : ops.Custom(func_type="aot")
//   BatchNormElemtBackwardInit  / BatchNormElemtBackward  : ops.Custom(func_type="aot")
//   MsBnSyncReduceDirect / MsBnSyncElemtDirect            : the same, without MindSpore
//
// Slots, attribute names and defaults, the `counter` dtypes and the error
// codes come from the prototypes in op_def/ through bn_spec.gen.h. Every shape
// and dtype is checked against the others before any memory is touched.
#include <cstring>
#include <string>
#include <vector>

#include "aot_common.h"
#include "ms_aot_compat.h"
#include "bn_sync.h"

namespace bn_grad {
namespace sync {
namespace {

using namespace aot;  // NOLINT: the shared entry-point helpers
namespace R = spec::batch_norm_reduce_backward;  // tensor slots R::GRAD_OUT ..., attributes
namespace E = spec::batch_norm_elemt_backward;

struct ReduceAttrs {
  bool input_g = R::kDefaultInputG, weight_g = R::kDefaultWeightG, bias_g = R::kDefaultBiasG;
  bool channel_last = ChannelLast(R::kDefaultLayout);
};
struct ElemtAttrs { bool channel_last = ChannelLast(E::kDefaultLayout); };

struct ReduceData : public mindspore::AotKernelData { ReduceAttrs attrs; };
struct ElemtData : public mindspore::AotKernelData { ElemtAttrs attrs; };

struct Geometry { int64_t outer = 0, channels = 0, inner = 0, numel = 0; DType dtype = DType::kNone; };

// The activation tensors at `slots` (same shape and dtype) viewed as [outer, C, inner].
int ParseActivations(void **params, int *ndims, int64_t **shapes, const char **dtypes,
                     std::initializer_list<int> slots, bool channel_last, Geometry *g) {
  const int first = *slots.begin();
  const int rank = ndims[first];
  if (!RankSupported(rank)) return kBadRank;
  const int64_t *shape = shapes[first];
  g->dtype = ParseDtype(dtypes[first]);
  if (g->dtype == DType::kNone) return kBadDtype;
  for (int s : slots) {
    if (!SameShape(rank, shape, ndims[s], shapes[s])) return kBadShape;
    if (ParseDtype(dtypes[s]) != g->dtype) return kBadDtype;
  }
  bool ok = true;
  g->numel = NumElements(rank, shape, &ok);
  if (!ok) return kOverflow;
  g->channels = channel_last ? shape[rank - 1] : shape[1];
  g->outer = 1;
  for (int i = 0; i < (channel_last ? rank - 1 : 1); ++i) g->outer *= shape[i];
  g->inner = 1;
  if (!channel_last) for (int i = 2; i < rank; ++i) g->inner *= shape[i];
  if (g->numel > 0) {
    for (int s : slots) if (params[s] == nullptr) return kMissingTensor;
  }
  return kOk;
}

// A (C,) tensor; absent only when `optional`.
int ParseChannel(void **params, int *ndims, int64_t **shapes, const char **dtypes, int slot,
                 int64_t C, bool optional, ConstTensor *out) {
  *out = ConstTensor{};
  if (IsNoneDtype(dtypes[slot]) || (params[slot] == nullptr && ndims[slot] == 0)) {
    return optional ? kOk : kMissingTensor;
  }
  DType d = ParseDtype(dtypes[slot]);
  if (d == DType::kNone) return kBadDtype;
  if (ndims[slot] != 1) return kBadRank;
  if (shapes[slot][0] != C) return kBadShape;
  if (params[slot] == nullptr && C > 0) return kMissingTensor;
  *out = ConstTensor{params[slot], d};
  return kOk;
}

int ParseChannelOut(void **params, int *ndims, int64_t **shapes, const char **dtypes, int slot,
                    int64_t C, MutTensor *out) {
  DType d = ParseDtype(dtypes[slot]);
  if (d == DType::kNone) return kBadDtype;
  if (ndims[slot] != 1 || shapes[slot][0] != C) return kBadShape;
  if (params[slot] == nullptr && C > 0) return kMissingTensor;
  *out = MutTensor{params[slot], d};
  return kOk;
}

void ZeroFill(const MutTensor &t, int64_t n) {
  if (n > 0 && t.data != nullptr) std::memset(t.data, 0, n * ElemSize(t.dtype));
}

int RunReduce(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
              const ReduceAttrs &at) {
  if (params == nullptr || ndims == nullptr || shapes == nullptr || dtypes == nullptr ||
      nparam != R::NUM_SLOTS) {
    return kBadParamCount;
  }
  Geometry g;
  int rc = ParseActivations(params, ndims, shapes, dtypes, {R::GRAD_OUT, R::INPUT}, at.channel_last, &g);
  if (rc != kOk) return rc;
  ReduceArgs a;
  a.outer = g.outer; a.channels = g.channels; a.inner = g.inner;
  a.grad_out = ConstTensor{params[R::GRAD_OUT], g.dtype};
  a.input = ConstTensor{params[R::INPUT], g.dtype};
  const int64_t C = g.channels;
  struct { int slot; bool optional; ConstTensor *dst; } ins[] = {
      {R::MEAN, false, &a.mean}, {R::INVSTD, false, &a.invstd}, {R::WEIGHT, true, &a.weight}};
  for (auto &i : ins) {
    if ((rc = ParseChannel(params, ndims, shapes, dtypes, i.slot, C, i.optional, i.dst)) != kOk) return rc;
  }
  struct { int slot; MutTensor *dst; } outs[] = {
      {R::SUM_DY, &a.sum_dy}, {R::SUM_DY_XMU, &a.sum_dy_xmu},
      {R::GRAD_WEIGHT, &a.grad_weight}, {R::GRAD_BIAS, &a.grad_bias}};
  for (auto &o : outs) {
    if ((rc = ParseChannelOut(params, ndims, shapes, dtypes, o.slot, C, o.dst)) != kOk) return rc;
  }
  a.input_g = at.input_g; a.weight_g = at.weight_g; a.bias_g = at.bias_g;
  // Outputs a flag turns off come back zero-filled with their normal shape.
  if (!a.input_g) { ZeroFill(a.sum_dy, C); ZeroFill(a.sum_dy_xmu, C); }
  if (!a.weight_g) ZeroFill(a.grad_weight, C);
  if (!a.bias_g) ZeroFill(a.grad_bias, C);
  return ReduceBackward(a) == 0 ? kOk : kKernelFailed;
}

// The counter's dtype: one of the prototype's CPU `counter` dtypes.
bool ParseCounterDtype(const char *name, ElemtArgs *a) {
  for (const spec::CounterDtype &d : E::kCounterDtypes) {
    if (std::strcmp(name, d.name) == 0) {
      a->counter_dtype = d.count;
      a->counter_float = d.floating;
      return true;
    }
  }
  return false;
}

int RunElemt(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
             const ElemtAttrs &at) {
  if (params == nullptr || ndims == nullptr || shapes == nullptr || dtypes == nullptr ||
      nparam != E::NUM_SLOTS) {
    return kBadParamCount;
  }
  Geometry g;
  int rc = ParseActivations(params, ndims, shapes, dtypes, {E::GRAD_OUT, E::INPUT, E::GRAD_INPUT},
                            at.channel_last, &g);
  if (rc != kOk) return rc;
  ElemtArgs a;
  a.outer = g.outer; a.channels = g.channels; a.inner = g.inner;
  a.grad_out = ConstTensor{params[E::GRAD_OUT], g.dtype};
  a.input = ConstTensor{params[E::INPUT], g.dtype};
  a.grad_input = MutTensor{params[E::GRAD_INPUT], g.dtype};
  const int64_t C = g.channels;
  struct { int slot; bool optional; ConstTensor *dst; } ins[] = {
      {E::MEAN, false, &a.mean}, {E::INVSTD, false, &a.invstd}, {E::WEIGHT, true, &a.weight},
      {E::SUM_DY, false, &a.sum_dy}, {E::SUM_DY_XMU, false, &a.sum_dy_xmu}};
  for (auto &i : ins) {
    if ((rc = ParseChannel(params, ndims, shapes, dtypes, i.slot, C, i.optional, i.dst)) != kOk) return rc;
  }
  const char *cd = dtypes[E::COUNTER];
  if (IsNoneDtype(cd)) return kMissingTensor;
  if (ndims[E::COUNTER] != 1) return kBadRank;
  a.num_counts = shapes[E::COUNTER][0];
  a.counter = params[E::COUNTER];
  if (a.num_counts > 0 && a.counter == nullptr) return kMissingTensor;
  if (!ParseCounterDtype(cd, &a)) return kBadDtype;
  return ElemtBackward(a) == 0 ? kOk : kKernelFailed;
}

// data_format arrives as `layout` (kernel_name in the prototypes; the same for both steps).
bool ChannelLast(mindspore::AotExtra *extra) {
  return extra->HasAttr(E::kAttrLayout) ? aot::ChannelLast(extra->Attr<std::string>(E::kAttrLayout))
                                        : aot::ChannelLast(E::kDefaultLayout);
}

template <typename D>
const D *KernelData(void *extra) {
  if (extra == nullptr) return nullptr;
  return static_cast<const D *>(static_cast<mindspore::AotExtra *>(extra)->KernelData());
}

}  // namespace
}  // namespace sync
}  // namespace bn_grad

using bn_grad::sync::ElemtAttrs;
using bn_grad::sync::ElemtData;
using bn_grad::sync::ReduceAttrs;
using bn_grad::sync::ReduceData;

extern "C" {

int BatchNormReduceBackwardInit(int *, int64_t **, const char **, mindspore::AotExtra *extra) {
  auto *data = new ReduceData();
  ReduceAttrs &at = data->attrs;
  namespace R = bn_grad::spec::batch_norm_reduce_backward;
  if (extra->HasAttr(R::kAttrInputG)) at.input_g = extra->Attr<bool>(R::kAttrInputG);
  if (extra->HasAttr(R::kAttrWeightG)) at.weight_g = extra->Attr<bool>(R::kAttrWeightG);
  if (extra->HasAttr(R::kAttrBiasG)) at.bias_g = extra->Attr<bool>(R::kAttrBiasG);
  at.channel_last = bn_grad::sync::ChannelLast(extra);
  extra->SetKernelData(data);
  return 0;
}

int BatchNormReduceBackward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                            void * /*stream*/, void *extra) {
  const ReduceData *kd = bn_grad::sync::KernelData<ReduceData>(extra);
  const ReduceAttrs at = kd != nullptr ? kd->attrs : ReduceAttrs{};
  return bn_grad::sync::RunReduce(nparam, params, ndims, shapes, dtypes, at);
}

int BatchNormElemtBackwardInit(int *, int64_t **, const char **, mindspore::AotExtra *extra) {
  auto *data = new ElemtData();
  data->attrs.channel_last = bn_grad::sync::ChannelLast(extra);
  extra->SetKernelData(data);
  return 0;
}

int BatchNormElemtBackward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                           void * /*stream*/, void *extra) {
  const ElemtData *kd = bn_grad::sync::KernelData<ElemtData>(extra);
  const ElemtAttrs at = kd != nullptr ? kd->attrs : ElemtAttrs{};
  return bn_grad::sync::RunElemt(nparam, params, ndims, shapes, dtypes, at);
}

int MsBnSyncReduceDirect(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                         int input_g, int weight_g, int bias_g, int channel_last) {
  ReduceAttrs at;
  at.input_g = input_g != 0;
  at.weight_g = weight_g != 0;
  at.bias_g = bias_g != 0;
  at.channel_last = channel_last != 0;
  return bn_grad::sync::RunReduce(nparam, params, ndims, shapes, dtypes, at);
}

int MsBnSyncElemtDirect(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                        int channel_last) {
  ElemtAttrs at;
  at.channel_last = channel_last != 0;
  return bn_grad::sync::RunElemt(nparam, params, ndims, shapes, dtypes, at);
}

}  // extern "C"
