// What the kernels that compute in double (the SyncBatchNorm steps,
// bn_sync_cpu.cpp, and the double backward, bn_double_backward_cpu.cpp)
// share: their chunking of the outer axis, their parallel loop, and the
// per-channel loads. Element I/O: element_io.h (Half, BF16, ToDouble,
// FromDouble, LoadAny, StoreAny).
#ifndef MS_BN_GRAD_SCALAR_KERNEL_H_
#define MS_BN_GRAD_SCALAR_KERNEL_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "element_io.h"
#include "num_threads.h"
#include "tensor.h"
#include "thread_pool.h"

namespace bn_grad {

// Elements per task (a chunk of rows); determinism: chunks depend on the shape only.
constexpr int64_t kChunkElems = 1 << 15;

inline int64_t RowsPerChunk(int64_t row_elems) {
  return std::max<int64_t>(1, kChunkElems / std::max<int64_t>(1, row_elems));
}

// fn(t) for t in [0, ntasks) on the shared pool; one thread when `work`
// (elements) is too small to be worth waking it. Each task writes only its own outputs.
template <typename Fn>
void ParallelTasks(int64_t ntasks, int64_t work, Fn fn) {
  int threads = std::max(1, GetNumThreads());
  if (work < 4 * kChunkElems) threads = 1;
  threads = static_cast<int>(std::min<int64_t>(threads, ntasks));
  if (threads <= 1) {
    for (int64_t t = 0; t < ntasks; ++t) fn(t);
    return;
  }
  ThreadPool::Global().Run(ntasks, threads, fn);
}

// How the scalar kernels split [outer, C, inner] into tasks: the outer axis
// in chunks of RowsPerChunk(C * inner) rows (boundaries depend on the shape
// only). Channel-first (inner > 1, or one channel): task t = (chunk k,
// channel c), t = k * C + c, whose runs of `inner` elements ForRuns visits.
// Channel-last: task t = chunk t, whose rows of C channels ForRows visits.
struct OuterChunks {
  explicit OuterChunks(const Geometry &g)
      : outer(g.outer), C(g.channels), inner(g.inner), rows(RowsPerChunk(g.channels * g.inner)),
        nchunks((g.outer + rows - 1) / rows) {}
  bool by_channel() const { return inner > 1 || C == 1; }
  int64_t tasks() const { return by_channel() ? nchunks * C : nchunks; }
  int64_t work() const { return outer * C * inner; }  // elements
  // run(c, offset) for each run of task t (channel-first).
  template <class F>
  void ForRuns(int64_t t, F &&run) const {
    const int64_t k = t / C, c = t % C;
    for (int64_t o = k * rows, end = std::min(outer, o + rows); o < end; ++o) run(c, (o * C + c) * inner);
  }
  // row(offset) for each row of task t (channel-last).
  template <class F>
  void ForRows(int64_t t, F &&row) const {
    for (int64_t o = t * rows, end = std::min(outer, o + rows); o < end; ++o) row(o * C);
  }

  int64_t outer, C, inner, rows, nchunks;
};

// A (C,) tensor as doubles; `dflt` everywhere when it is absent.
inline std::vector<double> LoadChannel(const ConstTensor &t, int64_t C, double dflt) {
  std::vector<double> v(C, dflt);
  if (t.data != nullptr) for (int64_t c = 0; c < C; ++c) v[c] = LoadAny(t.data, t.dtype, c);
  return v;
}

}  // namespace bn_grad

#endif  // MS_BN_GRAD_SCALAR_KERNEL_H_
