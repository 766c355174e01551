// CPU kernels: nn family (softmax, log_softmax, the two cross-entropies,
// batch_norm, layer_norm, dropout, dynamic_dropout; the norms' gradients are
// in norm_grad_kernels.cc). Float32 and float64; labels i32/i64.
//
// Reductions along an axis see the tensor as [outer, len, inner]. With inner == 1
// each row is contiguous; otherwise a block of up to kTile adjacent inner
// columns is processed together, so the inner loops stay contiguous and
// vectorised (Eigen arrays: exp and log are SIMD). The checks and attributes are
// ops/nn.h's (shared with inference and the CUDA kernels).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/double_sums.h"
#include "backends/cpu/eigen.h"
#include "backends/cpu/dropout_hash.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/simd.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/nn.h"
#include "ops/op_util.h"

namespace kgrad {
namespace cpu {
namespace {

inline constexpr int64_t kTile = 256;

template <typename T>
using Vec = Eigen::Array<T, Eigen::Dynamic, 1>;
// A column block of a strided reduction: at most kTile values, on the stack.
template <typename T>
using TileVec = Eigen::Array<T, Eigen::Dynamic, 1, 0, kTile, 1>;
template <typename T>
using ConstSeg = Eigen::Map<const Vec<T>>;
template <typename T>
using Seg = Eigen::Map<Vec<T>>;

// ----- Geometry ----------------------------------------------------------------------
using ops::AxisSplit;

// fn(in, out, width) for every block of `g`: `width` adjacent columns whose
// elements along the axis start at flat offset `in` and step by g.inner; `out` is
// the block's offset with the axis removed. Blocks run in parallel.
template <typename Fn>
void ForEachBlock(const AxisSplit& g, Fn fn) {
  int64_t tiles = (g.inner + kTile - 1) / kTile;
  int64_t width = std::min(g.inner, kTile);
  int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, g.len * width));
  ParallelFor(g.outer * tiles, grain, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      int64_t o = b / tiles, i0 = (b % tiles) * kTile;
      fn(o * g.len * g.inner + i0, o * g.inner + i0, std::min(kTile, g.inner - i0));
    }
  });
}

// Column-wise max of a block.
template <typename T>
void BlockMax(const T* x, int64_t len, int64_t stride, int64_t w, TileVec<T>* mx) {
  *mx = ConstSeg<T>(x, w);
  for (int64_t j = 1; j < len; ++j) *mx = mx->max(ConstSeg<T>(x + j * stride, w));
}

// Column-wise max and sum of exp(x - max) of a block: the stable log-sum-exp
// parts, the sum in double (see ExpSum).
template <typename T>
void BlockMaxAndSum(const T* x, int64_t len, int64_t stride, int64_t w, TileVec<T>* mx,
                    TileVec<double>* sum) {
  BlockMax(x, len, stride, w, mx);
  sum->setZero(w);
  for (int64_t j = 0; j < len; ++j) {
    *sum += Exp(ConstSeg<T>(x + j * stride, w) - *mx).template cast<double>();
  }
}

// sum_j exp(x_j - mx) in double. With one dominant logit the sum is 1 + d for a
// small d, and log(1 + d) (the loss of a confident prediction, a log_softmax
// near 0) keeps d's digits only if 1 + d does: in float32 a d of 1e-5 kept three
// (tests/precision: cross_entropy_confident).
template <typename T>
double ExpSum(ConstSeg<T> x, T mx) {
  return Exp(x - mx).template cast<double>().sum();
}

// ----- softmax / log_softmax -----------------------------------------------------------
// y may alias x: every element is read before its slot is written.
template <typename T, bool kLog>
void SoftmaxRow(const T* x, T* y, int64_t n) {
  ConstSeg<T> xr(x, n);
  Seg<T> yr(y, n);
  T mx = xr.maxCoeff();
  if constexpr (kLog) {
    const double log_sum = std::log(ExpSum(xr, mx));
    yr = (xr.template cast<double>() - (static_cast<double>(mx) + log_sum)).template cast<T>();
  } else {
    yr = Exp(xr - mx);
    const double inv = 1 / yr.template cast<double>().sum();
    yr = (yr.template cast<double>() * inv).template cast<T>();
  }
}

