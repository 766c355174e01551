// CUDA kernels: shape family. Checks and messages follow
// backends/cpu/shape_kernels.cc. Reshape-like ops share the input's buffer (a
// view: no kernel runs); transpose, broadcast_to, slice, slice_grad, pad, concat
// and split are one strided copy each; sum_to is a reduction; gather and
// scatter_add check their indices on the device and read the verdict back before
// touching any data.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_context.h"
#include "backends/cuda/kernel_util.h"
#include "backends/view_kernels.h"
#include "core/shape.h"
#include "core/status_macros.h"

namespace kgrad {
namespace cuda {
namespace {

absl::StatusOr<const Tensor*> NumericTensorAt(const KernelContext& ctx, size_t i) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* t, ctx.TensorAt(i));
  if (t->dtype() == DType::kBool) {
    return absl::InvalidArgumentError(
        absl::StrCat("input ", i, " must be a numeric (not bool) tensor, got ", t->TypeString()));
  }
  return t;
}

absl::StatusOr<const Tensor*> IndexTensorAt(const KernelContext& ctx, size_t i) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* t, ctx.TensorAt(i));
  if (!IsInteger(t->dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat("input ", i, " must be an i32 or i64 index tensor, got ", t->TypeString()));
  }
  return t;
}

absl::Status ShapeAttr(const KernelContext& ctx, const char* attr, Shape* shape) {
  const std::vector<int64_t>& s = ctx.prim().GetInts(attr);
  absl::StatusOr<int64_t> n = CheckedNumElements(s);
  if (!n.ok()) return AttrError(ctx, attr, n.status().message());
  shape->assign(s.begin(), s.end());
  return absl::OkStatus();
}

// reshape, reshape_like, expand_dims, squeeze: backends/view_kernels.cc (no kernel runs).

// ----- transpose, broadcast_to, sum_to ----------------------------------------------------------
absl::StatusOr<Value> Transpose(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  std::vector<int64_t> perm = ctx.prim().GetInts("perm");
  const int rank = x->rank();
  if (perm.empty()) {
    for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  std::vector<bool> seen(rank, false);
  bool ok = static_cast<int>(perm.size()) == rank;
  for (size_t i = 0; ok && i < perm.size(); ++i) {
    ok = perm[i] >= 0 && perm[i] < rank && !seen[perm[i]];
    if (ok) seen[perm[i]] = true;
  }
  if (!ok) {
    return AttrError(
        ctx, "perm",
        absl::StrCat(Ints(perm), " is not a permutation of [0, ", rank, ") for ", x->TypeString()));
  }
  Shape in_strides = RowMajorStrides(x->shape());
  Shape dims, strides;
  for (int64_t p : perm) {
    dims.push_back(x->dim(p));
    strides.push_back(in_strides[p]);
  }
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(x->dtype(), dims));
  KGRAD_RETURN_IF_ERROR(StridedCopy(DenseWrite(dims, strides), *x, out, gpu.stream));
  return Value(std::move(out));
}

absl::StatusOr<Value> BroadcastToShape(KernelContext& ctx, const Shape& target) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  const int lead = static_cast<int>(target.size()) - x->rank();
  bool ok = lead >= 0;
  Shape in_strides = RowMajorStrides(x->shape());
  Shape strides(target.size(), 0);
  for (int i = 0; ok && i < x->rank(); ++i) {
    ok = x->dim(i) == target[lead + i] || x->dim(i) == 1;
    if (x->dim(i) != 1) strides[lead + i] = in_strides[i];
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot broadcast ", x->TypeString(), " to ", ShapeToString(target)));
  }
  if (NumElementsOf(target) == x->NumElements()) return views::ShareAs(ctx, target);
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(x->dtype(), target));
  KGRAD_RETURN_IF_ERROR(StridedCopy(DenseWrite(target, strides), *x, out, gpu.stream));
  return Value(std::move(out));
}

absl::StatusOr<Value> BroadcastTo(KernelContext& ctx) {
  Shape target;
  KGRAD_RETURN_IF_ERROR(ShapeAttr(ctx, "shape", &target));
  return BroadcastToShape(ctx, target);
}

