// Shape and data-movement primitives: definitions, shape/dtype inference and
// gradient rules (the adjoints, at the end of the file).
// Semantics are fixed by the gradient rules that rely on them; each inference
// function states its primitive's math in one line. Unknown dims (kUnknownDim)
// propagate: a check that depends on an unknown dim is left to the kernel.
#include "ops/shape_ops.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/bprop_context.h"
#include "ops/op_util.h"

namespace kgrad {
namespace ops {
namespace {

// ----- Helpers --------------------------------------------------------------------
absl::Status AttrError(const InferCall& c, absl::string_view attr, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(c.prim.name(), ": attribute '", attr, "' ", what));
}

std::string Ints(const std::vector<int64_t>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ","), "]");
}

bool DimsMatch(int64_t a, int64_t b) { return a == b || a < 0 || b < 0; }
// The known one of two compatible dims.
int64_t MergeDim(int64_t a, int64_t b) { return a >= 0 ? a : b; }

AbstractPtr TensorLike(const AbstractTensor* t, Shape shape) {
  return MakeAbstractTensor(t->dtype(), std::move(shape));
}

// A shape attribute: every entry >= 0 (or one -1 when `allow_infer`), at most
// kMaxRank entries, and a product that stays within kMaxElements.
absl::Status CheckShapeAttr(const InferCall& c, const char* attr, bool allow_infer) {
  const std::vector<int64_t>& s = c.prim.GetInts(attr);
  int inferred = 0;
  Shape known;
  for (int64_t d : s) {
    if (d == -1 && allow_infer) {
      ++inferred;
    } else if (d < 0) {
      return AttrError(c, attr, absl::StrCat("has a negative entry: ", Ints(s)));
    } else {
      known.push_back(d);
    }
  }
  if (inferred > 1) return AttrError(c, attr, absl::StrCat("has more than one -1: ", Ints(s)));
  if (s.size() > static_cast<size_t>(kMaxRank)) {
    return AttrError(c, attr, absl::StrCat("has more than ", kMaxRank, " entries"));
  }
  absl::StatusOr<int64_t> n = CheckedNumElements(known);
  if (!n.ok()) return AttrError(c, attr, n.status().message());
  return absl::OkStatus();
}

// Product of the known dims and whether any dim is unknown.
struct KnownCount {
  int64_t product;
  bool has_unknown;
};
absl::StatusOr<KnownCount> CountKnown(absl::Span<const int64_t> dims) {
  Shape known;
  for (int64_t d : dims) {
    if (d >= 0) known.push_back(d);
  }
  KGRAD_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(known));
  return KnownCount{n, known.size() != dims.size()};
}

// False only when the element counts of `a` and `b` certainly differ.
absl::StatusOr<bool> CountsMayMatch(absl::Span<const int64_t> a, absl::Span<const int64_t> b) {
  KGRAD_ASSIGN_OR_RETURN(KnownCount ka, CountKnown(a));
  KGRAD_ASSIGN_OR_RETURN(KnownCount kb, CountKnown(b));
  if (!ka.has_unknown && !kb.has_unknown) return ka.product == kb.product;
  if (ka.has_unknown && kb.has_unknown) return true;
  if (ka.has_unknown) std::swap(ka, kb);
  // a has exactly ka.product elements; b has kb.product * (unknown dims).
  if (kb.product == 0) return ka.product == 0;
  return ka.product % kb.product == 0;
}

// ----- reshape / reshape_like ---------------------------------------------------------
// reshape(x){shape}: x's elements in row-major order with a new shape; one -1 is
// inferred from the element count.
absl::StatusOr<AbstractPtr> InferReshape(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_RETURN_IF_ERROR(CheckShapeAttr(c, "shape", /*allow_infer=*/true));
  const std::vector<int64_t>& s = c.prim.GetInts("shape");
  Shape out(s.begin(), s.end());
  auto minus = std::find(out.begin(), out.end(), int64_t{-1});
  if (minus == out.end()) {
    KGRAD_ASSIGN_OR_RETURN(bool ok, CountsMayMatch(x->shape(), out));
    if (!ok) {
      return AttrError(c, "shape",
                       absl::StrCat(Ints(s), " does not have as many elements as ", x->ToString()));
    }
    return TensorLike(x, out);
  }
  *minus = 1;
  int64_t rest = NumElementsOf(out);
  if (rest == 0) {
    return AttrError(c, "shape", absl::StrCat(Ints(s), ": the -1 is ambiguous next to a 0"));
  }
  *minus = kUnknownDim;
  if (!x->shape_known()) return TensorLike(x, out);
  int64_t n = NumElementsOf(x->shape());
  if (n % rest != 0) {
    return AttrError(c, "shape",
                     absl::StrCat(Ints(s), " cannot hold the ", n, " elements of ", x->ToString()));
  }
  *minus = n / rest;
  return TensorLike(x, out);
}

