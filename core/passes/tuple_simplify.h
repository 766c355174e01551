// Tuple simplification: tuples built only to be taken apart disappear.
#ifndef KGRAD_CORE_PASSES_TUPLE_SIMPLIFY_H_
#define KGRAD_CORE_PASSES_TUPLE_SIMPLIFY_H_

#include "core/passes/rewrite.h"

namespace kgrad {

class TupleSimplifyPass : public RewritePass {
 public:
  std::string name() const override { return "tuple"; }

 protected:
  AnfNode* Rewrite(CNode* c) override;

 private:
  AnfNode* GetItem(CNode* c);
  AnfNode* SetItem(CNode* c);
  AnfNode* MakeTuple(CNode* c);
  AnfNode* Elementwise(CNode* c);
};

}  // namespace kgrad

#endif  // KGRAD_CORE_PASSES_TUPLE_SIMPLIFY_H_
