// ONNX op mappings: linear algebra and neural-network ops (2-D convolution and
// pooling in NCHW; the normalisations are in onnx_norm_ops.cc).
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_context.h"

namespace kgrad {
namespace onnx_import {
namespace {

Outputs One(absl::StatusOr<ImportedValue> v) {
  if (!v.ok()) return v.status();
  return std::vector<ImportedValue>{*std::move(v)};
}

absl::StatusOr<ImportedValue> Scalar(NodeContext& c, DType t, double v) {
  KGRAD_ASSIGN_OR_RETURN(Tensor k, Tensor::Full(t, {}, v));
  return c.Const(std::move(k));
}

// MatMul(a, b), NumPy semantics: a 1-D operand gains a dim that is dropped after.
Outputs MatMul(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue a, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue b, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ta, c.TensorType(a));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tb, c.TensorType(b));
  bool a1 = ta->rank() == 1, b1 = tb->rank() == 1;
  if (a1) {
    KGRAD_ASSIGN_OR_RETURN(a, c.Emit(PrimId::kExpandDims, {a}, {{"axis", int64_t{0}}}));
  }
  if (b1) {
    KGRAD_ASSIGN_OR_RETURN(b, c.Emit(PrimId::kExpandDims, {b}, {{"axis", int64_t{1}}}));
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue y, c.Emit(PrimId::kMatMul, {a, b}));
  if (b1) {
    KGRAD_ASSIGN_OR_RETURN(y, c.Emit(PrimId::kSqueeze, {y}, {{"axes", std::vector<int64_t>{-1}}}));
  }
  if (a1) {
    KGRAD_ASSIGN_OR_RETURN(y, c.Emit(PrimId::kSqueeze, {y}, {{"axes", std::vector<int64_t>{-2}}}));
  }
  return std::vector<ImportedValue>{y};
}

// Gemm(A, B[, C]){alpha, beta, transA, transB} = alpha * op(A) op(B) + beta * C.
Outputs Gemm(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 3));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue a, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue b, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(double alpha, c.Float("alpha", 1));
  KGRAD_ASSIGN_OR_RETURN(double beta, c.Float("beta", 1));
  KGRAD_ASSIGN_OR_RETURN(int64_t ta, c.Int("transA", 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t tb, c.Int("transB", 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(a));
  if (t->rank() != 2) return c.Error(absl::StrCat("A must be 2-D, got ", t->ToString()));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue y, c.Emit(PrimId::kMatMul, {a, b},
                                                 {{"transpose_a", ta != 0}, {"transpose_b", tb != 0}}));
  if (alpha != 1) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue k, Scalar(c, t->dtype(), alpha));
    KGRAD_ASSIGN_OR_RETURN(y, c.Emit(PrimId::kMul, {y, k}));
  }
  if (c.HasInput(2) && beta != 0) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue bias, c.Input(2));
    if (beta != 1) {
      KGRAD_ASSIGN_OR_RETURN(ImportedValue k, Scalar(c, t->dtype(), beta));
      KGRAD_ASSIGN_OR_RETURN(bias, c.Emit(PrimId::kMul, {bias, k}));
    }
    KGRAD_ASSIGN_OR_RETURN(y, c.Emit(PrimId::kAdd, {y, bias}));
  }
  return std::vector<ImportedValue>{y};
}

Outputs Einsum(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 16));
  KGRAD_ASSIGN_OR_RETURN(std::string eq, c.String("equation", ""));
  std::vector<ImportedValue> xs;
  for (int i = 0; i < c.num_inputs(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(i));
    xs.push_back(x);
  }
  std::string compact;
  for (char ch : eq) {
    if (ch != ' ') compact.push_back(ch);
  }
  return One(c.Emit(PrimId::kEinsum, xs, {{"equation", compact}}));
}

// Softmax/LogSoftmax(x){axis}: opset 13 normalises along axis (default -1); older
// opsets flatten at axis (default 1), which is the same only for the last axis.
template <PrimId id>
Outputs Softmax(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  KGRAD_ASSIGN_OR_RETURN(int64_t axis, c.Int("axis", c.opset() >= 13 ? -1 : 1));
  if (c.opset() < 13) {
    absl::StatusOr<int> a = NormalizeAxis(axis, t->rank());
    if (!a.ok() || *a != t->rank() - 1) {
      return c.Error("before opset 13 only the last axis is supported (flattening semantics)");
    }
  }
  return One(c.Emit(id, {x}, {{"axis", axis}}));
}

