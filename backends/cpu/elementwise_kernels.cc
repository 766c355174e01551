// CPU kernels: elementwise family. Unary maps (transcendental ones through
// Eigen's vectorised array functions), binary maps and select over one strided
// broadcasting loop. Outputs reuse a uniquely owned input buffer when they can,
// which is safe because every output element depends only on the input elements
// at the same position. Integer arithmetic wraps (two's complement) instead of
// overflowing into undefined behaviour. Which dtypes each op takes, and the
// checks and output shapes, are ops/elementwise.h's (shared with inference and
// the CUDA kernels).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/eigen.h"
#include "backends/cpu/parallel.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/elementwise.h"

namespace kgrad {
namespace cpu {
namespace {

// Bool tensors are read and written as uint8_t (always 0 or 1): GCC does not
// vectorise loops that load `bool`.
template <typename T>
using Elem = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
// What an op computes in: float for the 16-bit float storage types (each result
// rounded once on the way back), the element type otherwise.
template <typename T>
using Compute = std::conditional_t<std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>, float, T>;

// ----- Unary maps ---------------------------------------------------------------------
template <typename T>
using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// Transcendental functions cost ~10x a cheap op per element, so they are worth
// spreading over threads at a smaller size.
constexpr int64_t kTranscendentalGrain = kParallelGrain / 8;

// Ops the compiler vectorises from a plain loop: Derived::Apply(x) per element.
template <typename Derived>
struct PointwiseUnary {
  template <typename T>
  static void Run(const T* x, T* y, int64_t n) {
    ParallelFor(n, kParallelGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) y[i] = Derived::Apply(x[i]);
    });
  }
};

// Ops written as an Eigen array expression Derived::Eval(x) (vectorised
// exp/log/tanh/erf...), evaluated chunk by chunk.
template <typename Derived>
struct EigenUnary {
  template <typename T>
  static void Run(const T* x, T* y, int64_t n) {
    ParallelFor(n, kTranscendentalGrain, [&](int64_t b, int64_t e) {
      ArrayMap<T>(y + b, e - b) = Derived::Eval(ConstArrayMap<T>(x + b, e - b));
    });
  }
};

struct NegOp : PointwiseUnary<NegOp> {
  template <typename T> static T Apply(T x) { return WrapNeg(x); }
};
struct AbsOp : PointwiseUnary<AbsOp> {
  template <typename T> static T Apply(T x) {
    if constexpr (std::is_integral_v<T>) {
      return x < 0 ? WrapNeg(x) : x;
    } else {
      return std::abs(x);
    }
  }
};
struct SignOp : PointwiseUnary<SignOp> {
  // Zero (of either sign) and NaN map to themselves.
  template <typename T> static T Apply(T x) { return x > 0 ? T(1) : (x < 0 ? T(-1) : x); }
};
struct SquareOp : PointwiseUnary<SquareOp> {
  template <typename T> static T Apply(T x) { return WrapMul(x, x); }
};
struct ReluOp : PointwiseUnary<ReluOp> {
  // `x < 0` rather than max(x, 0), so that NaN passes through.
  template <typename T> static T Apply(T x) { return x < 0 ? T(0) : x; }
};
struct FloorOp : PointwiseUnary<FloorOp> {
  template <typename T> static T Apply(T x) { return std::floor(x); }
};
struct AsinOp : PointwiseUnary<AsinOp> {
  template <typename T> static T Apply(T x) { return std::asin(x); }
};
struct AcosOp : PointwiseUnary<AcosOp> {
  template <typename T> static T Apply(T x) { return std::acos(x); }
};
struct AtanOp : PointwiseUnary<AtanOp> {
  template <typename T> static T Apply(T x) { return std::atan(x); }
};
struct SinhOp : PointwiseUnary<SinhOp> {
  template <typename T> static T Apply(T x) { return std::sinh(x); }
};
struct CoshOp : PointwiseUnary<CoshOp> {
  template <typename T> static T Apply(T x) { return std::cosh(x); }
};
struct AsinhOp : PointwiseUnary<AsinhOp> {
  template <typename T> static T Apply(T x) { return std::asinh(x); }
};
struct AcoshOp : PointwiseUnary<AcoshOp> {
  template <typename T> static T Apply(T x) { return std::acosh(x); }
};
struct AtanhOp : PointwiseUnary<AtanhOp> {
  template <typename T> static T Apply(T x) { return std::atanh(x); }
};
struct CeilOp : PointwiseUnary<CeilOp> {
  template <typename T> static T Apply(T x) { return std::ceil(x); }
};
struct RoundOp : PointwiseUnary<RoundOp> {
  // nearbyint rounds in the current mode, round-to-nearest-even unless a caller
  // changed it (nothing in kgrad does): ONNX Round's halves to even.
  template <typename T> static T Apply(T x) { return std::nearbyint(x); }
};
struct LogicalNotOp : PointwiseUnary<LogicalNotOp> {
  static uint8_t Apply(uint8_t x) { return x == 0; }
};

struct ExpOp : EigenUnary<ExpOp> {
  template <typename A> static auto Eval(const A& x) { return Exp(x); }
};
struct LogOp : EigenUnary<LogOp> {
  template <typename A> static auto Eval(const A& x) { return x.log(); }
};
struct Log1pOp : EigenUnary<Log1pOp> {
  template <typename A> static auto Eval(const A& x) { return x.log1p(); }
};
struct Expm1Op : EigenUnary<Expm1Op> {
  template <typename A> static auto Eval(const A& x) { return x.expm1(); }
};
struct SinOp : EigenUnary<SinOp> {
  template <typename A> static auto Eval(const A& x) { return x.sin(); }
};
struct CosOp : EigenUnary<CosOp> {
  template <typename A> static auto Eval(const A& x) { return x.cos(); }
};
struct TanhOp : EigenUnary<TanhOp> {
  template <typename A> static auto Eval(const A& x) { return x.tanh(); }
};
struct SigmoidOp : EigenUnary<SigmoidOp> {
  // exp(-x) overflows to inf for very negative x and 1/inf = 0, the right limit;
  // for very positive x it underflows to 0 and the result is 1. No NaN either way.
  template <typename A> static auto Eval(const A& x) {
    using T = typename A::Scalar;
    return (T(1) + Exp(-x)).inverse();
  }
};
struct GeluExactOp : EigenUnary<GeluExactOp> {
  // f32 uses Eigen's vectorised erf; f64 uses 1 + erf(z) = erfc(-z), which keeps
  // full relative accuracy in the left tail where 1 + erf(z) cancels.
  template <typename A> static auto Eval(const A& x) {
    using T = typename A::Scalar;
    constexpr T kRsqrt2 = T(0.70710678118654752440);
    if constexpr (std::is_same_v<T, float>) {
      return T(0.5) * x * (T(1) + (x * kRsqrt2).erf());
    } else {
      return T(0.5) * x * (x * -kRsqrt2).erfc();
    }
  }
};
struct GeluTanhOp : EigenUnary<GeluTanhOp> {
  // 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)): the same function, without the
  // cancellation of 1 + tanh(u) for negative u.
  template <typename A> static auto Eval(const A& x) {
    using T = typename A::Scalar;
    constexpr T kMinus2SqrtTwoOverPi = T(-2 * 0.79788456080286535588);
    return x / (T(1) + Exp(kMinus2SqrtTwoOverPi * (x + T(0.044715) * x.cube())));
  }
};
struct SoftplusOp : EigenUnary<SoftplusOp> {
  // log(1 + e^x) = max(x, 0) + log1p(e^-|x|): the exponent is never positive.
  template <typename A> static auto Eval(const A& x) {
    using T = typename A::Scalar;
    return x.max(T(0)) + Exp(-x.abs()).log1p();
  }
};
// std::sqrt, correctly rounded: Eigen's vectorised float sqrt is an rsqrt estimate
// with a Newton step (under EIGEN_FAST_MATH, which also gives the vectorised sin,
// cos, tanh and erf, so it stays on): an ulp off, NaN at +inf, 0 for subnormals
// (the CUDA tests found it on a GPU machine, comparing with these kernels).
struct SqrtOp : PointwiseUnary<SqrtOp> {
  template <typename T> static T Apply(T x) { return std::sqrt(x); }
};
struct RsqrtOp : PointwiseUnary<RsqrtOp> {
  // 1 / sqrt(x), each step correctly rounded, rather than an approximate rsqrt.
  template <typename T> static T Apply(T x) { return T(1) / std::sqrt(x); }
};
struct ReciprocalOp : EigenUnary<ReciprocalOp> {
  template <typename A> static auto Eval(const A& x) { return x.inverse(); }
};
struct ErfOp : EigenUnary<ErfOp> {
  template <typename A> static auto Eval(const A& x) { return x.erf(); }
};

// Primitive kId computed by Op (the loops exist for kId's dtypes only).
template <PrimId kId, typename Op>
absl::StatusOr<Value> UnaryKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_RETURN_IF_ERROR(ops::CheckUnary(kId, *x));
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOrReuse({0}, x->dtype(), x->shape()));
  DispatchDType(x->dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (Allows(ops::ElementwiseDTypes(kId), DTypeOf<T>::value)) {
      Op::Run(x->data<Elem<T>>(), y.mutable_data<Elem<T>>(), x->NumElements());
    }
  });
  return Value(std::move(y));
}

