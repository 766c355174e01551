// The checks and shape formulas of the shape family (ops/shape_checks.h), shared
// by inference (shape_ops.cc and the other shape families) and the CPU and CUDA
// kernels. Unknown dims
// (kUnknownDim) propagate: a check that depends on an unknown dim is left to the
// kernel, which passes concrete shapes.
#include "ops/shape_checks.h"

#include <algorithm>
#include <array>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/dim_symbol.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/op_util.h"

namespace kgrad {
namespace ops {
namespace {

// ----- Helpers --------------------------------------------------------------------
absl::Status AttrError(const Primitive& p, absl::string_view attr, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(p.name(), ": attribute '", attr, "' ", what));
}

// "input i must be <expected>, got f32[2,3]".
absl::Status InputError(int i, absl::string_view expected, TensorType got) {
  return absl::InvalidArgumentError(
      absl::StrCat("input ", i, " must be ", expected, ", got ", got.ToString()));
}
absl::Status CheckNumeric(TensorType t, int i) {
  if (Allows(kNumericTypes, t.dtype)) return absl::OkStatus();
  return InputError(i, "a numeric (f32, f64, i32 or i64) tensor", t);
}
absl::Status CheckIndex(TensorType t, int i) {
  return IsInteger(t.dtype) ? absl::OkStatus() : InputError(i, "an i32 or i64 index tensor", t);
}

std::string Ints(absl::Span<const int64_t> v) {
  return absl::StrCat("[", absl::StrJoin(v, ","), "]");
}

bool DimsMatch(int64_t a, int64_t b) { return a == b || a < 0 || b < 0; }
// The more precise of two compatible dims (a number, else a symbol).
int64_t MergeDim(int64_t a, int64_t b) { return UnifyDims(a, b).value_or(a); }

// Attribute `attr` as the axis of the dim that expand_dims and one_hot insert
// into t, so in [-rank-1, rank] (op_util's AxisAttr is for t's own axes), with
// AxisAttr's wording.
absl::StatusOr<int> NewAxisAttr(const Primitive& p, const char* attr, TensorType t) {
  absl::StatusOr<int> axis = NormalizeAxis(p.GetInt(attr), t.rank() + 1);
  if (axis.ok()) return axis;
  return absl::InvalidArgumentError(absl::StrCat("attribute '", attr, "' of ", p.name(), " on ",
                                                 t.ToString(), " (a new dim's axis): ",
                                                 axis.status().message()));
}

// "f32[2,3] (6 elements)", or "f32[?,3]" while the count is unknown.
std::string WithCount(TensorType x) {
  if (!IsFullyKnown(x.shape)) return x.ToString();
  return absl::StrCat(x.ToString(), " (", NumElementsOf(x.shape), " elements)");
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
  if (ka.has_unknown == kb.has_unknown) return ka.has_unknown || ka.product == kb.product;
  if (ka.has_unknown) std::swap(ka, kb);
  // a has exactly ka.product elements; b has kb.product * (unknown dims).
  return kb.product == 0 ? ka.product == 0 : ka.product % kb.product == 0;
}

// `x` broadcast (NumPy, right-aligned) to `target`; unknown dims in either side
// are resolved from the other where possible.
absl::StatusOr<Shape> BroadcastInto(TensorType x, absl::Span<const int64_t> target) {
  absl::Span<const int64_t> s = x.shape;
  if (s.size() > target.size()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot broadcast ", x.ToString(),
                                                   " to the lower rank ", ShapeToString(target)));
  }
  Shape out(target.begin(), target.end());
  size_t lead = target.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) {
    int64_t d = s[i], t = target[lead + i];
    if (d == 1 || DimsMatch(d, t)) {
      if (d != 1) out[lead + i] = MergeDim(t, d);
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat("cannot broadcast ", x.ToString(), " to ",
                                                   ShapeToString(target), ": dim ", i, " is ", d,
                                                   ", target ", t));
  }
  return out;
}

