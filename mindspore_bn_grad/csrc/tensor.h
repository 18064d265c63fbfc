// What every kernel's arguments are made of: element types, tensor pointers
// and the [outer, channels, inner] view of an activation tensor.
//
// Every activation tensor is viewed as [outer, channels, inner], contiguous
// (geometry.h parses it from a shape and a layout):
//   channel-first (NCHW, NCL, NCDHW, ND): outer = N, inner = prod(dims[2:])
//   channel-last  (NHWC, NDHWC):          outer = prod(dims[:-1]), inner = 1
// so one kernel serves every rank and both layouts.
#ifndef MS_BN_GRAD_TENSOR_H_
#define MS_BN_GRAD_TENSOR_H_

#include <cstdint>

namespace bn_grad {

enum class DType : int { kNone = 0, kFloat16 = 1, kBFloat16 = 2, kFloat32 = 3, kFloat64 = 4 };

struct ConstTensor {
  const void *data = nullptr;   // null when absent (dtype kNone)
  DType dtype = DType::kNone;
};

struct MutTensor {
  void *data = nullptr;
  DType dtype = DType::kNone;
};

// An activation tensor as [outer, channels, inner]; the kernels' argument
// structs start with it.
struct Geometry {
  int64_t outer = 0, channels = 0, inner = 0;
};

}  // namespace bn_grad

#endif  // MS_BN_GRAD_TENSOR_H_
