// The formula of each elementwise primitive, written once: ew::<Name>Op for each
// row of ops/elementwise_table.inc. Everything that computes an elementwise op
// evaluates these functors, each with its own kind of value V:
//
//   the CPU kernels and the fused evaluator   V = cpu::Vec<T> (SIMD, Eigen's packet
//                                             maths) for f32/f64, T for the others
//                                             (backends/cpu/simd.h)
//   the CUDA kernels                          V = T on the device (CUDA's libm)
//   the ONNX export of ops with no ONNX twin  V = a symbolic value that writes ONNX
//                                             nodes (proto/onnx/onnx_formula.h)
//
// so a fused run computes bit for bit what the kernels compute, and the CUDA kernels
// and the export compute the same expressions. A functor is a struct with
//
//   template <class V> static V Apply(const Attrs& at, V x [, V y [, V z]]);
//   template <class P> static Attrs Read(const P& prim);   // only ops with attributes
//   static constexpr int kCost;                             // relative cost per element
//
// Apply is written with what every V offers: + - * / and unary -, comparisons
// (== != < <= > >=; `a != a` is a NaN test) giving a mask (bool for scalars)
// combined with & | ! and != (exclusive or), Select(mask, a, b), V(c) for a
// constant, the math functions below (Exp, Tanh, ...: found by argument-dependent
// lookup for non-scalar V), and Wrap* for integer arithmetic. Read runs on the host
// only (P is the Primitive) and packs the op's attributes into Attrs.
//
// This header depends on nothing of kgrad's, so that nvcc compiles it for the device.
#ifndef KGRAD_OPS_ELEMENTWISE_FUNCTORS_H_
#define KGRAD_OPS_ELEMENTWISE_FUNCTORS_H_

#include <math.h>

#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define KGRAD_EW_HD __host__ __device__
#else
#define KGRAD_EW_HD
#endif

