// Entry points of the CPU kernel library.
//
//   BatchNormBackwardInit / BatchNormBackward : MindSpore ops.Custom(func_type="aot")
//   BatchNormBackwardInferShape               : output shapes for MindSpore (see below)
//   MsBnGradDirect                            : the same kernel called without MindSpore
//                                               (ctypes: benchmarks, tests, sanitizers)
//   MsBnGrad{Set,Get}{NumThreads,Deterministic}: runtime settings
//
// Both kernel entries share ParseCall, which checks every shape and dtype it
// is handed against the others before any memory is touched: a call that
// does not fit returns a nonzero code instead of reading out of bounds.
#include <cstring>
#include <string>
#include <vector>

#include "aot_common.h"
#include "ms_aot_compat.h"
#include "bn_backward.h"

namespace bn_grad {
namespace {

using namespace aot;  // NOLINT: the shared entry-point helpers

enum Slot { GRAD_OUT, INPUT, WEIGHT, RUNNING_MEAN, RUNNING_VAR, SAVE_MEAN, SAVE_INVSTD,
            GRAD_INPUT, GRAD_WEIGHT, GRAD_BIAS, NUM_SLOTS };
constexpr int kNumInputs = GRAD_INPUT;

struct Attrs {
  bool training = true;
  double eps = 1e-5;
  bool mask[3] = {true, true, true};
  bool channel_last = false;
};

struct AttrsData : public mindspore::AotKernelData {
  Attrs attrs;
};

// A per-channel tensor: absent, (C,), or, when `empty_ok`, (0,) meaning absent.
int ParseChannelTensor(void *data, int ndim, const int64_t *shape, const char *dtype,
                       int64_t channels, bool empty_ok, ConstTensor *out) {
  *out = ConstTensor{};
  if (IsNoneDtype(dtype) || (data == nullptr && ndim == 0)) return kOk;
  DType d = ParseDtype(dtype);
  if (d == DType::kNone) return kBadDtype;
  if (ndim != 1) return kBadRank;
  if (shape[0] == 0 && empty_ok && channels != 0) return kOk;
  if (shape[0] != channels) return kBadShape;
  if (data == nullptr && channels > 0) return kMissingTensor;
  out->data = data;
  out->dtype = d;
  return kOk;
}

int ParseCall(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
              const Attrs &attrs, BnBackwardArgs *a, int64_t *numel) {
  if (nparam != NUM_SLOTS) return kBadParamCount;
  const int rank = ndims[GRAD_OUT];
  if (rank < 2 || rank > 8) return kBadRank;
  const int64_t *shape = shapes[GRAD_OUT];
  if (!SameShape(rank, shape, ndims[INPUT], shapes[INPUT]) ||
      !SameShape(rank, shape, ndims[GRAD_INPUT], shapes[GRAD_INPUT])) {
    return kBadShape;
  }
  DType dy = ParseDtype(dtypes[GRAD_OUT]);
  if (dy == DType::kNone || ParseDtype(dtypes[INPUT]) != dy || ParseDtype(dtypes[GRAD_INPUT]) != dy) {
    return kBadDtype;
  }
  bool ok = true;
  *numel = NumElements(rank, shape, &ok);
  if (!ok) return kOverflow;
  a->channels = attrs.channel_last ? shape[rank - 1] : shape[1];
  if (attrs.channel_last) {
    a->outer = NumElements(rank - 1, shape, &ok);
    a->inner = 1;
  } else {
    a->outer = shape[0];
    a->inner = NumElements(rank - 2, shape + 2, &ok);
  }
  if (!ok) return kOverflow;
  if (*numel > 0 && (params[GRAD_OUT] == nullptr || params[INPUT] == nullptr ||
                     params[GRAD_INPUT] == nullptr)) {
    return kMissingTensor;
  }
  a->grad_out = ConstTensor{params[GRAD_OUT], dy};
  a->input = ConstTensor{params[INPUT], dy};
  a->grad_input = MutTensor{params[GRAD_INPUT], dy};

  struct { Slot slot; bool empty_ok; ConstTensor *dst; } chan[] = {
      {WEIGHT, false, &a->weight},
      {RUNNING_MEAN, false, &a->running_mean},
      {RUNNING_VAR, false, &a->running_var},
      {SAVE_MEAN, !attrs.training, &a->save_mean},
      {SAVE_INVSTD, !attrs.training, &a->save_invstd},
  };
  for (auto &c : chan) {
    int rc = ParseChannelTensor(params[c.slot], ndims[c.slot], shapes[c.slot], dtypes[c.slot],
                                a->channels, c.empty_ok, c.dst);
    if (rc != kOk) return rc;
  }
  if (attrs.training && (a->save_mean.data == nullptr || a->save_invstd.data == nullptr) &&
      a->channels > 0) {
    return kMissingTensor;
  }
  DType dparam = ParseDtype(dtypes[GRAD_WEIGHT]);
  if (dparam == DType::kNone || ParseDtype(dtypes[GRAD_BIAS]) != dparam) return kBadDtype;
  for (Slot s : {GRAD_WEIGHT, GRAD_BIAS}) {
    if (ndims[s] != 1 || shapes[s][0] != a->channels) return kBadShape;
    if (params[s] == nullptr && a->channels > 0) return kMissingTensor;
  }
  a->grad_weight = MutTensor{params[GRAD_WEIGHT], dparam};
  a->grad_bias = MutTensor{params[GRAD_BIAS], dparam};
  a->training = attrs.training;
  a->eps = attrs.eps;
  for (int i = 0; i < 3; ++i) a->mask[i] = attrs.mask[i];
  return kOk;
}

int Run(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
        const Attrs &attrs) {
  if (params == nullptr || ndims == nullptr || shapes == nullptr || dtypes == nullptr) {
    return kBadParamCount;
  }
  BnBackwardArgs a;
  int64_t numel = 0;
  int rc = ParseCall(nparam, params, ndims, shapes, dtypes, attrs, &a, &numel);
  if (rc != kOk) return rc;
  // Masked outputs come back zero-filled with their normal shape. A masked
  // grad_input is zeroed by the kernel in the sweep that reads x and dy when
  // it computes grad_weight or grad_bias, else here.
  if (!a.mask[0] && numel > 0) {
    a.zero_grad_input = a.mask[1] || a.mask[2];
    if (!a.zero_grad_input) ZeroFill(a.grad_input.data, numel * ElemSize(a.grad_input.dtype));
  }
  if (a.channels > 0) {
    if (!a.mask[1]) std::memset(a.grad_weight.data, 0, a.channels * ElemSize(a.grad_weight.dtype));
    if (!a.mask[2]) std::memset(a.grad_bias.data, 0, a.channels * ElemSize(a.grad_bias.dtype));
  }
  if (!(a.mask[0] || a.mask[1] || a.mask[2]) || a.channels == 0) return kOk;
  return BnBackward(a) == 0 ? kOk : kKernelFailed;
}


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
      channels = full[channel_last ? ndim - 1 : 1];
    }
  } else {
    full = {kUnknownRank};
  }
  return {full, {channels}, {channels}};
}

}  // namespace
}  // namespace bn_grad

