// MindSpore's BatchNormExt / BatchNormGradExt (and legacy BatchNorm /
// BatchNormGrad) arguments mapped onto our BatchNormForward / BatchNormBackward (ms_primitive_runs.h says who calls).
#include "ms_primitive_runs.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "bn_forward.h"
#include "element_io.h"
#include "entry_runs.h"

namespace bn_grad {
namespace primitive {
namespace {

using namespace aot;  // NOLINT: Call, the parse helpers, the error codes

// MindSpore's argument order of each primitive: generated from the prototypes'
// mindspore_primitive entries (op_def/*.yaml) into bn_spec.gen.h.
namespace ext = spec::batch_norm_forward::mindspore_primitive;
namespace grad_ext = spec::batch_norm_backward::mindspore_primitive;

// Strided views (PYNATIVE hands them to the op plugin as they are, e.g. a
// transposed tensor): each is gathered into a dense copy that the kernels read
// instead.
class DenseInputs {
 public:
  // kOk, or kBadShape for a layout that does not fit its shape.
  Error Gather(const PrimitiveArgs &args, Call *call, int slot) {
    if (args.IsScalar(slot) || call->params[slot] == nullptr) return kOk;
    const std::optional<TensorLayout> layout = args.Layout(slot);
    if (!layout.has_value()) return kOk;
    const int nd = call->ndims[slot];
    const std::vector<int64_t> &strides = layout->strides;
    if (strides.empty() && layout->storage_offset == 0) return kOk;
    if (layout->storage_offset < 0) return kBadShape;
    std::vector<int64_t> st = strides;
    if (st.empty()) {  // dense but offset
      st.assign(nd, 1);
      for (int d = nd - 2; d >= 0; --d) st[d] = st[d + 1] * call->shapes[slot][d + 1];
    }
    if (static_cast<int>(st.size()) != nd) return kBadShape;
    bool dense = layout->storage_offset == 0;
    int64_t expect = 1, numel = 1;
    for (int d = nd - 1; d >= 0; --d) {
      const int64_t extent = call->shapes[slot][d];
      if (extent < 0 || st[d] < 0) return kBadShape;
      if (extent != 1 && st[d] != expect) dense = false;
      expect *= extent;
      numel *= extent;
    }
    if (dense) return kOk;
    const DType dt = call->Dtype(slot);
    if (dt == DType::kNone) return kBadDtype;
    const size_t es = ElemSize(dt);
    buffers_.emplace_back(static_cast<size_t>(numel) * es);
    char *dst = buffers_.back().data();
    const char *src = static_cast<const char *>(call->params[slot]) + layout->storage_offset * es;
    std::vector<int64_t> idx(nd, 0);
    for (int64_t i = 0; i < numel; ++i) {
      int64_t off = 0;
      for (int d = 0; d < nd; ++d) off += idx[d] * st[d];
      std::memcpy(dst + static_cast<size_t>(i) * es, src + off * static_cast<int64_t>(es), es);
      for (int d = nd - 1; d >= 0; --d) {
        if (++idx[d] < call->shapes[slot][d]) break;
        idx[d] = 0;
      }
    }
    call->params[slot] = dst;
    return kOk;
  }

