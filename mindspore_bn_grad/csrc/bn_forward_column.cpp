// BatchNormForward, column path: channel-last tensors, and channel-first
// ones whose channels have runs shorter than kRowMinInner (bn_forward_walk.h).
//
// The tensor is [outer, L = C * inner] rows; SIMD runs along a row (across
// columns). Tiles are (row chunk, column block): blocks of kColBlock columns,
// or kWideBlock for a tensor of kWideMinBytes and more (whole rows up to that width: one
// contiguous run per tile). A tile's per-column moments come from one pass over
// it, sums of the deviations from a shift (the mean of its first kShiftRows
// rows) and of their squares, float lanes flushed to double every kColFlushRows
// rows, into the Scratch; a second pass, from L2, where a shift was far from
// its column's mean (TileMoments). A channel's moments combine its partials around the channel's
// mean (FinishGroup), channels in groups on the walk's threads. Then every
// tile is normalized with per-column coefficients, the tiles backwards (those
// read last are still cached). Tile boundaries and the combine order depend
// on the shape only, so results are bitwise identical for any thread count.
//
// Fused walk: when a column block of every row fits kFusedBytes and a column
// is a channel (channel-last or (N, C) with few rows), each column block is
// summed, finished and normalized in one visit, from L2.
#include <algorithm>
#include <cstdint>

#include "bn_forward_walk.h"
#include "column_tiles.h"

namespace bn_grad {
namespace fwd {
namespace {

using namespace column;  // the tile geometry (column_tiles.h)
constexpr int64_t kFusedBytes = 256 << 10;    // a column block of every row at most this big: fused
constexpr int64_t kFinishGroup = 64;          // channels per task of the channels' finish
constexpr int64_t kMinParallelFinish = 8192;  // partial moments to combine, below: one thread
constexpr int64_t kShiftRows = 32;            // a tile's first rows, whose mean shifts its sums

template <DType D>
struct FwdColPath {
  using T = ComputeType<D>;
  const BnForwardArgs &a;
  FwdPlan plan;
  int64_t C, inner, M, L, bw, nblocks, rows_per_chunk, nchunks;
  Moments *part = nullptr;                                  // [nchunks][L] (training)
  T *c_mean = nullptr, *c_scale = nullptr, *c_bias = nullptr;  // [L], 32-byte aligned

  FwdColPath(const BnForwardArgs &args, const FwdPlan &p)
      : a(args), plan(p), C(args.channels), inner(args.inner), M(args.outer), L(args.channels * args.inner) {
    if (inner == 1 && M * std::min<int64_t>(L, kColBlock) * static_cast<int64_t>(ElemSize(D)) <= kFusedBytes) {
      Tile(kColBlock, std::max<int64_t>(1, M));  // every row in one (L2-sized) tile: see Fused
      nchunks = 1;
      return;
    }
    // Chunked walk. A tensor of kWideMinBytes and more gets tiles as wide as kWideBlock, so that
    // up to that many columns a tile is whole rows, one contiguous run the prefetchers follow
    // and stream stores can write (Flat); a smaller one keeps kColBlock, whose taller tiles
    // spend less per row on the per-tile sums.
    const int64_t width = M * L * static_cast<int64_t>(ElemSize(D)) >= kWideMinBytes ? kWideBlock : kColBlock;
    Tile(width, std::max<int64_t>(1, kColTileElems / std::min<int64_t>(L, width)));
    const int64_t max_chunks = std::max<int64_t>(1, kColMaxPartials / L);
    nchunks = std::max<int64_t>(1, (M + rows_per_chunk - 1) / rows_per_chunk);
    if (nchunks > max_chunks) {  // taller chunks, and as many as that leaves (none empty)
      rows_per_chunk = (M + max_chunks - 1) / max_chunks;
      nchunks = (M + rows_per_chunk - 1) / rows_per_chunk;
    }
  }

  void Tile(int64_t width, int64_t rows) {
    bw = width;
    nblocks = (L + bw - 1) / bw;
    rows_per_chunk = rows;
  }

  // One chunk of rows and one column per channel: a tile holds whole channels,
  // so it finishes and normalizes them itself, from L2 (Fused).
  bool fused() const { return nchunks == 1 && inner == 1 && bw == kColBlock; }  // (Fused walks kColBlock tiles)

