// Entry points of the CPU kernel library.
//
//   BatchNormBackwardInit / BatchNormBackward : MindSpore ops.Custom(func_type="aot")
//   BatchNormBackwardInferShape               : output shapes for MindSpore (see below)
//   MsBnGradDirect                            : the same kernel called without MindSpore
//                                               (ctypes: benchmarks, tests, sanitizers)
//   MsBnGrad{Set,Get}NumThreads                : the thread count (set by cpu_kernel/native.py)
//
// Both kernel entries share ParseCall, which checks every shape and dtype it
// is handed against the others (aot_args.h) before any memory is touched: a
// call that does not fit returns a nonzero code instead of reading out of
// bounds. Attributes: aot_attrs.h.
#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "aot_args.h"
#include "aot_attrs.h"
#include "bn_backward.h"
#include "entry_runs.h"
#include "geometry.h"
#include "ms_aot_compat.h"
#include "num_threads.h"

namespace bn_grad {
namespace {

using namespace aot;  // NOLINT: the shared entry-point helpers
// Tensor slots (GRAD_OUT ... GRAD_BIAS), input names, attribute names and Attrs: the prototype.
using namespace spec::batch_norm_backward;  // NOLINT

static_assert(sizeof(BnBackwardArgs::mask) == sizeof(Attrs::output_mask), "one mask entry per mask bit");

int ParseCall(const Call &call, const Attrs &attrs, BnBackwardArgs *a, int64_t *numel) {
  DType dt = DType::kNone;
  Error rc = ParseActivations(call, NUM_SLOTS, {GRAD_OUT, INPUT, GRAD_INPUT}, attrs.channel_last, a, &dt, numel);
  if (rc != kOk) return rc;
  a->grad_out = ConstTensor{call.params[GRAD_OUT], dt};
  a->input = ConstTensor{call.params[INPUT], dt};
  a->grad_input = MutTensor{call.params[GRAD_INPUT], dt};

  // Absent per-channel inputs take their defaults; the prototype's rules (kInputRules) say which
  // may be None, where (0,) also stands for an absent one and which the mode requires.
  struct { Slot slot; ConstTensor *dst; } chan[] = {
      {WEIGHT, &a->weight}, {RUNNING_MEAN, &a->running_mean}, {RUNNING_VAR, &a->running_var},
      {SAVE_MEAN, &a->save_mean}, {SAVE_INVSTD, &a->save_invstd},
  };
  for (auto &c : chan) {
    const InputRule &rule = kInputRules[c.slot];
    rc = ParseChannelInput(call, c.slot, a->channels, rule.optional, EmptyAllowed(rule, attrs.training), c.dst);
    if (rc != kOk) return rc;
    if (Required(rule, attrs.training) && c.dst->data == nullptr && a->channels > 0) return kMissingTensor;
  }
  if ((rc = ParseChannelOutput(call, GRAD_WEIGHT, a->channels, &a->grad_weight)) != kOk) return rc;
  if ((rc = ParseChannelOutput(call, GRAD_BIAS, a->channels, &a->grad_bias)) != kOk) return rc;
  if (a->grad_bias.dtype != a->grad_weight.dtype) return kBadDtype;
  a->training = attrs.training;
  a->eps = attrs.eps;
  std::copy(std::begin(attrs.output_mask), std::end(attrs.output_mask), a->mask);
  return kOk;
}

int Compute(BnBackwardArgs &a, int64_t numel) {
  // Masked outputs come back zero-filled with their normal shape. A masked
  // grad_input is zeroed by the kernel in the sweep that reads x and dy when
  // it computes grad_weight or grad_bias, else here.
  const bool want_dx = a.mask[kMaskBitGradInput], want_dw = a.mask[kMaskBitGradWeight];
  const bool want_db = a.mask[kMaskBitGradBias];
  if (!want_dx && numel > 0) {
    a.zero_grad_input = want_dw || want_db;
    if (!a.zero_grad_input) ZeroFill(a.grad_input, numel);
  }
  if (!want_dw) ZeroFill(a.grad_weight, a.channels);
  if (!want_db) ZeroFill(a.grad_bias, a.channels);
  if (!(want_dx || want_dw || want_db) || a.channels == 0) return kOk;
  return BnBackward(a) == 0 ? kOk : kKernelFailed;
}

}  // namespace

int RunBatchNormBackward(const aot::Call &call, const spec::batch_norm_backward::Attrs &attrs) {
  using namespace aot;  // NOLINT
  using namespace spec::batch_norm_backward;  // NOLINT
  BnBackwardArgs a;
  int64_t numel = 0;
  int rc = ParseCall(call, attrs, &a, &numel);
  if (rc != kOk) return rc;
  try {
    return Compute(a, numel);
  } catch (...) {  // std::bad_alloc: an error code, never an exception into the caller
    return kKernelFailed;
  }
}

namespace {

constexpr int64_t kUnknownDim = -1;
constexpr int64_t kUnknownRank = -2;

// Output shapes from grad_out's shape alone: grad_input = grad_out's shape,
// grad_weight = grad_bias = (C,), C = the channel dim (-1 when unknown);
// unknown rank ([-2]) stays unknown. Never fails: it runs before the Python
// infer that checks the call and raises the clear error.
std::vector<std::vector<int64_t>> InferShapes(int ndim, const int64_t *shape, bool channel_last) {
  std::vector<int64_t> full;
  int64_t channels = kUnknownDim;
  if (shape != nullptr && ndim > 0) {
    full.assign(shape, shape + ndim);
    bool unknown_rank = false;
    for (int64_t d : full) unknown_rank = unknown_rank || d == kUnknownRank;
    if (unknown_rank) {
      full = {kUnknownRank};
    } else if (ndim >= 2) {
      channels = full[ChannelAxis(ndim, channel_last)];
    }
  } else {
    full = {kUnknownRank};
  }
  return {full, {channels}, {channels}};
}

std::string FormatShape(int ndim, const int64_t *shape) {
  std::string s = "(";
  for (int i = 0; i < ndim; ++i) {
    if (i > 0) s += ", ";
    s += shape[i] == kUnknownDim ? std::string("?") : std::to_string(shape[i]);
  }
  return s + (ndim == 1 ? ",)" : ")");
}

bool KnownRank(int ndim, const int64_t *shape) {
  for (int i = 0; i < ndim; ++i) if (shape[i] == kUnknownRank) return false;
  return true;
}

// The checks of the Python infer (infer.py) on the shapes MindSpore hands the
// C++ infer, which with dynamic shapes runs before every launch: a call that
// does not fit raises here, as a clear error, instead of reaching the kernel
// (whose error code would make MindSpore refuse every later call of the graph).
// Only known dims are compared. `present` (the prim attribute input_present,
// one 0/1 per input) says which inputs the entries are. primitives.py sets it once
// the Python infer has seen unknown dims: without it nothing is checked here
// (the Python infer checks everything, and this runs before it); with [-1]
// only grad_out and input (entries 0 and 1, required) are checked.
std::string CheckShapes(const int *ndims, int64_t *const *shapes, bool channel_last, bool training,
                        const std::vector<int64_t> &present) {
  const std::string op = "BatchNormBackward: ";
  if (present.empty()) return "";
  const int rank = ndims[0];  // entry 0: grad_out, the first input (never None)
  const int64_t *full = shapes[0];
  if (!KnownRank(rank, full)) return "";
  if (!RankSupported(rank)) {
    return op + "grad_out expected rank " + std::to_string(kMinRank) + ".." + std::to_string(kMaxRank) +
           ", got rank " + std::to_string(rank);
  }
  // Which input each entry is: all of them with one 0/1 per input; with [-1] only the leading
  // inputs that are never None. The rules come from the prototype (kInputRules, generated).
  const bool all = present.size() == static_cast<size_t>(kNumInputs);
  const int caxis = ChannelAxis(rank, channel_last);
  int64_t channels = kUnknownDim;
  int entry = 0;
  for (int slot = 0; slot < kNumInputs; ++slot) {
    const InputRule &rule = kInputRules[slot];
    if (!all && rule.optional) break;
    if (all && present[slot] == 0) {
      if (!rule.optional) return "";  // not the pattern primitives.py writes: check nothing
      continue;
    }
    const int nd = ndims[entry];
    const int64_t *shape = shapes[entry];
    ++entry;
    if (!KnownRank(nd, shape)) continue;
    if (rule.shape == ShapeKind::kFull) {
      bool same = nd == rank;
      for (int i = 0; same && i < rank; ++i) {
        same = full[i] == kUnknownDim || shape[i] == kUnknownDim || full[i] == shape[i];
      }
      if (!same) {
        return op + kInputNames[slot] + " expected the shape of grad_out " + FormatShape(rank, full) +
               ", got " + FormatShape(nd, shape);
      }
      if (channels == kUnknownDim) channels = shape[caxis];
      continue;
    }
    if (rule.shape != ShapeKind::kChannel) continue;
    if (nd != 1) {
      return op + kInputNames[slot] + " expected a 1-D (C,) tensor, got shape " + FormatShape(nd, shape);
    }
    if (shape[0] == kUnknownDim || (shape[0] == 0 && EmptyAllowed(rule, training))) continue;
    if (channels == kUnknownDim) {
      channels = shape[0];
    } else if (shape[0] != channels) {
      return op + kInputNames[slot] + " expected length " + std::to_string(channels) +
             " (the channel count of input), got length " + std::to_string(shape[0]);
    }
  }
  return "";
}

}  // namespace
}  // namespace bn_grad

