// ONNX export of the neural-network primitives: softmax and the cross-entropies,
// the normalisations and their gradients, matmul and einsum, and convolution and pooling with their gradients (the windows
// read through ops::ConvAttrs / PoolAttrs, so asymmetric and ceil-mode padding
// export as the kernels compute them).
#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "ops/conv_window.h"
#include "proto/onnx/onnx_exporter.h"

namespace kgrad {
namespace onnx_export_internal {
namespace {

// The used (trailing) axes of one of a window's arrays, in ONNX's order.
std::vector<int64_t> Used(const ops::Window& w, const ops::Axes& v) {
  return std::vector<int64_t>(v.begin() + w.first(), v.end());
}

// A window's padding in ONNX's order [x1_begin, x2_begin, ..., x1_end, x2_end].
std::vector<int64_t> OnnxPads(const ops::Window& w) {
  std::vector<int64_t> pads = Used(w, w.pad_lo);
  for (int64_t p : Used(w, w.pad_hi)) pads.push_back(p);
  return pads;
}

// 0, 1, 2, ... n-1 with 0 and 1 swapped: channels and batch exchanged.
std::vector<int64_t> SwapBatchAndChannels(int rank) {
  std::vector<int64_t> perm = {1, 0};
  for (int d = 2; d < rank; ++d) perm.push_back(d);
  return perm;
}

// The spatial rank of a window op whose input `arg` has type `t`.
// Only the rank is read: the dims may be unknown (a dynamic batch).
absl::StatusOr<int> SpatialRank(Exporter& e, CNode* c, int arg) {
  const AbstractTensor* t = AsTensor(c->arg(arg)->abstract());
  if (t == nullptr || !ops::WindowRank(t->rank())) {
    return e.Error(c, "needs a tensor input of rank 3, 4 or 5");
  }
  return t->rank() - 2;
}

// ConvTranspose's attributes for an output of length `want` along each spatial
// axis from an input of length `in`: output_padding adds cells at the end; when the
// padded window reaches past `want` (the end padding of a ceil-mode window), the
// end pad grows instead, since output_padding cannot be negative.
void SetTransposedExtent(NodeProto* n, ops::Window w, const Shape& in, const Shape& want) {
  std::vector<int64_t> extra;
  for (int i = 0; i < w.spatial; ++i) {
    const int d = w.first() + i;
    int64_t reach = (in[2 + i] - 1) * w.stride[d] - w.pad_lo[d] - w.pad_hi[d] +
                    w.dilation[d] * (w.kernel[d] - 1) + 1;
    int64_t e = want[2 + i] - reach;
    if (e < 0) w.pad_hi[d] -= e;
    extra.push_back(std::max<int64_t>(e, 0));
  }
  SetInts(n, "pads", OnnxPads(w));
  SetInts(n, "output_padding", extra);
}


// conv2d_backprop_filter(x, dy, w_ref): per group, dw^T = conv(x^T, dy^T) with
// stride and dilation swapped (batch as the reduced channel), cut to the kernel.
absl::StatusOr<std::string> EmitConvFilterGrad(Exporter& e, const ExportCall& call) {
  CNode* c = call.node;
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tx, e.StaticType(c, c->arg(0)));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tdy, e.StaticType(c, c->arg(1)));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tw, e.StaticType(c, c->arg(2)));
  KGRAD_ASSIGN_OR_RETURN(ops::Window win, ops::ConvAttrs(call.prim, tx->rank() - 2));
  int64_t groups = win.groups;
  const std::vector<int64_t> perm = SwapBatchAndChannels(tx->rank());
  std::vector<int64_t> zeros, kernel, axes;
  for (int d = 2; d < tw->rank(); ++d) {
    zeros.push_back(0);
    kernel.push_back(tw->shape()[d]);
    axes.push_back(d);
  }
  int64_t cin = tx->shape()[1] / groups, cout = tdy->shape()[1] / groups;
  std::vector<std::string> parts;
  for (int64_t g = 0; g < groups; ++g) {
    auto channels = [&](const std::string& t, int64_t n) {
      return e.Op("Slice", {t, e.Ints({g * n}), e.Ints({(g + 1) * n}), e.Ints({1})});
    };
    NodeProto* xt = e.Add("Transpose", {channels(call.in[0], cin)});
    SetInts(xt, "perm", perm);
    NodeProto* dyt = e.Add("Transpose", {channels(call.in[1], cout)});
    SetInts(dyt, "perm", perm);
    NodeProto* conv = e.Add("Conv", {xt->output(0), dyt->output(0)});
    SetInts(conv, "strides", Used(win, win.dilation));
    SetInts(conv, "dilations", Used(win, win.stride));
    SetInts(conv, "pads", OnnxPads(win));
    std::string cut = e.Op("Slice", {conv->output(0), e.Ints(zeros), e.Ints(kernel), e.Ints(axes)});
    NodeProto* back = e.Add("Transpose", {cut});
    SetInts(back, "perm", perm);
    parts.push_back(back->output(0));
  }
  if (parts.size() == 1) return parts[0];
  NodeProto* cat = e.Add("Concat", parts);
  SetInt(cat, "axis", 0);
  return cat->output(0);
}