absl::StatusOr<Value> BroadcastToLike(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* ref, ctx.TensorAt(1));
  return BroadcastToShape(ctx, ref->shape());
}

// x summed to `target`, which must broadcast to x's shape.
absl::StatusOr<Value> SumToShape(KernelContext& ctx, const Shape& target) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, NumericTensorAt(ctx, 0));
  const int shift = x->rank() - static_cast<int>(target.size());
  Shape t(x->rank(), 1);
  bool ok = true;
  for (int i = 0; i < static_cast<int>(target.size()); ++i) {
    int64_t d = i + shift >= 0 ? x->dim(i + shift) : 1;
    ok = ok && (target[i] == 1 || target[i] == d);
    if (i + shift >= 0) t[i + shift] = target[i];
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot sum ", x->TypeString(), " to ", ShapeToString(target),
                     ": the target must broadcast to the input's shape"));
  }
  std::vector<bool> reduced(x->rank(), false);
  bool any = false;
  for (int i = 0; i < x->rank(); ++i) {
    reduced[i] = t[i] == 1 && x->dim(i) != 1;
    any = any || reduced[i];
  }
  if (!any) return views::ShareAs(ctx, target);  // nothing to sum: only size-1 dims differ
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(x->dtype(), target));
  KGRAD_RETURN_IF_ERROR(
      RunReduce(ctx, ReduceOp::kSum, MakeReduceGeom(x->shape(), reduced), *x, out));
  return Value(std::move(out));
}

absl::StatusOr<Value> SumTo(KernelContext& ctx) {
  Shape target;
  KGRAD_RETURN_IF_ERROR(ShapeAttr(ctx, "shape", &target));
  return SumToShape(ctx, target);
}

absl::StatusOr<Value> SumToLike(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* ref, ctx.TensorAt(1));
  return SumToShape(ctx, ref->shape());
}

// ----- concat, split --------------------------------------------------------------------------
absl::StatusOr<Value> Concat(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* first, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(ctx, "axis", first->rank()));
  Shape dims = first->shape();
  dims[axis] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(i));
    bool ok = x->dtype() == first->dtype() && x->rank() == first->rank();
    for (int d = 0; ok && d < x->rank(); ++d) ok = d == axis || x->dim(d) == dims[d];
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("input ", i, " must match input 0 (", first->TypeString(),
                       ") in dtype and on every dim but ", axis, ", got ", x->TypeString()));
    }
    dims[axis] += x->dim(axis);
  }
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(first->dtype(), dims));
  const Shape out_strides = RowMajorStrides(dims);
  int64_t offset = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& x = ctx.input(i).tensor();
    KGRAD_RETURN_IF_ERROR(StridedCopy(DenseRead(x.shape(), out_strides, offset * out_strides[axis]),
                                      x, out, gpu.stream));
    offset += x.dim(axis);
  }
  return Value(std::move(out));
}

absl::StatusOr<Value> Split(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(ctx, "axis", x->rank()));
  const std::vector<int64_t>& sizes = ctx.prim().GetInts("sizes");
  int64_t total = 0;
  bool ok = !sizes.empty();
  for (int64_t s : sizes) {
    ok = ok && s >= 0 && s <= x->dim(axis);
    total += ok ? s : 0;
  }
  if (!ok || total != x->dim(axis)) {
    return AttrError(
        ctx, "sizes",
        absl::StrCat(Ints(sizes), " must be >= 0 and sum to dim ", axis, " of ", x->TypeString()));
  }
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  const Shape in_strides = RowMajorStrides(x->shape());
  std::vector<Value> parts;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    Shape dims = x->shape();
    dims[axis] = s;
    KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(x->dtype(), dims));
    KGRAD_RETURN_IF_ERROR(
        StridedCopy(DenseWrite(dims, in_strides, offset * in_strides[axis]), *x, out, gpu.stream));
    parts.push_back(Value(std::move(out)));
    offset += s;
  }
  return Value::Tuple(std::move(parts));
}

