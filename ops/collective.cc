#include "ops/collective.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "ops/bprop_context.h"
#include "ops/op_def.h"

namespace kgrad {
namespace ops {

bool IsCollective(PrimId id) {
  return id == PrimId::kAllReduce || id == PrimId::kAllGather || id == PrimId::kReduceScatter ||
         id == PrimId::kBroadcast || id == PrimId::kReduceTo;
}

absl::StatusOr<CollectiveReduce> ParseCollectiveReduce(const Primitive& p) {
  const std::string& op = p.GetString("op");
  if (op == "sum") return CollectiveReduce::kSum;
  if (op == "mean") return CollectiveReduce::kMean;
  if (op == "max") return CollectiveReduce::kMax;
  if (op == "min") return CollectiveReduce::kMin;
  return absl::InvalidArgumentError(absl::StrCat(
      "attribute 'op' of all_reduce must be sum, mean, max or min, got '", op, "'"));
}

namespace {

// The dtypes a collective accepts: the reductions need arithmetic (mean a
// floating dtype); moving collectives move any element.
absl::Status CheckCollectiveDType(const Primitive& p, TensorType x) {
  if (p.id() == PrimId::kAllGather || p.id() == PrimId::kBroadcast) {
    return CheckDType(0, x, kAllTypes | kHalfTypes);
  }
  if (p.id() == PrimId::kAllReduce) {
    KGRAD_ASSIGN_OR_RETURN(CollectiveReduce op, ParseCollectiveReduce(p));
    if (op == CollectiveReduce::kMean) return CheckDType(0, x, kFloatTypes);
  }
  return CheckDType(0, x, kNumericTypes);
}

absl::Status CheckRoot(const Primitive& p, int64_t ranks) {
  const int64_t root = p.GetInt("root");
  if (root < 0 || (ranks > 0 && root >= ranks)) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'root' of ", p.name(), " is ", root,
                                                   ", not a rank of ",
                                                   ranks > 0 ? absl::StrCat(ranks) : "the",
                                                   " communicator"));
  }
  return absl::OkStatus();
}

// all_gather / reduce_scatter: the axis dim multiplied or divided by `ranks`.
absl::StatusOr<Shape> AlongAxis(const Primitive& p, TensorType x, int64_t ranks) {
  if (x.rank() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(p.name(), " needs a tensor of rank >= 1, got ",
                                                   x.ToString()));
  }
  KGRAD_ASSIGN_OR_RETURN(int axis, AxisAttr(p, "axis", x));
  Shape out(x.shape.begin(), x.shape.end());
  const int64_t d = x.shape[axis];
  if (ranks <= 0 || d < 0) {
    out[axis] = kUnknownDim;
  } else if (p.id() == PrimId::kAllGather) {
    out[axis] = d * ranks;
  } else if (d % ranks != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reduce_scatter over ", ranks, " ranks splits axis ", axis, " of ", x.ToString(),
        " into equal blocks, but ", d, " is not a multiple of ", ranks));
  } else {
    out[axis] = d / ranks;
  }
  return out;
}

}  // namespace

absl::StatusOr<Shape> CollectiveOutShape(const Primitive& p, TensorType x, int64_t ranks) {
  KGRAD_RETURN_IF_ERROR(CheckCollectiveDType(p, x));
  switch (p.id()) {
    case PrimId::kAllGather:
    case PrimId::kReduceScatter:
      return AlongAxis(p, x, ranks);
    case PrimId::kBroadcast:
    case PrimId::kReduceTo:
      KGRAD_RETURN_IF_ERROR(CheckRoot(p, ranks));
      break;
    default:
      break;
  }
  return Shape(x.shape.begin(), x.shape.end());
}

absl::Status CheckCollectiveRanks(const Primitive& p, int64_t communicator_size) {
  const int64_t ranks = p.GetInt("ranks");
  if (ranks != 0 && ranks != communicator_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        p.name(), " was built for ", ranks, " ranks (attribute 'ranks') but runs on a communicator of ",
        communicator_size));
  }
  return absl::OkStatus();
}

namespace {

absl::StatusOr<AbstractPtr> InferCollective(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  const int64_t ranks = c.prim.GetInt("ranks");
  if (ranks < 0) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'ranks' of ", c.prim.name(),
                                                   " must be >= 0 (0: not stated), got ", ranks));
  }
  KGRAD_ASSIGN_OR_RETURN(Shape out, CollectiveOutShape(c.prim, *x, ranks));
  return MakeAbstractTensor(x->dtype(), std::move(out));
}

// ----- Gradient rules ---------------------------------------------------------------
// L = sum_r L_r(y_r); dy_r = dL_r/dy_r on rank r (see the header).

AttrMap Attrs(const Primitive& p, std::initializer_list<std::pair<const char*, AttrValue>> extra) {
  AttrMap m = {{"ranks", p.GetInt("ranks")}};
  for (const auto& [k, v] : extra) m[k] = v;
  return m;
}