extern "C" {

int BatchNormBackwardInit(int * /*ndims*/, int64_t ** /*shapes*/, const char ** /*dtypes*/,
                          mindspore::AotExtra *extra) {
  return bn_grad::aot::InitAttrs<bn_grad::spec::batch_norm_backward::Attrs>(extra);
}

// MindSpore calls this (func name + "InferShape") when the primitive has the
// attribute cpp_infer_shape (set by primitives.py): at compile and, with dynamic
// shapes, before every launch with the actual shapes. `ndims`/`shapes` list
// the tensor inputs present (None inputs are skipped), so only entry 0,
// grad_out (required), is read. Dtypes and all checks stay in the Python
// infer, which MindSpore still calls at compile; with dynamic shapes each
// launch's shapes are checked (CheckShapes) and a misfit throws
// std::invalid_argument, which MindSpore raises in Python as a RuntimeError
// carrying the message.
std::vector<std::vector<int64_t>> BatchNormBackwardInferShape(int *ndims, int64_t **shapes,
                                                              mindspore::AotExtra *extra) {
  namespace bnb = bn_grad::spec::batch_norm_backward;
  bnb::Attrs defaults;
  bool channel_last = defaults.channel_last, training = defaults.training;
  std::vector<int64_t> present;
  if (extra != nullptr) {
    bn_grad::aot::AttrReader reader(extra);
    reader.ChannelLast(bnb::kAttrLayout, &channel_last);
    reader.Bool(bnb::kAttrTraining, &training);
    reader.Ints("input_present", &present);  // set by primitives.py, not a prototype attribute
  }
  if (ndims == nullptr || shapes == nullptr) return bn_grad::InferShapes(0, nullptr, channel_last);
  const std::string error = bn_grad::CheckShapes(ndims, shapes, channel_last, training, present);
  if (!error.empty()) throw std::invalid_argument(error);
  return bn_grad::InferShapes(ndims[0], shapes[0], channel_last);
}

// The same rule for a caller without MindSpore (tests): writes grad_input's
// shape to out_full (room for max(ndim, 1) dims), its rank to *out_rank and C
// to *out_channels.
void MsBnGradInferShape(int ndim, const int64_t *shape, int channel_last, int64_t *out_full,
                        int *out_rank, int64_t *out_channels) {
  auto r = bn_grad::InferShapes(ndim, shape, channel_last != 0);
  *out_rank = static_cast<int>(r[0].size());
  for (size_t i = 0; i < r[0].size(); ++i) out_full[i] = r[0][i];
  *out_channels = r[1][0];
}

int BatchNormBackward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                      void * /*stream*/, void *extra) {
  using bn_grad::spec::batch_norm_backward::Attrs;
  return bn_grad::RunBatchNormBackward({nparam, params, ndims, shapes, dtypes}, bn_grad::aot::AttrsOf<Attrs>(extra));
}