// reshape_like(x, ref): x reshaped to ref's shape.
absl::StatusOr<AbstractPtr> InferReshapeLike(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ref, TensorArg(c, 1));
  KGRAD_ASSIGN_OR_RETURN(bool ok, CountsMayMatch(x->shape(), ref->shape()));
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat("reshape_like: input 0 ", x->ToString(),
                                                   " does not have as many elements as input 1 ",
                                                   ref->ToString()));
  }
  return TensorLike(x, ref->shape());
}

// ----- transpose ---------------------------------------------------------------------
// transpose(x){perm}: out.shape[i] = x.shape[perm[i]]; perm [] reverses the axes.
absl::StatusOr<AbstractPtr> InferTranspose(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  std::vector<int64_t> perm = c.prim.GetInts("perm");
  int rank = x->rank();
  if (perm.empty()) {
    for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  if (static_cast<int>(perm.size()) != rank) {
    return AttrError(c, "perm",
                     absl::StrCat(Ints(perm), " must have ", rank, " entries for ", x->ToString()));
  }
  std::vector<bool> seen(rank, false);
  Shape out;
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p]) {
      return AttrError(c, "perm",
                       absl::StrCat(Ints(perm), " is not a permutation of [0, ", rank, ")"));
    }
    seen[p] = true;
    out.push_back(x->shape()[p]);
  }
  return TensorLike(x, out);
}

// ----- broadcast_to / sum_to -------------------------------------------------------------
// `x` broadcast (NumPy, right-aligned) to `target`; unknown dims in either side
// are resolved from the other where possible.
absl::StatusOr<Shape> BroadcastInto(const Shape& x, const Shape& target) {
  if (x.size() > target.size()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot broadcast ", ShapeToString(x),
                                                   " to the lower rank ", ShapeToString(target)));
  }
  Shape out = target;
  size_t lead = target.size() - x.size();
  for (size_t i = 0; i < x.size(); ++i) {
    int64_t d = x[i], t = target[lead + i];
    if (d == 1 || DimsMatch(d, t)) {
      if (d != 1) out[lead + i] = MergeDim(t, d);
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat("cannot broadcast ", ShapeToString(x), " to ",
                                                   ShapeToString(target), ": dim ", i, " is ", d,
                                                   ", target ", t));
  }
  return out;
}

// broadcast_to(x){shape}: x repeated along its size-1 and missing leading dims.
absl::StatusOr<AbstractPtr> InferBroadcastTo(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_RETURN_IF_ERROR(CheckShapeAttr(c, "shape", /*allow_infer=*/false));
  const std::vector<int64_t>& s = c.prim.GetInts("shape");
  absl::StatusOr<Shape> out = BroadcastInto(x->shape(), Shape(s.begin(), s.end()));
  if (!out.ok()) return AttrError(c, "shape", out.status().message());
  return TensorLike(x, *out);
}

// broadcast_to_like(x, ref): broadcast_to(x) with ref's shape.
absl::StatusOr<AbstractPtr> InferBroadcastToLike(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ref, TensorArg(c, 1));
  absl::StatusOr<Shape> out = BroadcastInto(x->shape(), ref->shape());
  if (!out.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast_to_like: ", out.status().message()));
  }
  return TensorLike(x, *out);
}

// The shape that sum_to(x) gives for `target`: `target` must broadcast to x's
// shape (target dims are 1 or equal to x's; extra leading target dims are 1).
absl::StatusOr<Shape> SumInto(const Shape& x, const Shape& target) {
  Shape out = target;
  int64_t shift = static_cast<int64_t>(x.size()) - static_cast<int64_t>(target.size());
  for (int64_t i = 0; i < static_cast<int64_t>(target.size()); ++i) {
    int64_t t = target[i], d = i + shift >= 0 ? x[i + shift] : 1;
    if (t == 1 || DimsMatch(t, d)) {
      // An unknown target dim is 1 when x has 1 there or x does not reach it.
      if (t < 0 && d == 1) out[i] = 1;
      if (t < 0 && d > 1) out[i] = kUnknownDim;  // 1 or d: cannot tell
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot sum ", ShapeToString(x), " to ", ShapeToString(target),
        " (it does not broadcast back): target dim ", i, " is ", t, ", input has ", d));
  }
  return out;
}

