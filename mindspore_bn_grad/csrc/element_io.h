// Element I/O: the one place where the kernels load and store tensor
// elements of each dtype (float16 / bfloat16 through the conversions of
// half.h, float32, float64).
//
//   By dtype, known at compile time (BatchNormBackward):
//     ComputeType<D>     float, or double for float64: what a value is held in
//     Ld<D>(p, i) / St<D>(p, i, v)            one element
//     VLd<D>(p, i) / VSt<D, kStream>(p, i, v)  8 lanes (AVX2; kVec<D>)
//     ZeroRun<D>(p, off, len, stream)          zeros, non-temporal when stream
//     PrefetchRun<D>(p, off, len)              a hint: elements [off, off + len) towards L2
//   By dtype, known at run time (per-channel tensors, the double kernels):
//     LoadAny(p, d, i) / StoreAny(p, d, i, v)  one element as double
//     ElemSize(d)                              bytes per element
//   By storage type (the kernels that compute in double, scalar_kernel.h):
//     Half, BF16 (16-bit wrappers); ToDouble(v); FromDouble<T>(v)
//
// Every path gives the same bits for the same value: the scalar and vector
// conversions of half.h agree, so a result never depends on which elements
// land in a vector body or a scalar tail.
#ifndef MS_BN_GRAD_ELEMENT_IO_H_
#define MS_BN_GRAD_ELEMENT_IO_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "half.h"
#include "tensor.h"

namespace bn_grad {

// ------------------------------------------------------------- by dtype (static)

template <DType D>
using ComputeType = std::conditional_t<D == DType::kFloat64, double, float>;

template <DType D>
inline ComputeType<D> Ld(const void *p, int64_t i) {
  if constexpr (D == DType::kFloat16) return HalfToFloat(static_cast<const uint16_t *>(p)[i]);
  else if constexpr (D == DType::kBFloat16) return Bf16ToFloat(static_cast<const uint16_t *>(p)[i]);
  else if constexpr (D == DType::kFloat32) return static_cast<const float *>(p)[i];
  else return static_cast<const double *>(p)[i];
}

template <DType D>
inline void St(void *p, int64_t i, ComputeType<D> v) {
  if constexpr (D == DType::kFloat16) static_cast<uint16_t *>(p)[i] = FloatToHalf(v);
  else if constexpr (D == DType::kBFloat16) static_cast<uint16_t *>(p)[i] = FloatToBf16(v);
  else if constexpr (D == DType::kFloat32) static_cast<float *>(p)[i] = v;
  else static_cast<double *>(p)[i] = v;
}

// ------------------------------------------------------------ by dtype (runtime)

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

constexpr size_t ElemSize(DType d) {
  switch (d) {
    case DType::kFloat16: case DType::kBFloat16: return 2;
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    default: return 0;
  }
}

// --------------------------------------------------------------- by storage type

struct Half { uint16_t bits; };
struct BF16 { uint16_t bits; };

inline double ToDouble(float v) { return v; }
inline double ToDouble(double v) { return v; }
inline double ToDouble(Half v) { return HalfToFloat(v.bits); }
inline double ToDouble(BF16 v) { return Bf16ToFloat(v.bits); }

template <typename T> inline T FromDouble(double v);
template <> inline float FromDouble<float>(double v) { return static_cast<float>(v); }
template <> inline double FromDouble<double>(double v) { return v; }
template <> inline Half FromDouble<Half>(double v) { return Half{FloatToHalf(static_cast<float>(v))}; }
template <> inline BF16 FromDouble<BF16>(double v) { return BF16{FloatToBf16(static_cast<float>(v))}; }

// ------------------------------------------------------------------- 8 lanes

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

// Sum of 8 float lanes in double, in a fixed order (the row walks' partial sums, forward and backward).
inline double HSum8(__m256 v) {
  __m256d d = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)),
                            _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(d), _mm256_extractf128_pd(d, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}
#else
template <DType D> constexpr bool kVec = false;
#endif

// -------------------------------------------------------- non-temporal stores

// Orders a thread's non-temporal stores before it reports its work done.
inline void StreamFence() {
#ifdef BN_GRAD_HAVE_AVX2
  _mm_sfence();
#endif
}

// Alignment a non-temporal store needs (bytes).
template <DType D> constexpr uintptr_t kStreamAlign = D == DType::kFloat32 ? 32 : 16;

// Per-column arrays for ForPeriodicStream hold this many entries past the period: their first ones again.
constexpr int64_t kPeriodicWrap = 8;

// Writes the kPeriodicWrap entries past the first `period` of each array: its first ones again.
template <class... T>
inline void RepeatHead(int64_t period, T *...arrays) {
  for (int64_t i = 0; i < kPeriodicWrap; ++i) ((arrays[period + i] = arrays[i % period]), ...);
}

// Stream stores over elements [p, end) of a run whose element p is column p mod period (the
// column paths' whole-row tiles): scalar(p, j) stores one element of column j with a normal store,
// for the head up to the stream store's alignment and for the tail; vector(p, j) stores 8
// (kVec<D>), columns j .. j + 7, the ones past the period wrapping to the next row's first (the
// caller's per-column arrays hold period + kPeriodicWrap entries: RepeatHead; period >= 8).
template <DType D, class Scalar, class Vector>
inline void ForPeriodicStream(const void *out, int64_t p, int64_t end, int64_t period, Scalar &&scalar,
                              Vector &&vector) {
  int64_t j = p % period;
  auto one = [&]() {
    scalar(p, j);
    ++p;
    if (++j == period) j = 0;
  };
  while (p < end && ((reinterpret_cast<uintptr_t>(out) + p * ElemSize(D)) & (kStreamAlign<D> - 1))) one();
  if constexpr (kVec<D>) {
    for (; p + 8 <= end; p += 8) {
      vector(p, j);
      j += 8;
      if (j >= period) j -= period;
    }
  }
  while (p < end) one();
}

// A hint to bring elements [off, off + len) into L2, one prefetch per 64-byte line; no effect on values.
template <DType D>
inline void PrefetchRun(const void *p, int64_t off, int64_t len) {
  constexpr int64_t kLine = 64;
  const int64_t esz = static_cast<int64_t>(ElemSize(D));
  const char *b = static_cast<const char *>(p) + off * esz;
  for (int64_t k = 0; k < len * esz; k += kLine) __builtin_prefetch(b + k, 0, 2);
}

// Zeros elements [off, off + len) of p; non-temporal where kStream.
template <DType D, bool kStream>
inline void ZeroRun(void *p, int64_t off, int64_t len) {
  const int64_t es = static_cast<int64_t>(ElemSize(D));
  char *q = static_cast<char *>(p) + off * es;
  int64_t bytes = len * es;
#ifdef BN_GRAD_HAVE_AVX2
  if constexpr (kStream) {
    const int64_t head = std::min<int64_t>(bytes, (32 - (reinterpret_cast<uintptr_t>(q) & 31)) & 31);
    std::memset(q, 0, static_cast<size_t>(head));
    q += head;
    bytes -= head;
    const __m256i z = _mm256_setzero_si256();
    for (; bytes >= 32; bytes -= 32, q += 32) _mm256_stream_si256(reinterpret_cast<__m256i *>(q), z);
  }
#endif
  std::memset(q, 0, static_cast<size_t>(bytes));
}

template <DType D>
inline void ZeroRun(void *p, int64_t off, int64_t len, bool stream) {
  if (stream) ZeroRun<D, true>(p, off, len);
  else ZeroRun<D, false>(p, off, len);
}

}  // namespace bn_grad

#endif  // MS_BN_GRAD_ELEMENT_IO_H_