// The 2-D window attributes shared by Conv and the pools: kernel, strides,
// symmetric pads [top, left, bottom, right] -> padding [ph, pw], dilations.
struct Window {
  std::vector<int64_t> kernel, strides, padding, dilations;
};

absl::StatusOr<Window> ReadWindow(NodeContext& c, const AbstractTensor* x,
                                  std::vector<int64_t> kernel) {
  if (x->rank() != 4) return c.Error(absl::StrCat("only 2-D (NCHW) inputs are supported, got ", x->ToString()));
  Window w;
  KGRAD_ASSIGN_OR_RETURN(w.kernel, c.Ints("kernel_shape", kernel));
  KGRAD_ASSIGN_OR_RETURN(w.strides, c.Ints("strides", {1, 1}));
  KGRAD_ASSIGN_OR_RETURN(w.dilations, c.Ints("dilations", {1, 1}));
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> pads, c.Ints("pads", {0, 0, 0, 0}));
  KGRAD_ASSIGN_OR_RETURN(std::string auto_pad, c.String("auto_pad", "NOTSET"));
  if (auto_pad != "NOTSET" && auto_pad != "VALID") {
    return c.Error(absl::StrCat("auto_pad ", auto_pad, " is not supported (NOTSET, VALID are)"));
  }
  if (auto_pad == "VALID") pads = {0, 0, 0, 0};
  if (w.kernel.size() != 2 || w.strides.size() != 2 || w.dilations.size() != 2 || pads.size() != 4) {
    return c.Error("kernel_shape, strides, dilations must have 2 entries and pads 4");
  }
  if (pads[0] != pads[2] || pads[1] != pads[3]) {
    return c.Error("asymmetric pads are not supported");
  }
  w.padding = {pads[0], pads[1]};
  return w;
}

// Conv(x, w[, b]){group, ...} = conv2d(x, w) + reshape(b, [C, 1, 1]).
Outputs Conv(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 3));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue w, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tx, c.TensorType(x));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tw, c.TensorType(w));
  std::vector<int64_t> kernel;
  if (tw->rank() == 4) kernel = {tw->shape()[2], tw->shape()[3]};
  KGRAD_ASSIGN_OR_RETURN(Window win, ReadWindow(c, tx, kernel));
  KGRAD_ASSIGN_OR_RETURN(int64_t group, c.Int("group", 1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue y, c.Emit(PrimId::kConv2d, {x, w},
                                                 {{"stride", win.strides}, {"padding", win.padding},
                                                  {"dilation", win.dilations}, {"groups", group}}));
  if (!c.HasInput(2)) return std::vector<ImportedValue>{y};
  KGRAD_ASSIGN_OR_RETURN(ImportedValue bias, c.Input(2));
  KGRAD_ASSIGN_OR_RETURN(bias, c.Emit(PrimId::kReshape, {bias}, {{"shape", std::vector<int64_t>{-1, 1, 1}}}));
  return One(c.Emit(PrimId::kAdd, {y, bias}));
}

