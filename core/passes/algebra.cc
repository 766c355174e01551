#include "core/passes/algebra.h"

#include <numeric>

namespace kgrad {

using passes::IsOne;
using passes::IsZero;
using passes::KnownTensor;
using passes::Match;
using passes::NewOp;
using passes::SameTensorType;

namespace {

// Which inputs, being zero, make the output zero: any one of `any`, or all of
// `all` (argument positions from 0).
struct ZeroRule {
  std::vector<int> any;
  std::vector<int> all;
};

const ZeroRule* ZeroRuleOf(PrimId id) {
  static const auto* const rules = new absl::flat_hash_map<PrimId, ZeroRule>{
      // Products: 0 * y = x * 0 = 0 (and the bilinear contractions).
      {PrimId::kMul, {{0, 1}, {}}},
      {PrimId::kMatMul, {{0, 1}, {}}},
      {PrimId::kConv2d, {{0, 1}, {}}},
      {PrimId::kConv2dBackpropInput, {{0, 1}, {}}},
      {PrimId::kConv2dBackpropFilter, {{0, 1}, {}}},
      // Linear in the first input: f(0) = 0.
      {PrimId::kNeg, {{0}, {}}},
      {PrimId::kDiv, {{0}, {}}},
      {PrimId::kReshape, {{0}, {}}},
      {PrimId::kReshapeLike, {{0}, {}}},
      {PrimId::kTranspose, {{0}, {}}},
      {PrimId::kBroadcastTo, {{0}, {}}},
      {PrimId::kBroadcastToLike, {{0}, {}}},
      {PrimId::kSumTo, {{0}, {}}},
      {PrimId::kSumToLike, {{0}, {}}},
      {PrimId::kExpandDims, {{0}, {}}},
      {PrimId::kSqueeze, {{0}, {}}},
      {PrimId::kSlice, {{0}, {}}},
      {PrimId::kSliceGrad, {{0}, {}}},
      {PrimId::kReduceSum, {{0}, {}}},
      {PrimId::kReduceMean, {{0}, {}}},
      {PrimId::kCast, {{0}, {}}},
      {PrimId::kGather, {{0}, {}}},
      {PrimId::kDropout, {{0}, {}}},
      {PrimId::kAvgPool2d, {{0}, {}}},
      {PrimId::kAvgPool2dGrad, {{0}, {}}},
      {PrimId::kMaxPool2dGrad, {{1}, {}}},
      {PrimId::kMaxPool2dGradGrad, {{1}, {}}},
      // Sums: 0 + 0 = 0.
      {PrimId::kAdd, {{}, {0, 1}}},
      {PrimId::kSub, {{}, {0, 1}}},
      {PrimId::kHyperAdd, {{}, {0, 1}}},
      {PrimId::kSelect, {{}, {1, 2}}},
      {PrimId::kScatterAdd, {{}, {0, 2}}},
  };
  auto it = rules->find(id);
  return it == rules->end() ? nullptr : &it->second;
}

std::vector<int64_t> ShapeOf(const AbstractTensor* t) {
  return std::vector<int64_t>(t->shape().begin(), t->shape().end());
}

}  // namespace

AnfNode* AlgebraPass::Rewrite(CNode* c) {
  if (c->primitive() == nullptr) return nullptr;
  if (AnfNode* r = Zeros(c)) return r;
  if (AnfNode* r = Identity(c)) return r;
  if (AnfNode* r = Scalars(c)) return r;
  return MakeStatic(c);
}

// Scalars (loop counters, scalar programs):
//   zeros_like(s) => 0, ones_like(s) => 1 (of s's dtype);  hyper_add(a, b) => a + b;
//   a * 1 => a;  a * 0 => 0;  a + 0 => a;  a - 0 => a
AnfNode* AlgebraPass::Scalars(CNode* c) {
  PrimId id = c->primitive()->id();
  FuncGraph* g = c->graph();
  const AbstractScalar* out = AsScalar(c->abstract());
  if (out == nullptr) return nullptr;
  auto same = [&](AnfNode* n) {
    const AbstractScalar* s = AsScalar(n->abstract());
    return s != nullptr && s->dtype() == out->dtype();
  };
  switch (id) {
    case PrimId::kZerosLike:
    case PrimId::kOnesLike:
      return g->NewValueNode(Value(Scalar::FromDouble(out->dtype(), id == PrimId::kOnesLike ? 1.0 : 0.0)));
    case PrimId::kHyperAdd:
      if (AsScalar(In(c, 1)->abstract()) && AsScalar(In(c, 2)->abstract())) {
        return NewOp(g, PrimId::kScalarAdd, {In(c, 1), In(c, 2)});
      }
      return nullptr;
    case PrimId::kScalarMul:
      if (IsOne(In(c, 2)) && same(In(c, 1))) return In(c, 1);
      if (IsOne(In(c, 1)) && same(In(c, 2))) return In(c, 2);
      if (IsZero(In(c, 1)) || IsZero(In(c, 2))) return g->NewValueNode(Value(Scalar::FromDouble(out->dtype(), 0.0)));
      return nullptr;
    case PrimId::kScalarAdd:
      if (IsZero(In(c, 2)) && same(In(c, 1))) return In(c, 1);
      if (IsZero(In(c, 1)) && same(In(c, 2))) return In(c, 2);
      return nullptr;
    case PrimId::kScalarSub:
      if (IsZero(In(c, 2)) && same(In(c, 1))) return In(c, 1);
      return nullptr;
    default:
      return nullptr;
  }
}

// Zero propagation: f(..., 0, ...) => 0 for the rules above (a fill of the
// output's static type), plus x + 0 => x, 0 + x => x, x - 0 => x, 0 - x => -x.
AnfNode* AlgebraPass::Zeros(CNode* c) {
  PrimId id = c->primitive()->id();
  if (id == PrimId::kFill || id == PrimId::kZerosLike) return nullptr;
  if (const ZeroRule* rule = ZeroRuleOf(id)) {
    bool zero = false;
    for (int i : rule->any) zero |= static_cast<size_t>(i) < c->num_args() && IsZero(In(c, i + 1));
    if (!rule->all.empty()) {
      bool all = true;
      for (int i : rule->all) all &= static_cast<size_t>(i) < c->num_args() && IsZero(In(c, i + 1));
      zero |= all;
    }
    if (zero) {
      if (AnfNode* z = passes::ZerosOf(c->graph(), c)) return z;
    }
  }
  if (id == PrimId::kAdd || id == PrimId::kHyperAdd) {
    if (IsZero(In(c, 2)) && SameTensorType(In(c, 1), c)) return In(c, 1);
    if (IsZero(In(c, 1)) && SameTensorType(In(c, 2), c)) return In(c, 2);
  }
  if (id == PrimId::kSub) {
    if (IsZero(In(c, 2)) && SameTensorType(In(c, 1), c)) return In(c, 1);
    if (IsZero(In(c, 1)) && SameTensorType(In(c, 2), c)) return NewOp(c->graph(), PrimId::kNeg, {In(c, 2)});
  }
  return nullptr;
}

AnfNode* AlgebraPass::Identity(CNode* c) {
  PrimId id = c->primitive()->id();
  switch (id) {
    // x * 1 => x;  1 * x => x;  x / 1 => x   (same static type as the result)
    case PrimId::kMul:
      if (IsOne(In(c, 2)) && SameTensorType(In(c, 1), c)) return In(c, 1);
      if (IsOne(In(c, 1)) && SameTensorType(In(c, 2), c)) return In(c, 2);
      return nullptr;
    case PrimId::kDiv:
      return IsOne(In(c, 2)) && SameTensorType(In(c, 1), c) ? In(c, 1) : nullptr;
    // -(-x) => x
    case PrimId::kNeg:
      if (CNode* inner = Match(In(c, 1), PrimId::kNeg)) return In(inner, 1);
      return nullptr;
    // reshape / broadcast / sum_to / cast / transpose to the type x already has => x
    case PrimId::kReshape:
    case PrimId::kReshapeLike:
    case PrimId::kBroadcastTo:
    case PrimId::kBroadcastToLike:
    case PrimId::kSumTo:
    case PrimId::kSumToLike:
    case PrimId::kCast:
    case PrimId::kExpandDims:
    case PrimId::kSqueeze:
      return SameTensorType(In(c, 1), c) ? In(c, 1) : nullptr;
    case PrimId::kTranspose: {
      const std::vector<int64_t>& perm = c->primitive()->GetInts("perm");
      std::vector<int64_t> iota(perm.size());
      std::iota(iota.begin(), iota.end(), 0);
      if (!perm.empty() && perm == iota) return In(c, 1);
      // transpose(transpose(x, p), q) => transpose(x, p[q])
      CNode* inner = Match(In(c, 1), PrimId::kTranspose);
      if (inner == nullptr || perm.empty()) return nullptr;
      const std::vector<int64_t>& p = inner->primitive()->GetInts("perm");
      if (p.size() != perm.size()) return nullptr;
      std::vector<int64_t> composed;
      for (int64_t q : perm) composed.push_back(p[q]);
      if (composed == iota) return In(inner, 1);
      return NewOp(c->graph(), PrimId::kTranspose, {In(inner, 1)}, {{"perm", composed}});
    }
    // reshape(reshape(x)) => reshape(x)
    default:
      return nullptr;
  }
}

// Dynamic forms with a statically known reference become static, which frees the
// reference tensor early:
//   sum_to_like(x, r) => sum_to(x){shape(r)}      broadcast_to_like(x, r) => broadcast_to
//   reshape_like(x, r) => reshape(x){shape(r)}   zeros_like(x) => fill(0){type(x)}
//   ones_like(x) => fill(1){type(x)}             hyper_add(a, b) on tensors => add(a, b)
AnfNode* AlgebraPass::MakeStatic(CNode* c) {
  PrimId id = c->primitive()->id();
  FuncGraph* g = c->graph();
  auto shape_of_ref = [&](size_t i) -> const AbstractTensor* { return KnownTensor(In(c, i)); };
  switch (id) {
    // sum_to(x){[]} => reduce_sum(x): the same number, in the usual form
    case PrimId::kSumTo:
      if (c->primitive()->GetInts("shape").empty()) return NewOp(g, PrimId::kReduceSum, {In(c, 1)});
      return nullptr;
    case PrimId::kSumToLike:
      if (const AbstractTensor* r = shape_of_ref(2)) return NewOp(g, PrimId::kSumTo, {In(c, 1)}, {{"shape", ShapeOf(r)}});
      return nullptr;
    case PrimId::kBroadcastToLike:
      if (const AbstractTensor* r = shape_of_ref(2)) return NewOp(g, PrimId::kBroadcastTo, {In(c, 1)}, {{"shape", ShapeOf(r)}});
      return nullptr;
    case PrimId::kReshapeLike:
      if (const AbstractTensor* r = shape_of_ref(2)) return NewOp(g, PrimId::kReshape, {In(c, 1)}, {{"shape", ShapeOf(r)}});
      return nullptr;
    case PrimId::kZerosLike:
    case PrimId::kOnesLike:
      if (const AbstractTensor* r = shape_of_ref(1)) {
        return NewOp(g, PrimId::kFill, {},
                     {{"shape", ShapeOf(r)}, {"value", id == PrimId::kOnesLike ? 1.0 : 0.0}, {"dtype", r->dtype()}});
      }
      return nullptr;
    case PrimId::kHyperAdd:
      if (KnownTensor(In(c, 1)) != nullptr && KnownTensor(In(c, 2)) != nullptr) {
        return NewOp(g, PrimId::kAdd, {In(c, 1), In(c, 2)});
      }
      return nullptr;
    default:
      return nullptr;
  }
}

}  // namespace kgrad
