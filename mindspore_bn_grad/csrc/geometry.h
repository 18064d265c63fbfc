// The one geometry parser: an activation shape and its layout as the
// [outer, channels, inner] view every kernel works on (tensor.h), with the
// shape arithmetic it needs. Used by every aot entry (aot_args.h
// ParseActivations) and by BatchNormBackward's C++ infer (aot_entry.cpp).
#ifndef MS_BN_GRAD_GEOMETRY_H_
#define MS_BN_GRAD_GEOMETRY_H_

#include <cstdint>

#include "bn_spec.gen.h"
#include "tensor.h"

namespace bn_grad {

// Whether `rank` is one of the ranks the prototypes accept.
inline bool RankSupported(int rank) { return rank >= spec::kMinRank && rank <= spec::kMaxRank; }

// The channel dimension: the last one for a channel-last layout, else dim 1.
inline int ChannelAxis(int rank, bool channel_last) { return channel_last ? rank - 1 : 1; }

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

// `shape` (rank dims) in the given layout as [outer, channels, inner], and
// its element count. kBadRank for a rank outside the prototypes' bounds,
// kOverflow for a negative dim or a count beyond int64.
inline spec::Error ParseGeometry(int rank, const int64_t *shape, bool channel_last, Geometry *g,
                                 int64_t *numel) {
  if (!RankSupported(rank)) return spec::kBadRank;
  bool ok = true;
  *numel = NumElements(rank, shape, &ok);
  if (!ok) return spec::kOverflow;
  g->channels = shape[ChannelAxis(rank, channel_last)];
  if (channel_last) {
    g->outer = NumElements(rank - 1, shape, &ok);
    g->inner = 1;
  } else {
    g->outer = shape[0];
    g->inner = NumElements(rank - 2, shape + 2, &ok);
  }
  return ok ? spec::kOk : spec::kOverflow;
}

}  // namespace bn_grad

#endif  // MS_BN_GRAD_GEOMETRY_H_
