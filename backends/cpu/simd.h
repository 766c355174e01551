// SIMD values for the elementwise functors (ops/elementwise_functors.h) on the CPU:
// Vec<T> holds one Eigen packet of f32 or f64 (16 or 8 lanes with AVX-512) and
// offers what a functor's formula uses: arithmetic, comparisons giving a VMask,
// Select, and the math functions. Where Eigen has a vectorised function for T
// (exp, log, and under EIGEN_FAST_MATH the float sin, cos, tanh, erf) it is used;
// the others run the C library lane by lane.
//
// Every op here is a fixed sequence of IEEE operations and intrinsics, so an
// element's result depends only on its operands, never on its position in a row;
// with FMA contraction off (-ffp-contract=off on the targets that evaluate
// functors: a contracted `a * b + c` would round once where the kernels round
// twice), the kernels and the fused evaluator agree bit for bit.
#ifndef KGRAD_BACKENDS_CPU_SIMD_H_
#define KGRAD_BACKENDS_CPU_SIMD_H_

#include <cmath>
#include <cstdint>
#include <type_traits>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "backends/cpu/eigen.h"
#include "ops/elementwise_functors.h"

namespace kgrad {
namespace cpu {

namespace ei = Eigen::internal;

template <class T>
struct VMask;

template <class T>
struct Vec {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "f32 or f64");
  using Scalar = T;
  using Packet = typename ei::packet_traits<T>::type;
  static constexpr int kSize = ei::unpacket_traits<Packet>::size;

  Packet p;

  Vec() = default;
  Vec(T s) : p(ei::pset1<Packet>(s)) {}  // NOLINT: formulas write V(1) for a constant
  explicit Vec(Packet q) : p(q) {}

