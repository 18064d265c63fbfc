// CPU kernels of the two SyncBatchNorm backward steps (bn_sync.h; entry
// points: bn_sync_entry.cpp; prototypes: op_def/batch_norm_reduce_backward.yaml,
// op_def/batch_norm_elemt_backward.yaml).
//
// Activations are viewed as [outer, C, inner] (tensor.h). Both steps split
// the work into tasks whose boundaries depend only on the shape
// (scalar_kernel.h OuterChunks); every per-channel sum adds its task partials
// in task order, so results are bitwise identical for any thread count.
// Accumulation is in double.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "bn_spec.gen.h"
#include "num_threads.h"
#include "bn_sync.h"
#include "element_io.h"
#include "scalar_kernel.h"

namespace bn_grad {
namespace sync {
namespace {

// --- reduce step ---------------------------------------------------------
// Sums of one contiguous run of n elements: 4 independent accumulators, fixed order.
template <typename T>
inline void RunSums(const T *dy, const T *x, int64_t n, double mean, double *s_dy, double *s_xmu) {
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    double d0 = ToDouble(dy[i]), d1 = ToDouble(dy[i + 1]), d2 = ToDouble(dy[i + 2]), d3 = ToDouble(dy[i + 3]);
    a0 += d0; a1 += d1; a2 += d2; a3 += d3;
    b0 += d0 * (ToDouble(x[i]) - mean);
    b1 += d1 * (ToDouble(x[i + 1]) - mean);
    b2 += d2 * (ToDouble(x[i + 2]) - mean);
    b3 += d3 * (ToDouble(x[i + 3]) - mean);
  }
  for (; i < n; ++i) {
    double d = ToDouble(dy[i]);
    a0 += d;
    b0 += d * (ToDouble(x[i]) - mean);
  }
  *s_dy += (a0 + a1) + (a2 + a3);
  *s_xmu += (b0 + b1) + (b2 + b3);
}

template <typename T>
void ReduceSums(const ReduceArgs &a, const std::vector<double> &mean, std::vector<double> *sum_dy,
                std::vector<double> *sum_xmu) {
  const int64_t C = a.channels;
  const T *dy = static_cast<const T *>(a.grad_out.data);
  const T *x = static_cast<const T *>(a.input.data);
  const OuterChunks split(a);
  // partial[k * C + c]: sums of chunk k for channel c
  std::vector<double> p_dy(split.nchunks * C, 0.0), p_xmu(split.nchunks * C, 0.0);
  if (split.by_channel()) {
    ParallelTasks(split.tasks(), split.work(), [&](int64_t t) {
      double s = 0, sx = 0;
      split.ForRuns(t, [&](int64_t c, int64_t o) { RunSums(dy + o, x + o, a.inner, mean[c], &s, &sx); });
      p_dy[t] = s;
      p_xmu[t] = sx;
    });
  } else {
    ParallelTasks(split.tasks(), split.work(), [&](int64_t k) {
      double *s = &p_dy[k * C], *sx = &p_xmu[k * C];
      split.ForRows(k, [&](int64_t o) {
        const T *dyr = dy + o, *xr = x + o;
        for (int64_t c = 0; c < C; ++c) {
          const double d = ToDouble(dyr[c]);
          s[c] += d;
          sx[c] += d * (ToDouble(xr[c]) - mean[c]);
        }
      });
    });
  }
  sum_dy->assign(C, 0.0);
  sum_xmu->assign(C, 0.0);
  for (int64_t k = 0; k < split.nchunks; ++k) {
    for (int64_t c = 0; c < C; ++c) {
      (*sum_dy)[c] += p_dy[k * C + c];
      (*sum_xmu)[c] += p_xmu[k * C + c];
    }
  }
}

// --- elementwise step ----------------------------------------------------
template <typename T>
void ElemtKernel(const ElemtArgs &a, const std::vector<double> &mean, const std::vector<double> &k1,
                 const std::vector<double> &k2, const std::vector<double> &scale) {
  const int64_t C = a.channels, inner = a.inner;
  const T *dy = static_cast<const T *>(a.grad_out.data);
  const T *x = static_cast<const T *>(a.input.data);
  T *gi = static_cast<T *>(a.grad_input.data);
  const OuterChunks split(a);
  if (split.by_channel()) {
    ParallelTasks(split.tasks(), split.work(), [&](int64_t t) {
      split.ForRuns(t, [&](int64_t c, int64_t base) {
        const double m = mean[c], b1 = k1[c], b2 = k2[c], s = scale[c];
        for (int64_t i = 0; i < inner; ++i) {
          gi[base + i] = FromDouble<T>((ToDouble(dy[base + i]) - b1 - (ToDouble(x[base + i]) - m) * b2) * s);
        }
      });
    });
  } else {
    ParallelTasks(split.tasks(), split.work(), [&](int64_t k) {
      split.ForRows(k, [&](int64_t base) {
        for (int64_t c = 0; c < C; ++c) {
          gi[base + c] = FromDouble<T>((ToDouble(dy[base + c]) - k1[c] - (ToDouble(x[base + c]) - mean[c]) * k2[c]) *
                                       scale[c]);
        }
      });
    });
  }
}

template <template <typename> class F, typename... Args>
int Dispatch(DType d, Args &&...args) {
  switch (d) {
    case DType::kFloat16: F<Half>()(args...); return 0;
    case DType::kBFloat16: F<BF16>()(args...); return 0;
    case DType::kFloat32: F<float>()(args...); return 0;
    case DType::kFloat64: F<double>()(args...); return 0;
    default: return 1;
  }
}

template <typename T>
struct ReduceSumsF {
  void operator()(const ReduceArgs &a, const std::vector<double> &m, std::vector<double> *s, std::vector<double> *sx) {
    ReduceSums<T>(a, m, s, sx);
  }
};

template <typename T>
struct ElemtF {
  void operator()(const ElemtArgs &a, const std::vector<double> &m, const std::vector<double> &k1,
                  const std::vector<double> &k2, const std::vector<double> &sc) {
    ElemtKernel<T>(a, m, k1, k2, sc);
  }
};

}  // namespace

int ReduceBackward(const ReduceArgs &a) {
  const CallThreads threads(a, a.grad_out.dtype);
  const int64_t C = a.channels;
  const bool need_dy = a.input_g || a.bias_g, need_xmu = a.input_g || a.weight_g;
  if (C == 0 || !(need_dy || need_xmu)) return 0;
  const std::vector<double> mean = LoadChannel(a.mean, C, 0.0);
  const std::vector<double> invstd = LoadChannel(a.invstd, C, 1.0);
  std::vector<double> sum_dy(C, 0.0), sum_xmu(C, 0.0);
  if (a.outer * a.inner > 0) {
    if (Dispatch<ReduceSumsF>(a.grad_out.dtype, a, mean, &sum_dy, &sum_xmu) != 0) return 1;
  }
  for (int64_t c = 0; c < C; ++c) {
    if (a.input_g) {
      StoreAny(a.sum_dy.data, a.sum_dy.dtype, c, sum_dy[c]);
      StoreAny(a.sum_dy_xmu.data, a.sum_dy_xmu.dtype, c, sum_xmu[c]);
    }
    if (a.weight_g) StoreAny(a.grad_weight.data, a.grad_weight.dtype, c, sum_xmu[c] * invstd[c]);
    if (a.bias_g) StoreAny(a.grad_bias.data, a.grad_bias.dtype, c, sum_dy[c]);
  }
  return 0;
}

int ElemtBackward(const ElemtArgs &a) {
  const CallThreads threads(a, a.grad_out.dtype);
  const int64_t C = a.channels;
  if (C == 0 || a.outer * a.inner == 0) return 0;
  double n = 0.0;
  for (int64_t r = 0; r < a.num_counts; ++r) {
    switch (a.counter_dtype) {
      case CountDType::kInt32: n += static_cast<const int32_t *>(a.counter)[r]; break;
      case CountDType::kInt64: n += static_cast<double>(static_cast<const int64_t *>(a.counter)[r]); break;
      case CountDType::kFloat: n += LoadAny(a.counter, a.counter_float, r); break;
    }
  }
  const std::vector<double> mean = LoadChannel(a.mean, C, 0.0);
  const std::vector<double> invstd = LoadChannel(a.invstd, C, 1.0);
  const std::vector<double> w =
      LoadChannel(a.weight, C, spec::batch_norm_elemt_backward::kAbsentWeight);
  const std::vector<double> sdy = LoadChannel(a.sum_dy, C, 0.0);
  const std::vector<double> sxmu = LoadChannel(a.sum_dy_xmu, C, 0.0);
  std::vector<double> k1(C), k2(C), scale(C);
  const double inv_n = n > 0 ? 1.0 / n : 0.0;
  for (int64_t c = 0; c < C; ++c) {
    k1[c] = sdy[c] * inv_n;
    k2[c] = invstd[c] * invstd[c] * sxmu[c] * inv_n;
    scale[c] = invstd[c] * w[c];
  }
  return Dispatch<ElemtF>(a.grad_out.dtype, a, mean, k1, k2, scale);
}

}  // namespace sync
}  // namespace bn_grad