absl::StatusOr<Value> GeluKernel(KernelContext& ctx) {
  return ctx.prim().GetBool("approximate") ? UnaryKernel<PrimId::kGelu, GeluTanhOp>(ctx)
                                           : UnaryKernel<PrimId::kGelu, GeluExactOp>(ctx);
}

// ----- Broadcasting ---------------------------------------------------------------------
// How N operands map onto a broadcast output. Dims of size 1 are dropped and
// neighbouring dims merged wherever every operand walks them as one, so that
// same-shape operands become one flat row and a scalar operand a row of stride 0.
// The innermost merged dim is contiguous or broadcast in every operand (stride 1
// or 0); the others are walked with per-operand strides (0 on broadcast dims).
template <size_t N>
struct BroadcastPlan {
  int64_t count = 0;  // output elements
  int64_t inner = 1;  // length of the innermost merged dim: one "row"
  Shape outer;        // the other merged dims, outermost first
  std::array<Shape, N> outer_strides;
  std::array<int64_t, N> inner_strides{};
};

// Operand `in`'s element strides over the dims of `out` (0 where broadcast).
Shape AlignedStrides(const Shape& in, const Shape& out) {
  Shape strides(out.size(), 0);
  Shape row_major = RowMajorStrides(in);
  size_t offset = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    strides[offset + d] = in[d] == 1 ? 0 : row_major[d];
  }
  return strides;
}