namespace kgrad {
namespace ew {

// An application's attributes, read once on the host (Read) and passed by value to
// every element: up to two numbers (floats, or flags and enums as 0, 1, ...).
struct Attrs {
  double a = 0;
  double b = 0;
};

// ----- Values ------------------------------------------------------------------------
// The element type a value V holds: V for scalars; a SIMD or symbolic V says
// `using Scalar = ...`.
template <class V, class = void>
struct ScalarOfT {
  using type = V;
};
template <class V>
struct ScalarOfT<V, std::void_t<typename V::Scalar>> {
  using type = typename V::Scalar;
};
template <class V>
using ScalarOf = typename ScalarOfT<V>::type;
template <class V>
inline constexpr bool kIntegral =
    std::is_integral_v<ScalarOf<V>> && !std::is_same_v<ScalarOf<V>, bool>;
template <class V>
inline constexpr bool kSignedIntegral = kIntegral<V> && std::is_signed_v<ScalarOf<V>>;

// mask ? a : b, elementwise. Both sides are values already computed.
template <class T>
KGRAD_EW_HD inline T Select(bool mask, T a, T b) {
  return mask ? a : b;
}

// ----- Integer arithmetic wraps (two's complement) -------------------------------------
// Signed overflow is undefined in C++; through an unsigned type at least as wide
// as unsigned int it wraps, and loops vectorise just the same (narrower types
// would be promoted to int first, where uint16 * uint16 can overflow). Floats, and
// SIMD or symbolic values, are computed as they are.
template <class T, bool = std::is_integral_v<T> && !std::is_same_v<T, bool>>
struct WrapTypeOf {
  using type = T;
};
template <class T>
struct WrapTypeOf<T, true> {
  using type = std::make_unsigned_t<std::common_type_t<T, unsigned>>;
};
template <class T>
using WrapType = typename WrapTypeOf<T>::type;

template <class V>
KGRAD_EW_HD inline V WrapAdd(V a, V b) {
  if constexpr (std::is_integral_v<V>) {
    return static_cast<V>(static_cast<WrapType<V>>(a) + static_cast<WrapType<V>>(b));
  } else {
    return a + b;
  }
}
template <class V>
KGRAD_EW_HD inline V WrapSub(V a, V b) {
  if constexpr (std::is_integral_v<V>) {
    return static_cast<V>(static_cast<WrapType<V>>(a) - static_cast<WrapType<V>>(b));
  } else {
    return a - b;
  }
}
template <class V>
KGRAD_EW_HD inline V WrapMul(V a, V b) {
  if constexpr (std::is_integral_v<V>) {
    return static_cast<V>(static_cast<WrapType<V>>(a) * static_cast<WrapType<V>>(b));
  } else {
    return a * b;
  }
}
// -x; for floats a sign flip (0 - x would turn -0 into +0).
template <class V>
KGRAD_EW_HD inline V WrapNeg(V x) {
  if constexpr (std::is_integral_v<V>) {
    return WrapSub(V(0), x);
  } else {
    return -x;
  }
}

// ----- Scalar maths (host: the C library; device: CUDA's) -------------------------------
// Name(x) in x's precision. The SIMD and symbolic values declare their own.
#define KGRAD_EW_MATH1(Name, f32, f64)                                   \
  KGRAD_EW_HD inline float Name(float x) { return ::f32(x); }            \
  KGRAD_EW_HD inline double Name(double x) { return ::f64(x); }
#define KGRAD_EW_MATH2(Name, f32, f64)                                   \
  KGRAD_EW_HD inline float Name(float x, float y) { return ::f32(x, y); } \
  KGRAD_EW_HD inline double Name(double x, double y) { return ::f64(x, y); }
KGRAD_EW_MATH1(Exp, expf, exp)
KGRAD_EW_MATH1(Log, logf, log)
KGRAD_EW_MATH1(Log1p, log1pf, log1p)
KGRAD_EW_MATH1(Expm1, expm1f, expm1)
KGRAD_EW_MATH1(Sin, sinf, sin)
KGRAD_EW_MATH1(Cos, cosf, cos)
KGRAD_EW_MATH1(Tanh, tanhf, tanh)
KGRAD_EW_MATH1(Sqrt, sqrtf, sqrt)
KGRAD_EW_MATH1(Erf, erff, erf)
KGRAD_EW_MATH1(Erfc, erfcf, erfc)
KGRAD_EW_MATH1(Abs, fabsf, fabs)
KGRAD_EW_MATH1(Floor, floorf, floor)
KGRAD_EW_MATH1(Ceil, ceilf, ceil)
KGRAD_EW_MATH1(Rint, rintf, rint)  // halves to even (the default rounding mode)
KGRAD_EW_MATH1(Asin, asinf, asin)
KGRAD_EW_MATH1(Acos, acosf, acos)
KGRAD_EW_MATH1(Atan, atanf, atan)
KGRAD_EW_MATH1(Sinh, sinhf, sinh)
KGRAD_EW_MATH1(Cosh, coshf, cosh)
KGRAD_EW_MATH1(Asinh, asinhf, asinh)
KGRAD_EW_MATH1(Acosh, acoshf, acosh)
KGRAD_EW_MATH1(Atanh, atanhf, atanh)
KGRAD_EW_MATH2(Pow, powf, pow)
KGRAD_EW_MATH2(Fmod, fmodf, fmod)
KGRAD_EW_MATH2(Copysign, copysignf, copysign)
#undef KGRAD_EW_MATH1
#undef KGRAD_EW_MATH2

// Shifts of unsigned integers; by the width or more they give 0 (C++ leaves that
// undefined; NumPy gives 0).
template <class T>
KGRAD_EW_HD inline T ShiftLeft(T a, T b) {
  return b >= sizeof(T) * 8 ? T(0) : static_cast<T>(a << b);
}
template <class T>
KGRAD_EW_HD inline T ShiftRight(T a, T b) {
  return b >= sizeof(T) * 8 ? T(0) : static_cast<T>(a >> b);
}

// a % b with the sign of a (C's fmod and %). An integer b == 0 is refused before
// any kernel runs; MIN % -1 overflows in C++, and its value is 0.
template <class V>
KGRAD_EW_HD inline V TruncMod(V a, V b) {
  if constexpr (kSignedIntegral<V>) {
    return b == V(-1) ? V(0) : static_cast<V>(a % b);
  } else if constexpr (kIntegral<V>) {
    return static_cast<V>(a % b);
  } else {
    return Fmod(a, b);
  }
}

// ----- The functors ------------------------------------------------------------------
// What every functor inherits: no attributes, the cost of a cheap op.
struct Map {
  static constexpr int kCost = 1;
  template <class P>
  static Attrs Read(const P&) {
    return {};
  }
};
// Transcendental functions cost ~10x a cheap op per element, so they are worth
// spreading over threads at a smaller size.
struct CostlyMap : Map {
  static constexpr int kCost = 8;
};

// Unary maps. Piecewise-constant and sign-like maps keep NaN (x < 0 and x > 0 are
// both false for it).
struct NegOp : Map {  // -x
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return WrapNeg(x); }
};
struct ExpOp : CostlyMap {  // e^x
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return Exp(x); }
};
struct LogOp : CostlyMap {  // ln x (-inf at 0, NaN below)
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return Log(x); }
};
struct Log1pOp : CostlyMap {  // ln(1 + x), accurate near 0
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return Log1p(x); }
};
struct Expm1Op : CostlyMap {  // e^x - 1, accurate near 0
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return Expm1(x); }
};
struct SinOp : CostlyMap {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return Sin(x); }
};
struct CosOp : CostlyMap {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return Cos(x); }
};
struct TanhOp : CostlyMap {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return Tanh(x); }
};
// 1 / (1 + e^-x): e^-x overflows to inf for very negative x and 1/inf = 0, the
// right limit; for very positive x it underflows to 0 and the result is 1.
struct SigmoidOp : CostlyMap {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) {
    return V(1) / (V(1) + Exp(-x));
  }
};
// x < 0 ? 0 : x, not max(x, 0), so that NaN passes through.
struct ReluOp : Map {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) {
    return Select(x < V(0), V(0), x);
  }
};
// gelu(x){approximate}: exact x Phi(x) = x erfc(-x / sqrt 2) / 2 (erfc keeps full
// relative accuracy in the left tail, where 1 + erf(x / sqrt 2) cancels); with
// approximate 0.5 x (1 + tanh u), u = sqrt(2/pi) (x + 0.044715 x^3), computed as
// x / (1 + e^(-2u)): the same function, without the cancellation of 1 + tanh u.
struct GeluOp : CostlyMap {
  template <class P> static Attrs Read(const P& p) {
    return {p.GetBool("approximate") ? 1.0 : 0.0};
  }
  template <class V> static KGRAD_EW_HD V Apply(const Attrs& at, V x) {
    if (at.a != 0) {
      return x / (V(1) + Exp(V(-2 * 0.79788456080286535588) * (x + V(0.044715) * (x * x * x))));
    }
    return V(0.5) * x * Erfc(x * V(-0.70710678118654752440));
  }
};
// ln(1 + e^x) = max(x, 0) + ln(1 + e^-|x|): the exponent is never positive.
struct SoftplusOp : CostlyMap {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) {
    return Select(x > V(0), x, V(0)) + Log1p(Exp(-Abs(x)));
  }
};
struct SqrtOp : Map {  // correctly rounded
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return Sqrt(x); }
};
struct RsqrtOp : Map {  // 1 / sqrt(x), each step correctly rounded
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return V(1) / Sqrt(x); }
};
struct AbsOp : Map {  // |x|; integers wrap (|MIN| = MIN)
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) {
    if constexpr (kSignedIntegral<V>) {
      return x < V(0) ? WrapNeg(x) : x;
    } else if constexpr (kIntegral<V>) {
      return x;
    } else {
      return Abs(x);
    }
  }
};
struct SignOp : Map {  // -1, 0 or 1; zero (of either sign) and NaN map to themselves
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) {
    if constexpr (kIntegral<V> && !kSignedIntegral<V>) {
      return x > V(0) ? V(1) : x;
    } else {
      return Select(x > V(0), V(1), Select(x < V(0), V(-1), x));
    }
  }
};
struct SquareOp : Map {  // x * x
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return WrapMul(x, x); }
};
struct ReciprocalOp : Map {  // 1 / x
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return V(1) / x; }
};
struct ErfOp : CostlyMap {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return Erf(x); }
};
struct FloorOp : Map {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return Floor(x); }
};
struct CeilOp : Map {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return Ceil(x); }
};
struct RoundOp : Map {  // halves to even, as ONNX Round and IEEE roundeven
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return Rint(x); }
};
// The inverse trigonometric and the hyperbolic functions: NaN outside their
// domains, as in C.
struct AsinOp : CostlyMap {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return Asin(x); }
};
struct AcosOp : CostlyMap {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return Acos(x); }
};
struct AtanOp : CostlyMap {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return Atan(x); }
};
struct SinhOp : CostlyMap {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return Sinh(x); }
};
struct CoshOp : CostlyMap {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return Cosh(x); }
};
struct AsinhOp : CostlyMap {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return Asinh(x); }
};
struct AcoshOp : CostlyMap {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return Acosh(x); }
};
struct AtanhOp : CostlyMap {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x) { return Atanh(x); }
};
struct LogicalNotOp : Map {  // !x (bool)
  template <class V> static KGRAD_EW_HD auto Apply(const Attrs&, V x) { return !x; }
};
// thresholded_relu(x){alpha} = x > alpha ? x : 0 (ONNX ThresholdedRelu); NaN gives 0.
struct ThresholdedReluOp : Map {
  template <class P> static Attrs Read(const P& p) { return {p.GetFloat("alpha")}; }
  template <class V> static KGRAD_EW_HD V Apply(const Attrs& at, V x) {
    return Select(x > V(at.a), x, V(0));
  }
};

