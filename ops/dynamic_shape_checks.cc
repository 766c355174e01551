// The checks and shape formulas of the run-time shape primitives
// (ops/dynamic_shape_ops.h), shared by inference (dynamic_shape_ops.cc) and the
// kernels. The shape-like operands come in as their elements: numbers from the
// kernels; numbers, dim symbols or kUnknownValue from inference. A check that depends on something
// unknown is left to the kernel, which passes numbers only.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/dim_symbol.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/dynamic_shape_ops.h"
#include "ops/op_util.h"
#include "ops/shape_checks.h"

namespace kgrad {
namespace ops {
namespace {

// What is known of a product of dims: the numbers multiplied, the symbols
// (sorted, repeated as often as they occur) and how many dims are unknown.
struct DimProduct {
  int64_t number = 1;
  std::vector<int64_t> symbols;
  int unknown = 0;
};
absl::StatusOr<DimProduct> ProductOf(absl::Span<const int64_t> dims) {
  DimProduct p;
  Shape numbers;
  for (int64_t d : dims) {
    if (d >= 0) {
      numbers.push_back(d);
    } else if (IsSymbolDim(d)) {
      p.symbols.push_back(d);
    } else {
      ++p.unknown;
    }
  }
  KGRAD_ASSIGN_OR_RETURN(p.number, CheckedNumElements(numbers));
  std::sort(p.symbols.begin(), p.symbols.end());
  return p;
}

// The dim that a reshape's -1 stands for, given the product of x's dims and of
// the other target dims (`rest`, not 0): a number when both are numbers, the one
// symbol of x left when the others cancel (x [batch,512,1,1] to [-1,512] gives
// batch), else kUnknownDim; an error when the numbers do not divide.
absl::StatusOr<int64_t> InferredDim(const Primitive& p, const DimProduct& x, const DimProduct& rest,
                                    TensorType xt, absl::Span<const int64_t> target) {
  if (x.unknown > 0 || rest.unknown > 0) return kUnknownDim;
  if (x.number == 0) return 0;  // 0 elements whatever the symbols are
  std::vector<int64_t> left;
  if (!std::includes(x.symbols.begin(), x.symbols.end(), rest.symbols.begin(),
                     rest.symbols.end())) {
    return kUnknownDim;
  }
  std::set_difference(x.symbols.begin(), x.symbols.end(), rest.symbols.begin(), rest.symbols.end(),
                      std::back_inserter(left));
  if (left.empty()) {
    if (x.number % rest.number == 0) return x.number / rest.number;
    return PrimError(p, absl::StrCat("input 1 (shape) ", ValuesString(target), " cannot hold the ",
                                 x.number, " elements of input 0, ", xt.ToString()));
  }
  return left.size() == 1 && x.number == rest.number ? left[0] : kUnknownDim;
}

}  // namespace

// ----- dynamic_reshape --------------------------------------------------------------------
absl::StatusOr<Shape> DynamicReshapeShape(const Primitive& p, TensorType x,
                                          absl::Span<const int64_t> target) {
  const bool allowzero = p.GetBool("allowzero");
  if (target.size() > static_cast<size_t>(kMaxRank)) {
    return PrimError(p, absl::StrCat("input 1 (shape) has ", target.size(), " entries, more than ",
                                 kMaxRank));
  }
  // 1. Each entry as a dim; the -1 left unknown for now.
  Shape out(target.size(), kUnknownDim);
  int minus = -1;
  bool zero = false;
  for (int i = 0; i < static_cast<int>(target.size()); ++i) {
    const int64_t t = target[i];
    if (t == -1) {
      if (minus >= 0) {
        return PrimError(p, absl::StrCat("input 1 (shape) has more than one -1: ", ValuesString(target)));
      }
      minus = i;
    } else if (t == 0 && !allowzero) {
      if (i >= x.rank()) {
        return PrimError(p, absl::StrCat("input 1 (shape) ", ValuesString(target), " copies dim ", i,
                                     " (a 0) of input 0, which has rank ", x.rank()));
      }
      out[i] = x.shape[i];
    } else if (IsValueNumber(t) && t < 0) {
      return PrimError(p, absl::StrCat("input 1 (shape) has a negative entry other than -1: ",
                                   ValuesString(target)));
    } else {
      zero |= t == 0;
      out[i] = ValueAsDim(t);
    }
  }
  if (minus >= 0 && zero) {
    return PrimError(p, absl::StrCat("input 1 (shape) ", ValuesString(target),
                                 ": the -1 is ambiguous next to a 0 (allowzero)"));
  }
  // 2. The element counts: the -1 inferred, or the two counts compared.
  KGRAD_ASSIGN_OR_RETURN(DimProduct in, ProductOf(x.shape));
  absl::StatusOr<DimProduct> rest = ProductOf(out);  // the -1 counts as unknown here
  if (!rest.ok()) return PrimError(p, absl::StrCat("input 1 (shape): ", rest.status().message()));
  if (minus >= 0) {
    --rest->unknown;
    if (rest->number == 0) {
      return PrimError(p, absl::StrCat("input 1 (shape) ", ValuesString(target),
                                   ": the -1 is ambiguous next to a 0"));
    }
    KGRAD_ASSIGN_OR_RETURN(out[minus], InferredDim(p, in, *rest, x, target));
    return out;
  }
  // Equal symbols cancel (unless a 0 makes both sides 0 whatever they are).
  const bool comparable = in.unknown == 0 && rest->unknown == 0 && in.symbols == rest->symbols &&
                          (in.symbols.empty() || (in.number != 0 && rest->number != 0));
  if (comparable && in.number != rest->number) {
    return PrimError(p, absl::StrCat("input 1 (shape) ", ValuesString(target), " gives ",
                                 ShapeToString(out), ", which does not have as many elements as ",
                                 "input 0, ", x.ToString()));
  }
  return out;
}

// ----- dynamic_broadcast_to, dynamic_fill --------------------------------------------------
namespace {

// The operand as dims: entries >= 0 (or symbols / unknown at inference).
absl::StatusOr<Shape> TargetDims(const Primitive& p, int i, absl::Span<const int64_t> target) {
  if (target.size() > static_cast<size_t>(kMaxRank)) {
    return PrimError(p, absl::StrCat("input ", i, " (shape) has ", target.size(),
                                 " entries, more than ", kMaxRank));
  }
  Shape out;
  Shape known;
  for (int64_t t : target) {
    if (IsValueNumber(t) && t < 0) {
      return PrimError(p, absl::StrCat("input ", i, " (shape) has a negative entry: ",
                                   ValuesString(target)));
    }
    out.push_back(ValueAsDim(t));
    if (t >= 0) known.push_back(t);
  }
  absl::StatusOr<int64_t> n = CheckedNumElements(known);
  if (!n.ok()) return PrimError(p, absl::StrCat("input ", i, " (shape): ", n.status().message()));
  return out;
}

}  // namespace

absl::StatusOr<Shape> DynamicBroadcastShape(const Primitive& p, TensorType x,
                                            absl::Span<const int64_t> target) {
  KGRAD_ASSIGN_OR_RETURN(Shape dims, TargetDims(p, 1, target));
  absl::StatusOr<Shape> out = BroadcastShapes(x.shape, dims);
  if (!out.ok()) return PrimError(p, out.status().message());
  if (IsFullyKnown(*out)) {
    absl::StatusOr<int64_t> n = CheckedNumElements(*out);
    if (!n.ok()) return PrimError(p, n.status().message());
  }
  return out;
}

absl::StatusOr<Shape> DynamicFillShape(const Primitive& p, absl::Span<const int64_t> target) {
  return TargetDims(p, 0, target);
}

// ----- dynamic_slice -----------------------------------------------------------------------
namespace {

// One axis of ONNX Slice on a known dim: start and end made non-negative (from
// the end), clamped to [0, dim] (step > 0) or [0, dim-1] / [-1, dim-1] (step < 0),
// and the count taken.
void SliceAxis(int64_t dim, int64_t start, int64_t end, int64_t step, SliceSpec* s, int axis) {
  if (start < 0) start += dim;  // start >= INT64_MIN + dim: no overflow
  if (end < 0) end += dim;
  int64_t count = 0;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    count = end > start ? (end - start - 1) / step + 1 : 0;
  } else if (dim > 0) {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    const int64_t back = step == std::numeric_limits<int64_t>::min()
                             ? std::numeric_limits<int64_t>::max() : -step;
    count = start > end ? (start - end - 1) / back + 1 : 0;
  }
  s->out[axis] = count;
  s->begin[axis] = count > 0 ? start : 0;
  s->stride[axis] = count > 1 ? step : 1;
}

// Whether [start:end:step] takes all of a dim of unknown size, forwards or
// backwards (the bounds torch and ONNX exporters write: 0 / INT64_MAX, ...).
bool WholeDim(int64_t start, int64_t end, int64_t step) {
  if (step == 1) return (start == 0 || start <= -kMaxElements) && end >= kMaxElements;
  if (step == -1) return (start == -1 || start >= kMaxElements) && end < -kMaxElements;
  return false;
}

absl::Status CheckLengths(const Primitive& p, const SliceOperands& s) {
  const size_t n = s.starts.size();
  if (s.ends.size() == n && (!s.axes || s.axes->size() == n) &&
      (!s.steps || s.steps->size() == n)) {
    return absl::OkStatus();
  }
  std::string lengths = absl::StrCat("starts ", ValuesString(s.starts), ", ends ", ValuesString(s.ends));
  if (s.axes) absl::StrAppend(&lengths, ", axes ", ValuesString(*s.axes));
  if (s.steps) absl::StrAppend(&lengths, ", steps ", ValuesString(*s.steps));
  return PrimError(p, absl::StrCat("inputs 1 to ", s.steps ? 4 : s.axes ? 3 : 2,
                               " must have one length, got ", lengths));
}

}  // namespace

absl::StatusOr<SliceSpec> DynamicSliceSpec(const Primitive& p, TensorType x,
                                           const SliceOperands& s) {
  KGRAD_RETURN_IF_ERROR(CheckLengths(p, s));
  const int rank = x.rank();
  SliceSpec spec{Shape(x.shape.begin(), x.shape.end()), Shape(rank, 0), Shape(rank, 1)};
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < s.starts.size(); ++i) {
    const int64_t a = s.axes ? (*s.axes)[i] : static_cast<int64_t>(i);
    if (!IsValueNumber(a)) {  // which dim is sliced is unknown: every dim may change
      std::fill(spec.out.begin(), spec.out.end(), kUnknownDim);
      return spec;
    }
    if (a < -rank || a >= rank) {
      return PrimError(p, absl::StrCat("axis ", a, " (entry ", i, " of the axes) is out of range for ",
                                   "input 0, ", x.ToString()));
    }
    const int axis = static_cast<int>(a < 0 ? a + rank : a);
    if (seen[axis]) {
      return PrimError(p, absl::StrCat("axis ", a, " is repeated in the axes ", ValuesString(*s.axes)));
    }
    seen[axis] = true;
    const int64_t start = s.starts[i], end = s.ends[i], step = s.steps ? (*s.steps)[i] : 1;
    if (step == 0) return PrimError(p, absl::StrCat("step ", i, " is 0: ", ValuesString(*s.steps)));
    const int64_t dim = x.shape[axis];
    if (!IsValueNumber(start) || !IsValueNumber(end) || !IsValueNumber(step)) {
      spec.out[axis] = kUnknownDim;
    } else if (dim < 0) {  // keeps a symbol when the slice takes the whole dim
      spec.out[axis] = WholeDim(start, end, step) ? dim : kUnknownDim;
    } else {
      SliceAxis(dim, start, end, step, &spec, axis);
    }
  }
  return spec;
}

