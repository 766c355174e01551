// CPU kernels: batch_norm_grad and layer_norm_grad (the nn family's norm
// gradients; ops/nn.h checks them). With h = (x - mean) * rstd and g = dy * scale,
// over each group of the statistics (batch_norm: a channel; layer_norm: a row):
//   dx = rstd * (g - mean(g) - h * mean(g * h)),
//   dscale = sum'(dy * h), dbias = sum'(dy)   (sum' over the dims scale broadcasts along).
// Every statistic, sum and the dx expression are computed in double, from the
// float inputs, and rounded once: at two values per channel dx is a
// near-cancellation (h^2 ~ 1) that float32 steps lose (tests/precision). Each sum
// runs in one fixed order, so the bits do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/double_sums.h"
#include "backends/cpu/parallel.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/nn.h"
#include "ops/op_util.h"

namespace kgrad {
namespace cpu {
namespace {

// A group's statistics: mean and rstd = 1 / sqrt(var + eps), var biased, from two
// passes in double over `segments` segments of `len` values, `stride` apart.
struct Moments {
  double mean = 0, rstd = 0;
};

template <typename T>
Moments GroupMoments(const T* x, int64_t segments, int64_t len, int64_t stride, double eps) {
  double sum = 0, sq = 0;
  for (int64_t o = 0; o < segments; ++o) sum += SumAsDouble(x + o * stride, len);
  const double count = static_cast<double>(segments * len);
  const double mean = sum / count;
  for (int64_t o = 0; o < segments; ++o) sq += SquaredDeviationSum(x + o * stride, len, mean);
  return {mean, 1 / std::sqrt(sq / count + eps)};
}

// ----- batch_norm_grad ----------------------------------------------------------------
// Channel c of x viewed as [outer, C, inner]: its outer segments of inner values.
template <typename T>
void BatchNormGradChannel(const T* x, const T* scale, const T* dy, T* dx, T* ds, T* db,
                          int64_t c, const ops::AxisSplit& g, double eps) {
  const int64_t stride = g.len * g.inner;
  const T* xc = x + c * g.inner;
  const T* dyc = dy + c * g.inner;
  const Moments m = GroupMoments(xc, g.outer, g.inner, stride, eps);
  double sum_dy = 0, sum_dy_xc = 0;  // sum(dy), sum(dy * (x - mean))
  for (int64_t o = 0; o < g.outer; ++o) {
    const T* xs = xc + o * stride;
    const T* ys = dyc + o * stride;
    sum_dy += SumAsDouble(ys, g.inner);
    // In lanes (double_sums.h): one running double was a chain of dependent adds,
    // the kernel's bottleneck (resnet18 batch 8 step: 30 -> 18 ms in all).
    sum_dy_xc += DeviationProductSum(ys, xs, g.inner, m.mean);
  }
  const double n = static_cast<double>(g.outer * g.inner), s = scale[c];
  const double mean_g = s * sum_dy / n;
  const double mean_gh = s * sum_dy_xc * m.rstd / n;
  db[c] = static_cast<T>(sum_dy);
  ds[c] = static_cast<T>(sum_dy_xc * m.rstd);
  for (int64_t o = 0; o < g.outer; ++o) {
    const int64_t at = o * stride + c * g.inner;
    for (int64_t i = 0; i < g.inner; ++i) {
      const double h = (static_cast<double>(x[at + i]) - m.mean) * m.rstd;
      dx[at + i] = static_cast<T>(m.rstd * (s * static_cast<double>(dy[at + i]) - mean_g - h * mean_gh));
    }
  }
}

template <typename T>
void BatchNormGradTyped(const T* x, const T* scale, const T* dy, T* dx, T* ds, T* db,
                        const ops::AxisSplit& g, double eps) {
  const int64_t per_channel = std::max<int64_t>(1, g.outer * g.inner);
  ParallelFor(g.len, std::max<int64_t>(1, kParallelGrain / per_channel),
              [&](int64_t begin, int64_t end) {
                for (int64_t c = begin; c < end; ++c) {
                  BatchNormGradChannel(x, scale, dy, dx, ds, db, c, g, eps);
                }
              });
}

// batch_norm_grad(x, scale, dy){epsilon, axis} -> (dx, dscale, dbias).
absl::StatusOr<Value> BatchNormGrad(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const auto in, ctx.TensorsAt<3>());
  KGRAD_ASSIGN_OR_RETURN(const ops::NormAttrs a, ops::ParseBatchNormGradKernel(ctx.prim(), in));
  const Tensor *x = in[0], *scale = in[1], *dy = in[2];
  const ops::AxisSplit g = ops::SplitAtAxis(x->shape(), a.axis);
  // dx may take dy's buffer, or x's, when nothing else holds it: a channel's
  // sums read all of its dy and x before its dx is written, element by element
  // over the same positions, and channels are disjoint. On a network's first
  // layers this is a whole activation less at the backward's end.
  KGRAD_ASSIGN_OR_RETURN(Tensor dx, ctx.AllocateOrReuse({2, 0}, x->dtype(), x->shape()));
  KGRAD_ASSIGN_OR_RETURN(Tensor ds, ctx.Allocate(x->dtype(), scale->shape()));
  KGRAD_ASSIGN_OR_RETURN(Tensor db, ctx.Allocate(x->dtype(), scale->shape()));
  if (g.outer * g.inner == 0) {  // every channel empty: sums of nothing
    KGRAD_ASSIGN_OR_RETURN(ds, Tensor::Zeros(x->dtype(), scale->shape()));
    KGRAD_ASSIGN_OR_RETURN(db, Tensor::Zeros(x->dtype(), scale->shape()));
  } else if (x->dtype() == DType::kFloat32) {
    BatchNormGradTyped(x->data<float>(), scale->data<float>(), dy->data<float>(),
                       dx.mutable_data<float>(), ds.mutable_data<float>(), db.mutable_data<float>(),
                       g, a.epsilon);
  } else {
    BatchNormGradTyped(x->data<double>(), scale->data<double>(), dy->data<double>(),
                       dx.mutable_data<double>(), ds.mutable_data<double>(),
                       db.mutable_data<double>(), g, a.epsilon);
  }
  return Value::Tuple({Value(std::move(dx)), Value(std::move(ds)), Value(std::move(db))});
}

// ----- layer_norm_grad ----------------------------------------------------------------
// Row r of x viewed as [rows, n]: dx of the row, and its moments for the column sums.
template <typename T>
Moments LayerNormGradRow(const T* x, const T* scale, const T* dy, T* dx, int64_t n, double eps) {
  const Moments m = GroupMoments(x, 1, n, n, eps);
  double sum_g = 0, sum_g_xc = 0;  // sum(g), sum(g * (x - mean))
  for (int64_t k = 0; k < n; ++k) {
    const double gk = static_cast<double>(dy[k]) * static_cast<double>(scale[k]);
    sum_g += gk;
    sum_g_xc += gk * (static_cast<double>(x[k]) - m.mean);
  }
  const double mean_g = sum_g / static_cast<double>(n);
  const double mean_gh = sum_g_xc * m.rstd / static_cast<double>(n);
  for (int64_t k = 0; k < n; ++k) {
    const double h = (static_cast<double>(x[k]) - m.mean) * m.rstd;
    const double gk = static_cast<double>(dy[k]) * static_cast<double>(scale[k]);
    dx[k] = static_cast<T>(m.rstd * (gk - mean_g - h * mean_gh));
  }
  return m;
}

// dscale[k] = sum_r dy[r, k] h[r, k], dbias[k] = sum_r dy[r, k]: columns in
// parallel blocks, each summed over the rows in order.
template <typename T>
void LayerNormGradColumns(const T* x, const T* dy, T* ds, T* db, int64_t rows, int64_t n,
                          const std::vector<Moments>& m) {
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, rows * kBlock));
  ParallelFor(blocks, grain, [&](int64_t begin, int64_t end) {
    std::vector<double> sum_dy(kBlock), sum_dyh(kBlock);
    for (int64_t b = begin; b < end; ++b) {
      const int64_t k0 = b * kBlock, w = std::min(kBlock, n - k0);
      std::fill(sum_dy.begin(), sum_dy.end(), 0.0);
      std::fill(sum_dyh.begin(), sum_dyh.end(), 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        const T* xr = x + r * n + k0;
        const T* yr = dy + r * n + k0;
        for (int64_t k = 0; k < w; ++k) {
          const double d = static_cast<double>(yr[k]);
          sum_dy[k] += d;
          sum_dyh[k] += d * (static_cast<double>(xr[k]) - m[r].mean) * m[r].rstd;
        }
      }
      for (int64_t k = 0; k < w; ++k) {
        db[k0 + k] = static_cast<T>(sum_dy[k]);
        ds[k0 + k] = static_cast<T>(sum_dyh[k]);
      }
    }
  });
}

