#include "ad/typing.h"

#include <vector>

#include "core/infer.h"
#include "core/manager.h"
#include "core/module.h"

namespace kgrad {
namespace {

// The type `c` gets from its inputs, or nullptr (an input untyped yet, or more
// than one context would be needed). `args` is scratch space.
AbstractPtr TypeOf(const CNode* c, std::vector<AbstractPtr>& args) {
  args.clear();
  for (size_t i = 0; i < c->num_args(); ++i) {
    if (c->arg(i)->abstract() == nullptr) return nullptr;
    args.push_back(c->arg(i)->abstract());
  }
  if (const Primitive* p = c->primitive()) {
    // switch joins its branches lazily and operators derive functions: the
    // inferrer's business.
    if (p->id() == PrimId::kSwitch || p->def().derived_args != nullptr) return nullptr;
    absl::StatusOr<AbstractPtr> a = InferPrimitiveCall(*p, args);
    return a.ok() ? *a : nullptr;
  }
  const AbstractFunction* fn = AsFunction(c->input(0)->abstract());
  if (fn == nullptr || fn->atoms().size() != 1 || fn->atoms()[0].kind != FuncAtom::Kind::kGraph) {
    return nullptr;
  }
  FuncGraph* g = fn->atoms()[0].graph;
  if (g->output() == nullptr || g->parameters().size() != args.size()) return nullptr;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!AbstractEquals(Broaden(args[i]), g->parameters()[i]->abstract())) return nullptr;
  }
  return g->output()->abstract();
}

}  // namespace

// Rounds over the reachable graphs (a caller may come before its callee), each
// typing what its inputs allow, until everything is typed or a round types
// nothing.
bool TypeFromInputs(FuncGraph* root) {
  for (Parameter* p : root->parameters()) {
    if (p->declared() == nullptr || !AbstractEquals(p->abstract(), p->declared())) return false;
  }
  Manager& m = root->module()->manager();
  std::vector<FuncGraph*> graphs = m.Reachable({root});
  std::vector<const std::vector<CNode*>*> orders;
  for (FuncGraph* g : graphs) {
    for (Parameter* p : g->parameters()) {
      if (p->abstract() == nullptr) return false;
    }
    orders.push_back(&m.Info(g).order);
  }
  std::vector<AbstractPtr> args;
  while (true) {
    size_t typed = 0;
    size_t untyped = 0;
    for (const std::vector<CNode*>* order : orders) {
      for (CNode* c : *order) {
        if (c->abstract() != nullptr) continue;
        if (AbstractPtr a = TypeOf(c, args)) {
          c->set_abstract(std::move(a));
          ++typed;
        } else {
          ++untyped;
        }
      }
    }
    if (untyped == 0) break;
    if (typed == 0) return false;
  }
  if (root->output() == nullptr || root->output()->abstract() == nullptr) return false;
  root->set_types_current();
  return true;
}

}  // namespace kgrad