// Binary maps.
struct AddOp : Map {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V a, V b) { return WrapAdd(a, b); }
};
struct SubOp : Map {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V a, V b) { return WrapSub(a, b); }
};
struct MulOp : Map {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V a, V b) { return WrapMul(a, b); }
};
// Integers truncate toward zero (b == 0 is refused before any kernel runs); MIN / -1
// overflows, so it wraps like negation.
struct DivOp : Map {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V a, V b) {
    if constexpr (kSignedIntegral<V>) {
      return b == V(-1) ? WrapNeg(a) : static_cast<V>(a / b);
    } else {
      return a / b;
    }
  }
};
struct PowOp : CostlyMap {  // a^b (floats)
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V a, V b) { return Pow(a, b); }
};
// max(a, b) and min(a, b); NaN wins (as in NumPy): `a != a` is a NaN.
struct MaximumOp : Map {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V a, V b) {
    return Select((a > b) | (a != a), a, b);
  }
};
struct MinimumOp : Map {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V a, V b) {
    return Select((a < b) | (a != a), a, b);
  }
};
// mod(a, b){fmod}: with fmod the sign of a (C's fmod); without, the sign of b
// (Python's %): C's remainder moved by b when the signs differ, and a zero float
// result takes b's sign, as Python's does.
struct ModOp : CostlyMap {
  template <class P> static Attrs Read(const P& p) { return {p.GetBool("fmod") ? 1.0 : 0.0}; }
  template <class V> static KGRAD_EW_HD V Apply(const Attrs& at, V a, V b) {
    const V r = TruncMod(a, b);
    if (at.a != 0) return r;
    const V moved = Select((r != V(0)) & ((r < V(0)) != (b < V(0))), WrapAdd(r, b), r);
    if constexpr (kIntegral<V>) {
      return moved;
    } else {
      return Select(r == V(0), Copysign(V(0), b), moved);
    }
  }
};
// bit_shift(a, b){direction}: a << b or a >> b (unsigned integers).
struct BitShiftOp : Map {
  template <class P> static Attrs Read(const P& p) {
    return {p.GetString("direction") == "left" ? 0.0 : 1.0};
  }
  template <class V> static KGRAD_EW_HD V Apply(const Attrs& at, V a, V b) {
    return at.a == 0 ? ShiftLeft(a, b) : ShiftRight(a, b);
  }
};

