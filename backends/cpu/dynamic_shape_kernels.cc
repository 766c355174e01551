// CPU kernels: the run-time shape primitives of the shape family (shape_of,
// size_of, dynamic_reshape, dynamic_broadcast_to, dynamic_fill, dynamic_slice,
// dynamic_slice_grad, dynamic_pad, dynamic_range; ops/dynamic_shape_ops.cc). Each
// reads its shape-like operands on the host (CheckShapeOperand, then the elements
// as int64) and passes them to the formulas that inference uses
// (ops/dynamic_shape_ops.h), which validate them; the data movement is the shape
// family's (backends/view_kernels.h with CpuMover). On CUDA these kernels run
// through the CPU fallback (backends/cuda/README.md).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/convert.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/view_kernels.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/dynamic_shape_ops.h"
#include "ops/shape_checks.h"

namespace kgrad {
namespace cpu {
namespace {

// Input i (called `what`) as a shape-like operand's elements, read on the host.
absl::StatusOr<std::vector<int64_t>> ReadOperand(const KernelContext& ctx, int i, const char* what,
                                                 bool scalar = false) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* t, ctx.TensorAt(i));
  KGRAD_RETURN_IF_ERROR(ops::CheckShapeOperand(ctx.prim(), i, what, *t, scalar));
  std::vector<int64_t> out(t->NumElements());
  for (int64_t k = 0; k < t->NumElements(); ++k) {
    out[k] = t->dtype() == DType::kInt32 ? t->data<int32_t>()[k] : t->data<int64_t>()[k];
  }
  return out;
}

// A new i64 tensor of `shape` holding `values`.
absl::StatusOr<Value> Int64s(KernelContext& ctx, const Shape& shape,
                             const std::vector<int64_t>& values) {
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(DType::kInt64, shape));
  std::copy(values.begin(), values.end(), out.mutable_data<int64_t>());
  return Value(std::move(out));
}

absl::StatusOr<Value> ShapeOf(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  return Int64s(ctx, {x->rank()}, std::vector<int64_t>(x->shape().begin(), x->shape().end()));
}

absl::StatusOr<Value> SizeOf(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  return Int64s(ctx, {}, {x->NumElements()});
}

absl::StatusOr<Value> DynamicReshape(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> target, ReadOperand(ctx, 1, "shape"));
  KGRAD_ASSIGN_OR_RETURN(Shape shape, ops::DynamicReshapeShape(ctx.prim(), *x, target));
  return views::ShareAs(ctx, shape);
}

absl::StatusOr<Value> DynamicBroadcastTo(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> target, ReadOperand(ctx, 1, "shape"));
  KGRAD_ASSIGN_OR_RETURN(Shape out, ops::DynamicBroadcastShape(ctx.prim(), *x, target));
  if (NumElementsOf(out) == x->NumElements()) return views::ShareAs(ctx, out);
  return moves::Dense<CpuMover>(ctx, *x, BroadcastView(x->shape(), out));
}

absl::StatusOr<Value> DynamicFill(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> target, ReadOperand(ctx, 0, "shape"));
  KGRAD_ASSIGN_OR_RETURN(Shape shape, ops::DynamicFillShape(ctx.prim(), target));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(ctx.prim().GetDType("dtype"), shape));
  KGRAD_RETURN_IF_ERROR(CpuMover::Fill(ctx, out, ctx.prim().GetFloat("value")));
  return Value(std::move(out));
}

// ----- dynamic_slice, dynamic_slice_grad --------------------------------------------------
// The starts, ends and (when given) axes and steps from input `first` on.
struct SliceInputs {
  std::vector<int64_t> starts, ends;
  std::optional<std::vector<int64_t>> axes, steps;
  ops::SliceOperands View() const {
    ops::SliceOperands s{starts, ends, std::nullopt, std::nullopt};
    if (axes) s.axes = absl::Span<const int64_t>(*axes);
    if (steps) s.steps = absl::Span<const int64_t>(*steps);
    return s;
  }
};
absl::StatusOr<SliceInputs> ReadSlice(const KernelContext& ctx, int first) {
  SliceInputs s;
  KGRAD_ASSIGN_OR_RETURN(s.starts, ReadOperand(ctx, first, "starts"));
  KGRAD_ASSIGN_OR_RETURN(s.ends, ReadOperand(ctx, first + 1, "ends"));
  if (ctx.num_inputs() > static_cast<size_t>(first + 2)) {
    KGRAD_ASSIGN_OR_RETURN(s.axes, ReadOperand(ctx, first + 2, "axes"));
  }
  if (ctx.num_inputs() > static_cast<size_t>(first + 3)) {
    KGRAD_ASSIGN_OR_RETURN(s.steps, ReadOperand(ctx, first + 3, "steps"));
  }
  return s;
}

// Whether the slice takes every element of x in order (its output is x).
bool TakesAll(const ops::SliceSpec& s, const Shape& x) {
  for (size_t d = 0; d < x.size(); ++d) {
    if (s.out[d] != x[d] || s.begin[d] != 0 || (x[d] > 1 && s.stride[d] != 1)) return false;
  }
  return true;
}

