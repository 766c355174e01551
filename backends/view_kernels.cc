#include "backends/view_kernels.h"

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"

namespace kgrad {

absl::Status AttrError(const KernelContext& ctx, absl::string_view attr, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(ctx.prim().name(), ": attribute '", attr, "' ", what));
}

std::string Ints(absl::Span<const int64_t> v) { return absl::StrCat("[", absl::StrJoin(v, ","), "]"); }

absl::StatusOr<int> AxisAttr(const KernelContext& ctx, const char* attr, int rank) {
  absl::StatusOr<int> a = NormalizeAxis(ctx.prim().GetInt(attr), rank);
  if (!a.ok()) return AttrError(ctx, attr, a.status().message());
  return *a;
}

namespace views {

// Input 0 with a new shape of the same element count, sharing its buffer. The
// input is moved out so that a uniquely owned buffer stays uniquely owned.

absl::StatusOr<Value> ShareAs(KernelContext& ctx, const Shape& shape) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(shape));
  if (n != x->NumElements()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot reshape ", x->TypeString(), " (",
                                                   x->NumElements(), " elements) to ",
                                                   ShapeToString(shape)));
  }
  Tensor t = ctx.mutable_input(0).TakeTensor();
  return Value(t.Reshaped(shape));
}

absl::StatusOr<Value> Reshape(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  const std::vector<int64_t>& s = ctx.prim().GetInts("shape");
  for (int64_t d : s) {
    if (d < -1) return AttrError(ctx, "shape", absl::StrCat("has a negative entry: ", Ints(s)));
  }
  Shape shape(s.begin(), s.end());
  auto minus = std::find(shape.begin(), shape.end(), int64_t{-1});
  if (minus != shape.end()) {
    *minus = 1;
    if (std::find(minus + 1, shape.end(), int64_t{-1}) != shape.end()) {
      return AttrError(ctx, "shape", absl::StrCat("has more than one -1: ", Ints(s)));
    }
    absl::StatusOr<int64_t> rest = CheckedNumElements(shape);
    if (!rest.ok()) return AttrError(ctx, "shape", rest.status().message());
    if (*rest == 0 || x->NumElements() % *rest != 0) {
      return AttrError(ctx, "shape",
                       absl::StrCat(Ints(s), " cannot hold the ", x->NumElements(), " elements of ",
                                    x->TypeString()));
    }
    *minus = x->NumElements() / *rest;
  }
  return ShareAs(ctx, shape);
}

absl::StatusOr<Value> ReshapeLike(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* ref, ctx.TensorAt(1));
  return ShareAs(ctx, ref->shape());
}

absl::StatusOr<Value> ExpandDims(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(ctx, "axis", x->rank() + 1));
  Shape shape = x->shape();
  shape.insert(shape.begin() + axis, 1);
  return ShareAs(ctx, shape);
}

absl::StatusOr<Value> Squeeze(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  const std::vector<int64_t>& axes = ctx.prim().GetInts("axes");
  // axes [] drops every size-1 dim; named axes must each be 1.
  std::vector<bool> drop(x->rank(), axes.empty());
  for (int64_t a : axes) {
    absl::StatusOr<int> norm = NormalizeAxis(a, x->rank());
    if (!norm.ok()) return AttrError(ctx, "axes", norm.status().message());
    int n = *norm;
    if (x->dim(n) != 1 || drop[n]) {
      return AttrError(ctx, "axes",
                       absl::StrCat(Ints(axes), " names dim ", n, " of ", x->TypeString(),
                                    drop[n] ? " twice" : ", which is not 1"));
    }
    drop[n] = true;
  }
  Shape shape;
  for (int i = 0; i < x->rank(); ++i) {
    if (!drop[i] || x->dim(i) != 1) shape.push_back(x->dim(i));
  }
  return ShareAs(ctx, shape);
}

}  // namespace views
}  // namespace kgrad