absl::StatusOr<const AbstractTensor*> NumericTensorArg(const InferCall& c, int i) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, TensorArg(c, i));
  if (t->dtype() == DType::kBool) return ArgError(c, i, "a numeric (not bool) tensor");
  return t;
}

// sum_to(x){shape}: the adjoint of broadcast_to: x summed over the dims that a
// broadcast from `shape` would have created.
absl::StatusOr<AbstractPtr> InferSumTo(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, NumericTensorArg(c, 0));
  KGRAD_RETURN_IF_ERROR(CheckShapeAttr(c, "shape", /*allow_infer=*/false));
  const std::vector<int64_t>& s = c.prim.GetInts("shape");
  absl::StatusOr<Shape> out = SumInto(x->shape(), Shape(s.begin(), s.end()));
  if (!out.ok()) return AttrError(c, "shape", out.status().message());
  return TensorLike(x, *out);
}

// sum_to_like(x, ref): sum_to(x) with ref's shape.
absl::StatusOr<AbstractPtr> InferSumToLike(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, NumericTensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ref, TensorArg(c, 1));
  absl::StatusOr<Shape> out = SumInto(x->shape(), ref->shape());
  if (!out.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("sum_to_like: ", out.status().message()));
  }
  return TensorLike(x, *out);
}

// ----- expand_dims / squeeze -----------------------------------------------------------
// expand_dims(x){axis}: a new size-1 dim at `axis` in [-rank-1, rank].
absl::StatusOr<AbstractPtr> InferExpandDims(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  absl::StatusOr<int> axis = NormalizeAxis(c.prim.GetInt("axis"), x->rank() + 1);
  if (!axis.ok()) return AttrError(c, "axis", axis.status().message());
  Shape out = x->shape();
  out.insert(out.begin() + *axis, 1);
  return TensorLike(x, out);
}

// squeeze(x){axes}: x without the named size-1 dims (all size-1 dims for []).
absl::StatusOr<AbstractPtr> InferSqueeze(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  const std::vector<int64_t>& axes = c.prim.GetInts("axes");
  const Shape& in = x->shape();
  std::vector<bool> drop(in.size(), false);
  if (axes.empty()) {
    for (size_t i = 0; i < in.size(); ++i) {
      // The output rank would depend on the unknown dim.
      if (in[i] < 0) {
        return AttrError(c, "axes",
                         absl::StrCat("[] needs a known shape, got ", x->ToString(),
                                      "; name the axes to squeeze"));
      }
      drop[i] = in[i] == 1;
    }
  } else {
    absl::StatusOr<std::vector<int>> norm = NormalizeAxes(axes, x->rank(), false);
    if (!norm.ok()) return AttrError(c, "axes", norm.status().message());
    for (int a : *norm) {
      if (in[a] >= 0 && in[a] != 1) {
        return AttrError(c, "axes",
                         absl::StrCat("names dim ", a, " of ", x->ToString(), ", which is not 1"));
      }
      drop[a] = true;
    }
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!drop[i]) out.push_back(in[i]);
  }
  return TensorLike(x, out);
}

// ----- concat / split ---------------------------------------------------------------------
// concat(x0, x1, ...){axis}: the inputs joined along `axis`.
absl::StatusOr<AbstractPtr> InferConcat(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* first, TensorArg(c, 0));
  absl::StatusOr<int> axis = NormalizeAxis(c.prim.GetInt("axis"), first->rank());
  if (!axis.ok()) return AttrError(c, "axis", axis.status().message());
  Shape out = first->shape();
  for (int i = 1; i < static_cast<int>(c.args.size()); ++i) {
    KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, i));
    if (x->dtype() != first->dtype() || x->rank() != first->rank()) {
      return ArgError(c, i,
                      absl::StrCat("a ", DTypeName(first->dtype()), " tensor of rank ",
                                   first->rank(), " like input 0"));
    }
    for (int d = 0; d < x->rank(); ++d) {
      int64_t a = out[d], b = x->shape()[d];
      if (d == *axis) {
        out[d] = a < 0 || b < 0 ? kUnknownDim : a + b;
      } else if (!DimsMatch(a, b)) {
        return ArgError(
            c, i,
            absl::StrCat("equal to input 0 on dim ", d, " (", a, ") for concat on axis ", *axis));
      } else {
        out[d] = MergeDim(a, b);
      }
    }
  }
  return TensorLike(first, out);
}

