// BatchNormBackward on the CPU (bn_backward.h): plans a call and runs it.
//
// Memory-bound: the floor is reading x and dy once and writing dx once.
// How one call flows through the files:
//
//   aot_entry.cpp        checks the tensors (aot_args.h, geometry.h), zero-fills
//                        masked outputs, calls BnBackward
//   bn_backward_cpu.cpp  (this file) Dispatch: what to compute (Plan), the
//                        walk by the length of a channel's contiguous run:
//     inner >= kRowMinInner (channel-first): bn_row_path.cpp, per channel
//     inner <  kRowMinInner (channel-last, NC, short NCL): bn_column_path.cpp,
//                          along rows across channels
//   each walk, per channel (bn_channel.h): load its inputs, sum dy and
//   dy * (x - mean), finish (grad_weight, grad_bias, dx coefficients), write dx;
//   element loads and stores: element_io.h (conversions: half.h); threads:
//   bn_walk.h's ParallelFor on thread_pool.h; scratch memory: bn_walk.h.
//   Last, FixNonFiniteChannels (below) redoes channels with an infinite or NaN
//   weight, mean or invstd in the formulas' own order.
//
// Determinism: tile boundaries depend on the shape only, and every sum is
// combined in a fixed order, so results are bitwise identical for any thread
// count and run to run. This costs nothing measurable, so there is no
// non-deterministic mode.
//
// Stores: dx goes around the cache (non-temporal) once x + dy + dx no longer
// fits it (dx >= kStreamMinBytes, row runs >= kStreamMinRun). A masked
// grad_input that must come back zero-filled is zeroed run by run in the
// sweep that reads x and dy for grad_weight / grad_bias (Plan::zero_dx).
// Nothing per call grows with C except the column path's partial sums when
// rows come in several chunks (Scratch, freed after a huge call).
//
// float16 / bfloat16 are converted in registers; float32 / float16 /
// bfloat16 compute in float32 with double combines; float64 computes in
// double. No fast-math: NaN and Inf propagate.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "bn_backward.h"
#include "bn_channel.h"
#include "bn_walk.h"
#include "element_io.h"
#include "num_threads.h"

namespace bn_grad {
namespace bwd {
namespace {

constexpr int64_t kStreamMinBytes = 4 << 20; // dx at least this big (x + dy + dx >= 12 MB, no
                                             // longer cache-resident): non-temporal stores...
constexpr int64_t kStreamMinRun = 2048;      // ...on row-path runs of at least this many bytes
                                             // (short runs leave partial lines: far slower)

template <DType D>
int Dispatch(const BnBackwardArgs &a) {
  const int64_t total = a.outer * a.channels * a.inner;
  Plan plan;
  plan.need_dx = a.mask[kDx];
  plan.need_sums = a.mask[kDw] || a.mask[kDb] || (a.training && a.mask[kDx]);
  plan.nthreads = WalkThreads(total, a.inner);
  const bool row_path = a.inner >= kRowMinInner;
  plan.zero_dx = !plan.need_dx && plan.need_sums && a.zero_grad_input;  // zeros written in the sums sweep
  plan.stream = kVec<D> && (plan.need_dx || plan.zero_dx) &&
                static_cast<int64_t>(total * ElemSize(D)) >= kStreamMinBytes &&
                (!row_path || static_cast<int64_t>(a.inner * ElemSize(D)) >= kStreamMinRun);
  if (a.outer == 0 || a.inner == 0) {  // empty: the sums are 0, no dx to write
    ChanIn ins[kChanChunk];
    for (int64_t c0 = 0; c0 < a.channels; c0 += kChanChunk) {
      const int64_t c1 = std::min(a.channels, c0 + kChanChunk);
      ChannelInputs(a, c0, c1, ins);
      for (int64_t c = c0; c < c1; ++c) FinishChannel<ComputeType<D>>(a, c, ins[c - c0], 0.0, 0.0, 0.0);
    }
    return 0;
  }
  thread_local Scratch scratch;  // reused by this thread's next call
  if (row_path) {
    RunRowPath<D>(a, plan, &scratch);
  } else {
    RunColumnPath<D>(a, plan, &scratch);
  }
  scratch.Trim();
  return 0;
}

// The walks compute grad_weight as (sum of dy * (x - mean)) * invstd and fold
// weight and invstd into the dx coefficients: the same numbers for finite
// statistics, but not the same NaN / Inf where a channel's weight, mean or
// invstd is not finite (Inf - Inf = NaN where the formula gives +-Inf, +-Inf
// where it gives NaN). Such channels (never seen in healthy training) are
// recomputed here in double, in the order of docs/operator.md (section 1):
// xhat = (x - mean) * invstd first, then the sums, then
//   training:  grad_input = weight * invstd / n * (n * dy - sum_dy - xhat * sum_dy_xhat)
//   inference: grad_input = dy * invstd * weight
// and grad_weight = sum_dy_xhat. grad_bias (sum of dy) does not depend on them.
void FixNonFiniteChannels(const BnBackwardArgs &a) {
  if (!a.mask[kDx] && !a.mask[kDw]) return;
  const int64_t C = a.channels, outer = a.outer, inner = a.inner;
  const double n = static_cast<double>(outer) * static_cast<double>(inner);
  if (n <= 0) return;  // FinishChannel wrote grad_weight = 0, the sum over nothing
  for (int64_t c = 0; c < C; ++c) {
    ChanIn in;
    ChannelInputs(a, c, c + 1, &in);
    if (std::isfinite(in.w) && std::isfinite(in.mean) && std::isfinite(in.invstd)) continue;
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0, p = (o * C + c) * inner; i < inner; ++i, ++p) {
        const double dy = LoadAny(a.grad_out.data, a.grad_out.dtype, p);
        sum_dy += dy;
        sum_dy_xhat += dy * ((LoadAny(a.input.data, a.input.dtype, p) - in.mean) * in.invstd);
      }
    }
    if (a.mask[kDw]) StoreAny(a.grad_weight.data, a.grad_weight.dtype, c, sum_dy_xhat);
    if (!a.mask[kDx]) continue;
    const double k = in.w * in.invstd / n;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0, p = (o * C + c) * inner; i < inner; ++i, ++p) {
        const double dy = LoadAny(a.grad_out.data, a.grad_out.dtype, p);
        const double xhat = (LoadAny(a.input.data, a.input.dtype, p) - in.mean) * in.invstd;
        StoreAny(a.grad_input.data, a.grad_input.dtype, p,
                 a.training ? k * (n * dy - sum_dy - xhat * sum_dy_xhat) : dy * in.invstd * in.w);
      }
    }
  }
}

int DispatchDtype(const BnBackwardArgs &a) {
  switch (a.grad_out.dtype) {
    case DType::kFloat16: return Dispatch<DType::kFloat16>(a);
    case DType::kBFloat16: return Dispatch<DType::kBFloat16>(a);
    case DType::kFloat32: return Dispatch<DType::kFloat32>(a);
    case DType::kFloat64: return Dispatch<DType::kFloat64>(a);
    default: return 1;
  }
}

}  // namespace
}  // namespace bwd

int BnBackward(const BnBackwardArgs &a) {
  if (a.channels <= 0) return 0;
  if (a.outer < 0 || a.inner < 0) return 1;
  const CallThreads threads(a, a.grad_out.dtype);
  const int rc = bwd::DispatchDtype(a);
  if (rc == 0) bwd::FixNonFiniteChannels(a);
  return rc;
}

}  // namespace bn_grad
