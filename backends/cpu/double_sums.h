// Sums of float or double data accumulated in double, eight independent lanes at
// a time. A single running double sum is a chain of dependent adds (one element
// per add latency, and compilers may not reorder it); eight lanes vectorise to
// one register and keep the adds independent. The lanes are combined in a fixed
// order, so the result depends only on the data, not on alignment or threads.
#ifndef KGRAD_BACKENDS_CPU_DOUBLE_SUMS_H_
#define KGRAD_BACKENDS_CPU_DOUBLE_SUMS_H_

#include <cstdint>
#include <type_traits>

namespace kgrad {
namespace cpu {

inline constexpr int kSumLanes = 8;

// The type a sum of T is accumulated in: double for float, T otherwise. A float
// running sum over n elements is off by up to n ulps of its largest partial sum
// (a conv bias gradient over a 64 x 28 x 28 batch lost three digits), and in
// double the rounded result no longer depends on the order of the additions
// (threads, vector width, or the GPU's, whose kernels accumulate the same way).
template <typename T>
using SumAcc = std::conditional_t<std::is_same_v<T, float>, double, T>;

// sum_i f(x[i], y[i]) in double, f applied to the elements converted to double.
template <typename T, typename F>
double LaneSum2(const T* x, const T* y, int64_t n, F f) {
  double lanes[kSumLanes] = {};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    for (int k = 0; k < kSumLanes; ++k) {
      lanes[k] += f(static_cast<double>(x[i + k]), static_cast<double>(y[i + k]));
    }
  }
  double tail = 0;
  for (; i < n; ++i) tail += f(static_cast<double>(x[i]), static_cast<double>(y[i]));
  double s = 0;
  for (int k = 0; k < kSumLanes; ++k) s += lanes[k];
  return s + tail;
}

// sum_i f(x[i]) in double, f applied to each element converted to double.
template <typename T, typename F>
double LaneSum(const T* x, int64_t n, F f) {
  return LaneSum2(x, x, n, [&f](double v, double) { return f(v); });
}

// sum_i x[i].
template <typename T>
double SumAsDouble(const T* x, int64_t n) {
  return LaneSum(x, n, [](double v) { return v; });
}

// sum_i (x[i] - mean)^2: the second pass of a two-pass variance.
template <typename T>
double SquaredDeviationSum(const T* x, int64_t n, double mean) {
  return LaneSum(x, n, [mean](double v) { return (v - mean) * (v - mean); });
}

// sum_i y[i] * (x[i] - mean): batch norm's backward, sum(dy * (x - mean)).
template <typename T>
double DeviationProductSum(const T* y, const T* x, int64_t n, double mean) {
  return LaneSum2(y, x, n, [mean](double dy, double v) { return dy * (v - mean); });
}

}  // namespace cpu
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_DOUBLE_SUMS_H_
