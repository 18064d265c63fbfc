// CPU kernel of BatchNormDoubleBackward (prototype and formulas:
// op_def/batch_norm_double_backward.yaml; derivation: tests/reference.py).
//
// Two sweeps over the activations, viewed as [outer, C, inner]:
//   1. per-channel sums of dy, dy*(x-mean), ggI, ggI*(x-mean), ggI*dy;
//   2. elementwise, from per-channel coefficients made of those sums:
//        grad_grad_out = a1*ggI + a2*(x-mean) + a0
//        grad_input    = b1*dy + b2*ggI + b3*(x-mean) + b0
// and grad_weight per channel from the sums alone. Work is split into tasks
// whose boundaries depend only on the shape; each per-channel sum adds its
// task partials in task order, so results are bitwise identical for any
// thread count. Accumulation and coefficients are in double; float16 and
// bfloat16 data go through float buffers (vectorised conversions).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "bn_double_backward.h"
#include "bn_spec.gen.h"
#include "element_io.h"
#include "scalar_kernel.h"

namespace bn_grad {
namespace dbl {
namespace {

// --- sweep 1: per-channel sums -------------------------------------------
enum Sum { kDy, kDyXmu, kG, kGXmu, kGDy, kNumSums };
constexpr int kLanes = 4;  // independent accumulators per sum: the compiler keeps them in one vector

// Sums of one contiguous run of n elements of one channel, added to acc[kNumSums].
// Element i goes to lane i % kLanes (tail: lane 0); lanes are added in a fixed order.
template <typename T, bool kGgi>
inline void RunSums(const T *__restrict dy, const T *__restrict x, const T *__restrict g, int64_t n,
                    double mean, double *acc) {
  double s[kNumSums][kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const double d = ToDouble(dy[i + l]), xm = ToDouble(x[i + l]) - mean;
      s[kDy][l] += d;
      s[kDyXmu][l] += d * xm;
      if (kGgi) {
        const double gg = ToDouble(g[i + l]);
        s[kG][l] += gg;
        s[kGXmu][l] += gg * xm;
        s[kGDy][l] += gg * d;
      }
    }
  }
  for (; i < n; ++i) {
    const double d = ToDouble(dy[i]), xm = ToDouble(x[i]) - mean;
    s[kDy][0] += d;
    s[kDyXmu][0] += d * xm;
    if (kGgi) {
      const double gg = ToDouble(g[i]);
      s[kG][0] += gg;
      s[kGXmu][0] += gg * xm;
      s[kGDy][0] += gg * d;
    }
  }
  for (int k = 0; k < kNumSums; ++k) acc[k] += (s[k][0] + s[k][1]) + (s[k][2] + s[k][3]);
}

// One channel-last row (C channels) added to per-channel sums p[k * C + c].
template <typename T, bool kGgi>
inline void RowSums(const T *__restrict dy, const T *__restrict x, const T *__restrict g,
                    const double *__restrict mean, int64_t C, double *__restrict s_dy,
                    double *__restrict s_dyx, double *__restrict s_g, double *__restrict s_gx,
                    double *__restrict s_gdy) {
  for (int64_t c = 0; c < C; ++c) {
    const double d = ToDouble(dy[c]), xm = ToDouble(x[c]) - mean[c];
    s_dy[c] += d;
    s_dyx[c] += d * xm;
    if (kGgi) {
      const double gg = ToDouble(g[c]);
      s_g[c] += gg;
      s_gx[c] += gg * xm;
      s_gdy[c] += gg * d;
    }
  }
}

// --- sweep 2: elementwise ------------------------------------------------
// Per-channel coefficients (they multiply x - mean, not xhat), one array each:
//   grad_grad_out = a1*ggI + a2*(x - mean) + a0,  grad_input = b1*dy + b2*ggI + b3*(x - mean) + b0
enum Coef { kMean, kA1, kA2, kA0, kB1, kB2, kB3, kB0, kNumCoefs };

struct Coefs {
  explicit Coefs(int64_t C) : v(kNumCoefs * C, 0.0), C(C) {}
  double *operator[](int k) { return &v[k * C]; }
  const double *operator[](int k) const { return &v[k * C]; }
  std::vector<double> v;
  int64_t C;
};

template <typename T, bool kGgi>
inline void Elem(const T *__restrict dy, const T *__restrict x, const T *__restrict g, T *__restrict gdy,
                 T *__restrict gx, int64_t i, double mean, double a1, double a2, double a0, double b1,
                 double b2, double b3, double b0) {
  const double d = ToDouble(dy[i]), xm = ToDouble(x[i]) - mean, gg = kGgi ? ToDouble(g[i]) : 0.0;
  gdy[i] = FromDouble<T>(a1 * gg + a2 * xm + a0);
  gx[i] = FromDouble<T>(b1 * d + b2 * gg + b3 * xm + b0);
}

// A run of n elements of one channel.
template <typename T, bool kGgi>
void RunElem(const T *__restrict dy, const T *__restrict x, const T *__restrict g, T *__restrict gdy,
             T *__restrict gx, int64_t n, const Coefs &k, int64_t c) {
  const double m = k[kMean][c], a1 = k[kA1][c], a2 = k[kA2][c], a0 = k[kA0][c];
  const double b1 = k[kB1][c], b2 = k[kB2][c], b3 = k[kB3][c], b0 = k[kB0][c];
  for (int64_t i = 0; i < n; ++i) Elem<T, kGgi>(dy, x, g, gdy, gx, i, m, a1, a2, a0, b1, b2, b3, b0);
}

// One channel-last row (C channels).
template <typename T, bool kGgi>
void RowElem(const T *__restrict dy, const T *__restrict x, const T *__restrict g, T *__restrict gdy,
             T *__restrict gx, int64_t C, const Coefs &k, int64_t c0 = 0) {  // channels c0 .. c0 + C
  const double *__restrict m = k[kMean] + c0, *__restrict a1 = k[kA1] + c0, *__restrict a2 = k[kA2] + c0;
  const double *__restrict a0 = k[kA0] + c0, *__restrict b1 = k[kB1] + c0, *__restrict b2 = k[kB2] + c0;
  const double *__restrict b3 = k[kB3] + c0, *__restrict b0 = k[kB0] + c0;
  for (int64_t c = 0; c < C; ++c) {
    Elem<T, kGgi>(dy, x, g, gdy, gx, c, m[c], a1[c], a2[c], a0[c], b1[c], b2[c], b3[c], b0[c]);
  }
}

// --- 16-bit element types: blocks converted to float ---------------------
// float16 / bfloat16 runs go through float buffers of kBlock elements, so the
// conversions are vectorised too (half.h: vector and scalar conversions give
// the same bits). Block boundaries depend on the shape only.
constexpr int64_t kBlock = 256;

template <typename T>
constexpr bool kIs16 = sizeof(T) == 2;

template <typename T>
inline void ToFloat(const T *p, int64_t n, float *out) {
  const uint16_t *u = reinterpret_cast<const uint16_t *>(p);
  int64_t i = 0;
#ifdef BN_GRAD_HAVE_AVX2
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, std::is_same<T, Half>::value ? LoadHalf8(u + i) : LoadBf16x8(u + i));
  }
#endif
  for (; i < n; ++i) out[i] = std::is_same<T, Half>::value ? HalfToFloat(u[i]) : Bf16ToFloat(u[i]);
}

