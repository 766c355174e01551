// Helpers shared by the passes: matching applications of primitives and reading
// constants, and creating new applications with their types inferred.
#ifndef KGRAD_CORE_PASSES_REWRITE_H_
#define KGRAD_CORE_PASSES_REWRITE_H_

#include <optional>
#include <vector>

#include "core/func_graph.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "core/manager.h"
#include "core/module.h"
#include "core/passes/cse.h"
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
// users; enclosing graphs before nested ones), asks Rewrite for a replacement, and
// commits them all at the end. In() reads an input through the replacements made
// earlier in the same sweep, so chains collapse in one run, and the applications a
// rule makes are rewritten too (their own new inputs first) before anything reads
// them: one sweep reaches the rules' fixpoint. With `merge_equal`, each node, once
// rewritten, is merged with an equal one seen before (CSE, cse.h).
class RewritePass : public Pass, private CseTable::Resolver {
 public:
  explicit RewritePass(bool merge_equal = false) : merge_equal_(merge_equal) {}
  absl::StatusOr<bool> Run(Module& module, FuncGraph* root) override;
  // This pass's rules applied to `c` inside another pass's sweep, reading inputs
  // through that pass's replacements (SimplifyPass runs several rule sets at once).
  AnfNode* RewriteWithin(CNode* c, const RewritePass* sweep) {
    resolver_ = sweep;
    AnfNode* r = Rewrite(c);
    resolver_ = nullptr;
    return r;
  }
  // Whether the last Run replaced a node that a call to a graph reads (as its
  // callee or an argument) or made such a call: inlining may then find more.
  bool exposed_calls() const { return exposed_calls_; }
  // Whether the last Run stopped rewriting somewhere before the rules' fixpoint
  // (a chain of new nodes beyond its bounds): another sweep may find more.
  bool incomplete() const { return incomplete_; }

 protected:
  // A node standing for `c` (nullptr or `c` itself: keep it).
  virtual AnfNode* Rewrite(CNode* c) = 0;
  AnfNode* In(const CNode* c, size_t i) const;
  AnfNode* Resolve(AnfNode* n) const override;

 private:
  // Rewrites `c` until no rule applies (new nodes' new inputs settled first).
  AnfNode* Settle(CNode* c, int depth);
  // The node equal to `n` seen earlier in the sweep, or `n` (merge_equal only).
  AnfNode* Merge(AnfNode* n);
  // `c` stands for `r` from now on.
  void Record(AnfNode* c, AnfNode* r);
  bool IsNew(const AnfNode* n) const { return n->id() >= first_new_id_; }
  const std::vector<AnfNode*>* Aliases(const AnfNode* n) const override;

  const bool merge_equal_;
  absl::flat_hash_map<const AnfNode*, AnfNode*> replaced_;
  // The inverse of replaced_, followed to the end of each chain (for CSE).
  absl::flat_hash_map<const AnfNode*, std::vector<AnfNode*>> aliases_;
  const RewritePass* resolver_ = nullptr;
  // State of one Run.
  Transaction* tr_ = nullptr;
  CseTable* table_ = nullptr;
  uint64_t first_new_id_ = 0;
  absl::flat_hash_set<const AnfNode*> settled_;  // new applications already rewritten
  std::vector<const AnfNode*> scratch_;
  bool exposed_calls_ = false;
  bool incomplete_ = false;
};

}  // namespace kgrad

#endif  // KGRAD_CORE_PASSES_REWRITE_H_