// The shape that sum_to(x) gives for `target`: `target` must broadcast to x's
// shape (target dims are 1 or equal to x's; extra leading target dims are 1).
absl::StatusOr<Shape> SumInto(TensorType x, absl::Span<const int64_t> target) {
  absl::Span<const int64_t> s = x.shape;
  Shape out(target.begin(), target.end());
  int64_t shift = static_cast<int64_t>(s.size()) - static_cast<int64_t>(target.size());
  for (int64_t i = 0; i < static_cast<int64_t>(target.size()); ++i) {
    int64_t t = target[i], d = i + shift >= 0 ? s[i + shift] : 1;
    if (t == 1 || DimsMatch(t, d)) {
      // An unknown target dim is 1 when x has 1 there or x does not reach it.
      if (t < 0 && d == 1) out[i] = 1;
      if (t < 0 && d > 1) out[i] = kUnknownDim;  // 1 or d: cannot tell
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot sum ", x.ToString(), " to ", ShapeToString(target),
        ": the target must broadcast to the input's shape, and it does not broadcast back "
        "(target dim ",
        i, " is ", t, ", input has ", d, ")"));
  }
  return out;
}

// BroadcastInto or SumInto.
using TargetFormula = absl::StatusOr<Shape> (*)(TensorType x, absl::Span<const int64_t> target);

// `formula` for the target in attribute 'shape' (errors name the attribute) or,
// for a *_like op, in `ref`'s shape (errors name the primitive).
absl::StatusOr<Shape> ToTarget(const Primitive& p, TensorType x, const TensorType* ref,
                               TargetFormula formula) {
  Shape attr;
  if (ref == nullptr) {
    KGRAD_ASSIGN_OR_RETURN(attr, ShapeAttr(p, "shape"));
  }
  absl::Span<const int64_t> target = ref == nullptr ? absl::Span<const int64_t>(attr) : ref->shape;
  absl::StatusOr<Shape> out = formula(x, target);
  if (out.ok()) return out;
  if (ref == nullptr) return AttrError(p, "shape", out.status().message());
  return PrimError(p, out.status().message());
}

// params.shape[:axis] + indices.shape + params.shape[axis+1:].
Shape Gathered(absl::Span<const int64_t> params, int axis, absl::Span<const int64_t> indices) {
  Shape out(params.begin(), params.begin() + axis);
  out.insert(out.end(), indices.begin(), indices.end());
  out.insert(out.end(), params.begin() + axis + 1, params.end());
  return out;
}

// The -1 of a reshape from `x` to `target` (the -1 left out of `target`), solved by
// cancelling dim symbols: when x has no kUnknownDim and the symbols of `target`
// are a sub-multiset of x's, the -1 is the known quotient if no symbol is left
// over, the one left-over symbol if the known products are equal, and kUnknownDim
// otherwise.  [batch,512,1,1] -> [-1,512]: batch.  [batch,seq,4] -> [batch,-1,2]:
// ? (2 seq).  Error (the counts certainly differ) only when nothing is left over
// and the quotient is not whole.
absl::StatusOr<int64_t> CancelSymbols(absl::Span<const int64_t> x,
                                      absl::Span<const int64_t> target) {
  Shape left, xk, tk;
  for (int64_t d : x) {
    if (d == kUnknownDim) return kUnknownDim;
    (d >= 0 ? xk : left).push_back(d);
  }
  for (int64_t d : target) {
    if (d >= 0) {
      tk.push_back(d);
      continue;
    }
    auto it = std::find(left.begin(), left.end(), d);
    if (it == left.end()) return kUnknownDim;  // a symbol x lacks, or ?
    left.erase(it);
  }
  KGRAD_ASSIGN_OR_RETURN(int64_t nx, CheckedNumElements(xk));
  KGRAD_ASSIGN_OR_RETURN(int64_t nt, CheckedNumElements(tk));
  if (left.size() == 1) return nx == nt ? left[0] : kUnknownDim;
  if (!left.empty()) return kUnknownDim;
  if (nt == 0 || nx % nt != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot hold the elements of ",
                                                   ShapeToString(x)));
  }
  return nx / nt;
}

}  // namespace

// ----- The checks and formulas of ops/shape_checks.h ------------------------------------
absl::Status PrimError(const Primitive& p, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(p.name(), ": ", what));
}

std::string ValuesString(absl::Span<const int64_t> v) { return ValueToString(v.data(), v.size()); }