template <size_t N>
BroadcastPlan<N> MakeBroadcastPlan(const Shape& out, const std::array<const Shape*, N>& ins) {
  BroadcastPlan<N> plan;
  plan.count = NumElementsOf(out);
  bool same = true;
  for (size_t k = 0; k < N; ++k) same &= *ins[k] == out;
  if (same) {
    // No broadcasting (the common case, and every tangent's): one flat row.
    plan.inner = std::max<int64_t>(plan.count, 1);
    plan.inner_strides.fill(1);
    return plan;
  }
  std::array<Shape, N> aligned;
  for (size_t k = 0; k < N; ++k) aligned[k] = AlignedStrides(*ins[k], out);
  Shape dims;
  std::array<Shape, N> strides;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    // Merge into the outer neighbour when, for every operand, stepping the
    // neighbour once equals stepping this dim out[d] times.
    bool merge = !dims.empty();
    for (size_t k = 0; k < N && merge; ++k) {
      merge = strides[k].back() == aligned[k][d] * out[d];
    }
    if (merge) {
      dims.back() *= out[d];
      for (size_t k = 0; k < N; ++k) strides[k].back() = aligned[k][d];
    } else {
      dims.push_back(out[d]);
      for (size_t k = 0; k < N; ++k) strides[k].push_back(aligned[k][d]);
    }
  }
  if (dims.empty()) return plan;  // one element: a row of length 1
  plan.inner = dims.back();
  dims.pop_back();
  for (size_t k = 0; k < N; ++k) {
    plan.inner_strides[k] = strides[k].back();
    strides[k].pop_back();
  }
  plan.outer = std::move(dims);
  plan.outer_strides = std::move(strides);
  return plan;
}

// Operand offsets of the first element of row `r` (row-major over plan.outer).
template <size_t N>
void SeekRow(const BroadcastPlan<N>& p, int64_t r, Shape* idx, std::array<int64_t, N>* off) {
  off->fill(0);
  for (int d = static_cast<int>(p.outer.size()) - 1; d >= 0; --d) {
    (*idx)[d] = r % p.outer[d];
    r /= p.outer[d];
    for (size_t k = 0; k < N; ++k) (*off)[k] += (*idx)[d] * p.outer_strides[k][d];
  }
}