absl::StatusOr<SliceSpec> DynamicSliceGradSpec(const Primitive& p, TensorType dy, TensorType x,
                                               const SliceOperands& s) {
  KGRAD_ASSIGN_OR_RETURN(SliceSpec spec, DynamicSliceSpec(p, x, s));
  bool ok = dy.dtype == x.dtype && dy.rank() == x.rank();
  for (int d = 0; ok && d < dy.rank(); ++d) {
    ok = UnifyDims(dy.shape[d], spec.out[d]).has_value();
  }
  if (ok) return spec;
  return PrimError(p, absl::StrCat("input 0 (dy) must have the dtype of input 1 and the slice's ",
                               "shape ", ShapeToString(spec.out), ", got ", dy.ToString()));
}

// ----- dynamic_pad -----------------------------------------------------------------------
absl::StatusOr<Padding> DynamicPadSpec(const Primitive& p, TensorType x,
                                       absl::Span<const int64_t> pads) {
  const int rank = x.rank();
  if (pads.size() != static_cast<size_t>(2 * rank)) {
    return PrimError(p, absl::StrCat("input 1 (pads) must have 2 * rank = ", 2 * rank,
                                 " entries for input 0, ", x.ToString(), ", got ",
                                 ValuesString(pads)));
  }
  Padding out{Shape(rank, kUnknownDim), Shape(rank, kUnknownDim)};
  for (int i = 0; i < rank; ++i) {
    const int64_t b = pads[i], e = pads[i + rank], d = x.shape[i];
    for (int64_t v : {b, e}) {
      if (IsValueNumber(v) && (v > kMaxElements || v < -kMaxElements)) {
        return PrimError(p, absl::StrCat("input 1 (pads) has an entry beyond +-", kMaxElements, ": ",
                                     ValuesString(pads)));
      }
    }
    if (!IsValueNumber(b) || !IsValueNumber(e)) continue;
    out.before[i] = b;
    if (d < 0) {
      if (b == 0 && e == 0) out.out[i] = d;  // keeps a symbol
      continue;
    }
    out.out[i] = d + b + e;
    if (out.out[i] < 0) {
      return PrimError(p, absl::StrCat("input 1 (pads) ", ValuesString(pads), " crops dim ", i,
                                   " of input 0, ", x.ToString(), ", to a negative size ",
                                   out.out[i]));
    }
  }
  if (IsFullyKnown(out.out)) {
    absl::StatusOr<int64_t> n = CheckedNumElements(out.out);
    if (!n.ok()) return PrimError(p, n.status().message());
  }
  return out;
}