// split(x){axis, sizes}: a tuple of consecutive pieces of x along `axis`.
absl::StatusOr<AbstractPtr> InferSplit(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  absl::StatusOr<int> axis = NormalizeAxis(c.prim.GetInt("axis"), x->rank());
  if (!axis.ok()) return AttrError(c, "axis", axis.status().message());
  const std::vector<int64_t>& sizes = c.prim.GetInts("sizes");
  if (sizes.empty()) return AttrError(c, "sizes", "must not be empty");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0 || s > kMaxElements) {
      return AttrError(c, "sizes", absl::StrCat("has a bad entry: ", Ints(sizes)));
    }
    total += s;
  }
  int64_t dim = x->shape()[*axis];
  if (dim >= 0 && total != dim) {
    return AttrError(c, "sizes",
                     absl::StrCat(Ints(sizes), " sums to ", total, ", but dim ", *axis, " of ",
                                  x->ToString(), " is ", dim));
  }
  std::vector<AbstractPtr> parts;
  for (int64_t s : sizes) {
    Shape shape = x->shape();
    shape[*axis] = s;
    parts.push_back(TensorLike(x, shape));
  }
  return MakeAbstractTuple(std::move(parts));
}

// ----- slice / slice_grad --------------------------------------------------------------------
// Output dims of slice for `in` (unknown input dims give unknown output dims).
absl::StatusOr<Shape> SliceShape(const InferCall& c, const Shape& in) {
  const std::vector<int64_t>& begin = c.prim.GetInts("begin");
  const std::vector<int64_t>& end = c.prim.GetInts("end");
  std::vector<int64_t> strides = c.prim.GetInts("strides");
  if (strides.empty()) strides.assign(in.size(), 1);
  const std::pair<const char*, size_t> lens[] = {
      {"begin", begin.size()}, {"end", end.size()}, {"strides", strides.size()}};
  for (const auto& [name, len] : lens) {
    if (len != in.size()) {
      return AttrError(c, name,
                       absl::StrCat("has ", len, " entries, expected the rank ", in.size()));
    }
  }
  Shape out(in.size(), kUnknownDim);
  for (size_t i = 0; i < in.size(); ++i) {
    if (strides[i] < 1) {
      return AttrError(c, "strides", absl::StrCat("must be >= 1, got ", Ints(strides)));
    }
    int64_t d = in[i];
    if (d < 0) continue;
    int64_t b = begin[i] < 0 ? begin[i] + d : begin[i];
    int64_t e = end[i] < 0 ? end[i] + d : end[i];
    b = std::clamp<int64_t>(b, 0, d);
    e = std::clamp<int64_t>(e, 0, d);
    out[i] = e > b ? (e - b - 1) / strides[i] + 1 : 0;
  }
  return out;
}

// slice(x){begin, end, strides}: x[begin:end:strides] per dim, NumPy-style bounds.
absl::StatusOr<AbstractPtr> InferSlice(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(Shape out, SliceShape(c, x->shape()));
  return TensorLike(x, out);
}

// slice_grad(dy, x_ref){begin, end, strides}: zeros shaped like x_ref with dy
// written at the sliced positions (the adjoint of slice).
absl::StatusOr<AbstractPtr> InferSliceGrad(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* dy, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ref, TensorArg(c, 1));
  KGRAD_ASSIGN_OR_RETURN(Shape sliced, SliceShape(c, ref->shape()));
  bool ok = dy->rank() == ref->rank();
  for (int i = 0; ok && i < dy->rank(); ++i) ok = DimsMatch(dy->shape()[i], sliced[i]);
  if (!ok) {
    return ArgError(c, 0,
                    absl::StrCat("shaped like the slice of input 1, ", ShapeToString(sliced)));
  }
  return TensorLike(dy, ref->shape());
}

// ----- gather / scatter_add ----------------------------------------------------------------
absl::StatusOr<const AbstractTensor*> IndexArg(const InferCall& c, int i) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, TensorArg(c, i));
  if (!IsInteger(t->dtype())) return ArgError(c, i, "an i32 or i64 index tensor");
  return t;
}

