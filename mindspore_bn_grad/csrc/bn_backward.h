// BatchNormBackward CPU kernel: the interface between the entry points
// (aot_entry.cpp: MindSpore's ops.Custom aot ABI and a direct ctypes entry)
// and the compute (bn_backward_cpu.cpp, which maps out the files of the
// kernel and the flow of one call).
//
// Activations are [outer, channels, inner] (tensor.h), so one kernel serves
// every rank and both layouts.
#ifndef MS_BN_GRAD_BN_BACKWARD_H_
#define MS_BN_GRAD_BN_BACKWARD_H_

#include <cstdint>

#include "bn_spec.gen.h"
#include "tensor.h"

namespace bn_grad {

struct BnBackwardArgs : Geometry {
  ConstTensor grad_out, input;                 // [outer, channels, inner]
  ConstTensor weight;                          // (C,) or absent: 1
  ConstTensor running_mean, running_var;       // (C,) or absent: 0 and 1
  ConstTensor save_mean, save_invstd;          // (C,); required when training
  MutTensor grad_input;                        // [outer, channels, inner], grad_out's dtype
  MutTensor grad_weight, grad_bias;            // (C,)
  // The attributes (set by the entry points from spec::batch_norm_backward::Attrs).
  bool training = false;
  double eps = 0.0;
  bool mask[spec::batch_norm_backward::kOutputMaskLength] = {};  // by mask bit (kMaskBit*)
  // mask[0] False: zero-fill grad_input as well, in the sweep that reads x and
  // dy for the other outputs (a separate fill would move the same bytes again).
  bool zero_grad_input = false;
};

// Computes the outputs whose mask bit is set; does not touch the others
// (the entry points zero-fill them), except grad_input with zero_grad_input.
// Returns 0, or a nonzero code for arguments it cannot honour (the Python
// layer rejects those earlier). Threads: num_threads.h.
int BnBackward(const BnBackwardArgs &args);

}  // namespace bn_grad

#endif  // MS_BN_GRAD_BN_BACKWARD_H_