// A one-hot depthwise kernel [ch, 1, kernel...] with 1 at the window's cell
// `cell` (row-major).
Tensor OneHotKernel(DType dt, int64_t ch, const std::vector<int64_t>& k, int64_t cell) {
  Shape shape = {ch, 1};
  int64_t cells = 1;
  for (int64_t d : k) {
    shape.push_back(d);
    cells *= d;
  }
  Tensor onehot = Tensor::Zeros(dt, shape).value();
  for (int64_t q = 0; q < ch; ++q) {
    int64_t at = q * cells + cell;
    if (dt == DType::kFloat32) {
      onehot.mutable_data<float>()[at] = 1;
    } else {
      onehot.mutable_data<double>()[at] = 1;
    }
  }
  return onehot;
}

// max_pool2d_grad(x, dy): for each window offset (i, j) in order, the outputs whose
// first maximum sits at that offset (x's strided slice at the offset equals the
// max and no earlier offset did) send dy there, placed by a transposed depthwise
// conv with a one-hot kernel. Only ops the importer reads back (no Indices output).
absl::StatusOr<std::string> EmitMaxPoolGrad(Exporter& e, const std::vector<std::string>& a,
                                            const AbstractTensor& tx, const AbstractTensor& tdy,
                                            const ops::Window& w) {
  DType dt = tx.dtype();
  int64_t ch = tx.shape()[1];
  const std::vector<int64_t> k = Used(w, w.kernel), s = Used(w, w.stride);
  NodeProto* pool = e.Add("MaxPool", {a[0]});
  SetInts(pool, "kernel_shape", k);
  SetInts(pool, "strides", s);
  SetInts(pool, "pads", OnnxPads(w));
  std::string y = pool->output(0);
  std::string xp = a[0];
  const ops::Axes zero{0, 0, 0};
  if (w.pad_lo != zero || w.pad_hi != zero) {
    std::vector<int64_t> pads = {0, 0};
    for (int64_t p : Used(w, w.pad_lo)) pads.push_back(p);
    pads.insert(pads.end(), {0, 0});
    for (int64_t p : Used(w, w.pad_hi)) pads.push_back(p);
    xp = e.Op("Pad", {a[0], e.Ints(pads), e.Scalar(dt, -std::numeric_limits<double>::infinity())});
  }
  int64_t cells = 1;
  for (int64_t d : k) cells *= d;
  std::string taken, dx;
  for (int64_t cell = 0; cell < cells; ++cell) {
    // The cell's offset along each spatial axis (row-major) and its strided slice.
    std::vector<int64_t> begin(k.size()), end(k.size()), axes(k.size());
    for (int64_t i = static_cast<int64_t>(k.size()) - 1, rest = cell; i >= 0; --i) {
      begin[i] = rest % k[i];
      rest /= k[i];
      end[i] = begin[i] + s[i] * (tdy.shape()[2 + i] - 1) + 1;
      axes[i] = 2 + i;
    }
    std::string win = e.Op("Slice", {xp, e.Ints(begin), e.Ints(end), e.Ints(axes), e.Ints(s)});
    std::string hit = e.Op("Equal", {win, y});
    std::string first = taken.empty() ? hit : e.Op("And", {hit, e.Op("Not", {taken})});
    taken = taken.empty() ? hit : e.Op("Or", {taken, hit});
    NodeProto* cast = e.Add("Cast", {first});
    SetInt(cast, "to", DTypeToOnnx(dt));
    std::string routed = e.Op("Mul", {cast->output(0), a[1]});
    NodeProto* ct = e.Add("ConvTranspose", {routed, e.Const(OneHotKernel(dt, ch, k, cell))});
    SetInts(ct, "kernel_shape", k);
    SetInts(ct, "strides", s);
    SetInt(ct, "group", ch);
    SetTransposedExtent(ct, w, tdy.shape(), tx.shape());
    dx = dx.empty() ? ct->output(0) : e.Op("Add", {dx, ct->output(0)});
  }
  return dx;
}

