// Compute of the BatchNormBackward CPU kernel (see bn_backward.h).
//
// Memory-bound: the floor is reading x and dy once and writing dx once.
//
// Two paths, by the length of a channel's contiguous run (`inner`):
//  * Row path (inner >= kRowMinInner, channel-first): a channel's elements,
//    numbered p = o * inner + i, are cut into fixed tiles of kTileElems.
//    Each tile's sums are accumulated in float32 SIMD lanes and reduced to
//    double; a channel's sums add its tiles' doubles in tile order. Training
//    then writes dx tile by tile while the channel's x and dy are still in
//    cache (one sweep from memory per channel).
//    Small channels are processed in blocks of neighbours (long contiguous
//    runs per row). Threads take whole blocks when there are enough
//    (>= kBlocksPerThread per thread), else split the tiles of a group of
//    channels between them.
//  * Column path (inner < kRowMinInner; channel-last, NC): the tensor is
//    [outer, L = C * inner] rows; SIMD runs along the row (across channels),
//    tiles are (row chunk, column block) and per-column sums are combined in
//    double, in chunk order, then per channel.
//
// Determinism: tile boundaries depend on the shape only, and every sum is
// combined in a fixed order, so results are bitwise identical for any thread
// count and run to run. This costs nothing measurable, so there is no
// non-deterministic mode.
//
// Stores: dx goes around the cache (non-temporal) once x + dy + dx no longer
// fits it (dx >= kStreamMinBytes, row runs >= kStreamMinRun). A masked
// grad_input that must come back zero-filled is zeroed run by run in the
// sweep that reads x and dy for grad_weight / grad_bias (zero_grad_input).
// Per-channel inputs are loaded per block of channels where a walk needs them
// (ChannelInputs): nothing per call grows with C except the column path's
// partial sums when rows come in several chunks, freed after a huge call.
// When one chunk holds every row and a column is a channel (channel-last, or
// (N, C) with few rows, e.g. a huge C), the column path is fused: a tile of
// channels is summed, finished and written in one visit.
//
// float16 / bfloat16 are converted in registers (half.h); float32 / float16 /
// bfloat16 compute in float32 with double combines; float64 computes in
// double. No fast-math: NaN and Inf propagate.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "bn_backward.h"
#include "bn_spec.gen.h"
#include "half.h"
#include "thread_pool.h"