  static Vec Load(const T* x) { return Vec(ei::ploadu<Packet>(x)); }
  void Store(T* y) const { ei::pstoreu(y, p); }
};

// Per lane all ones (true) or all zeros (false), as Eigen's comparisons give.
template <class T>
struct VMask {
  typename Vec<T>::Packet m;
};

// ----- Arithmetic ----------------------------------------------------------------------
template <class T>
Vec<T> operator+(Vec<T> a, Vec<T> b) { return Vec<T>(ei::padd(a.p, b.p)); }
template <class T>
Vec<T> operator-(Vec<T> a, Vec<T> b) { return Vec<T>(ei::psub(a.p, b.p)); }
template <class T>
Vec<T> operator*(Vec<T> a, Vec<T> b) { return Vec<T>(ei::pmul(a.p, b.p)); }
template <class T>
Vec<T> operator/(Vec<T> a, Vec<T> b) { return Vec<T>(ei::pdiv(a.p, b.p)); }
// A sign flip (Eigen's pnegate computes 0 - x, which turns -0 into +0).
template <class T>
Vec<T> operator-(Vec<T> a) { return Vec<T>(ei::pxor(a.p, ei::pset1<typename Vec<T>::Packet>(T(-0.0)))); }

// ----- Comparisons and masks (ordered: false where either side is NaN, but !=) -------
template <class T>
VMask<T> operator<(Vec<T> a, Vec<T> b) { return {ei::pcmp_lt(a.p, b.p)}; }
template <class T>
VMask<T> operator<=(Vec<T> a, Vec<T> b) { return {ei::pcmp_le(a.p, b.p)}; }
template <class T>
VMask<T> operator>(Vec<T> a, Vec<T> b) { return {ei::pcmp_lt(b.p, a.p)}; }
template <class T>
VMask<T> operator>=(Vec<T> a, Vec<T> b) { return {ei::pcmp_le(b.p, a.p)}; }
template <class T>
VMask<T> operator==(Vec<T> a, Vec<T> b) { return {ei::pcmp_eq(a.p, b.p)}; }
template <class T>
VMask<T> operator!(VMask<T> a) { return {ei::pxor(a.m, ei::ptrue(a.m))}; }
template <class T>
VMask<T> operator!=(Vec<T> a, Vec<T> b) { return !(a == b); }
template <class T>
VMask<T> operator&(VMask<T> a, VMask<T> b) { return {ei::pand(a.m, b.m)}; }
template <class T>
VMask<T> operator|(VMask<T> a, VMask<T> b) { return {ei::por(a.m, b.m)}; }
template <class T>
VMask<T> operator!=(VMask<T> a, VMask<T> b) { return {ei::pxor(a.m, b.m)}; }

// mask ? a : b per lane.
template <class T>
Vec<T> Select(VMask<T> mask, Vec<T> a, Vec<T> b) { return Vec<T>(ei::pselect(mask.m, a.p, b.p)); }

// ----- Math ------------------------------------------------------------------------------
// f(lane) for each lane, through memory: the C library where Eigen has no packet form.
template <class T, class F>
Vec<T> Lanes(Vec<T> x, F f) {
  alignas(64) T v[Vec<T>::kSize];
  x.Store(v);
  for (T& e : v) e = f(e);
  return Vec<T>::Load(v);
}
template <class T, class F>
Vec<T> Lanes(Vec<T> x, Vec<T> y, F f) {
  alignas(64) T v[Vec<T>::kSize], w[Vec<T>::kSize];
  x.Store(v);
  y.Store(w);
  for (int i = 0; i < Vec<T>::kSize; ++i) v[i] = f(v[i], w[i]);
  return Vec<T>::Load(v);
}

// Name(x): Eigen's pname where packet_traits<T>::Has says it has one, else std::name.
#define KGRAD_SIMD_MATH(Name, has, pfn, stdfn)                                     \
  template <class T>                                                                \
  Vec<T> Name(Vec<T> x) {                                                           \
    if constexpr (ei::packet_traits<T>::has) {                                      \
      return Vec<T>(ei::pfn(x.p));                                                  \
    } else {                                                                        \
      return Lanes(x, [](T e) { return stdfn(e); });                                \
    }                                                                               \
  }
KGRAD_SIMD_MATH(Log, HasLog, plog, std::log)
KGRAD_SIMD_MATH(Log1p, HasLog1p, plog1p, std::log1p)
KGRAD_SIMD_MATH(Expm1, HasExpm1, pexpm1, std::expm1)
KGRAD_SIMD_MATH(Sin, HasSin, psin, std::sin)
KGRAD_SIMD_MATH(Cos, HasCos, pcos, std::cos)
KGRAD_SIMD_MATH(Tanh, HasTanh, ptanh, std::tanh)
KGRAD_SIMD_MATH(Erf, HasErf, perf, std::erf)
KGRAD_SIMD_MATH(Abs, HasAbs, pabs, std::abs)
#undef KGRAD_SIMD_MATH

// sqrt by the instruction, which IEEE 754 makes correctly rounded (as std::sqrt):
// not Eigen's psqrt, whose float form under EIGEN_FAST_MATH is an rsqrt estimate
// with a Newton step (an ulp off, NaN at +inf, 0 for subnormals). Lane by lane
// through std::sqrt it was 7x slower (12M floats: 53 against 7.5 ms for exp), and
// slower still on negative inputs, where the C library sets errno.
template <class T>
Vec<T> Sqrt(Vec<T> x) {
  using P = typename Vec<T>::Packet;
  if constexpr (false) {
#if defined(__AVX512F__)
  } else if constexpr (std::is_same_v<P, __m512>) {
    return Vec<T>(_mm512_sqrt_ps(x.p));
  } else if constexpr (std::is_same_v<P, __m512d>) {
    return Vec<T>(_mm512_sqrt_pd(x.p));
#endif
#if defined(__AVX__)
  } else if constexpr (std::is_same_v<P, __m256>) {
    return Vec<T>(_mm256_sqrt_ps(x.p));
  } else if constexpr (std::is_same_v<P, __m256d>) {
    return Vec<T>(_mm256_sqrt_pd(x.p));
#endif
#if defined(__SSE2__)
  } else if constexpr (std::is_same_v<P, __m128>) {
    return Vec<T>(_mm_sqrt_ps(x.p));
  } else if constexpr (std::is_same_v<P, __m128d>) {
    return Vec<T>(_mm_sqrt_pd(x.p));
#endif
  } else {
    return Lanes(x, [](T e) { return std::sqrt(e); });
  }
}

// Lane by lane. The rounding functions: exact either way, and the SSE2 build has
// no packet floor.
#define KGRAD_SIMD_LANES(Name, stdfn) \
  template <class T>                   \
  Vec<T> Name(Vec<T> x) {              \
    return Lanes(x, [](T e) { return stdfn(e); }); \
  }
KGRAD_SIMD_LANES(Floor, std::floor)
KGRAD_SIMD_LANES(Ceil, std::ceil)
KGRAD_SIMD_LANES(Rint, std::nearbyint)  // the current rounding mode: to nearest even
KGRAD_SIMD_LANES(Asin, std::asin)
KGRAD_SIMD_LANES(Acos, std::acos)
KGRAD_SIMD_LANES(Atan, std::atan)
KGRAD_SIMD_LANES(Sinh, std::sinh)
KGRAD_SIMD_LANES(Cosh, std::cosh)
KGRAD_SIMD_LANES(Asinh, std::asinh)
KGRAD_SIMD_LANES(Acosh, std::acosh)
KGRAD_SIMD_LANES(Atanh, std::atanh)
#undef KGRAD_SIMD_LANES

template <class T>
Vec<T> Pow(Vec<T> a, Vec<T> b) {
  // glibc's pow, not Eigen's: faster here (~2x), and Eigen's loses the sign of
  // (-0)^odd and (-inf)^odd.
  return Lanes(a, b, [](T x, T y) { return std::pow(x, y); });
}
template <class T>
Vec<T> Fmod(Vec<T> a, Vec<T> b) {
  return Lanes(a, b, [](T x, T y) { return std::fmod(x, y); });
}
template <class T>
Vec<T> Copysign(Vec<T> a, Vec<T> b) {
  return Lanes(a, b, [](T x, T y) { return std::copysign(x, y); });
}

// e^x. Eigen 3.4's packet exp clamps its argument from below: double at -709.78,
// where every smaller x, -inf included, gives 5.6e-309 instead of a subnormal or
// 0; float's AVX2 exp at -88.38, giving 2.9e-39 down to -inf (softplus(-800)
// was 2.9e-39 on a 2-core AVX2 EPYC; the AVX-512 machines gave 0). Below kLow the argument is raised by 64 ln 2 and
// the result scaled by 2^-64, which lands on what std::exp gives: a subnormal
// or, beyond the clamp, 0.
template <class T>
Vec<T> Exp(Vec<T> x) {
  constexpr T kLow = std::is_same_v<T, double> ? T(-700) : T(-80);
  constexpr T kShift = T(64 * 0.693147180559945309417), kScale = T(0x1p-64);
  const Vec<T> low(ei::pexp((x + Vec<T>(kShift)).p));
  return Select(x < Vec<T>(kLow), low * Vec<T>(kScale), Vec<T>(ei::pexp(x.p)));
}

// Exp for Eigen array expressions (softmax, logsumexp): packets through Exp above,
// the scalar tail of an expression through the C library.
template <class T>
struct ExpFunctor {
  T operator()(T x) const { return std::exp(x); }
  template <class P>
  P packetOp(const P& p) const {
    return Exp(Vec<T>(p)).p;
  }
};
template <class A>
auto Exp(const Eigen::ArrayBase<A>& x) {
  return x.derived().unaryExpr(ExpFunctor<typename A::Scalar>());
}

// erfc(x). Float: 1 - erf(x) with Eigen's fast erf (odd to the bit, so gelu's
// x erfc(-x / sqrt 2) is x (1 + erf(x / sqrt 2)) exactly); double: the C library's,
// which keeps its relative accuracy in the tail.
template <class T>
Vec<T> Erfc(Vec<T> x) {
  if constexpr (std::is_same_v<T, float> && ei::packet_traits<T>::HasErf) {
    return Vec<T>(T(1)) - Erf(x);
  } else {
    return Lanes(x, [](T e) { return std::erfc(e); });
  }
}

}  // namespace cpu
}  // namespace kgrad

namespace Eigen {
namespace internal {
template <class T>
struct functor_traits<kgrad::cpu::ExpFunctor<T>> {
  enum { Cost = 10 * NumTraits<T>::MulCost, PacketAccess = packet_traits<T>::HasExp };
};
}  // namespace internal
}  // namespace Eigen

#endif  // KGRAD_BACKENDS_CPU_SIMD_H_
