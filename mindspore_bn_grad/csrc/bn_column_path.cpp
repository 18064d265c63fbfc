// BatchNormBackward, column path: channel-last tensors, and channel-first
// ones whose channels have runs shorter than kRowMinInner (bn_walk.h).
//
// The tensor is [outer, L = C * inner] rows; SIMD runs along a row (across
// channels). Tiles are (row chunk, column block), blocks of kColBlock columns
// or kWideBlock for a tensor of kWideMinBytes and more (whole rows up to that width: one
// contiguous run per tile): SumRows accumulates per-column sums (statistics)
// in float, flushed to double every kColFlushRows rows; per-column sums are
// combined in double, in chunk order (column blocks on the walk's threads),
// then per channel, which is finished (bn_channel.h); DxRows applies
// per-column dx coefficients. Partial sums and coefficients live in the
// Scratch.
//
// Fused walk: when one chunk holds every row and a column is a channel
// (channel-last, or (N, C) with few rows, e.g. a huge C), a tile of channels
// is summed, finished and written in one visit, from arrays on the stack.
// Tile boundaries depend on the shape only, so results are bitwise identical
// for any thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "bn_backward.h"
#include "bn_channel.h"
#include "bn_walk.h"
#include "column_tiles.h"
#include "element_io.h"

namespace bn_grad {
namespace bwd {
namespace {

using namespace column;  // the tile geometry (column_tiles.h)
constexpr int64_t kMinParallelTotals = 32768; // partial sums to add up, below: one thread

// SumRows and DxRows, the two hot loops, stay functions of their own
// (noinline): inlined into the tile loops they ran slower (docs/performance.md).
template <DType D>
struct ColPath {
  using T = ComputeType<D>;
  const BnBackwardArgs &a;
  int64_t C, inner, M, L, bw, nblocks, rows_per_chunk, nchunks;
  bool need_sums, need_dx, stream, zero_dx;
  // scratch views (chunked walk only)
  double *p_dy = nullptr, *p_dyx = nullptr;  // [nchunks][L]
  T *c_mean = nullptr, *c_scale = nullptr, *c_ks = nullptr, *c_mdys = nullptr;  // [L]

  ColPath(const BnBackwardArgs &args, const Plan &plan)
      : a(args), C(args.channels), inner(args.inner), M(args.outer), L(args.channels * args.inner),
        need_sums(plan.need_sums), need_dx(plan.need_dx), stream(plan.stream), zero_dx(plan.zero_dx) {
    // A tensor of kWideMinBytes and more gets tiles as wide as kWideBlock, so that up to that many
    // columns a tile is whole rows, one contiguous run the prefetchers follow (also out of L2 into
    // the other core's, with two threads) and stream stores can write (Flat); a smaller one keeps
    // kColBlock, whose taller tiles spend less per row on the per-tile sums. The fused walk (one chunk) always has kColBlock.
    const bool wide = M * L * static_cast<int64_t>(ElemSize(D)) >= kWideMinBytes &&
                      M * std::min<int64_t>(L, kColBlock) > kColTileElems;
    bw = wide ? kWideBlock : kColBlock;
    nblocks = (L + bw - 1) / bw;
    rows_per_chunk = std::max<int64_t>(1, kColTileElems / std::min<int64_t>(L, bw));
    const int64_t max_chunks = std::max<int64_t>(1, kColMaxPartials / L);
    nchunks = std::max<int64_t>(1, (M + rows_per_chunk - 1) / rows_per_chunk);
    if (nchunks > max_chunks) {  // taller chunks, and as many as that leaves (none empty)
      rows_per_chunk = (M + max_chunks - 1) / max_chunks;
      nchunks = (M + rows_per_chunk - 1) / rows_per_chunk;
    }
  }

  // One chunk of rows and one column per channel (channel-last, or (N, C)):
  // a tile then holds whole channels, so it finishes them itself (Fused).
  bool fused() const { return nchunks == 1 && inner == 1 && bw == kColBlock; }  // (Fused walks kColBlock tiles)

  void Bind(Scratch *scratch) {
    const int64_t tn = (sizeof(T) * (L + kPeriodicWrap) + 7) / 8 + 4;  // doubles per T array (+ alignment slack)
    double *s = scratch->Doubles(static_cast<size_t>(2 * nchunks * L + 4 * tn + 8));
    p_dy = s;
    p_dyx = s + nchunks * L;
    double *t0 = s + 2 * nchunks * L;
    auto arr = [&](int k) {
      uintptr_t u = reinterpret_cast<uintptr_t>(t0 + k * tn);
      return reinterpret_cast<T *>((u + 31) & ~uintptr_t(31));
    };
    c_mean = arr(0); c_scale = arr(1); c_ks = arr(2); c_mdys = arr(3);
  }