 private:
  std::vector<std::vector<char>> buffers_;
};

// Dense copies of the tensor inputs in [first, last] that are strided views;
// the call's pointers are redirected to them.
Error GatherInputs(const PrimitiveArgs &args, Call *call, int first, int last, DenseInputs *dense,
                   std::vector<void *> *params) {
  params->assign(call->params, call->params + call->nparam);
  call->params = params->data();
  for (int s = first; s <= last; ++s) {
    const Error rc = dense->Gather(args, call, s);
    if (rc != kOk) return rc;
  }
  return kOk;
}

// A tensor slot MindSpore filled with None (an absent optional input) comes
// as dtype "none" with a null pointer.
ConstTensor OptionalInput(const Call &call, int slot, int64_t channels, Error *rc) {
  ConstTensor t;
  if (*rc == kOk) *rc = ParseChannelInput(call, slot, channels, /*optional=*/true, /*empty_ok=*/false, &t);
  return t;
}

int RunForward(Call call, const PrimitiveArgs &args) {
  using namespace ext;  // NOLINT
  if (call.Check(NUM_ARGS) != kOk || args.NumInputs() != static_cast<size_t>(kNumInputs)) return kBadParamCount;
  if (!args.IsScalar(TRAINING) || !args.IsScalar(MOMENTUM) || !args.IsScalar(EPS)) return kBadParamCount;
  // The running statistics are updated in place: a strided view of them would be
  // updated in a copy, so those are refused (nn and mint cells hold them dense).
  DenseInputs dense;
  std::vector<void *> params;
  void *running[2] = {call.params[RUNNING_MEAN], call.params[RUNNING_VAR]};
  Error rc = GatherInputs(args, &call, INPUT, RUNNING_VAR, &dense, &params);
  if (rc != kOk) return rc;
  if (call.params[RUNNING_MEAN] != running[0] || call.params[RUNNING_VAR] != running[1]) return kBadShape;
  BnForwardArgs a;
  DType dt = DType::kNone;
  int64_t numel = 0;
  rc = ParseActivations(call, NUM_ARGS, {INPUT, OUTPUT}, /*channel_last=*/false, &a, &dt, &numel);
  if (rc != kOk) return rc;
  a.input = ConstTensor{call.params[INPUT], dt};
  a.output = MutTensor{call.params[OUTPUT], dt};
  a.weight = OptionalInput(call, WEIGHT, a.channels, &rc);
  a.bias = OptionalInput(call, BIAS, a.channels, &rc);
  a.running_mean = OptionalInput(call, RUNNING_MEAN, a.channels, &rc);
  a.running_var = OptionalInput(call, RUNNING_VAR, a.channels, &rc);
  if (rc != kOk) return rc;
  if ((rc = ParseChannelOutput(call, SAVE_MEAN, a.channels, &a.save_mean)) != kOk) return rc;
  if ((rc = ParseChannelOutput(call, SAVE_INVSTD, a.channels, &a.save_invstd)) != kOk) return rc;
  a.training = args.Bool(TRAINING);
  a.momentum = args.Float(MOMENTUM);
  a.eps = args.Float(EPS);
  // BatchNormExt updates the running statistics in place (in training).
  if (a.training && a.running_mean.data != nullptr && a.running_var.data != nullptr) {
    a.running_mean_out = MutTensor{const_cast<void *>(a.running_mean.data), a.running_mean.dtype};
    a.running_var_out = MutTensor{const_cast<void *>(a.running_var.data), a.running_var.dtype};
  }
  return BnForward(a);
}

int RunBackward(Call call, const PrimitiveArgs &args) {
  using namespace grad_ext;  // NOLINT
  namespace bnb = spec::batch_norm_backward;
  if (call.Check(NUM_ARGS) != kOk || args.NumInputs() != static_cast<size_t>(kNumInputs)) return kBadParamCount;
  if (!args.IsScalar(TRAINING) || !args.IsScalar(EPS) || !args.IsScalar(OUTPUT_MASK)) return kBadParamCount;
  DenseInputs dense;
  std::vector<void *> gathered;
  const Error rc = GatherInputs(args, &call, GRAD_OUT, SAVE_INVSTD, &dense, &gathered);
  if (rc != kOk) return rc;
  bnb::Attrs attrs;
  attrs.training = args.Bool(TRAINING);
  attrs.eps = args.Float(EPS);
  attrs.channel_last = false;  // BatchNormExt has no layout: the channel is dim 1
  const std::vector<int64_t> mask = args.IntVec(OUTPUT_MASK);
  if (mask.size() != static_cast<size_t>(bnb::kOutputMaskLength)) return kBadParamCount;
  for (int i = 0; i < bnb::kOutputMaskLength; ++i) attrs.output_mask[i] = mask[i] != 0;

  // Our BatchNormBackward's tensor slots, each taken from the argument that carries it.
  void *params[bnb::NUM_SLOTS];
  int ndims[bnb::NUM_SLOTS];
  int64_t *shapes[bnb::NUM_SLOTS];
  const char *dtypes[bnb::NUM_SLOTS];
  for (int i = 0; i < bnb::NUM_SLOTS; ++i) {
    const int arg = kArgOfSlot[i];
    if (arg < 0) return kBadParamCount;
    params[i] = call.params[arg];
    ndims[i] = call.ndims[arg];
    shapes[i] = call.shapes[arg];
    dtypes[i] = call.dtypes[arg];
  }
  return RunBatchNormBackward(Call{bnb::NUM_SLOTS, params, ndims, shapes, dtypes}, attrs);
}

namespace legacy_fwd = spec::batch_norm_forward::mindspore_legacy_primitive;
namespace legacy_bwd = spec::batch_norm_backward::mindspore_legacy_primitive;
namespace legacy_dbl = spec::batch_norm_double_backward::mindspore_legacy_primitive;

// MindSpore's data_format enum (its str_to_enum): NCHW 0, NHWC 1.
constexpr int64_t kFormatNHWC = 1;

Error ReadLayout(const PrimitiveArgs &args, int arg, bool *channel_last) {
  const std::vector<int64_t> v = args.IntVec(arg);
  if (v.size() != 1 || v[0] < 0 || v[0] > kFormatNHWC) return kBadParamCount;
  *channel_last = v[0] == kFormatNHWC;
  return kOk;
}

int RunLegacyForward(Call call, const PrimitiveArgs &args) {
  using namespace legacy_fwd;  // NOLINT
  if (call.Check(NUM_ARGS) != kOk || args.NumInputs() != static_cast<size_t>(kNumInputs)) return kBadParamCount;
  for (int s : {IS_TRAINING, EPSILON, MOMENTUM, DATA_FORMAT}) {
    if (!args.IsScalar(s)) return kBadParamCount;
  }
  bool channel_last = false;
  Error rc = ReadLayout(args, DATA_FORMAT, &channel_last);
  if (rc != kOk) return rc;
  // Our entries from the arguments that carry them (kArgOfSlot); MindSpore's own by name.
  namespace F = spec::batch_norm_forward;
  const int x = kArgOfSlot[F::INPUT], y = kArgOfSlot[F::OUTPUT];
  const int mean = kArgOfSlot[F::RUNNING_MEAN], var = kArgOfSlot[F::RUNNING_VAR];
  DenseInputs dense;  // as BatchNormExt: the running statistics, updated in place, must be dense
  std::vector<void *> params;
  void *running[2] = {call.params[mean], call.params[var]};
  if ((rc = GatherInputs(args, &call, X, VARIANCE, &dense, &params)) != kOk) return rc;  // the tensor inputs
  if (call.params[mean] != running[0] || call.params[var] != running[1]) return kBadShape;
  BnForwardArgs a;
  DType dt = DType::kNone;
  int64_t numel = 0;
  if ((rc = ParseActivations(call, NUM_ARGS, {x, y}, channel_last, &a, &dt, &numel)) != kOk) return rc;
  a.input = ConstTensor{call.params[x], dt};
  a.output = MutTensor{call.params[y], dt};
  const std::pair<int, ConstTensor *> stats[] = {  // all required
      {F::WEIGHT, &a.weight}, {F::BIAS, &a.bias}, {F::RUNNING_MEAN, &a.running_mean}, {F::RUNNING_VAR, &a.running_var}};
  for (const auto &[slot, t] : stats) {
    if ((rc = ParseChannelInput(call, kArgOfSlot[slot], a.channels, /*optional=*/false, /*empty_ok=*/false, t)) !=
        kOk) {
      return rc;
    }
  }
  MutTensor batch[2];
  if ((rc = ParseChannelOutput(call, kArgOfSlot[F::SAVE_MEAN], a.channels, &a.save_mean)) != kOk) return rc;
  if ((rc = ParseChannelOutput(call, RESERVE_SPACE_2, a.channels, &a.save_var)) != kOk) return rc;
  if ((rc = ParseChannelOutput(call, BATCH_MEAN, a.channels, &batch[0])) != kOk) return rc;
  if ((rc = ParseChannelOutput(call, BATCH_VARIANCE, a.channels, &batch[1])) != kOk) return rc;
  a.training = args.Bool(IS_TRAINING);
  a.momentum = args.Float(MOMENTUM);  // the batch's weight, as BatchNormExt's
  a.eps = args.Float(EPSILON);
  if (a.training) {  // the moving statistics are updated in place
    a.running_mean_out = MutTensor{const_cast<void *>(a.running_mean.data), a.running_mean.dtype};
    a.running_var_out = MutTensor{const_cast<void *>(a.running_var.data), a.running_var.dtype};
  }
  if ((rc = static_cast<Error>(BnForward(a))) != kOk) return rc;
  // batch_mean / batch_variance: the same statistics as the reserve spaces.
  const MutTensor *saved[2] = {&a.save_mean, &a.save_var};
  for (int i = 0; i < 2; ++i) {
    for (int64_t c = 0; c < a.channels; ++c) {
      StoreAny(batch[i].data, batch[i].dtype, c, LoadAny(saved[i]->data, saved[i]->dtype, c));
    }
  }
  return kOk;
}

// Our operator's tensor slots, filled argument by argument from a MindSpore call.
template <int N>
struct Slots {
  void *params[N] = {};
  int ndims[N] = {};
  int64_t *shapes[N] = {};
  const char *dtypes[N];
  std::vector<double> invstd;  // save_invstd computed from a saved variance

