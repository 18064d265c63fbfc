// float16 / bfloat16 <-> float32 conversion, scalar and 8 lanes at a time.
//
// Stores round to nearest even; NaN stays NaN (made quiet), infinities and
// signed zeros are kept; float16 subnormals are handled both ways.
//
//   float    HalfToFloat(uint16_t)        uint16_t FloatToHalf(float)
//   float    Bf16ToFloat(uint16_t)        uint16_t FloatToBf16(float)
//
// With AVX2 + F16C (BN_GRAD_HAVE_AVX2 defined), 8 lanes in registers:
//   __m256 LoadHalf8(const uint16_t *)    void StoreHalf8(uint16_t *, __m256)
//   __m256 LoadBf16x8(const uint16_t *)   void StoreBf16x8(uint16_t *, __m256)
//   StreamHalf8 / StreamBf16x8: non-temporal store, pointer 16-byte aligned.
//   LoadBf16x16EvenOdd / Bf16PackEvenOdd16: 16 values as even and odd
//   lanes, for elementwise work (one load / one pack for 16 values).
// The scalar and the vector conversions give identical bits, so a result does
// not depend on which elements land in a vector body or a scalar tail.
#ifndef MS_BN_GRAD_HALF_H_
#define MS_BN_GRAD_HALF_H_

#include <cstdint>
#include <cstring>

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define BN_GRAD_HAVE_AVX2 1
#endif

namespace bn_grad {

inline float BitsToFloat(uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }
inline uint32_t FloatToBits(float f) { uint32_t b; std::memcpy(&b, &f, 4); return b; }

inline float HalfToFloatSoft(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do { ++e; man <<= 1; } while ((man & 0x400) == 0);
      bits = sign | ((127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  return BitsToFloat(bits);
}

// Same bits as the F16C instruction (vcvtps2ph, round to nearest even): a NaN
// keeps its sign and top payload bits and is made quiet.
inline uint16_t FloatToHalfSoft(float f) {
  uint32_t x = FloatToBits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax == 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (ax < 0x33000001u) return static_cast<uint16_t>(sign);            // rounds to zero
  int e = static_cast<int>(ax >> 23);
  uint32_t man = (ax & 0x7fffffu) | 0x800000u;
  if (e < 113) {  // float16 subnormal
    int shift = 126 - e;
    uint32_t r = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t h = ((e - 112) << 10) | ((man >> 13) & 0x3ff);
  uint32_t rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

#ifdef BN_GRAD_HAVE_AVX2
inline float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }
inline uint16_t FloatToHalf(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
#else
inline float HalfToFloat(uint16_t h) { return HalfToFloatSoft(h); }
inline uint16_t FloatToHalf(float f) { return FloatToHalfSoft(f); }
#endif

inline float Bf16ToFloat(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }

inline uint16_t FloatToBf16(float f) {
  uint32_t x = FloatToBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x | 0x400000u) >> 16);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

#ifdef BN_GRAD_HAVE_AVX2
inline __m256 LoadHalf8(const uint16_t *p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
}
inline void StoreHalf8(uint16_t *p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i *>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
inline void StreamHalf8(uint16_t *p, __m256 v) {
  _mm_stream_si128(reinterpret_cast<__m128i *>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

inline __m256 LoadBf16x8(const uint16_t *p) {
  __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
// Bf16RoundHigh8: 8 lanes rounded to bfloat16 (nearest even; a NaN made
// quiet), each in the high 16 bits of its 32-bit lane (the low 16 are not
// cleared). Bf16Round8: the same, in the low 16 bits (the high 16 zero).
inline __m256i Bf16RoundHigh8(__m256 v) {
  const __m256i x = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb);
  const __m256i q = _mm256_or_si256(x, _mm256_set1_epi32(0x400000));
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(q), nan));
}
inline __m256i Bf16Round8(__m256 v) { return _mm256_srli_epi32(Bf16RoundHigh8(v), 16); }
inline __m128i Bf16Pack8(__m256 v) {
  const __m256i r = Bf16Round8(v);
  return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}
inline void StoreBf16x8(uint16_t *p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i *>(p), Bf16Pack8(v));
}
inline void StreamBf16x8(uint16_t *p, __m256 v) {
  _mm_stream_si128(reinterpret_cast<__m128i *>(p), Bf16Pack8(v));
}
// 16 bfloat16 values as two vectors: ev holds values 0, 2, ..., 14 and od
// values 1, 3, ..., 15 (one load, a shift and an and: no shuffles). For
// elementwise work only; Bf16PackEvenOdd16(ev, od) rounds them and puts them
// back in order (one blend).
inline void LoadBf16x16EvenOdd(const uint16_t *p, __m256 *ev, __m256 *od) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
  *ev = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  *od = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
}
inline __m256i Bf16PackEvenOdd16(__m256 ev, __m256 od) {
  return _mm256_blend_epi16(Bf16Round8(ev), Bf16RoundHigh8(od), 0xAA);
}
#endif  // BN_GRAD_HAVE_AVX2

}  // namespace bn_grad

#endif  // MS_BN_GRAD_HALF_H_