  // Per-column sums of rows [r0, r1), columns [j0, j0 + w), into o_dy/o_dyx
  // (doubles; float partials flushed every kColFlushRows rows). mean[j] is
  // column j0 + j's mean, 32-byte aligned. Zero-fills that part of dx when
  // zero_dx.
  __attribute__((noinline)) void SumRows(int64_t r0, int64_t r1, int64_t j0, int64_t w, const T *mean, double *o_dy,
               double *o_dyx) const {
    for (int64_t j = 0; j < w; ++j) { o_dy[j] = 0.0; o_dyx[j] = 0.0; }
    alignas(32) T f_dy[kWideBlock], f_dyx[kWideBlock];
    const void *const gy = a.grad_out.data, *const gx = a.input.data;  // (not reloaded per store)
    for (int64_t rb = r0; rb < r1; rb += kColFlushRows) {
      const int64_t re = std::min(r1, rb + kColFlushRows);
      for (int64_t j = 0; j < w; ++j) { f_dy[j] = 0; f_dyx[j] = 0; }
      for (int64_t r = rb; r < re; ++r) {
        const int64_t off = r * L + j0;
        int64_t j = 0;
#ifdef BN_GRAD_HAVE_AVX2
        if constexpr (kVec<D>) {
          for (; j + 8 <= w; j += 8) {
            const __m256 d = VLd<D>(gy, off + j);
            const __m256 xm = _mm256_sub_ps(VLd<D>(gx, off + j), _mm256_load_ps(mean + j));
            _mm256_store_ps(f_dy + j, _mm256_add_ps(_mm256_load_ps(f_dy + j), d));
            _mm256_store_ps(f_dyx + j, _mm256_fmadd_ps(d, xm, _mm256_load_ps(f_dyx + j)));
          }
        }
#endif
        for (; j < w; ++j) {
          const T d = Ld<D>(gy, off + j);
          f_dy[j] += d;
          f_dyx[j] = std::fma(d, Ld<D>(gx, off + j) - mean[j], f_dyx[j]);
        }
      }
      for (int64_t j = 0; j < w; ++j) { o_dy[j] += f_dy[j]; o_dyx[j] += f_dyx[j]; }
    }
    if (zero_dx) {  // the tile's part of grad_input, while its x and dy are at hand
      if (w == L) ZeroRun<D>(a.grad_input.data, r0 * L, (r1 - r0) * L, stream);
      else for (int64_t r = r0; r < r1; ++r) ZeroRun<D>(a.grad_input.data, r * L + j0, w, stream);
      if (stream) StreamFence();
    }
  }

  // dx of rows [r0, r1), columns [j0, j0 + w), from per-column coefficients
  // (each array indexed from column j0, 32-byte aligned).
  template <bool kStream>
  __attribute__((noinline)) void DxRows(int64_t r0, int64_t r1, int64_t j0, int64_t w, const T *mean, const T *scale,
              const T *ks, const T *mdys) const {
    const bool training = a.training;
    const void *const gy = a.grad_out.data, *const gx = a.input.data;  // (not reloaded per store)
    void *const gi = a.grad_input.data;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t off = r * L + j0;
      int64_t j = 0;
#ifdef BN_GRAD_HAVE_AVX2
      if constexpr (kVec<D>) {
        if (training) {
          for (; j + 8 <= w; j += 8) {
            const __m256 d = VLd<D>(gy, off + j);
            const __m256 xm = _mm256_sub_ps(VLd<D>(gx, off + j), _mm256_load_ps(mean + j));
            const __m256 t = _mm256_fmsub_ps(d, _mm256_load_ps(scale + j), _mm256_load_ps(mdys + j));
            VSt<D, kStream>(gi, off + j, _mm256_fnmadd_ps(xm, _mm256_load_ps(ks + j), t));
          }
        } else {
          for (; j + 8 <= w; j += 8) {
            VSt<D, kStream>(gi, off + j,
                            _mm256_mul_ps(VLd<D>(gy, off + j), _mm256_load_ps(scale + j)));
          }
        }
      }
#endif
      for (; j < w; ++j) {
        const T d = Ld<D>(gy, off + j);
        const DxCoef<T> kc{mean[j], scale[j], ks[j], mdys[j]};
        St<D>(gi, off + j, training ? DxScalar<T>(d, Ld<D>(gx, off + j), kc)
                                                   : d * kc.scale);
      }
    }
  }

