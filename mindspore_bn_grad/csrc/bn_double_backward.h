// BatchNormDoubleBackward on CPU: the interface between the entry points
// (bn_double_backward_entry.cpp) and the compute (bn_double_backward_cpu.cpp).
// Prototype and formulas: op_def/batch_norm_double_backward.yaml.
// Activations are [outer, channels, inner], as in bn_backward.h.
#ifndef MS_BN_GRAD_BN_DOUBLE_BACKWARD_H_
#define MS_BN_GRAD_BN_DOUBLE_BACKWARD_H_

#include <cstdint>

#include "bn_backward.h"

namespace bn_grad {
namespace dbl {

struct DoubleBackwardArgs {
  int64_t outer = 0, channels = 0, inner = 0;
  ConstTensor grad_out, input;              // [outer, channels, inner], same dtype
  ConstTensor grad_grad_input;              // same as grad_out, or absent (0)
  ConstTensor weight;                       // (C,) or absent (1)
  ConstTensor running_mean, running_var;    // (C,) or absent (0 and 1); inference
  ConstTensor save_mean, save_invstd;       // (C,); training
  ConstTensor grad_grad_weight, grad_grad_bias;  // (C,) or absent (0)
  MutTensor grad_grad_out, grad_input;      // [outer, channels, inner], grad_out's dtype
  MutTensor grad_weight;                    // (C,)
  bool training = true;
  double eps = 1e-5;
  bool mask[3] = {true, true, true};        // output_mask of the BatchNormBackward differentiated
};

// Compute only; shapes and dtypes were checked by the entry points. Writes
// every output. Returns 0, or nonzero for an unsupported dtype.
int DoubleBackward(const DoubleBackwardArgs &args);

}  // namespace dbl
}  // namespace bn_grad

#endif  // MS_BN_GRAD_BN_DOUBLE_BACKWARD_H_