// params.shape[:axis] + indices.shape + params.shape[axis+1:].
Shape GatherShape(const Shape& params, int axis, const Shape& indices) {
  Shape out(params.begin(), params.begin() + axis);
  out.insert(out.end(), indices.begin(), indices.end());
  out.insert(out.end(), params.begin() + axis + 1, params.end());
  return out;
}

// gather(params, indices){axis}: out[a.., j.., b..] = params[a.., indices[j..], b..].
absl::StatusOr<AbstractPtr> InferGather(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* params, TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* indices, IndexArg(c, 1));
  absl::StatusOr<int> axis = NormalizeAxis(c.prim.GetInt("axis"), params->rank());
  if (!axis.ok()) return AttrError(c, "axis", axis.status().message());
  Shape out = GatherShape(params->shape(), *axis, indices->shape());
  if (out.size() > static_cast<size_t>(kMaxRank)) {
    return ArgError(c, 1, absl::StrCat("an index tensor giving a result of rank <= ", kMaxRank));
  }
  return TensorLike(params, out);
}

// scatter_add(input, indices, updates){axis}: input with updates[a.., j.., b..]
// added at [a.., indices[j..], b..] (the adjoint of gather in params).
absl::StatusOr<AbstractPtr> InferScatterAdd(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* input, NumericTensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* indices, IndexArg(c, 1));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* updates, TensorArg(c, 2));
  absl::StatusOr<int> axis = NormalizeAxis(c.prim.GetInt("axis"), input->rank());
  if (!axis.ok()) return AttrError(c, "axis", axis.status().message());
  KGRAD_RETURN_IF_ERROR(SameDType(c, {0, 2}));
  Shape want = GatherShape(input->shape(), *axis, indices->shape());
  bool ok = updates->rank() == static_cast<int>(want.size());
  for (size_t i = 0; ok && i < want.size(); ++i) ok = DimsMatch(want[i], updates->shape()[i]);
  if (!ok) return ArgError(c, 2, absl::StrCat("updates shaped ", ShapeToString(want)));
  // Dims outside the indexed axis may be known from the updates only.
  Shape out = input->shape();
  int k = indices->rank();
  for (int i = 0; i < input->rank(); ++i) {
    if (i != *axis) out[i] = MergeDim(out[i], updates->shape()[i < *axis ? i : i + k - 1]);
  }
  return TensorLike(input, out);
}

// ----- pad / one_hot / cast / fill -------------------------------------------------------------
// pad(x){pads, value}: x surrounded by pads[2i] leading and pads[2i+1] trailing
// elements equal to `value` on dim i.
absl::StatusOr<AbstractPtr> InferPad(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  const std::vector<int64_t>& pads = c.prim.GetInts("pads");
  if (pads.size() != 2 * x->shape().size()) {
    return AttrError(
        c, "pads",
        absl::StrCat("has ", pads.size(), " entries, expected 2 * rank = ", 2 * x->shape().size()));
  }
  Shape out = x->shape();
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t b = pads[2 * i], a = pads[2 * i + 1];
    if (b < 0 || a < 0 || b > kMaxElements || a > kMaxElements) {
      return AttrError(c, "pads", absl::StrCat("must be >= 0 (and not huge), got ", Ints(pads)));
    }
    if (out[i] >= 0) out[i] += b + a;
  }
  if (absl::StatusOr<KnownCount> n = CountKnown(out); !n.ok()) {
    return AttrError(c, "pads", n.status().message());
  }
  return TensorLike(x, out);
}

// one_hot(indices){depth, on_value, off_value, dtype, axis}: a new dim of size
// depth at `axis`, on_value where its position equals the index, else off_value.
absl::StatusOr<AbstractPtr> InferOneHot(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* indices, IndexArg(c, 0));
  int64_t depth = c.prim.GetInt("depth");
  if (depth < 0 || depth > kMaxElements) {
    return AttrError(c, "depth", absl::StrCat("must be >= 0, got ", depth));
  }
  absl::StatusOr<int> axis = NormalizeAxis(c.prim.GetInt("axis"), indices->rank() + 1);
  if (!axis.ok()) return AttrError(c, "axis", axis.status().message());
  Shape out = indices->shape();
  out.insert(out.begin() + *axis, depth);
  if (absl::StatusOr<KnownCount> n = CountKnown(out); !n.ok()) {
    return AttrError(c, "depth", n.status().message());
  }
  return MakeAbstractTensor(c.prim.GetDType("dtype"), out);
}