  // dx of whole rows [r0, r1) as one run of (r1 - r0) * L elements, stored around the cache: one
  // head to the stream store's alignment, whatever the rows' (a head per row would share the
  // first and last line of every row between normal and stream stores). Element p is column
  // p mod L; the coefficient arrays hold L + kPeriodicWrap entries, the first kPeriodicWrap again at the end,
  // so 8 lanes that cross a row's end read the next row's first columns. The same formula as
  // DxRows, so the same bits.
  __attribute__((noinline)) void DxFlatStream(int64_t r0, int64_t r1, const T *mean, const T *scale, const T *ks,
                                              const T *mdys) const {
    const bool training = a.training;
    const void *const gy = a.grad_out.data, *const gx = a.input.data;
    void *const gi = a.grad_input.data;
    ForPeriodicStream<D>(
        gi, r0 * L, r1 * L, L,
        [&](int64_t p, int64_t j) {
          const T d = Ld<D>(gy, p);
          const DxCoef<T> kc{mean[j], scale[j], ks[j], mdys[j]};
          St<D>(gi, p, training ? DxScalar<T>(d, Ld<D>(gx, p), kc) : d * kc.scale);
        },
        [&](int64_t p, int64_t j) {
#ifdef BN_GRAD_HAVE_AVX2
          if constexpr (kVec<D>) {  // (never called otherwise)
            const __m256 d = VLd<D>(gy, p);
            __m256 v;
            if (training) {
              const __m256 xm = _mm256_sub_ps(VLd<D>(gx, p), _mm256_loadu_ps(mean + j));
              const __m256 t = _mm256_fmsub_ps(d, _mm256_loadu_ps(scale + j), _mm256_loadu_ps(mdys + j));
              v = _mm256_fnmadd_ps(xm, _mm256_loadu_ps(ks + j), t);
            } else {
              v = _mm256_mul_ps(d, _mm256_loadu_ps(scale + j));
            }
            VSt<D, true>(gi, p, v);
          }
#else
          (void)p;
          (void)j;
#endif
        });
  }


  // dx of a tile by the store kind StreamDx chose (coefficients indexed from column j0).
  void Dx(bool stream_dx, int64_t r0, int64_t r1, int64_t j0, int64_t w, const T *mean, const T *scale,
          const T *ks, const T *mdys) const {
    if (stream_dx && Flat()) DxFlatStream(r0, r1, mean, scale, ks, mdys);
    else if (stream_dx) DxRows<true>(r0, r1, j0, w, mean, scale, ks, mdys);
    else DxRows<false>(r0, r1, j0, w, mean, scale, ks, mdys);
  }

  // Fused walk: tile b = columns (= channels) [j0, j1), every row: sums, the
  // channels' finish and dx in one visit, from arrays on the stack. Same
  // arithmetic per column as the chunked walk with one chunk.
  void Fused(int64_t b, bool stream_dx) const {
    const int64_t j0 = b * kColBlock, j1 = std::min(L, j0 + kColBlock), w = j1 - j0;
    ChanIn ins[kColBlock];
    ChannelInputs(a, j0, j1, ins);
    alignas(32) T mean[kColBlock + kPeriodicWrap], scale[kColBlock + kPeriodicWrap], ks[kColBlock + kPeriodicWrap], mdys[kColBlock + kPeriodicWrap];
    double s_dy[kColBlock], s_dyx[kColBlock];
    for (int64_t j = 0; j < w; ++j) mean[j] = static_cast<T>(ins[j].mean);
    if (need_sums) {
      SumRows(0, M, j0, w, mean, s_dy, s_dyx);
    } else {
      for (int64_t j = 0; j < w; ++j) { s_dy[j] = 0.0; s_dyx[j] = 0.0; }
    }
    const double n = static_cast<double>(M);
    for (int64_t j = 0; j < w; ++j) {
      const DxCoef<T> k = FinishChannel<T>(a, j0 + j, ins[j], s_dy[j], s_dyx[j], n);
      scale[j] = k.scale; ks[j] = k.ks; mdys[j] = k.mdys;
    }
    if (need_dx) {
      if (Flat()) RepeatHead(L, mean, scale, ks, mdys);
      Dx(stream_dx, 0, M, j0, w, mean, scale, ks, mdys);
    }
  }

