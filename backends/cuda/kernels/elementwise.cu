// Device code of the elementwise family: unary maps, broadcasting binary maps
// and select, fill, cast, dropout, and the device-side checks (bad indices, zero
// divisors). Semantics follow backends/cpu/elementwise_kernels.cc exactly:
// integer arithmetic wraps, maximum/minimum let NaN win, relu passes NaN.
#include <cstdint>
#include <type_traits>

#include "backends/cpu/dropout_hash.h"
#include "backends/cuda/kernels/device_util.cu.h"
#include "backends/cuda/kernels/launch.h"

namespace kgrad {
namespace cuda {
namespace {

// ----- Unary ------------------------------------------------------------------------------
template <UnaryOp kOp, typename T>
__device__ inline T ApplyUnary(T x) {
  if constexpr (kOp == UnaryOp::kNeg) {
    return WrapNeg(x);
  } else if constexpr (kOp == UnaryOp::kAbs) {
    if constexpr (std::is_integral_v<T>) {
      return x < 0 ? WrapNeg(x) : x;
    } else {
      return x < T(0) ? -x : (x == T(0) ? T(0) : x);  // fabs: -0 -> +0, NaN stays
    }
  } else if constexpr (kOp == UnaryOp::kSign) {
    return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x);
  } else if constexpr (kOp == UnaryOp::kSquare) {
    return WrapMul(x, x);
  } else if constexpr (kOp == UnaryOp::kLogicalNot) {
    return !x;
  } else if constexpr (std::is_floating_point_v<T>) {
    if constexpr (kOp == UnaryOp::kExp) return Exp(x);
    if constexpr (kOp == UnaryOp::kLog) return Log(x);
    if constexpr (kOp == UnaryOp::kLog1p) return Log1p(x);
    if constexpr (kOp == UnaryOp::kExpm1) return Expm1(x);
    if constexpr (kOp == UnaryOp::kSin) return Sin(x);
    if constexpr (kOp == UnaryOp::kCos) return Cos(x);
    if constexpr (kOp == UnaryOp::kTanh) return Tanh(x);
    if constexpr (kOp == UnaryOp::kSigmoid) return T(1) / (T(1) + Exp(-x));
    if constexpr (kOp == UnaryOp::kRelu) return x < T(0) ? T(0) : x;
    if constexpr (kOp == UnaryOp::kGeluExact) {
      constexpr T kRsqrt2 = T(0.70710678118654752440);
      if constexpr (std::is_same_v<T, float>) {
        return T(0.5) * x * (T(1) + Erf(x * kRsqrt2));
      } else {
        return T(0.5) * x * Erfc(x * -kRsqrt2);
      }
    }
    if constexpr (kOp == UnaryOp::kGeluTanh) {
      constexpr T kMinus2SqrtTwoOverPi = T(-2 * 0.79788456080286535588);
      return x / (T(1) + Exp(kMinus2SqrtTwoOverPi * (x + T(0.044715) * x * x * x)));
    }
    if constexpr (kOp == UnaryOp::kSoftplus) {
      const T ax = x < T(0) ? -x : x;
      return (x > T(0) ? x : T(0)) + Log1p(Exp(-ax));
    }
    if constexpr (kOp == UnaryOp::kSqrt) return Sqrt(x);
    if constexpr (kOp == UnaryOp::kRsqrt) return T(1) / Sqrt(x);
    if constexpr (kOp == UnaryOp::kReciprocal) return T(1) / x;
    if constexpr (kOp == UnaryOp::kErf) return Erf(x);
    if constexpr (kOp == UnaryOp::kFloor) return Floor(x);
    if constexpr (kOp == UnaryOp::kCeil) return Ceil(x);
    if constexpr (kOp == UnaryOp::kRound) return Rint(x);
    if constexpr (kOp == UnaryOp::kAsin) return Asin(x);
    if constexpr (kOp == UnaryOp::kAcos) return Acos(x);
    if constexpr (kOp == UnaryOp::kAtan) return Atan(x);
    if constexpr (kOp == UnaryOp::kSinh) return Sinh(x);
    if constexpr (kOp == UnaryOp::kCosh) return Cosh(x);
    if constexpr (kOp == UnaryOp::kAsinh) return Asinh(x);
    if constexpr (kOp == UnaryOp::kAcosh) return Acosh(x);
    if constexpr (kOp == UnaryOp::kAtanh) return Atanh(x);
  }
  return x;
}

template <UnaryOp kOp, typename T>
__global__ void UnaryKernel(const T* x, T* y, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) y[i] = ApplyUnary<kOp>(x[i]);
}

template <UnaryOp kOp, typename T>
cudaError_t RunUnary(const void* x, void* y, int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  Launch(UnaryKernel<kOp, T>, BlocksFor(n), kThreads, s, static_cast<const T*>(x),
                                                        static_cast<T*>(y), n);
  return LastLaunchError();
}

// Which dtypes each unary op is instantiated for (the host rejects the others).
template <UnaryOp kOp>
cudaError_t UnaryFor(DT dt, const void* x, void* y, int64_t n, cudaStream_t s) {
  constexpr bool kBoolOnly = kOp == UnaryOp::kLogicalNot;
  constexpr bool kNumeric = kOp == UnaryOp::kNeg || kOp == UnaryOp::kAbs ||
                            kOp == UnaryOp::kSign || kOp == UnaryOp::kSquare;
  return DispatchAll(dt, [&](auto zero) -> cudaError_t {
    using T = decltype(zero);
    if constexpr (kBoolOnly) {
      if constexpr (std::is_same_v<T, bool>) return RunUnary<kOp, T>(x, y, n, s);
    } else if constexpr (kNumeric) {
      if constexpr (!std::is_same_v<T, bool>) return RunUnary<kOp, T>(x, y, n, s);
    } else if constexpr (std::is_floating_point_v<T>) {
      return RunUnary<kOp, T>(x, y, n, s);
    }
    return cudaErrorInvalidValue;
  });
}

// ----- Binary -----------------------------------------------------------------------------
// a % b with the sign of a (C's fmod and %): b == 0 was rejected for integers;
// MIN % -1 overflows in C++, and its value is 0.
template <typename T>
__device__ inline T FModOf(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return b == T(-1) ? T(0) : static_cast<T>(a % b);
  } else {
    return Fmod(a, b);
  }
}