template <typename T, bool kLog>
void SoftmaxBlock(const T* x, T* y, int64_t len, int64_t stride, int64_t w) {
  TileVec<T> mx;
  TileVec<double> sum;
  if constexpr (kLog) {
    BlockMaxAndSum(x, len, stride, w, &mx, &sum);
    TileVec<double> log_sum = sum.log();
    for (int64_t j = 0; j < len; ++j) {
      Seg<T>(y + j * stride, w) =
          (ConstSeg<T>(x + j * stride, w).template cast<double>() - (mx.template cast<double>() + log_sum))
              .template cast<T>();
    }
  } else {
    // exp once per element: y holds exp(x - max) until the sums are known.
    BlockMax(x, len, stride, w, &mx);
    sum.setZero(w);
    for (int64_t j = 0; j < len; ++j) {
      Seg<T> yj(y + j * stride, w);
      yj = Exp(ConstSeg<T>(x + j * stride, w) - mx);
      sum += yj.template cast<double>();
    }
    TileVec<double> inv = sum.inverse();
    for (int64_t j = 0; j < len; ++j) {
      Seg<T> yj(y + j * stride, w);
      yj = (yj.template cast<double>() * inv).template cast<T>();
    }
  }
}

template <typename T, bool kLog>
void SoftmaxTyped(const T* x, T* y, const AxisSplit& g) {
  ForEachBlock(g, [&](int64_t in, int64_t, int64_t w) {
    if (g.inner == 1) {
      SoftmaxRow<T, kLog>(x + in, y + in, g.len);
    } else {
      SoftmaxBlock<T, kLog>(x + in, y + in, g.len, g.inner, w);
    }
  });
}

// softmax(x){axis} and log_softmax(x){axis}, stable: the row max is subtracted.
template <bool kLog>
absl::StatusOr<Value> Softmax(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(int axis, ops::ParseSoftmax(ctx.prim(), *x));
  const AxisSplit g = ops::SplitAtAxis(x->shape(), axis);
  // y may be x's own buffer (in place) when nothing else holds x.
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOrReuse({0}, x->dtype(), x->shape()));
  if (y.NumElements() == 0) return Value(std::move(y));
  if (x->dtype() == DType::kFloat32) {
    SoftmaxTyped<float, kLog>(x->data<float>(), y.mutable_data<float>(), g);
  } else {
    SoftmaxTyped<double, kLog>(x->data<double>(), y.mutable_data<double>(), g);
  }
  return Value(std::move(y));
}

// ----- softmax_cross_entropy -------------------------------------------------------------
// sum_j labels_j * (max - x_j + log(sum_j exp(x_j - max))): the stable form of
// -sum_j labels_j * log_softmax(x)_j.
template <typename T>
T CrossEntropyRow(const T* x, const T* labels, int64_t n) {
  ConstSeg<T> xr(x, n), lr(labels, n);
  T mx = xr.maxCoeff();
  const double log_sum = std::log(ExpSum(xr, mx));
  return static_cast<T>(
      (((static_cast<double>(mx) + log_sum) - xr.template cast<double>()) * lr.template cast<double>())
          .sum());
}

template <typename T>
void CrossEntropyBlock(const T* x, const T* labels, T* loss, int64_t len, int64_t stride,
                       int64_t w) {
  TileVec<T> mx;
  TileVec<double> sum;
  BlockMaxAndSum(x, len, stride, w, &mx, &sum);
  TileVec<double> log_sum = sum.log();
  TileVec<double> acc = TileVec<double>::Zero(w);
  for (int64_t j = 0; j < len; ++j) {
    acc += ((mx.template cast<double>() + log_sum) - ConstSeg<T>(x + j * stride, w).template cast<double>()) *
           ConstSeg<T>(labels + j * stride, w).template cast<double>();
  }
  Seg<T>(loss, w) = acc.template cast<T>();
}

