#include "core/shape.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kgrad {

absl::StatusOr<int64_t> CheckedNumElements(absl::Span<const int64_t> dims) {
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", dims.size(), " exceeds the limit ", kMaxRank));
  }
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("negative dimension ", d, " in shape ", ShapeToString(dims)));
    }
    if (d != 0 && n > kMaxElements / d) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shape ", ShapeToString(dims), " has more than ", kMaxElements, " elements"));
    }
    n *= d;
  }
  return n;
}

int64_t NumElementsOf(absl::Span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

bool IsFullyKnown(absl::Span<const int64_t> dims) {
  return std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d >= 0; });
}

std::string ShapeToString(absl::Span<const int64_t> dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    s += DimToString(dims[i]);
  }
  return s + "]";
}

absl::StatusOr<Shape> BroadcastShapes(absl::Span<const int64_t> a,
                                      absl::Span<const int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else if (db == 1) {
      out[i] = da;
    } else if (da < 0 && db < 0) {  // ? or symbols: either may be 1
      out[i] = da == kUnknownDim ? db : db == kUnknownDim ? da : kUnknownDim;
    } else if (da < 0) {
      out[i] = db;
    } else if (db < 0) {
      out[i] = da;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("shapes ", ShapeToString(a), " and ", ShapeToString(b),
                       " do not broadcast (dimension ", i, ": ", da, " vs ", db, ")"));
    }
  }
  return out;
}

Shape RowMajorStrides(absl::Span<const int64_t> dims) {
  Shape s(dims.size());
  int64_t acc = 1;
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= dims[i];
  }
  return s;
}

absl::StatusOr<int> NormalizeAxis(int64_t axis, int rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "axis ", axis, " is out of range for rank ", rank, " (expected ", -rank,
        " <= axis < ", rank, ")"));
  }
  return static_cast<int>(a);
}

}  // namespace kgrad
