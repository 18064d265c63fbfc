// Entry points of the SyncBatchNorm backward steps (see bn_sync.h):
//
//   BatchNormReduceBackwardInit / BatchNormReduceBackward : ops.Custom(func_type="aot")
//   BatchNormElemtBackwardInit  / BatchNormElemtBackward  : ops.Custom(func_type="aot")
//   MsBnSyncReduceDirect / MsBnSyncElemtDirect            : the same, without MindSpore
//
// Slots, attributes, the `counter` dtypes and the error codes come from the
// prototypes in op_def/ through bn_spec.gen.h. Every shape and dtype is
// checked against the others (aot_args.h) before any memory is touched.
// Attributes: aot_attrs.h.
#include <cstring>

#include "aot_args.h"
#include "aot_attrs.h"
#include "bn_sync.h"
#include "ms_aot_compat.h"

namespace bn_grad {
namespace sync {
namespace {

using namespace aot;  // NOLINT: the shared entry-point helpers
namespace R = spec::batch_norm_reduce_backward;  // tensor slots R::GRAD_OUT ..., attributes
namespace E = spec::batch_norm_elemt_backward;

int RunReduce(const Call &call, const R::Attrs &at) {
  ReduceArgs a;
  DType dt = DType::kNone;
  int64_t numel = 0;
  Error rc = ParseActivations(call, R::NUM_SLOTS, {R::GRAD_OUT, R::INPUT}, at.channel_last, &a, &dt, &numel);
  if (rc != kOk) return rc;
  a.grad_out = ConstTensor{call.params[R::GRAD_OUT], dt};
  a.input = ConstTensor{call.params[R::INPUT], dt};
  const int64_t C = a.channels;
  struct { int slot; bool optional; ConstTensor *dst; } ins[] = {
      {R::MEAN, false, &a.mean}, {R::INVSTD, false, &a.invstd}, {R::WEIGHT, true, &a.weight}};
  for (auto &i : ins) {
    if ((rc = ParseChannelInput(call, i.slot, C, i.optional, /*empty_ok=*/false, i.dst)) != kOk) return rc;
  }
  struct { int slot; MutTensor *dst; } outs[] = {
      {R::SUM_DY, &a.sum_dy}, {R::SUM_DY_XMU, &a.sum_dy_xmu},
      {R::GRAD_WEIGHT, &a.grad_weight}, {R::GRAD_BIAS, &a.grad_bias}};
  for (auto &o : outs) {
    if ((rc = ParseChannelOutput(call, o.slot, C, o.dst)) != kOk) return rc;
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

int RunElemt(const Call &call, const E::Attrs &at) {
  ElemtArgs a;
  DType dt = DType::kNone;
  int64_t numel = 0;
  Error rc = ParseActivations(call, E::NUM_SLOTS, {E::GRAD_OUT, E::INPUT, E::GRAD_INPUT}, at.channel_last, &a,
                              &dt, &numel);
  if (rc != kOk) return rc;
  a.grad_out = ConstTensor{call.params[E::GRAD_OUT], dt};
  a.input = ConstTensor{call.params[E::INPUT], dt};
  a.grad_input = MutTensor{call.params[E::GRAD_INPUT], dt};
  const int64_t C = a.channels;
  struct { int slot; bool optional; ConstTensor *dst; } ins[] = {
      {E::MEAN, false, &a.mean}, {E::INVSTD, false, &a.invstd}, {E::WEIGHT, true, &a.weight},
      {E::SUM_DY, false, &a.sum_dy}, {E::SUM_DY_XMU, false, &a.sum_dy_xmu}};
  for (auto &i : ins) {
    if ((rc = ParseChannelInput(call, i.slot, C, i.optional, /*empty_ok=*/false, i.dst)) != kOk) return rc;
  }
  if (call.NoneDtype(E::COUNTER)) return kMissingTensor;
  const char *cd = call.dtypes[E::COUNTER];
  if (call.ndims[E::COUNTER] != 1) return kBadRank;
  a.num_counts = call.shapes[E::COUNTER][0];
  a.counter = call.params[E::COUNTER];
  if (a.num_counts > 0 && a.counter == nullptr) return kMissingTensor;
  if (!ParseCounterDtype(cd, &a)) return kBadDtype;
  return ElemtBackward(a) == 0 ? kOk : kKernelFailed;
}

}  // namespace
}  // namespace sync
}  // namespace bn_grad

namespace R = bn_grad::spec::batch_norm_reduce_backward;
namespace E = bn_grad::spec::batch_norm_elemt_backward;

extern "C" {

int BatchNormReduceBackwardInit(int *, int64_t **, const char **, mindspore::AotExtra *extra) {
  return bn_grad::aot::InitAttrs<R::Attrs>(extra);
}

int BatchNormReduceBackward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                            void * /*stream*/, void *extra) {
  return bn_grad::sync::RunReduce({nparam, params, ndims, shapes, dtypes}, bn_grad::aot::AttrsOf<R::Attrs>(extra));
}

int BatchNormElemtBackwardInit(int *, int64_t **, const char **, mindspore::AotExtra *extra) {
  return bn_grad::aot::InitAttrs<E::Attrs>(extra);
}

int BatchNormElemtBackward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                           void * /*stream*/, void *extra) {
  return bn_grad::sync::RunElemt({nparam, params, ndims, shapes, dtypes}, bn_grad::aot::AttrsOf<E::Attrs>(extra));
}

int MsBnSyncReduceDirect(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                         int input_g, int weight_g, int bias_g, int channel_last) {
  R::Attrs at;
  at.input_g = input_g != 0;
  at.weight_g = weight_g != 0;
  at.bias_g = bias_g != 0;
  at.channel_last = channel_last != 0;
  return bn_grad::sync::RunReduce({nparam, params, ndims, shapes, dtypes}, at);
}

int MsBnSyncElemtDirect(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                        int channel_last) {
  E::Attrs at;
  at.channel_last = channel_last != 0;
  return bn_grad::sync::RunElemt({nparam, params, ndims, shapes, dtypes}, at);
}

}  // extern "C"
