#include "core/passes/cse.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"

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
    case Value::Kind::kList: return absl::HashOf(h, v.list().size());
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

bool CseTable::Wide(AnfNode* n) {
  if (n->mark_epoch != epoch_) {
    n->mark_epoch = epoch_;
    n->mark_state = n->uses().size() > kMaxScan ? kWide : 0;
  }
  return (n->mark_state & kWide) != 0;
}

const AnfNode* CseTable::Canonical(AnfNode* n) {
  AnfNode* r = resolver_->Resolve(n);
  if (ValueNode* v = r->AsValue()) return Constant(v);
  return r;
}

CNode* CseTable::FindOrAdd(CNode* c, absl::Span<const AnfNode* const> inputs) {
  // The narrowest input: the fewest users to look at.
  size_t at = inputs.size();
  size_t fewest = kMaxScan + 1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    AnfNode* x = const_cast<AnfNode*>(inputs[i]);
    if (x->is_value() || Wide(x)) continue;
    if (x->uses().size() < fewest) {
      fewest = x->uses().size();
      at = i;
    }
  }
  CNode* e = at < inputs.size() ? FindAmongUsers(c, inputs, at) : FindOrAddHashed(c, inputs);
  if (e == nullptr) {
    Wide(c);  // decided now, before any user of c asks
    c->mark_state |= kSeen;
  }
  return e;
}

// Applications held by the table that read inputs[at] (or a node it replaced) at
// position `at`, and the rest of c's inputs too.
CNode* CseTable::FindAmongUsers(const CNode* c, absl::Span<const AnfNode* const> inputs, size_t at) {
  AnfNode* x = const_cast<AnfNode*>(inputs[at]);
  auto match = [&](const AnfNode* via) -> CNode* {
    for (const Use& u : via->uses()) {
      CNode* d = u.user;
      if (d == nullptr || u.index != static_cast<int>(at) || d == c || !Seen(d)) continue;
      if (d->graph() != c->graph() || d->size() != inputs.size()) continue;
      bool same = true;
      for (size_t j = 0; j < inputs.size() && same; ++j) {
        same = j == at || Canonical(d->input(j)) == inputs[j];
      }
      if (same) return d;
    }
    return nullptr;
  };
  if (CNode* d = match(x)) return d;
  if (const std::vector<AnfNode*>* aliases = resolver_->Aliases(x)) {
    for (const AnfNode* o : *aliases) {
      if (CNode* d = match(o)) return d;
    }
  }
  return nullptr;
}

CNode* CseTable::FindOrAddHashed(CNode* c, absl::Span<const AnfNode* const> inputs) {
  Key key{c->graph(), static_cast<uint32_t>(store_.size()), static_cast<uint32_t>(inputs.size()), 0};
  key.hash = absl::HashOf(c->graph(), inputs.size());
  for (const AnfNode* in : inputs) key.hash = absl::HashOf(key.hash, in);
  store_.insert(store_.end(), inputs.begin(), inputs.end());
  auto [it, inserted] = apps_.emplace(key, c);
  if (inserted) return nullptr;
  store_.resize(key.offset);  // the key is not kept
  return it->second;
}

}  // namespace kgrad