absl::StatusOr<Shape> ShapeAttr(const Primitive& p, const char* attr, bool allow_infer) {
  const std::vector<int64_t>& s = p.GetInts(attr);
  int inferred = 0;
  Shape known;
  for (int64_t d : s) {
    if (d == -1 && allow_infer) {
      ++inferred;
    } else if (d < 0) {
      return AttrError(p, attr, absl::StrCat("has a negative entry: ", Ints(s)));
    } else {
      known.push_back(d);
    }
  }
  if (inferred > 1) return AttrError(p, attr, absl::StrCat("has more than one -1: ", Ints(s)));
  if (s.size() > static_cast<size_t>(kMaxRank)) {
    return AttrError(p, attr, absl::StrCat("has more than ", kMaxRank, " entries"));
  }
  absl::StatusOr<int64_t> n = CheckedNumElements(known);
  if (!n.ok()) return AttrError(p, attr, n.status().message());
  return absl::StatusOr<Shape>(absl::in_place, s.begin(), s.end());  // see SqueezeShape
}

absl::StatusOr<Shape> ReshapeShape(const Primitive& p, TensorType x) {
  KGRAD_ASSIGN_OR_RETURN(Shape out, ShapeAttr(p, "shape", /*allow_infer=*/true));
  const std::vector<int64_t>& attr = p.GetInts("shape");
  auto minus = std::find(out.begin(), out.end(), int64_t{-1});
  if (minus == out.end()) {
    KGRAD_ASSIGN_OR_RETURN(bool ok, CountsMayMatch(x.shape, out));
    if (ok) return out;
    return AttrError(p, "shape", absl::StrCat(Ints(attr), " does not have as many elements as ",
                                              WithCount(x)));
  }
  *minus = 1;
  const int64_t rest = NumElementsOf(out);
  if (rest == 0) {
    return AttrError(p, "shape", absl::StrCat(Ints(attr), ": the -1 is ambiguous next to a 0"));
  }
  *minus = kUnknownDim;
  if (!IsFullyKnown(x.shape)) {
    Shape rest_dims(out.begin(), minus);
    rest_dims.insert(rest_dims.end(), minus + 1, out.end());
    absl::StatusOr<int64_t> solved = CancelSymbols(x.shape, rest_dims);
    if (!solved.ok()) {
      return AttrError(p, "shape", absl::StrCat(Ints(attr), " ", solved.status().message()));
    }
    *minus = *solved;
    return out;
  }
  const int64_t n = NumElementsOf(x.shape);
  if (n % rest != 0) {
    return AttrError(p, "shape", absl::StrCat(Ints(attr), " cannot hold the ", n,
                                              " elements of ", x.ToString()));
  }
  *minus = n / rest;
  return out;
}

absl::StatusOr<Shape> ReshapeLikeShape(const Primitive& p, TensorType x, TensorType ref) {
  KGRAD_ASSIGN_OR_RETURN(bool ok, CountsMayMatch(x.shape, ref.shape));
  if (ok) return Shape(ref.shape.begin(), ref.shape.end());
  return PrimError(p, absl::StrCat("cannot reshape ", WithCount(x), " to the shape of input 1, ",
                                   WithCount(ref)));
}

absl::StatusOr<Shape> ExpandDimsShape(const Primitive& p, TensorType x) {
  KGRAD_ASSIGN_OR_RETURN(int axis, NewAxisAttr(p, "axis", x));
  Shape out(x.shape.begin(), x.shape.end());
  out.insert(out.begin() + axis, 1);
  return out;
}

absl::StatusOr<Shape> SqueezeShape(const Primitive& p, TensorType x) {
  const std::vector<int64_t>& axes = p.GetInts("axes");
  absl::Span<const int64_t> in = x.shape;
  std::vector<bool> drop(in.size(), false);
  for (size_t i = 0; axes.empty() && i < in.size(); ++i) {
    if (in[i] < 0) {  // the output's rank would depend on the unknown dim
      return AttrError(p, "axes", absl::StrCat("[] needs a known shape, got ", x.ToString(),
                                               "; name the axes to squeeze"));
    }
    drop[i] = in[i] == 1;
  }
  for (int64_t a : axes) {
    absl::StatusOr<int> n = NormalizeAxis(a, x.rank());
    if (!n.ok()) return AttrError(p, "axes", n.status().message());
    const char* bad = drop[*n] ? " twice (an axis is repeated)"
                      : in[*n] >= 0 && in[*n] != 1 ? ", which is not 1" : nullptr;
    if (bad != nullptr) {
      return AttrError(p, "axes", absl::StrCat(Ints(axes), " names dim ", *n, " of ",
                                               x.ToString(), bad));
    }
    drop[*n] = true;
  }
  std::vector<int64_t> kept;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!drop[i]) kept.push_back(in[i]);
  }
  // Built in place: GCC 12 warns falsely (-Wmaybe-uninitialized) when a local
  // InlinedVector is moved into a StatusOr.
  return absl::StatusOr<Shape>(absl::in_place, kept.begin(), kept.end());
}