namespace bn_grad {
namespace {

// Output-mask bits (mask_bit in op_def/batch_norm_backward.yaml).
constexpr int kDx = spec::batch_norm_backward::kMaskBitGradInput;
constexpr int kDw = spec::batch_norm_backward::kMaskBitGradWeight;
constexpr int kDb = spec::batch_norm_backward::kMaskBitGradBias;

constexpr int64_t kTileElems = 16384;        // row path: elements per tile (per channel)
constexpr int64_t kRowMinInner = 32;         // shorter runs take the column path
constexpr int64_t kColBlock = 256;           // column path: columns per tile (multiple of 8)
constexpr int64_t kColTileElems = 32768;     // column path: target elements per tile
constexpr int64_t kColFlushRows = 256;       // column path: float rows before a double flush
constexpr int64_t kColMaxPartials = 1 << 21; // column path: bound on chunk * L partial slots
constexpr int64_t kBlocksPerThread = 4;      // row path: threads over channel blocks above this
constexpr int64_t kBlockBytes = 2 << 20;     // row path: x+dy bytes of a channel block (L2/L3 for dx)
constexpr int64_t kMaxBlock = 128;            // row path: channels per block
constexpr int64_t kGroupBytes = 4 << 20;     // row path, split mode: x+dy bytes per group
constexpr int64_t kMaxGroup = 64;            // row path, split mode: channels per group
constexpr int64_t kMinParallelElems = 1 << 15;  // below: one thread
constexpr int64_t kStreamMinBytes = 4 << 20; // dx at least this big (x + dy + dx >= 12 MB, no
                                             // longer cache-resident): non-temporal stores...
constexpr int64_t kStreamMinRun = 2048;      // ...on row-path runs of at least this many bytes
                                             // (short runs leave partial lines: far slower)

std::atomic<int> g_num_threads{UsableCpus()};

// ---------------------------------------------------------------- element I/O

template <DType D>
using Compute = std::conditional_t<D == DType::kFloat64, double, float>;

template <DType D>
inline Compute<D> Ld(const void *p, int64_t i) {
  if constexpr (D == DType::kFloat16) return HalfToFloat(static_cast<const uint16_t *>(p)[i]);
  else if constexpr (D == DType::kBFloat16) return Bf16ToFloat(static_cast<const uint16_t *>(p)[i]);
  else if constexpr (D == DType::kFloat32) return static_cast<const float *>(p)[i];
  else return static_cast<const double *>(p)[i];
}

template <DType D>
inline void St(void *p, int64_t i, Compute<D> v) {
  if constexpr (D == DType::kFloat16) static_cast<uint16_t *>(p)[i] = FloatToHalf(v);
  else if constexpr (D == DType::kBFloat16) static_cast<uint16_t *>(p)[i] = FloatToBf16(v);
  else if constexpr (D == DType::kFloat32) static_cast<float *>(p)[i] = v;
  else static_cast<double *>(p)[i] = v;
}

__attribute__((always_inline)) inline double LoadAny(const void *p, DType d, int64_t i) {
  switch (d) {
    case DType::kFloat16: return Ld<DType::kFloat16>(p, i);
    case DType::kBFloat16: return Ld<DType::kBFloat16>(p, i);
    case DType::kFloat32: return Ld<DType::kFloat32>(p, i);
    case DType::kFloat64: return Ld<DType::kFloat64>(p, i);
    default: return 0.0;
  }
}

__attribute__((always_inline)) inline void StoreAny(void *p, DType d, int64_t i, double v) {
  switch (d) {
    case DType::kFloat16: St<DType::kFloat16>(p, i, static_cast<float>(v)); break;
    case DType::kBFloat16: St<DType::kBFloat16>(p, i, static_cast<float>(v)); break;
    case DType::kFloat32: St<DType::kFloat32>(p, i, static_cast<float>(v)); break;
    case DType::kFloat64: St<DType::kFloat64>(p, i, v); break;
    default: break;
  }
}

inline size_t ElemBytes(DType d) {
  return d == DType::kFloat64 ? 8 : d == DType::kFloat32 ? 4 : 2;
}

#ifdef BN_GRAD_HAVE_AVX2
template <DType D> constexpr bool kVec = D != DType::kFloat64;

template <DType D>
inline __m256 VLd(const void *p, int64_t i) {
  if constexpr (D == DType::kFloat16) return LoadHalf8(static_cast<const uint16_t *>(p) + i);
  else if constexpr (D == DType::kBFloat16) return LoadBf16x8(static_cast<const uint16_t *>(p) + i);
  else return _mm256_loadu_ps(static_cast<const float *>(p) + i);
}

template <DType D, bool kStream>
inline void VSt(void *p, int64_t i, __m256 v) {
  if constexpr (D == DType::kFloat16) {
    uint16_t *q = static_cast<uint16_t *>(p) + i;
    if constexpr (kStream) StreamHalf8(q, v); else StoreHalf8(q, v);
  } else if constexpr (D == DType::kBFloat16) {
    uint16_t *q = static_cast<uint16_t *>(p) + i;
    if constexpr (kStream) StreamBf16x8(q, v); else StoreBf16x8(q, v);
  } else {
    float *q = static_cast<float *>(p) + i;
    if constexpr (kStream) _mm256_stream_ps(q, v); else _mm256_storeu_ps(q, v);
  }
}

// Sum of 8 float lanes in double, in a fixed order.
inline double HSum(__m256 v) {
  __m256d d = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)),
                            _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(d), _mm256_extractf128_pd(d, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}
#else
template <DType D> constexpr bool kVec = false;
#endif

// Orders a thread's non-temporal stores before it reports its work done.
inline void StreamFence() {
#ifdef BN_GRAD_HAVE_AVX2
  _mm_sfence();
#endif
}

// Alignment a non-temporal store needs (bytes).
template <DType D> constexpr uintptr_t kStreamAlign = D == DType::kFloat32 ? 32 : 16;

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
  if (parts == 1) chunk(0); else ThreadPool::Global().Run(parts, nthreads, chunk);
}

// ------------------------------------------------------------ per channel math

