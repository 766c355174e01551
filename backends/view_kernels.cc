#include "backends/view_kernels.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace kgrad {

// ----- Strided views -----------------------------------------------------------------------
StridedView TransposedView(const Shape& in, absl::Span<const int> perm) {
  const Shape in_strides = RowMajorStrides(in);
  StridedView v;
  for (int p : perm) {
    v.dims.push_back(in[p]);
    v.strides.push_back(in_strides[p]);
  }
  return v;
}

StridedView BroadcastView(const Shape& in, const Shape& target) {
  const Shape in_strides = RowMajorStrides(in);
  const size_t lead = target.size() - in.size();
  StridedView v{target, Shape(target.size(), 0)};
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != 1) v.strides[lead + i] = in_strides[i];
  }
  return v;
}

StridedView SliceView(const Shape& in, absl::Span<const int64_t> begin,
                      absl::Span<const int64_t> step, const Shape& dims) {
  StridedView v{dims, RowMajorStrides(in)};
  for (size_t i = 0; i < in.size(); ++i) {
    v.offset += begin[i] * v.strides[i];
    v.strides[i] *= step[i];
  }
  return v;
}

StridedView BlockView(const Shape& whole, absl::Span<const int64_t> start, const Shape& block) {
  return SliceView(whole, start, Shape(whole.size(), 1), block);
}

StridedView AxisBlockView(const Shape& whole, int axis, int64_t start, const Shape& block) {
  Shape begin(whole.size(), 0);
  begin[axis] = start;
  return BlockView(whole, begin, block);
}

namespace views {

absl::StatusOr<Value> ShareAs(KernelContext& ctx, const Shape& shape) {
  Tensor t = ctx.mutable_input(0).TakeTensor();
  return Value(t.Reshaped(shape));
}

}  // namespace views
}  // namespace kgrad
