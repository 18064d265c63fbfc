// BatchNormBackward, row path: channel-first tensors whose channels have
// contiguous runs of at least kRowMinInner elements (bn_walk.h).
//
// A channel's elements, numbered p = o * inner + i, are cut into fixed tiles
// of kTileElems. Each tile's sums (statistics) are accumulated in float32
// SIMD lanes (RowSums) and reduced to double; a channel's sums add its tiles'
// doubles in tile order. The channel is then finished (bn_channel.h) and, for
// grad_input, RowDx writes dx tile by tile while the channel's x and dy are
// still in cache (one sweep from memory per channel).
//
// Small channels are processed in blocks of neighbours (long contiguous runs
// per row). Threads take whole blocks when there are enough (>=
// kBlocksPerThread per thread), else split the tiles of a group of channels
// between them (partial sums in the Scratch). Tile boundaries depend on the
// shape only, so results are bitwise identical for any thread count.
#include <algorithm>
#include <cstdint>

#include "bn_backward.h"
#include "bn_channel.h"
#include "bn_walk.h"
#include "element_io.h"

namespace bn_grad {
namespace bwd {
namespace {

constexpr int64_t kTileElems = 16384;        // elements per tile (per channel)
constexpr int64_t kBlocksPerThread = 4;      // threads over channel blocks above this
constexpr int64_t kBlockBytes = 2 << 20;     // x+dy bytes of a channel block (L2/L3 for dx)
constexpr int64_t kMaxBlock = 128;           // channels per block
constexpr int64_t kGroupBytes = 4 << 20;     // split mode: x+dy bytes per group
constexpr int64_t kMaxGroup = 64;            // split mode: channels per group

// ------------------------------------------------------------ statistics, dx

template <DType D>
struct RowSums {
#ifdef BN_GRAD_HAVE_AVX2
  __m256 dy0 = _mm256_setzero_ps(), dy1 = _mm256_setzero_ps();
  __m256 dx0 = _mm256_setzero_ps(), dx1 = _mm256_setzero_ps();
#endif
  double s_dy = 0.0, s_dyx = 0.0;  // tails, and the total after Finish()

  inline void Add(const void *dy, const void *x, int64_t off, int64_t len, ComputeType<D> mean) {
    int64_t i = 0;
#ifdef BN_GRAD_HAVE_AVX2
    if constexpr (kVec<D>) {
      const __m256 m = _mm256_set1_ps(mean);
      for (; i + 16 <= len; i += 16) {
        const __m256 d0 = VLd<D>(dy, off + i), d1 = VLd<D>(dy, off + i + 8);
        const __m256 x0 = VLd<D>(x, off + i), x1 = VLd<D>(x, off + i + 8);
        dy0 = _mm256_add_ps(dy0, d0);
        dy1 = _mm256_add_ps(dy1, d1);
        dx0 = _mm256_fmadd_ps(d0, _mm256_sub_ps(x0, m), dx0);
        dx1 = _mm256_fmadd_ps(d1, _mm256_sub_ps(x1, m), dx1);
      }
      if (i + 8 <= len) {
        const __m256 d0 = VLd<D>(dy, off + i), x0 = VLd<D>(x, off + i);
        dy0 = _mm256_add_ps(dy0, d0);
        dx0 = _mm256_fmadd_ps(d0, _mm256_sub_ps(x0, m), dx0);
        i += 8;
      }
    }
#endif
    for (; i < len; ++i) {
      const ComputeType<D> d = Ld<D>(dy, off + i), xm = Ld<D>(x, off + i) - mean;
      s_dy += d;
      s_dyx += static_cast<double>(d * xm);
    }
  }

