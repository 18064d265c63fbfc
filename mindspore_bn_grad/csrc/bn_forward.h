// BatchNormForward CPU kernel (aclnnBatchNorm / MindSpore BatchNormExt
// semantics): the interface between the entry points (bn_forward_entry.cpp:
// ops.Custom aot and a direct ctypes entry; the lead's op plugin) and the
// compute (bn_forward_cpu.cpp, which maps out the files and the flow of a call).
//
// Per channel c over the n = outer * inner elements of [outer, C, inner]:
//   training:  mean = sum(x) / n, var = sum((x - mean)^2) / n (biased),
//              save_mean = mean, save_invstd = 1 / sqrt(var + eps), save_var = var,
//              running_mean_out = (1 - momentum) * running_mean + momentum * mean,
//              running_var_out  = (1 - momentum) * running_var + momentum * var * n / (n - 1)
//   inference: mean = running_mean (absent: 0), var = running_var (absent: 1);
//              save_mean = mean, save_invstd = 1 / sqrt(var + eps), save_var = var (the statistics used);
//              running_*_out = running_* (copied unless they alias)
//   output = (x - mean) * save_invstd * weight + bias (absent weight 1, bias 0)
// n == 1: the unbiased variance is 0 / 0 = NaN, as in PyTorch and MindSpore's
// ops.BatchNorm; n == 0 (empty batch): mean 0, var 0, running statistics
// unchanged, as torch.batch_norm (docs/forward.md).
#ifndef MS_BN_GRAD_BN_FORWARD_H_
#define MS_BN_GRAD_BN_FORWARD_H_

#include <cstdint>

#include "bn_spec.gen.h"
#include "tensor.h"

namespace bn_grad {

struct BnForwardArgs : Geometry {             // [outer, channels, inner] (tensor.h)
  ConstTensor input;                          // [outer, C, inner]
  ConstTensor weight, bias;                   // (C,) or absent (data null): 1 and 0
  ConstTensor running_mean, running_var;      // (C,) or absent: inference uses 0 and 1
  MutTensor output;                           // [outer, C, inner], input's dtype
  MutTensor save_mean, save_invstd;           // (C,), any float dtype (see above)
  MutTensor save_var;                         // (C,) or absent: the var above (MindSpore's legacy BatchNorm)
  MutTensor running_mean_out, running_var_out;  // (C,) or absent; may alias running_mean/var
  bool training = false;
  double momentum = 0.1;
  double eps = 1e-5;
};

// Returns 0, or a nonzero spec::Error code for arguments it cannot honour
// (the entries and the Python layer reject those earlier). Never throws.
// Threads: num_threads.h; bitwise identical results for any thread count.
int BnForward(const BnForwardArgs &args);

}  // namespace bn_grad

#endif  // MS_BN_GRAD_BN_FORWARD_H_