// cast(x){dtype}: x converted elementwise (float->int truncates, ->bool is != 0).
absl::StatusOr<AbstractPtr> InferCast(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  return MakeAbstractTensor(c.prim.GetDType("dtype"), x->shape());
}

// fill(){shape, value, dtype}: a tensor of `shape` with every element `value`.
absl::StatusOr<AbstractPtr> InferFill(const InferCall& c) {
  KGRAD_RETURN_IF_ERROR(CheckShapeAttr(c, "shape", /*allow_infer=*/false));
  const std::vector<int64_t>& s = c.prim.GetInts("shape");
  return MakeAbstractTensor(c.prim.GetDType("dtype"), Shape(s.begin(), s.end()));
}

// ----- Gradient rules ------------------------------------------------------------------
// Every differentiable op here is linear in its data input, so each rule is the
// adjoint: reshape <-> reshape, transpose <-> inverse transpose, broadcast_to <->
// sum_to, slice <-> slice_grad, pad -> slice, gather <-> scatter_add, concat <->
// split. The rules of the adjoints map back, so grad-of-grad closes over this
// family. Reference inputs of the *_like ops (and slice_grad's x_ref) give only a
// shape: they get no gradient.

// Forward: y = reshape(x){shape}.  Backward: dx = reshape_like(dy, x).
// (Also for reshape_like(x, ref), expand_dims and squeeze: the same elements in the
// same order with another shape; ref gets nothing.)
absl::Status BpropReshape(BpropContext& c) {
  c.SetGrad(0, c.ReshapeLike(c.Dout(), c.I(0)));
  return absl::OkStatus();
}

// Forward: y = transpose(x){perm}, y.shape[i] = x.shape[perm[i]].
// Backward: dx = transpose(dy){inverse(perm)} (perm [] reverses, its own inverse).
absl::Status BpropTranspose(BpropContext& c) {
  const std::vector<int64_t>& perm = c.prim().GetInts("perm");
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(perm.size())) {
      return c.Error(absl::StrCat("attribute 'perm' ", Ints(perm), " is not a permutation"));
    }
    inverse[perm[i]] = static_cast<int64_t>(i);
  }
  c.SetGrad(0, c.Transpose(c.Dout(), std::move(inverse)));
  return absl::OkStatus();
}

// Forward: y = broadcast_to(x){shape} (or broadcast_to_like(x, ref)).
// Backward: dx = sum_to(dy, x.shape) (sum_to_like(dy, x) when x's dims are unknown).
absl::Status BpropBroadcastTo(BpropContext& c) {
  c.SetGrad(0, c.SumToInput(c.Dout(), 0));
  return absl::OkStatus();
}

// Forward: y = sum_to(x){shape} (or sum_to_like(x, ref)).  Backward: dx =
// broadcast_to_like(dy, x). A target of higher rank than x has only leading 1s
// beyond x's rank (x broadcasts to it); those are squeezed from dy first.
absl::Status BpropSumTo(BpropContext& c) {
  absl::StatusOr<int> x_rank = c.InRank(0);
  if (!x_rank.ok()) return x_rank.status();
  const AbstractTensor* out = AsTensor(c.OutAbs());
  if (out == nullptr) return c.Error("the gradient rule needs the rank of the output");
  AnfNode* dy = c.Dout();
  if (out->rank() > *x_rank) {
    std::vector<int64_t> lead;
    for (int i = 0; i < out->rank() - *x_rank; ++i) lead.push_back(i);
    dy = c.Op(PrimId::kSqueeze, {dy}, {{"axes", std::move(lead)}});
  }
  c.SetGrad(0, c.BroadcastToLike(dy, c.I(0)));
  return absl::OkStatus();
}