  inline void Finish() {
#ifdef BN_GRAD_HAVE_AVX2
    if constexpr (kVec<D>) {
      s_dy += HSum8(_mm256_add_ps(dy0, dy1));
      s_dyx += HSum8(_mm256_add_ps(dx0, dx1));
    }
#endif
  }
};

template <DType D, bool kStream>
inline void RowDx(const void *dy, const void *x, void *dx, int64_t off, int64_t len,
                  const DxCoef<ComputeType<D>> &k, bool training) {
  using T = ComputeType<D>;
  int64_t i = 0;
  if constexpr (kStream && kVec<D>) {  // peel to the alignment of the stream store
    constexpr uintptr_t es = D == DType::kFloat32 ? 4 : 2;
    while (i < len && ((reinterpret_cast<uintptr_t>(dx) + (off + i) * es) & (kStreamAlign<D> - 1))) {
      const T d = Ld<D>(dy, off + i);
      St<D>(dx, off + i, training ? DxScalar<T>(d, Ld<D>(x, off + i), k) : d * k.scale);
      ++i;
    }
  }
#ifdef BN_GRAD_HAVE_AVX2
  if constexpr (kVec<D>) {
    const __m256 m = _mm256_set1_ps(k.mean), sc = _mm256_set1_ps(k.scale);
    const __m256 ks = _mm256_set1_ps(k.ks), md = _mm256_set1_ps(k.mdys);
    if (training) {
      if constexpr (D == DType::kBFloat16) {  // one load, a shift and an and per 16 values
        const uint16_t *qy = static_cast<const uint16_t *>(dy), *qx = static_cast<const uint16_t *>(x);
        uint16_t *qd = static_cast<uint16_t *>(dx);
        for (; i + 16 <= len; i += 16) {
          __m256 d0, d1, x0, x1;
          LoadBf16x16EvenOdd(qy + off + i, &d0, &d1);
          LoadBf16x16EvenOdd(qx + off + i, &x0, &x1);
          const __m256i r = Bf16PackEvenOdd16(
              _mm256_fnmadd_ps(_mm256_sub_ps(x0, m), ks, _mm256_fmsub_ps(d0, sc, md)),
              _mm256_fnmadd_ps(_mm256_sub_ps(x1, m), ks, _mm256_fmsub_ps(d1, sc, md)));
          __m128i *q = reinterpret_cast<__m128i *>(qd + off + i);
          if constexpr (kStream) {
            _mm_stream_si128(q, _mm256_castsi256_si128(r));
            _mm_stream_si128(q + 1, _mm256_extracti128_si256(r, 1));
          } else {
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(q), r);
          }
        }
      }
      for (; i + 8 <= len; i += 8) {
        const __m256 d = VLd<D>(dy, off + i), xm = _mm256_sub_ps(VLd<D>(x, off + i), m);
        VSt<D, kStream>(dx, off + i, _mm256_fnmadd_ps(xm, ks, _mm256_fmsub_ps(d, sc, md)));
      }
    } else {
      for (; i + 8 <= len; i += 8) {
        VSt<D, kStream>(dx, off + i, _mm256_mul_ps(VLd<D>(dy, off + i), sc));
      }
    }
  }
#endif
  if (training) {
    for (; i < len; ++i) St<D>(dx, off + i, DxScalar<T>(Ld<D>(dy, off + i), Ld<D>(x, off + i), k));
  } else {
    for (; i < len; ++i) St<D>(dx, off + i, Ld<D>(dy, off + i) * k.scale);
  }
}


// ------------------------------------------------------------------ the walk

template <DType D>
struct RowPath {
  using T = ComputeType<D>;
  const BnBackwardArgs &a;
  int64_t C, inner, n, ntiles;
  bool need_sums, need_dx, stream, zero_dx;

  RowPath(const BnBackwardArgs &args, const Plan &plan)
      : a(args), C(args.channels), inner(args.inner), n(args.outer * args.inner),
        ntiles((n + kTileElems - 1) / kTileElems), need_sums(plan.need_sums), need_dx(plan.need_dx),
        stream(plan.stream), zero_dx(plan.zero_dx) {}

  void Zero(int64_t off, int64_t len) const { ZeroRun<D>(a.grad_input.data, off, len, stream); }

  // Calls f(offset, length) for the contiguous runs of tile t of channel c.
  template <class F>
  inline void ForRuns(int64_t c, int64_t t, F &&f) const {
    ForTileRuns(n, C, inner, kTileElems, c, t, f);
  }

  void TileSums(int64_t c, int64_t t, T mean, double *s_dy, double *s_dyx) const {
    RowSums<D> acc;
    ForRuns(c, t, [&](int64_t off, int64_t len) {
      acc.Add(a.grad_out.data, a.input.data, off, len, mean);
      if (zero_dx) Zero(off, len);
    });
    acc.Finish();
    *s_dy = acc.s_dy;
    *s_dyx = acc.s_dyx;
  }

  void TileDx(int64_t c, int64_t t, const DxCoef<T> &k) const {
    ForRuns(c, t, [&](int64_t off, int64_t len) {
      if (stream) RowDx<D, true>(a.grad_out.data, a.input.data, a.grad_input.data, off, len, k, a.training);
      else RowDx<D, false>(a.grad_out.data, a.input.data, a.grad_input.data, off, len, k, a.training);
    });
  }

