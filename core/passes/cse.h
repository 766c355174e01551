// Common subexpression elimination, within each graph: applications of the same
// callee to the same inputs are one node (every primitive is pure; so are graph
// calls). Equal constants are merged first, so `add(x, 1.0)` written twice with two
// constant nodes is found too.
//
// CseTable is the table such a sweep keeps; SimplifyPass (core/passes/simplify.h)
// runs it inside its rewriting sweep (a node is merged once its rewrites are
// done, so rewrites and merges reach their fixpoint in one sweep).
#ifndef KGRAD_CORE_PASSES_CSE_H_
#define KGRAD_CORE_PASSES_CSE_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "core/func_graph.h"
#include "core/node.h"

namespace kgrad {

class CseTable {
 public:
  // What the sweep knows of its replacements so far.
  class Resolver {
   public:
    virtual ~Resolver() = default;
    // The node `n` stands for (itself when not replaced).
    virtual AnfNode* Resolve(AnfNode* n) const = 0;
    // The nodes replaced by `n` (directly or along a chain), or nullptr.
    virtual const std::vector<AnfNode*>* Aliases(const AnfNode* n) const = 0;
  };
  // `epoch` (Manager::NewEpoch) marks the applications the table holds; nothing
  // else may mark nodes while the table is in use.
  CseTable(uint64_t epoch, const Resolver* resolver) : epoch_(epoch), resolver_(resolver) {}
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
  // Equal applications share every input at the same position: the users of one
  // input with few uses are the only candidates, found without hashing. Inputs
  // with many uses (decided once per sweep, when the table first meets them) do
  // not narrow the search: applications whose inputs are all such, or constants,
  // go through the hash table instead (both of an equal pair take the same way).
  static constexpr size_t kMaxScan = 32;
  static constexpr uint8_t kSeen = 1;  // held by the table
  static constexpr uint8_t kWide = 2;  // too many uses to scan
  bool Wide(AnfNode* n);
  bool Seen(const AnfNode* n) const { return n->mark_epoch == epoch_ && (n->mark_state & kSeen) != 0; }
  const AnfNode* Canonical(AnfNode* n);
  CNode* FindAmongUsers(const CNode* c, absl::Span<const AnfNode* const> inputs, size_t at);
  CNode* FindOrAddHashed(CNode* c, absl::Span<const AnfNode* const> inputs);

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

  const uint64_t epoch_;
  const Resolver* resolver_;
  // Inputs of the applications in apps_, one after another (no allocation per node).
  std::vector<const AnfNode*> store_;
  absl::flat_hash_map<Key, CNode*, KeyHash, KeyEq> apps_{16, KeyHash(), KeyEq{&store_}};
  absl::flat_hash_map<ValueNode*, ValueNode*, ConstHash, ConstEq> constants_;
};

}  // namespace kgrad

#endif  // KGRAD_CORE_PASSES_CSE_H_
