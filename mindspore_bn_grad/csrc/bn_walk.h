// BatchNormBackward: what the two walks over the activations share.
//
//   Plan        what a call computes, on how many threads, with which stores
//   Scratch     the per-call scratch memory a walk may need
//   ParallelFor the walks' parallel loop (chunks claimed one by one)
//   RunRowPath / RunColumnPath: the walks (bn_row_path.cpp, bn_column_path.cpp)
//
// bn_backward_cpu.cpp makes the Plan and picks the walk by the length of a
// channel's contiguous run (`inner`); see there for the flow of one call.
#ifndef MS_BN_GRAD_BN_WALK_H_
#define MS_BN_GRAD_BN_WALK_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "bn_backward.h"
#include "num_threads.h"
#include "thread_pool.h"

namespace bn_grad {

// The row walks (forward and backward) cut a channel's n = outer x inner elements of [outer, C, inner]
// data into tiles of `tile` elements; f(offset, length) for the contiguous runs of tile t of channel c.
template <class F>
inline void ForTileRuns(int64_t n, int64_t C, int64_t inner, int64_t tile, int64_t c, int64_t t, F &&f) {
  int64_t p = t * tile;
  const int64_t end = std::min(n, p + tile);
  int64_t o = p / inner, i = p - o * inner;
  while (p < end) {
    const int64_t len = std::min(inner - i, end - p);
    f((o * C + c) * inner + i, len);
    p += len;
    ++o;
    i = 0;
  }
}

namespace bwd {

// Shorter contiguous runs per channel than this take the column path.
constexpr int64_t kRowMinInner = 32;

// The threads of a forward or backward call over [outer, channels, inner]: one below 2^15 elements,
// and, for channel-first runs of 2..kRowMinInner-1 elements (spatial 2x2 .. 5x5: the column path
// over channel-first data), below 2^18, where one thread was faster or as fast; runs of one element
// (channel-last, (N, C)) gain from a second thread sooner (docs/performance.md, "Threads").
inline int WalkThreads(int64_t total, int64_t inner) {
  constexpr int64_t kMinParallelElems = 1 << 15, kMinParallelShortRuns = 1 << 18;
  const bool short_runs = inner > 1 && inner < kRowMinInner;
  return total < (short_runs ? kMinParallelShortRuns : kMinParallelElems) ? 1 : GetNumThreads();
}

struct Plan {
  bool need_sums;  // the per-channel sums (grad_weight, grad_bias, or dx in training)
  bool need_dx;    // grad_input
  bool stream;     // dx (or the zeros of zero_dx) stored around the cache
  bool zero_dx;    // grad_input masked but zero-filled in the sums sweep
  int nthreads;
};

// Scratch memory of a call: the row path's partial sums when threads split a
// group of channels, the column path's partial sums and per-column
// coefficients. One per calling thread, kept for its next call (no
// allocation per call); Trim() after a call frees a buffer that grew past
// kKeepBytes.
class Scratch {
 public:
  static constexpr size_t kKeepBytes = size_t{16} << 20;
  // At least n doubles; invalidates what an earlier call returned.
  double *Doubles(size_t n) {
    buf_.resize(n);
    return buf_.data();
  }
  void Trim() {
    if (buf_.capacity() * sizeof(double) > kKeepBytes) std::vector<double>().swap(buf_);
  }

 private:
  std::vector<double> buf_;
};

// fn(i) for i in [0, n) on up to nthreads threads: the items are cut into
// consecutive chunks that threads claim one by one (a busy or late thread
// does not hold the others up). `backwards` visits the last items first.
// Which thread runs an item never changes what the item computes.
template <class F>
void ParallelFor(int64_t n, int nthreads, bool backwards, F &&fn) {
  if (n <= 0) return;
  const int64_t parts = nthreads <= 1 ? 1 : std::min<int64_t>(n, 16 * static_cast<int64_t>(nthreads));
  auto chunk = [&](int64_t k) {
    if (backwards) k = parts - 1 - k;
    int64_t b, e;
    StaticRange(n, k, parts, &b, &e);
    if (backwards) {
      for (int64_t i = e - 1; i >= b; --i) fn(i);
    } else {
      for (int64_t i = b; i < e; ++i) fn(i);
    }
  };
  CallThreads::NoteParallel(parts == 1 ? 1 : nthreads);
  if (parts == 1) chunk(0); else ThreadPool::Global().Run(parts, nthreads, chunk);
}

// The walks, for D = the activations' dtype (instantiated for the four).
template <DType D>
void RunRowPath(const BnBackwardArgs &a, const Plan &plan, Scratch *scratch);
template <DType D>
void RunColumnPath(const BnBackwardArgs &a, const Plan &plan, Scratch *scratch);

// In a walk's .cpp file, after its struct (constructed from the arguments
// and the Plan, with a Run(nthreads, scratch)): the walk function, and its
// instances for the four dtypes.
#define BN_GRAD_DEFINE_WALK(Walk, Struct)                                                    \
  template <DType D>                                                                         \
  void Walk(const BnBackwardArgs &a, const Plan &plan, Scratch *scratch) {                   \
    Struct<D>(a, plan).Run(plan.nthreads, scratch);                                          \
  }                                                                                          \
  template void Walk<DType::kFloat16>(const BnBackwardArgs &, const Plan &, Scratch *);      \
  template void Walk<DType::kBFloat16>(const BnBackwardArgs &, const Plan &, Scratch *);     \
  template void Walk<DType::kFloat32>(const BnBackwardArgs &, const Plan &, Scratch *);      \
  template void Walk<DType::kFloat64>(const BnBackwardArgs &, const Plan &, Scratch *)

}  // namespace bwd
}  // namespace bn_grad

#endif  // MS_BN_GRAD_BN_WALK_H_