// max_pool2d_grad(x, dy) as above; avg_pool2d_grad(dy, x_ref): a transposed
// depthwise conv with 1/(kh*kw).
absl::StatusOr<std::string> EmitPoolGrad(Exporter& e, const ExportCall& call) {
  CNode* c = call.node;
  bool max = call.prim.id() == PrimId::kMaxPool2dGrad;
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tx, e.StaticType(c, c->arg(max ? 0 : 1)));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tdy, e.StaticType(c, c->arg(max ? 1 : 0)));
  KGRAD_ASSIGN_OR_RETURN(int spatial, SpatialRank(e, c, 0));
  KGRAD_ASSIGN_OR_RETURN(ops::Window win, ops::PoolAttrs(call.prim, spatial));
  if (max) return EmitMaxPoolGrad(e, call.in, *tx, *tdy, win);
  const ops::Axes zero{0, 0, 0};
  bool padded = win.pad_lo != zero || win.pad_hi != zero;
  if (!call.prim.GetBool("count_include_pad") && padded) {
    return e.Error(c, "count_include_pad=false with padding has no standard-op form");
  }
  int64_t ch = tx->shape()[1];
  Shape kshape = {ch, 1};
  double cells = 1;
  for (int64_t d : Used(win, win.kernel)) {
    kshape.push_back(d);
    cells *= static_cast<double>(d);
  }
  Tensor w = Tensor::Full(tx->dtype(), kshape, 1.0 / cells).value();
  NodeProto* ct = e.Add("ConvTranspose", {call.in[0], e.Const(w)});
  SetInts(ct, "kernel_shape", Used(win, win.kernel));
  SetInts(ct, "strides", Used(win, win.stride));
  SetInt(ct, "group", ch);
  SetTransposedExtent(ct, win, tdy->shape(), tx->shape());
  return ct->output(0);
}

// batch_norm(x, scale, bias){epsilon, axis} in training form: the batch moments over
// every dim but `axis` (ReduceMean), then (x - mean) / sqrt(var + eps) * scale +
// bias with scale and bias unsqueezed to broadcast along `axis`.
absl::StatusOr<std::string> EmitBatchNorm(Exporter& e, const ExportCall& call) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, e.StaticType(call.node, call.node->arg(0)));
  const int64_t a = call.prim.GetInt("axis");
  const int axis = static_cast<int>(a) + (a < 0 ? t->rank() : 0);
  std::vector<int64_t> others;
  for (int d = 0; d < t->rank(); ++d) {
    if (d != axis) others.push_back(d);
  }
  auto mean = [&](const std::string& v) {
    NodeProto* n = e.Add("ReduceMean", {v});
    SetInts(n, "axes", others);
    SetInt(n, "keepdims", 1);
    return n->output(0);
  };
  std::string centered = e.Op("Sub", {call.in[0], mean(call.in[0])});
  std::string var = mean(e.Op("Mul", {centered, centered}));
  std::string std = e.Op("Sqrt", {e.Op("Add", {var, e.Scalar(t->dtype(), call.prim.GetFloat("epsilon"))})});
  std::string scale = e.Op("Unsqueeze", {call.in[1], e.Ints(others)});
  std::string bias = e.Op("Unsqueeze", {call.in[2], e.Ints(others)});
  return e.Op("Add", {e.Op("Mul", {e.Op("Div", {centered, std}), scale}), bias});
}

// batch_norm_grad(x, s, dy) and layer_norm_grad(x, s, dy) as the kernels'
// formula: h = (x - mean) / sqrt(var + eps), g = dy * s,
// dx = (g - mean(g) - h * mean(g * h)) / sqrt(var + eps), dscale = sum'(dy * h),
// dbias = sum'(dy); mean over `stats`, sum' over `sums` (none: the value itself),
// s unsqueezed at `unsqueeze` (none: it broadcasts as it is).
struct NormGradLayout {
  std::vector<int64_t> stats, sums, unsqueeze;
};