// Forward: y = concat(x_0, ..., x_n){axis}.
// Backward: (dx_0, ..., dx_n) = split(dy){axis, sizes = [x_i.shape[axis]...]}.
// The sizes are static: a clear error when one is unknown.
absl::Status BpropConcat(BpropContext& c) {
  absl::StatusOr<int> rank = c.InRank(0);
  if (!rank.ok()) return rank.status();
  absl::StatusOr<int> axis = NormalizeAxis(c.prim().GetInt("axis"), *rank);
  if (!axis.ok()) return c.Error(std::string(axis.status().message()));
  std::vector<int64_t> sizes;
  for (int i = 0; i < c.num_inputs(); ++i) {
    absl::StatusOr<Shape> s = c.InShape(i);
    if (!s.ok()) return s.status();
    int64_t d = static_cast<int>(s->size()) == *rank ? (*s)[*axis] : kUnknownDim;
    if (d < 0) {
      return c.Error(absl::StrCat("the gradient rule splits dy into the inputs' sizes along axis ",
                                  *axis, ", but input ", i, " has an unknown size there (",
                                  ShapeToString(*s), "); declare it"));
    }
    sizes.push_back(d);
  }
  AnfNode* parts = c.Op(PrimId::kSplit, {c.Dout()},
                        {{"axis", int64_t{*axis}}, {"sizes", std::move(sizes)}});
  for (int i = 0; i < c.num_inputs(); ++i) c.SetGrad(i, c.GetItem(parts, i));
  return absl::OkStatus();
}

// Forward: (y_0, ..., y_n) = split(x){axis, sizes}.
// Backward: dx = concat(dy[0], ..., dy[n]){axis} (dy's unused elements are the
// zeros that the transform materialises for a tuple).
absl::Status BpropSplit(BpropContext& c) {
  size_t n = c.prim().GetInts("sizes").size();
  std::vector<AnfNode*> parts;
  for (size_t i = 0; i < n; ++i) parts.push_back(c.GetItem(c.Dout(), static_cast<int64_t>(i)));
  c.SetGrad(0, c.Op(PrimId::kConcat, std::move(parts), {{"axis", c.prim().GetInt("axis")}}));
  return absl::OkStatus();
}

// Forward: y = slice(x){begin, end, strides}.
// Backward: dx = slice_grad(dy, x){begin, end, strides} (zeros with dy scattered in).
absl::Status BpropSlice(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kSliceGrad, {c.Dout(), c.I(0)}, c.prim().attrs()));
  return absl::OkStatus();
}

// Forward: y = slice_grad(g, x_ref){begin, end, strides}.
// Backward: dg = slice(dy){begin, end, strides}; x_ref gets nothing.
absl::Status BpropSliceGrad(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kSlice, {c.Dout()}, c.prim().attrs()));
  return absl::OkStatus();
}

// Forward: y = gather(params, indices){axis}.
// Backward: dparams = scatter_add(zeros_like(params), indices, dy){axis} (repeated
// indices accumulate); indices are integers and get nothing.
absl::Status BpropGather(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kScatterAdd, {c.ZerosLike(c.I(0)), c.I(1), c.Dout()},
                    {{"axis", c.prim().GetInt("axis")}}));
  return absl::OkStatus();
}

// Forward: y = scatter_add(input, indices, updates){axis}.
// Backward: dinput = dy, dupdates = gather(dy, indices){axis}.
absl::Status BpropScatterAdd(BpropContext& c) {
  c.SetGrad(0, c.Dout());
  c.SetGrad(2, c.Op(PrimId::kGather, {c.Dout(), c.I(1)}, {{"axis", c.prim().GetInt("axis")}}));
  return absl::OkStatus();
}

// Forward: y = pad(x){pads, value}.  Backward: dx = dy[pads[2i] : d_i - pads[2i+1]]
// on every dim i, a slice with a negative end (or "to the end", the largest int64,
// clamped by slice) so that x's dims need not be known. The pad value is a
// constant: it gets nothing.
absl::Status BpropPad(BpropContext& c) {
  const std::vector<int64_t>& pads = c.prim().GetInts("pads");
  std::vector<int64_t> begin, end;
  for (size_t i = 0; i + 1 < pads.size(); i += 2) {
    begin.push_back(pads[i]);
    end.push_back(pads[i + 1] > 0 ? -pads[i + 1] : std::numeric_limits<int64_t>::max());
  }
  c.SetGrad(0, c.Op(PrimId::kSlice, {c.Dout()},
                    {{"begin", std::move(begin)}, {"end", std::move(end)}}));
  return absl::OkStatus();
}

// Forward: y = cast(x){dtype}.  Backward: dx = cast(dy){x.dtype} for a floating
// target (dy itself when the dtypes are equal); zero (unset) for an integer or bool
// target, whose output carries no gradient.
absl::Status BpropCast(BpropContext& c) {
  DType to = c.prim().GetDType("dtype");
  if (!IsFloating(to)) return absl::OkStatus();
  absl::StatusOr<DType> from = c.InDType(0);
  if (!from.ok()) return from.status();
  if (!IsFloating(*from)) return absl::OkStatus();
  c.SetGrad(0, *from == to ? c.Dout() : c.Cast(c.Dout(), *from));
  return absl::OkStatus();
}

