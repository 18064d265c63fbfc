// Scalar element I/O for the kernels that compute in double (the SyncBatchNorm
// steps and the double backward): float16 / bfloat16 as 16-bit wrappers, and
// loads / stores by runtime dtype. The BatchNormBackward kernel has its own
// vectorised I/O (bn_backward_cpu.cpp).
#ifndef MS_BN_GRAD_ELEM_IO_H_
#define MS_BN_GRAD_ELEM_IO_H_

#include <cstdint>

#include "bn_backward.h"  // DType
#include "half.h"

namespace bn_grad {
namespace elem {

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

inline double LoadAny(const void *p, DType d, int64_t i) {
  switch (d) {
    case DType::kFloat16: return ToDouble(static_cast<const Half *>(p)[i]);
    case DType::kBFloat16: return ToDouble(static_cast<const BF16 *>(p)[i]);
    case DType::kFloat32: return static_cast<const float *>(p)[i];
    case DType::kFloat64: return static_cast<const double *>(p)[i];
    default: return 0.0;
  }
}

inline void StoreAny(void *p, DType d, int64_t i, double v) {
  switch (d) {
    case DType::kFloat16: static_cast<Half *>(p)[i] = FromDouble<Half>(v); break;
    case DType::kBFloat16: static_cast<BF16 *>(p)[i] = FromDouble<BF16>(v); break;
    case DType::kFloat32: static_cast<float *>(p)[i] = static_cast<float>(v); break;
    case DType::kFloat64: static_cast<double *>(p)[i] = v; break;
    default: break;
  }
}

}  // namespace elem
}  // namespace bn_grad

#endif  // MS_BN_GRAD_ELEM_IO_H_
