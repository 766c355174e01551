// Inline: partial evaluation of calls to known graphs (as Relay does after AD).
//
//   %y = @f(%a, %b)        =>   (the body of @f with its parameters bound to %a, %b)
//
// Graphs nested in the callee move into the caller. A graph with a custom bprop is
// kept (inlining would lose the rule for later differentiation). A recursive graph
// (a loop) is inlined only at a call whose arguments decide its switch condition
// (a loop with a constant trip count unrolls), within a growth budget.
#ifndef KGRAD_CORE_PASSES_INLINE_H_
#define KGRAD_CORE_PASSES_INLINE_H_

#include "core/passes/pass.h"
#include "core/passes/rewrite.h"

namespace kgrad {

class InlinePass : public Pass {
 public:
  // Unrolling copies at most `max_unroll` nodes over the life of this pass object
  // (one optimisation); beyond that, loops stay loops.
  explicit InlinePass(int max_unroll = 20000) : max_unroll_(max_unroll) {}
  std::string name() const override { return "inline"; }
  absl::StatusOr<bool> Run(Module& module, FuncGraph* root) override;

 private:
  int max_unroll_;
  int unrolled_ = 0;
};

// partial(f, a...)(b...)  =>  f(a..., b...)
class PartialEliminatePass : public RewritePass {
 public:
  std::string name() const override { return "partial"; }

 protected:
  AnfNode* Rewrite(CNode* c) override;
};

}  // namespace kgrad

#endif  // KGRAD_CORE_PASSES_INLINE_H_