// Derivative maps: the backward of tanh and sigmoid from their output y, of sin,
// cos and relu from their input x, given the sensitivity d.
struct TanhGradOp : Map {  // d (1 - y^2)
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V y, V d) {
    return d * (V(1) - y * y);
  }
};
struct SigmoidGradOp : Map {  // d y (1 - y)
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V y, V d) {
    return d * y * (V(1) - y);
  }
};
struct SinGradOp : CostlyMap {  // d cos x
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x, V d) { return d * Cos(x); }
};
struct CosGradOp : CostlyMap {  // -(d sin x)
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x, V d) { return -(d * Sin(x)); }
};
// x > 0 ? d : 0; false for NaN, so the kink and NaN get 0.
struct ReluGradOp : Map {
  template <class V> static KGRAD_EW_HD V Apply(const Attrs&, V x, V d) {
    return Select(x > V(0), d, V(0));
  }
};

// Comparisons and logical ops: bool results.
struct EqualOp : Map {
  template <class V> static KGRAD_EW_HD auto Apply(const Attrs&, V a, V b) { return a == b; }
};
struct NotEqualOp : Map {
  template <class V> static KGRAD_EW_HD auto Apply(const Attrs&, V a, V b) { return a != b; }
};
struct LessOp : Map {
  template <class V> static KGRAD_EW_HD auto Apply(const Attrs&, V a, V b) { return a < b; }
};
struct LessEqualOp : Map {
  template <class V> static KGRAD_EW_HD auto Apply(const Attrs&, V a, V b) { return a <= b; }
};
struct GreaterOp : Map {
  template <class V> static KGRAD_EW_HD auto Apply(const Attrs&, V a, V b) { return a > b; }
};
struct GreaterEqualOp : Map {
  template <class V> static KGRAD_EW_HD auto Apply(const Attrs&, V a, V b) { return a >= b; }
};
struct LogicalAndOp : Map {
  template <class V> static KGRAD_EW_HD auto Apply(const Attrs&, V a, V b) {
    return (a != V(0)) & (b != V(0));
  }
};
struct LogicalOrOp : Map {
  template <class V> static KGRAD_EW_HD auto Apply(const Attrs&, V a, V b) {
    return (a != V(0)) | (b != V(0));
  }
};

// select(c, a, b) = c ? a : b.
struct SelectOp : Map {
  template <class C, class V> static KGRAD_EW_HD V Apply(const Attrs&, C c, V a, V b) {
    return Select(c, a, b);
  }
};

}  // namespace ew
}  // namespace kgrad

#endif  // KGRAD_OPS_ELEMENTWISE_FUNCTORS_H_