  // Non-temporal dx stores: as one run per tile where tiles are whole rows (DxFlatStream), else
  // only where every row of every tile is aligned.
  bool Flat() const { return nblocks == 1 && L >= kPeriodicWrap; }
  bool StreamDx() const {
    if (!stream || !kVec<D>) return false;
    return Flat() || ((reinterpret_cast<uintptr_t>(a.grad_input.data) % kStreamAlign<D>) == 0 &&
                      (L * ElemSize(D)) % kStreamAlign<D> == 0);
  }

  void Run(int nthreads, Scratch *scratch) {
    const bool stream_dx = need_dx && StreamDx();
    if (fused()) {
      ParallelFor(nblocks, nthreads, false, [&](int64_t b) {
        Fused(b, stream_dx);
        if (stream) StreamFence();
      });
      return;
    }
    Bind(scratch);
    const double n = static_cast<double>(M) * static_cast<double>(inner);
    ChanIn ins[kChanChunk];
    for (int64_t c0 = 0; c0 < C; c0 += kChanChunk) {
      const int64_t c1 = std::min(C, c0 + kChanChunk);
      ChannelInputs(a, c0, c1, ins);
      for (int64_t c = c0; c < c1; ++c) {
        const T m = static_cast<T>(ins[c - c0].mean);
        for (int64_t i = 0; i < inner; ++i) c_mean[c * inner + i] = m;
      }
    }
    const int64_t ntiles = nchunks * nblocks;
    // The sums walk the tiles forwards and dx backwards: when the tensor is
    // larger than the cache, dx starts on the tiles read last (still cached).
    auto parallel_tiles = [&](auto &&tile_fn, bool backwards) {
      ParallelFor(ntiles, nthreads, backwards, [&](int64_t q) {
        const int64_t k = q / nblocks, b = q % nblocks;
        const int64_t j0 = b * bw, w = std::min(L, j0 + bw) - j0;
        const int64_t r0 = k * rows_per_chunk, r1 = std::min(M, r0 + rows_per_chunk);
        tile_fn(r0, r1, j0, w, k);
        if (backwards) StreamFence();
      });
    };
    if (need_sums) {
      parallel_tiles([&](int64_t r0, int64_t r1, int64_t j0, int64_t w, int64_t k) {
        SumRows(r0, r1, j0, w, c_mean + j0, p_dy + k * L + j0, p_dyx + k * L + j0);
      }, false);
    }
    if (need_sums && nchunks > 1) {
      // Column totals into chunk 0's row, chunk by chunk (each column's sum in chunk order),
      // columns in blocks on the walk's threads: contiguous, where a walk down each column
      // strided through every chunk's row.
      const int64_t cblocks = (L + kColBlock - 1) / kColBlock;
      ParallelFor(cblocks, nchunks * L < kMinParallelTotals ? 1 : nthreads, false, [&](int64_t b) {
        const int64_t j0 = b * kColBlock, j1 = std::min(L, j0 + kColBlock);
        for (int64_t k = 1; k < nchunks; ++k) {
          const double *qd = p_dy + k * L, *qx = p_dyx + k * L;
          for (int64_t j = j0; j < j1; ++j) { p_dy[j] += qd[j]; p_dyx[j] += qx[j]; }
        }
      });
    }
    for (int64_t c0 = 0; c0 < C; c0 += kChanChunk) {
      const int64_t c1 = std::min(C, c0 + kChanChunk);
      ChannelInputs(a, c0, c1, ins);
      for (int64_t c = c0; c < c1; ++c) {
        double s_dy = 0.0, s_dyx = 0.0;
        if (need_sums) {
          for (int64_t i = 0; i < inner; ++i) {
            s_dy += p_dy[c * inner + i];
            s_dyx += p_dyx[c * inner + i];
          }
        }
        const DxCoef<T> k = FinishChannel<T>(a, c, ins[c - c0], s_dy, s_dyx, n);
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t j = c * inner + i;
          c_scale[j] = k.scale; c_ks[j] = k.ks; c_mdys[j] = k.mdys;
        }
      }
    }
    if (need_dx) {
      if (Flat()) RepeatHead(L, c_mean, c_scale, c_ks, c_mdys);
      parallel_tiles([&](int64_t r0, int64_t r1, int64_t j0, int64_t w, int64_t) {
        Dx(stream_dx, r0, r1, j0, w, c_mean + j0, c_scale + j0, c_ks + j0, c_mdys + j0);
      }, true);
    }
  }
};

}  // namespace

BN_GRAD_DEFINE_WALK(RunColumnPath, ColPath);

}  // namespace bwd
}  // namespace bn_grad
