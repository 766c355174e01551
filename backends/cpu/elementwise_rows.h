// The CPU's loops over one row of an elementwise op, shared by the kernels
// (elementwise_kernels.cc) and the fused evaluator (fused_elementwise_kernel.cc):
// both compute through these, so a fused run gives the kernels' results bit for
// bit. f32 and f64 go through SIMD values (simd.h), every element through a full
// packet: the last partial packet of a row is padded, so an element's result never
// depends on where a row starts or ends. Other dtypes, and bool results, take a
// plain loop the compiler vectorises.
#ifndef KGRAD_BACKENDS_CPU_ELEMENTWISE_ROWS_H_
#define KGRAD_BACKENDS_CPU_ELEMENTWISE_ROWS_H_

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backends/cpu/parallel.h"
#include "backends/cpu/simd.h"
#include "core/half.h"
#include "ops/elementwise_functors.h"

namespace kgrad {
namespace cpu {

// Bool tensors are read and written as uint8_t (always 0 or 1): GCC does not
// vectorise loops that load `bool`.
template <typename T>
using Elem = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
// What an op computes in: float for the 16-bit float storage types (each result
// rounded once on the way back), the element type otherwise.
template <typename T>
using Compute =
    std::conditional_t<std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>, float, T>;
// Whether rows of T go through SIMD values.
template <typename T>
inline constexpr bool kSimd = std::is_same_v<T, float> || std::is_same_v<T, double>;

// An operand of a row: contiguous (stride 1) or one element repeated (stride 0).
template <typename T>
struct RowOperand {
  const T* p;
  bool repeated;
};

// Elements per parallel chunk: transcendental functions cost ~10x a cheap op,
// so they are spread over threads at a smaller size.
template <typename F>
constexpr int64_t GrainOf() {
  return std::max<int64_t>(1, kParallelGrain / F::kCost);
}

// out[0, n) = fn(operand packets...) over packets of T, N operands (1, 2 or 4).
template <typename T, typename Fn, size_t N>
void PacketRow(const RowOperand<T> (&ops)[N], T* out, int64_t n, Fn fn) {
  using V = Vec<T>;
  constexpr int kW = V::kSize;
  V splat[N];
  for (size_t k = 0; k < N; ++k) splat[k] = ops[k].repeated ? V(*ops[k].p) : V(T(0));
  auto at = [&](size_t k, int64_t i) { return ops[k].repeated ? splat[k] : V::Load(ops[k].p + i); };
  int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    if constexpr (N == 1) fn(at(0, i)).Store(out + i);
    if constexpr (N == 2) fn(at(0, i), at(1, i)).Store(out + i);
    if constexpr (N == 4) fn(at(0, i), at(1, i), at(2, i), at(3, i)).Store(out + i);
  }
  if (i == n) return;
  // The last partial packet: operands copied into zero-padded packets.
  const int64_t left = n - i;
  alignas(64) T buf[N][kW] = {};
  V v[N];
  for (size_t k = 0; k < N; ++k) {
    if (ops[k].repeated) {
      v[k] = splat[k];
    } else {
      std::copy(ops[k].p + i, ops[k].p + n, buf[k]);
      v[k] = V::Load(buf[k]);
    }
  }
  alignas(64) T res[kW];
  if constexpr (N == 1) fn(v[0]).Store(res);
  if constexpr (N == 2) fn(v[0], v[1]).Store(res);
  if constexpr (N == 4) fn(v[0], v[1], v[2], v[3]).Store(res);
  std::copy(res, res + left, out + i);
}

// y[i] = F(x[i]) for i < n (y may be x). T is the element type as stored (Elem).
template <typename F, typename T, typename R>
void UnaryRow(const ew::Attrs& at, const T* x, R* y, int64_t n) {
  if constexpr (kSimd<T> && std::is_same_v<T, R>) {
    const RowOperand<T> ops[1] = {{x, false}};
    PacketRow(ops, y, n, [&](Vec<T> v) { return F::Apply(at, v); });
  } else {
    using C = Compute<T>;
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<R>(F::Apply(at, static_cast<C>(x[i])));
  }
}

// out[i] = F(a[i * sa], b[i * sb]) for i < n, each stride 0 or 1 (out may be a or b).
template <typename F, typename T, typename R>
void BinaryRow(const ew::Attrs& at, const T* a, int64_t sa, const T* b, int64_t sb, R* out,
               int64_t n) {
  if constexpr (kSimd<T> && std::is_same_v<T, R>) {
    const RowOperand<T> ops[2] = {{a, sa == 0}, {b, sb == 0}};
    PacketRow(ops, out, n, [&](Vec<T> u, Vec<T> v) { return F::Apply(at, u, v); });
  } else {
    using C = Compute<T>;
    auto f = [&](T u, T v) {
      return static_cast<R>(F::Apply(at, static_cast<C>(u), static_cast<C>(v)));
    };
    // Four plain loops, each vectorisable.
    if (sa != 0 && sb != 0) {
      for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
    } else if (sa != 0) {
      const T v = *b;
      for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], v);
    } else if (sb != 0) {
      const T u = *a;
      for (int64_t i = 0; i < n; ++i) out[i] = f(u, b[i]);
    } else {
      std::fill(out, out + n, f(*a, *b));
    }
  }
}

// out[i] = a[i] * b[i] + c[i] * d[i], contiguous rows of f32 or f64: what add
// after two muls gives (each product rounded, then the sum).
template <typename T>
void MulAddRow(const T* a, const T* b, const T* c, const T* d, T* out, int64_t n) {
  const ew::Attrs none;
  const RowOperand<T> ops[4] = {{a, false}, {b, false}, {c, false}, {d, false}};
  PacketRow(ops, out, n, [&](Vec<T> p, Vec<T> q, Vec<T> r, Vec<T> s) {
    return ew::AddOp::Apply(none, ew::MulOp::Apply(none, p, q), ew::MulOp::Apply(none, r, s));
  });
}

}  // namespace cpu
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_ELEMENTWISE_ROWS_H_
