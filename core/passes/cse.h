// Common subexpression elimination, within each graph: applications of the same
// callee to the same inputs are one node (every primitive is pure; so are graph
// calls). Equal constants are merged first, so `add(x, 1.0)` written twice with two
// constant nodes is found too.
//
// CseTable is the table such a sweep keeps; CsePass runs it alone, and
// SimplifyPass runs it inside its rewriting sweep (a node is merged once its
// rewrites are done, so rewrites and merges reach their fixpoint in one sweep).
#ifndef KGRAD_CORE_PASSES_CSE_H_
#define KGRAD_CORE_PASSES_CSE_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "core/passes/pass.h"

namespace kgrad {

class CseTable {
 public:
  CseTable() = default;
  CseTable(const CseTable&) = delete;
  CseTable& operator=(const CseTable&) = delete;

  // The first constant node seen with a value equal to `v`'s (module-wide:
  // constants have no scope).
  ValueNode* Constant(ValueNode* v);
  // An application seen earlier in c's graph whose inputs are `inputs` (c's
  // callee and arguments, each already canonical), or nullptr, and then `c` is
  // the canonical application for them.
  CNode* FindOrAdd(CNode* c, absl::Span<const AnfNode* const> inputs);

 private:
  struct Key {
    const FuncGraph* graph;
    uint32_t offset;  // of the inputs in store_
    uint32_t size;
    size_t hash;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return k.hash; }
  };
  struct KeyEq {
    const std::vector<const AnfNode*>* store;
    bool operator()(const Key& a, const Key& b) const;
  };
  struct ConstHash {
    size_t operator()(const ValueNode* v) const;
  };
  struct ConstEq {
    bool operator()(const ValueNode* a, const ValueNode* b) const;
  };

  // Inputs of the applications in apps_, one after another (no allocation per node).
  std::vector<const AnfNode*> store_;
  absl::flat_hash_map<Key, CNode*, KeyHash, KeyEq> apps_{16, KeyHash(), KeyEq{&store_}};
  absl::flat_hash_map<ValueNode*, ValueNode*, ConstHash, ConstEq> constants_;
};

class CsePass : public Pass {
 public:
  std::string name() const override { return "cse"; }
  absl::StatusOr<bool> Run(Module& module, FuncGraph* root) override;
};

}  // namespace kgrad

#endif  // KGRAD_CORE_PASSES_CSE_H_
