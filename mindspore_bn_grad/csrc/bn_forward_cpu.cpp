// BatchNormForward on the CPU (bn_forward.h): plans a call and runs it.
//
// Memory-bound: the floor is reading x once and writing y once. How one call
// flows through the files:
//
//   bn_forward_entry.cpp  checks the tensors (aot_args.h, geometry.h), calls BnForward
//   bn_forward_cpu.cpp    (this file) the plan, the empty case, FinishChannel,
//                         and the walk by the length of a channel's contiguous run:
//     inner >= kRowMinInner (channel-first): bn_forward_row.cpp, per channel
//     inner <  kRowMinInner (channel-last, NC, short NCL): bn_forward_column.cpp,
//                          along rows across channels
//   each walk: per-tile moments (training), combined per channel in a fixed
//   order, FinishChannel, then the normalize pass; shared pieces in
//   bn_forward_walk.h, threads and scratch memory from bn_walk.h.
//
// float16 / bfloat16 / float32 compute in float32 lanes with double
// combines; float64 in double. No fast-math: NaN and Inf propagate.
#include <cmath>
#include <cstdint>
#include <new>

#include "bn_forward.h"
#include "bn_forward_walk.h"
#include "element_io.h"
#include "num_threads.h"

namespace bn_grad {
namespace fwd {

namespace F = spec::batch_norm_forward;

NormCoef<double> FinishChannel(const BnForwardArgs &a, int64_t c, const Moments &m) {
  auto load = [c](const ConstTensor &t, double dflt) {
    return t.data == nullptr ? dflt : LoadAny(t.data, t.dtype, c);
  };
  const double w = load(a.weight, F::kAbsentWeight), b = load(a.bias, F::kAbsentBias);
  const double old_mean = load(a.running_mean, F::kAbsentRunningMean);
  const double old_var = load(a.running_var, F::kAbsentRunningVar);
  double mean = old_mean, var = old_var;
  if (a.training) {  // an empty batch: mean 0, var 0 (no 0 / 0)
    mean = m.n > 0 ? m.mean : 0.0;
    var = m.n > 0 ? m.m2 / m.n : 0.0;
  }
  const double invstd = 1.0 / std::sqrt(var + a.eps);
  if (a.save_mean.data != nullptr) StoreAny(a.save_mean.data, a.save_mean.dtype, c, mean);
  if (a.save_invstd.data != nullptr) StoreAny(a.save_invstd.data, a.save_invstd.dtype, c, invstd);
  if (a.save_var.data != nullptr) StoreAny(a.save_var.data, a.save_var.dtype, c, var);
  // Read before written: the outputs may alias the inputs (in place).
  const bool update = a.training && m.n > 0;
  if (a.running_mean_out.data != nullptr) {
    const double v = update ? (1.0 - a.momentum) * old_mean + a.momentum * mean : old_mean;
    StoreAny(a.running_mean_out.data, a.running_mean_out.dtype, c, v);
  }
  if (a.running_var_out.data != nullptr) {
    const double unbiased = m.m2 / (m.n - 1.0);  // n == 1: 0 / 0 = NaN, as PyTorch and ops.BatchNorm
    const double v = update ? (1.0 - a.momentum) * old_var + a.momentum * unbiased : old_var;
    StoreAny(a.running_var_out.data, a.running_var_out.dtype, c, v);
  }
  return NormCoef<double>{mean, w * invstd, b};
}

namespace {

constexpr int64_t kStreamMinBytes = 16 << 20;   // output at least this big (x + y past a 32 MB L3):
                                                // non-temporal stores; below, both stay cached

template <DType D>
int Dispatch(const BnForwardArgs &a) {
  const int64_t total = a.outer * a.channels * a.inner;
  FwdPlan plan;
  plan.nthreads = WalkThreads(total, a.inner);
  plan.stream = kVec<D> && total * static_cast<int64_t>(ElemSize(D)) >= kStreamMinBytes;
  thread_local Scratch scratch;  // reused by this thread's next call
  if (a.inner >= kRowMinInner) {
    RunFwdRowPath<D>(a, plan, &scratch);
  } else {
    RunFwdColumnPath<D>(a, plan, &scratch);
  }
  scratch.Trim();
  return 0;
}

}  // namespace
}  // namespace fwd

int BnForward(const BnForwardArgs &a) {
  if (a.channels < 0 || a.outer < 0 || a.inner < 0) return spec::kBadShape;
  if (a.channels == 0) return spec::kOk;
  const CallThreads threads(a, a.input.dtype);
  try {
    if (a.outer == 0 || a.inner == 0) {  // empty: statistics of nothing, no output elements
      for (int64_t c = 0; c < a.channels; ++c) fwd::FinishChannel(a, c, fwd::Moments());
      return spec::kOk;
    }
    switch (a.input.dtype) {
      case DType::kFloat16: return fwd::Dispatch<DType::kFloat16>(a);
      case DType::kBFloat16: return fwd::Dispatch<DType::kBFloat16>(a);
      case DType::kFloat32: return fwd::Dispatch<DType::kFloat32>(a);
      case DType::kFloat64: return fwd::Dispatch<DType::kFloat64>(a);
      default: return spec::kBadDtype;
    }
  } catch (...) {  // std::bad_alloc of the scratch: an error code, never an exception
    return spec::kKernelFailed;
  }
}

}  // namespace bn_grad