absl::StatusOr<Val> EmitNormGrad(Exporter& e, CNode* c, const Primitive& p, const NormGradLayout& l,
                                 DType dtype) {
  KGRAD_ASSIGN_OR_RETURN(std::string x, e.TensorArg(c, 0));
  KGRAD_ASSIGN_OR_RETURN(std::string s, e.TensorArg(c, 1));
  KGRAD_ASSIGN_OR_RETURN(std::string dy, e.TensorArg(c, 2));
  auto mean = [&](const std::string& v) {
    NodeProto* n = e.Add("ReduceMean", {v});
    SetInts(n, "axes", l.stats);
    SetInt(n, "keepdims", 1);
    return n->output(0);
  };
  auto sum = [&](const std::string& v) {
    if (l.sums.empty()) return e.Op("Identity", {v});
    NodeProto* n = e.Add("ReduceSum", {v, e.Ints(l.sums)});
    SetInt(n, "keepdims", 0);
    return n->output(0);
  };
  std::string centered = e.Op("Sub", {x, mean(x)});
  std::string var = mean(e.Op("Mul", {centered, centered}));
  std::string std = e.Op("Sqrt", {e.Op("Add", {var, e.Scalar(dtype, p.GetFloat("epsilon"))})});
  std::string h = e.Op("Div", {centered, std});
  std::string sb = l.unsqueeze.empty() ? s : e.Op("Unsqueeze", {s, e.Ints(l.unsqueeze)});
  std::string g = e.Op("Mul", {dy, sb});
  std::string proj = e.Op("Mul", {h, mean(e.Op("Mul", {g, h}))});
  Val v;
  v.is_tuple = true;
  v.elems.push_back(Val{e.Op("Div", {e.Op("Sub", {e.Op("Sub", {g, mean(g)}), proj}), std})});
  v.elems.push_back(Val{sum(e.Op("Mul", {dy, h}))});
  v.elems.push_back(Val{sum(dy)});
  return v;
}

absl::StatusOr<Val> EmitBatchOrLayerNormGrad(Exporter& e, CNode* c, const Primitive& p) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, e.StaticType(c, c->arg(0)));
  const bool batch = p.id() == PrimId::kBatchNormGrad;
  const int64_t a = p.GetInt(batch ? "axis" : "begin_norm_axis");
  const int axis = static_cast<int>(a) + (a < 0 ? t->rank() : 0);
  NormGradLayout l;
  for (int d = 0; d < t->rank(); ++d) {
    const bool stat = batch ? d != axis : d >= axis;
    (stat ? l.stats : l.sums).push_back(d);
  }
  if (batch) l.sums = l.unsqueeze = l.stats;
  return EmitNormGrad(e, c, p, l, t->dtype());
}

absl::StatusOr<std::string> EmitSoftmax(Exporter& e, const ExportCall& call) {
  NodeProto* n = e.Add(call.prim.id() == PrimId::kSoftmax ? "Softmax" : "LogSoftmax", call.in);
  SetInt(n, "axis", call.prim.GetInt("axis"));
  return n->output(0);
}

// softmax_cross_entropy(logits, labels){axis} = -ReduceSum(labels *
// LogSoftmax(logits)) over axis (keepdims 0).
absl::StatusOr<std::string> EmitSoftmaxCrossEntropy(Exporter& e, const ExportCall& call) {
  const int64_t axis = call.prim.GetInt("axis");
  NodeProto* ls = e.Add("LogSoftmax", {call.in[0]});
  SetInt(ls, "axis", axis);
  NodeProto* sum = e.Add("ReduceSum", {e.Op("Mul", {call.in[1], ls->output(0)}), e.Ints({axis})});
  SetInt(sum, "keepdims", 0);
  return e.Op("Neg", {sum->output(0)});
}

// sparse_softmax_cross_entropy(logits[N, C], labels[N]) =
// SoftmaxCrossEntropyLoss{reduction=none}: -log_softmax(logits)[n, labels[n]].
absl::StatusOr<std::string> EmitSparseSoftmaxCrossEntropy(Exporter& e, const ExportCall& call) {
  NodeProto* n = e.Add("SoftmaxCrossEntropyLoss", call.in);
  SetString(n, "reduction", "none");
  return n->output(0);
}

absl::StatusOr<std::string> EmitLayerNorm(Exporter& e, const ExportCall& call) {
  NodeProto* n = e.Add("LayerNormalization", call.in);
  SetInt(n, "axis", call.prim.GetInt("begin_norm_axis"));
  SetFloat(n, "epsilon", call.prim.GetFloat("epsilon"));
  return n->output(0);
}

