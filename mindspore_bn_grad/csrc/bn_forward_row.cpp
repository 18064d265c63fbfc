// BatchNormForward, row path: channel-first tensors whose channels have
// contiguous runs of at least kRowMinInner elements (bn_forward_walk.h).
//
// A channel's elements, numbered p = o * inner + i, are cut into fixed tiles
// of kTileElems. A tile's moments come from two passes over it while it is
// in L1/L2 (its sum, then the deviations from its mean); a channel's moments
// combine its tiles' in tile order. The channel is then finished and
// normalized, the tiles backwards (the ones read last are still cached), so
// a channel of up to L2 size is read from memory once.
//
// Threads take channels (blocks of small neighbouring channels) when there
// are enough (>= kBlocksPerThread per thread), else split the tiles of a
// group of channels between them (partial moments in the Scratch). Either
// way a channel's arithmetic is the same, so results do not depend on the
// thread count.
#include <algorithm>
#include <cstdint>

#include "bn_forward_walk.h"

namespace bn_grad {
namespace fwd {
namespace {

constexpr int64_t kTileElems = 16384;      // elements per tile (per channel)
constexpr int64_t kBlocksPerThread = 4;    // threads over channel blocks above this
constexpr int64_t kBlockBytes = 256 << 10; // input bytes of a channel block (half an L2)
constexpr int64_t kMaxGroup = 64;          // split mode: channels per group
constexpr int64_t kGroupBytes = 4 << 20;   // split mode: input bytes per group (L3)
constexpr int64_t kStreamMinRun = 2048;    // non-temporal stores on runs of at least this many bytes

template <DType D>
struct FwdRowPath {
  using T = ComputeType<D>;
  const BnForwardArgs &a;
  FwdPlan plan;
  int64_t C, inner, n, ntiles;
  bool stream;

  FwdRowPath(const BnForwardArgs &args, const FwdPlan &p)
      : a(args), plan(p), C(args.channels), inner(args.inner), n(args.outer * args.inner),
        ntiles((n + kTileElems - 1) / kTileElems),
        stream(p.stream && args.inner * static_cast<int64_t>(ElemSize(D)) >= kStreamMinRun) {}

  // Calls f(offset, length) for the contiguous runs of tile t of channel c.
  template <class F>
  inline void ForRuns(int64_t c, int64_t t, F &&f) const {
    int64_t p = t * kTileElems;
    const int64_t end = std::min(n, p + kTileElems);
    int64_t o = p / inner, i = p - o * inner;
    while (p < end) {
      const int64_t len = std::min(inner - i, end - p);
      f((o * C + c) * inner + i, len);
      p += len;
      ++o;
      i = 0;
    }
  }

  Moments Tile(int64_t c, int64_t t) const {
    const int64_t len = std::min(n, (t + 1) * kTileElems) - t * kTileElems;
    double s = 0.0;
    ForRuns(c, t, [&](int64_t off, int64_t l) { s += RunSum<D>(a.input.data, off, l); });
    const T k = static_cast<T>(s / static_cast<double>(len));
    double s1 = 0.0, s2 = 0.0;
    ForRuns(c, t, [&](int64_t off, int64_t l) { RunDevSums<D>(a.input.data, off, l, k, &s1, &s2); });
    return FromShifted(static_cast<double>(len), static_cast<double>(k), s1, s2);
  }

  void NormTile(int64_t c, int64_t t, const NormCoef<T> &k) const {
    ForRuns(c, t, [&](int64_t off, int64_t l) {
      if (stream) NormRun<D, true>(a.input.data, a.output.data, off, l, k);
      else NormRun<D, false>(a.input.data, a.output.data, off, l, k);
    });
  }

  // Channel c, start to end, on this thread.
  void Channel(int64_t c) const {
    Moments m;
    if (a.training) {
      for (int64_t t = 0; t < ntiles; ++t) Combine(&m, Tile(c, t));
    }
    const NormCoef<T> k = Cast<T>(FinishChannel(a, c, m));
    for (int64_t t = ntiles - 1; t >= 0; --t) NormTile(c, t, k);
  }

  void Run(Scratch *scratch) const {
    const int nthreads = plan.nthreads;
    const int64_t chan_bytes = std::max<int64_t>(1, n * static_cast<int64_t>(ElemSize(D)));
    const int64_t cb = std::max<int64_t>(
        1, std::min<int64_t>(C / (kBlocksPerThread * std::max(1, nthreads)), kBlockBytes / chan_bytes));
    const int64_t nblocks = (C + cb - 1) / cb;
    if (nthreads <= 1 || nblocks >= kBlocksPerThread * nthreads) {
      ParallelFor(nblocks, nthreads, false, [&](int64_t b) {
        for (int64_t c = b * cb, e = std::min(C, (b + 1) * cb); c < e; ++c) Channel(c);
        if (stream) StreamFence();
      });
      return;
    }
    // Few channels: split the tiles of a group of channels (cached for the
    // normalize pass) between threads.
    const int64_t group = std::max<int64_t>(1, std::min<int64_t>({C, kMaxGroup, kGroupBytes / chan_bytes}));
    Moments *part = a.training ? ScratchMoments(scratch, group * ntiles) : nullptr;
    NormCoef<T> coef[kMaxGroup];
    for (int64_t c0 = 0; c0 < C; c0 += group) {
      const int64_t g = std::min(group, C - c0), total = g * ntiles;
      if (a.training) {
        ParallelFor(total, nthreads, false, [&](int64_t q) { part[q] = Tile(c0 + q / ntiles, q % ntiles); });
      }
      for (int64_t j = 0; j < g; ++j) {
        Moments m;
        if (a.training) {
          for (int64_t t = 0; t < ntiles; ++t) Combine(&m, part[j * ntiles + t]);
        }
        coef[j] = Cast<T>(FinishChannel(a, c0 + j, m));
      }
      ParallelFor(total, nthreads, true, [&](int64_t q) {
        NormTile(c0 + q / ntiles, q % ntiles, coef[q / ntiles]);
        if (stream) StreamFence();
      });
    }
  }
};

}  // namespace

BN_GRAD_DEFINE_FWD_WALK(RunFwdRowPath, FwdRowPath);

}  // namespace fwd
}  // namespace bn_grad