  void Bind(Scratch *scratch) {
    // doubles per T array: L + kPeriodicWrap coefficients, and the slack of a 32-byte alignment
    const int64_t tn = (static_cast<int64_t>(sizeof(T)) * (L + kPeriodicWrap) + 7) / 8 + 4;
    const int64_t nparts = a.training ? nchunks * L : 0;
    double *s = scratch->Doubles(static_cast<size_t>(3 * nparts + 3 * tn + 8));
    part = reinterpret_cast<Moments *>(s);
    double *t0 = s + 3 * nparts;
    auto arr = [&](int k) {
      const uintptr_t u = reinterpret_cast<uintptr_t>(t0 + k * tn);
      return reinterpret_cast<T *>((u + 31) & ~uintptr_t(31));
    };
    c_mean = arr(0);
    c_scale = arr(1);
    c_bias = arr(2);
  }

  // Per-column moments of rows [r0, r1), columns [j0, j0 + w), into out[0 .. w): the first
  // kShiftRows rows give each column a shift kc near its mean, then one pass over every row sums
  // d = x - kc and d^2. The shifted sums lose precision only when kc is far from the column's
  // mean (m2 small against the sum of d^2): such a tile (an outlier among its first rows, a
  // constant column) takes a second pass over its rows, from L2, around the mean of the first.
  // Each step depends on the tile's own values only, so the bits do not depend on the threads.
  __attribute__((noinline)) void TileMoments(int64_t r0, int64_t r1, int64_t j0, int64_t w, Moments *out) const {
    const void *const x = a.input.data;
    alignas(32) T f1[kWideBlock], f2[kWideBlock], kc[kWideBlock];
    double s1[kWideBlock], s2[kWideBlock];
    const double rows = static_cast<double>(r1 - r0);
    const double inv_rows = 1.0 / rows;
    {  // the shift: mean of the first rows (float lanes)
      const int64_t re = std::min(r1, r0 + kShiftRows);
      for (int64_t j = 0; j < w; ++j) f1[j] = 0;
      for (int64_t r = r0; r < re; ++r) {
        const int64_t off = r * L + j0;
        int64_t j = 0;
#ifdef BN_GRAD_HAVE_AVX2
        if constexpr (kVec<D>) {
          for (; j + 8 <= w; j += 8) {
            _mm256_store_ps(f1 + j, _mm256_add_ps(_mm256_load_ps(f1 + j), VLd<D>(x, off + j)));
          }
        }
#endif
        for (; j < w; ++j) f1[j] += Ld<D>(x, off + j);
      }
      const T inv = static_cast<T>(1.0 / static_cast<double>(re - r0));
      for (int64_t j = 0; j < w; ++j) kc[j] = f1[j] * inv;
    }
    for (int pass = 0; pass < 2; ++pass) {
      ShiftedSums(r0, r1, j0, w, kc, f1, f2, s1, s2);
      bool close = true;  // every column's shift within one standard deviation of its mean
      for (int64_t j = 0; j < w; ++j) close &= s1[j] * s1[j] * inv_rows * 2.0 <= s2[j];
      if (close || pass == 1) break;
      for (int64_t j = 0; j < w; ++j) kc[j] = static_cast<T>(static_cast<double>(kc[j]) + s1[j] * inv_rows);
    }
    for (int64_t j = 0; j < w; ++j) {  // FromShifted, with one division per tile
      out[j].n = rows;
      out[j].mean = static_cast<double>(kc[j]) + s1[j] * inv_rows;
      out[j].m2 = std::max(0.0, s2[j] - s1[j] * s1[j] * inv_rows);
    }
  }

  // Sums of d = x - kc and d^2 over rows [r0, r1), columns [j0, j0 + w): float lanes f1, f2,
  // flushed into the doubles s1, s2 every kColFlushRows rows.
  void ShiftedSums(int64_t r0, int64_t r1, int64_t j0, int64_t w, const T *kc, T *f1, T *f2, double *s1,
                   double *s2) const {
    const void *const x = a.input.data;
    for (int64_t j = 0; j < w; ++j) { s1[j] = 0.0; s2[j] = 0.0; }
    for (int64_t rb = r0; rb < r1; rb += kColFlushRows) {
      const int64_t re = std::min(r1, rb + kColFlushRows);
      for (int64_t j = 0; j < w; ++j) { f1[j] = 0; f2[j] = 0; }
      for (int64_t r = rb; r < re; ++r) {
        const int64_t off = r * L + j0;
        int64_t j = 0;
#ifdef BN_GRAD_HAVE_AVX2
        if constexpr (kVec<D>) {
          for (; j + 8 <= w; j += 8) {
            const __m256 d = _mm256_sub_ps(VLd<D>(x, off + j), _mm256_load_ps(kc + j));
            _mm256_store_ps(f1 + j, _mm256_add_ps(_mm256_load_ps(f1 + j), d));
            _mm256_store_ps(f2 + j, _mm256_fmadd_ps(d, d, _mm256_load_ps(f2 + j)));
          }
        }
#endif
        for (; j < w; ++j) {
          const T d = Ld<D>(x, off + j) - kc[j];
          f1[j] += d;
          f2[j] = std::fma(d, d, f2[j]);
        }
      }
      for (int64_t j = 0; j < w; ++j) { s1[j] += f1[j]; s2[j] += f2[j]; }
    }
  }

