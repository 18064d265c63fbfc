// SyncBatchNorm backward steps on CPU: the interface between the entry points
// (bn_sync_entry.cpp) and the compute (bn_sync_cpu.cpp). Prototypes:
// op_def/batch_norm_reduce_backward.yaml, op_def/batch_norm_elemt_backward.yaml.
// Activations are [outer, channels, inner] (tensor.h).
#ifndef MS_BN_GRAD_BN_SYNC_H_
#define MS_BN_GRAD_BN_SYNC_H_

#include <cstdint>

#include "tensor.h"

namespace bn_grad {
namespace sync {

struct ReduceArgs : Geometry {
  ConstTensor grad_out, input;              // [outer, channels, inner], same dtype
  ConstTensor mean, invstd;                 // (C,)
  ConstTensor weight;                       // (C,) or absent (unused by the sums)
  MutTensor sum_dy, sum_dy_xmu;             // (C,)  written when input_g
  MutTensor grad_weight, grad_bias;         // (C,)  written when weight_g / bias_g
  bool input_g = true, weight_g = true, bias_g = true;
};

enum class CountDType : int { kFloat = 0, kInt32 = 1, kInt64 = 2 };

struct ElemtArgs : Geometry {
  ConstTensor grad_out, input;              // [outer, channels, inner], same dtype
  ConstTensor mean, invstd, weight;         // (C,); weight may be absent (1)
  ConstTensor sum_dy, sum_dy_xmu;           // (C,), summed over the group
  const void *counter = nullptr;            // (num_counts,): element count per rank
  int64_t num_counts = 0;
  CountDType counter_dtype = CountDType::kFloat;
  DType counter_float = DType::kFloat32;    // when counter_dtype is kFloat
  MutTensor grad_input;                     // [outer, channels, inner], grad_out's dtype
};

// Compute only; shapes and dtypes were checked by the entry points. The
// outputs a flag turns off are not touched (the entry points zero-fill
// them). Return 0, or nonzero for an unsupported dtype.
int ReduceBackward(const ReduceArgs &args);
int ElemtBackward(const ElemtArgs &args);

}  // namespace sync
}  // namespace bn_grad

#endif  // MS_BN_GRAD_BN_SYNC_H_
