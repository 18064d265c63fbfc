// What the kernels that compute in double (the SyncBatchNorm steps and the
// double backward) share: float16 / bfloat16 as 16-bit wrappers, loads /
// stores by runtime dtype, and their chunking and parallel loop. The
// BatchNormBackward kernel has its own vectorised I/O (bn_backward_cpu.cpp).
#ifndef MS_BN_GRAD_SCALAR_KERNEL_H_
#define MS_BN_GRAD_SCALAR_KERNEL_H_

#include <algorithm>
#include <cstdint>

#include "bn_backward.h"  // DType, GetNumThreads
#include "half.h"
#include "thread_pool.h"

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

// Elements per task (a chunk of rows); determinism: chunks depend on the shape only.
constexpr int64_t kChunkElems = 1 << 15;

inline int64_t RowsPerChunk(int64_t row_elems) {
  return std::max<int64_t>(1, kChunkElems / std::max<int64_t>(1, row_elems));
}

// fn(t) for t in [0, ntasks) on the shared pool; one thread when `work`
// (elements) is too small to be worth waking it. Each task writes only its own outputs.
template <typename Fn>
void ParallelFor(int64_t ntasks, int64_t work, Fn fn) {
  int threads = std::max(1, GetNumThreads());
  if (work < 4 * kChunkElems) threads = 1;
  threads = static_cast<int>(std::min<int64_t>(threads, ntasks));
  if (threads <= 1) {
    for (int64_t t = 0; t < ntasks; ++t) fn(t);
    return;
  }
  ThreadPool::Global().Run(ntasks, threads, fn);
}

}  // namespace elem
}  // namespace bn_grad

#endif  // MS_BN_GRAD_SCALAR_KERNEL_H_
