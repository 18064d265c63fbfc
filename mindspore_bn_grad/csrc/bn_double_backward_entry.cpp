// Entry points of BatchNormDoubleBackward (see bn_double_backward.h):
//
//   BatchNormDoubleBackwardInit / BatchNormDoubleBackward : ops.Custom(func_type="aot")
//   MsBnDoubleBackwardDirect                              : the same, without MindSpore
//
// Slots follow op_def/batch_norm_double_backward.yaml (inputs, then outputs).
// Every shape and dtype is checked against the others before any memory is
// touched; the error codes are the ones of aot_entry.cpp (listed in _native.py).
// The kernel also accepts absent grad_grad_* tensors (zero), for direct calls.
#include <cstring>
#include <string>
#include <vector>

#include "aot_common.h"
#include "ms_aot_compat.h"
#include "bn_double_backward.h"

namespace bn_grad {
namespace dbl {
namespace {

using namespace aot;  // NOLINT: the shared entry-point helpers

// Tensor slots (GRAD_OUT ... GRAD_WEIGHT), attribute names and defaults: the prototype.
using namespace spec::batch_norm_double_backward;  // NOLINT

struct Attrs {
  bool training = kDefaultTraining;
  double eps = kDefaultEps;
  bool mask[kOutputMaskLength] = {kDefaultOutputMask[0], kDefaultOutputMask[1], kDefaultOutputMask[2]};
  bool channel_last = ChannelLast(kDefaultLayout);
};

struct AttrsData : public mindspore::AotKernelData { Attrs attrs; };

// A (C,) input: absent (dtype "none"), (C,), or, when `empty_ok`, (0,) meaning absent.
int ParseChannel(void **params, int *ndims, int64_t **shapes, const char **dtypes, int slot,
                 int64_t C, bool empty_ok, ConstTensor *out) {
  *out = ConstTensor{};
  if (IsNoneDtype(dtypes[slot]) || (params[slot] == nullptr && ndims[slot] == 0)) return kOk;
  const DType d = ParseDtype(dtypes[slot]);
  if (d == DType::kNone) return kBadDtype;
  if (ndims[slot] != 1) return kBadRank;
  if (shapes[slot][0] == 0 && empty_ok && C != 0) return kOk;
  if (shapes[slot][0] != C) return kBadShape;
  if (params[slot] == nullptr && C > 0) return kMissingTensor;
  *out = ConstTensor{params[slot], d};
  return kOk;
}

int Run(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes, const Attrs &at) {
  if (params == nullptr || ndims == nullptr || shapes == nullptr || dtypes == nullptr ||
      nparam != NUM_SLOTS) {
    return kBadParamCount;
  }
  const int rank = ndims[GRAD_OUT];
  if (rank < kMinRank || rank > kMaxRank) return kBadRank;
  const int64_t *shape = shapes[GRAD_OUT];
  const DType dt = ParseDtype(dtypes[GRAD_OUT]);
  if (dt == DType::kNone) return kBadDtype;
  const bool has_ggi = !IsNoneDtype(dtypes[GRAD_GRAD_INPUT]) && !(params[GRAD_GRAD_INPUT] == nullptr && ndims[GRAD_GRAD_INPUT] == 0);
  std::vector<int> full = {INPUT, GRAD_GRAD_OUT, GRAD_INPUT};
  if (has_ggi) full.push_back(GRAD_GRAD_INPUT);
  for (int s : full) {
    if (!SameShape(rank, shape, ndims[s], shapes[s])) return kBadShape;
    if (ParseDtype(dtypes[s]) != dt) return kBadDtype;
  }
  bool ok = true;
  const int64_t numel = NumElements(rank, shape, &ok);
  if (!ok) return kOverflow;
  DoubleBackwardArgs a;
  a.channels = at.channel_last ? shape[rank - 1] : shape[1];
  if (at.channel_last) {
    a.outer = NumElements(rank - 1, shape, &ok);
    a.inner = 1;
  } else {
    a.outer = shape[0];
    a.inner = NumElements(rank - 2, shape + 2, &ok);
  }
  if (!ok) return kOverflow;
  full.push_back(GRAD_OUT);
  if (numel > 0) {
    for (int s : full) if (params[s] == nullptr) return kMissingTensor;
  }
  const int64_t C = a.channels;
  a.grad_out = ConstTensor{params[GRAD_OUT], dt};
  a.input = ConstTensor{params[INPUT], dt};
  if (has_ggi) a.grad_grad_input = ConstTensor{params[GRAD_GRAD_INPUT], dt};
  a.grad_grad_out = MutTensor{params[GRAD_GRAD_OUT], dt};
  a.grad_input = MutTensor{params[GRAD_INPUT], dt};
  struct { int slot; bool empty_ok; ConstTensor *dst; } chan[] = {
      {WEIGHT, false, &a.weight}, {RUNNING_MEAN, false, &a.running_mean},
      {RUNNING_VAR, false, &a.running_var}, {SAVE_MEAN, !at.training, &a.save_mean},
      {SAVE_INVSTD, !at.training, &a.save_invstd}, {GRAD_GRAD_WEIGHT, false, &a.grad_grad_weight},
      {GRAD_GRAD_BIAS, false, &a.grad_grad_bias}};
  for (auto &c : chan) {
    const int rc = ParseChannel(params, ndims, shapes, dtypes, c.slot, C, c.empty_ok, c.dst);
    if (rc != kOk) return rc;
  }
  if (at.training && C > 0 && (a.save_mean.data == nullptr || a.save_invstd.data == nullptr)) {
    return kMissingTensor;
  }
  const DType dw = ParseDtype(dtypes[GRAD_WEIGHT]);
  if (dw == DType::kNone) return kBadDtype;
  if (ndims[GRAD_WEIGHT] != 1 || shapes[GRAD_WEIGHT][0] != C) return kBadShape;
  if (params[GRAD_WEIGHT] == nullptr && C > 0) return kMissingTensor;
  a.grad_weight = MutTensor{params[GRAD_WEIGHT], dw};
  a.training = at.training;
  a.eps = at.eps;
  for (int i = 0; i < 3; ++i) a.mask[i] = at.mask[i];
  return DoubleBackward(a) == 0 ? kOk : kKernelFailed;
}

}  // namespace
}  // namespace dbl
}  // namespace bn_grad

