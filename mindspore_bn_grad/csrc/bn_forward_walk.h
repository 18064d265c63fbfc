// BatchNormForward: what the two walks over the input share
// (bn_forward_row.cpp, bn_forward_column.cpp; bn_forward_cpu.cpp picks one).
//
//   Moments       count, mean and M2 (sum of squared deviations) of a tile,
//                 in double; Combine merges two (Chan et al.), in a fixed order
//   RunSum, RunDevSums, FromShifted: a tile's moments from float32 (double
//                 for float64) SIMD lanes: a shift k near its mean (the mean
//                 of its first elements), then the sums of d = x - k and d^2
//                 (no cancellation of sum(x^2) - n mean^2 while k is within a
//                 standard deviation of the mean; the walks pass over a tile
//                 again, around the first pass's mean, where it is not)
//   NormRun       the normalize pass over one contiguous run
//   NormCoef      what the normalize pass needs per channel: y = (x - mean) * scale + bias
//   FinishChannel from a channel's moments (training) or its running statistics
//                 (inference): writes save_*, running_*_out, returns the NormCoef
//   FwdPlan       threads and stores of a call
//
// Tile boundaries and every combine order depend on the shape only, so the
// results are bitwise identical for any thread count. The thread pool and
// ParallelFor, the scratch memory: bn_walk.h (shared with the backward).
#ifndef MS_BN_GRAD_BN_FORWARD_WALK_H_
#define MS_BN_GRAD_BN_FORWARD_WALK_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "bn_forward.h"
#include "bn_walk.h"
#include "element_io.h"