// Calls row(offsets, out_offset, length) over the whole output, in parallel;
// offsets[k] is operand k's offset of the first element. Short rows are handed
// out in runs (an odometer steps from one to the next); rows long enough to fill
// several threads alone are cut into pieces, so a flat array parallelises too.
template <size_t N, typename RowFn>
void ForEachRow(const BroadcastPlan<N>& p, RowFn&& row) {
  if (p.count == 0) return;
  const int64_t rows = p.count / p.inner;
  const int rank = static_cast<int>(p.outer.size());
  if (p.inner >= 2 * kParallelGrain) {
    const int64_t pieces = p.inner / kParallelGrain;
    const int64_t len = (p.inner + pieces - 1) / pieces;
    ParallelFor(rows * pieces, 1, [&](int64_t tb, int64_t te) {
      Shape idx(rank);
      std::array<int64_t, N> off;
      for (int64_t t = tb; t < te; ++t) {
        const int64_t r = t / pieces, b = (t % pieces) * len;
        SeekRow(p, r, &idx, &off);
        for (size_t k = 0; k < N; ++k) off[k] += b * p.inner_strides[k];
        row(off, r * p.inner + b, std::min(p.inner, b + len) - b);
      }
    });
    return;
  }
  ParallelFor(rows, std::max<int64_t>(1, kParallelGrain / p.inner), [&](int64_t rb, int64_t re) {
    Shape idx(rank);
    std::array<int64_t, N> off;
    SeekRow(p, rb, &idx, &off);
    for (int64_t r = rb; r < re; ++r) {
      row(off, r * p.inner, p.inner);
      for (int d = rank - 1; d >= 0; --d) {
        for (size_t k = 0; k < N; ++k) off[k] += p.outer_strides[k][d];
        if (++idx[d] < p.outer[d]) break;
        for (size_t k = 0; k < N; ++k) off[k] -= p.outer_strides[k][d] * p.outer[d];
        idx[d] = 0;
      }
    }
  });
}

// One row of a binary map; each operand is contiguous (stride 1) or one
// repeated element (stride 0). Four plain loops, each vectorisable.
template <typename T, typename R, typename F>
void BinaryRow(const T* a, int64_t sa, const T* b, int64_t sb, R* out, int64_t n, F f) {
  if (sa != 0 && sb != 0) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
  } else if (sa != 0) {
    const T y = *b;
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], y);
  } else if (sb != 0) {
    const T x = *a;
    for (int64_t i = 0; i < n; ++i) out[i] = f(x, b[i]);
  } else {
    std::fill(out, out + n, static_cast<R>(f(*a, *b)));
  }
}

