#include "core/passes/tuple_simplify.h"

namespace kgrad {

using passes::ConstInt;
using passes::Match;
using passes::NewOp;

AnfNode* TupleSimplifyPass::Rewrite(CNode* c) {
  const Primitive* p = c->primitive();
  if (p == nullptr) return nullptr;
  switch (p->id()) {
    case PrimId::kTupleGetItem: return GetItem(c);
    case PrimId::kTupleSetItem: return SetItem(c);
    case PrimId::kMakeTuple: return MakeTuple(c);
    case PrimId::kZerosLike:
    case PrimId::kOnesLike:
    case PrimId::kHyperAdd: return Elementwise(c);
    default: return nullptr;
  }
}

AnfNode* TupleSimplifyPass::GetItem(CNode* c) {
  std::optional<int64_t> i = ConstInt(In(c, 2));
  if (!i.has_value()) return nullptr;
  AnfNode* t = In(c, 1);
  // set(t, j, v)[i] => t[i] for i != j, down the chain
  AnfNode* start = t;
  while (CNode* st = Match(t, PrimId::kTupleSetItem)) {
    std::optional<int64_t> j = ConstInt(In(st, 2));
    if (!j.has_value() || *j < 0 || *i < 0) break;
    if (*i == *j) return In(st, 3);
    t = In(st, 1);
  }
  // (a_0, ..., a_n)[i] => a_i
  if (CNode* mt = Match(t, PrimId::kMakeTuple)) {
    int64_t n = static_cast<int64_t>(mt->num_args());
    int64_t k = *i < 0 ? *i + n : *i;
    return k >= 0 && k < n ? Resolve(mt->arg(k)) : nullptr;
  }
  if (t != start) return NewOp(c->graph(), PrimId::kTupleGetItem, {t, In(c, 2)});
  // constant[i] => the element as a constant
  if (const Value* v = ConstantOf(t); v != nullptr && v->is_tuple()) {
    int64_t n = static_cast<int64_t>(v->tuple().size());
    int64_t k = *i < 0 ? *i + n : *i;
    return k >= 0 && k < n ? c->graph()->NewValueNode(v->tuple()[k]) : nullptr;
  }
  return nullptr;
}

// set((a_0, ..., a_n), i, v) => (a_0, .., v, .., a_n)
AnfNode* TupleSimplifyPass::SetItem(CNode* c) {
  CNode* mt = Match(In(c, 1), PrimId::kMakeTuple);
  std::optional<int64_t> i = ConstInt(In(c, 2));
  if (mt == nullptr || !i.has_value() || *i < 0 || *i >= static_cast<int64_t>(mt->num_args())) {
    return nullptr;
  }
  std::vector<AnfNode*> elems;
  for (size_t k = 0; k < mt->num_args(); ++k) elems.push_back(Resolve(mt->arg(k)));
  elems[*i] = In(c, 3);
  return NewOp(c->graph(), PrimId::kMakeTuple, elems);
}

// (t[0], t[1], ..., t[n-1]) => t, when t has exactly n elements
AnfNode* TupleSimplifyPass::MakeTuple(CNode* c) {
  if (c->num_args() == 0) return nullptr;
  AnfNode* source = nullptr;
  for (size_t k = 0; k < c->num_args(); ++k) {
    CNode* g = Match(In(c, k + 1), PrimId::kTupleGetItem);
    if (g == nullptr || ConstInt(In(g, 2)) != static_cast<int64_t>(k)) return nullptr;
    AnfNode* t = In(g, 1);
    if (source != nullptr && source != t) return nullptr;
    source = t;
  }
  const AbstractTuple* type = AsTuple(source->abstract());
  if (type == nullptr || type->size() != c->num_args()) return nullptr;
  return source;
}

// zeros_like((a, b)) => (zeros_like(a), zeros_like(b)); likewise ones_like, and
// hyper_add((a, b), (c, d)) => (hyper_add(a, c), hyper_add(b, d)).
AnfNode* TupleSimplifyPass::Elementwise(CNode* c) {
  std::vector<CNode*> tuples;
  for (size_t k = 0; k < c->num_args(); ++k) {
    CNode* mt = Match(In(c, k + 1), PrimId::kMakeTuple);
    if (mt == nullptr || (!tuples.empty() && mt->num_args() != tuples[0]->num_args())) return nullptr;
    tuples.push_back(mt);
  }
  std::vector<AnfNode*> elems;
  for (size_t e = 0; e < tuples[0]->num_args(); ++e) {
    std::vector<AnfNode*> args;
    for (CNode* t : tuples) args.push_back(Resolve(t->arg(e)));
    elems.push_back(NewOp(c->graph(), c->primitive()->id(), args));
  }
  return NewOp(c->graph(), PrimId::kMakeTuple, elems);
}

}  // namespace kgrad