// a % b with the sign of b (Python's %): C's remainder moved by b when the signs
// differ; a zero float result takes b's sign, as Python's does.
template <typename T>
__device__ inline T ModOf(T a, T b) {
  const T r = FModOf(a, b);
  if (r != T(0) && ((r < T(0)) != (b < T(0)))) return static_cast<T>(r + b);
  if constexpr (std::is_integral_v<T>) {
    return r;
  } else {
    return r == T(0) ? Copysign(T(0), b) : r;
  }
}

template <BinaryOp kOp>
inline constexpr bool kBoolResult =
    kOp == BinaryOp::kEqual || kOp == BinaryOp::kNotEqual || kOp == BinaryOp::kLess ||
    kOp == BinaryOp::kLessEqual || kOp == BinaryOp::kGreater || kOp == BinaryOp::kGreaterEqual ||
    kOp == BinaryOp::kLogicalAnd || kOp == BinaryOp::kLogicalOr;

template <BinaryOp kOp, typename T>
__device__ inline auto ApplyBinary(T a, T b) {
  if constexpr (kOp == BinaryOp::kAdd) return WrapAdd(a, b);
  if constexpr (kOp == BinaryOp::kSub) return WrapSub(a, b);
  if constexpr (kOp == BinaryOp::kMul) return WrapMul(a, b);
  if constexpr (kOp == BinaryOp::kDiv) {
    // Integer division truncates; MIN / -1 wraps like negation (b != 0 was checked).
    if constexpr (std::is_integral_v<T>) {
      return b == T(-1) ? WrapNeg(a) : static_cast<T>(a / b);
    } else {
      return a / b;
    }
  }
  if constexpr (kOp == BinaryOp::kPow) {
    if constexpr (std::is_floating_point_v<T>) {
      return Pow(a, b);
    } else {
      return a;  // not instantiated for integers (the host rejects them)
    }
  }
  if constexpr (kOp == BinaryOp::kMaximum) return (a > b || a != a) ? a : b;
  if constexpr (kOp == BinaryOp::kMinimum) return (a < b || a != a) ? a : b;
  if constexpr (kOp == BinaryOp::kEqual) return a == b;
  if constexpr (kOp == BinaryOp::kNotEqual) return a != b;
  if constexpr (kOp == BinaryOp::kLess) return a < b;
  if constexpr (kOp == BinaryOp::kLessEqual) return a <= b;
  if constexpr (kOp == BinaryOp::kGreater) return a > b;
  if constexpr (kOp == BinaryOp::kGreaterEqual) return a >= b;
  if constexpr (kOp == BinaryOp::kLogicalAnd) return static_cast<bool>(a) && static_cast<bool>(b);
  if constexpr (kOp == BinaryOp::kLogicalOr) return static_cast<bool>(a) || static_cast<bool>(b);
  // a = y (the forward output), b = d (its sensitivity).
  if constexpr (kOp == BinaryOp::kTanhGrad) return static_cast<T>(b * (T(1) - a * a));
  if constexpr (kOp == BinaryOp::kSigmoidGrad) return static_cast<T>(b * a * (T(1) - a));
  // a = x (the forward input), b = d.
  if constexpr (kOp == BinaryOp::kSinGrad) return static_cast<T>(b * cos(a));
  if constexpr (kOp == BinaryOp::kCosGrad) return static_cast<T>(-(b * sin(a)));
  if constexpr (kOp == BinaryOp::kReluGrad) return static_cast<T>(a > T(0) ? b : T(0));
  if constexpr (kOp == BinaryOp::kFMod) return FModOf(a, b);
  if constexpr (kOp == BinaryOp::kMod) return ModOf(a, b);
}