namespace bn_grad {
namespace fwd {

using bwd::ParallelFor;
using bwd::Scratch;

// Shorter contiguous runs per channel than this take the column path.
constexpr int64_t kRowMinInner = bwd::kRowMinInner;
using bwd::WalkThreads;

struct Moments {
  double n = 0.0, mean = 0.0, m2 = 0.0;
};
static_assert(sizeof(Moments) == 3 * sizeof(double), "Moments live in the Scratch's doubles");

// n Moments in the Scratch (invalidates what it handed out before).
inline Moments *ScratchMoments(Scratch *s, int64_t n) {
  return reinterpret_cast<Moments *>(s->Doubles(static_cast<size_t>(3 * n)));
}

// a := a followed by b (the order is part of the result: callers fix it).
inline void Combine(Moments *a, const Moments &b) {
  if (b.n == 0.0) return;
  if (a->n == 0.0) {
    *a = b;
    return;
  }
  const double n = a->n + b.n, delta = b.mean - a->mean;
  a->mean += delta * (b.n / n);
  a->m2 += b.m2 + delta * delta * (a->n * b.n / n);
  a->n = n;
}

// Moments of `len` values from a shift k and the sums of d = x - k and d^2.
inline Moments FromShifted(double len, double k, double s1, double s2) {
  Moments m;
  if (len <= 0.0) return m;
  m.n = len;
  m.mean = k + s1 / len;
  m.m2 = std::max(0.0, s2 - s1 * s1 / len);  // k within a standard deviation of the mean: no cancellation
  return m;
}

template <class T>
struct NormCoef {  // y = (x - mean) * scale + bias
  T mean, scale, bias;
};

struct FwdPlan {
  int nthreads;
  bool stream;  // output stored around the cache (non-temporal)
};

// Sum of x over [off, off + len) and (second form) of d = x - k and d^2;
// float lanes (double for float64), each call reduced to double.
template <DType D>
inline double RunSum(const void *x, int64_t off, int64_t len) {
  double s = 0.0;
  int64_t i = 0;
#ifdef BN_GRAD_HAVE_AVX2
  if constexpr (kVec<D>) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    for (; i + 16 <= len; i += 16) {
      a0 = _mm256_add_ps(a0, VLd<D>(x, off + i));
      a1 = _mm256_add_ps(a1, VLd<D>(x, off + i + 8));
    }
    if (i + 8 <= len) {
      a0 = _mm256_add_ps(a0, VLd<D>(x, off + i));
      i += 8;
    }
    s = HSum8(_mm256_add_ps(a0, a1));
  }
#endif
  ComputeType<D> t = 0;
  for (; i < len; ++i) t += Ld<D>(x, off + i);
  return s + static_cast<double>(t);
}

template <DType D>
inline void RunDevSums(const void *x, int64_t off, int64_t len, ComputeType<D> k, double *s1, double *s2) {
  int64_t i = 0;
  double r1 = 0.0, r2 = 0.0;
#ifdef BN_GRAD_HAVE_AVX2
  if constexpr (kVec<D>) {
    const __m256 kv = _mm256_set1_ps(k);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    __m256 q0 = _mm256_setzero_ps(), q1 = _mm256_setzero_ps();
    for (; i + 16 <= len; i += 16) {
      const __m256 d0 = _mm256_sub_ps(VLd<D>(x, off + i), kv);
      const __m256 d1 = _mm256_sub_ps(VLd<D>(x, off + i + 8), kv);
      a0 = _mm256_add_ps(a0, d0);
      a1 = _mm256_add_ps(a1, d1);
      q0 = _mm256_fmadd_ps(d0, d0, q0);
      q1 = _mm256_fmadd_ps(d1, d1, q1);
    }
    if (i + 8 <= len) {
      const __m256 d0 = _mm256_sub_ps(VLd<D>(x, off + i), kv);
      a0 = _mm256_add_ps(a0, d0);
      q0 = _mm256_fmadd_ps(d0, d0, q0);
      i += 8;
    }
    r1 = HSum8(_mm256_add_ps(a0, a1));
    r2 = HSum8(_mm256_add_ps(q0, q1));
  }
#endif
  ComputeType<D> t1 = 0, t2 = 0;
  for (; i < len; ++i) {
    const ComputeType<D> d = Ld<D>(x, off + i) - k;
    t1 += d;
    t2 = std::fma(d, d, t2);
  }
  *s1 += r1 + static_cast<double>(t1);
  *s2 += r2 + static_cast<double>(t2);
}

// y over [off, off + len) = (x - mean) * scale + bias; kStream: non-temporal.
template <DType D, bool kStream>
inline void NormRun(const void *x, void *y, int64_t off, int64_t len, const NormCoef<ComputeType<D>> &k) {
  int64_t i = 0;
  if constexpr (kStream && kVec<D>) {  // peel to the alignment of the stream store
    constexpr uintptr_t es = D == DType::kFloat32 ? 4 : 2;
    while (i < len && ((reinterpret_cast<uintptr_t>(y) + (off + i) * es) & (kStreamAlign<D> - 1))) {
      St<D>(y, off + i, std::fma(Ld<D>(x, off + i) - k.mean, k.scale, k.bias));
      ++i;
    }
  }
#ifdef BN_GRAD_HAVE_AVX2
  if constexpr (kVec<D>) {
    const __m256 m = _mm256_set1_ps(k.mean), sc = _mm256_set1_ps(k.scale), b = _mm256_set1_ps(k.bias);
    for (; i + 16 <= len; i += 16) {
      const __m256 v0 = _mm256_fmadd_ps(_mm256_sub_ps(VLd<D>(x, off + i), m), sc, b);
      const __m256 v1 = _mm256_fmadd_ps(_mm256_sub_ps(VLd<D>(x, off + i + 8), m), sc, b);
      VSt<D, kStream>(y, off + i, v0);
      VSt<D, kStream>(y, off + i + 8, v1);
    }
    for (; i + 8 <= len; i += 8) {
      VSt<D, kStream>(y, off + i, _mm256_fmadd_ps(_mm256_sub_ps(VLd<D>(x, off + i), m), sc, b));
    }
  }
#endif
  for (; i < len; ++i) St<D>(y, off + i, std::fma(Ld<D>(x, off + i) - k.mean, k.scale, k.bias));
}

// y over one row of a block of channels: [off, off + width) holds channels
// j = 0, 1, ... (`inner` elements each, coefficients k[j]) side by side. One
// stream over the whole row (with kStream: whole cache lines around the
// cache, however short a channel's run); an 8-lane group that straddles two
// channels blends their coefficients by lane (inner >= 8: never three). Same
// bits as NormRun per channel.
static_assert(kRowMinInner >= 8, "NormBlockRow: an 8-lane group spans at most two channels");

template <DType D, bool kStream>
inline void NormBlockRow(const void *x, void *y, int64_t off, int64_t width, int64_t inner,
                         const NormCoef<ComputeType<D>> *k) {
  int64_t e = 0, j = 0, next = inner;  // element e of the row is in channel j while e < next
  auto scalar = [&](int64_t e1) {
    for (; e < e1; ++e) {
      while (e >= next) { ++j; next += inner; }
      St<D>(y, off + e, std::fma(Ld<D>(x, off + e) - k[j].mean, k[j].scale, k[j].bias));
    }
  };
  if constexpr (kStream && kVec<D>) {  // to the alignment of the stream store
    constexpr uintptr_t es = D == DType::kFloat32 ? 4 : 2;
    int64_t head = 0;
    while (head < width && ((reinterpret_cast<uintptr_t>(y) + (off + head) * es) & (kStreamAlign<D> - 1))) ++head;
    scalar(head);
  }
#ifdef BN_GRAD_HAVE_AVX2
  if constexpr (kVec<D>) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    while (e + 8 <= width) {
      while (e >= next) { ++j; next += inner; }
      const __m256 m = _mm256_set1_ps(k[j].mean), sc = _mm256_set1_ps(k[j].scale), b = _mm256_set1_ps(k[j].bias);
      for (; e + 8 <= std::min(next, width); e += 8) {  // the whole groups of channel j
        VSt<D, kStream>(y, off + e, _mm256_fmadd_ps(_mm256_sub_ps(VLd<D>(x, off + e), m), sc, b));
      }
      if (e + 8 > width || e >= next) continue;
      // lanes from next - e on belong to channel j + 1
      const __m256 hi = _mm256_castsi256_ps(_mm256_cmpgt_epi32(lane, _mm256_set1_epi32(static_cast<int>(next - e - 1))));
      const NormCoef<ComputeType<D>> &k1 = k[j + 1];
      const __m256 m2 = _mm256_blendv_ps(m, _mm256_set1_ps(k1.mean), hi);
      const __m256 sc2 = _mm256_blendv_ps(sc, _mm256_set1_ps(k1.scale), hi);
      const __m256 b2 = _mm256_blendv_ps(b, _mm256_set1_ps(k1.bias), hi);
      VSt<D, kStream>(y, off + e, _mm256_fmadd_ps(_mm256_sub_ps(VLd<D>(x, off + e), m2), sc2, b2));
      e += 8;
    }
  }
#endif
  scalar(width);
}

