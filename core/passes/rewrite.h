// Helpers shared by the passes: matching applications of primitives and reading
// constants, and creating new applications with their types inferred.
#ifndef KGRAD_CORE_PASSES_REWRITE_H_
#define KGRAD_CORE_PASSES_REWRITE_H_

#include <optional>
#include <vector>

#include "core/func_graph.h"
#include "absl/container/flat_hash_map.h"
#include "core/module.h"
#include "core/passes/pass.h"

namespace kgrad {
namespace passes {

// The application if `n` applies primitive `id`, else nullptr.
CNode* Match(AnfNode* n, PrimId id);
// A constant integer (scalar) held by `n`.
std::optional<int64_t> ConstInt(const AnfNode* n);
// A constant string held by `n`.
const std::string* ConstString(const AnfNode* n);
// True when n is the constant empty env.
bool IsEmptyEnv(const AnfNode* n);

// A new application of `id` in `g`, its abstract inferred from its inputs'
// abstracts when they are known.
CNode* NewOp(FuncGraph* g, PrimId id, std::vector<AnfNode*> args, AttrMap attrs = {});
// A new application of an existing primitive.
CNode* NewOp(FuncGraph* g, const PrimitivePtr& prim, std::vector<AnfNode*> args);

// The static tensor type of a node, or nullptr when unknown or not fully known.
const AbstractTensor* KnownTensor(const AnfNode* n);
// Same dtype and the same fully known shape.
bool SameTensorType(const AnfNode* a, const AnfNode* b);

// Whether a pass optimising `root` may change `g`: not when g is another public
// graph (the caller holds it) or nested in one.
bool MayModify(const FuncGraph* g, const FuncGraph* root);
// The graphs `root` reaches that a pass may change.
std::vector<FuncGraph*> Graphs(Module& m, FuncGraph* root);

// A constant zero (tensor, scalar, zeros_like(..) or fill(value=0)).
bool IsZero(const AnfNode* n);
// A constant one (tensor, scalar, ones_like(..) or fill(value=1)).
bool IsOne(const AnfNode* n);
// A zero tensor of `like`'s static type (fill), or nullptr when unknown.
AnfNode* ZerosOf(FuncGraph* g, const AnfNode* like);

}  // namespace passes

// Base of the local rewriting passes: visits every application (inputs before
// users), asks Rewrite for a replacement, and commits them all at the end. In()
// reads an input through the replacements made earlier in the same sweep, so
// chains collapse in one run.
class RewritePass : public Pass {
 public:
  absl::StatusOr<bool> Run(Module& module, FuncGraph* root) override;

 protected:
  // A node standing for `c` (nullptr or `c` itself: keep it).
  virtual AnfNode* Rewrite(CNode* c) = 0;
  AnfNode* In(const CNode* c, size_t i) const;
  AnfNode* Resolve(AnfNode* n) const;

 private:
  absl::flat_hash_map<const AnfNode*, AnfNode*> replaced_;
};

}  // namespace kgrad

#endif  // KGRAD_CORE_PASSES_REWRITE_H_