int MsBnGradDirect(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                   int training, double eps, int mask_input, int mask_weight, int mask_bias,
                   int channel_last) {
  namespace bnb = bn_grad::spec::batch_norm_backward;
  bnb::Attrs at;
  at.training = training != 0;
  at.eps = eps;
  at.output_mask[bnb::kMaskBitGradInput] = mask_input != 0;
  at.output_mask[bnb::kMaskBitGradWeight] = mask_weight != 0;
  at.output_mask[bnb::kMaskBitGradBias] = mask_bias != 0;
  at.channel_last = channel_last != 0;
  return bn_grad::RunBatchNormBackward({nparam, params, ndims, shapes, dtypes}, at);
}

// n is checked and parsed (from MS_BN_GRAD_NUM_THREADS or set_num_threads) by cpu_kernel/native.py.
int MsBnGradSetNumThreads(int n) {
  using namespace bn_grad::spec;  // NOLINT: the error codes
  if (n < 1 || n > bn_grad::MaxThreads()) return kBadThreadCount;
  return bn_grad::SetNumThreads(n) ? kOk : kThreadStartFailed;
}
int MsBnGradMaxThreads() { return bn_grad::MaxThreads(); }
int MsBnGradGetNumThreads() { return bn_grad::GetNumThreads(); }
// The thread count of this thread's latest kernel call (tests of num_threads.h's CallThreads).
int MsBnGradLastCallThreads() { return bn_grad::CallThreads::Last(); }
// The most threads a parallel loop of this thread's latest kernel call was given (1: none ran in
// parallel; tests of the kernels' one-thread rules).
int MsBnGradLastCallParallel() { return bn_grad::CallThreads::LastParallel(); }

}  // extern "C"
