// Shapes of tensors. A concrete tensor shape has only known dims; an abstract
// shape (AbstractTensor) may also hold kUnknownDim or a dim symbol (below).
#ifndef KGRAD_CORE_SHAPE_H_
#define KGRAD_CORE_SHAPE_H_

#include <cstdint>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/dim_symbol.h"

namespace kgrad {

using Shape = absl::InlinedVector<int64_t, 6>;

// Bounds for hostile input (graph files, .npy headers): no tensor has more than
// kMaxRank dims or more than kMaxElements elements.
inline constexpr int kMaxRank = 16;
inline constexpr int64_t kMaxElements = int64_t{1} << 40;

// Product of dims; error if any dim is negative or the product exceeds kMaxElements.
absl::StatusOr<int64_t> CheckedNumElements(absl::Span<const int64_t> dims);
// Product of dims; dims must be known and small (checked at creation).
int64_t NumElementsOf(absl::Span<const int64_t> dims);
bool IsFullyKnown(absl::Span<const int64_t> dims);

// "[2,3]" ("[2,?]" for unknown dims, "[batch,3]" for symbols).
std::string ShapeToString(absl::Span<const int64_t> dims);

// NumPy broadcasting of two shapes (unknown dims allowed: ? with 1 gives ?, ? with n
// gives n; a symbol with itself or 1 gives the symbol, two different symbols ?).
// Error text names both shapes.
absl::StatusOr<Shape> BroadcastShapes(absl::Span<const int64_t> a,
                                      absl::Span<const int64_t> b);

// Row-major strides in elements.
Shape RowMajorStrides(absl::Span<const int64_t> dims);

// Normalises a possibly negative axis against `rank`; error if out of range.
absl::StatusOr<int> NormalizeAxis(int64_t axis, int rank);

}  // namespace kgrad

#endif  // KGRAD_CORE_SHAPE_H_