template <typename T>
inline void FromFloat(const float *v, int64_t n, T *p) {
  uint16_t *u = reinterpret_cast<uint16_t *>(p);
  int64_t i = 0;
#ifdef BN_GRAD_HAVE_AVX2
  for (; i + 8 <= n; i += 8) {
    if (std::is_same<T, Half>::value) StoreHalf8(u + i, _mm256_loadu_ps(v + i)); else StoreBf16x8(u + i, _mm256_loadu_ps(v + i));
  }
#endif
  for (; i < n; ++i) u[i] = std::is_same<T, Half>::value ? FloatToHalf(v[i]) : FloatToBf16(v[i]);
}

// f(b, m, dy, x, g) for the blocks [b, b + m) of a run of n elements, in
// the type the sweeps compute on: float16 / bfloat16 converted into float
// buffers of kBlock elements, float and double as they are (one block).
template <typename T, bool kGgi, class F>
inline void InBlocks(const T *dy, const T *x, const T *g, int64_t n, F &&f) {
  if constexpr (kIs16<T>) {
    float bd[kBlock], bx[kBlock], bg[kBlock];
    for (int64_t b = 0; b < n; b += kBlock) {
      const int64_t m = std::min(kBlock, n - b);
      ToFloat(dy + b, m, bd);
      ToFloat(x + b, m, bx);
      if (kGgi) ToFloat(g + b, m, bg);
      f(b, m, bd, bx, bg);
    }
  } else {
    f(int64_t{0}, n, dy, x, g);
  }
}