extern "C" {

int BatchNormBackwardInit(int * /*ndims*/, int64_t ** /*shapes*/, const char ** /*dtypes*/,
                          mindspore::AotExtra *extra) {
  auto *data = new bn_grad::AttrsData();
  bn_grad::Attrs &at = data->attrs;
  if (extra->HasAttr("training")) at.training = extra->Attr<bool>("training");
  if (extra->HasAttr("eps")) at.eps = static_cast<double>(extra->Attr<float>("eps"));
  if (extra->HasAttr("eps_bits")) {  // eps exactly (the float attribute is float32): _op.py
    const int64_t bits = extra->Attr<int64_t>("eps_bits");
    std::memcpy(&at.eps, &bits, sizeof(at.eps));
  }
  if (extra->HasAttr("output_mask")) {
    std::vector<int64_t> m = extra->Attr<std::vector<int64_t>>("output_mask");
    if (m.size() != 3) { delete data; return bn_grad::aot::kBadParamCount; }
    for (int i = 0; i < 3; ++i) at.mask[i] = m[i] != 0;
  }
  // data_format arrives as `layout` (see op_def/batch_norm_backward.yaml).
  if (extra->HasAttr("layout")) at.channel_last = bn_grad::aot::ChannelLast(extra->Attr<std::string>("layout"));
  extra->SetKernelData(data);
  return 0;
}

// MindSpore calls this (func name + "InferShape") when the primitive has the
// attribute cpp_infer_shape (set by _op.py): at compile and, with dynamic
// shapes, before every launch with the actual shapes. `ndims`/`shapes` list
// the tensor inputs present (None inputs are skipped), so only entry 0,
// grad_out (required), is read. Dtypes and all checks stay in the Python
// infer, which MindSpore still calls at compile.
std::vector<std::vector<int64_t>> BatchNormBackwardInferShape(int *ndims, int64_t **shapes,
                                                              mindspore::AotExtra *extra) {
  bool channel_last = false;
  if (extra != nullptr && extra->HasAttr("layout")) {
    channel_last = bn_grad::aot::ChannelLast(extra->Attr<std::string>("layout"));
  }
  if (ndims == nullptr || shapes == nullptr) return bn_grad::InferShapes(0, nullptr, channel_last);
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
  bn_grad::Attrs defaults;
  const bn_grad::Attrs *attrs = &defaults;
  if (extra != nullptr) {
    auto *kd = static_cast<mindspore::AotExtra *>(extra)->KernelData();
    if (kd != nullptr) attrs = &static_cast<const bn_grad::AttrsData *>(kd)->attrs;
  }
  return bn_grad::Run(nparam, params, ndims, shapes, dtypes, *attrs);
}

int MsBnGradDirect(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                   int training, double eps, int mask_input, int mask_weight, int mask_bias,
                   int channel_last) {
  bn_grad::Attrs at;
  at.training = training != 0;
  at.eps = eps;
  at.mask[0] = mask_input != 0;
  at.mask[1] = mask_weight != 0;
  at.mask[2] = mask_bias != 0;
  at.channel_last = channel_last != 0;
  return bn_grad::Run(nparam, params, ndims, shapes, dtypes, at);
}

void MsBnGradSetNumThreads(int n) { bn_grad::SetNumThreads(n); }
int MsBnGradGetNumThreads() { return bn_grad::GetNumThreads(); }
void MsBnGradSetDeterministic(int on) { bn_grad::SetDeterministic(on != 0); }
int MsBnGradGetDeterministic() { return bn_grad::GetDeterministic() ? 1 : 0; }

}  // extern "C"
