// ONNX export of the neural-network primitives: softmax, the normalisations,
// one_hot, scatter_add, and convolution and pooling with their gradients (the
// windows read through ops::ConvAttrs / PoolAttrs, so asymmetric and ceil-mode
// padding export as the kernels compute them).
#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_exporter.h"

namespace kgrad {
namespace onnx_export_internal {
namespace {

// A window's padding in ONNX's order [top, left, bottom, right].
std::vector<int64_t> OnnxPads(const ops::Window& w) {
  return {w.pad_lo[0], w.pad_lo[1], w.pad_hi[0], w.pad_hi[1]};
}

std::vector<int64_t> Pair(const std::array<int64_t, 2>& v) { return {v[0], v[1]}; }

// ConvTranspose's attributes for an output of length `want` along each spatial
// axis from an input of length `in`: output_padding adds cells at the end; when the
// padded window reaches past `want` (the end padding of a ceil-mode window), the
// end pad grows instead, since output_padding cannot be negative.
void SetTransposedExtent(NodeProto* n, ops::Window w, const Shape& in, const Shape& want) {
  std::vector<int64_t> extra;
  for (int d = 0; d < 2; ++d) {
    int64_t reach = (in[2 + d] - 1) * w.stride[d] - w.pad_lo[d] - w.pad_hi[d] +
                    w.dilation[d] * (w.kernel[d] - 1) + 1;
    int64_t e = want[2 + d] - reach;
    if (e < 0) w.pad_hi[d] -= e;
    extra.push_back(std::max<int64_t>(e, 0));
  }
  SetInts(n, "pads", OnnxPads(w));
  SetInts(n, "output_padding", extra);
}

}  // namespace

// conv2d_backprop_filter(x, dy, w_ref): per group, dw^T = conv(x^T, dy^T) with
// stride and dilation swapped (batch as the reduced channel), cut to the kernel.
absl::StatusOr<std::string> Exporter::EmitConvFilterGrad(CNode* c, const Primitive& p,
                                                         const std::vector<std::string>& a) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tx, StaticType(c, c->arg(0)));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tdy, StaticType(c, c->arg(1)));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tw, StaticType(c, c->arg(2)));
  KGRAD_ASSIGN_OR_RETURN(ops::Window win, ops::ConvAttrs(p));
  int64_t groups = win.groups;
  int64_t cin = tx->shape()[1] / groups, cout = tdy->shape()[1] / groups;
  std::vector<std::string> parts;
  for (int64_t g = 0; g < groups; ++g) {
    auto channels = [&](const std::string& t, int64_t n) {
      return Op("Slice", {t, Ints({g * n}), Ints({(g + 1) * n}), Ints({1})});
    };
    NodeProto* xt = Add("Transpose", {channels(a[0], cin)});
    SetInts(xt, "perm", {1, 0, 2, 3});
    NodeProto* dyt = Add("Transpose", {channels(a[1], cout)});
    SetInts(dyt, "perm", {1, 0, 2, 3});
    NodeProto* conv = Add("Conv", {xt->output(0), dyt->output(0)});
    SetInts(conv, "strides", Pair(win.dilation));
    SetInts(conv, "dilations", Pair(win.stride));
    SetInts(conv, "pads", OnnxPads(win));
    std::string cut = Op("Slice", {conv->output(0), Ints({0, 0}), Ints({tw->shape()[2], tw->shape()[3]}), Ints({2, 3})});
    NodeProto* back = Add("Transpose", {cut});
    SetInts(back, "perm", {1, 0, 2, 3});
    parts.push_back(back->output(0));
  }
  if (parts.size() == 1) return parts[0];
  NodeProto* cat = Add("Concat", parts);
  SetInt(cat, "axis", 0);
  return cat->output(0);
}