  // Channels [c0, c1), start to end, on this thread. In memory order: for
  // each tile position, each row, the block's channels side by side (one
  // contiguous run of (c1 - c0) * inner per row). The arithmetic per channel
  // is that of TileSums/TileDx tile by tile, so the result does not depend
  // on the block size or on which thread runs it.
  void Block(int64_t c0, int64_t c1) const {
    const int64_t cb = c1 - c0;
    ChanIn ins[kMaxBlock];
    DxCoef<T> coef[kMaxBlock];
    double s_dy[kMaxBlock], s_dyx[kMaxBlock];
    ChannelInputs(a, c0, c1, ins);
    for (int64_t j = 0; j < cb; ++j) { s_dy[j] = 0.0; s_dyx[j] = 0.0; }
    if (need_sums) {
      RowSums<D> acc[kMaxBlock];
      for (int64_t t = 0; t < ntiles; ++t) {
        for (int64_t j = 0; j < cb; ++j) acc[j] = RowSums<D>();
        ForRuns(c0, t, [&](int64_t off, int64_t len) {
          for (int64_t j = 0; j < cb; ++j) {
            acc[j].Add(a.grad_out.data, a.input.data, off + j * inner, len, static_cast<T>(ins[j].mean));
          }
          if (zero_dx) {  // the block's runs of this row are contiguous when whole
            if (len == inner) Zero(off, cb * inner);
            else for (int64_t j = 0; j < cb; ++j) Zero(off + j * inner, len);
          }
        });
        for (int64_t j = 0; j < cb; ++j) {
          acc[j].Finish();
          s_dy[j] += acc[j].s_dy;
          s_dyx[j] += acc[j].s_dyx;
        }
      }
    }
    for (int64_t j = 0; j < cb; ++j) {
      coef[j] = FinishChannel<T>(a, c0 + j, ins[j], s_dy[j], s_dyx[j], static_cast<double>(n));
    }
    if (need_dx) {  // backwards: the tiles summed last are the ones still in L2
      for (int64_t t = ntiles - 1; t >= 0; --t) {
        ForRuns(c0, t, [&](int64_t off, int64_t len) {
          for (int64_t j = 0; j < cb; ++j) {
            if (stream) RowDx<D, true>(a.grad_out.data, a.input.data, a.grad_input.data, off + j * inner, len, coef[j], a.training);
            else RowDx<D, false>(a.grad_out.data, a.input.data, a.grad_input.data, off + j * inner, len, coef[j], a.training);
          }
        });
      }
    }
  }

  void Run(int nthreads, Scratch *scratch) const {
    const int64_t chan_bytes = std::max<int64_t>(1, 2 * n * static_cast<int64_t>(ElemSize(a.grad_out.dtype)));
    // Blocks as wide as kBlockBytes allows (long contiguous runs per row, which
    // the hardware prefetcher likes), but at least kBlocksPerThread per thread.
    // The block size never changes a channel's arithmetic (see Block).
    const int64_t cb = std::max<int64_t>(
        1, std::min<int64_t>({C / (kBlocksPerThread * std::max(1, nthreads)), kMaxBlock, kBlockBytes / chan_bytes}));
    const int64_t nblocks = (C + cb - 1) / cb;
    // Threads over channel blocks. (Splitting big channels between threads
    // instead, to halve the data in flight, measured slower.)
    if (nthreads <= 1 || nblocks >= kBlocksPerThread * nthreads) {
      ParallelFor(nblocks, nthreads, false, [&](int64_t b) {
        Block(b * cb, std::min(C, (b + 1) * cb));
        if (stream) StreamFence();
      });
      return;
    }
    // Few channels: split the tiles of a group of channels (at most
    // kGroupBytes, so still cached for dx) between threads.
    const int64_t group = std::max<int64_t>(1, std::min<int64_t>({C, kMaxGroup, kGroupBytes / chan_bytes}));
    double *part = scratch->Doubles(static_cast<size_t>(2 * group * ntiles));
    DxCoef<T> coefs_small[kMaxGroup];
    for (int64_t c0 = 0; c0 < C; c0 += group) {
      const int64_t g = std::min(group, C - c0), total = g * ntiles;
      ChanIn ins[kMaxGroup];
      ChannelInputs(a, c0, c0 + g, ins);
      if (need_sums) {
        ParallelFor(total, nthreads, false, [&](int64_t q) {
          const int64_t j = q / ntiles, t = q - j * ntiles;
          TileSums(c0 + j, t, static_cast<T>(ins[j].mean), &part[2 * q], &part[2 * q + 1]);
          if (zero_dx && stream) StreamFence();
        });
      }
      for (int64_t j = 0; j < g; ++j) {
        double s_dy = 0.0, s_dyx = 0.0;
        if (need_sums) {
          for (int64_t t = 0; t < ntiles; ++t) {
            s_dy += part[2 * (j * ntiles + t)];
            s_dyx += part[2 * (j * ntiles + t) + 1];
          }
        }
        coefs_small[j] = FinishChannel<T>(a, c0 + j, ins[j], s_dy, s_dyx, static_cast<double>(n));
      }
      if (need_dx) {
        ParallelFor(total, nthreads, true, [&](int64_t q) {
          const int64_t j = q / ntiles, t = q - j * ntiles;
          TileDx(c0 + j, t, coefs_small[j]);
          if (stream) StreamFence();
        });
      }
    }
  }
};

}  // namespace

BN_GRAD_DEFINE_WALK(RunRowPath, RowPath);

}  // namespace bwd
}  // namespace bn_grad