template <typename T>
void CrossEntropyTyped(const T* x, const T* labels, T* loss, const AxisSplit& g) {
  if (g.len == 0) {  // an empty sum
    std::fill(loss, loss + g.outer * g.inner, T{0});
    return;
  }
  ForEachBlock(g, [&](int64_t in, int64_t out, int64_t w) {
    if (g.inner == 1) {
      loss[out] = CrossEntropyRow(x + in, labels + in, g.len);
    } else {
      CrossEntropyBlock(x + in, labels + in, loss + out, g.len, g.inner, w);
    }
  });
}

// softmax_cross_entropy(logits, labels){axis}: -sum(labels * log_softmax(logits))
// along axis.
absl::StatusOr<Value> SoftmaxCrossEntropy(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const auto in, ctx.TensorsAt<2>());
  KGRAD_ASSIGN_OR_RETURN(const ops::CrossEntropyAxis ce,
                         ops::ParseSoftmaxCrossEntropyKernel(ctx.prim(), in));
  const Tensor *x = in[0], *labels = in[1];
  KGRAD_ASSIGN_OR_RETURN(Tensor loss, ctx.Allocate(x->dtype(), ce.out));
  const AxisSplit g = ops::SplitAtAxis(x->shape(), ce.axis);
  if (x->dtype() == DType::kFloat32) {
    CrossEntropyTyped(x->data<float>(), labels->data<float>(), loss.mutable_data<float>(), g);
  } else {
    CrossEntropyTyped(x->data<double>(), labels->data<double>(), loss.mutable_data<double>(), g);
  }
  return Value(std::move(loss));
}

// ----- sparse_softmax_cross_entropy ------------------------------------------------------
template <typename L>
absl::Status CheckLabels(const L* labels, int64_t n, int64_t classes) {
  for (int64_t i = 0; i < n; ++i) {
    if (labels[i] < 0 || labels[i] >= classes) return ops::LabelOutOfRange(labels[i], i, classes);
  }
  return absl::OkStatus();
}

template <typename T, typename L>
void SparseCrossEntropyTyped(const T* x, const L* labels, T* loss, int64_t n, int64_t c) {
  int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, c));
  ParallelFor(n, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      ConstSeg<T> xr(x + i * c, c);
      T mx = xr.maxCoeff();
      loss[i] = static_cast<T>((static_cast<double>(mx) - static_cast<double>(xr[labels[i]])) +
                               std::log(ExpSum(xr, mx)));
    }
  });
}

template <typename T>
absl::Status SparseCrossEntropyLabels(const T* x, const Tensor& labels, T* loss, int64_t n,
                                      int64_t c) {
  if (labels.dtype() == DType::kInt32) {
    KGRAD_RETURN_IF_ERROR(CheckLabels(labels.data<int32_t>(), n, c));
    SparseCrossEntropyTyped(x, labels.data<int32_t>(), loss, n, c);
  } else {
    KGRAD_RETURN_IF_ERROR(CheckLabels(labels.data<int64_t>(), n, c));
    SparseCrossEntropyTyped(x, labels.data<int64_t>(), loss, n, c);
  }
  return absl::OkStatus();
}

// sparse_softmax_cross_entropy(logits[N, C], labels[N]): -log_softmax(logits)[n, labels[n]].
absl::StatusOr<Value> SparseSoftmaxCrossEntropy(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* labels, ctx.TensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(const Shape shape, ops::SparseSoftmaxCrossEntropyShape(*x, *labels));
  const int64_t n = x->dim(0), c = x->dim(1);
  KGRAD_ASSIGN_OR_RETURN(Tensor loss, ctx.Allocate(x->dtype(), shape));
  if (x->dtype() == DType::kFloat32) {
    KGRAD_RETURN_IF_ERROR(
        SparseCrossEntropyLabels(x->data<float>(), *labels, loss.mutable_data<float>(), n, c));
  } else {
    KGRAD_RETURN_IF_ERROR(
        SparseCrossEntropyLabels(x->data<double>(), *labels, loss.mutable_data<double>(), n, c));
  }
  return Value(std::move(loss));
}

