// Helpers shared by the aot entry points (aot_entry.cpp, bn_sync_entry.cpp):
// error codes, dtype strings, shape arithmetic. Inline, header-only.
#ifndef MS_BN_GRAD_AOT_COMMON_H_
#define MS_BN_GRAD_AOT_COMMON_H_

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <string>

#include "bn_backward.h"
#include "thread_pool.h"

namespace bn_grad {
namespace aot {

// Error codes returned to the caller (also listed in _native.py).
enum Error {
  kOk = 0, kBadParamCount = 1, kBadDtype = 2, kBadRank = 3, kBadShape = 4,
  kMissingTensor = 5, kOverflow = 6, kKernelFailed = 7, kBadThreadCount = 8, kThreadStartFailed = 9,
};

inline DType ParseDtype(const char *s) {
  if (s == nullptr) return DType::kNone;
  if (std::strcmp(s, "float32") == 0) return DType::kFloat32;
  if (std::strcmp(s, "float16") == 0) return DType::kFloat16;
  if (std::strcmp(s, "bfloat16") == 0) return DType::kBFloat16;
  if (std::strcmp(s, "float64") == 0) return DType::kFloat64;
  return DType::kNone;
}

// An absent optional input: MindSpore passes dtype "none".
inline bool IsNoneDtype(const char *s) { return s == nullptr || std::strcmp(s, "none") == 0; }

inline size_t ElemSize(DType d) {
  switch (d) {
    case DType::kFloat16: case DType::kBFloat16: return 2;
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    default: return 0;
  }
}

inline bool SameShape(int nd_a, const int64_t *a, int nd_b, const int64_t *b) {
  if (nd_a != nd_b) return false;
  for (int i = 0; i < nd_a; ++i) if (a[i] != b[i]) return false;
  return true;
}

// Product of dims; sets *ok = false on a negative dim or int64 overflow.
inline int64_t NumElements(int ndim, const int64_t *shape, bool *ok) {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] < 0 || __builtin_mul_overflow(n, shape[i], &n)) { *ok = false; return 0; }
  }
  return n;
}

// The `layout` attribute (data_format; see op_def/batch_norm_backward.yaml).
inline bool ChannelLast(const std::string &layout) { return layout == "NHWC" || layout == "NDHWC"; }

// Zero-fills a masked output. A dx-sized fill moves as many bytes as
// computing dx, so large ones are split over the kernel's threads.
inline void ZeroFill(void *data, size_t bytes) {
  constexpr size_t kChunk = size_t{1} << 20;
  const int threads = GetNumThreads();
  if (threads <= 1 || bytes < 4 * kChunk) {
    std::memset(data, 0, bytes);
    return;
  }
  const int64_t ntasks = static_cast<int64_t>((bytes + kChunk - 1) / kChunk);
  char *base = static_cast<char *>(data);
  ThreadPool::Global().Run(ntasks, threads, [&](int64_t t) {
    const size_t off = static_cast<size_t>(t) * kChunk;
    std::memset(base + off, 0, std::min(kChunk, bytes - off));
  });
}

}  // namespace aot
}  // namespace bn_grad

#endif  // MS_BN_GRAD_AOT_COMMON_H_
