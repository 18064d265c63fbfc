// BatchNormForward, row path: channel-first tensors whose channels have
// contiguous runs of at least kRowMinInner elements (bn_forward_walk.h).
//
// A channel's elements, numbered p = o * inner + i, are cut into fixed tiles
// of kTileElems. A tile's moments come from one pass over it, the sums of
// the deviations from a shift (the mean of its first kShiftElems elements)
// and of their squares (a second pass, from L1/L2, where the shift was far
// from the mean: TileBlock); a channel's moments
// combine its tiles' in tile order. The channel is then finished and
// normalized, the tiles backwards (the ones read last are still cached), so
// a channel of up to L2 size is read from memory once.
//
// Small neighbouring channels are processed in blocks, reading each row's
// run of the block's channels at once (long contiguous runs). Threads take
// blocks when there are enough (>= kBlocksPerThread per thread), else split the tiles of a
// group of channels between them (partial moments in the Scratch). Either
// way a channel's arithmetic is the same, so results do not depend on the
// thread count.
#include <algorithm>
#include <cstdint>
#include <numeric>

#include "bn_forward_walk.h"

namespace bn_grad {
namespace fwd {
namespace {

constexpr int64_t kTileElems = 16384;      // elements per tile (per channel)
constexpr int64_t kShiftElems = 512;       // a tile's first elements, whose mean shifts its sums
constexpr int64_t kBlocksPerThread = 4;    // threads over channel blocks above this
constexpr int64_t kBlockBytes = 256 << 10; // input bytes of a channel block (half an L2)
constexpr int64_t kMaxBlock = 64;          // channels per block
constexpr int64_t kMaxGroup = 64;          // split mode: channels per group (<= kMaxBlock)
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
    ForTileRuns(n, C, inner, kTileElems, c, t, f);
  }

  // Prefetches elements [off, off + len) of the input into L2 (past the end: harmless).
  void Prefetch(int64_t off, int64_t len) const {
#ifdef BN_GRAD_HAVE_AVX2
    const char *p = static_cast<const char *>(a.input.data) + off * static_cast<int64_t>(ElemSize(D));
    for (int64_t b = 0, e = len * static_cast<int64_t>(ElemSize(D)); b < e; b += 64) _mm_prefetch(p + b, _MM_HINT_T1);
#else
    (void)off;
    (void)len;
#endif
  }

  // Prefetches elements [off, off + len) of the output for writing (past the end: harmless): a
  // block row's run of y is a new store stream each row, which the hardware prefetcher would
  // only pick up after a few misses.
  void PrefetchOut(int64_t off, int64_t len) const {
    const char *p = static_cast<const char *>(a.output.data) + off * static_cast<int64_t>(ElemSize(D));
    for (int64_t b = 0, e = len * static_cast<int64_t>(ElemSize(D)); b < e; b += 64) __builtin_prefetch(p + b, 1, 2);
  }

  // Moments of tile t of channels [c0, c0 + cb) into out[0 .. cb): the block's
  // runs of a row side by side (one contiguous run per row when whole, which
  // the prefetcher follows), the same arithmetic per channel for any cb. The
  // mean of a channel's first kShiftElems elements of the tile shifts its sums
  // (d = x - k and d^2, one pass); a channel whose shift lands more than one
  // standard deviation from its mean (outliers among those elements, a
  // constant channel) takes a second pass over the tile, from cache, around
  // the first pass's mean. Each step depends on the channel's values in the
  // tile only.
  void TileBlock(int64_t c0, int64_t cb, int64_t t, Moments *out) const {
    const int64_t len = std::min(n, (t + 1) * kTileElems) - t * kTileElems;
    double s[kMaxBlock] = {}, s1[kMaxBlock], s2[kMaxBlock];
    T k[kMaxBlock];
    const int64_t row = C * inner;
    int64_t head = 0;
    ForRuns(c0, t, [&](int64_t off, int64_t l) {
      const int64_t u = std::min(l, kShiftElems - head);
      if (u <= 0) return;
      for (int64_t j = 0; j < cb; ++j) s[j] += RunSum<D>(a.input.data, off + j * inner, u);
      head += u;
    });
    for (int64_t j = 0; j < cb; ++j) k[j] = static_cast<T>(s[j] / static_cast<double>(head));
    const double inv_len = 1.0 / static_cast<double>(len);
    for (int64_t j = 0; j < cb; ++j) { s1[j] = 0.0; s2[j] = 0.0; }
    ForRuns(c0, t, [&](int64_t off, int64_t l) {
      if (l == inner) Prefetch(off + row, cb * l);  // the next row's runs: a new stream each row
      for (int64_t j = 0; j < cb; ++j) RunDevSums<D>(a.input.data, off + j * inner, l, k[j], &s1[j], &s2[j]);
    });
    // A channel whose shift is over one standard deviation from its mean: again around the mean found.
    // Decided per channel (a block's channels follow the thread count).
    bool far[kMaxBlock], any = false;
    for (int64_t j = 0; j < cb; ++j) {
      far[j] = !(s1[j] * s1[j] * inv_len * 2.0 <= s2[j]);
      any |= far[j];
      if (far[j]) {
        k[j] = static_cast<T>(static_cast<double>(k[j]) + s1[j] * inv_len);
        s1[j] = 0.0;
        s2[j] = 0.0;
      }
    }
    if (any) {
      ForRuns(c0, t, [&](int64_t off, int64_t l) {
        for (int64_t j = 0; j < cb; ++j) {
          if (far[j]) RunDevSums<D>(a.input.data, off + j * inner, l, k[j], &s1[j], &s2[j]);
        }
      });
    }
    for (int64_t j = 0; j < cb; ++j) out[j] = FromShifted(static_cast<double>(len), static_cast<double>(k[j]), s1[j], s2[j]);
  }

