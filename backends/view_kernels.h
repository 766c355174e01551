// Kernels that only relabel a tensor's shape (reshape, reshape_like, expand_dims,
// squeeze): the output shares the input's buffer, so one implementation serves
// every device. Backends register them next to their own shape kernels. Also the
// attribute-error helpers that the shape kernels of every backend share.
#ifndef KGRAD_BACKENDS_VIEW_KERNELS_H_
#define KGRAD_BACKENDS_VIEW_KERNELS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "backends/kernel.h"
#include "core/shape.h"

namespace kgrad {

// "<prim>: attribute '<attr>' <what>".
absl::Status AttrError(const KernelContext& ctx, absl::string_view attr, absl::string_view what);
// "[1,2,3]".
std::string Ints(absl::Span<const int64_t> v);
// An axis attribute normalised against `rank`.
absl::StatusOr<int> AxisAttr(const KernelContext& ctx, const char* attr, int rank);

namespace views {

// Input 0 with `shape` (same element count), sharing its buffer.
absl::StatusOr<Value> ShareAs(KernelContext& ctx, const Shape& shape);
absl::StatusOr<Value> Reshape(KernelContext& ctx);      // shape attr, one -1 allowed
absl::StatusOr<Value> ReshapeLike(KernelContext& ctx);  // the shape of input 1
absl::StatusOr<Value> ExpandDims(KernelContext& ctx);   // a 1 inserted at axis
absl::StatusOr<Value> Squeeze(KernelContext& ctx);      // named (or all) size-1 dims dropped

}  // namespace views
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_VIEW_KERNELS_H_
