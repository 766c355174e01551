#include "ad/ad_context.h"

#include "absl/strings/str_cat.h"
#include "ad/dfunctor.h"
#include "core/status_macros.h"

namespace kgrad {

AdContext::AdContext(Module* module, FuncGraph* root) : module_(module), worklist_(module, root) {}

AdContext::~AdContext() = default;

DFunctor* AdContext::FunctorOf(FuncGraph* g) { return worklist_.FunctorOf(this, g); }

absl::StatusOr<FuncGraph*> AdContext::K(FuncGraph* g) {
  if (!InScope(g)) {
    return absl::InvalidArgumentError(
        absl::StrCat("graph '", g->name(), "' is not in the scope of this transform"));
  }
  DFunctor* f = FunctorOf(g);
  KGRAD_RETURN_IF_ERROR(worklist_.RunPending());
  return f->k_graph();
}

std::string AdContext::KeyOf(const AnfNode* fv) {
  if (const Parameter* p = fv->AsParameter(); p != nullptr && p->is_weight()) {
    return absl::StrCat("$", p->name());
  }
  return absl::StrCat(fv->DebugName(), "#", fv->id());
}

}  // namespace kgrad
