// CPU kernels: elementwise family, one kernel per row of ops/elementwise_table.inc.
// Each op's formula is its functor (ops/elementwise_functors.h), evaluated row by
// row through elementwise_rows.h, as the fused evaluator does; broadcast operands
// are walked by broadcast_plan.h. This file holds the unary maps and select, and
// registers the family; the binary maps are in elementwise_binary_kernels.cc.
// Outputs reuse a uniquely owned input buffer when they can, which is safe because
// every output element depends only on the input elements at the same position.
// Which dtypes each op takes, and the checks and output shapes, are
// ops/elementwise.h's (shared with inference and the CUDA kernels).
#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/broadcast_plan.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/elementwise_kernels.h"
#include "backends/cpu/elementwise_rows.h"
#include "backends/cpu/parallel.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/elementwise.h"

namespace kgrad {
namespace cpu {
namespace {

// ----- Unary maps ---------------------------------------------------------------------
template <PrimId kId, typename F>
absl::StatusOr<Value> UnaryKernel(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_RETURN_IF_ERROR(ops::CheckUnary(kId, *x));
  KGRAD_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOrReuse({0}, x->dtype(), x->shape()));
  const ew::Attrs at = F::Read(ctx.prim());
  DispatchDType(x->dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (Allows(ops::ElementwiseDTypes(kId), DTypeOf<T>::value)) {
      using E = Elem<T>;
      const E* px = x->data<E>();
      E* py = y.mutable_data<E>();
      ParallelFor(x->NumElements(), GrainOf<F>(), [&](int64_t b, int64_t e) {
        UnaryRow<F>(at, px + b, py + b, e - b);
      });
    }
  });
  return Value(std::move(y));
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
  const ew::Attrs none;
  for (int64_t i = 0; i < n; ++i) {
    const T x = kA ? a[i] : a0, y = kB ? b[i] : b0;
    out[i] = ew::SelectOp::Apply(none, kC ? c[i] : c0, x, y);
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
  const ew::Attrs none;
  for (int64_t i = 0; i < n; ++i) {  // any other stride (not produced today)
    out[i] = ew::SelectOp::Apply(none, c[i * sc], a[i * sa], b[i * sb]);
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
    ForEachRow(plan, kParallelGrain, [&](const std::array<int64_t, 3>& off, int64_t o, int64_t n) {
      SelectRow(pc + off[0], s[0], pa + off[1], s[1], pb + off[2], s[2], po + o, n);
    });
  });
  return Value(std::move(out));
}

template <int kArity, PrimId kId, typename F>
void SetKernel(KernelTable* t) {
  if constexpr (kArity == 1) {
    t->Set(kId, UnaryKernel<kId, F>);
  } else if constexpr (kArity == 3) {
    t->Set(kId, SelectKernel);
  }
}

}  // namespace

// One kernel per row of the table; the binary maps are in
// elementwise_binary_kernels.cc (a translation unit of their own, so that the two
// halves of the family compile in parallel).
void RegisterElementwiseKernels(KernelTable* t) {
#define KGRAD_ELEMENTWISE(Name, wire, arity, dtypes, result, fusion, onnx) \
  SetKernel<arity, PrimId::k##Name, ew::Name##Op>(t);
#include "ops/elementwise_table.inc"
#undef KGRAD_ELEMENTWISE
  RegisterBinaryElementwiseKernels(t);
}

}  // namespace cpu
}  // namespace kgrad
