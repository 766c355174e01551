// Convolution and pooling primitives (NCHW activations, OIHW filters).
//
// Every op here slides a 2-d window over the two trailing axes. Along one axis
// of length `in`, with padding `lo`/`hi`, stride `s`, window `k` and dilation
// `d`, the window spans eff = d*(k-1)+1 cells and there are
//   out = (in + lo + hi - eff) / s + 1        (floor)
// windows; window i starts at i*s - lo. A padded input shorter than eff is an
// error (no zero-sized outputs from windows that do not fit).
#include "ops/conv.h"

#include <array>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/bprop_context.h"
#include "ops/op_util.h"

namespace kgrad {
namespace ops {
namespace {

constexpr const char* kAxisNames[2] = {"height", "width"};
// Attribute values beyond this are nonsense and could overflow int64 arithmetic.
constexpr int64_t kMaxAttrValue = kMaxElements;

bool Known(int64_t d) { return d != kUnknownDim; }

// ----- Attributes -----------------------------------------------------------------
// The window geometry shared by all ops of the family; `kernel` is set for pooling
// and filled from the filter's shape for convolution.
struct Window {
  std::array<int64_t, 2> kernel{kUnknownDim, kUnknownDim};
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> dilation{1, 1};
  std::array<int64_t, 2> pad_lo{0, 0};  // top, left
  std::array<int64_t, 2> pad_hi{0, 0};  // bottom, right
  int64_t groups = 1;
};

absl::Status BadAttr(const std::string& name, const std::vector<int64_t>& v,
                     absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' must be ", expected,
                                                 ", got [", absl::StrJoin(v, ", "), "]"));
}

// Two values, each in [min, kMaxAttrValue].
absl::StatusOr<std::array<int64_t, 2>> PairAttr(const Primitive& p, const std::string& name,
                                                int64_t min) {
  const std::vector<int64_t>& v = p.GetInts(name);
  std::string expected = absl::StrCat("2 values [h, w], each >= ", min);
  if (v.size() != 2) return BadAttr(name, v, expected);
  for (int64_t x : v) {
    if (x < min || x > kMaxAttrValue) return BadAttr(name, v, expected);
  }
  return std::array<int64_t, 2>{v[0], v[1]};
}

// padding: [pad_h, pad_w] (symmetric) or [top, bottom, left, right]; each >= 0.
absl::Status ParsePadding(const Primitive& p, Window* w) {
  const std::vector<int64_t>& v = p.GetInts("padding");
  const char* expected = "[pad_h, pad_w] or [top, bottom, left, right], each >= 0";
  if (v.size() != 2 && v.size() != 4) return BadAttr("padding", v, expected);
  for (int64_t x : v) {
    if (x < 0 || x > kMaxAttrValue) return BadAttr("padding", v, expected);
  }
  if (v.size() == 2) {
    w->pad_lo = w->pad_hi = {v[0], v[1]};
  } else {
    w->pad_lo = {v[0], v[2]};
    w->pad_hi = {v[1], v[3]};
  }
  return absl::OkStatus();
}

absl::StatusOr<Window> ConvAttrs(const Primitive& p) {
  Window w;
  KGRAD_ASSIGN_OR_RETURN(w.stride, PairAttr(p, "stride", 1));
  KGRAD_ASSIGN_OR_RETURN(w.dilation, PairAttr(p, "dilation", 1));
  KGRAD_RETURN_IF_ERROR(ParsePadding(p, &w));
  w.groups = p.GetInt("groups");
  if (w.groups < 1 || w.groups > kMaxAttrValue) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute 'groups' must be >= 1, got ", w.groups));
  }
  return w;
}

// stride = [] means "equal to the kernel" (non-overlapping windows).
absl::StatusOr<Window> PoolAttrs(const Primitive& p) {
  Window w;
  KGRAD_ASSIGN_OR_RETURN(w.kernel, PairAttr(p, "kernel", 1));
  if (p.GetInts("stride").empty()) {
    w.stride = w.kernel;
  } else {
    KGRAD_ASSIGN_OR_RETURN(w.stride, PairAttr(p, "stride", 1));
  }
  KGRAD_RETURN_IF_ERROR(ParsePadding(p, &w));
  return w;
}