// ----- Normalisation -------------------------------------------------------------------
// Statistics come from two passes in double (the mean, then the squared
// deviations), and y = (x - mean) * mul + add is evaluated in double too, so a
// float32 input with a large mean loses nothing to cancellation.
using DoubleTile = Eigen::Array<double, Eigen::Dynamic, 1, 0, kTile, 1>;

// The affine map of one normalised group: mul = rsqrt(var + eps) * scale, add = bias.
struct Affine {
  double mean, mul, add;
};

Affine GroupAffine(double mean, double sq_dev, int64_t count, double eps, double scale,
                   double bias) {
  double var = sq_dev / static_cast<double>(count);
  return {mean, scale / std::sqrt(var + eps), bias};
}

// y = (x - mean) * mul + add over one contiguous segment (y may alias x).
template <typename T>
void ApplyAffine(const T* x, T* y, int64_t n, const Affine& a) {
  Seg<T>(y, n) =
      ((ConstSeg<T>(x, n).template cast<double>() - a.mean) * a.mul + a.add).template cast<T>();
}

// Batch norm for inner > 1: one channel at a time, its `outer` contiguous segments
// of `inner` values.
template <typename T>
void BatchNormChannel(const T* x, T* y, int64_t c, const AxisSplit& g, double eps,
                      const T* scale, const T* bias) {
  auto seg = [&](int64_t o) { return x + (o * g.len + c) * g.inner; };
  double sum = 0, sq = 0;
  for (int64_t o = 0; o < g.outer; ++o) sum += SumAsDouble(seg(o), g.inner);
  int64_t count = g.outer * g.inner;
  double mean = sum / static_cast<double>(count);
  for (int64_t o = 0; o < g.outer; ++o) sq += SquaredDeviationSum(seg(o), g.inner, mean);
  Affine a = GroupAffine(mean, sq, count, eps, scale[c], bias[c]);
  for (int64_t o = 0; o < g.outer; ++o) {
    int64_t at = (o * g.len + c) * g.inner;
    ApplyAffine(x + at, y + at, g.inner, a);
  }
}

// Batch norm for inner == 1 (x is [rows, C]): a block of w adjacent channels at
// once, reading rows as contiguous pieces.
template <typename T>
void BatchNormColumns(const T* x, T* y, int64_t c0, int64_t w, const AxisSplit& g, double eps,
                      const T* scale, const T* bias) {
  auto row = [&](int64_t o) { return ConstSeg<T>(x + o * g.len + c0, w).template cast<double>(); };
  DoubleTile sum = DoubleTile::Zero(w), sq = DoubleTile::Zero(w);
  for (int64_t o = 0; o < g.outer; ++o) sum += row(o);
  DoubleTile mean = sum / static_cast<double>(g.outer);
  for (int64_t o = 0; o < g.outer; ++o) sq += (row(o) - mean).square();
  DoubleTile mul(w), add(w);
  for (int64_t j = 0; j < w; ++j) {
    Affine a = GroupAffine(mean[j], sq[j], g.outer, eps, scale[c0 + j], bias[c0 + j]);
    mul[j] = a.mul;
    add[j] = a.add;
  }
  for (int64_t o = 0; o < g.outer; ++o) {
    Seg<T>(y + o * g.len + c0, w) = ((row(o) - mean) * mul + add).template cast<T>();
  }
}

