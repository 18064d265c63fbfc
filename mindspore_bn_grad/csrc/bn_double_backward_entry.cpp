// Entry points of BatchNormDoubleBackward (see bn_double_backward.h):
//
//   BatchNormDoubleBackwardInit / BatchNormDoubleBackward : ops.Custom(func_type="aot")
//   MsBnDoubleBackwardDirect                              : the same, without MindSpore
//
// Slots follow op_def/batch_norm_double_backward.yaml (inputs, then outputs).
// Every shape and dtype is checked against the others (aot_args.h) before any
// memory is touched; the error codes are the ones of aot_entry.cpp (listed in
// cpu_kernel/native.py). The kernel also accepts absent grad_grad_* tensors (zero), for
// direct calls. Attributes: aot_attrs.h.
#include <algorithm>
#include <iterator>
#include <vector>

#include "aot_args.h"
#include "aot_attrs.h"
#include "bn_double_backward.h"
#include "entry_runs.h"
#include "ms_aot_compat.h"

namespace bn_grad {
namespace dbl {
namespace {

using namespace aot;  // NOLINT: the shared entry-point helpers

// Tensor slots (GRAD_OUT ... GRAD_WEIGHT), attribute names and Attrs: the prototype.
using namespace spec::batch_norm_double_backward;  // NOLINT

static_assert(sizeof(DoubleBackwardArgs::mask) == sizeof(Attrs::output_mask), "one mask entry per mask bit");

int Run(const Call &call, const Attrs &at) {
  if (call.Check(NUM_SLOTS) != kOk) return kBadParamCount;
  DoubleBackwardArgs a;
  DType dt = DType::kNone;
  int64_t numel = 0;
  const bool has_ggi = !call.Absent(GRAD_GRAD_INPUT);  // checked, like the other activations, when given
  Error rc = has_ggi ? ParseActivations(call, NUM_SLOTS, {GRAD_OUT, INPUT, GRAD_GRAD_OUT, GRAD_INPUT, GRAD_GRAD_INPUT},
                                        at.channel_last, &a, &dt, &numel)
                     : ParseActivations(call, NUM_SLOTS, {GRAD_OUT, INPUT, GRAD_GRAD_OUT, GRAD_INPUT},
                                        at.channel_last, &a, &dt, &numel);
  if (rc != kOk) return rc;
  const int64_t C = a.channels;
  a.grad_out = ConstTensor{call.params[GRAD_OUT], dt};
  a.input = ConstTensor{call.params[INPUT], dt};
  if (has_ggi) a.grad_grad_input = ConstTensor{call.params[GRAD_GRAD_INPUT], dt};
  a.grad_grad_out = MutTensor{call.params[GRAD_GRAD_OUT], dt};
  a.grad_input = MutTensor{call.params[GRAD_INPUT], dt};
  // The prototype's rules (kInputRules): where (0,) stands for an absent one, which the mode
  // requires. None is accepted for each (the direct calls pass it for a zero upstream gradient;
  // through MindSpore the Python infer holds the prototype's `optional`).
  struct { int slot; ConstTensor *dst; } chan[] = {
      {WEIGHT, &a.weight}, {RUNNING_MEAN, &a.running_mean}, {RUNNING_VAR, &a.running_var},
      {SAVE_MEAN, &a.save_mean}, {SAVE_INVSTD, &a.save_invstd}, {GRAD_GRAD_WEIGHT, &a.grad_grad_weight},
      {GRAD_GRAD_BIAS, &a.grad_grad_bias}};
  for (auto &c : chan) {
    const InputRule &rule = kInputRules[c.slot];
    rc = ParseChannelInput(call, c.slot, C, /*optional=*/true, EmptyAllowed(rule, at.training), c.dst);
    if (rc != kOk) return rc;
    // None stands for a zero upstream gradient too, so only `required_when` is enforced here
    if (Holds(rule.required, at.training) && c.dst->data == nullptr && C > 0) return kMissingTensor;
  }
  if ((rc = ParseChannelOutput(call, GRAD_WEIGHT, C, &a.grad_weight)) != kOk) return rc;
  a.training = at.training;
  a.eps = at.eps;
  std::copy(std::begin(at.output_mask), std::end(at.output_mask), a.mask);
  return DoubleBackward(a) == 0 ? kOk : kKernelFailed;
}

}  // namespace
}  // namespace dbl

int RunBatchNormDoubleBackward(const aot::Call &call, const spec::batch_norm_double_backward::Attrs &attrs) {
  return dbl::Run(call, attrs);
}

}  // namespace bn_grad

extern "C" {

int BatchNormDoubleBackwardInit(int *, int64_t **, const char **, mindspore::AotExtra *extra) {
  return bn_grad::aot::InitAttrs<bn_grad::spec::batch_norm_double_backward::Attrs>(extra);
}

int BatchNormDoubleBackward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                            void * /*stream*/, void *extra) {
  using bn_grad::spec::batch_norm_double_backward::Attrs;
  return bn_grad::dbl::Run({nparam, params, ndims, shapes, dtypes}, bn_grad::aot::AttrsOf<Attrs>(extra));
}

int MsBnDoubleBackwardDirect(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                             int training, double eps, int mask_input, int mask_weight, int mask_bias,
                             int channel_last) {
  bn_grad::spec::batch_norm_double_backward::Attrs at;
  at.training = training != 0;
  at.eps = eps;
  // the output_mask of the BatchNormBackward differentiated, by its mask bits
  namespace bnb = bn_grad::spec::batch_norm_backward;
  at.output_mask[bnb::kMaskBitGradInput] = mask_input != 0;
  at.output_mask[bnb::kMaskBitGradWeight] = mask_weight != 0;
  at.output_mask[bnb::kMaskBitGradBias] = mask_bias != 0;
  at.channel_last = channel_last != 0;
  return bn_grad::dbl::Run({nparam, params, ndims, shapes, dtypes}, at);
}

}  // extern "C"