// ----- slice, slice_grad, pad ------------------------------------------------------------------
struct SliceSpec {
  Shape out, begin, stride;
};

absl::StatusOr<SliceSpec> MakeSliceSpec(const KernelContext& ctx, const Shape& in) {
  const std::vector<int64_t>& begin = ctx.prim().GetInts("begin");
  const std::vector<int64_t>& end = ctx.prim().GetInts("end");
  std::vector<int64_t> strides = ctx.prim().GetInts("strides");
  if (strides.empty()) strides.assign(in.size(), 1);
  const std::pair<const char*, size_t> lens[] = {
      {"begin", begin.size()}, {"end", end.size()}, {"strides", strides.size()}};
  for (const auto& [name, len] : lens) {
    if (len != in.size()) {
      return AttrError(ctx, name,
                       absl::StrCat("has ", len, " entries, expected the rank ", in.size()));
    }
  }
  SliceSpec s;
  for (size_t i = 0; i < in.size(); ++i) {
    if (strides[i] < 1) {
      return AttrError(ctx, "strides", absl::StrCat("must be >= 1, got ", Ints(strides)));
    }
    const int64_t d = in[i];
    const int64_t b = std::clamp<int64_t>(begin[i] < 0 ? begin[i] + d : begin[i], 0, d);
    const int64_t e = std::clamp<int64_t>(end[i] < 0 ? end[i] + d : end[i], 0, d);
    const int64_t n = e > b ? (e - b - 1) / strides[i] + 1 : 0;
    s.out.push_back(n);
    s.begin.push_back(b);
    s.stride.push_back(n > 1 ? strides[i] : 1);
  }
  return s;
}

// The slice's element strides per output dim inside `in`, and its first element.
std::pair<Shape, int64_t> SliceView(const SliceSpec& s, const Shape& in) {
  Shape strides = RowMajorStrides(in);
  int64_t offset = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    offset += s.begin[i] * strides[i];
    strides[i] *= s.stride[i];
  }
  return {strides, offset};
}

absl::StatusOr<Value> Slice(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(SliceSpec s, MakeSliceSpec(ctx, x->shape()));
  if (s.out == x->shape()) return std::move(ctx.mutable_input(0));  // the whole tensor
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(x->dtype(), s.out));
  auto [strides, offset] = SliceView(s, x->shape());
  KGRAD_RETURN_IF_ERROR(StridedCopy(DenseWrite(s.out, strides, offset), *x, out, gpu.stream));
  return Value(std::move(out));
}

absl::StatusOr<Value> SliceGrad(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* dy, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* ref, ctx.TensorAt(1));
  KGRAD_ASSIGN_OR_RETURN(SliceSpec s, MakeSliceSpec(ctx, ref->shape()));
  if (dy->shape() != s.out) {
    return absl::InvalidArgumentError(absl::StrCat("input 0 must have the slice's shape ",
                                                   ShapeToString(s.out), " (a slice of input 1 ",
                                                   ref->TypeString(), "), got ", dy->TypeString()));
  }
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(dy->dtype(), ref->shape()));
  KGRAD_RETURN_IF_ERROR(FillTensor(ctx, out, 0.0));
  auto [strides, offset] = SliceView(s, ref->shape());
  KGRAD_RETURN_IF_ERROR(StridedCopy(DenseRead(s.out, strides, offset), *dy, out, gpu.stream));
  return Value(std::move(out));
}