absl::StatusOr<std::vector<int>> TransposePerm(const Primitive& p, int rank) {
  const std::vector<int64_t>& attr = p.GetInts("perm");
  std::vector<int> perm;
  if (attr.empty()) {
    for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
    return perm;
  }
  if (static_cast<int>(attr.size()) != rank) {
    return AttrError(p, "perm", absl::StrCat(Ints(attr), " must have ", rank, " entries"));
  }
  std::vector<bool> seen(rank, false);
  for (int64_t a : attr) {
    if (a < 0 || a >= rank || seen[a]) {
      return AttrError(p, "perm",
                       absl::StrCat(Ints(attr), " is not a permutation of [0, ", rank, ")"));
    }
    seen[a] = true;
    perm.push_back(static_cast<int>(a));
  }
  return perm;
}

absl::StatusOr<Shape> BroadcastToShape(const Primitive& p, TensorType x) {
  return ToTarget(p, x, nullptr, BroadcastInto);
}
absl::StatusOr<Shape> BroadcastToLikeShape(const Primitive& p, TensorType x, TensorType ref) {
  return ToTarget(p, x, &ref, BroadcastInto);
}
absl::StatusOr<Shape> SumToShape(const Primitive& p, TensorType x) {
  KGRAD_RETURN_IF_ERROR(CheckNumeric(x, 0));
  return ToTarget(p, x, nullptr, SumInto);
}
absl::StatusOr<Shape> SumToLikeShape(const Primitive& p, TensorType x, TensorType ref) {
  KGRAD_RETURN_IF_ERROR(CheckNumeric(x, 0));
  return ToTarget(p, x, &ref, SumInto);
}

std::vector<bool> SummedDims(absl::Span<const int64_t> x, absl::Span<const int64_t> out) {
  const int64_t shift = static_cast<int64_t>(x.size()) - static_cast<int64_t>(out.size());
  std::vector<bool> summed(x.size());
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
    const int64_t t = i - shift >= 0 ? out[i - shift] : 1;
    summed[i] = x[i] != 1 && t == 1;
  }
  return summed;
}

absl::StatusOr<AxisShape> ConcatShape(const Primitive& p, absl::Span<const TensorType> xs) {
  if (xs.empty()) return PrimError(p, "takes at least one input, got none");
  const TensorType first = xs[0];
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(p, "axis", first));
  Shape out(first.shape.begin(), first.shape.end());
  for (size_t i = 1; i < xs.size(); ++i) {
    absl::Span<const int64_t> s = xs[i].shape;
    bool ok = xs[i].dtype == first.dtype && xs[i].rank() == first.rank();
    int d = 0;
    for (; ok && d < xs[i].rank(); ++d) {
      if (d == axis) {
        out[d] = out[d] < 0 || s[d] < 0 ? kUnknownDim : out[d] + s[d];
      } else {
        ok = DimsMatch(out[d], s[d]);
        if (ok) out[d] = MergeDim(out[d], s[d]);
      }
    }
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input ", i, " must match input 0 (a ", DTypeName(first.dtype), " tensor of rank ",
          first.rank(), ") in dtype and on every dim but ", axis, ", got ", xs[i].ToString(),
          d > 0 ? absl::StrCat(": dim ", d - 1, " is ", s[d - 1], ", not ", out[d - 1]) : ""));
    }
  }
  return AxisShape{axis, std::move(out)};
}