// conv2d(x, w) = Conv; conv2d_backprop_input(dy, w, x_ref) = ConvTranspose with the
// rows and columns of x_ref that no output reached as output_padding.
absl::StatusOr<std::string> EmitConv(Exporter& e, const ExportCall& call) {
  CNode* c = call.node;
  KGRAD_ASSIGN_OR_RETURN(int spatial, SpatialRank(e, c, 0));
  KGRAD_ASSIGN_OR_RETURN(ops::Window win, ops::ConvAttrs(call.prim, spatial));
  bool fwd = call.prim.id() == PrimId::kConv2d;
  NodeProto* n = e.Add(fwd ? "Conv" : "ConvTranspose", {call.in[0], call.in[1]});
  SetInts(n, "strides", Used(win, win.stride));
  SetInts(n, "dilations", Used(win, win.dilation));
  SetInt(n, "group", win.groups);
  if (fwd) {
    SetInts(n, "pads", OnnxPads(win));
    return n->output(0);
  }
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tdy, e.StaticType(c, c->arg(0)));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tw, e.StaticType(c, c->arg(1)));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tx, e.StaticType(c, c->arg(2)));
  for (int i = 0; i < spatial; ++i) win.kernel[win.first() + i] = tw->shape()[2 + i];
  SetTransposedExtent(n, win, tdy->shape(), tx->shape());
  return n->output(0);
}

absl::StatusOr<std::string> EmitPool(Exporter& e, const ExportCall& call) {
  KGRAD_ASSIGN_OR_RETURN(int spatial, SpatialRank(e, call.node, 0));
  KGRAD_ASSIGN_OR_RETURN(ops::Window win, ops::PoolAttrs(call.prim, spatial));
  const bool avg = call.prim.id() == PrimId::kAvgPool2d;
  NodeProto* n = e.Add(avg ? "AveragePool" : "MaxPool", call.in);
  SetInts(n, "kernel_shape", Used(win, win.kernel));
  SetInts(n, "strides", Used(win, win.stride));
  SetInts(n, "pads", OnnxPads(win));
  if (avg) SetInt(n, "count_include_pad", call.prim.GetBool("count_include_pad"));
  return n->output(0);
}

// matmul(x, y){transpose_a, transpose_b}: MatMul after Transposes of the last two
// dims.
absl::StatusOr<std::string> EmitMatMul(Exporter& e, const ExportCall& call) {
  std::string xy[2] = {call.in[0], call.in[1]};
  for (int i = 0; i < 2; ++i) {
    if (!call.prim.GetBool(i == 0 ? "transpose_a" : "transpose_b")) continue;
    const AbstractTensor* t = AsTensor(call.node->arg(i)->abstract());  // the rank is enough
    if (t == nullptr) return e.Error(call.node, "needs tensor types for its operands");
    std::vector<int64_t> perm;
    for (int d = 0; d < t->rank(); ++d) perm.push_back(d);
    std::swap(perm[t->rank() - 1], perm[t->rank() - 2]);
    NodeProto* n = e.Add("Transpose", {xy[i]});
    SetInts(n, "perm", perm);
    xy[i] = n->output(0);
  }
  return e.Op("MatMul", {xy[0], xy[1]});
}

// det(a) = Det (the same batch of square matrices).
absl::StatusOr<std::string> EmitDet(Exporter& e, const ExportCall& call) { return e.Op("Det", call.in); }

absl::StatusOr<std::string> EmitEinsum(Exporter& e, const ExportCall& call) {
  NodeProto* n = e.Add("Einsum", call.in);
  SetString(n, "equation", call.prim.GetString("equation"));
  return n->output(0);
}

}  // namespace

void AddNnEmitters(EmitterTable* t) {
  t->Emit(PrimId::kMatMul, EmitMatMul);
  t->Emit(PrimId::kEinsum, EmitEinsum);
  t->Emit(PrimId::kDet, EmitDet);
  t->Emit(PrimId::kSoftmax, EmitSoftmax);
  t->Emit(PrimId::kLogSoftmax, EmitSoftmax);
  t->Emit(PrimId::kSoftmaxCrossEntropy, EmitSoftmaxCrossEntropy);
  t->Emit(PrimId::kSparseSoftmaxCrossEntropy, EmitSparseSoftmaxCrossEntropy);
  t->Emit(PrimId::kLayerNorm, EmitLayerNorm);
  t->Emit(PrimId::kBatchNorm, EmitBatchNorm);
  t->EmitValue(PrimId::kBatchNormGrad, EmitBatchOrLayerNormGrad);
  t->EmitValue(PrimId::kLayerNormGrad, EmitBatchOrLayerNormGrad);
  t->Emit(PrimId::kConv2d, EmitConv);
  t->Emit(PrimId::kConv2dBackpropInput, EmitConv);
  t->Emit(PrimId::kConv2dBackpropFilter, EmitConvFilterGrad);
  t->Emit(PrimId::kMaxPool2d, EmitPool);
  t->Emit(PrimId::kAvgPool2d, EmitPool);
  t->Emit(PrimId::kMaxPool2dGrad, EmitPoolGrad);
  t->Emit(PrimId::kAvgPool2dGrad, EmitPoolGrad);
}

}  // namespace onnx_export_internal
}  // namespace kgrad