template <typename T>
void BatchNormTyped(const T* x, T* y, const T* scale, const T* bias, const AxisSplit& g,
                    double eps) {
  int64_t per_channel = std::max<int64_t>(1, g.outer * g.inner);
  if (g.inner == 1) {
    int64_t tiles = (g.len + kTile - 1) / kTile;
    int64_t grain = std::max<int64_t>(1, kParallelGrain / (per_channel * kTile));
    ParallelFor(tiles, grain, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        int64_t c0 = t * kTile;
        BatchNormColumns(x, y, c0, std::min(kTile, g.len - c0), g, eps, scale, bias);
      }
    });
    return;
  }
  ParallelFor(g.len, std::max<int64_t>(1, kParallelGrain / per_channel),
              [&](int64_t begin, int64_t end) {
                for (int64_t c = begin; c < end; ++c) {
                  BatchNormChannel(x, y, c, g, eps, scale, bias);
                }
              });
}

// batch_norm(x, scale[C], bias[C]){epsilon, axis}: training mode, batch statistics.
absl::StatusOr<Value> BatchNorm(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const auto in, ctx.TensorsAt<3>());
  KGRAD_ASSIGN_OR_RETURN(const ops::NormAttrs a, ops::ParseBatchNormKernel(ctx.prim(), in));
  const Tensor *x = in[0], *scale = in[1], *bias = in[2];
  const AxisSplit g = ops::SplitAtAxis(x->shape(), a.axis);
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOrReuse({0}, x->dtype(), x->shape()));
  if (y.NumElements() == 0) return Value(std::move(y));
  if (x->dtype() == DType::kFloat32) {
    BatchNormTyped(x->data<float>(), y.mutable_data<float>(), scale->data<float>(),
                   bias->data<float>(), g, a.epsilon);
  } else {
    BatchNormTyped(x->data<double>(), y.mutable_data<double>(), scale->data<double>(),
                   bias->data<double>(), g, a.epsilon);
  }
  return Value(std::move(y));
}

// One row of layer norm; y may alias x.
template <typename T>
void LayerNormRow(const T* x, T* y, int64_t n, double eps, const T* scale, const T* bias) {
  auto xr = ConstSeg<T>(x, n).template cast<double>();
  double mean = SumAsDouble(x, n) / static_cast<double>(n);
  double rstd = 1 / std::sqrt(SquaredDeviationSum(x, n, mean) / static_cast<double>(n) + eps);
  Seg<T>(y, n) = ((xr - mean) * rstd * ConstSeg<T>(scale, n).template cast<double>() +
                  ConstSeg<T>(bias, n).template cast<double>())
                     .template cast<T>();
}

// layer_norm(x, scale, bias){begin_norm_axis, epsilon}: per row of the trailing dims.
absl::StatusOr<Value> LayerNorm(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const auto in, ctx.TensorsAt<3>());
  KGRAD_ASSIGN_OR_RETURN(const ops::NormAttrs a, ops::ParseLayerNormKernel(ctx.prim(), in));
  const Tensor *x = in[0], *scale = in[1], *bias = in[2];
  // Each row holds the normalised dims [begin_norm_axis, rank).
  const int64_t n = NumElementsOf(absl::MakeConstSpan(x->shape()).subspan(a.axis));
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOrReuse({0}, x->dtype(), x->shape()));
  if (y.NumElements() == 0) return Value(std::move(y));
  int64_t rows = y.NumElements() / n;
  DispatchDType(x->dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_floating_point_v<T>) {
      const T* xp = x->data<T>();
      T* yp = y.mutable_data<T>();
      ParallelFor(rows, std::max<int64_t>(1, kParallelGrain / n), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          LayerNormRow(xp + r * n, yp + r * n, n, a.epsilon, scale->data<T>(), bias->data<T>());
        }
      });
    }
  });
  return Value(std::move(y));
}

// ----- dropout -------------------------------------------------------------------------
// dropout(x){rate, seed}: x * keep / (1 - rate) with the counter-based mask of
// dropout_hash.h (a dropped NaN stays NaN, as the formula says).
// Elements [begin, end). The parameters are plain values, not lambda captures, so
// the compiler sees that stores to y cannot change them and vectorises the hash.
template <typename T>
void DropoutRange(const T* x, T* y, int64_t begin, int64_t end, uint64_t seed, double rate,
                  T scale) {
  for (int64_t i = begin; i < end; ++i) {
    y[i] = x[i] * (DropoutKeep(seed, static_cast<uint64_t>(i), rate) ? scale : T{0});
  }
}