// ----- Binary ops ---------------------------------------------------------------------------
// Each: Apply(a, b), for the dtypes of its primitive (ops::ElementwiseDTypes).
struct AddOp {
  template <typename T> static T Apply(T a, T b) { return WrapAdd(a, b); }
};
struct SubOp {
  template <typename T> static T Apply(T a, T b) { return WrapSub(a, b); }
};
struct MulOp {
  template <typename T> static T Apply(T a, T b) { return WrapMul(a, b); }
};
// The backward maps of tanh and sigmoid from their output y and sensitivity d.
struct TanhGradOp {
  template <typename T> static T Apply(T y, T d) { return d * (T(1) - y * y); }
};
struct SigmoidGradOp {
  template <typename T> static T Apply(T y, T d) { return d * y * (T(1) - y); }
};
// The backward maps of sin, cos and relu from their input x and sensitivity d.
struct SinGradOp {
  template <typename T> static T Apply(T x, T d) { return d * std::cos(x); }
};
struct CosGradOp {
  template <typename T> static T Apply(T x, T d) { return -(d * std::sin(x)); }
};
struct ReluGradOp {
  // x > 0 is false for NaN: the kink and NaN get 0, as relu's composed rule did.
  template <typename T> static T Apply(T x, T d) { return x > T(0) ? d : T(0); }
};
struct DivOp {
  // C++ integer division truncates toward zero. b == 0 was rejected before;
  // MIN / -1 overflows, so it wraps like negation.
  template <typename T> static T Apply(T a, T b) {
    if constexpr (std::is_signed_v<T> && std::is_integral_v<T>) {
      return b == -1 ? WrapNeg(a) : a / b;
    } else if constexpr (std::is_integral_v<T>) {
      return a / b;
    } else {
      return a / b;
    }
  }
};
struct PowOp {
  // std::pow, not Eigen 3.4's vectorised pow: glibc's is faster here (measured
  // ~2x), and Eigen's loses the sign of (-0)^odd and (-inf)^odd.
  template <typename T> static T Apply(T a, T b) { return std::pow(a, b); }
};
struct MaximumOp {
  // `a != a` is NaN: NaN wins, as in NumPy.
  template <typename T> static T Apply(T a, T b) { return (a > b || a != a) ? a : b; }
};
struct MinimumOp {
  template <typename T> static T Apply(T a, T b) { return (a < b || a != a) ? a : b; }
};
struct FModOp {
  // The sign of a (C's % and fmod). b == 0 was rejected for integers; MIN % -1
  // overflows in C++, and its value is 0.
  template <typename T> static T Apply(T a, T b) {
    if constexpr (std::is_signed_v<T> && std::is_integral_v<T>) {
      return b == -1 ? T(0) : a % b;
    } else if constexpr (std::is_integral_v<T>) {
      return a % b;
    } else {
      return std::fmod(a, b);
    }
  }
};
struct ModOp {
  // The sign of b (Python's %): C's remainder moved by b when the signs differ.
  // A zero float result takes b's sign, as Python's does.
  template <typename T> static T Apply(T a, T b) {
    const T r = FModOp::Apply(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) return r + b;
    if constexpr (std::is_integral_v<T>) {
      return r;
    } else {
      return r == 0 ? std::copysign(T(0), b) : r;
    }
  }
};
// Shifts by the width or more give 0 (in C++ they are undefined).
struct ShiftLeftOp {
  template <typename T> static T Apply(T a, T b) {
    return b >= sizeof(T) * 8 ? T(0) : static_cast<T>(a << b);
  }
};
struct ShiftRightOp {
  template <typename T> static T Apply(T a, T b) {
    return b >= sizeof(T) * 8 ? T(0) : static_cast<T>(a >> b);
  }
};
struct EqualOp {
  template <typename T> static bool Apply(T a, T b) { return a == b; }
};
struct NotEqualOp {
  template <typename T> static bool Apply(T a, T b) { return a != b; }
};
struct LessOp {
  template <typename T> static bool Apply(T a, T b) { return a < b; }
};
struct LessEqualOp {
  template <typename T> static bool Apply(T a, T b) { return a <= b; }
};
struct GreaterOp {
  template <typename T> static bool Apply(T a, T b) { return a > b; }
};
struct GreaterEqualOp {
  template <typename T> static bool Apply(T a, T b) { return a >= b; }
};
struct LogicalAndOp {
  static bool Apply(uint8_t a, uint8_t b) { return (a & b) != 0; }
};
struct LogicalOrOp {
  static bool Apply(uint8_t a, uint8_t b) { return (a | b) != 0; }
};

// Integer division by zero has no value: reject it before computing anything.
absl::Status CheckNonZeroDivisor(const Tensor& b) {
  bool zero = false;
  DispatchDType(b.dtype(), [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      const T* p = b.data<T>();
      for (int64_t i = 0; i < b.NumElements(); ++i) zero |= p[i] == 0;
    }
  });
  if (!zero) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "integer division by zero: input 1 (", b.TypeString(), ") has a zero element"));
}

// Primitive kId computed by Op (the loops exist for kId's dtypes only).
template <PrimId kId, typename Op>
absl::StatusOr<Value> BinaryKernel(KernelContext& ctx) {
  constexpr bool kBoolOut = ops::ElementwiseBoolOutput(kId);
  KGRAD_ASSIGN_OR_RETURN(const Tensor* a, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* b, ctx.TensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(Shape shape, ops::BinaryShape(kId, *a, *b, ops::CheckedBy::kKernel));
  if ((kId == PrimId::kDiv || kId == PrimId::kMod) && IsAnyInteger(b->dtype()) &&
      NumElementsOf(shape) > 0) {
    KGRAD_RETURN_IF_ERROR(CheckNonZeroDivisor(*b));
  }
  const DType out_dtype = kBoolOut ? DType::kBool : a->dtype();
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOrReuse({0, 1}, out_dtype, shape));
  const BroadcastPlan<2> plan = MakeBroadcastPlan<2>(shape, {&a->shape(), &b->shape()});
  DispatchDType(a->dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (Allows(ops::ElementwiseDTypes(kId), DTypeOf<T>::value)) {
      using E = Elem<T>;
      using R = std::conditional_t<kBoolOut, uint8_t, E>;
      const E* pa = a->data<E>();
      const E* pb = b->data<E>();
      R* po = out.mutable_data<R>();
      ForEachRow(plan, [&](const std::array<int64_t, 2>& off, int64_t o, int64_t n) {
        BinaryRow(pa + off[0], plan.inner_strides[0], pb + off[1], plan.inner_strides[1],
                  po + o, n, [](E x, E y) {
                    using C = Compute<E>;
                    return static_cast<R>(Op::Apply(static_cast<C>(x), static_cast<C>(y)));
                  });
      });
    }
  });
  return Value(std::move(out));
}

