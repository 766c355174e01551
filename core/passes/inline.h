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

// The nodes loop unrolling may copy over one optimisation (all runs of the pass
// in it together); beyond that, loops stay loops. Per-call state: the caller
// (Optimize) owns it, the pass only charges it.
struct UnrollBudget {
  int max_nodes = 20000;
  int used = 0;
};

class InlinePass : public Pass {
 public:
  // Each Run may copy `max_unroll` nodes.
  explicit InlinePass(int max_unroll = 20000) : max_unroll_(max_unroll) {}
  // All runs share the caller's budget.
  explicit InlinePass(UnrollBudget* shared) : shared_(shared) {}
  std::string name() const override { return "inline"; }
  absl::StatusOr<bool> Run(Module& module, FuncGraph* root) override;
  // Whether the last Run copied graphs whose own calls it did not visit (another
  // run may inline them).
  bool incomplete() const { return incomplete_; }

 private:
  int max_unroll_ = 0;
  UnrollBudget* shared_ = nullptr;
  bool incomplete_ = false;
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