// ConvTranspose(x, w[, b]){strides, pads, dilations, group, output_padding} =
// conv2d_backprop_input(x, w, zeros of the output shape) (+ bias): the adjoint of
// conv2d, which is what ConvTranspose computes.
Outputs ConvTranspose(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 3));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue w, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tx, c.TensorType(x));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tw, c.TensorType(w));
  if (!tx->shape_known() || !tw->shape_known() || tw->rank() != 4) {
    return c.Error(absl::StrCat("needs static 2-D shapes, got ", tx->ToString(), " and ", tw->ToString()));
  }
  KGRAD_ASSIGN_OR_RETURN(Window win, ReadWindow(c, tx, {tw->shape()[2], tw->shape()[3]}));
  KGRAD_ASSIGN_OR_RETURN(int64_t group, c.Int("group", 1));
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> extra, c.Ints("output_padding", {0, 0}));
  if (c.HasAttr("output_shape")) return c.Error("output_shape is not supported (output_padding is)");
  if (extra.size() != 2 || group < 1) return c.Error("bad output_padding or group");
  Shape out = {tx->shape()[0], tw->shape()[1] * group, 0, 0};
  for (int i = 0; i < 2; ++i) {
    out[2 + i] = (tx->shape()[2 + i] - 1) * win.strides[i] - 2 * win.padding[i] +
                 win.dilations[i] * (tw->shape()[2 + i] - 1) + 1 + extra[i];
    if (out[2 + i] <= 0 || extra[i] < 0) return c.Error("empty or negative output size");
  }
  absl::StatusOr<int64_t> n = CheckedNumElements(out);
  if (!n.ok() || *n > c.importer().options().max_folded_elements) return c.Error("output too large");
  KGRAD_ASSIGN_OR_RETURN(Tensor ref, Tensor::Zeros(tx->dtype(), out));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue y, c.Emit(PrimId::kConv2dBackpropInput, {x, w, c.Const(std::move(ref))},
                                                 {{"stride", win.strides}, {"padding", win.padding},
                                                  {"dilation", win.dilations}, {"groups", group}}));
  if (!c.HasInput(2)) return std::vector<ImportedValue>{y};
  KGRAD_ASSIGN_OR_RETURN(ImportedValue bias, c.Input(2));
  KGRAD_ASSIGN_OR_RETURN(bias, c.Emit(PrimId::kReshape, {bias}, {{"shape", std::vector<int64_t>{-1, 1, 1}}}));
  return One(c.Emit(PrimId::kAdd, {y, bias}));
}

// MaxPool / AveragePool(x){kernel_shape, strides, pads, ceil_mode=0, ...}.
template <PrimId id>
Outputs Pool(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tx, c.TensorType(x));
  KGRAD_ASSIGN_OR_RETURN(Window win, ReadWindow(c, tx, {}));
  KGRAD_ASSIGN_OR_RETURN(int64_t ceil_mode, c.Int("ceil_mode", 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t storage_order, c.Int("storage_order", 0));
  if (ceil_mode != 0) return c.Error("ceil_mode=1 is not supported");
  if (storage_order != 0) return c.Error("storage_order=1 is not supported");
  if (win.dilations != std::vector<int64_t>{1, 1}) return c.Error("dilated pooling is not supported");
  AttrMap attrs = {{"kernel", win.kernel}, {"stride", win.strides}, {"padding", win.padding}};
  if (id == PrimId::kAvgPool2d) {
    KGRAD_ASSIGN_OR_RETURN(int64_t include, c.Int("count_include_pad", 0));
    attrs["count_include_pad"] = include != 0;
  }
  return One(c.Emit(id, {x}, std::move(attrs)));
}

// GlobalAveragePool / GlobalMaxPool(x) = reduce over the spatial dims, kept.
template <PrimId id>
Outputs GlobalPool(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  if (t->rank() < 3) return c.Error(absl::StrCat("needs rank >= 3, got ", t->ToString()));
  std::vector<int64_t> axes;
  for (int i = 2; i < t->rank(); ++i) axes.push_back(i);
  return One(c.Emit(id, {x}, {{"axes", axes}, {"keepdims", true}}));
}

}  // namespace

void AddNnOps(OpTable* t) {
  (*t)["MatMul"] = MatMul;
  (*t)["Gemm"] = Gemm;
  (*t)["Einsum"] = Einsum;
  (*t)["Softmax"] = Softmax<PrimId::kSoftmax>;
  (*t)["LogSoftmax"] = Softmax<PrimId::kLogSoftmax>;
  (*t)["Conv"] = Conv;
  (*t)["ConvTranspose"] = ConvTranspose;
  (*t)["MaxPool"] = Pool<PrimId::kMaxPool2d>;
  (*t)["AveragePool"] = Pool<PrimId::kAvgPool2d>;
  (*t)["GlobalAveragePool"] = GlobalPool<PrimId::kReduceMean>;
  (*t)["GlobalMaxPool"] = GlobalPool<PrimId::kReduceMax>;
}

}  // namespace onnx_import
}  // namespace kgrad