absl::StatusOr<Value> BitShiftKernel(KernelContext& ctx) {
  return ctx.prim().GetString("direction") == "left" ? BinaryKernel<PrimId::kBitShift, ShiftLeftOp>(ctx)
                                                     : BinaryKernel<PrimId::kBitShift, ShiftRightOp>(ctx);
}

absl::StatusOr<Value> ModKernel(KernelContext& ctx) {
  return ctx.prim().GetBool("fmod") ? BinaryKernel<PrimId::kMod, FModOp>(ctx)
                                    : BinaryKernel<PrimId::kMod, ModOp>(ctx);
}

// ----- Select ------------------------------------------------------------------------------
// Both sides are loaded unconditionally: `c ? a[i] : b[i]` would only load one,
// which keeps the compiler from turning the loop into vector blends. Inner
// strides are 1 (contiguous) or 0 (one repeated element); each of the eight
// combinations gets its own loop, because a loop over `a[i * sa]` with a runtime
// stride does not vectorise: relu's backward, select(x > 0, dy, 0), has a
// broadcast zero and ran ~10x slower than relu itself on the general loop.
template <typename T, bool kC, bool kA, bool kB>
void SelectRun(const uint8_t* c, const T* a, const T* b, T* out, int64_t n) {
  const uint8_t c0 = *c;
  const T a0 = *a, b0 = *b;
  for (int64_t i = 0; i < n; ++i) {
    const T x = kA ? a[i] : a0, y = kB ? b[i] : b0;
    out[i] = (kC ? c[i] : c0) ? x : y;
  }
}

template <typename T>
void SelectRow(const uint8_t* c, int64_t sc, const T* a, int64_t sa, const T* b, int64_t sb,
               T* out, int64_t n) {
  if (n <= 0) return;
  auto unit = [](int64_t s) { return s == 0 || s == 1; };
  if (unit(sc) && unit(sa) && unit(sb)) {
    switch ((sc << 2) | (sa << 1) | sb) {
      case 0: return SelectRun<T, false, false, false>(c, a, b, out, n);
      case 1: return SelectRun<T, false, false, true>(c, a, b, out, n);
      case 2: return SelectRun<T, false, true, false>(c, a, b, out, n);
      case 3: return SelectRun<T, false, true, true>(c, a, b, out, n);
      case 4: return SelectRun<T, true, false, false>(c, a, b, out, n);
      case 5: return SelectRun<T, true, false, true>(c, a, b, out, n);
      case 6: return SelectRun<T, true, true, false>(c, a, b, out, n);
      default: return SelectRun<T, true, true, true>(c, a, b, out, n);
    }
  }
  for (int64_t i = 0; i < n; ++i) {  // any other stride (not produced today)
    const T x = a[i * sa], y = b[i * sb];
    out[i] = c[i * sc] ? x : y;
  }
}

absl::StatusOr<Value> SelectKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* c, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* a, ctx.TensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* b, ctx.TensorAt(2));
  KGRAD_ASSIGN_OR_RETURN(Shape shape, ops::SelectShape(*c, *a, *b, ops::CheckedBy::kKernel));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOrReuse({1, 2, 0}, a->dtype(), shape));
  const BroadcastPlan<3> plan =
      MakeBroadcastPlan<3>(shape, {&c->shape(), &a->shape(), &b->shape()});
  const std::array<int64_t, 3>& s = plan.inner_strides;
  DispatchDType(a->dtype(), [&](auto zero) {
    using T = Elem<decltype(zero)>;
    const uint8_t* pc = c->data<uint8_t>();
    const T* pa = a->data<T>();
    const T* pb = b->data<T>();
    T* po = out.mutable_data<T>();
    ForEachRow(plan, [&](const std::array<int64_t, 3>& off, int64_t o, int64_t n) {
      SelectRow(pc + off[0], s[0], pa + off[1], s[1], pb + off[2], s[2], po + o, n);
    });
  });
  return Value(std::move(out));
}