// ----- Window arithmetic ---------------------------------------------------------------
// The number of windows along `axis` for an input of length `in` (unknown stays
// unknown). Pooling additionally rejects windows that lie entirely in the padding
// (nothing to take the max or mean of).
absl::StatusOr<int64_t> WindowCount(const Window& w, int axis, int64_t in, bool pool) {
  const char* name = kAxisNames[axis];
  int64_t k = w.kernel[axis], d = w.dilation[axis], s = w.stride[axis];
  int64_t lo = w.pad_lo[axis], hi = w.pad_hi[axis];
  if (pool && lo >= k) {
    return absl::InvalidArgumentError(absl::StrCat("the first pooling window along the ", name,
                                                   " lies entirely in the padding (padding ", lo,
                                                   " >= kernel ", k, ")"));
  }
  if (!Known(in) || !Known(k)) return kUnknownDim;
  if (k > 1 && d > kMaxAttrValue / (k - 1)) {
    return absl::InvalidArgumentError(absl::StrCat("the dilated kernel ", name, " (kernel ", k,
                                                   ", dilation ", d, ") is too large"));
  }
  int64_t eff = d * (k - 1) + 1;
  int64_t padded = in + lo + hi;
  if (padded < eff) {
    return absl::InvalidArgumentError(
        absl::StrCat("the padded input ", name, " ", padded, " (", in, " + ", lo, " + ", hi,
                     ") is smaller than the ", d > 1 ? "dilated " : "", "kernel ", name, " ", eff));
  }
  int64_t count = (padded - eff) / s + 1;
  int64_t last_start = (count - 1) * s - lo;
  if (pool && last_start >= in) {
    return absl::InvalidArgumentError(
        absl::StrCat("the last pooling window along the ", name, " starts at ", last_start,
                     ", past the input ", name, " ", in, ": it lies entirely in the padding"));
  }
  return count;
}

// Input `i`: an f32/f64 tensor of rank 4 (`what` names it in errors).
absl::StatusOr<const AbstractTensor*> Nchw(const InferCall& c, int i, const char* what) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, FloatTensorArg(c, i));
  if (t->rank() != 4) return ArgError(c, i, absl::StrCat("a rank-4 ", what, " tensor"));
  return t;
}

// The inputs of `specs` (index, what it is): rank-4 f32/f64 tensors of one dtype.
absl::StatusOr<std::vector<const AbstractTensor*>> Args(
    const InferCall& c, std::initializer_list<std::pair<int, const char*>> specs) {
  std::vector<const AbstractTensor*> out;
  for (const auto& [i, what] : specs) {
    KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, Nchw(c, i, what));
    if (!out.empty() && t->dtype() != out[0]->dtype()) {
      return ArgError(c, i,
                      absl::StrCat("a tensor of dtype ", DTypeName(out[0]->dtype()), " like input ",
                                   specs.begin()->first));
    }
    out.push_back(t);
  }
  return out;
}

// Merges `got` (input `i`) into the `expected` shape: error when a dim is known
// on both sides and differs; otherwise the known one wins.
absl::StatusOr<Shape> MatchShape(const InferCall& c, int i, const Shape& got, const Shape& expected,
                                 absl::string_view what) {
  Shape out = expected;
  for (size_t k = 0; k < got.size(); ++k) {
    if (Known(got[k]) && Known(expected[k]) && got[k] != expected[k]) {
      return ArgError(c, i, absl::StrCat("shaped ", ShapeToString(expected), " (", what, ")"));
    }
    if (!Known(out[k])) out[k] = got[k];
  }
  return out;
}

