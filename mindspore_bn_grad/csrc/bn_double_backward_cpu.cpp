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
// thread count. Accumulation and coefficients are in double.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "bn_backward.h"  // DType, GetNumThreads (the setting shared with BatchNormBackward)
#include "bn_double_backward.h"
#include "half.h"
#include "thread_pool.h"

namespace bn_grad {
namespace dbl {
namespace {

// --- element types -------------------------------------------------------
struct Half { uint16_t bits; };
struct BF16 { uint16_t bits; };

inline double Ld(float v) { return v; }
inline double Ld(double v) { return v; }
inline double Ld(Half v) { return HalfToFloat(v.bits); }
inline double Ld(BF16 v) { return Bf16ToFloat(v.bits); }

template <typename T> inline T St(double v);
template <> inline float St<float>(double v) { return static_cast<float>(v); }
template <> inline double St<double>(double v) { return v; }
template <> inline Half St<Half>(double v) { return Half{FloatToHalf(static_cast<float>(v))}; }
template <> inline BF16 St<BF16>(double v) { return BF16{FloatToBf16(static_cast<float>(v))}; }

double LoadAny(const void *p, DType d, int64_t i) {
  switch (d) {
    case DType::kFloat16: return Ld(static_cast<const Half *>(p)[i]);
    case DType::kBFloat16: return Ld(static_cast<const BF16 *>(p)[i]);
    case DType::kFloat32: return static_cast<const float *>(p)[i];
    case DType::kFloat64: return static_cast<const double *>(p)[i];
    default: return 0.0;
  }
}

void StoreAny(void *p, DType d, int64_t i, double v) {
  switch (d) {
    case DType::kFloat16: static_cast<Half *>(p)[i] = St<Half>(v); break;
    case DType::kBFloat16: static_cast<BF16 *>(p)[i] = St<BF16>(v); break;
    case DType::kFloat32: static_cast<float *>(p)[i] = static_cast<float>(v); break;
    case DType::kFloat64: static_cast<double *>(p)[i] = v; break;
    default: break;
  }
}

std::vector<double> LoadChannel(const ConstTensor &t, int64_t C, double dflt) {
  std::vector<double> v(C, dflt);
  if (t.data != nullptr) for (int64_t c = 0; c < C; ++c) v[c] = LoadAny(t.data, t.dtype, c);
  return v;
}

// --- work split ----------------------------------------------------------
constexpr int64_t kChunkElems = 1 << 15;

int64_t RowsPerChunk(int64_t row_elems) {
  return std::max<int64_t>(1, kChunkElems / std::max<int64_t>(1, row_elems));
}

template <typename Fn>
void ParallelFor(int64_t ntasks, int64_t work, Fn fn) {
  int threads = std::max(1, GetNumThreads());
  if (work < 4 * kChunkElems) threads = 1;  // too small to be worth waking the pool
  threads = static_cast<int>(std::min<int64_t>(threads, ntasks));
  if (threads <= 1) {
    for (int64_t t = 0; t < ntasks; ++t) fn(t);
    return;
  }
  ThreadPool::Global().Run(ntasks, threads, fn);
}

// --- sweep 1: per-channel sums -------------------------------------------
enum Sum { kDy, kDyXmu, kG, kGXmu, kGDy, kNumSums };

// Sums of one contiguous run of n elements of one channel: 2 lanes, fixed order.
template <typename T, bool kGgi>
inline void RunSums(const T *dy, const T *x, const T *g, int64_t n, double mean, double *acc) {
  double l0[kNumSums] = {0, 0, 0, 0, 0}, l1[kNumSums] = {0, 0, 0, 0, 0};
  auto add = [&](double *l, int64_t i) {
    const double d = Ld(dy[i]), xm = Ld(x[i]) - mean;
    l[kDy] += d;
    l[kDyXmu] += d * xm;
    if (kGgi) {
      const double gg = Ld(g[i]);
      l[kG] += gg;
      l[kGXmu] += gg * xm;
      l[kGDy] += gg * d;
    }
  };
  int64_t i = 0;
  for (; i + 2 <= n; i += 2) { add(l0, i); add(l1, i + 1); }
  if (i < n) add(l0, i);
  for (int k = 0; k < kNumSums; ++k) acc[k] += l0[k] + l1[k];
}

template <typename T, bool kGgi>
void ChannelSums(const DoubleBackwardArgs &a, const std::vector<double> &mean, std::vector<double> *sums) {
  const int64_t C = a.channels, outer = a.outer, inner = a.inner;
  const T *dy = static_cast<const T *>(a.grad_out.data);
  const T *x = static_cast<const T *>(a.input.data);
  const T *g = static_cast<const T *>(a.grad_grad_input.data);
  const int64_t rows = RowsPerChunk(C * inner);
  const int64_t nchunks = (outer + rows - 1) / rows;
  std::vector<double> part(nchunks * C * kNumSums, 0.0);  // [chunk][channel][sum]
  const int64_t work = outer * C * inner;
  if (inner > 1 || C == 1) {  // channel-first: a task is (chunk, channel), runs of `inner`
    ParallelFor(nchunks * C, work, [&](int64_t t) {
      const int64_t k = t / C, c = t % C;
      double *acc = &part[t * kNumSums];
      for (int64_t o = k * rows, end = std::min(outer, o + rows); o < end; ++o) {
        const int64_t base = (o * C + c) * inner;
        RunSums<T, kGgi>(dy + base, x + base, kGgi ? g + base : nullptr, inner, mean[c], acc);
      }
    });
  } else {  // channel-last: a task is a chunk of rows, each row holds the C channels
    ParallelFor(nchunks, work, [&](int64_t k) {
      double *p = &part[k * C * kNumSums];
      for (int64_t o = k * rows, end = std::min(outer, o + rows); o < end; ++o) {
        const int64_t base = o * C;
        for (int64_t c = 0; c < C; ++c) {
          double *acc = p + c * kNumSums;
          const double d = Ld(dy[base + c]), xm = Ld(x[base + c]) - mean[c];
          acc[kDy] += d;
          acc[kDyXmu] += d * xm;
          if (kGgi) {
            const double gg = Ld(g[base + c]);
            acc[kG] += gg;
            acc[kGXmu] += gg * xm;
            acc[kGDy] += gg * d;
          }
        }
      }
    });
  }
  sums->assign(C * kNumSums, 0.0);
  for (int64_t k = 0; k < nchunks; ++k) {
    for (int64_t j = 0; j < C * kNumSums; ++j) (*sums)[j] += part[k * C * kNumSums + j];
  }
}

// --- sweep 2: elementwise ------------------------------------------------
struct Coefs {  // per channel; multiply (x - mean), not xhat
  double mean, a1, a2, a0, b1, b2, b3, b0;
};

template <typename T, bool kGgi>
inline void Elem(const T *dy, const T *x, const T *g, T *gdy, T *gx, int64_t i, const Coefs &k) {
  const double d = Ld(dy[i]), xm = Ld(x[i]) - k.mean, gg = kGgi ? Ld(g[i]) : 0.0;
  gdy[i] = St<T>(k.a1 * gg + k.a2 * xm + k.a0);
  gx[i] = St<T>(k.b1 * d + k.b2 * gg + k.b3 * xm + k.b0);
}

template <typename T, bool kGgi>
void Elementwise(const DoubleBackwardArgs &a, const std::vector<Coefs> &coefs) {
  const int64_t C = a.channels, outer = a.outer, inner = a.inner;
  const T *dy = static_cast<const T *>(a.grad_out.data);
  const T *x = static_cast<const T *>(a.input.data);
  const T *g = static_cast<const T *>(a.grad_grad_input.data);
  T *gdy = static_cast<T *>(a.grad_grad_out.data);
  T *gx = static_cast<T *>(a.grad_input.data);
  const int64_t rows = RowsPerChunk(C * inner);
  const int64_t nchunks = (outer + rows - 1) / rows;
  const int64_t work = outer * C * inner;
  if (inner > 1 || C == 1) {
    ParallelFor(nchunks * C, work, [&](int64_t t) {
      const int64_t k = t / C, c = t % C;
      const Coefs cf = coefs[c];
      for (int64_t o = k * rows, end = std::min(outer, o + rows); o < end; ++o) {
        const int64_t base = (o * C + c) * inner;
        for (int64_t i = base; i < base + inner; ++i) Elem<T, kGgi>(dy, x, g, gdy, gx, i, cf);
      }
    });
  } else {
    ParallelFor(nchunks, work, [&](int64_t k) {
      for (int64_t o = k * rows, end = std::min(outer, o + rows); o < end; ++o) {
        const int64_t base = o * C;
        for (int64_t c = 0; c < C; ++c) Elem<T, kGgi>(dy, x, g, gdy, gx, base + c, coefs[c]);
      }
    });
  }
}

template <typename T>
int Compute(const DoubleBackwardArgs &a, bool ggi) {
  const int64_t C = a.channels;
  const int64_t n = a.outer * a.inner;
  const std::vector<double> w = LoadChannel(a.weight, C, 1.0);
  const std::vector<double> ggw = a.mask[1] ? LoadChannel(a.grad_grad_weight, C, 0.0) : std::vector<double>(C, 0.0);
  const std::vector<double> ggb = a.mask[2] ? LoadChannel(a.grad_grad_bias, C, 0.0) : std::vector<double>(C, 0.0);
  std::vector<double> mean, s;
  if (a.training) {
    mean = LoadChannel(a.save_mean, C, 0.0);
    s = LoadChannel(a.save_invstd, C, 1.0);
  } else {
    mean = LoadChannel(a.running_mean, C, 0.0);
    s = LoadChannel(a.running_var, C, 1.0);
    for (double &v : s) v = 1.0 / std::sqrt(v + a.eps);
  }
  std::vector<double> sums(C * kNumSums, 0.0);
  // Inference needs only sum(ggI * dy), for grad_weight; no sweep without ggI.
  if (n > 0 && (a.training || ggi)) {
    if (ggi) ChannelSums<T, true>(a, mean, &sums); else ChannelSums<T, false>(a, mean, &sums);
  }
  std::vector<Coefs> coefs(C);
  for (int64_t c = 0; c < C; ++c) {
    const double *S = &sums[c * kNumSums];
    const double sc = s[c], ws = w[c] * sc;
    Coefs &k = coefs[c];
    k.mean = mean[c];
    k.a1 = ws;
    double gw;
    if (!a.training) {
      k.a2 = ggw[c] * sc;
      k.a0 = ggb[c];
      k.b1 = ggw[c] * sc;
      k.b2 = k.b3 = k.b0 = 0.0;
      gw = S[kGDy] * sc;
    } else if (n == 0) {
      k = Coefs{mean[c], 0, 0, 0, 0, 0, 0, 0};
      gw = 0.0;
    } else {
      const double inv_n = 1.0 / static_cast<double>(n);
      const double m_dy = S[kDy] * inv_n, m_dyx = S[kDyXmu] * sc * inv_n;
      const double m_g = S[kG] * inv_n, m_gx = S[kGXmu] * sc * inv_n, m_gdy = S[kGDy] * inv_n;
      const double cov = m_gdy - m_g * m_dy - m_gx * m_dyx;
      gw = static_cast<double>(n) * sc * cov;
      // dL/dxhat_j = P*dy_j - Q*ggI_j (see batch_norm_double_backward_ref)
      const double P = ggw[c] - ws * m_gx, Q = ws * m_dyx;
      k.a2 = P * sc;  // grad_grad_out's (x - mean) coefficient: (ggW - w*s*mean(ggI*xhat)) * s
      k.a0 = ggb[c] - ws * m_g;
      k.b1 = sc * P;
      k.b2 = -sc * Q;
      k.b3 = (-sc * sc * w[c] * cov - sc * (P * m_dyx - Q * m_gx)) * sc;
      k.b0 = -sc * (P * m_dy - Q * m_g);
    }
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
  const bool ggi = a.mask[0] && a.grad_grad_input.data != nullptr;
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
