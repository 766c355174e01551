#include "core/passes/cse.h"

#include <algorithm>
#include <utility>
#include <vector>

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

}  // namespace

size_t CseTable::ConstHash::operator()(const ValueNode* v) const { return ValueHash(v->value()); }

bool CseTable::ConstEq::operator()(const ValueNode* a, const ValueNode* b) const {
  return a == b || ValuesEqual(a->value(), b->value());
}

bool CseTable::KeyEq::operator()(const Key& a, const Key& b) const {
  if (a.graph != b.graph || a.size != b.size || a.hash != b.hash) return false;
  const AnfNode* const* x = store->data() + a.offset;
  const AnfNode* const* y = store->data() + b.offset;
  return std::equal(x, x + a.size, y);
}

ValueNode* CseTable::Constant(ValueNode* v) { return constants_.emplace(v, v).first->second; }

CNode* CseTable::FindOrAdd(CNode* c, absl::Span<const AnfNode* const> inputs) {
  Key key{c->graph(), static_cast<uint32_t>(store_.size()), static_cast<uint32_t>(inputs.size()), 0};
  key.hash = absl::HashOf(c->graph(), inputs.size());
  for (const AnfNode* in : inputs) key.hash = absl::HashOf(key.hash, in);
  store_.insert(store_.end(), inputs.begin(), inputs.end());
  auto [it, inserted] = apps_.emplace(key, c);
  if (inserted) return nullptr;
  store_.resize(key.offset);  // the key is not kept
  return it->second;
}

absl::StatusOr<bool> CsePass::Run(Module& module, FuncGraph* root) {
  Manager& m = module.manager();
  Transaction tr(&module);
  std::vector<FuncGraph*> graphs = passes::Graphs(module, root);
  std::vector<std::vector<CNode*>> orders;
  for (FuncGraph* g : graphs) orders.push_back(m.Info(g).order);
  CseTable table;
  absl::flat_hash_map<const AnfNode*, AnfNode*> canon;
  auto canonical = [&](AnfNode* n) -> const AnfNode* {
    auto it = canon.find(n);
    if (it != canon.end()) return it->second;
    if (ValueNode* v = n->AsValue()) {
      ValueNode* k = table.Constant(v);
      canon[n] = k;
      if (k != v) tr.Replace(v, k);
      return k;
    }
    return n;
  };
  std::vector<const AnfNode*> inputs;
  for (const auto& order : orders) {
    for (CNode* c : order) {
      inputs.clear();
      for (AnfNode* in : c->inputs()) inputs.push_back(canonical(in));
      if (CNode* e = table.FindOrAdd(c, inputs)) {
        canon[c] = e;
        tr.Replace(c, e);
      }
    }
  }
  return tr.Commit();
}

}  // namespace kgrad