// ----- Convolution -------------------------------------------------------------------------
// Checks x [N,C,H,W] (input xi) against w [O,C/groups,KH,KW] (input wi) and
// returns y's shape [N,O,OH,OW].
absl::StatusOr<Shape> ConvOutput(const InferCall& c, int xi, const Shape& x, int wi, const Shape& w,
                                 Window win) {
  int64_t g = win.groups;
  if (Known(x[1]) && x[1] % g != 0) {
    return ArgError(c, xi,
                    absl::StrCat("a tensor whose channel count (dim 1) is divisible by "
                                 "groups=",
                                 g));
  }
  if (Known(w[0]) && w[0] % g != 0) {
    return ArgError(c, wi,
                    absl::StrCat("a filter whose output channel count (dim 0) is "
                                 "divisible by groups=",
                                 g));
  }
  for (int a = 0; a < 2; ++a) {
    if (Known(w[2 + a]) && w[2 + a] < 1) {
      return ArgError(c, wi, absl::StrCat("a filter with a kernel ", kAxisNames[a], " >= 1"));
    }
  }
  if (Known(x[1]) && Known(w[1]) && w[1] != x[1] / g) {
    return ArgError(
        c, wi,
        absl::StrCat("a filter with C/groups = ", x[1] / g, " input channels (dim 1) for input ",
                     xi, " of ", x[1], " channels and groups=", g));
  }
  Shape y = {x[0], w[0], kUnknownDim, kUnknownDim};
  for (int a = 0; a < 2; ++a) {
    win.kernel[a] = w[2 + a];
    KGRAD_ASSIGN_OR_RETURN(y[2 + a], WindowCount(win, a, x[2 + a], /*pool=*/false));
  }
  return y;
}

// conv2d(x [N,C,H,W], w [O,C/groups,KH,KW]) -> y [N,O,OH,OW]:
// y[n,o,i,j] = sum_{c,p,q} x[n, g*C/groups + c, i*sh - top + p*dh, j*sw - left + q*dw]
//                          * w[o,c,p,q],  g = o / (O/groups); out-of-range x reads 0.
absl::StatusOr<AbstractPtr> InferConv2d(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(Window win, ConvAttrs(c.prim));
  KGRAD_ASSIGN_OR_RETURN(auto t, Args(c, {{0, "NCHW input"}, {1, "OIHW filter"}}));
  KGRAD_ASSIGN_OR_RETURN(Shape y, ConvOutput(c, 0, t[0]->shape(), 1, t[1]->shape(), win));
  return MakeAbstractTensor(t[0]->dtype(), y);
}

// conv2d_backprop_input(dy, w, x_ref) -> dx shaped like x_ref: the adjoint of
// conv2d in x, dx[n,c,h,w] = sum over (o,i,j,p,q) hitting (h,w) of dy[n,o,i,j]*w[o,c',p,q].
absl::StatusOr<AbstractPtr> InferConv2dBackpropInput(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(Window win, ConvAttrs(c.prim));
  KGRAD_ASSIGN_OR_RETURN(
      auto t, Args(c, {{0, "NCHW gradient"}, {1, "OIHW filter"}, {2, "NCHW input-shape"}}));
  const Shape& w = t[1]->shape();
  Shape x = t[2]->shape();
  KGRAD_ASSIGN_OR_RETURN(Shape y, ConvOutput(c, 2, x, 1, w, win));
  KGRAD_RETURN_IF_ERROR(
      MatchShape(c, 0, t[0]->shape(), y, "the conv2d output of inputs 2 and 1").status());
  // Batch and channels may be known from dy and w even where x_ref leaves them open.
  if (!Known(x[0])) x[0] = t[0]->shape()[0];
  if (!Known(x[1]) && Known(w[1]) && w[1] <= kMaxElements / win.groups) {
    x[1] = w[1] * win.groups;
  }
  return MakeAbstractTensor(t[0]->dtype(), x);
}

