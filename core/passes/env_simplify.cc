#include "core/passes/env_simplify.h"

namespace kgrad {

using passes::ConstString;
using passes::IsEmptyEnv;
using passes::IsZero;
using passes::Match;
using passes::NewOp;

AnfNode* EnvSimplifyPass::Rewrite(CNode* c) {
  if (c->IsPrim(PrimId::kEnvGetItem)) return GetItem(c);
  if (c->IsPrim(PrimId::kEnvAdd) || c->IsPrim(PrimId::kHyperAdd)) return Add(c);
  // zeros_like(f) for a function (or env) => newenv
  if (c->IsPrim(PrimId::kZerosLike)) {
    const AbstractPtr& a = In(c, 1)->abstract();
    if (a != nullptr && (a->kind() == AbstractKind::kFunction || a->kind() == AbstractKind::kEnv)) {
      return c->graph()->NewValueNode(Value::EmptyEnv());
    }
  }
  return nullptr;
}

AnfNode* EnvSimplifyPass::GetItem(CNode* c) {
  AnfNode* env = In(c, 1);
  const std::string* key = ConstString(In(c, 2));
  AnfNode* dflt = In(c, 3);
  // newenv[k] => default
  if (IsEmptyEnv(env)) return dflt;
  if (key == nullptr) return nullptr;
  // set(e, k, v)[k] => v;  set(e, k2, v)[k] => e[k]  (down the whole chain)
  AnfNode* start = env;
  while (CNode* set = Match(env, PrimId::kEnvSetItem)) {
    const std::string* k2 = ConstString(In(set, 2));
    if (k2 == nullptr) break;
    if (*k2 == *key) return In(set, 3);
    env = In(set, 1);
  }
  if (IsEmptyEnv(env)) return dflt;
  if (env != start) return NewOp(c->graph(), PrimId::kEnvGetItem, {env, In(c, 2), dflt});
  // (e1 + e2)[k] => e1[k] + e2[k]   (the default is zero: a missing key adds nothing)
  if (CNode* add = Match(env, PrimId::kEnvAdd); add != nullptr && IsZero(dflt)) {
    AnfNode* a = NewOp(c->graph(), PrimId::kEnvGetItem, {In(add, 1), In(c, 2), dflt});
    AnfNode* b = NewOp(c->graph(), PrimId::kEnvGetItem, {In(add, 2), In(c, 2), dflt});
    return NewOp(c->graph(), PrimId::kHyperAdd, {a, b});
  }
  // switch(p, e1, e2)[k] => switch(p, e1[k], e2[k])
  if (CNode* sw = Match(env, PrimId::kSwitch)) {
    AnfNode* a = NewOp(c->graph(), PrimId::kEnvGetItem, {In(sw, 2), In(c, 2), dflt});
    AnfNode* b = NewOp(c->graph(), PrimId::kEnvGetItem, {In(sw, 3), In(c, 2), dflt});
    return NewOp(c->graph(), PrimId::kSwitch, {In(sw, 1), a, b});
  }
  return nullptr;
}

// newenv + e => e;  e + newenv => e
AnfNode* EnvSimplifyPass::Add(CNode* c) {
  if (IsEmptyEnv(In(c, 1))) return In(c, 2);
  if (IsEmptyEnv(In(c, 2))) return In(c, 1);
  return nullptr;
}

}  // namespace kgrad
