// Convolution and pooling primitives ((N, C, spatial...) activations, (O,
// C/groups, kernel...) filters).
//
// Every op here slides a window over the 1, 2 or 3 trailing axes of its inputs
// (rank 3, 4 or 5; the names say 2d for the common case); the window's
// rules (attributes, window counts, input checks) are in ops/conv_window.h,
// shared with the kernels. Inference adds what only it needs: unknown dims, and
// output dims that one input leaves open but another gives.
#include "ops/conv.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/bprop_context.h"
#include "ops/conv_window.h"
#include "ops/op_def.h"
#include "ops/op_util.h"

namespace kgrad {
namespace ops {
namespace {

bool Known(int64_t d) { return d >= 0; }

// The dtype of the inputs of `c` (see InputNames), f32/f64 tensors of rank 3, 4
// or 5 with input 0's dtype and rank; `shapes` gets their shapes.
absl::StatusOr<DType> Args(const InferCall& c, std::vector<const Shape*>* shapes) {
  absl::Span<const char* const> names = InputNames(c.prim.id());
  DType dtype = DType::kFloat32;
  for (int i = 0; i < static_cast<int>(names.size()); ++i) {
    KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, FloatTensorArg(c, i));
    if (i == 0 && !WindowRank(t->rank())) {
      return ArgError(c, i, absl::StrCat("a rank-3, 4 or 5 ", names[i], " tensor"));
    }
    if (i > 0 && t->rank() != static_cast<int>(shapes->front()->size())) {
      return ArgError(c, i, absl::StrCat("a rank-", shapes->front()->size(), " ", names[i],
                                         " tensor like input 0"));
    }
    if (i == 0) dtype = t->dtype();
    if (t->dtype() != dtype) {
      return ArgError(c, i, absl::StrCat("a tensor of dtype ", DTypeName(dtype), " like input 0"));
    }
    shapes->push_back(&t->shape());
  }
  return dtype;
}

// ----- Convolution -------------------------------------------------------------------------
// conv2d(x [N,C,H,W], w [O,C/groups,KH,KW]) -> y [N,O,OH,OW]:
// y[n,o,i,j] = sum_{c,p,q} x[n, g*C/groups + c, i*sh - top + p*dh, j*sw - left + q*dw]
//                          * w[o,c,p,q],  g = o / (O/groups); out-of-range x reads 0.
// The same over (L) and (D, H, W): one more or one fewer window axis.
absl::StatusOr<AbstractPtr> InferConv2d(const InferCall& c) {
  std::vector<const Shape*> shapes;
  KGRAD_ASSIGN_OR_RETURN(DType dtype, Args(c, &shapes));
  KGRAD_ASSIGN_OR_RETURN(ConvGeom g, ConvOpGeom(c.prim, shapes));
  return MakeAbstractTensor(dtype, g.y_shape());
}

// conv2d_backprop_input(dy, w, x_ref) -> dx shaped like x_ref: the adjoint of
// conv2d in x, dx[n,c,h,w] = sum over (o,i,j,p,q) hitting (h,w) of dy[n,o,i,j]*w[o,c',p,q].
absl::StatusOr<AbstractPtr> InferConv2dBackpropInput(const InferCall& c) {
  std::vector<const Shape*> shapes;
  KGRAD_ASSIGN_OR_RETURN(DType dtype, Args(c, &shapes));
  KGRAD_ASSIGN_OR_RETURN(ConvGeom g, ConvOpGeom(c.prim, shapes));
  // Channels may be known from w even where x_ref leaves them open (the batch
  // from dy is in g).
  Shape x = g.x_shape();
  if (!Known(x[1]) && Known(g.cg) && g.cg <= kMaxElements / g.win.groups) {
    x[1] = g.cg * g.win.groups;
  }
  return MakeAbstractTensor(dtype, x);
}

// conv2d_backprop_filter(x, dy, w_ref) -> dw shaped like w_ref: the adjoint of
// conv2d in w, dw[o,c,p,q] = sum_{n,i,j} dy[n,o,i,j] * x[n, g*C/groups + c, ...].
absl::StatusOr<AbstractPtr> InferConv2dBackpropFilter(const InferCall& c) {
  std::vector<const Shape*> shapes;
  KGRAD_ASSIGN_OR_RETURN(DType dtype, Args(c, &shapes));
  KGRAD_ASSIGN_OR_RETURN(ConvGeom g, ConvOpGeom(c.prim, shapes));
  Shape w = g.w_shape();  // C/groups known from x or w_ref
  if (!Known(w[0])) w[0] = (*shapes[1])[1];
  return MakeAbstractTensor(dtype, w);
}

// ----- Pooling ---------------------------------------------------------------------------------
// A pooling op whose output is pooled-shaped: max_pool2d(x), avg_pool2d(x), and
// max_pool2d_grad_grad(x, ddx) (ddx shaped like x).
absl::StatusOr<AbstractPtr> InferPoolForward(const InferCall& c) {
  std::vector<const Shape*> shapes;
  KGRAD_ASSIGN_OR_RETURN(DType dtype, Args(c, &shapes));
  KGRAD_ASSIGN_OR_RETURN(PoolGeom g, PoolOpGeom(c.prim, shapes));
  return MakeAbstractTensor(dtype, g.y_shape());
}

// A pooling gradient shaped like the pooled input: max_pool2d_grad(x, dy) and
// avg_pool2d_grad(dy, x_ref); dy must be shaped like the pooled x.
absl::StatusOr<AbstractPtr> InferPoolBackward(const InferCall& c) {
  std::vector<const Shape*> shapes;
  KGRAD_ASSIGN_OR_RETURN(DType dtype, Args(c, &shapes));
  KGRAD_ASSIGN_OR_RETURN(PoolGeom g, PoolOpGeom(c.prim, shapes));
  return MakeAbstractTensor(dtype, g.x_shape());  // batch and channels known from x or dy
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

std::vector<AttrSpec> ConvAttrSpecs() {
  // Empty lists: stride and dilation 1, no padding, whatever the spatial rank.
  return {IntsAttr("stride", {}), IntsAttr("padding", {}), IntsAttr("dilation", {}),
          IntAttr("groups", 1)};
}

std::vector<AttrSpec> MaxPoolAttrSpecs() {
  return {RequiredAttr("kernel", AttrType::kInts), IntsAttr("stride", {}),
          IntsAttr("padding", {})};
}

std::vector<AttrSpec> AvgPoolAttrSpecs() {
  std::vector<AttrSpec> a = MaxPoolAttrSpecs();
  a.push_back(BoolAttr("count_include_pad", true));
  return a;
}

}  // namespace

void RegisterConvOps(std::vector<PrimitiveDef>* defs) {
  // conv2d is bilinear in (x, w); each backprop op is bilinear in its two tensor
  // operands (the *_ref inputs give only a shape): zero if either is zero.
  // conv2d(x, w): grouped, strided, dilated cross-correlation (no kernel flip).
  defs->push_back(OpDef(PrimId::kConv2d, 2, 2, InferConv2d, ConvAttrSpecs())
                      .Bprop(BpropConv2d)
                      .ZeroIfAny({0, 1})
                      .Dot());
  // conv2d_backprop_input(dy, w, x_ref): the adjoint of conv2d in x.
  defs->push_back(
      OpDef(PrimId::kConv2dBackpropInput, 3, 3, InferConv2dBackpropInput, ConvAttrSpecs())
          .Bprop(BpropConv2dBackpropInput)
          .ZeroIfAny({0, 1})
          .Dot());
  // conv2d_backprop_filter(x, dy, w_ref): the adjoint of conv2d in w.
  defs->push_back(
      OpDef(PrimId::kConv2dBackpropFilter, 3, 3, InferConv2dBackpropFilter, ConvAttrSpecs())
          .Bprop(BpropConv2dBackpropFilter)
          .ZeroIfAny({0, 1})
          .Dot());
  // max_pool2d(x): y[n,c,i,j] = max over the window of x (padding is -inf).
  defs->push_back(
      OpDef(PrimId::kMaxPool2d, 1, 1, InferPoolForward, MaxPoolAttrSpecs()).Bprop(BpropMaxPool2d));
  // max_pool2d_grad(x, dy): dx[argmax of window (i,j)] += dy[i,j]; first max on ties.
  // Linear in dy; x only selects positions (zero derivative almost everywhere).
  defs->push_back(OpDef(PrimId::kMaxPool2dGrad, 2, 2, InferPoolBackward, MaxPoolAttrSpecs())
                      .Bprop(BpropMaxPool2dGrad)
                      .ZeroIfAny({1})
                      .Linear());
  // max_pool2d_grad_grad(x, ddx): y[i,j] = ddx[argmax of window (i,j)]; the adjoint of
  // max_pool2d_grad in dy. Linear in ddx.
  defs->push_back(OpDef(PrimId::kMaxPool2dGradGrad, 2, 2, InferPoolForward, MaxPoolAttrSpecs())
                      .Bprop(BpropMaxPool2dGradGrad)
                      .ZeroIfAny({1})
                      .Linear());
  // avg_pool2d(x): y[i,j] = sum of the window / (KH*KW, or its non-padding cell count
  // when count_include_pad=false).
  defs->push_back(OpDef(PrimId::kAvgPool2d, 1, 1, InferPoolForward, AvgPoolAttrSpecs())
                      .Bprop(BpropAvgPool2d)
                      .ZeroIfAny({0})
                      .Linear());
  // avg_pool2d_grad(dy, x_ref): the adjoint of avg_pool2d, shaped like x_ref.
  defs->push_back(OpDef(PrimId::kAvgPool2dGrad, 2, 2, InferPoolBackward, AvgPoolAttrSpecs())
                      .Bprop(BpropAvgPool2dGrad)
                      .ZeroIfAny({0})
                      .Linear());
}

}  // namespace ops
}  // namespace kgrad