// f(gdy, gx) writes a block's m outputs: float16 / bfloat16 into float
// buffers then converted into gdy / gx, float and double there directly.
template <typename T, class F>
inline void OutBlock(T *gdy, T *gx, int64_t m, F &&f) {
  if constexpr (kIs16<T>) {
    float od[kBlock], ox[kBlock];
    f(od, ox);
    FromFloat(od, m, gdy);
    FromFloat(ox, m, gx);
  } else {
    f(gdy, gx);
  }
}

template <class P>
using Pointee = std::remove_const_t<std::remove_pointer_t<P>>;

// --- the two sweeps -------------------------------------------------------
// sums[c * kNumSums + k]: the five sums of channel c.
template <typename T, bool kGgi>
void ChannelSums(const DoubleBackwardArgs &a, const std::vector<double> &mean, std::vector<double> *sums) {
  const int64_t C = a.channels;
  const T *dy = static_cast<const T *>(a.grad_out.data);
  const T *x = static_cast<const T *>(a.input.data);
  const T *g = static_cast<const T *>(a.grad_grad_input.data);
  const OuterChunks split(a);
  std::vector<double> part(split.nchunks * C * kNumSums, 0.0);
  sums->assign(C * kNumSums, 0.0);
  if (split.by_channel()) {  // part [chunk][C][sum]
    ParallelTasks(split.tasks(), split.work(), [&](int64_t t) {
      double *acc = &part[t * kNumSums];
      split.ForRuns(t, [&](int64_t c, int64_t o) {
        InBlocks<T, kGgi>(dy + o, x + o, kGgi ? g + o : nullptr, a.inner,
                          [&](int64_t, int64_t m, const auto *d, const auto *xs, const auto *gs) {
                            RunSums<Pointee<decltype(d)>, kGgi>(d, xs, gs, m, mean[c], acc);
                          });
      });
    });
    for (int64_t k = 0; k < split.nchunks; ++k) {
      for (int64_t j = 0; j < C * kNumSums; ++j) (*sums)[j] += part[k * C * kNumSums + j];
    }
  } else {  // part [chunk][sum][C]
    ParallelTasks(split.tasks(), split.work(), [&](int64_t k) {
      double *p = &part[k * kNumSums * C];
      split.ForRows(k, [&](int64_t o) {
        InBlocks<T, kGgi>(dy + o, x + o, kGgi ? g + o : nullptr, C,
                          [&](int64_t b, int64_t m, const auto *d, const auto *xs, const auto *gs) {
                            RowSums<Pointee<decltype(d)>, kGgi>(d, xs, gs, mean.data() + b, m, p + kDy * C + b,
                                                                p + kDyXmu * C + b, p + kG * C + b,
                                                                p + kGXmu * C + b, p + kGDy * C + b);
                          });
      });
    });
    for (int64_t k = 0; k < split.nchunks; ++k) {
      for (int64_t j = 0; j < kNumSums; ++j) {
        for (int64_t c = 0; c < C; ++c) (*sums)[c * kNumSums + j] += part[(k * kNumSums + j) * C + c];
      }
    }
  }
}

template <typename T, bool kGgi>
void Elementwise(const DoubleBackwardArgs &a, const Coefs &coefs) {
  const int64_t C = a.channels;
  const T *dy = static_cast<const T *>(a.grad_out.data);
  const T *x = static_cast<const T *>(a.input.data);
  const T *g = static_cast<const T *>(a.grad_grad_input.data);
  T *gdy = static_cast<T *>(a.grad_grad_out.data);
  T *gx = static_cast<T *>(a.grad_input.data);
  const OuterChunks split(a);
  if (split.by_channel()) {
    ParallelTasks(split.tasks(), split.work(), [&](int64_t t) {
      split.ForRuns(t, [&](int64_t c, int64_t o) {
        InBlocks<T, kGgi>(dy + o, x + o, kGgi ? g + o : nullptr, a.inner,
                          [&](int64_t b, int64_t m, const auto *d, const auto *xs, const auto *gs) {
                            OutBlock(gdy + o + b, gx + o + b, m, [&](auto *od, auto *ox) {
                              RunElem<Pointee<decltype(d)>, kGgi>(d, xs, gs, od, ox, m, coefs, c);
                            });
                          });
      });
    });
  } else {
    ParallelTasks(split.tasks(), split.work(), [&](int64_t k) {
      split.ForRows(k, [&](int64_t o) {
        InBlocks<T, kGgi>(dy + o, x + o, kGgi ? g + o : nullptr, C,
                          [&](int64_t b, int64_t m, const auto *d, const auto *xs, const auto *gs) {
                            OutBlock(gdy + o + b, gx + o + b, m, [&](auto *od, auto *ox) {
                              RowElem<Pointee<decltype(d)>, kGgi>(d, xs, gs, od, ox, m, coefs, b);
                            });
                          });
      });
    });
  }
}