// Channel c: from its moments (training; ignored in inference) writes
// save_mean / save_invstd and the running statistics, and returns how to
// normalize it (bn_forward_cpu.cpp).
NormCoef<double> FinishChannel(const BnForwardArgs &a, int64_t c, const Moments &m);

template <class T>
inline NormCoef<T> Cast(const NormCoef<double> &k) {
  return NormCoef<T>{static_cast<T>(k.mean), static_cast<T>(k.scale), static_cast<T>(k.bias)};
}

// The walks, for D = the input's dtype (instantiated for the four).
template <DType D>
void RunFwdRowPath(const BnForwardArgs &a, const FwdPlan &plan, Scratch *scratch);
template <DType D>
void RunFwdColumnPath(const BnForwardArgs &a, const FwdPlan &plan, Scratch *scratch);

#define BN_GRAD_DEFINE_FWD_WALK(Walk, Struct)                                                 \
  template <DType D>                                                                          \
  void Walk(const BnForwardArgs &a, const FwdPlan &plan, Scratch *scratch) {                  \
    Struct<D>(a, plan).Run(scratch);                                                          \
  }                                                                                           \
  template void Walk<DType::kFloat16>(const BnForwardArgs &, const FwdPlan &, Scratch *);     \
  template void Walk<DType::kBFloat16>(const BnForwardArgs &, const FwdPlan &, Scratch *);    \
  template void Walk<DType::kFloat32>(const BnForwardArgs &, const FwdPlan &, Scratch *);     \
  template void Walk<DType::kFloat64>(const BnForwardArgs &, const FwdPlan &, Scratch *)

}  // namespace fwd
}  // namespace bn_grad

#endif  // MS_BN_GRAD_BN_FORWARD_WALK_H_
