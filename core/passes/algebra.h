// Algebraic simplification with static types: zeros and ones, identities, and
// dynamic *_like forms turned static (so that the reference tensor need not stay
// alive). Each rewrite carries its algebra above it in algebra.cc.
#ifndef KGRAD_CORE_PASSES_ALGEBRA_H_
#define KGRAD_CORE_PASSES_ALGEBRA_H_

#include "core/passes/rewrite.h"

namespace kgrad {

class AlgebraPass : public RewritePass {
 public:
  std::string name() const override { return "algebra"; }

 protected:
  AnfNode* Rewrite(CNode* c) override;

 private:
  AnfNode* Zeros(CNode* c);
  AnfNode* Identity(CNode* c);
  AnfNode* MakeStatic(CNode* c);
  AnfNode* Scalars(CNode* c);
};

}  // namespace kgrad

#endif  // KGRAD_CORE_PASSES_ALGEBRA_H_
