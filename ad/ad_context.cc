#include "ad/ad_context.h"

#include "absl/strings/str_cat.h"
#include "ad/dfunctor.h"
#include "core/status_macros.h"

namespace kgrad {

AdContext::AdContext(Module* module, FuncGraph* root) : FunctorWorklist(module, root) {}

AdContext::~AdContext() = default;

absl::StatusOr<FuncGraph*> AdContext::K(FuncGraph* g) {
  KGRAD_RETURN_IF_ERROR(CheckInScope(g));
  DFunctor* f = FunctorOf(g);
  KGRAD_RETURN_IF_ERROR(RunPending());
  return f->k_graph();
}

std::string AdContext::KeyOf(const AnfNode* fv) {
  if (const Parameter* p = fv->AsParameter(); p != nullptr && p->is_weight()) {
    return absl::StrCat("$", p->name());
  }
  return absl::StrCat(fv->DebugName(), "#", fv->id());
}

}  // namespace kgrad
