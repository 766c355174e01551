// Shape and data-movement primitives: definitions and shape/dtype inference.
// Semantics are fixed by the gradient rules that rely on them; each inference
// function states its primitive's math in one line. Unknown dims (kUnknownDim)
// propagate: a check that depends on an unknown dim is left to the kernel.
#include "ops/shape_ops.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/shape.h"
#include "core/status_macros.h"
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

PrimitiveDef Linear(PrimitiveDef d) {
  d.linear = true;
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
  defs->push_back(Linear(MakeDef(PrimId::kReshape, 1, 1, InferReshape, {shape})));
  defs->push_back(Linear(MakeDef(PrimId::kReshapeLike, 2, 2, InferReshapeLike)));
  defs->push_back(
      Linear(MakeDef(PrimId::kTranspose, 1, 1, InferTranspose, {IntsAttr("perm", {})})));
  defs->push_back(Linear(MakeDef(PrimId::kBroadcastTo, 1, 1, InferBroadcastTo, {shape})));
  defs->push_back(Linear(MakeDef(PrimId::kBroadcastToLike, 2, 2, InferBroadcastToLike)));
  defs->push_back(Linear(MakeDef(PrimId::kSumTo, 1, 1, InferSumTo, {shape})));
  defs->push_back(Linear(MakeDef(PrimId::kSumToLike, 2, 2, InferSumToLike)));
  defs->push_back(Linear(
      MakeDef(PrimId::kExpandDims, 1, 1, InferExpandDims, {RequiredAttr("axis", AttrType::kInt)})));
  defs->push_back(Linear(MakeDef(PrimId::kSqueeze, 1, 1, InferSqueeze, {IntsAttr("axes", {})})));
  defs->push_back(Linear(MakeDef(PrimId::kConcat, 1, -1, InferConcat, {axis0})));
  defs->push_back(Linear(
      MakeDef(PrimId::kSplit, 1, 1, InferSplit, {axis0, RequiredAttr("sizes", AttrType::kInts)})));
  defs->push_back(Linear(MakeDef(PrimId::kSlice, 1, 1, InferSlice, slice)));
  defs->push_back(Linear(MakeDef(PrimId::kSliceGrad, 2, 2, InferSliceGrad, slice)));
  defs->push_back(Linear(MakeDef(PrimId::kGather, 2, 2, InferGather, {axis0})));
  defs->push_back(Linear(MakeDef(PrimId::kScatterAdd, 3, 3, InferScatterAdd, {axis0})));
  // Linear in x only when value is 0; the flag is still set (the gradient rule
  // handles the constant).
  defs->push_back(
      Linear(MakeDef(PrimId::kPad, 1, 1, InferPad,
                     {RequiredAttr("pads", AttrType::kInts), FloatAttr("value", 0.0)})));
  defs->push_back(ZeroGradient(MakeDef(
      PrimId::kOneHot, 1, 1, InferOneHot,
      {RequiredAttr("depth", AttrType::kInt), FloatAttr("on_value", 1.0),
       FloatAttr("off_value", 0.0), DTypeAttr("dtype", DType::kFloat32), IntAttr("axis", -1)})));
  defs->push_back(
      MakeDef(PrimId::kCast, 1, 1, InferCast, {RequiredAttr("dtype", AttrType::kDType)}));
  defs->push_back(
      ZeroGradient(MakeDef(PrimId::kFill, 0, 0, InferFill,
                           {shape, FloatAttr("value", 0.0), DTypeAttr("dtype", DType::kFloat32)})));
}

}  // namespace ops
}  // namespace kgrad
