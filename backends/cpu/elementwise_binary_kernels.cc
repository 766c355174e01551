// CPU kernels: the binary maps of the elementwise family (the rows of
// ops/elementwise_table.inc of arity 2), each computing its functor over the
// broadcast operands' rows (elementwise_rows.h). See elementwise_kernels.cc.
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

// ----- Binary maps ------------------------------------------------------------------------
template <PrimId kId, typename F>
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
  const ew::Attrs at = F::Read(ctx.prim());
  DispatchDType(a->dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (Allows(ops::ElementwiseDTypes(kId), DTypeOf<T>::value)) {
      using E = Elem<T>;
      using R = std::conditional_t<kBoolOut, uint8_t, E>;
      const E* pa = a->data<E>();
      const E* pb = b->data<E>();
      R* po = out.mutable_data<R>();
      ForEachRow(plan, GrainOf<F>(), [&](const std::array<int64_t, 2>& off, int64_t o, int64_t n) {
        BinaryRow<F>(at, pa + off[0], plan.inner_strides[0], pb + off[1], plan.inner_strides[1],
                     po + o, n);
      });
    }
  });
  return Value(std::move(out));
}

template <int kArity, PrimId kId, typename F>
void SetKernel(KernelTable* t) {
  if constexpr (kArity == 2) t->Set(kId, BinaryKernel<kId, F>);
}

}  // namespace

void RegisterBinaryElementwiseKernels(KernelTable* t) {
#define KGRAD_ELEMENTWISE(Name, wire, arity, dtypes, result, fusion, onnx) \
  SetKernel<arity, PrimId::k##Name, ew::Name##Op>(t);
#include "ops/elementwise_table.inc"
#undef KGRAD_ELEMENTWISE
}

}  // namespace cpu
}  // namespace kgrad