// Forward: y_r = sum_s x_s (or the mean).  Backward: dx_r = sum_s dy_s (or the
// mean) = all_reduce{same op}(dy).
// Forward: y_r = max_s x_s (min alike).  Backward: dx_r = m_r * (sum_s dy_s) /
// (sum_s m_s) with m_r = [x_r == y_r]: ties share the cotangent equally.
absl::Status BpropAllReduce(BpropContext& c) {
  absl::StatusOr<CollectiveReduce> op = ParseCollectiveReduce(c.prim());
  if (!op.ok()) return c.Error(std::string(op.status().message()));
  const std::string& name = c.prim().GetString("op");
  if (*op == CollectiveReduce::kSum || *op == CollectiveReduce::kMean) {
    c.SetGrad(0, c.Op(PrimId::kAllReduce, {c.Dout()}, Attrs(c.prim(), {{"op", name}})));
    return absl::OkStatus();
  }
  KGRAD_ASSIGN_OR_RETURN(AnfNode* zero, c.ScalarLike(0.0, 0));
  KGRAD_ASSIGN_OR_RETURN(AnfNode* one, c.ScalarLike(1.0, 0));
  AnfNode* mask = c.Select(c.Op(PrimId::kEqual, {c.I(0), c.Out()}), one, zero);
  const AttrMap sum = Attrs(c.prim(), {{"op", std::string("sum")}});
  AnfNode* total = c.Op(PrimId::kAllReduce, {c.Dout()}, sum);
  AnfNode* count = c.Op(PrimId::kAllReduce, {mask}, sum);
  c.SetGrad(0, c.Mul(mask, c.Div(total, count)));
  return absl::OkStatus();
}

// Forward: y_r = concat_s x_s along axis.  Backward: dx_r = sum_s (block r of
// dy_s) = reduce_scatter{axis}(dy).
absl::Status BpropAllGather(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kReduceScatter, {c.Dout()},
                    Attrs(c.prim(), {{"axis", c.prim().GetInt("axis")}})));
  return absl::OkStatus();
}

// Forward: y_r = block r of sum_s x_s.  Backward: dx_s = concat_r dy_r =
// all_gather{axis}(dy).
absl::Status BpropReduceScatter(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kAllGather, {c.Dout()},
                    Attrs(c.prim(), {{"axis", c.prim().GetInt("axis")}})));
  return absl::OkStatus();
}

// Forward: y_r = x_root.  Backward: dx_root = sum_r dy_r, dx_s = 0 for s != root:
// reduce_to{root}(dy).
absl::Status BpropBroadcast(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kReduceTo, {c.Dout()},
                    Attrs(c.prim(), {{"root", c.prim().GetInt("root")}})));
  return absl::OkStatus();
}

// Forward: y_root = sum_s x_s, y_r = 0 elsewhere.  Backward: dx_s = dy_root for
// every s: broadcast{root}(dy).
absl::Status BpropReduceTo(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kBroadcast, {c.Dout()},
                    Attrs(c.prim(), {{"root", c.prim().GetInt("root")}})));
  return absl::OkStatus();
}

AttrSpec StringSpec(std::string name, std::string default_value) {
  return AttrSpec{std::move(name), AttrType::kString, AttrValue(std::move(default_value))};
}

}  // namespace

// Not Linear() and no zero facts: a rank whose own input is zero still receives
// the others' values, so neither "zeros in, zero out" nor jvp(f)(x; t) = f(t) on a
// symbolic-zero tangent holds rank by rank.
void RegisterCollectiveOps(std::vector<PrimitiveDef>* defs) {
  defs->push_back(OpDef(PrimId::kAllReduce, 1, 1, InferCollective,
                        {StringSpec("op", "sum"), IntAttr("ranks", 0)})
                      .Bprop(BpropAllReduce));
  defs->push_back(OpDef(PrimId::kAllGather, 1, 1, InferCollective,
                        {IntAttr("axis", 0), IntAttr("ranks", 0)})
                      .Bprop(BpropAllGather));
  defs->push_back(OpDef(PrimId::kReduceScatter, 1, 1, InferCollective,
                        {IntAttr("axis", 0), IntAttr("ranks", 0)})
                      .Bprop(BpropReduceScatter));
  defs->push_back(OpDef(PrimId::kBroadcast, 1, 1, InferCollective,
                        {IntAttr("root", 0), IntAttr("ranks", 0)})
                      .Bprop(BpropBroadcast));
  defs->push_back(OpDef(PrimId::kReduceTo, 1, 1, InferCollective,
                        {IntAttr("root", 0), IntAttr("ranks", 0)})
                      .Bprop(BpropReduceTo));
}

}  // namespace ops
}  // namespace kgrad
