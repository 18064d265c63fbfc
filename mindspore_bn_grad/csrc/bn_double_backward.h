// BatchNormDoubleBackward on CPU: the interface between the entry points
// (bn_double_backward_entry.cpp) and the compute (bn_double_backward_cpu.cpp).
// Prototype and formulas: op_def/batch_norm_double_backward.yaml.
// Activations are [outer, channels, inner] (tensor.h).
#ifndef MS_BN_GRAD_BN_DOUBLE_BACKWARD_H_
#define MS_BN_GRAD_BN_DOUBLE_BACKWARD_H_

#include <cstdint>

#include "bn_spec.gen.h"
#include "tensor.h"

namespace bn_grad {
namespace dbl {

struct DoubleBackwardArgs : Geometry {
  ConstTensor grad_out, input;              // [outer, channels, inner], same dtype
  ConstTensor grad_grad_input;              // same as grad_out, or absent (0)
  ConstTensor weight;                       // (C,) or absent (1)
  ConstTensor running_mean, running_var;    // (C,) or absent (0 and 1); inference
  ConstTensor save_mean, save_invstd;       // (C,); training
  ConstTensor grad_grad_weight, grad_grad_bias;  // (C,) or absent (0)
  MutTensor grad_grad_out, grad_input;      // [outer, channels, inner], grad_out's dtype
  MutTensor grad_weight;                    // (C,)
  // The attributes (set by the entry points from spec::batch_norm_double_backward::Attrs).
  bool training = false;
  double eps = 0.0;
  bool mask[spec::batch_norm_double_backward::kOutputMaskLength] = {};  // output_mask of the
                                            // BatchNormBackward differentiated
};

// Compute only; shapes and dtypes were checked by the entry points. Writes
// every output. Returns 0, or nonzero for an unsupported dtype.
int DoubleBackward(const DoubleBackwardArgs &args);

}  // namespace dbl
}  // namespace bn_grad

#endif  // MS_BN_GRAD_BN_DOUBLE_BACKWARD_H_