  // y of rows [r0, r1), columns [j0, j0 + w), from the per-column coefficients.
  // (mean, scale, bias: indexed from column j0.)
  template <bool kStream>
  __attribute__((noinline)) void NormRows(int64_t r0, int64_t r1, int64_t j0, int64_t w, const T *mean,
                                          const T *scale, const T *bias) const {
    const void *const x = a.input.data;
    void *const y = a.output.data;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t off = r * L + j0;
      int64_t j = 0;
#ifdef BN_GRAD_HAVE_AVX2
      if constexpr (kVec<D>) {
        for (; j + 8 <= w; j += 8) {
          const __m256 xm = _mm256_sub_ps(VLd<D>(x, off + j), _mm256_loadu_ps(mean + j));
          VSt<D, kStream>(y, off + j, _mm256_fmadd_ps(xm, _mm256_loadu_ps(scale + j), _mm256_loadu_ps(bias + j)));
        }
      }
#endif
      for (; j < w; ++j) St<D>(y, off + j, std::fma(Ld<D>(x, off + j) - mean[j], scale[j], bias[j]));
    }
  }

  // y of whole rows [r0, r1) as one run of (r1 - r0) * L elements, stored around the cache: one
  // head to the stream store's alignment, whatever the rows' (a head per row would share the
  // first and last line of every row between normal and stream stores). Element p is column
  // p mod L; the coefficient arrays hold L + kPeriodicWrap entries, the first kPeriodicWrap again at the end,
  // so 8 lanes that cross a row's end read the next row's first columns. The same formula as
  // NormRows, so the same bits.
  __attribute__((noinline)) void NormFlatStream(int64_t r0, int64_t r1, const T *mean, const T *scale,
                                                const T *bias) const {
    const void *const x = a.input.data;
    void *const y = a.output.data;
    ForPeriodicStream<D>(
        y, r0 * L, r1 * L, L,
        [&](int64_t p, int64_t j) { St<D>(y, p, std::fma(Ld<D>(x, p) - mean[j], scale[j], bias[j])); },
        [&](int64_t p, int64_t j) {
#ifdef BN_GRAD_HAVE_AVX2
          if constexpr (kVec<D>) {  // (never called otherwise)
            const __m256 xm = _mm256_sub_ps(VLd<D>(x, p), _mm256_loadu_ps(mean + j));
            VSt<D, true>(y, p, _mm256_fmadd_ps(xm, _mm256_loadu_ps(scale + j), _mm256_loadu_ps(bias + j)));
          }
#else
          (void)p;
          (void)j;
#endif
        });
  }


  // Non-temporal stores: as one run per tile where tiles are whole rows (NormFlatStream), else
  // only where every row of every tile is aligned.
  bool Flat() const { return nblocks == 1 && L >= kPeriodicWrap; }
  bool StreamOk() const {
    if (!plan.stream || !kVec<D>) return false;
    return Flat() || ((reinterpret_cast<uintptr_t>(a.output.data) % kStreamAlign<D>) == 0 &&
                      (L * static_cast<int64_t>(ElemSize(D))) % kStreamAlign<D> == 0 &&
                      (bw * static_cast<int64_t>(ElemSize(D))) % 32 == 0);
  }

  // y of rows [r0, r1), columns [j0, j0 + w) (coefficients indexed from column j0), by the store
  // kind StreamOk chose.
  void Norm(bool stream, int64_t r0, int64_t r1, int64_t j0, int64_t w, const T *mean, const T *scale,
            const T *bias) const {
    if (stream && Flat()) NormFlatStream(r0, r1, mean, scale, bias);
    else if (stream) NormRows<true>(r0, r1, j0, w, mean, scale, bias);
    else NormRows<false>(r0, r1, j0, w, mean, scale, bias);
  }

  template <class F>
  void ParallelTiles(bool backwards, F &&tile_fn) const {
    ParallelFor(nchunks * nblocks, plan.nthreads, backwards, [&](int64_t q) {
      const int64_t k = q / nblocks, b = q % nblocks;
      const int64_t j0 = b * bw, w = std::min(L, j0 + bw) - j0;
      const int64_t r0 = k * rows_per_chunk, r1 = std::min(M, r0 + rows_per_chunk);
      if (r0 < r1) tile_fn(r0, r1, j0, w, k);
    });
  }

