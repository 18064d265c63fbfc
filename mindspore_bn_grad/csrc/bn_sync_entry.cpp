// Entry points of the SyncBatchNorm backward steps (see bn_sync.h):
//
//   BatchNormReduceBackwardInit / BatchNormReduceBackward : ops.Custom(func_type="aot")
//   BatchNormElemtBackwardInit  / BatchNormElemtBackward  : ops.Custom(func_type="aot")
//   MsBnSyncReduceDirect / MsBnSyncElemtDirect            : the same, without MindSpore
//
// Slots follow the prototypes in op_def/ (inputs, then outputs). Every shape
// and dtype is checked against the others before any memory is touched; the
// error codes are the ones of aot_entry.cpp (listed in _native.py).
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

enum ReduceSlot { R_GRAD_OUT, R_INPUT, R_MEAN, R_INVSTD, R_WEIGHT,
                  R_SUM_DY, R_SUM_DY_XMU, R_GRAD_WEIGHT, R_GRAD_BIAS, R_NUM_SLOTS };
enum ElemtSlot { E_GRAD_OUT, E_INPUT, E_MEAN, E_INVSTD, E_WEIGHT, E_SUM_DY, E_SUM_DY_XMU,
                 E_COUNTER, E_GRAD_INPUT, E_NUM_SLOTS };

struct ReduceAttrs { bool input_g = true, weight_g = true, bias_g = true, channel_last = false; };
struct ElemtAttrs { bool channel_last = false; };

struct ReduceData : public mindspore::AotKernelData { ReduceAttrs attrs; };
struct ElemtData : public mindspore::AotKernelData { ElemtAttrs attrs; };

struct Geometry { int64_t outer = 0, channels = 0, inner = 0, numel = 0; DType dtype = DType::kNone; };

// The activation tensors at `slots` (same shape and dtype) viewed as [outer, C, inner].
int ParseActivations(void **params, int *ndims, int64_t **shapes, const char **dtypes,
                     std::initializer_list<int> slots, bool channel_last, Geometry *g) {
  const int first = *slots.begin();
  const int rank = ndims[first];
  if (rank < 2 || rank > 8) return kBadRank;
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
      nparam != R_NUM_SLOTS) {
    return kBadParamCount;
  }
  Geometry g;
  int rc = ParseActivations(params, ndims, shapes, dtypes, {R_GRAD_OUT, R_INPUT}, at.channel_last, &g);
  if (rc != kOk) return rc;
  ReduceArgs a;
  a.outer = g.outer; a.channels = g.channels; a.inner = g.inner;
  a.grad_out = ConstTensor{params[R_GRAD_OUT], g.dtype};
  a.input = ConstTensor{params[R_INPUT], g.dtype};
  const int64_t C = g.channels;
  struct { int slot; bool optional; ConstTensor *dst; } ins[] = {
      {R_MEAN, false, &a.mean}, {R_INVSTD, false, &a.invstd}, {R_WEIGHT, true, &a.weight}};
  for (auto &i : ins) {
    if ((rc = ParseChannel(params, ndims, shapes, dtypes, i.slot, C, i.optional, i.dst)) != kOk) return rc;
  }
  struct { int slot; MutTensor *dst; } outs[] = {
      {R_SUM_DY, &a.sum_dy}, {R_SUM_DY_XMU, &a.sum_dy_xmu},
      {R_GRAD_WEIGHT, &a.grad_weight}, {R_GRAD_BIAS, &a.grad_bias}};
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

int RunElemt(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
             const ElemtAttrs &at) {
  if (params == nullptr || ndims == nullptr || shapes == nullptr || dtypes == nullptr ||
      nparam != E_NUM_SLOTS) {
    return kBadParamCount;
  }
  Geometry g;
  int rc = ParseActivations(params, ndims, shapes, dtypes, {E_GRAD_OUT, E_INPUT, E_GRAD_INPUT},
                            at.channel_last, &g);
  if (rc != kOk) return rc;
  ElemtArgs a;
  a.outer = g.outer; a.channels = g.channels; a.inner = g.inner;
  a.grad_out = ConstTensor{params[E_GRAD_OUT], g.dtype};
  a.input = ConstTensor{params[E_INPUT], g.dtype};
  a.grad_input = MutTensor{params[E_GRAD_INPUT], g.dtype};
  const int64_t C = g.channels;
  struct { int slot; bool optional; ConstTensor *dst; } ins[] = {
      {E_MEAN, false, &a.mean}, {E_INVSTD, false, &a.invstd}, {E_WEIGHT, true, &a.weight},
      {E_SUM_DY, false, &a.sum_dy}, {E_SUM_DY_XMU, false, &a.sum_dy_xmu}};
  for (auto &i : ins) {
    if ((rc = ParseChannel(params, ndims, shapes, dtypes, i.slot, C, i.optional, i.dst)) != kOk) return rc;
  }
  const char *cd = dtypes[E_COUNTER];
  if (IsNoneDtype(cd)) return kMissingTensor;
  if (ndims[E_COUNTER] != 1) return kBadRank;
  a.num_counts = shapes[E_COUNTER][0];
  a.counter = params[E_COUNTER];
  if (a.num_counts > 0 && a.counter == nullptr) return kMissingTensor;
  if (std::strcmp(cd, "int32") == 0) {
    a.counter_dtype = CountDType::kInt32;
  } else if (std::strcmp(cd, "int64") == 0) {
    a.counter_dtype = CountDType::kInt64;
  } else {
    a.counter_dtype = CountDType::kFloat;
    a.counter_float = ParseDtype(cd);
    if (a.counter_float == DType::kNone) return kBadDtype;
  }
  return ElemtBackward(a) == 0 ? kOk : kKernelFailed;
}

// data_format arrives as `layout` (kernel_name in the prototypes).
bool ChannelLast(mindspore::AotExtra *extra) {
  return extra->HasAttr("layout") && aot::ChannelLast(extra->Attr<std::string>("layout"));
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
  if (extra->HasAttr("input_g")) at.input_g = extra->Attr<bool>("input_g");
  if (extra->HasAttr("weight_g")) at.weight_g = extra->Attr<bool>("weight_g");
  if (extra->HasAttr("bias_g")) at.bias_g = extra->Attr<bool>("bias_g");
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