// max_pool2d_grad(x, dy): for each window offset (i, j) in order, the outputs whose
// first maximum sits at that offset (x's strided slice at the offset equals the
// max and no earlier offset did) send dy there, placed by a transposed depthwise
// conv with a one-hot kernel. Only ops the importer reads back (no Indices output).
absl::StatusOr<std::string> Exporter::EmitMaxPoolGrad(const std::vector<std::string>& a,
                                                      const AbstractTensor& tx, const AbstractTensor& tdy,
                                                      const ops::Window& w) {
  DType dt = tx.dtype();
  int64_t ch = tx.shape()[1];
  const std::vector<int64_t> k = Pair(w.kernel), s = Pair(w.stride);
  NodeProto* pool = Add("MaxPool", {a[0]});
  SetInts(pool, "kernel_shape", k);
  SetInts(pool, "strides", s);
  SetInts(pool, "pads", OnnxPads(w));
  std::string y = pool->output(0);
  std::string xp = a[0];
  if (w.pad_lo != std::array<int64_t, 2>{0, 0} || w.pad_hi != std::array<int64_t, 2>{0, 0}) {
    xp = Op("Pad", {a[0], Ints({0, 0, w.pad_lo[0], w.pad_lo[1], 0, 0, w.pad_hi[0], w.pad_hi[1]}),
                    Scalar(dt, -std::numeric_limits<double>::infinity())});
  }
  int64_t ho = tdy.shape()[2], wo = tdy.shape()[3];
  std::string taken, dx;
  for (int64_t i = 0; i < k[0]; ++i) {
    for (int64_t j = 0; j < k[1]; ++j) {
      std::string win = Op("Slice", {xp, Ints({i, j}), Ints({i + s[0] * (ho - 1) + 1, j + s[1] * (wo - 1) + 1}),
                                     Ints({2, 3}), Ints({s[0], s[1]})});
      std::string hit = Op("Equal", {win, y});
      std::string first = taken.empty() ? hit : Op("And", {hit, Op("Not", {taken})});
      taken = taken.empty() ? hit : Op("Or", {taken, hit});
      NodeProto* cast = Add("Cast", {first});
      SetInt(cast, "to", DTypeToOnnx(dt));
      std::string routed = Op("Mul", {cast->output(0), a[1]});
      Tensor onehot = Tensor::Zeros(dt, {ch, 1, k[0], k[1]}).value();
      for (int64_t q = 0; q < ch; ++q) {
        int64_t at = (q * k[0] + i) * k[1] + j;
        if (dt == DType::kFloat32) onehot.mutable_data<float>()[at] = 1;
        else onehot.mutable_data<double>()[at] = 1;
      }
      NodeProto* ct = Add("ConvTranspose", {routed, Const(onehot)});
      SetInts(ct, "kernel_shape", k);
      SetInts(ct, "strides", s);
      SetInt(ct, "group", ch);
      SetTransposedExtent(ct, w, tdy.shape(), tx.shape());
      dx = dx.empty() ? ct->output(0) : Op("Add", {dx, ct->output(0)});
    }
  }
  return dx;
}

// avg_pool2d_grad(dy, x_ref): a transposed depthwise conv with 1/(kh*kw).
absl::StatusOr<std::string> Exporter::EmitPoolGrad(CNode* c, const Primitive& p,
                                                   const std::vector<std::string>& a) {
  bool max = p.id() == PrimId::kMaxPool2dGrad;
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tx, StaticType(c, c->arg(max ? 0 : 1)));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tdy, StaticType(c, c->arg(max ? 1 : 0)));
  KGRAD_ASSIGN_OR_RETURN(ops::Window win, ops::PoolAttrs(p));
  if (max) return EmitMaxPoolGrad(a, *tx, *tdy, win);
  bool padded = win.pad_lo != std::array<int64_t, 2>{0, 0} || win.pad_hi != std::array<int64_t, 2>{0, 0};
  if (!p.GetBool("count_include_pad") && padded) {
    return Error(c, "count_include_pad=false with padding has no standard-op form");
  }
  int64_t ch = tx->shape()[1];
  Tensor w = Tensor::Full(tx->dtype(), {ch, 1, win.kernel[0], win.kernel[1]},
                          1.0 / static_cast<double>(win.kernel[0] * win.kernel[1]))
                 .value();
  NodeProto* ct = Add("ConvTranspose", {a[0], Const(w)});
  SetInts(ct, "kernel_shape", Pair(win.kernel));
  SetInts(ct, "strides", Pair(win.stride));
  SetInt(ct, "group", ch);
  SetTransposedExtent(ct, win, tdy->shape(), tx->shape());
  return ct->output(0);
}