// Offsets of output element i in each of the first N operands.
template <int N>
__device__ inline void BroadcastOffsets(const BroadcastGeom& g, int64_t i, int64_t* off) {
  for (int k = 0; k < N; ++k) off[k] = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    const int64_t n = g.dims[d];
    const int64_t q = i % n;
    i /= n;
    for (int k = 0; k < N; ++k) off[k] += q * g.strides[k][d];
  }
}

// Same-shape operands (rank <= 1 with unit or zero strides) skip the index math.
template <BinaryOp kOp, typename T, typename R>
__global__ void BinaryFlatKernel(const T* a, int64_t sa, const T* b, int64_t sb, R* out,
                                 int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    out[i] = static_cast<R>(ApplyBinary<kOp>(a[i * sa], b[i * sb]));
  }
}

template <BinaryOp kOp, typename T, typename R>
__global__ void BinaryKernel(const T* a, const T* b, R* out, BroadcastGeom g) {
  for (int64_t i = GlobalIndex(); i < g.count; i += GlobalStride()) {
    int64_t off[2];
    BroadcastOffsets<2>(g, i, off);
    out[i] = static_cast<R>(ApplyBinary<kOp>(a[off[0]], b[off[1]]));
  }
}

template <BinaryOp kOp, typename T>
cudaError_t RunBinary(const void* a, const void* b, void* out, const BroadcastGeom& g,
                      cudaStream_t s) {
  using R = std::conditional_t<kBoolResult<kOp>, bool, T>;
  if (g.count == 0) return cudaSuccess;
  const T* pa = static_cast<const T*>(a);
  const T* pb = static_cast<const T*>(b);
  R* po = static_cast<R*>(out);
  if (g.rank <= 1) {
    const int64_t sa = g.rank == 1 ? g.strides[0][0] : 0;
    const int64_t sb = g.rank == 1 ? g.strides[1][0] : 0;
    Launch(BinaryFlatKernel<kOp, T, R>, BlocksFor(g.count), kThreads, s, pa, sa, pb, sb, po,
                                                                        g.count);
  } else {
    Launch(BinaryKernel<kOp, T, R>, BlocksFor(g.count), kThreads, s, pa, pb, po, g);
  }
  return LastLaunchError();
}

template <BinaryOp kOp>
cudaError_t BinaryFor(DT dt, const void* a, const void* b, void* out, const BroadcastGeom& g,
                      cudaStream_t s) {
  constexpr bool kBoolOnly = kOp == BinaryOp::kLogicalAnd || kOp == BinaryOp::kLogicalOr;
  constexpr bool kAllTypes = kOp == BinaryOp::kEqual || kOp == BinaryOp::kNotEqual;
  constexpr bool kFloatOnly =
      kOp == BinaryOp::kPow || kOp == BinaryOp::kTanhGrad || kOp == BinaryOp::kSigmoidGrad ||
      kOp == BinaryOp::kSinGrad || kOp == BinaryOp::kCosGrad || kOp == BinaryOp::kReluGrad;
  return DispatchAll(dt, [&](auto zero) -> cudaError_t {
    using T = decltype(zero);
    constexpr bool kIsBool = std::is_same_v<T, bool>;
    constexpr bool kOk = kBoolOnly   ? kIsBool
                         : kAllTypes ? true
                         : kFloatOnly ? std::is_floating_point_v<T>
                                      : !kIsBool;
    if constexpr (kOk) return RunBinary<kOp, T>(a, b, out, g, s);
    return cudaErrorInvalidValue;
  });
}

