// MindSpore's own BatchNormExt and BatchNormGradExt (and its legacy BatchNorm /
// BatchNormGrad) on our kernels, for every route by which MindSpore launches them: its CPU op plugin (op_plugin.cpp,
// the C ABI) and its CPU kernel factory (factory_kernels.cpp, a separate
// library built against the installed MindSpore's C++ headers, which calls
// these from this library). Each route only says what its arguments are
// (PrimitiveArgs); the checks, the argument mapping and the dense copies of
// strided views live here once. std-only: no MindSpore header.
#ifndef MS_BN_GRAD_MS_PRIMITIVE_RUNS_H_
#define MS_BN_GRAD_MS_PRIMITIVE_RUNS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "aot_args.h"

namespace bn_grad {
namespace primitive {

// Where a strided view's elements are: element i0..i{n-1} lives at
// storage_offset + sum(i_d * strides[d]) elements from the call's pointer
// (empty strides: dense from the offset).
struct TensorLayout {
  std::vector<int64_t> strides;
  int64_t storage_offset = 0;
};

// A route's view of one launch, argument by argument (MindSpore's order, the
// prototypes' mindspore_primitive entries in bn_spec.gen.h): the tensors
// travel in the aot::Call, the scalars are read through this.
class PrimitiveArgs {
 public:
  virtual ~PrimitiveArgs() = default;
  virtual size_t NumInputs() const = 0;
  virtual bool IsScalar(int arg) const = 0;
  virtual bool Bool(int arg) const = 0;
  virtual double Float(int arg) const = 0;
  virtual std::vector<int64_t> IntVec(int arg) const = 0;
  // The tensor's layout when the route knows it (nullopt: dense).
  virtual std::optional<TensorLayout> Layout(int arg) const = 0;
};

// Each checks every argument before memory is touched and returns 0 or a
// spec::Error code; never throws.
int RunBatchNormExt(aot::Call call, const PrimitiveArgs &args);
int RunBatchNormGradExt(aot::Call call, const PrimitiveArgs &args);

// MindSpore's legacy BatchNorm / BatchNormGrad / BatchNormGradGrad (what nn.BatchNorm* cells call; the
// kernel factory route provides their CPU kernels): the prototypes'
// mindspore_legacy_primitive entries. Their reserve spaces carry the batch mean
// and its biased variance, which MindSpore's own BatchNormGradGrad reads too.
int RunBatchNorm(aot::Call call, const PrimitiveArgs &args);
int RunBatchNormGrad(aot::Call call, const PrimitiveArgs &args);
int RunBatchNormGradGrad(aot::Call call, const PrimitiveArgs &args);

}  // namespace primitive
}  // namespace bn_grad

#endif  // MS_BN_GRAD_MS_PRIMITIVE_RUNS_H_