template <typename T>
void LayerNormGradTyped(const T* x, const T* scale, const T* dy, T* dx, T* ds, T* db, int64_t rows,
                        int64_t n, double eps) {
  std::vector<Moments> m(rows);
  ParallelFor(rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, n)),
              [&](int64_t b, int64_t e) {
                for (int64_t r = b; r < e; ++r) {
                  m[r] = LayerNormGradRow(x + r * n, scale, dy + r * n, dx + r * n, n, eps);
                }
              });
  LayerNormGradColumns(x, dy, ds, db, rows, n, m);
}

// layer_norm_grad(x, scale, dy){begin_norm_axis, epsilon} -> (dx, dscale, dbias).
absl::StatusOr<Value> LayerNormGrad(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const auto in, ctx.TensorsAt<3>());
  KGRAD_ASSIGN_OR_RETURN(const ops::NormAttrs a, ops::ParseLayerNormGradKernel(ctx.prim(), in));
  const Tensor *x = in[0], *scale = in[1], *dy = in[2];
  const int64_t n = NumElementsOf(absl::MakeConstSpan(x->shape()).subspan(a.axis));
  KGRAD_ASSIGN_OR_RETURN(Tensor dx, ctx.Allocate(x->dtype(), x->shape()));
  KGRAD_ASSIGN_OR_RETURN(Tensor ds, ctx.Allocate(x->dtype(), scale->shape()));
  KGRAD_ASSIGN_OR_RETURN(Tensor db, ctx.Allocate(x->dtype(), scale->shape()));
  const int64_t rows = n == 0 ? 0 : x->NumElements() / n;
  if (x->dtype() == DType::kFloat32) {
    LayerNormGradTyped(x->data<float>(), scale->data<float>(), dy->data<float>(),
                       dx.mutable_data<float>(), ds.mutable_data<float>(), db.mutable_data<float>(),
                       rows, n, a.epsilon);
  } else {
    LayerNormGradTyped(x->data<double>(), scale->data<double>(), dy->data<double>(),
                       dx.mutable_data<double>(), ds.mutable_data<double>(),
                       db.mutable_data<double>(), rows, n, a.epsilon);
  }
  return Value::Tuple({Value(std::move(dx)), Value(std::move(ds)), Value(std::move(db))});
}

}  // namespace

void RegisterNormGradKernels(KernelTable* table) {
  table->Set(PrimId::kBatchNormGrad, BatchNormGrad);
  table->Set(PrimId::kLayerNormGrad, LayerNormGrad);
}

}  // namespace cpu
}  // namespace kgrad