struct ChanIn {  // per-channel inputs, in double
  double mean, invstd, w;
};

// f(c - c0, value in double) for c in [c0, c1): one dtype switch per tensor
// and range, not per value (per-channel work showed up on tensors with many
// small channels). The values are LoadAny's.
template <class F>
void ForEachChannelValue(const ConstTensor &t, int64_t c0, int64_t c1, double dflt, F &&f) {
  auto each = [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    for (int64_t c = c0; c < c1; ++c) f(c - c0, static_cast<double>(Ld<D>(t.data, c)));
  };
  if (t.data == nullptr) {
    for (int64_t c = c0; c < c1; ++c) f(c - c0, dflt);
    return;
  }
  switch (t.dtype) {
    case DType::kFloat16: each(std::integral_constant<DType, DType::kFloat16>()); break;
    case DType::kBFloat16: each(std::integral_constant<DType, DType::kBFloat16>()); break;
    case DType::kFloat32: each(std::integral_constant<DType, DType::kFloat32>()); break;
    case DType::kFloat64: each(std::integral_constant<DType, DType::kFloat64>()); break;
    default: for (int64_t c = c0; c < c1; ++c) f(c - c0, dflt); break;
  }
}

// Per-channel inputs of channels [c0, c1), into out[0 .. c1 - c0): weight;
// saved mean / invstd in training (required then), else running mean and
// 1 / sqrt(running_var + eps). An absent optional input takes the prototype's
// default_value (spec::batch_norm_backward::kAbsent*). Loaded per block of
// channels where they are used, so no per-call array grows with C.
void ChannelInputs(const BnBackwardArgs &a, int64_t c0, int64_t c1, ChanIn *out) {
  namespace bnb = spec::batch_norm_backward;
  ForEachChannelValue(a.weight, c0, c1, bnb::kAbsentWeight, [&](int64_t j, double v) { out[j].w = v; });
  if (a.training) {
    ForEachChannelValue(a.save_mean, c0, c1, 0.0, [&](int64_t j, double v) { out[j].mean = v; });
    ForEachChannelValue(a.save_invstd, c0, c1, 1.0, [&](int64_t j, double v) { out[j].invstd = v; });
  } else {
    ForEachChannelValue(a.running_mean, c0, c1, bnb::kAbsentRunningMean, [&](int64_t j, double v) { out[j].mean = v; });
    ForEachChannelValue(a.running_var, c0, c1, bnb::kAbsentRunningVar, [&](int64_t j, double v) {
      out[j].invstd = 1.0 / std::sqrt(v + a.eps);
    });
  }
}

// Channels handled per ChannelInputs call where a loop visits every channel.
constexpr int64_t kChanChunk = 256;

template <class T>
struct DxCoef {  // dx = dy * scale - (x - mean) * ks - mdys
  T mean, scale, ks, mdys;
};

// Writes grad_weight / grad_bias of channel c from its sums and returns the
// coefficients of dx.
template <class T>
__attribute__((always_inline)) inline DxCoef<T> FinishChannel(const BnBackwardArgs &a, int64_t c, const ChanIn &in, double sum_dy,
                               double sum_dy_xmu, double n) {
  if (a.mask[kDw]) StoreAny(a.grad_weight.data, a.grad_weight.dtype, c, sum_dy_xmu * in.invstd);
  if (a.mask[kDb]) StoreAny(a.grad_bias.data, a.grad_bias.dtype, c, sum_dy);
  const double scale = in.w * in.invstd;
  double ks = 0.0, mdys = 0.0;
  if (a.training && n > 0) {
    ks = sum_dy_xmu * in.invstd * in.invstd / n * scale;
    mdys = sum_dy / n * scale;
  }
  return DxCoef<T>{static_cast<T>(in.mean), static_cast<T>(scale), static_cast<T>(ks),
                   static_cast<T>(mdys)};
}

template <class T>
inline T DxScalar(T dy, T x, const DxCoef<T> &k) {
  return std::fma(-(x - k.mean), k.ks, std::fma(dy, k.scale, -k.mdys));
}

// ------------------------------------------------------------------- row path