absl::StatusOr<Value> Pad(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  const std::vector<int64_t>& pads = ctx.prim().GetInts("pads");
  if (pads.size() != 2 * static_cast<size_t>(x->rank())) {
    return AttrError(
        ctx, "pads",
        absl::StrCat("has ", pads.size(), " entries, expected 2 * rank = ", 2 * x->rank()));
  }
  Shape dims = x->shape();
  for (int i = 0; i < x->rank(); ++i) {
    int64_t b = pads[2 * i], a = pads[2 * i + 1];
    if (b < 0 || a < 0 || b > kMaxElements || a > kMaxElements) {
      return AttrError(ctx, "pads", absl::StrCat("must be >= 0 (and not huge), got ", Ints(pads)));
    }
    dims[i] += b + a;
  }
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(x->dtype(), dims));
  KGRAD_RETURN_IF_ERROR(FillTensor(ctx, out, ctx.prim().GetFloat("value")));
  const Shape out_strides = RowMajorStrides(dims);
  int64_t offset = 0;
  for (int i = 0; i < x->rank(); ++i) offset += pads[2 * i] * out_strides[i];
  KGRAD_RETURN_IF_ERROR(
      StridedCopy(DenseRead(x->shape(), out_strides, offset), *x, out, gpu.stream));
  return Value(std::move(out));
}

// ----- gather, scatter_add, one_hot, cast, fill -----------------------------------------------
struct AxisView {
  int64_t outer, dim, inner;
};
AxisView ViewAround(const Shape& s, int axis) {
  absl::Span<const int64_t> d(s);
  return {NumElementsOf(d.subspan(0, axis)), s[axis], NumElementsOf(d.subspan(axis + 1))};
}

// OK when every index is in [0, dim); else the CPU kernel's OutOfRange error.
absl::Status CheckIndices(const KernelContext& ctx, const Gpu& gpu, const Tensor& indices,
                          int64_t dim, const Tensor& data, int axis) {
  if (indices.NumElements() == 0) return absl::OkStatus();
  int64_t value = 0;
  KGRAD_ASSIGN_OR_RETURN(int64_t pos, FirstBadIndex(ctx, gpu, indices, dim, &value));
  if (pos < 0) return absl::OkStatus();
  return absl::OutOfRangeError(absl::StrCat("index ", value, " (at position ", pos,
                                            " of the indices) is out of range [0, ", dim,
                                            ") for dim ", axis, " of ", data.TypeString()));
}

absl::StatusOr<Value> Gather(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* params, ctx.TensorAt(0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* indices, IndexTensorAt(ctx, 1));
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(ctx, "axis", params->rank()));
  const AxisView v = ViewAround(params->shape(), axis);
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_RETURN_IF_ERROR(CheckIndices(ctx, gpu, *indices, v.dim, *params, axis));
  Shape dims(params->shape().begin(), params->shape().begin() + axis);
  dims.insert(dims.end(), indices->shape().begin(), indices->shape().end());
  dims.insert(dims.end(), params->shape().begin() + axis + 1, params->shape().end());
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(params->dtype(), dims));
  KGRAD_LAUNCH(LaunchGather(static_cast<int>(DTypeSize(params->dtype())), params->raw_data(),
                            ToDT(indices->dtype()), indices->raw_data(), out.raw_data(), v.outer,
                            v.dim, v.inner, indices->NumElements(), gpu.stream));
  return Value(std::move(out));
}

absl::StatusOr<Value> ScatterAdd(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* input, NumericTensorAt(ctx, 0));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* indices, IndexTensorAt(ctx, 1));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* updates, ctx.TensorAt(2));
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(ctx, "axis", input->rank()));
  Shape want(input->shape().begin(), input->shape().begin() + axis);
  want.insert(want.end(), indices->shape().begin(), indices->shape().end());
  want.insert(want.end(), input->shape().begin() + axis + 1, input->shape().end());
  if (updates->dtype() != input->dtype() || updates->shape() != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("input 2 (updates) must be ", DTypeName(input->dtype()), ShapeToString(want),
                     " for input ", input->TypeString(), " and indices ", indices->TypeString(),
                     ", got ", updates->TypeString()));
  }
  const AxisView v = ViewAround(input->shape(), axis);
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_RETURN_IF_ERROR(CheckIndices(ctx, gpu, *indices, v.dim, *input, axis));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOrReuse({0}, input->dtype(), input->shape()));
  if (out.raw_data() != input->raw_data() && input->nbytes() > 0) {
    KGRAD_CUDA_CALL(cudaMemcpyAsync(out.raw_data(), input->raw_data(), input->nbytes(),
                                    cudaMemcpyDeviceToDevice, gpu.stream));
  }
  KGRAD_LAUNCH(LaunchScatterAdd(ToDT(input->dtype()), out.raw_data(), updates->raw_data(),
                                ToDT(indices->dtype()), indices->raw_data(), v.outer, v.dim,
                                v.inner, indices->NumElements(), gpu.stream));
  return Value(std::move(out));
}