extern "C" {

int BatchNormDoubleBackwardInit(int *, int64_t **, const char **, mindspore::AotExtra *extra) {
  auto *data = new bn_grad::dbl::AttrsData();
  bn_grad::dbl::Attrs &at = data->attrs;
  namespace dbs = bn_grad::spec::batch_norm_double_backward;
  if (extra->HasAttr(dbs::kAttrTraining)) at.training = extra->Attr<bool>(dbs::kAttrTraining);
  if (extra->HasAttr(dbs::kAttrEps)) at.eps = static_cast<double>(extra->Attr<float>(dbs::kAttrEps));
  if (extra->HasAttr(dbs::kAttrEpsBits)) {  // eps exactly (the float attribute is float32)
    const int64_t bits = extra->Attr<int64_t>(dbs::kAttrEpsBits);
    std::memcpy(&at.eps, &bits, sizeof(at.eps));
  }
  if (extra->HasAttr(dbs::kAttrOutputMask)) {  // a list of ints (nonzero = computed)
    std::vector<int64_t> m = extra->Attr<std::vector<int64_t>>(dbs::kAttrOutputMask);
    if (m.size() != dbs::kOutputMaskLength) { delete data; return bn_grad::aot::kBadParamCount; }
    for (int i = 0; i < dbs::kOutputMaskLength; ++i) at.mask[i] = m[i] != 0;
  }
  if (extra->HasAttr(dbs::kAttrLayout)) {
    at.channel_last = bn_grad::aot::ChannelLast(extra->Attr<std::string>(dbs::kAttrLayout));
  }
  extra->SetKernelData(data);
  return 0;
}

int BatchNormDoubleBackward(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                            void * /*stream*/, void *extra) {
  bn_grad::dbl::Attrs at;
  if (extra != nullptr) {
    auto *kd = static_cast<mindspore::AotExtra *>(extra)->KernelData();
    if (kd != nullptr) at = static_cast<const bn_grad::dbl::AttrsData *>(kd)->attrs;
  }
  return bn_grad::dbl::Run(nparam, params, ndims, shapes, dtypes, at);
}

int MsBnDoubleBackwardDirect(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                             int training, double eps, int mask_input, int mask_weight, int mask_bias,
                             int channel_last) {
  bn_grad::dbl::Attrs at;
  at.training = training != 0;
  at.eps = eps;
  at.mask[0] = mask_input != 0;
  at.mask[1] = mask_weight != 0;
  at.mask[2] = mask_bias != 0;
  at.channel_last = channel_last != 0;
  return bn_grad::dbl::Run(nparam, params, ndims, shapes, dtypes, at);
}

}  // extern "C"
