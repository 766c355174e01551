#include "ad/ad_context.h"

#include "absl/strings/str_cat.h"
#include "ad/dfunctor.h"
#include "core/status_macros.h"

namespace kgrad {

AdContext::AdContext(Module* module, FuncGraph* root) : module_(module) {
  Manager& m = module->manager();
  for (FuncGraph* g : m.Reachable({root})) {
    // Enclosing graphs of the root are context, not differentiated.
    if (g != root && root->IsSelfOrAncestor(g)) continue;
    scope_.insert(g);
  }
  for (const FuncGraph* g : scope_) primal_info_[g] = m.Info(const_cast<FuncGraph*>(g));
}

AdContext::~AdContext() = default;

DFunctor* AdContext::FunctorOf(FuncGraph* g) {
  auto it = functors_.find(g);
  if (it != functors_.end()) return it->second.get();
  auto f = std::make_unique<DFunctor>(this, g);
  DFunctor* raw = f.get();
  functors_[g] = std::move(f);
  pending_.push_back(raw);
  return raw;
}

absl::StatusOr<FuncGraph*> AdContext::K(FuncGraph* g) {
  if (!InScope(g)) {
    return absl::InvalidArgumentError(
        absl::StrCat("graph '", g->name(), "' is not in the scope of this transform"));
  }
  DFunctor* f = FunctorOf(g);
  // Functors run in creation order: a graph's enclosing graph is mapped before it,
  // so free variables already have their K-images.
  while (!pending_.empty()) {
    DFunctor* next = pending_.front();
    pending_.pop_front();
    KGRAD_RETURN_IF_ERROR(next->Run());
  }
  return f->k_graph();
}

std::string AdContext::KeyOf(const AnfNode* fv) {
  if (const Parameter* p = fv->AsParameter(); p != nullptr && p->is_weight()) {
    return absl::StrCat("$", p->name());
  }
  return absl::StrCat(fv->DebugName(), "#", fv->id());
}

}  // namespace kgrad