// conv2d_backprop_filter(x, dy, w_ref) -> dw shaped like w_ref: the adjoint of
// conv2d in w, dw[o,c,p,q] = sum_{n,i,j} dy[n,o,i,j] * x[n, g*C/groups + c, ...].
absl::StatusOr<AbstractPtr> InferConv2dBackpropFilter(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(Window win, ConvAttrs(c.prim));
  KGRAD_ASSIGN_OR_RETURN(
      auto t, Args(c, {{0, "NCHW input"}, {1, "NCHW gradient"}, {2, "OIHW filter-shape"}}));
  const Shape& x = t[0]->shape();
  Shape w = t[2]->shape();
  KGRAD_ASSIGN_OR_RETURN(Shape y, ConvOutput(c, 0, x, 2, w, win));
  KGRAD_RETURN_IF_ERROR(
      MatchShape(c, 1, t[1]->shape(), y, "the conv2d output of inputs 0 and 2").status());
  if (!Known(w[0])) w[0] = t[1]->shape()[1];
  if (!Known(w[1]) && Known(x[1])) w[1] = x[1] / win.groups;
  return MakeAbstractTensor(t[0]->dtype(), w);
}

// ----- Pooling ---------------------------------------------------------------------------------
absl::StatusOr<Shape> PoolOutput(const Window& win, const Shape& x) {
  Shape y = {x[0], x[1], kUnknownDim, kUnknownDim};
  for (int a = 0; a < 2; ++a) {
    KGRAD_ASSIGN_OR_RETURN(y[2 + a], WindowCount(win, a, x[2 + a], /*pool=*/true));
  }
  return y;
}

// A pooling op whose output is pooled-shaped: max_pool2d(x), avg_pool2d(x), and
// max_pool2d_grad_grad(x, ddx) (ddx shaped like x).
absl::StatusOr<AbstractPtr> InferPoolForward(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(Window win, PoolAttrs(c.prim));
  bool grad_grad = c.prim.id() == PrimId::kMaxPool2dGradGrad;
  KGRAD_ASSIGN_OR_RETURN(auto t, grad_grad ? Args(c, {{0, "NCHW input"}, {1, "NCHW input-grad"}})
                                           : Args(c, {{0, "NCHW input"}}));
  Shape x = t[0]->shape();
  if (grad_grad) {
    KGRAD_ASSIGN_OR_RETURN(x, MatchShape(c, 1, t[1]->shape(), x, "like input 0"));
  }
  KGRAD_ASSIGN_OR_RETURN(Shape y, PoolOutput(win, x));
  return MakeAbstractTensor(t[0]->dtype(), y);
}

// A pooling gradient shaped like the pooled input: max_pool2d_grad(x, dy) and
// avg_pool2d_grad(dy, x_ref); dy must be shaped like the pooled x.
absl::StatusOr<AbstractPtr> InferPoolBackward(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(Window win, PoolAttrs(c.prim));
  bool max = c.prim.id() == PrimId::kMaxPool2dGrad;
  int xi = max ? 0 : 1, dyi = max ? 1 : 0;
  KGRAD_ASSIGN_OR_RETURN(auto t, max ? Args(c, {{0, "NCHW input"}, {1, "NCHW gradient"}})
                                     : Args(c, {{0, "NCHW gradient"}, {1, "NCHW input-shape"}}));
  Shape x = t[xi]->shape();
  const Shape& dy = t[dyi]->shape();
  KGRAD_ASSIGN_OR_RETURN(Shape y, PoolOutput(win, x));
  KGRAD_RETURN_IF_ERROR(
      MatchShape(c, dyi, dy, y, absl::StrCat("the pooled shape of input ", xi)).status());
  for (int k = 0; k < 2; ++k) {
    if (!Known(x[k])) x[k] = dy[k];
  }
  return MakeAbstractTensor(t[0]->dtype(), x);
}

// ----- Gradient rules ------------------------------------------------------------------------
// The family is closed under differentiation: every rule emits only conv/pool ops
// of the family, with the forward application's attributes, so grad of grad works.
// dd below is Dout(). The *_ref inputs give only a shape: they get no gradient.

// `id` applied to `args` with the attributes of the differentiated application.
AnfNode* Like(BpropContext& c, PrimId id, std::vector<AnfNode*> args) {
  return c.Op(id, std::move(args), c.prim().attrs());
}

