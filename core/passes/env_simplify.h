// Env simplification: the free-variable sensitivities that travel in envs are
// read back where they were written, so envs disappear from first-order programs.
#ifndef KGRAD_CORE_PASSES_ENV_SIMPLIFY_H_
#define KGRAD_CORE_PASSES_ENV_SIMPLIFY_H_

#include "core/passes/rewrite.h"

namespace kgrad {

class EnvSimplifyPass : public RewritePass {
 public:
  std::string name() const override { return "env"; }

 protected:
  AnfNode* Rewrite(CNode* c) override;

 private:
  AnfNode* GetItem(CNode* c);
  AnfNode* Add(CNode* c);
};

}  // namespace kgrad

#endif  // KGRAD_CORE_PASSES_ENV_SIMPLIFY_H_