  // Column block b, every row: moments, the channels' finish and y in one visit.
  void Fused(int64_t b, bool stream) const {
    const int64_t j0 = b * kColBlock, w = std::min(L, j0 + kColBlock) - j0;
    Moments m[kColBlock];
    alignas(32) T mean[kColBlock + kPeriodicWrap], scale[kColBlock + kPeriodicWrap], bias[kColBlock + kPeriodicWrap];
    if (a.training) TileMoments(0, M, j0, w, m);
    for (int64_t j = 0; j < w; ++j) {
      const NormCoef<T> k = Cast<T>(FinishChannel(a, j0 + j, m[j]));
      mean[j] = k.mean;
      scale[j] = k.scale;
      bias[j] = k.bias;
    }
    if (Flat()) RepeatHead(L, mean, scale, bias);
    Norm(stream, 0, M, j0, w, mean, scale, bias);
  }

  // Channels [c0, c1): their partial moments (columns c * inner + i of every chunk) combined
  // around the channel's mean: n-weighted means first, then m2 = sum of (m2 + n * (mean_k -
  // mean)^2), so no division per partial and no cancellation. The partials are visited chunk
  // by chunk across the group (independent sums, each in one fixed order: the same bits for
  // any thread count), then the channels finish.
  void FinishGroup(int64_t c0, int64_t c1) const {
    double n[kFinishGroup] = {}, s[kFinishGroup] = {}, m2[kFinishGroup] = {}, mean[kFinishGroup] = {};
    const int64_t g = c1 - c0;
    if (a.training) {
      for (int64_t k = 0; k < nchunks; ++k) {
        const Moments *pk = part + k * L + c0 * inner;
        for (int64_t c = 0; c < g; ++c) {
          for (int64_t i = 0; i < inner; ++i) {
            const Moments &q = pk[c * inner + i];
            n[c] += q.n;
            s[c] += q.n * q.mean;
          }
        }
      }
      for (int64_t c = 0; c < g; ++c) mean[c] = n[c] > 0.0 ? s[c] / n[c] : 0.0;
      for (int64_t k = 0; k < nchunks; ++k) {
        const Moments *pk = part + k * L + c0 * inner;
        for (int64_t c = 0; c < g; ++c) {
          for (int64_t i = 0; i < inner; ++i) {
            const Moments &q = pk[c * inner + i];
            const double d = q.mean - mean[c];
            m2[c] += q.m2 + q.n * d * d;
          }
        }
      }
    }
    for (int64_t c = 0; c < g; ++c) {
      Moments m;
      m.n = n[c];
      m.mean = mean[c];
      m.m2 = m2[c];
      const NormCoef<T> coef = Cast<T>(FinishChannel(a, c0 + c, m));
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t j = (c0 + c) * inner + i;
        c_mean[j] = coef.mean;
        c_scale[j] = coef.scale;
        c_bias[j] = coef.bias;
      }
    }
  }

  void Run(Scratch *scratch) {
    if (fused()) {
      const bool stream = StreamOk();
      ParallelFor(nblocks, plan.nthreads, false, [&](int64_t b) {
        Fused(b, stream);
        if (stream) StreamFence();
      });
      return;
    }
    Bind(scratch);
    if (a.training) {
      ParallelTiles(false, [&](int64_t r0, int64_t r1, int64_t j0, int64_t w, int64_t k) {
        TileMoments(r0, r1, j0, w, part + k * L + j0);
      });
    }
    // The channels' finish, in groups of kFinishGroup channels on the walk's threads.
    const int64_t groups = (C + kFinishGroup - 1) / kFinishGroup;
    const int finish_threads = (a.training ? nchunks : 1) * L < kMinParallelFinish ? 1 : plan.nthreads;
    ParallelFor(groups, finish_threads, false, [&](int64_t g) {
      FinishGroup(g * kFinishGroup, std::min(C, (g + 1) * kFinishGroup));
    });
    if (Flat()) RepeatHead(L, c_mean, c_scale, c_bias);
    const bool stream = StreamOk();
    ParallelTiles(true, [&](int64_t r0, int64_t r1, int64_t j0, int64_t w, int64_t) {
      Norm(stream, r0, r1, j0, w, c_mean + j0, c_scale + j0, c_bias + j0);
      if (stream) StreamFence();
    });
  }
};

}  // namespace

BN_GRAD_DEFINE_FWD_WALK(RunFwdColumnPath, FwdColPath);

}  // namespace fwd
}  // namespace bn_grad
