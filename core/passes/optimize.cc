#include "core/passes/optimize.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "core/infer.h"
#include "core/passes/algebra.h"
#include "core/passes/dce.h"
#include "core/passes/env_simplify.h"
#include "core/passes/inline.h"
#include "core/passes/simplify.h"
#include "core/passes/tuple_simplify.h"
#include "core/status_macros.h"

namespace kgrad {

absl::StatusOr<std::string> Optimize(Module& module, FuncGraph* root, const OptimizeOptions& options) {
  // Types let the algebra pass reason about shapes; a graph without declared
  // inputs is optimised without them.
  bool declared = true;
  for (Parameter* p : root->parameters()) declared &= p->declared() != nullptr;
  if (declared) KGRAD_RETURN_IF_ERROR(EnsureTypes(root));
  const bool check_uses = options.check_uses || std::getenv("KGRAD_CHECK_USES") != nullptr;
  UnrollBudget unroll{options.max_unroll, 0};
  InlinePass inline_pass(&unroll);
  SimplifyPass simplify(options.evaluator != nullptr ? options.evaluator : module.constant_evaluator());
  PassLog log(check_uses);
  // Each simplify sweep reaches its rules' fixpoint (CSE included), so the passes
  // alternate only while one can give the other more: inlining exposes new code
  // to simplify; simplify can expose calls to inline (a callee or an argument of
  // a graph call replaced, a call made by partial elimination).
  bool need_inline = true;
  bool need_simplify = true;
  for (int round = 0; round < options.max_rounds && (need_inline || need_simplify); ++round) {
    if (need_inline) {
      KGRAD_ASSIGN_OR_RETURN(bool inlined, log.Run(inline_pass, module, root));
      need_simplify |= inlined;
      need_inline = inlined && inline_pass.incomplete();
    }
    if (need_simplify) {
      KGRAD_ASSIGN_OR_RETURN(bool simplified, log.Run(simplify, module, root));
      need_simplify = simplified && simplify.incomplete();
      need_inline = simplified && simplify.exposed_calls();
    }
  }
  // Dead nodes do not disturb the rewrites (they follow the evaluation order), so
  // they are collected once, at the end.
  KGRAD_ASSIGN_OR_RETURN(bool collected, DcePass().Run(module, root));
  if (check_uses) {
    absl::Status s = module.CheckUses();
    if (!s.ok()) return absl::InternalError(absl::StrCat("after dce: ", s.message()));
  }
  return collected ? log.ToString() + ", dce" : log.ToString();
}

}  // namespace kgrad