template <DType D>
struct RowSums {
#ifdef BN_GRAD_HAVE_AVX2
  __m256 dy0 = _mm256_setzero_ps(), dy1 = _mm256_setzero_ps();
  __m256 dx0 = _mm256_setzero_ps(), dx1 = _mm256_setzero_ps();
#endif
  double s_dy = 0.0, s_dyx = 0.0;  // tails, and the total after Finish()

  inline void Add(const void *dy, const void *x, int64_t off, int64_t len, Compute<D> mean) {
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
      const Compute<D> d = Ld<D>(dy, off + i), xm = Ld<D>(x, off + i) - mean;
      s_dy += d;
      s_dyx += static_cast<double>(d * xm);
    }
  }

  inline void Finish() {
#ifdef BN_GRAD_HAVE_AVX2
    if constexpr (kVec<D>) {
      s_dy += HSum(_mm256_add_ps(dy0, dy1));
      s_dyx += HSum(_mm256_add_ps(dx0, dx1));
    }
#endif
  }
};

template <DType D, bool kStream>
inline void RowDx(const void *dy, const void *x, void *dx, int64_t off, int64_t len,
                  const DxCoef<Compute<D>> &k, bool training) {
  using T = Compute<D>;
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

// Zeros elements [off, off + len) of dx; non-temporal where kStream.
template <DType D, bool kStream>
inline void ZeroRun(void *dx, int64_t off, int64_t len) {
  const int64_t es = static_cast<int64_t>(ElemBytes(D));
  char *p = static_cast<char *>(dx) + off * es;
  int64_t bytes = len * es;
#ifdef BN_GRAD_HAVE_AVX2
  if constexpr (kStream) {
    const int64_t head = std::min<int64_t>(bytes, (32 - (reinterpret_cast<uintptr_t>(p) & 31)) & 31);
    std::memset(p, 0, static_cast<size_t>(head));
    p += head;
    bytes -= head;
    const __m256i z = _mm256_setzero_si256();
    for (; bytes >= 32; bytes -= 32, p += 32) _mm256_stream_si256(reinterpret_cast<__m256i *>(p), z);
  }
#endif
  std::memset(p, 0, static_cast<size_t>(bytes));
}

template <DType D>
inline void ZeroRun(void *dx, int64_t off, int64_t len, bool stream) {
  if (stream) ZeroRun<D, true>(dx, off, len);
  else ZeroRun<D, false>(dx, off, len);
}

template <DType D>
struct RowPath {
  using T = Compute<D>;
  const BnBackwardArgs &a;
  int64_t C, inner, n, ntiles;
  bool need_sums, need_dx, stream, zero_dx;

  RowPath(const BnBackwardArgs &args, bool sums, bool dx, bool strm)
      : a(args), C(args.channels), inner(args.inner), n(args.outer * args.inner),
        ntiles((n + kTileElems - 1) / kTileElems), need_sums(sums), need_dx(dx), stream(strm),
        zero_dx(!dx && args.zero_grad_input && sums) {}

  void Zero(int64_t off, int64_t len) const { ZeroRun<D>(a.grad_input.data, off, len, stream); }

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

  void Run(int nthreads, std::vector<double> *scratch) const {
    const int64_t chan_bytes = std::max<int64_t>(1, 2 * n * static_cast<int64_t>(ElemBytes(a.grad_out.dtype)));
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
    scratch->resize(static_cast<size_t>(2 * group * ntiles));
    double *part = scratch->data();
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

// ---------------------------------------------------------------- column path

template <DType D>
struct ColPath {
  using T = Compute<D>;
  const BnBackwardArgs &a;
  int64_t C, inner, M, L, nblocks, rows_per_chunk, nchunks;
  bool need_sums, need_dx, stream, zero_dx;
  // scratch views (chunked walk only)
  double *p_dy = nullptr, *p_dyx = nullptr;  // [nchunks][L]
  T *c_mean = nullptr, *c_scale = nullptr, *c_ks = nullptr, *c_mdys = nullptr;  // [L]

  ColPath(const BnBackwardArgs &args, bool sums, bool dx, bool strm)
      : a(args), C(args.channels), inner(args.inner), M(args.outer), L(args.channels * args.inner),
        need_sums(sums), need_dx(dx), stream(strm), zero_dx(!dx && args.zero_grad_input && sums) {
    nblocks = (L + kColBlock - 1) / kColBlock;
    rows_per_chunk = std::max<int64_t>(1, kColTileElems / std::min<int64_t>(L, kColBlock));
    const int64_t max_chunks = std::max<int64_t>(1, kColMaxPartials / L);
    nchunks = std::max<int64_t>(1, (M + rows_per_chunk - 1) / rows_per_chunk);
    if (nchunks > max_chunks) {
      nchunks = max_chunks;
      rows_per_chunk = (M + nchunks - 1) / nchunks;
    }
  }

  // One chunk of rows and one column per channel (channel-last, or (N, C)):
  // a tile then holds whole channels, so it finishes them itself (Fused).
  bool fused() const { return nchunks == 1 && inner == 1; }

  void Bind(std::vector<double> *scratch) {
    const int64_t tn = (sizeof(T) * L + 7) / 8 + 4;  // doubles per T array (+ alignment slack)
    scratch->resize(static_cast<size_t>(2 * nchunks * L + 4 * tn + 8));
    double *s = scratch->data();
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
  void SumRows(int64_t r0, int64_t r1, int64_t j0, int64_t w, const T *mean, double *o_dy,
               double *o_dyx) const {
    for (int64_t j = 0; j < w; ++j) { o_dy[j] = 0.0; o_dyx[j] = 0.0; }
    alignas(32) T f_dy[kColBlock], f_dyx[kColBlock];
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
  void DxRows(int64_t r0, int64_t r1, int64_t j0, int64_t w, const T *mean, const T *scale,
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

  // Fused walk: tile b = columns (= channels) [j0, j1), every row: sums, the
  // channels' finish and dx in one visit, from arrays on the stack. Same
  // arithmetic per column as the chunked walk with one chunk.
  void Fused(int64_t b, bool stream_dx) const {
    const int64_t j0 = b * kColBlock, j1 = std::min(L, j0 + kColBlock), w = j1 - j0;
    ChanIn ins[kColBlock];
    ChannelInputs(a, j0, j1, ins);
    alignas(32) T mean[kColBlock], scale[kColBlock], ks[kColBlock], mdys[kColBlock];
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
      if (stream_dx) DxRows<true>(0, M, j0, w, mean, scale, ks, mdys);
      else DxRows<false>(0, M, j0, w, mean, scale, ks, mdys);
    }
  }

  // Non-temporal dx stores need every row of every tile aligned.
  bool StreamDx() const {
    return stream && kVec<D> &&
           (reinterpret_cast<uintptr_t>(a.grad_input.data) % kStreamAlign<D>) == 0 &&
           (L * ElemBytes(D)) % kStreamAlign<D> == 0;
  }

  void Run(int nthreads, std::vector<double> *scratch) {
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
        const int64_t j0 = b * kColBlock, w = std::min(L, j0 + kColBlock) - j0;
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
    for (int64_t c0 = 0; c0 < C; c0 += kChanChunk) {
      const int64_t c1 = std::min(C, c0 + kChanChunk);
      ChannelInputs(a, c0, c1, ins);
      for (int64_t c = c0; c < c1; ++c) {
        double s_dy = 0.0, s_dyx = 0.0;
        if (need_sums) {
          for (int64_t i = 0; i < inner; ++i) {
            const int64_t j = c * inner + i;
            double cd = 0.0, cx = 0.0;
            for (int64_t k = 0; k < nchunks; ++k) { cd += p_dy[k * L + j]; cx += p_dyx[k * L + j]; }
            s_dy += cd;
            s_dyx += cx;
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
      parallel_tiles([&](int64_t r0, int64_t r1, int64_t j0, int64_t w, int64_t) {
        if (stream_dx) DxRows<true>(r0, r1, j0, w, c_mean + j0, c_scale + j0, c_ks + j0, c_mdys + j0);
        else DxRows<false>(r0, r1, j0, w, c_mean + j0, c_scale + j0, c_ks + j0, c_mdys + j0);
      }, true);
    }
  }
};

// ------------------------------------------------------------------- dispatch

// Per-call scratch (column path partial sums) is kept for the next call up to
// this size; a larger one is freed when the call ends.
constexpr size_t kKeepScratchBytes = size_t{16} << 20;

template <DType D>
int Dispatch(const BnBackwardArgs &a) {
  const int64_t total = a.outer * a.channels * a.inner;
  const bool need_dx = a.mask[kDx];
  const bool need_sums = a.mask[kDw] || a.mask[kDb] || (a.training && a.mask[kDx]);
  int nthreads = g_num_threads.load(std::memory_order_relaxed);
  if (total < kMinParallelElems) nthreads = 1;
  const bool row_path = a.inner >= kRowMinInner;
  const bool zero_dx = !need_dx && need_sums && a.zero_grad_input;  // zeros written in the sums sweep
  const bool stream = kVec<D> && (need_dx || zero_dx) &&
                      static_cast<int64_t>(total * ElemBytes(D)) >= kStreamMinBytes &&
                      (!row_path || static_cast<int64_t>(a.inner * ElemBytes(D)) >= kStreamMinRun);
  if (a.outer == 0 || a.inner == 0) {  // empty: the sums are 0, no dx to write
    ChanIn ins[kChanChunk];
    for (int64_t c0 = 0; c0 < a.channels; c0 += kChanChunk) {
      const int64_t c1 = std::min(a.channels, c0 + kChanChunk);
      ChannelInputs(a, c0, c1, ins);
      for (int64_t c = c0; c < c1; ++c) FinishChannel<Compute<D>>(a, c, ins[c - c0], 0.0, 0.0, 0.0);
    }
    return 0;
  }
  thread_local std::vector<double> scratch;  // reused by the next call (no allocation per call)
  if (row_path) {
    RowPath<D>(a, need_sums, need_dx, stream).Run(nthreads, &scratch);
  } else {
    ColPath<D>(a, need_sums, need_dx, stream).Run(nthreads, &scratch);
  }
  if (scratch.capacity() * sizeof(double) > kKeepScratchBytes) std::vector<double>().swap(scratch);
  return 0;
}

// Training folds the weight into every dx coefficient, so an infinite or
// NaN weight would give Inf - Inf = NaN where the formula gives +-Inf. Such
// channels (never seen in healthy training) are recomputed here in double,
// in the order of docs/operator.md (section 1): weight * invstd / n * (n * dy - sum_dy - xhat * sum_dy_xhat).
void FixNonFiniteWeightChannels(const BnBackwardArgs &a) {
  if (!a.training || !a.mask[kDx] || a.weight.data == nullptr) return;
  const int64_t C = a.channels, outer = a.outer, inner = a.inner;
  const double n = static_cast<double>(outer) * static_cast<double>(inner);
  if (n <= 0) return;
  for (int64_t c = 0; c < C; ++c) {
    if (std::isfinite(LoadAny(a.weight.data, a.weight.dtype, c))) continue;
    ChanIn in;
    ChannelInputs(a, c, c + 1, &in);
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0, p = (o * C + c) * inner; i < inner; ++i, ++p) {
        const double dy = LoadAny(a.grad_out.data, a.grad_out.dtype, p);
        sum_dy += dy;
        sum_dy_xhat += dy * ((LoadAny(a.input.data, a.input.dtype, p) - in.mean) * in.invstd);
      }
    }
    const double k = in.w * in.invstd / n;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0, p = (o * C + c) * inner; i < inner; ++i, ++p) {
        const double dy = LoadAny(a.grad_out.data, a.grad_out.dtype, p);
        const double xhat = (LoadAny(a.input.data, a.input.dtype, p) - in.mean) * in.invstd;
        StoreAny(a.grad_input.data, a.grad_input.dtype, p, k * (n * dy - sum_dy - xhat * sum_dy_xhat));
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

int BnBackward(const BnBackwardArgs &a) {
  if (a.channels <= 0) return 0;
  if (a.outer < 0 || a.inner < 0) return 1;
  const int rc = DispatchDtype(a);
  if (rc == 0) FixNonFiniteWeightChannels(a);
  return rc;
}

int UsableCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n >= 1) return n;
  }
  return 1;
}

bool SetNumThreads(int n) {
  n = std::max(1, std::min(n, MaxThreads()));
  if (ThreadPool::Global().Reserve(n - 1) < n - 1) return false;
  g_num_threads.store(n);
  return true;
}

int GetNumThreads() { return g_num_threads.load(); }

}  // namespace bn_grad