absl::StatusOr<SplitShapes> SplitShape(const Primitive& p, TensorType x) {
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(p, "axis", x));
  const std::vector<int64_t>& sizes = p.GetInts("sizes");
  if (sizes.empty()) return AttrError(p, "sizes", "must not be empty");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0 || s > kMaxElements) {
      return AttrError(p, "sizes", absl::StrCat("has a bad entry: ", Ints(sizes)));
    }
    total += s;
  }
  const int64_t dim = x.shape[axis];
  if (dim >= 0 && total != dim) {
    return AttrError(p, "sizes", absl::StrCat(Ints(sizes), " sums to ", total,
                                              ", but must sum to dim ", axis, " of ",
                                              x.ToString(), ", ", dim));
  }
  SplitShapes out{axis, {}};
  for (int64_t s : sizes) {
    out.parts.emplace_back(x.shape.begin(), x.shape.end());
    out.parts.back()[axis] = s;
  }
  return out;
}

absl::StatusOr<SliceSpec> ParseSlice(const Primitive& p, TensorType x) {
  absl::Span<const int64_t> in = x.shape;
  const std::vector<int64_t>& begin = p.GetInts("begin");
  const std::vector<int64_t>& end = p.GetInts("end");
  const std::vector<int64_t>& strides = p.GetInts("strides");
  const size_t num_strides = strides.empty() ? in.size() : strides.size();  // [] means all 1
  const std::pair<const char*, size_t> lens[] = {
      {"begin", begin.size()}, {"end", end.size()}, {"strides", num_strides}};
  for (const auto& [name, len] : lens) {
    if (len != in.size()) {
      return AttrError(p, name,
                       absl::StrCat("has ", len, " entries, expected the rank ", in.size()));
    }
  }
  SliceSpec s;
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t step = strides.empty() ? 1 : strides[i];
    if (step < 1) return AttrError(p, "strides", absl::StrCat("must be >= 1, got ", Ints(strides)));
    const bool known = in[i] >= 0;
    const int64_t d = known ? in[i] : 0;
    const int64_t b = std::clamp<int64_t>(begin[i] < 0 ? begin[i] + d : begin[i], 0, d);
    const int64_t e = std::clamp<int64_t>(end[i] < 0 ? end[i] + d : end[i], 0, d);
    const int64_t n = e > b ? (e - b - 1) / step + 1 : 0;
    s.out.push_back(known ? n : kUnknownDim);
    s.begin.push_back(known ? b : kUnknownDim);
    s.stride.push_back(n > 1 || !known ? step : 1);  // a single step: keep strides small
  }
  return s;
}

absl::StatusOr<SliceSpec> ParseSliceGrad(const Primitive& p, TensorType dy, TensorType ref) {
  KGRAD_ASSIGN_OR_RETURN(SliceSpec s, ParseSlice(p, ref));
  bool ok = dy.rank() == ref.rank();
  for (int i = 0; ok && i < dy.rank(); ++i) ok = DimsMatch(dy.shape[i], s.out[i]);
  if (ok) return s;
  const std::string sliced = ShapeToString(s.out);
  return absl::InvalidArgumentError(
      absl::StrCat("input 0 must have the slice's shape ", sliced, ": slice_grad's dy is shaped ",
                   "like the slice of input 1, ", sliced, " of ", ref.ToString(), "; got ",
                   dy.ToString()));
}

absl::StatusOr<AxisShape> GatherShape(const Primitive& p, TensorType params,
                                      TensorType indices) {
  KGRAD_RETURN_IF_ERROR(CheckIndex(indices, 1));
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(p, "axis", params));
  Shape out = Gathered(params.shape, axis, indices.shape);
  if (out.size() > static_cast<size_t>(kMaxRank)) {
    return InputError(1, absl::StrCat("an index tensor giving a result of rank <= ", kMaxRank),
                      indices);
  }
  return AxisShape{axis, std::move(out)};
}

absl::StatusOr<AxisShape> ScatterAddShape(const Primitive& p, TensorType input,
                                          TensorType indices, TensorType updates) {
  KGRAD_RETURN_IF_ERROR(CheckNumeric(input, 0));
  KGRAD_RETURN_IF_ERROR(CheckIndex(indices, 1));
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(p, "axis", input));
  const Shape want = Gathered(input.shape, axis, indices.shape);
  absl::Span<const int64_t> got = updates.shape;
  bool ok = updates.dtype == input.dtype && got.size() == want.size();
  for (size_t i = 0; ok && i < want.size(); ++i) ok = DimsMatch(want[i], got[i]);
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input 2 (updates) must be ", DTypeName(input.dtype), ShapeToString(want), ", got ",
        updates.ToString(), ": the same dtype as input 0, with updates shaped ",
        ShapeToString(want), " for input ", input.ToString(), " and indices ",
        indices.ToString()));
  }
  // Dims outside the indexed axis may be known from the updates only.
  Shape out(input.shape.begin(), input.shape.end());
  for (int i = 0; i < input.rank(); ++i) {
    if (i != axis) out[i] = MergeDim(out[i], got[i < axis ? i : i + indices.rank() - 1]);
  }
  return AxisShape{axis, std::move(out)};
}