template <typename T>
void DropoutTyped(const T* x, T* y, int64_t n, uint64_t seed, double rate) {
  T scale = static_cast<T>(1.0 / (1.0 - rate));
  ParallelFor(n, kParallelGrain, [=](int64_t begin, int64_t end) {
    DropoutRange(x, y, begin, end, seed, rate, scale);
  });
}

absl::StatusOr<Value> RunDropout(KernelContext& ctx, const Tensor& x, const ops::DropoutAttrs& a) {
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOrReuse({0}, x.dtype(), x.shape()));
  if (x.dtype() == DType::kFloat32) {
    DropoutTyped(x.data<float>(), y.mutable_data<float>(), y.NumElements(), a.seed, a.rate);
  } else {
    DropoutTyped(x.data<double>(), y.mutable_data<double>(), y.NumElements(), a.seed, a.rate);
  }
  return Value(std::move(y));
}

absl::StatusOr<Value> Dropout(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const ops::DropoutAttrs a, ops::ParseDropout(ctx.prim(), *x));
  return RunDropout(ctx, *x, a);
}

// dynamic_dropout(x, rate){seed}: the same with the rate read here (the mask of
// a rate equal to dropout's attribute is dropout's).
absl::StatusOr<Value> DynamicDropout(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* rate, ctx.TensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(const ops::DropoutAttrs a, ops::ParseDynamicDropout(ctx.prim(), *x, *rate));
  return RunDropout(ctx, *x, a);
}

// random_uniform_like(x) and random_normal_like(x): element i from (seed, i); the
// elements in parallel (each depends on its index only).
absl::StatusOr<Value> RandomLike(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  const Primitive& p = ctx.prim();
  const DType t = p.GetDType("dtype");
  if (t != DType::kFloat32 && t != DType::kFloat64) {
    return absl::InvalidArgumentError(absl::StrCat(p.name(), ": attribute 'dtype' must be f32 or f64"));
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(t, x->shape()));
  const bool normal = p.id() == PrimId::kRandomNormalLike;
  const uint64_t seed = static_cast<uint64_t>(p.GetInt("seed"));
  const double a = p.GetFloat(normal ? "mean" : "low"), b = p.GetFloat(normal ? "scale" : "high");
  auto fill = [&](auto zero) {
    using T = decltype(zero);
    T* y = out.mutable_data<T>();
    ParallelFor(out.NumElements(), kParallelGrain / 16, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const uint64_t k = static_cast<uint64_t>(i);
        y[i] = static_cast<T>(normal ? NormalAt(seed, k, a, b) : UniformAt(seed, k, a, b));
      }
    });
  };
  if (t == DType::kFloat32) {
    fill(float{});
  } else {
    fill(double{});
  }
  return Value(std::move(out));
}

}  // namespace

void RegisterNnKernels(KernelTable* table) {
  table->Set(PrimId::kRandomUniformLike, RandomLike);
  table->Set(PrimId::kRandomNormalLike, RandomLike);
  table->Set(PrimId::kSoftmax, Softmax<false>);
  table->Set(PrimId::kLogSoftmax, Softmax<true>);
  table->Set(PrimId::kSoftmaxCrossEntropy, SoftmaxCrossEntropy);
  table->Set(PrimId::kSparseSoftmaxCrossEntropy, SparseSoftmaxCrossEntropy);
  table->Set(PrimId::kBatchNorm, BatchNorm);
  table->Set(PrimId::kLayerNorm, LayerNorm);
  RegisterNormGradKernels(table);
  table->Set(PrimId::kDropout, Dropout);
  table->Set(PrimId::kDynamicDropout, DynamicDropout);
}

}  // namespace cpu
}  // namespace kgrad
