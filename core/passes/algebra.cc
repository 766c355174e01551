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

// Whether the inputs whose bits are set in `mask` are zero (`zero_at(i)`): any
// of them (`all` false) or all of them.
template <typename ZeroAt>
bool ZeroInputs(uint32_t mask, bool all, const ZeroAt& zero_at) {
  if (mask == 0) return false;
  for (size_t i = 0; i < 32; ++i) {
    if ((mask & (uint32_t{1} << i)) == 0) continue;
    bool zero = zero_at(i);
    if (zero && !all) return true;
    if (!zero && all) return false;
  }
  return all;
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

// Zero propagation: f(..., 0, ...) => 0 where the op says so (a fill of the
// output's static type), plus x + 0 => x, 0 + x => x, x - 0 => x, 0 - x => -x.
AnfNode* AlgebraPass::Zeros(CNode* c) {
  PrimId id = c->primitive()->id();
  if (id == PrimId::kFill || id == PrimId::kZerosLike) return nullptr;
  // The op's own facts (ops/op_def.h: ZeroIfAny, ZeroIfAll).
  const PrimitiveDef& def = c->primitive()->def();
  if (def.zero_if_any != 0 || def.zero_if_all != 0) {
    // Inputs beyond the application's count are not zero.
    auto zero_at = [&](size_t i) { return i < c->num_args() && IsZero(In(c, i + 1)); };
    if (ZeroInputs(def.zero_if_any, false, zero_at) || ZeroInputs(def.zero_if_all, true, zero_at)) {
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