template <typename T>
int Compute(const DoubleBackwardArgs &a, bool ggi) {
  const int64_t C = a.channels;
  const int64_t n = a.outer * a.inner;
  namespace dbs = spec::batch_norm_double_backward;
  namespace bnb = spec::batch_norm_backward;  // the mask bits of the BatchNormBackward differentiated
  const std::vector<double> w = LoadChannel(a.weight, C, dbs::kAbsentWeight);
  const std::vector<double> ggw =
      a.mask[bnb::kMaskBitGradWeight] ? LoadChannel(a.grad_grad_weight, C, 0.0) : std::vector<double>(C, 0.0);
  const std::vector<double> ggb =
      a.mask[bnb::kMaskBitGradBias] ? LoadChannel(a.grad_grad_bias, C, 0.0) : std::vector<double>(C, 0.0);
  std::vector<double> mean, s;
  if (a.training) {
    mean = LoadChannel(a.save_mean, C, 0.0);
    s = LoadChannel(a.save_invstd, C, 1.0);
  } else {
    mean = LoadChannel(a.running_mean, C, dbs::kAbsentRunningMean);
    s = LoadChannel(a.running_var, C, dbs::kAbsentRunningVar);
    for (double &v : s) v = 1.0 / std::sqrt(v + a.eps);
  }
  std::vector<double> sums(C * kNumSums, 0.0);
  // Inference needs only sum(ggI * dy), for grad_weight; no sweep without ggI.
  if (n > 0 && (a.training || ggi)) {
    if (ggi) ChannelSums<T, true>(a, mean, &sums); else ChannelSums<T, false>(a, mean, &sums);
  }
  Coefs coefs(C);  // all zero
  for (int64_t c = 0; c < C; ++c) {
    const double *S = &sums[c * kNumSums];
    const double sc = s[c], ws = w[c] * sc;
    double k[kNumCoefs] = {};
    k[kMean] = mean[c];
    double gw = 0.0;
    if (!a.training) {
      k[kA1] = ws;
      k[kA2] = ggw[c] * sc;
      k[kA0] = ggb[c];
      k[kB1] = ggw[c] * sc;
      gw = S[kGDy] * sc;
    } else if (n > 0) {
      const double inv_n = 1.0 / static_cast<double>(n);
      const double m_dy = S[kDy] * inv_n, m_dyx = S[kDyXmu] * sc * inv_n;
      const double m_g = S[kG] * inv_n, m_gx = S[kGXmu] * sc * inv_n, m_gdy = S[kGDy] * inv_n;
      const double cov = m_gdy - m_g * m_dy - m_gx * m_dyx;
      gw = static_cast<double>(n) * sc * cov;
      // dL/dxhat_j = P*dy_j - Q*ggI_j (see batch_norm_double_backward_ref)
      const double P = ggw[c] - ws * m_gx, Q = ws * m_dyx;
      k[kA1] = ws;
      k[kA2] = P * sc;  // grad_grad_out's (x - mean) coefficient: (ggW - w*s*mean(ggI*xhat)) * s
      k[kA0] = ggb[c] - ws * m_g;
      k[kB1] = sc * P;
      k[kB2] = -sc * Q;
      k[kB3] = (-sc * sc * w[c] * cov - sc * (P * m_dyx - Q * m_gx)) * sc;
      k[kB0] = -sc * (P * m_dy - Q * m_g);
    }
    for (int j = 0; j < kNumCoefs; ++j) coefs[j][c] = k[j];
    StoreAny(a.grad_weight.data, a.grad_weight.dtype, c, gw);
  }
  if (n > 0) {
    if (ggi) Elementwise<T, true>(a, coefs); else Elementwise<T, false>(a, coefs);
  }
  return 0;
}

}  // namespace

int DoubleBackward(const DoubleBackwardArgs &a) {
  if (a.channels == 0) return 0;
  const CallThreads threads(a, a.grad_out.dtype);
  const bool ggi = a.mask[spec::batch_norm_backward::kMaskBitGradInput] && a.grad_grad_input.data != nullptr;
  switch (a.grad_out.dtype) {
    case DType::kFloat16: return Compute<Half>(a, ggi);
    case DType::kBFloat16: return Compute<BF16>(a, ggi);
    case DType::kFloat32: return Compute<float>(a, ggi);
    case DType::kFloat64: return Compute<double>(a, ggi);
    default: return 1;
  }
}

}  // namespace dbl
}  // namespace bn_grad