// ----- Select, fill, cast, dropout -----------------------------------------------------------
template <typename T>
__global__ void SelectKernel(const bool* c, const T* a, const T* b, T* out, BroadcastGeom g) {
  for (int64_t i = GlobalIndex(); i < g.count; i += GlobalStride()) {
    int64_t off[3];
    BroadcastOffsets<3>(g, i, off);
    out[i] = c[off[0]] ? a[off[1]] : b[off[2]];
  }
}

template <typename T>
__global__ void FillKernel(T* out, int64_t n, T v) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) out[i] = v;
}

template <typename To, typename From>
__global__ void CastKernel(const From* x, To* y, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) y[i] = Convert<To>(x[i]);
}

template <typename T>
__global__ void DropoutKernel(const T* x, T* y, int64_t n, uint64_t seed, double rate, T scale) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    y[i] = x[i] * (DropoutKeep(seed, static_cast<uint64_t>(i), rate) ? scale : T(0));
  }
}

// ----- Checks --------------------------------------------------------------------------------
template <typename I>
__global__ void FirstBadIndexKernel(const I* idx, int64_t n, int64_t lo, int64_t bound,
                                    unsigned long long* first) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    const int64_t v = static_cast<int64_t>(idx[i]);
    if (v < lo || v >= bound) atomicMin(first, static_cast<unsigned long long>(i));
  }
}

template <typename T>
__global__ void FirstZeroKernel(const T* x, int64_t n, unsigned long long* first) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    if (x[i] == T(0)) atomicMin(first, static_cast<unsigned long long>(i));
  }
}

}  // namespace