absl::StatusOr<Value> OneHot(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* indices, IndexTensorAt(ctx, 0));
  const int64_t depth = ctx.prim().GetInt("depth");
  if (depth < 0) return AttrError(ctx, "depth", absl::StrCat("must be >= 0, got ", depth));
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(ctx, "axis", indices->rank() + 1));
  Shape dims = indices->shape();
  dims.insert(dims.begin() + axis, depth);
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(ctx.prim().GetDType("dtype"), dims));
  const int64_t inner = NumElementsOf(absl::MakeConstSpan(dims).subspan(axis + 1));
  const int64_t outer = NumElementsOf(absl::MakeConstSpan(dims).subspan(0, axis));
  KGRAD_LAUNCH(LaunchOneHot(ToDT(out.dtype()), ToDT(indices->dtype()), indices->raw_data(),
                            out.raw_data(), outer, depth, inner, ctx.prim().GetFloat("on_value"),
                            ctx.prim().GetFloat("off_value"), gpu.stream));
  return Value(std::move(out));
}

absl::StatusOr<Value> Cast(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  const DType to = ctx.prim().GetDType("dtype");
  if (to == x->dtype()) return std::move(ctx.mutable_input(0));
  KGRAD_ASSIGN_OR_RETURN(Gpu gpu, GpuOf(ctx));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(to, x->shape()));
  KGRAD_LAUNCH(LaunchCast(ToDT(x->dtype()), ToDT(to), x->raw_data(), out.raw_data(),
                          x->NumElements(), gpu.stream));
  return Value(std::move(out));
}

absl::StatusOr<Value> Fill(KernelContext& ctx) {
  Shape shape;
  KGRAD_RETURN_IF_ERROR(ShapeAttr(ctx, "shape", &shape));
  KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(ctx.prim().GetDType("dtype"), shape));
  KGRAD_RETURN_IF_ERROR(FillTensor(ctx, out, ctx.prim().GetFloat("value")));
  return Value(std::move(out));
}

}  // namespace

void RegisterShapeKernels(KernelTable* t) {
  t->Set(PrimId::kReshape, OnDevice<views::Reshape>);
  t->Set(PrimId::kReshapeLike, OnDevice<views::ReshapeLike>);
  t->Set(PrimId::kTranspose, OnDevice<Transpose>);
  t->Set(PrimId::kBroadcastTo, OnDevice<BroadcastTo>);
  t->Set(PrimId::kBroadcastToLike, OnDevice<BroadcastToLike>);
  t->Set(PrimId::kSumTo, OnDevice<SumTo>);
  t->Set(PrimId::kSumToLike, OnDevice<SumToLike>);
  t->Set(PrimId::kExpandDims, OnDevice<views::ExpandDims>);
  t->Set(PrimId::kSqueeze, OnDevice<views::Squeeze>);
  t->Set(PrimId::kConcat, OnDevice<Concat>);
  t->Set(PrimId::kSplit, OnDevice<Split>);
  t->Set(PrimId::kSlice, OnDevice<Slice>);
  t->Set(PrimId::kSliceGrad, OnDevice<SliceGrad>);
  t->Set(PrimId::kGather, OnDevice<Gather>);
  t->Set(PrimId::kScatterAdd, OnDevice<ScatterAdd>);
  t->Set(PrimId::kPad, OnDevice<Pad>);
  t->Set(PrimId::kOneHot, OnDevice<OneHot>);
  t->Set(PrimId::kCast, OnDevice<Cast>);
  t->Set(PrimId::kFill, OnDevice<Fill>);
}

}  // namespace cuda
}  // namespace kgrad
