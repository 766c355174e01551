#include "core/passes/rewrite.h"

#include <algorithm>
#include <optional>

#include "core/infer.h"
#include "core/manager.h"
#include "core/passes/cse.h"

namespace kgrad {
namespace passes {

CNode* Match(AnfNode* n, PrimId id) {
  CNode* c = n->AsCNode();
  return c != nullptr && c->IsPrim(id) ? c : nullptr;
}

std::optional<int64_t> ConstInt(const AnfNode* n) {
  const Value* v = ConstantOf(n);
  if (v != nullptr && v->is_scalar() && v->scalar().is_int()) return v->scalar().AsInt();
  return std::nullopt;
}

const std::string* ConstString(const AnfNode* n) {
  const Value* v = ConstantOf(n);
  return v != nullptr && v->is_string() ? &v->str() : nullptr;
}

bool IsEmptyEnv(const AnfNode* n) {
  const Value* v = ConstantOf(n);
  return v != nullptr && v->is_env() && v->env().empty();
}

CNode* NewOp(FuncGraph* g, const PrimitivePtr& prim, std::vector<AnfNode*> args) {
  std::vector<AbstractPtr> abstracts;
  bool known = true;
  for (AnfNode* a : args) {
    abstracts.push_back(a->abstract());
    known &= a->abstract() != nullptr;
  }
  args.insert(args.begin(), g->PrimitiveNode(prim));
  CNode* c = g->NewCNode(std::move(args));
  if (known) {
    absl::StatusOr<AbstractPtr> a = InferPrimitiveCall(*prim, abstracts);
    if (a.ok()) c->set_abstract(*a);
  }
  return c;
}

CNode* NewOp(FuncGraph* g, PrimId id, std::vector<AnfNode*> args, AttrMap attrs) {
  return NewOp(g, g->module()->Prim(id, std::move(attrs)), std::move(args));
}

const AbstractTensor* KnownTensor(const AnfNode* n) {
  const AbstractTensor* t = AsTensor(n->abstract());
  return t != nullptr && t->shape_known() ? t : nullptr;
}

bool SameTensorType(const AnfNode* a, const AnfNode* b) {
  const AbstractTensor* x = KnownTensor(a);
  const AbstractTensor* y = KnownTensor(b);
  return x != nullptr && y != nullptr && x->dtype() == y->dtype() && x->shape() == y->shape();
}

bool MayModify(const FuncGraph* g, const FuncGraph* root) {
  // A public graph other than the root belongs to the caller, and so does every
  // graph nested in it; passes read (and inline) them but never change them.
  for (const FuncGraph* p = g; p != nullptr; p = p->parent()) {
    if (p == root) return true;
    if (p->is_public()) return false;
  }
  return true;
}

std::vector<FuncGraph*> Graphs(Module& m, FuncGraph* root) {
  std::vector<FuncGraph*> out;
  for (FuncGraph* g : m.manager().Reachable({root})) {
    if (MayModify(g, root)) out.push_back(g);
  }
  return out;
}

namespace {

// The value every element of a constant (or fill / *_like) node has, if uniform.
std::optional<double> UniformConstant(const AnfNode* n) {
  if (const Value* v = ConstantOf(n)) {
    if (v->is_scalar()) return v->scalar().AsDouble();
    if (v->is_tensor() && v->tensor().device() == DeviceType::kCpu) {
      const Tensor& t = v->tensor();
      if (t.NumElements() == 0 || t.NumElements() > 4096) return std::nullopt;
      double first = t.ElementAsDouble(0);
      for (int64_t i = 1; i < t.NumElements(); ++i) {
        if (t.ElementAsDouble(i) != first) return std::nullopt;
      }
      return first;
    }
    return std::nullopt;
  }
  const CNode* c = n->AsCNode();
  if (c == nullptr) return std::nullopt;
  // zeros_like is a zero of whatever structure (tensor, tuple, env) its input has.
  if (c->IsPrim(PrimId::kZerosLike)) return 0.0;
  bool numeric = AsTensor(c->abstract()) != nullptr || AsScalar(c->abstract()) != nullptr;
  if (c->IsPrim(PrimId::kOnesLike) && numeric) return 1.0;
  if (c->IsPrim(PrimId::kFill)) return c->primitive()->GetFloat("value");
  return std::nullopt;
}

}  // namespace

bool IsZero(const AnfNode* n) {
  std::optional<double> v = UniformConstant(n);
  return v.has_value() && *v == 0.0;
}

bool IsOne(const AnfNode* n) {
  std::optional<double> v = UniformConstant(n);
  return v.has_value() && *v == 1.0;
}

AnfNode* ZerosOf(FuncGraph* g, const AnfNode* like) {
  const AbstractTensor* t = KnownTensor(like);
  if (t == nullptr) return nullptr;
  return NewOp(g, PrimId::kFill, {},
               {{"shape", std::vector<int64_t>(t->shape().begin(), t->shape().end())},
                {"value", 0.0},
                {"dtype", t->dtype()}});
}

}  // namespace passes

AnfNode* RewritePass::Resolve(AnfNode* n) const {
  if (resolver_ != nullptr) return resolver_->Resolve(n);
  auto it = replaced_.find(n);
  return it == replaced_.end() ? n : it->second;
}

AnfNode* RewritePass::In(const CNode* c, size_t i) const { return Resolve(c->input(i)); }

namespace {

// Rules and merges stop after this many steps on one node, or this deep in new
// nodes' inputs (rules make short chains; this bounds a rule set that cycles).
constexpr int kMaxSteps = 16;
constexpr int kMaxDepth = 32;

}  // namespace

// 1. Graphs the root reaches, enclosing ones first, and their orders; 2. each
// application settled (rewritten to the rules' fixpoint), then merged; 3. commit.
absl::StatusOr<bool> RewritePass::Run(Module& module, FuncGraph* root) {
  replaced_.clear();
  settled_.clear();
  exposed_calls_ = false;
  incomplete_ = false;
  first_new_id_ = module.next_node_id();
  Manager& m = module.manager();
  Transaction tr(&module);
  std::vector<FuncGraph*> graphs = passes::Graphs(module, root);
  std::stable_sort(graphs.begin(), graphs.end(),
                   [](const FuncGraph* a, const FuncGraph* b) { return a->depth() < b->depth(); });
  std::vector<std::vector<CNode*>> orders;
  for (FuncGraph* g : graphs) orders.push_back(m.Info(g).order);
  // The table marks nodes: made after the manager's last walk of this sweep.
  CseTable table(m.NewEpoch(), this);
  tr_ = &tr;
  table_ = merge_equal_ ? &table : nullptr;
  for (const auto& order : orders) {
    for (CNode* c : order) {
      AnfNode* r = Merge(Settle(c, 0));
      if (r != c) Record(c, r);
    }
  }
  replaced_.clear();
  aliases_.clear();
  settled_.clear();
  tr_ = nullptr;
  table_ = nullptr;
  return tr.Commit();
}

AnfNode* RewritePass::Settle(CNode* c, int depth) {
  AnfNode* r = c;
  for (int step = 0; step < kMaxSteps; ++step) {
    CNode* n = r->AsCNode();
    if (n == nullptr) return r;
    if (n != c) {
      // A node the rules made: rewritten once, after its own new inputs.
      if (!IsNew(n) || !settled_.insert(n).second) return r;
      for (size_t i = 0; i < n->size(); ++i) {
        CNode* in = n->input(i)->AsCNode();
        if (in == nullptr || !IsNew(in) || settled_.contains(in) || replaced_.contains(in)) continue;
        if (depth >= kMaxDepth) {
          incomplete_ = true;
          continue;
        }
        AnfNode* f = Merge(Settle(in, depth + 1));
        settled_.insert(in);
        if (f != in) Record(in, f);
      }
    }
    AnfNode* next = Rewrite(n);
    if (next == nullptr || next == n) return r;
    next = Resolve(next);
    if (n != c) Record(n, next);
    r = next;
  }
  incomplete_ = true;
  return r;
}

AnfNode* RewritePass::Merge(AnfNode* n) {
  CNode* c = n->AsCNode();
  if (table_ == nullptr || c == nullptr) return n;
  scratch_.clear();
  for (AnfNode* in : c->inputs()) {
    AnfNode* r = Resolve(in);
    if (ValueNode* v = r->AsValue()) {
      ValueNode* k = table_->Constant(v);
      if (k != v) {
        replaced_[v] = k;
        tr_->Replace(v, k);
        r = k;
      }
    }
    scratch_.push_back(r);
  }
  CNode* e = table_->FindOrAdd(c, scratch_);
  return e != nullptr ? e : n;
}

const std::vector<AnfNode*>* RewritePass::Aliases(const AnfNode* n) const {
  auto it = aliases_.find(n);
  return it == aliases_.end() ? nullptr : &it->second;
}

void RewritePass::Record(AnfNode* c, AnfNode* r) {
  replaced_[c] = r;
  tr_->Replace(c, r);
  std::vector<AnfNode*>& to = aliases_[r];
  to.push_back(c);
  if (auto it = aliases_.find(c); it != aliases_.end()) {
    to.insert(to.end(), it->second.begin(), it->second.end());
  }
  // A call to a graph that reads c now reads r; a call a rule made is new: either
  // may let the inliner do more.
  if (const CNode* rc = r->AsCNode(); rc != nullptr && IsNew(rc) && rc->primitive() == nullptr) {
    exposed_calls_ = true;
  }
  for (const Use& u : c->uses()) {
    if (u.user != nullptr && u.user->primitive() == nullptr) exposed_calls_ = true;
  }
}

}  // namespace kgrad