cudaError_t LaunchUnary(UnaryOp op, DT dt, const void* x, void* y, int64_t n, cudaStream_t s) {
  switch (op) {
#define KGRAD_UNARY_CASE(name) \
  case UnaryOp::name: return UnaryFor<UnaryOp::name>(dt, x, y, n, s);
    KGRAD_UNARY_CASE(kNeg)
    KGRAD_UNARY_CASE(kAbs)
    KGRAD_UNARY_CASE(kSign)
    KGRAD_UNARY_CASE(kSquare)
    KGRAD_UNARY_CASE(kExp)
    KGRAD_UNARY_CASE(kLog)
    KGRAD_UNARY_CASE(kLog1p)
    KGRAD_UNARY_CASE(kExpm1)
    KGRAD_UNARY_CASE(kSin)
    KGRAD_UNARY_CASE(kCos)
    KGRAD_UNARY_CASE(kTanh)
    KGRAD_UNARY_CASE(kSigmoid)
    KGRAD_UNARY_CASE(kRelu)
    KGRAD_UNARY_CASE(kGeluExact)
    KGRAD_UNARY_CASE(kGeluTanh)
    KGRAD_UNARY_CASE(kSoftplus)
    KGRAD_UNARY_CASE(kSqrt)
    KGRAD_UNARY_CASE(kRsqrt)
    KGRAD_UNARY_CASE(kReciprocal)
    KGRAD_UNARY_CASE(kErf)
    KGRAD_UNARY_CASE(kLogicalNot)
    KGRAD_UNARY_CASE(kFloor)
    KGRAD_UNARY_CASE(kCeil)
    KGRAD_UNARY_CASE(kRound)
    KGRAD_UNARY_CASE(kAsin)
    KGRAD_UNARY_CASE(kAcos)
    KGRAD_UNARY_CASE(kAtan)
    KGRAD_UNARY_CASE(kSinh)
    KGRAD_UNARY_CASE(kCosh)
    KGRAD_UNARY_CASE(kAsinh)
    KGRAD_UNARY_CASE(kAcosh)
    KGRAD_UNARY_CASE(kAtanh)
#undef KGRAD_UNARY_CASE
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchBinary(BinaryOp op, DT dt, const void* a, const void* b, void* out,
                         const BroadcastGeom& g, cudaStream_t s) {
  switch (op) {
#define KGRAD_BINARY_CASE(name) \
  case BinaryOp::name: return BinaryFor<BinaryOp::name>(dt, a, b, out, g, s);
    KGRAD_BINARY_CASE(kAdd)
    KGRAD_BINARY_CASE(kSub)
    KGRAD_BINARY_CASE(kMul)
    KGRAD_BINARY_CASE(kDiv)
    KGRAD_BINARY_CASE(kPow)
    KGRAD_BINARY_CASE(kMaximum)
    KGRAD_BINARY_CASE(kMinimum)
    KGRAD_BINARY_CASE(kEqual)
    KGRAD_BINARY_CASE(kNotEqual)
    KGRAD_BINARY_CASE(kLess)
    KGRAD_BINARY_CASE(kLessEqual)
    KGRAD_BINARY_CASE(kGreater)
    KGRAD_BINARY_CASE(kGreaterEqual)
    KGRAD_BINARY_CASE(kLogicalAnd)
    KGRAD_BINARY_CASE(kLogicalOr)
    KGRAD_BINARY_CASE(kTanhGrad)
    KGRAD_BINARY_CASE(kSigmoidGrad)
    KGRAD_BINARY_CASE(kSinGrad)
    KGRAD_BINARY_CASE(kCosGrad)
    KGRAD_BINARY_CASE(kReluGrad)
    KGRAD_BINARY_CASE(kMod)
    KGRAD_BINARY_CASE(kFMod)
#undef KGRAD_BINARY_CASE
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchSelect(DT dt, const void* c, const void* a, const void* b, void* out,
                         const BroadcastGeom& g, cudaStream_t s) {
  if (g.count == 0) return cudaSuccess;
  return DispatchAll(dt, [&](auto zero) -> cudaError_t {
    using T = decltype(zero);
    Launch(SelectKernel<T>, BlocksFor(g.count), kThreads, s, static_cast<const bool*>(c), static_cast<const T*>(a), static_cast<const T*>(b),
        static_cast<T*>(out), g);
    return LastLaunchError();
  });
}

cudaError_t LaunchFill(DT dt, void* out, int64_t n, double value, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  return DispatchAll(dt, [&](auto zero) -> cudaError_t {
    using T = decltype(zero);
    Launch(FillKernel<T>, BlocksFor(n), kThreads, s, static_cast<T*>(out), n,
                                                    Convert<T>(value));
    return LastLaunchError();
  });
}

cudaError_t LaunchCast(DT from, DT to, const void* x, void* y, int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  return DispatchAll(from, [&](auto from_zero) -> cudaError_t {
    using From = decltype(from_zero);
    return DispatchAll(to, [&](auto to_zero) -> cudaError_t {
      using To = decltype(to_zero);
      Launch(CastKernel<To, From>, BlocksFor(n), kThreads, s, static_cast<const From*>(x),
                                                            static_cast<To*>(y), n);
      return LastLaunchError();
    });
  });
}

cudaError_t LaunchDropout(DT dt, const void* x, void* y, int64_t n, uint64_t seed, double rate,
                          cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  return DispatchFloat(dt, [&](auto zero) -> cudaError_t {
    using T = decltype(zero);
    const T scale = static_cast<T>(1.0 / (1.0 - rate));
    Launch(DropoutKernel<T>, BlocksFor(n), kThreads, s, static_cast<const T*>(x),
                                                       static_cast<T*>(y), n, seed, rate, scale);
    return LastLaunchError();
  });
}

cudaError_t LaunchFirstBadIndex(DT idx_dt, const void* idx, int64_t n, int64_t lo, int64_t bound,
                                unsigned long long* first, cudaStream_t s) {
  cudaError_t e = MemsetAsync(first, 0xFF, sizeof(unsigned long long), s);
  if (e != cudaSuccess || n == 0) return e;
  return DispatchIndex(idx_dt, [&](auto zero) -> cudaError_t {
    using I = decltype(zero);
    Launch(FirstBadIndexKernel<I>, BlocksFor(n), kThreads, s, static_cast<const I*>(idx), n, lo,
           bound, first);
    return LastLaunchError();
  });
}

cudaError_t LaunchFirstZero(DT dt, const void* x, int64_t n, unsigned long long* first,
                            cudaStream_t s) {
  cudaError_t e = MemsetAsync(first, 0xFF, sizeof(unsigned long long), s);
  if (e != cudaSuccess || n == 0) return e;
  return DispatchIndex(dt, [&](auto zero) -> cudaError_t {
    using T = decltype(zero);
    Launch(FirstZeroKernel<T>, BlocksFor(n), kThreads, s, static_cast<const T*>(x), n, first);
    return LastLaunchError();
  });
}

}  // namespace cuda
}  // namespace kgrad
