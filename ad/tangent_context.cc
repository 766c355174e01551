#include "ad/tangent_context.h"

#include "absl/strings/str_cat.h"
#include "ad/tangent_functor.h"
#include "ad/transposed_jvp.h"
#include "core/passes/optimize.h"
#include "core/status_macros.h"

namespace kgrad {

TangentContext::TangentContext(Module* module, FuncGraph* root, std::string root_name)
    : FunctorWorklist(module, root), root_(root), root_name_(std::move(root_name)),
      rules_(module) {}

TangentContext::~TangentContext() = default;

std::string TangentContext::NameOf(const FuncGraph* g) const {
  return g == root_ ? root_name_ : absl::StrCat("jvp_", g->name());
}

absl::StatusOr<FuncGraph*> TangentContext::T(FuncGraph* g) {
  KGRAD_RETURN_IF_ERROR(CheckInScope(g));
  if (!started()) KGRAD_RETURN_IF_ERROR(DeriveRules());
  TangentFunctor* f = FunctorOf(g);
  KGRAD_RETURN_IF_ERROR(RunPending());
  return f->t_graph();
}

const FuncGraph* TangentContext::CustomBpropReadingEnclosingValues() const {
  for (const FuncGraph* g : graphs()) {
    if (g->custom_bprop() == nullptr) continue;
    for (const AnfNode* fv : PrimalInfo(g).fvs) {
      if (MayVary(fv)) return g;
    }
  }
  return nullptr;
}

bool TangentContext::MayVary(const AnfNode* node) const {
  if (node->is_value() || node->graph() == nullptr) return false;  // constants, weights
  return InScope(node->graph()) && CarriesTangent(node->abstract());
}

bool TangentContext::NeedsRule(const CNode* c, std::vector<bool>* active) const {
  const Primitive* prim = c->primitive();
  switch (prim->id()) {
    case PrimId::kMakeTuple:
    case PrimId::kTupleGetItem:
    case PrimId::kSwitch:
    case PrimId::kDepend:
    case PrimId::kRematBarrier:
      return false;
    default:
      break;
  }
  const PrimitiveDef& def = prim->def();
  if (def.zero_gradient || def.bprop == nullptr || def.derived_args != nullptr) return false;
  if (!CarriesTangent(c->abstract())) return false;
  active->clear();
  bool any = false;
  for (size_t i = 0; i < c->num_args(); ++i) {
    active->push_back(MayVary(c->arg(i)));
    any |= active->back();
  }
  return any;
}

absl::Status TangentContext::DeriveRules() {
  // The optimiser's collections must not take the program being transformed.
  const bool was_public = root_->is_public();
  root_->set_public(true);
  absl::Status status = absl::OkStatus();
  std::vector<bool> active;
  for (FuncGraph* g : graphs()) {
    if (g->custom_bprop() != nullptr) {
      OptimizeOptions o;
      absl::StatusOr<FuncGraph*> jvp = TransposedJvp(*module(), g, {}, &o);
      if (!jvp.ok()) {
        status = jvp.status();
        break;
      }
      rules_.Hold(*jvp);
      custom_jvp_[g] = *jvp;
      continue;
    }
    for (CNode* c : PrimalInfo(g).order) {
      if (c->primitive() == nullptr || !NeedsRule(c, &active)) continue;
      status = rules_.Derive(c, active);
      if (!status.ok()) break;
    }
    if (!status.ok()) break;
  }
  root_->set_public(was_public);
  return status;
}

}  // namespace kgrad