// batch_norm(x, scale, bias){epsilon, axis} in training form: the batch moments over
// every dim but `axis` (ReduceMean), then (x - mean) / sqrt(var + eps) * scale +
// bias with scale and bias unsqueezed to broadcast along `axis`.
absl::StatusOr<std::string> Exporter::EmitBatchNorm(CNode* c, const Primitive& p,
                                                    const std::vector<std::string>& a) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, StaticType(c, c->arg(0)));
  const int axis = static_cast<int>(p.GetInt("axis")) + (p.GetInt("axis") < 0 ? t->rank() : 0);
  std::vector<int64_t> others;
  for (int d = 0; d < t->rank(); ++d) {
    if (d != axis) others.push_back(d);
  }
  auto mean = [&](const std::string& v) {
    NodeProto* n = Add("ReduceMean", {v});
    SetInts(n, "axes", others);
    SetInt(n, "keepdims", 1);
    return n->output(0);
  };
  std::string centered = Op("Sub", {a[0], mean(a[0])});
  std::string var = mean(Op("Mul", {centered, centered}));
  std::string std = Op("Sqrt", {Op("Add", {var, Scalar(t->dtype(), p.GetFloat("epsilon"))})});
  std::string scale = Op("Unsqueeze", {a[1], Ints(others)});
  std::string bias = Op("Unsqueeze", {a[2], Ints(others)});
  return Op("Add", {Op("Mul", {Op("Div", {centered, std}), scale}), bias});
}

// scatter_add(data, indices, updates){axis} (gather's adjoint): ScatterND with
// reduction=add (opset 16) on the indices as [..., 1] tuples, with `axis` moved to
// the front of data, and the indices' dims to the front of updates, by Transposes.
absl::StatusOr<std::string> Exporter::EmitScatterAdd(CNode* c, const Primitive& p,
                                                     const std::vector<std::string>& a) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* td, StaticType(c, c->arg(0)));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ti, StaticType(c, c->arg(1)));
  const int r = td->rank(), k = ti->rank();
  const int axis = static_cast<int>(p.GetInt("axis")) + (p.GetInt("axis") < 0 ? r : 0);
  std::string data = a[0], updates = a[2];
  std::string idx = a[1];
  if (ti->dtype() != DType::kInt64) {
    NodeProto* cast = Add("Cast", {idx});
    SetInt(cast, "to", DTypeToOnnx(DType::kInt64));
    idx = cast->output(0);
  }
  idx = Op("Unsqueeze", {idx, Ints({-1})});
  std::vector<int64_t> to_front = {axis}, back(r), u_perm;
  for (int d = 0; d < r; ++d) {
    if (d != axis) to_front.push_back(d);
  }
  for (int d = 0; d < r; ++d) back[to_front[d]] = d;
  for (int d = axis; d < axis + k; ++d) u_perm.push_back(d);
  for (int d = 0; d < axis; ++d) u_perm.push_back(d);
  for (int d = axis + k; d < r - 1 + k; ++d) u_perm.push_back(d);
  if (axis != 0) {
    NodeProto* t = Add("Transpose", {data});
    SetInts(t, "perm", to_front);
    data = t->output(0);
    NodeProto* u = Add("Transpose", {updates});
    SetInts(u, "perm", u_perm);
    updates = u->output(0);
  }
  NodeProto* n = Add("ScatterND", {data, idx, updates});
  SetString(n, "reduction", "add");
  if (axis == 0) return n->output(0);
  NodeProto* t = Add("Transpose", {n->output(0)});
  SetInts(t, "perm", back);
  return t->output(0);
}

