// Helpers shared by the aot entry points (aot_entry.cpp, bn_sync_entry.cpp):
// dtype strings, layouts, shape arithmetic. Inline, header-only. The facts of
// the prototypes (error codes, dtype names, rank bounds, channel-last layout
// names, tensor slots, attributes) come from bn_spec.gen.h, generated from
// op_def/ by scripts/gen_ascend_op_def.py.
#ifndef MS_BN_GRAD_AOT_COMMON_H_
#define MS_BN_GRAD_AOT_COMMON_H_

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <string>

#include "bn_backward.h"
#include "bn_spec.gen.h"
#include "thread_pool.h"

namespace bn_grad {
namespace aot {

using namespace spec;  // NOLINT: error codes (kOk, ...), rank bounds, dtype names

inline DType ParseDtype(const char *s) {
  if (s == nullptr) return DType::kNone;
  for (const DtypeName &d : kDtypeNames) {
    if (std::strcmp(s, d.name) == 0) return d.dtype;
  }
  return DType::kNone;
}

// Whether `rank` is one of the ranks the prototypes accept.
inline bool RankSupported(int rank) { return rank >= kMinRank && rank <= kMaxRank; }

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
inline bool ChannelLast(const std::string &layout) {
  for (const char *name : kChannelLastLayouts) {
    if (layout == name) return true;
  }
  return false;
}

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