  void NormTileBlock(int64_t c0, int64_t cb, int64_t t, const NormCoef<T> *k) const {
    const bool stream_rows = plan.stream && cb * inner * static_cast<int64_t>(ElemSize(D)) >= kStreamMinRun;
    ForRuns(c0, t, [&](int64_t off, int64_t l) {
      if (l == inner && cb > 1) {  // the block's runs of this row, side by side: one stream
        if (stream_rows) {
          NormBlockRow<D, true>(a.input.data, a.output.data, off, cb * inner, inner, k);
        } else {
          PrefetchOut(off + C * inner, cb * inner);  // the next row's
          NormBlockRow<D, false>(a.input.data, a.output.data, off, cb * inner, inner, k);
        }
        return;
      }
      for (int64_t j = 0; j < cb; ++j) {
        if (stream) NormRun<D, true>(a.input.data, a.output.data, off + j * inner, l, k[j]);
        else NormRun<D, false>(a.input.data, a.output.data, off + j * inner, l, k[j]);
      }
    });
  }

  // Channels [c0, c0 + cb), start to end, on this thread: each tile's moments,
  // combined in tile order, the channels finished, then normalized, the tiles
  // backwards (the block's data, at most kBlockBytes, is still cached).
  void Block(int64_t c0, int64_t cb) const {
    Moments m[kMaxBlock], tm[kMaxBlock];
    NormCoef<T> k[kMaxBlock];
    if (a.training) {
      for (int64_t t = 0; t < ntiles; ++t) {
        TileBlock(c0, cb, t, tm);
        for (int64_t j = 0; j < cb; ++j) Combine(&m[j], tm[j]);
      }
    }
    for (int64_t j = 0; j < cb; ++j) k[j] = Cast<T>(FinishChannel(a, c0 + j, m[j]));
    for (int64_t t = ntiles - 1; t >= 0; --t) NormTileBlock(c0, cb, t, k);
  }

  void Run(Scratch *scratch) const {
    const int nthreads = plan.nthreads;
    const int64_t chan_bytes = std::max<int64_t>(1, n * static_cast<int64_t>(ElemSize(D)));
    int64_t cb = std::max<int64_t>(1, std::min<int64_t>(
        {C / (kBlocksPerThread * std::max(1, nthreads)), kBlockBytes / chan_bytes, kMaxBlock}));
    // A block row of whole cache lines (when a row of the tensor is): a multiple of
    // 64 / gcd(run bytes, 64) channels, so no line is written by two blocks.
    const int64_t run_bytes = inner * static_cast<int64_t>(ElemSize(D));
    const int64_t lines = 64 / std::gcd<int64_t>(run_bytes, 64);
    if (cb > lines && (C * run_bytes) % 64 == 0) cb -= cb % lines;
    const int64_t nblocks = (C + cb - 1) / cb;
    if (nthreads <= 1 || nblocks >= kBlocksPerThread * nthreads) {
      ParallelFor(nblocks, nthreads, false, [&](int64_t b) {
        Block(b * cb, std::min(C, (b + 1) * cb) - b * cb);
        if (plan.stream) StreamFence();
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
        ParallelFor(total, nthreads, false, [&](int64_t q) { TileBlock(c0 + q / ntiles, 1, q % ntiles, &part[q]); });
      }
      for (int64_t j = 0; j < g; ++j) {
        Moments m;
        if (a.training) {
          for (int64_t t = 0; t < ntiles; ++t) Combine(&m, part[j * ntiles + t]);
        }
        coef[j] = Cast<T>(FinishChannel(a, c0 + j, m));
      }
      ParallelFor(total, nthreads, true, [&](int64_t q) {
        NormTileBlock(c0 + q / ntiles, 1, q % ntiles, &coef[q / ntiles]);
        if (plan.stream) StreamFence();
      });
    }
  }
};

}  // namespace

BN_GRAD_DEFINE_FWD_WALK(RunFwdRowPath, FwdRowPath);

}  // namespace fwd
}  // namespace bn_grad