// Forward: y = conv2d(x, w) (bilinear).  Backward: dx = conv2d_backprop_input(dy, w, x),
// dw = conv2d_backprop_filter(x, dy, w).
absl::Status BpropConv2d(BpropContext& c) {
  c.SetGrad(0, Like(c, PrimId::kConv2dBackpropInput, {c.Dout(), c.I(1), c.I(0)}));
  c.SetGrad(1, Like(c, PrimId::kConv2dBackpropFilter, {c.I(0), c.Dout(), c.I(1)}));
  return absl::OkStatus();
}

// Forward: dx = conv2d_backprop_input(dy, w, x_ref) = J_x(conv2d)^T dy (bilinear in dy, w),
// so <dd, dx> = <conv2d(dd, w), dy>.  Backward: d(dy) = conv2d(dd, w),
// dw = conv2d_backprop_filter(dd, dy, w); x_ref gets nothing.
absl::Status BpropConv2dBackpropInput(BpropContext& c) {
  c.SetGrad(0, Like(c, PrimId::kConv2d, {c.Dout(), c.I(1)}));
  c.SetGrad(1, Like(c, PrimId::kConv2dBackpropFilter, {c.Dout(), c.I(0), c.I(1)}));
  return absl::OkStatus();
}

// Forward: dw = conv2d_backprop_filter(x, dy, w_ref) = J_w(conv2d)^T dy (bilinear in x, dy),
// so <dd, dw> = <conv2d(x, dd), dy>.  Backward: dx = conv2d_backprop_input(dy, dd, x),
// d(dy) = conv2d(x, dd); w_ref gets nothing.
absl::Status BpropConv2dBackpropFilter(BpropContext& c) {
  c.SetGrad(0, Like(c, PrimId::kConv2dBackpropInput, {c.I(1), c.Dout(), c.I(0)}));
  c.SetGrad(1, Like(c, PrimId::kConv2d, {c.I(0), c.Dout()}));
  return absl::OkStatus();
}

// Forward: y[i,j] = max of window (i,j) of x.  Backward: dx = max_pool2d_grad(x, dy):
// dy[i,j] goes to the window's first argmax (row-major; the kernel's tie rule), none
// to the other cells.
absl::Status BpropMaxPool2d(BpropContext& c) {
  c.SetGrad(0, Like(c, PrimId::kMaxPool2dGrad, {c.I(0), c.Dout()}));
  return absl::OkStatus();
}

// Forward: dx = max_pool2d_grad(x, dy) (linear in dy; x only picks the argmaxes, a
// piecewise-constant choice).  Backward: d(dy) = max_pool2d_grad_grad(x, dd) (dd read
// at each window's argmax); x gets nothing.
absl::Status BpropMaxPool2dGrad(BpropContext& c) {
  c.SetGrad(1, Like(c, PrimId::kMaxPool2dGradGrad, {c.I(0), c.Dout()}));
  return absl::OkStatus();
}

// Forward: y[i,j] = ddx[argmax of window (i,j) of x] (linear in ddx).
// Backward: d(ddx) = max_pool2d_grad(x, dd) (dd scattered to the argmaxes); x gets nothing.
absl::Status BpropMaxPool2dGradGrad(BpropContext& c) {
  c.SetGrad(1, Like(c, PrimId::kMaxPool2dGrad, {c.I(0), c.Dout()}));
  return absl::OkStatus();
}

// Forward: y = avg_pool2d(x) (linear).  Backward: dx = avg_pool2d_grad(dy, x).
absl::Status BpropAvgPool2d(BpropContext& c) {
  c.SetGrad(0, Like(c, PrimId::kAvgPool2dGrad, {c.Dout(), c.I(0)}));
  return absl::OkStatus();
}

// Forward: dx = avg_pool2d_grad(dy, x_ref), the adjoint of avg_pool2d (linear in dy).
// Backward: d(dy) = avg_pool2d(dd); x_ref gets nothing.
absl::Status BpropAvgPool2dGrad(BpropContext& c) {
  c.SetGrad(0, Like(c, PrimId::kAvgPool2d, {c.Dout()}));
  return absl::OkStatus();
}

