// BatchNormBackward, per channel: the phases of a channel that both walks
// (bn_row_path.cpp, bn_column_path.cpp) share, in the order a call runs them:
//
//   1. ChannelInputs: the channel's mean, invstd and weight, in double
//      (saved statistics in training, running ones in inference; an absent
//      optional input takes the prototype's default_value).
//   2. (the walk sums dy and dy * (x - mean) over the channel: statistics)
//   3. FinishChannel: from those sums, writes grad_weight / grad_bias and
//      returns the coefficients of dx (DxCoef).
//   4. (the walk applies DxScalar, or its 8-lane form, to every element)
//
// Formulas (op_def/batch_norm_backward.yaml, docs/operator.md):
//   grad_weight = sum(dy * (x - mean)) * invstd,  grad_bias = sum(dy)
//   dx = dy * scale - (x - mean) * ks - mdys with scale = weight * invstd and,
//   in training, ks = sum(dy * (x - mean)) * invstd^2 / n * scale,
//   mdys = sum(dy) / n * scale (0 in inference).
#ifndef MS_BN_GRAD_BN_CHANNEL_H_
#define MS_BN_GRAD_BN_CHANNEL_H_

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "bn_backward.h"
#include "bn_spec.gen.h"
#include "element_io.h"

namespace bn_grad {
namespace bwd {

// Output-mask bits (mask_bit in op_def/batch_norm_backward.yaml).
constexpr int kDx = spec::batch_norm_backward::kMaskBitGradInput;
constexpr int kDw = spec::batch_norm_backward::kMaskBitGradWeight;
constexpr int kDb = spec::batch_norm_backward::kMaskBitGradBias;

struct ChanIn {  // per-channel inputs, in double
  double mean, invstd, w;
};

// f(c - c0, value in double) for c in [c0, c1): one dtype switch per tensor
// and range, not per value (per-channel work showed up on tensors with many
// small channels). The values are LoadAny's.
template <class F>
void ForEachChannelValue(const ConstTensor &t, int64_t c0, int64_t c1, double dflt, F &&f) {
  auto each = [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    for (int64_t c = c0; c < c1; ++c) f(c - c0, static_cast<double>(Ld<D>(t.data, c)));
  };
  if (t.data == nullptr) {
    for (int64_t c = c0; c < c1; ++c) f(c - c0, dflt);
    return;
  }
  switch (t.dtype) {
    case DType::kFloat16: each(std::integral_constant<DType, DType::kFloat16>()); break;
    case DType::kBFloat16: each(std::integral_constant<DType, DType::kBFloat16>()); break;
    case DType::kFloat32: each(std::integral_constant<DType, DType::kFloat32>()); break;
    case DType::kFloat64: each(std::integral_constant<DType, DType::kFloat64>()); break;
    default: for (int64_t c = c0; c < c1; ++c) f(c - c0, dflt); break;
  }
}

// Per-channel inputs of channels [c0, c1), into out[0 .. c1 - c0). Loaded per
// block of channels where they are used, so no per-call array grows with C.
inline void ChannelInputs(const BnBackwardArgs &a, int64_t c0, int64_t c1, ChanIn *out) {
  namespace bnb = spec::batch_norm_backward;
  ForEachChannelValue(a.weight, c0, c1, bnb::kAbsentWeight, [&](int64_t j, double v) { out[j].w = v; });
  if (a.training) {
    ForEachChannelValue(a.save_mean, c0, c1, 0.0, [&](int64_t j, double v) { out[j].mean = v; });
    ForEachChannelValue(a.save_invstd, c0, c1, 1.0, [&](int64_t j, double v) { out[j].invstd = v; });
  } else {
    ForEachChannelValue(a.running_mean, c0, c1, bnb::kAbsentRunningMean, [&](int64_t j, double v) { out[j].mean = v; });
    ForEachChannelValue(a.running_var, c0, c1, bnb::kAbsentRunningVar, [&](int64_t j, double v) {
      out[j].invstd = 1.0 / std::sqrt(v + a.eps);
    });
  }
}

// Channels handled per ChannelInputs call where a loop visits every channel.
constexpr int64_t kChanChunk = 256;

template <class T>
struct DxCoef {  // dx = dy * scale - (x - mean) * ks - mdys
  T mean, scale, ks, mdys;
};

// Writes grad_weight / grad_bias of channel c from its sums (over n elements)
// and returns the coefficients of dx.
template <class T>
__attribute__((always_inline)) inline DxCoef<T> FinishChannel(const BnBackwardArgs &a, int64_t c,
                                                              const ChanIn &in, double sum_dy,
                                                              double sum_dy_xmu, double n) {
  // n = 0 (an empty batch): a sum over nothing is 0, whatever invstd is (0 * Inf would be NaN).
  if (a.mask[kDw]) StoreAny(a.grad_weight.data, a.grad_weight.dtype, c, n > 0 ? sum_dy_xmu * in.invstd : 0.0);
  if (a.mask[kDb]) StoreAny(a.grad_bias.data, a.grad_bias.dtype, c, sum_dy);
  const double scale = in.w * in.invstd;
  double ks = 0.0, mdys = 0.0;
  if (a.training && n > 0) {
    ks = sum_dy_xmu * in.invstd * in.invstd / n * scale;
    mdys = sum_dy / n * scale;
  }
  return DxCoef<T>{static_cast<T>(in.mean), static_cast<T>(scale), static_cast<T>(ks),
                   static_cast<T>(mdys)};
}

// dx of one element (the 8-lane forms in the walks compute the same).
template <class T>
inline T DxScalar(T dy, T x, const DxCoef<T> &k) {
  return std::fma(-(x - k.mean), k.ks, std::fma(dy, k.scale, -k.mdys));
}

}  // namespace bwd
}  // namespace bn_grad

#endif  // MS_BN_GRAD_BN_CHANNEL_H_
