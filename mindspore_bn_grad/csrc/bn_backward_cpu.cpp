// Compute of the BatchNormBackward CPU kernel (see bn_backward.h).
// First version: straightforward and exact (double accumulation); the
// performance issue replaces the loops, not the interface.
#include <cmath>
#include <cstring>

#include "bn_backward.h"

namespace bn_grad {
namespace {

int g_num_threads = 1;
bool g_deterministic = true;

inline float HalfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0) {
    if (man == 0) { bits = sign; } else {
      int e = -1;
      do { ++e; man <<= 1; } while ((man & 0x400) == 0);
      bits = sign | ((127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f; std::memcpy(&f, &bits, 4); return f;
}

inline uint16_t FloatToHalf(float f) {
  uint32_t x; std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0);
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // rounds to inf
  if (ax < 0x33000001u) return sign;              // rounds to zero
  int e = (ax >> 23);
  uint32_t man = (ax & 0x7fffffu) | 0x800000u;
  if (e < 113) {  // subnormal half
    int shift = 126 - e;  // 14 + (113 - e) - 1
    uint32_t r = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return sign | r;
  }
  uint32_t h = ((e - 112) << 10) | ((man >> 13) & 0x3ff);
  uint32_t rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return sign | h;
}

inline float Bf16ToFloat(uint16_t b) { uint32_t x = uint32_t(b) << 16; float f; std::memcpy(&f, &x, 4); return f; }
inline uint16_t FloatToBf16(float f) {
  uint32_t x; std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40;  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1);
  return x >> 16;
}

inline double Load(const void *p, DType d, int64_t i) {
  switch (d) {
    case DType::kFloat16: return HalfToFloat(static_cast<const uint16_t *>(p)[i]);
    case DType::kBFloat16: return Bf16ToFloat(static_cast<const uint16_t *>(p)[i]);
    case DType::kFloat32: return static_cast<const float *>(p)[i];
    case DType::kFloat64: return static_cast<const double *>(p)[i];
    default: return 0.0;
  }
}

inline void Store(void *p, DType d, int64_t i, double v) {
  switch (d) {
    case DType::kFloat16: static_cast<uint16_t *>(p)[i] = FloatToHalf(static_cast<float>(v)); break;
    case DType::kBFloat16: static_cast<uint16_t *>(p)[i] = FloatToBf16(static_cast<float>(v)); break;
    case DType::kFloat32: static_cast<float *>(p)[i] = static_cast<float>(v); break;
    case DType::kFloat64: static_cast<double *>(p)[i] = v; break;
    default: break;
  }
}

inline double Param(const ConstTensor &t, int64_t c, double dflt) {
  return t.data == nullptr ? dflt : Load(t.data, t.dtype, c);
}

}  // namespace

int BnBackward(const BnBackwardArgs &a) {
  const int64_t C = a.channels, outer = a.outer, inner = a.inner;
  const double n = static_cast<double>(outer) * static_cast<double>(inner);
  for (int64_t c = 0; c < C; ++c) {
    const double w = Param(a.weight, c, 1.0);
    double mean, invstd;
    if (a.training) {
      mean = Param(a.save_mean, c, 0.0);
      invstd = Param(a.save_invstd, c, 1.0);
    } else {
      mean = Param(a.running_mean, c, 0.0);
      invstd = 1.0 / std::sqrt(Param(a.running_var, c, 1.0) + a.eps);
    }
    double sum_dy = 0.0, sum_dy_xmu = 0.0;
    const bool need_sums = a.mask[1] || a.mask[2] || (a.training && a.mask[0]);
    if (need_sums) {
      for (int64_t o = 0; o < outer; ++o) {
        const int64_t base = (o * C + c) * inner;
        for (int64_t i = 0; i < inner; ++i) {
          const double dy = Load(a.grad_out.data, a.grad_out.dtype, base + i);
          const double x = Load(a.input.data, a.input.dtype, base + i);
          sum_dy += dy;
          sum_dy_xmu += dy * (x - mean);
        }
      }
    }
    if (a.mask[0]) {
      const double scale = w * invstd;
      const double k = a.training && n > 0 ? sum_dy_xmu * invstd * invstd / n : 0.0;
      const double mean_dy = a.training && n > 0 ? sum_dy / n : 0.0;
      for (int64_t o = 0; o < outer; ++o) {
        const int64_t base = (o * C + c) * inner;
        for (int64_t i = 0; i < inner; ++i) {
          const double dy = Load(a.grad_out.data, a.grad_out.dtype, base + i);
          double gi;
          if (a.training) {
            const double x = Load(a.input.data, a.input.dtype, base + i);
            gi = (dy - mean_dy - (x - mean) * k) * scale;
          } else {
            gi = dy * scale;
          }
          Store(a.grad_input.data, a.grad_input.dtype, base + i, gi);
        }
      }
    }
    if (a.mask[1]) Store(a.grad_weight.data, a.grad_weight.dtype, c, sum_dy_xmu * invstd);
    if (a.mask[2]) Store(a.grad_bias.data, a.grad_bias.dtype, c, sum_dy);
  }
  return 0;
}

void SetNumThreads(int n) { g_num_threads = n < 1 ? 1 : n; }
int GetNumThreads() { return g_num_threads; }
void SetDeterministic(bool on) { g_deterministic = on; }
bool GetDeterministic() { return g_deterministic; }

}  // namespace bn_grad