template <PrimId kId, typename Op>
void SetUnary(KernelTable* t) {
  t->Set(kId, UnaryKernel<kId, Op>);
}

template <PrimId kId, typename Op>
void SetBinary(KernelTable* t) {
  t->Set(kId, BinaryKernel<kId, Op>);
}

}  // namespace

void RegisterElementwiseKernels(KernelTable* t) {
  SetUnary<PrimId::kNeg, NegOp>(t);
  SetUnary<PrimId::kAbs, AbsOp>(t);
  SetUnary<PrimId::kSign, SignOp>(t);
  SetUnary<PrimId::kSquare, SquareOp>(t);
  SetUnary<PrimId::kExp, ExpOp>(t);
  SetUnary<PrimId::kLog, LogOp>(t);
  SetUnary<PrimId::kLog1p, Log1pOp>(t);
  SetUnary<PrimId::kExpm1, Expm1Op>(t);
  SetUnary<PrimId::kSin, SinOp>(t);
  SetUnary<PrimId::kCos, CosOp>(t);
  SetUnary<PrimId::kTanh, TanhOp>(t);
  SetUnary<PrimId::kSigmoid, SigmoidOp>(t);
  SetUnary<PrimId::kRelu, ReluOp>(t);
  t->Set(PrimId::kGelu, GeluKernel);
  SetUnary<PrimId::kSoftplus, SoftplusOp>(t);
  SetUnary<PrimId::kSqrt, SqrtOp>(t);
  SetUnary<PrimId::kRsqrt, RsqrtOp>(t);
  SetUnary<PrimId::kReciprocal, ReciprocalOp>(t);
  SetUnary<PrimId::kErf, ErfOp>(t);
  SetUnary<PrimId::kFloor, FloorOp>(t);
  SetUnary<PrimId::kCeil, CeilOp>(t);
  SetUnary<PrimId::kRound, RoundOp>(t);
  SetUnary<PrimId::kAsin, AsinOp>(t);
  SetUnary<PrimId::kAcos, AcosOp>(t);
  SetUnary<PrimId::kAtan, AtanOp>(t);
  SetUnary<PrimId::kSinh, SinhOp>(t);
  SetUnary<PrimId::kCosh, CoshOp>(t);
  SetUnary<PrimId::kAsinh, AsinhOp>(t);
  SetUnary<PrimId::kAcosh, AcoshOp>(t);
  SetUnary<PrimId::kAtanh, AtanhOp>(t);
  SetUnary<PrimId::kLogicalNot, LogicalNotOp>(t);
  SetBinary<PrimId::kAdd, AddOp>(t);
  SetBinary<PrimId::kSub, SubOp>(t);
  SetBinary<PrimId::kMul, MulOp>(t);
  SetBinary<PrimId::kDiv, DivOp>(t);
  SetBinary<PrimId::kPow, PowOp>(t);
  SetBinary<PrimId::kMaximum, MaximumOp>(t);
  SetBinary<PrimId::kMinimum, MinimumOp>(t);
  t->Set(PrimId::kMod, ModKernel);
  t->Set(PrimId::kBitShift, BitShiftKernel);
  SetBinary<PrimId::kEqual, EqualOp>(t);
  SetBinary<PrimId::kNotEqual, NotEqualOp>(t);
  SetBinary<PrimId::kLess, LessOp>(t);
  SetBinary<PrimId::kLessEqual, LessEqualOp>(t);
  SetBinary<PrimId::kGreater, GreaterOp>(t);
  SetBinary<PrimId::kGreaterEqual, GreaterEqualOp>(t);
  SetBinary<PrimId::kLogicalAnd, LogicalAndOp>(t);
  SetBinary<PrimId::kLogicalOr, LogicalOrOp>(t);
  SetBinary<PrimId::kTanhGrad, TanhGradOp>(t);
  SetBinary<PrimId::kSigmoidGrad, SigmoidGradOp>(t);
  SetBinary<PrimId::kSinGrad, SinGradOp>(t);
  SetBinary<PrimId::kCosGrad, CosGradOp>(t);
  SetBinary<PrimId::kReluGrad, ReluGradOp>(t);
  t->Set(PrimId::kSelect, SelectKernel);
}

}  // namespace cpu
}  // namespace kgrad