absl::StatusOr<Value> DynamicSlice(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(SliceInputs in, ReadSlice(ctx, 1));
  KGRAD_ASSIGN_OR_RETURN(ops::SliceSpec s, ops::DynamicSliceSpec(ctx.prim(), *x, in.View()));
  if (TakesAll(s, x->shape())) return std::move(ctx.mutable_input(0));
  return moves::Dense<CpuMover>(ctx, *x, SliceView(x->shape(), s.begin, s.stride, s.out));
}

absl::StatusOr<Value> DynamicSliceGrad(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(auto io, ctx.TensorsAt<2>());
  KGRAD_ASSIGN_OR_RETURN(SliceInputs in, ReadSlice(ctx, 2));
  KGRAD_ASSIGN_OR_RETURN(ops::SliceSpec s,
                         ops::DynamicSliceGradSpec(ctx.prim(), *io[0], *io[1], in.View()));
  const Shape& shape = io[1]->shape();
  return moves::Embedded<CpuMover>(ctx, *io[0], shape, 0.0,
                                   SliceView(shape, s.begin, s.stride, s.out));
}

// ----- dynamic_pad ---------------------------------------------------------------------------
// Pads where they are >= 0; where negative, the cropped part of x is cut first
// (a slice of x), then what is left is written into the filled output.
absl::StatusOr<Value> DynamicPad(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> pads, ReadOperand(ctx, 1, "pads"));
  KGRAD_ASSIGN_OR_RETURN(ops::Padding p, ops::DynamicPadSpec(ctx.prim(), *x, pads));
  const int rank = x->rank();
  Shape from(rank), to(rank), kept(rank), ones(rank, 1);
  bool crops = false;
  for (int i = 0; i < rank; ++i) {
    const int64_t b = pads[i], e = pads[i + rank];
    from[i] = std::max<int64_t>(0, -b);
    to[i] = std::max<int64_t>(0, b);
    kept[i] = std::max<int64_t>(0, x->dim(i) - from[i] - std::max<int64_t>(0, -e));
    crops |= b < 0 || e < 0;
  }
  const double value = ctx.prim().GetFloat("value");
  if (!crops) return moves::Embedded<CpuMover>(ctx, *x, p.out, value, BlockView(p.out, to, kept));
  KGRAD_ASSIGN_OR_RETURN(Value inner,
                         moves::Dense<CpuMover>(ctx, *x, SliceView(x->shape(), from, ones, kept)));
  return moves::Embedded<CpuMover>(ctx, inner.tensor(), p.out, value, BlockView(p.out, to, kept));
}

// ----- dynamic_range -------------------------------------------------------------------------
template <typename T>
absl::StatusOr<Value> RangeOf(KernelContext& ctx, T start, T limit, T delta) {
  using Wide = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
  KGRAD_ASSIGN_OR_RETURN(int64_t n, ops::RangeLength(ctx.prim(), static_cast<Wide>(start),
                                                     static_cast<Wide>(limit),
                                                     static_cast<Wide>(delta)));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(ctx.input(0).tensor().dtype(), {n}));
  T* p = out.mutable_data<T>();
  // ONNX: out[i] = start + i * delta (no accumulated rounding).
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_integral_v<T>) {  // in int64: i * delta may not fit in T
      p[i] = static_cast<T>(static_cast<int64_t>(start) + i * static_cast<int64_t>(delta));
    } else {
      p[i] = start + static_cast<T>(i) * delta;
    }
  }
  return Value(std::move(out));
}

absl::StatusOr<Value> DynamicRange(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(auto in, ctx.TensorsAt<3>());
  const char* names[] = {"start", "limit", "delta"};
  for (int i = 0; i < 3; ++i) {
    if (in[i]->dtype() != in[0]->dtype() || in[i]->rank() != 0 || in[i]->dtype() == DType::kBool) {
      return absl::InvalidArgumentError(absl::StrCat(
          ctx.prim().name(), ": input ", i, " (", names[i], ") must be a rank-0 numeric tensor ",
          "of input 0's dtype, got ", in[i]->TypeString(), " (input 0: ", in[0]->TypeString(),
          ")"));
    }
  }
  absl::StatusOr<Value> out = absl::InternalError("unreached");
  DispatchDType(in[0]->dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (kIsNumericComputeType<T>) {
      out = RangeOf<T>(ctx, in[0]->data<T>()[0], in[1]->data<T>()[0], in[2]->data<T>()[0]);
    }
  });
  return out;
}

}  // namespace

void RegisterDynamicShapeKernels(KernelTable* table) {
  table->Set(PrimId::kShapeOf, ShapeOf);
  table->Set(PrimId::kSizeOf, SizeOf);
  table->Set(PrimId::kDynamicReshape, DynamicReshape);
  table->Set(PrimId::kDynamicBroadcastTo, DynamicBroadcastTo);
  table->Set(PrimId::kDynamicFill, DynamicFill);
  table->Set(PrimId::kDynamicSlice, DynamicSlice);
  table->Set(PrimId::kDynamicSliceGrad, DynamicSliceGrad);
  table->Set(PrimId::kDynamicPad, DynamicPad);
  table->Set(PrimId::kDynamicRange, DynamicRange);
}

}  // namespace cpu
}  // namespace kgrad
