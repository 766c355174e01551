#include "core/passes/cse.h"

#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "core/manager.h"
#include "core/passes/rewrite.h"

namespace kgrad {
namespace {

// A cheap hash of a constant: kind plus what identifies it without reading
// whole tensors (equality is checked exactly afterwards).
size_t ValueHash(const Value& v) {
  size_t h = absl::HashOf(static_cast<int>(v.kind()));
  switch (v.kind()) {
    case Value::Kind::kScalar: return absl::HashOf(h, v.scalar().AsDouble(), static_cast<int>(v.scalar().dtype()));
    case Value::Kind::kString: return absl::HashOf(h, v.str());
    case Value::Kind::kPrimitive: {
      // Definition and attribute names/kinds: cheap, and equal primitives agree.
      h = absl::HashOf(h, &v.primitive()->def());
      for (const auto& [name, attr] : v.primitive()->attrs()) h = absl::HashOf(h, name, attr.index());
      return h;
    }
    case Value::Kind::kGraph: return absl::HashOf(h, v.graph());
    case Value::Kind::kTensor: {
      const Tensor& t = v.tensor();
      h = absl::HashOf(h, static_cast<int>(t.dtype()), t.NumElements());
      if (t.device() == DeviceType::kCpu && t.NumElements() > 0) h = absl::HashOf(h, t.ElementAsDouble(0));
      return h;
    }
    case Value::Kind::kTuple: return absl::HashOf(h, v.tuple().size());
    default: return h;
  }
}

struct ConstKey {
  const Value* v;
  bool operator==(const ConstKey& o) const { return ValuesEqual(*v, *o.v); }
  template <typename H>
  friend H AbslHashValue(H h, const ConstKey& k) {
    return H::combine(std::move(h), ValueHash(*k.v));
  }
};

struct NodeKey {
  std::vector<const AnfNode*> inputs;
  bool operator==(const NodeKey& o) const { return inputs == o.inputs; }
  template <typename H>
  friend H AbslHashValue(H h, const NodeKey& k) {
    return H::combine_contiguous(std::move(h), k.inputs.data(), k.inputs.size());
  }
};

}  // namespace

absl::StatusOr<bool> CsePass::Run(Module& module, FuncGraph* root) {
  Manager& m = module.manager();
  Transaction tr(&module);
  std::vector<FuncGraph*> graphs = passes::Graphs(module, root);
  std::vector<std::vector<CNode*>> orders;
  for (FuncGraph* g : graphs) orders.push_back(m.Info(g).order);
  // One canonical node per constant value (module-wide: constants have no scope).
  absl::flat_hash_map<ConstKey, AnfNode*> constants;
  absl::flat_hash_map<const AnfNode*, const AnfNode*> canon;
  auto canonical = [&](AnfNode* n) -> const AnfNode* {
    auto it = canon.find(n);
    if (it != canon.end()) return it->second;
    if (const ValueNode* v = n->AsValue()) {
      auto [ct, inserted] = constants.emplace(ConstKey{&v->value()}, n);
      canon[n] = ct->second;
      if (!inserted) tr.Replace(n, ct->second);
      return ct->second;
    }
    return n;
  };
  for (const auto& order : orders) {
    absl::flat_hash_map<NodeKey, CNode*> seen;
    for (CNode* c : order) {
      NodeKey key;
      for (AnfNode* in : c->inputs()) key.inputs.push_back(canonical(in));
      auto [it, inserted] = seen.emplace(std::move(key), c);
      if (!inserted) {
        canon[c] = it->second;
        tr.Replace(c, it->second);
      }
    }
  }
  return tr.Commit();
}

}  // namespace kgrad