absl::Status IndexOutOfRange(int64_t index, int64_t position, int axis, TensorType data) {
  return absl::OutOfRangeError(absl::StrCat("index ", index, " (at position ", position,
                                            " of the indices) is out of range [0, ",
                                            data.shape[axis], ") for dim ", axis, " of ",
                                            data.ToString()));
}

absl::StatusOr<Padding> ParsePad(const Primitive& p, TensorType x) {
  absl::Span<const int64_t> in = x.shape;
  const std::vector<int64_t>& pads = p.GetInts("pads");
  if (pads.size() != 2 * in.size()) {
    return AttrError(p, "pads", absl::StrCat("has ", pads.size(),
                                             " entries, expected 2 * rank = ", 2 * in.size()));
  }
  Padding s{Shape(in.begin(), in.end()), {}};
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t b = pads[2 * i], a = pads[2 * i + 1];
    if (b < 0 || a < 0 || b > kMaxElements || a > kMaxElements) {
      return AttrError(p, "pads", absl::StrCat("must be >= 0 (and not huge), got ", Ints(pads)));
    }
    if (s.out[i] >= 0) s.out[i] += b + a;
    s.before.push_back(b);
  }
  if (absl::StatusOr<KnownCount> n = CountKnown(s.out); !n.ok()) {
    return AttrError(p, "pads", n.status().message());
  }
  return s;
}

absl::StatusOr<AxisShape> OneHotShape(const Primitive& p, TensorType indices) {
  KGRAD_RETURN_IF_ERROR(CheckIndex(indices, 0));
  const int64_t depth = p.GetInt("depth");
  if (depth < 0 || depth > kMaxElements) {
    return AttrError(p, "depth", absl::StrCat("must be >= 0, got ", depth));
  }
  return OneHotShapeWithDepth(p, indices, depth);
}

absl::StatusOr<AxisShape> OneHotShapeWithDepth(const Primitive& p, TensorType indices,
                                               int64_t depth) {
  KGRAD_RETURN_IF_ERROR(CheckIndex(indices, 0));
  KGRAD_ASSIGN_OR_RETURN(int axis, NewAxisAttr(p, "axis", indices));
  Shape out(indices.shape.begin(), indices.shape.end());
  out.insert(out.begin() + axis, depth);
  if (absl::StatusOr<KnownCount> n = CountKnown(out); !n.ok()) {
    return AttrError(p, "depth", n.status().message());
  }
  return AxisShape{axis, std::move(out)};
}

// ----- Run-time shape operands ----------------------------------------------------------
absl::Status CheckShapeOperand(const Primitive& p, int i, const char* what, TensorType t,
                               bool scalar) {
  if (IsInteger(t.dtype) && t.rank() == (scalar ? 0 : 1)) return absl::OkStatus();
  return PrimError(p, absl::StrCat("input ", i, " (", what, ") must be an i32 or i64 tensor of rank ",
                               scalar ? 0 : 1, ", got ", t.ToString()));
}

absl::Status CheckScalarOperand(const Primitive& p, int i, const char* what, TensorType t) {
  if (IsInteger(t.dtype) && (t.rank() == 0 || (t.rank() == 1 && t.shape[0] == 1))) {
    return absl::OkStatus();
  }
  return PrimError(p, absl::StrCat("input ", i, " (", what, ") must be an i32 or i64 scalar ",
                               "(rank 0 or shape [1]), got ", t.ToString()));
}

absl::StatusOr<int64_t> ScalarOperandElement(const InferCall& c, int i, const char* what) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, TensorArg(c, i));
  KGRAD_RETURN_IF_ERROR(CheckScalarOperand(c.prim, i, what, *t));
  return t->value() ? (*t->value())[0] : kUnknownValue;
}

}  // namespace ops
}  // namespace kgrad