PrimitiveDef Linear(PrimitiveDef d, BpropFn bprop) {
  d.linear = true;
  d.bprop = bprop;
  return d;
}

PrimitiveDef WithBprop(PrimitiveDef d, BpropFn bprop) {
  d.bprop = bprop;
  return d;
}

PrimitiveDef ZeroGradient(PrimitiveDef d) {
  d.zero_gradient = true;
  return d;
}

}  // namespace

void RegisterShapeOps(std::vector<PrimitiveDef>* defs) {
  const AttrSpec shape = RequiredAttr("shape", AttrType::kInts);
  const AttrSpec axis0 = IntAttr("axis", 0);
  const std::vector<AttrSpec> slice = {RequiredAttr("begin", AttrType::kInts),
                                       RequiredAttr("end", AttrType::kInts),
                                       IntsAttr("strides", {})};
  defs->push_back(Linear(MakeDef(PrimId::kReshape, 1, 1, InferReshape, {shape}), BpropReshape));
  defs->push_back(Linear(MakeDef(PrimId::kReshapeLike, 2, 2, InferReshapeLike), BpropReshape));
  defs->push_back(Linear(
      MakeDef(PrimId::kTranspose, 1, 1, InferTranspose, {IntsAttr("perm", {})}), BpropTranspose));
  defs->push_back(
      Linear(MakeDef(PrimId::kBroadcastTo, 1, 1, InferBroadcastTo, {shape}), BpropBroadcastTo));
  defs->push_back(
      Linear(MakeDef(PrimId::kBroadcastToLike, 2, 2, InferBroadcastToLike), BpropBroadcastTo));
  defs->push_back(Linear(MakeDef(PrimId::kSumTo, 1, 1, InferSumTo, {shape}), BpropSumTo));
  defs->push_back(Linear(MakeDef(PrimId::kSumToLike, 2, 2, InferSumToLike), BpropSumTo));
  defs->push_back(Linear(
      MakeDef(PrimId::kExpandDims, 1, 1, InferExpandDims, {RequiredAttr("axis", AttrType::kInt)}),
      BpropReshape));
  defs->push_back(Linear(
      MakeDef(PrimId::kSqueeze, 1, 1, InferSqueeze, {IntsAttr("axes", {})}), BpropReshape));
  defs->push_back(Linear(MakeDef(PrimId::kConcat, 1, -1, InferConcat, {axis0}), BpropConcat));
  defs->push_back(Linear(
      MakeDef(PrimId::kSplit, 1, 1, InferSplit, {axis0, RequiredAttr("sizes", AttrType::kInts)}),
      BpropSplit));
  defs->push_back(Linear(MakeDef(PrimId::kSlice, 1, 1, InferSlice, slice), BpropSlice));
  defs->push_back(
      Linear(MakeDef(PrimId::kSliceGrad, 2, 2, InferSliceGrad, slice), BpropSliceGrad));
  defs->push_back(Linear(MakeDef(PrimId::kGather, 2, 2, InferGather, {axis0}), BpropGather));
  defs->push_back(
      Linear(MakeDef(PrimId::kScatterAdd, 3, 3, InferScatterAdd, {axis0}), BpropScatterAdd));
  // Linear in x only when value is 0; the flag is still set (the gradient rule
  // handles the constant).
  defs->push_back(
      Linear(MakeDef(PrimId::kPad, 1, 1, InferPad,
                     {RequiredAttr("pads", AttrType::kInts), FloatAttr("value", 0.0)}),
             BpropPad));
  defs->push_back(ZeroGradient(MakeDef(
      PrimId::kOneHot, 1, 1, InferOneHot,
      {RequiredAttr("depth", AttrType::kInt), FloatAttr("on_value", 1.0),
       FloatAttr("off_value", 0.0), DTypeAttr("dtype", DType::kFloat32), IntAttr("axis", -1)})));
  defs->push_back(
      WithBprop(MakeDef(PrimId::kCast, 1, 1, InferCast, {RequiredAttr("dtype", AttrType::kDType)}),
                BpropCast));
  defs->push_back(
      ZeroGradient(MakeDef(PrimId::kFill, 0, 0, InferFill,
                           {shape, FloatAttr("value", 0.0), DTypeAttr("dtype", DType::kFloat32)})));
}

}  // namespace ops
}  // namespace kgrad