// ----- dynamic_range -----------------------------------------------------------------------
namespace {

absl::StatusOr<int64_t> CheckedLength(const Primitive& p, double n) {
  if (!(n <= static_cast<double>(kMaxElements))) {  // NaN too
    return PrimError(p, absl::StrCat("the range has ", n, " elements, more than ", kMaxElements));
  }
  return n > 0 ? static_cast<int64_t>(n) : 0;
}

}  // namespace

absl::StatusOr<int64_t> RangeLength(const Primitive& p, int64_t start, int64_t limit,
                                    int64_t delta) {
  if (delta == 0) return PrimError(p, "input 2 (delta) is 0");
  // ceil((limit - start) / delta) exactly: limit - start may not fit in int64.
  const __int128 diff = static_cast<__int128>(limit) - start;
  __int128 n = diff / delta;
  if (diff % delta != 0 && (diff > 0) == (delta > 0)) ++n;
  return CheckedLength(p, static_cast<double>(n));
}

absl::StatusOr<int64_t> RangeLength(const Primitive& p, double start, double limit,
                                    double delta) {
  if (delta == 0) return PrimError(p, "input 2 (delta) is 0");
  return CheckedLength(p, std::ceil((limit - start) / delta));
}

}  // namespace ops
}  // namespace kgrad