  Slots() {
    for (int i = 0; i < N; ++i) dtypes[i] = "none";
  }
  void Take(int slot, const Call &call, int arg) {
    params[slot] = call.params[arg];
    ndims[slot] = call.ndims[arg];
    shapes[slot] = call.shapes[arg];
    dtypes[slot] = call.dtypes[arg];
  }
  // Every slot an argument carries as it is (arg_of_slot: the prototype's kArgOfSlot; -1: not here).
  void TakeAll(const int (&arg_of_slot)[N], const Call &call) {
    for (int slot = 0; slot < N; ++slot) {
      if (arg_of_slot[slot] >= 0) Take(slot, call, arg_of_slot[slot]);
    }
  }
  Call AsCall() { return Call{N, params, ndims, shapes, dtypes}; }

  // MindSpore's legacy saved statistics: in training the batch mean and its biased variance, which
  // become save_mean and save_invstd = 1 / sqrt(variance + eps); in inference the running
  // statistics, which MindSpore's bprop passes there. variance + eps is rounded as MindSpore's own
  // kernels round it (float32, float64 for a float64 variance), its 1 / sqrt is kept in float64: the
  // kernels work in double, and an invstd rounded to float32 puts that rounding into every term
  // (where the terms cancel, as in BatchNormGradGrad on two samples, it is all that is left: 4e-7
  // where MindSpore's kernel gives 0; tests/ut/test_legacy_kernels.py).
  template <class S>
  Error SavedStats(const Call &call, int mean_arg, int var_arg, bool training, double eps) {
    if (!training) {
      Take(S::RUNNING_MEAN, call, mean_arg);
      Take(S::RUNNING_VAR, call, var_arg);
      return kOk;
    }
    Take(S::SAVE_MEAN, call, mean_arg);
    Take(S::SAVE_INVSTD, call, var_arg);
    if (call.ndims[var_arg] != 1 || call.shapes[var_arg] == nullptr) return kBadShape;
    const int64_t c = call.shapes[var_arg][0];
    ConstTensor var;
    const Error rc = ParseChannelInput(call, var_arg, c, /*optional=*/false, /*empty_ok=*/false, &var);
    if (rc != kOk) return rc;
    invstd.resize(static_cast<size_t>(c));
    for (int64_t i = 0; i < c; ++i) {
      const double v = LoadAny(var.data, var.dtype, i);
      const double sum = var.dtype == DType::kFloat64 ? v + eps
                                                      : static_cast<double>(static_cast<float>(v) + static_cast<float>(eps));
      invstd[i] = 1.0 / std::sqrt(sum);
    }
    params[S::SAVE_INVSTD] = invstd.data();
    dtypes[S::SAVE_INVSTD] = aot::DtypeNameOf(DType::kFloat64);
    return kOk;
  }
};

// Where a legacy backward's (BatchNormGrad, BatchNormGradGrad) count and scalars are.
struct LegacyArgs {
  int num_args, num_inputs, training, eps, format;
};

// The start of a legacy backward's run: the argument count, the three scalars (is_training, epsilon,
// data_format) into `attrs`, dense copies of the tensor inputs in [first, last].
template <class Attrs>
Error LegacyBackwardStart(const PrimitiveArgs &args, const LegacyArgs &at, int first, int last, Call *call,
                          Attrs *attrs, DenseInputs *dense, std::vector<void *> *gathered) {
  if (call->Check(at.num_args) != kOk || args.NumInputs() != static_cast<size_t>(at.num_inputs)) {
    return kBadParamCount;
  }
  for (int s : {at.training, at.eps, at.format}) {
    if (!args.IsScalar(s)) return kBadParamCount;
  }
  const Error rc = ReadLayout(args, at.format, &attrs->channel_last);
  if (rc != kOk) return rc;
  attrs->training = args.Bool(at.training);
  attrs->eps = args.Float(at.eps);
  return GatherInputs(args, call, first, last, dense, gathered);
}

int RunLegacyBackward(Call call, const PrimitiveArgs &args) {
  using namespace legacy_bwd;  // NOLINT
  namespace bnb = spec::batch_norm_backward;
  bnb::Attrs attrs;
  DenseInputs dense;
  std::vector<void *> gathered;
  Error rc = LegacyBackwardStart(args, {NUM_ARGS, kNumInputs, IS_TRAINING, EPSILON, DATA_FORMAT}, DOUT,
                                 SAVED_VARIANCE, &call, &attrs, &dense, &gathered);
  if (rc != kOk) return rc;
  for (int i = 0; i < bnb::kOutputMaskLength; ++i) attrs.output_mask[i] = true;
  Slots<bnb::NUM_SLOTS> slots;
  slots.TakeAll(kArgOfSlot, call);
  if ((rc = slots.SavedStats<bnb::Slot>(call, SAVED_MEAN, SAVED_VARIANCE, attrs.training, attrs.eps)) != kOk) {
    return rc;
  }
  return RunBatchNormBackward(slots.AsCall(), attrs);
}

int RunLegacyDoubleBackward(Call call, const PrimitiveArgs &args) {
  using namespace legacy_dbl;  // NOLINT
  namespace dbl = spec::batch_norm_double_backward;
  dbl::Attrs attrs;
  DenseInputs dense;
  std::vector<void *> gathered;
  Error rc = LegacyBackwardStart(args, {NUM_ARGS, kNumInputs, IS_TRAINING, EPSILON, DATA_FORMAT}, X, DOUT_DBIAS,
                                 &call, &attrs, &dense, &gathered);
  if (rc != kOk) return rc;
  Slots<dbl::NUM_SLOTS> slots;
  slots.TakeAll(kArgOfSlot, call);
  if ((rc = slots.SavedStats<dbl::Slot>(call, SAVED_MEAN, SAVED_VARIANCE, attrs.training, attrs.eps)) != kOk) {
    return rc;
  }
  return RunBatchNormDoubleBackward(slots.AsCall(), attrs);
}

}  // namespace

int RunBatchNorm(aot::Call call, const PrimitiveArgs &args) {
  try {
    return RunLegacyForward(call, args);
  } catch (...) {
    return spec::kKernelFailed;
  }
}

int RunBatchNormGrad(aot::Call call, const PrimitiveArgs &args) {
  try {
    return RunLegacyBackward(call, args);
  } catch (...) {
    return spec::kKernelFailed;
  }
}

int RunBatchNormGradGrad(aot::Call call, const PrimitiveArgs &args) {
  try {
    return RunLegacyDoubleBackward(call, args);
  } catch (...) {
    return spec::kKernelFailed;
  }
}

int RunBatchNormExt(aot::Call call, const PrimitiveArgs &args) {
  try {
    return RunForward(call, args);
  } catch (...) {  // std::bad_alloc of a dense copy, or a route's scalar reader: a code, never an exception
    return spec::kKernelFailed;
  }
}

int RunBatchNormGradExt(aot::Call call, const PrimitiveArgs &args) {
  try {
    return RunBackward(call, args);
  } catch (...) {
    return spec::kKernelFailed;
  }
}

}  // namespace primitive
}  // namespace bn_grad