absl::StatusOr<std::string> Exporter::EmitNnPrim(CNode* c, const Primitive& p,
                                                 const std::vector<std::string>& a) {
  switch (p.id()) {
    case PrimId::kSoftmax:
    case PrimId::kLogSoftmax: {
      NodeProto* n = Add(p.id() == PrimId::kSoftmax ? "Softmax" : "LogSoftmax", a);
      SetInt(n, "axis", p.GetInt("axis"));
      return n->output(0);
    }
    case PrimId::kLayerNorm: {
      NodeProto* n = Add("LayerNormalization", a);
      SetInt(n, "axis", p.GetInt("begin_norm_axis"));
      SetFloat(n, "epsilon", p.GetFloat("epsilon"));
      return n->output(0);
    }
    case PrimId::kBatchNorm: return EmitBatchNorm(c, p, a);
    case PrimId::kScatterAdd: return EmitScatterAdd(c, p, a);
    case PrimId::kOneHot: {
      // OneHot(indices, depth, [off, on]) in the output dtype.
      Tensor values = Tensor::Full(p.GetDType("dtype"), {2}, p.GetFloat("off_value")).value();
      Tensor on = Tensor::Full(p.GetDType("dtype"), {1}, p.GetFloat("on_value")).value();
      std::memcpy(static_cast<char*>(values.raw_data()) + DTypeSize(values.dtype()), on.raw_data(),
                  DTypeSize(values.dtype()));
      NodeProto* n = Add("OneHot", {a[0], Ints({p.GetInt("depth")}), Const(values)});
      SetInt(n, "axis", p.GetInt("axis"));
      return n->output(0);
    }
    case PrimId::kConv2d:
    case PrimId::kConv2dBackpropInput: {
      KGRAD_ASSIGN_OR_RETURN(ops::Window win, ops::ConvAttrs(p));
      bool fwd = p.id() == PrimId::kConv2d;
      NodeProto* n = Add(fwd ? "Conv" : "ConvTranspose", {a[0], a[1]});
      SetInts(n, "strides", Pair(win.stride));
      SetInts(n, "dilations", Pair(win.dilation));
      SetInt(n, "group", win.groups);
      if (fwd) {
        SetInts(n, "pads", OnnxPads(win));
        return n->output(0);
      }
      // The rows and columns of x_ref that no output reached.
      KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tdy, StaticType(c, c->arg(0)));
      KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tw, StaticType(c, c->arg(1)));
      KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tx, StaticType(c, c->arg(2)));
      win.kernel = {tw->shape()[2], tw->shape()[3]};
      SetTransposedExtent(n, win, tdy->shape(), tx->shape());
      return n->output(0);
    }
    case PrimId::kConv2dBackpropFilter: return EmitConvFilterGrad(c, p, a);
    case PrimId::kMaxPool2d:
    case PrimId::kAvgPool2d: {
      KGRAD_ASSIGN_OR_RETURN(ops::Window win, ops::PoolAttrs(p));
      NodeProto* n = Add(p.id() == PrimId::kMaxPool2d ? "MaxPool" : "AveragePool", a);
      SetInts(n, "kernel_shape", Pair(win.kernel));
      SetInts(n, "strides", Pair(win.stride));
      SetInts(n, "pads", OnnxPads(win));
      if (p.id() == PrimId::kAvgPool2d) SetInt(n, "count_include_pad", p.GetBool("count_include_pad"));
      return n->output(0);
    }
    case PrimId::kMaxPool2dGrad:
    case PrimId::kAvgPool2dGrad: return EmitPoolGrad(c, p, a);
    default: break;
  }
  return EmitDynamicPrim(c, p, a);
}

}  // namespace onnx_export_internal
}  // namespace kgrad