PrimitiveDef WithBprop(PrimitiveDef d, BpropFn bprop) {
  d.bprop = bprop;
  return d;
}

std::vector<AttrSpec> ConvAttrSpecs() {
  return {IntsAttr("stride", {1, 1}), IntsAttr("padding", {0, 0}), IntsAttr("dilation", {1, 1}),
          IntAttr("groups", 1)};
}

std::vector<AttrSpec> MaxPoolAttrSpecs() {
  return {RequiredAttr("kernel", AttrType::kInts), IntsAttr("stride", {}),
          IntsAttr("padding", {0, 0})};
}

std::vector<AttrSpec> AvgPoolAttrSpecs() {
  std::vector<AttrSpec> a = MaxPoolAttrSpecs();
  a.push_back(BoolAttr("count_include_pad", true));
  return a;
}

PrimitiveDef Linear(PrimitiveDef d) {
  d.linear = true;
  return d;
}

}  // namespace

void RegisterConvOps(std::vector<PrimitiveDef>* defs) {
  // conv2d is bilinear in (x, w); each backprop op is bilinear in its two tensor
  // operands (the *_ref inputs give only a shape), so none is `linear`.
  // conv2d(x, w): grouped, strided, dilated cross-correlation (no kernel flip).
  defs->push_back(
      WithBprop(MakeDef(PrimId::kConv2d, 2, 2, InferConv2d, ConvAttrSpecs()), BpropConv2d));
  // conv2d_backprop_input(dy, w, x_ref): the adjoint of conv2d in x.
  defs->push_back(WithBprop(
      MakeDef(PrimId::kConv2dBackpropInput, 3, 3, InferConv2dBackpropInput, ConvAttrSpecs()),
      BpropConv2dBackpropInput));
  // conv2d_backprop_filter(x, dy, w_ref): the adjoint of conv2d in w.
  defs->push_back(WithBprop(
      MakeDef(PrimId::kConv2dBackpropFilter, 3, 3, InferConv2dBackpropFilter, ConvAttrSpecs()),
      BpropConv2dBackpropFilter));
  // max_pool2d(x): y[n,c,i,j] = max over the window of x (padding is -inf).
  defs->push_back(WithBprop(
      MakeDef(PrimId::kMaxPool2d, 1, 1, InferPoolForward, MaxPoolAttrSpecs()), BpropMaxPool2d));
  // max_pool2d_grad(x, dy): dx[argmax of window (i,j)] += dy[i,j]; first max on ties.
  // Linear in dy; x only selects positions (zero derivative almost everywhere).
  defs->push_back(WithBprop(
      Linear(MakeDef(PrimId::kMaxPool2dGrad, 2, 2, InferPoolBackward, MaxPoolAttrSpecs())),
      BpropMaxPool2dGrad));
  // max_pool2d_grad_grad(x, ddx): y[i,j] = ddx[argmax of window (i,j)]; the adjoint of
  // max_pool2d_grad in dy. Linear in ddx.
  defs->push_back(WithBprop(
      Linear(MakeDef(PrimId::kMaxPool2dGradGrad, 2, 2, InferPoolForward, MaxPoolAttrSpecs())),
      BpropMaxPool2dGradGrad));
  // avg_pool2d(x): y[i,j] = sum of the window / (KH*KW, or its non-padding cell count
  // when count_include_pad=false).
  defs->push_back(WithBprop(
      Linear(MakeDef(PrimId::kAvgPool2d, 1, 1, InferPoolForward, AvgPoolAttrSpecs())),
      BpropAvgPool2d));
  // avg_pool2d_grad(dy, x_ref): the adjoint of avg_pool2d, shaped like x_ref.
  defs->push_back(WithBprop(
      Linear(MakeDef(PrimId::kAvgPool2dGrad, 2, 2, InferPoolBackward, AvgPoolAttrSpecs())),
      BpropAvgPool2dGrad));
}

}  // namespace ops
}  // namespace kgrad
