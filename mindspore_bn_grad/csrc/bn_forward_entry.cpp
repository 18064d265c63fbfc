// Entry points of BatchNormForward (bn_forward.h):
//
//   BatchNormForwardInit / BatchNormForward : MindSpore ops.Custom(func_type="aot")
//   MsBnForwardDirect                       : the same, without MindSpore (ctypes:
//                                             cpu_kernel/native.py forward_direct)
//
// Slots, attributes and error codes come from op_def/batch_norm_forward.yaml
// through bn_spec.gen.h. Every shape and dtype is checked against the others
// (aot_args.h) before any memory is touched. running_mean_out /
// running_var_out may be the very buffers of running_mean / running_var (in
// place), and a direct caller may leave them out.
#include "aot_args.h"
#include "aot_attrs.h"
#include "bn_forward.h"
#include "ms_aot_compat.h"

namespace bn_grad {
namespace {

using namespace aot;  // NOLINT: the shared entry-point helpers
namespace F = spec::batch_norm_forward;

int Run(const Call &call, const F::Attrs &at) {
  BnForwardArgs a;
  DType dt = DType::kNone;
  int64_t numel = 0;
  Error rc = ParseActivations(call, F::NUM_SLOTS, {F::INPUT, F::OUTPUT}, at.channel_last, &a, &dt, &numel);
  if (rc != kOk) return rc;
  a.input = ConstTensor{call.params[F::INPUT], dt};
  a.output = MutTensor{call.params[F::OUTPUT], dt};
  const int64_t C = a.channels;
  struct { int slot; ConstTensor *dst; } ins[] = {
      {F::WEIGHT, &a.weight}, {F::BIAS, &a.bias}, {F::RUNNING_MEAN, &a.running_mean},
      {F::RUNNING_VAR, &a.running_var}};
  for (auto &i : ins) {
    if ((rc = ParseChannelInput(call, i.slot, C, /*optional=*/true, /*empty_ok=*/false, i.dst)) != kOk) return rc;
  }
  if ((rc = ParseChannelOutput(call, F::SAVE_MEAN, C, &a.save_mean)) != kOk) return rc;
  if ((rc = ParseChannelOutput(call, F::SAVE_INVSTD, C, &a.save_invstd)) != kOk) return rc;
  struct { int slot; MutTensor *dst; } outs[] = {
      {F::RUNNING_MEAN_OUT, &a.running_mean_out}, {F::RUNNING_VAR_OUT, &a.running_var_out}};
  for (auto &o : outs) {
    if (call.Absent(o.slot)) continue;
    if ((rc = ParseChannelOutput(call, o.slot, C, o.dst)) != kOk) return rc;
  }
  a.training = at.training;
  a.momentum = at.momentum;
  a.eps = at.eps;
  return BnForward(a) == 0 ? kOk : kKernelFailed;
}

}  // namespace
}  // namespace bn_grad

namespace F = bn_grad::spec::batch_norm_forward;

extern "C" {

int BatchNormForwardInit(int *, int64_t **, const char **, mindspore::AotExtra *extra) {
  return bn_grad::aot::InitAttrs<F::Attrs>(extra);
}

int BatchNormForward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                     void * /*stream*/, void *extra) {
  return bn_grad::Run({nparam, params, ndims, shapes, dtypes}, bn_grad::aot::AttrsOf<F::Attrs>(extra));
}

int MsBnForwardDirect(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes, int training,
                      double momentum, double eps, int channel_last) {
  F::Attrs at;
  at.training = training != 0;
  at.momentum = momentum;
  at.eps = eps;
  at.channel_last = channel_last != 0;
  return bn_grad::Run({nparam, params, ndims, shapes, dtypes}, at);
}

}  // extern "C"
