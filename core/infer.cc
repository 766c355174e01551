#include "core/infer.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/manager.h"
#include "core/module.h"
#include "core/status_macros.h"

namespace kgrad {
namespace {

struct ContextKey {
  FuncGraph* graph;
  std::vector<AbstractPtr> args;
  bool operator==(const ContextKey& o) const {
    if (graph != o.graph || args.size() != o.args.size()) return false;
    for (size_t i = 0; i < args.size(); ++i) {
      if (!AbstractEquals(args[i], o.args[i])) return false;
    }
    return true;
  }
  template <typename H>
  friend H AbslHashValue(H h, const ContextKey& k) {
    h = H::combine(std::move(h), k.graph);
    for (const AbstractPtr& a : k.args) h = H::combine(std::move(h), AbstractHash(a));
    return h;
  }
};

absl::Status AtNode(const absl::Status& s, const AnfNode* node) {
  return absl::Status(s.code(), absl::StrCat(node->Location(), ": ", s.message()));
}

class Inferrer {
 public:
  Inferrer(Module* module, const InferOptions& options)
      : module_(module), manager_(module->manager()), options_(options) {}

  absl::StatusOr<AbstractPtr> Run(FuncGraph* entry, const std::vector<AbstractPtr>& args) {
    for (const auto& w : module_->weights()) node_abs_[w.get()] = w->abstract();
    AbstractPtr result;
    for (int round = 0; round < options_.max_rounds; ++round) {
      changed_ = false;
      evaluated_.clear();
      KGRAD_ASSIGN_OR_RETURN(result, EvalGraph(entry, args, nullptr));
      if (!changed_) {
        for (auto& [node, abs] : node_abs_) node->set_abstract(abs);
        if (result == nullptr) {
          return absl::InvalidArgumentError(absl::StrCat(
              "graph '", entry->name(), "' never returns (recursion without a base case)"));
        }
        return result;
      }
    }
    return absl::ResourceExhaustedError(absl::StrCat(
        "inference of graph '", entry->name(), "' did not converge in ",
        options_.max_rounds, " rounds"));
  }

 private:
  absl::StatusOr<AbstractPtr> EvalGraph(FuncGraph* g, std::vector<AbstractPtr> args,
                                        const AnfNode* call_site) {
    if (args.size() != g->parameters().size()) {
      absl::Status s = absl::InvalidArgumentError(absl::StrCat(
          "graph '", g->name(), "' takes ", g->parameters().size(), " arguments, got ",
          args.size()));
      return call_site != nullptr ? AtNode(s, call_site) : s;
    }
    for (AbstractPtr& a : args) a = Broaden(a);
    ContextKey key{g, std::move(args)};
    key = WidenIfNeeded(std::move(key));
    auto res_it = results_.find(key);
    if (in_progress_.contains(key) || evaluated_.contains(key)) {
      return res_it == results_.end() ? nullptr : res_it->second;
    }
    if (depth_ >= options_.max_call_depth) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "graph calls nest deeper than ", options_.max_call_depth, " at graph '",
          g->name(), "'"));
    }
    in_progress_.insert(key);
    ++depth_;
    absl::StatusOr<AbstractPtr> out = EvalBody(key);
    --depth_;
    in_progress_.erase(key);
    evaluated_.insert(key);
    if (!out.ok()) return out.status();
    AbstractPtr& slot = results_[key];
    KGRAD_ASSIGN_OR_RETURN(AbstractPtr joined, Join(slot, *out));
    if (!AbstractEquals(joined, slot)) {
      slot = joined;
      changed_ = true;
    }
    return slot;
  }

  // Beyond max_contexts_per_graph signatures, a graph's arguments are joined into
  // one wide signature so that recursion with growing shapes terminates.
  ContextKey WidenIfNeeded(ContextKey key) {
    auto& sigs = signatures_[key.graph];
    for (const ContextKey& k : sigs) {
      if (k == key) return key;
    }
    if (static_cast<int>(sigs.size()) < options_.max_contexts_per_graph) {
      sigs.push_back(key);
      return key;
    }
    ContextKey wide = sigs.back();
    for (size_t i = 0; i < key.args.size(); ++i) {
      absl::StatusOr<AbstractPtr> j = Join(wide.args[i], key.args[i]);
      if (j.ok()) wide.args[i] = *j;
    }
    if (!(wide == sigs.back())) sigs.push_back(wide);
    return wide;
  }

  absl::StatusOr<AbstractPtr> EvalBody(const ContextKey& key) {
    FuncGraph* g = key.graph;
    absl::flat_hash_map<const AnfNode*, AbstractPtr> local;
    for (size_t i = 0; i < key.args.size(); ++i) {
      local[g->parameters()[i]] = key.args[i];
      KGRAD_RETURN_IF_ERROR(Record(g->parameters()[i], key.args[i]));
    }
    for (CNode* c : manager_.Info(g).order) {
      std::vector<AbstractPtr> ins;
      ins.reserve(c->size());
      for (AnfNode* in : c->inputs()) ins.push_back(Lookup(in, local));
      KGRAD_ASSIGN_OR_RETURN(AbstractPtr a, EvalCall(c, ins));
      local[c] = a;
      KGRAD_RETURN_IF_ERROR(Record(c, a));
    }
    return Lookup(g->output(), local);
  }

  AbstractPtr Lookup(const AnfNode* n,
                     const absl::flat_hash_map<const AnfNode*, AbstractPtr>& local) {
    if (n->is_value()) return n->abstract();
    auto it = local.find(n);
    if (it != local.end()) return it->second;
    auto jt = node_abs_.find(n);
    return jt == node_abs_.end() ? nullptr : jt->second;
  }

  absl::Status Record(AnfNode* n, const AbstractPtr& a) {
    if (a == nullptr) return absl::OkStatus();
    AbstractPtr& slot = node_abs_[n];
    absl::StatusOr<AbstractPtr> j = Join(slot, a);
    if (!j.ok()) return AtNode(j.status(), n);
    if (!AbstractEquals(*j, slot)) {
      slot = *j;
      changed_ = true;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<AbstractPtr> EvalCall(const CNode* c, const std::vector<AbstractPtr>& ins) {
    if (c->size() == 0) {
      return AtNode(absl::InvalidArgumentError("application with no callee"), c);
    }
    const AbstractPtr& callee = ins[0];
    if (callee == nullptr) return AbstractPtr(nullptr);
    const AbstractFunction* fn = AsFunction(callee);
    if (fn == nullptr) {
      return AtNode(absl::InvalidArgumentError(absl::StrCat(
                        "callee is not a function (it is ", callee->ToString(), ")")),
                    c);
    }
    std::vector<AbstractPtr> args(ins.begin() + 1, ins.end());
    AbstractPtr result;
    for (const FuncAtom& atom : fn->atoms()) {
      KGRAD_ASSIGN_OR_RETURN(AbstractPtr r, EvalAtom(atom, args, c));
      absl::StatusOr<AbstractPtr> j = Join(result, r);
      if (!j.ok()) {
        return AtNode(absl::InvalidArgumentError(absl::StrCat(
                          "the functions this node may call return incompatible values: ",
                          j.status().message())),
                      c);
      }
      result = *j;
    }
    return result;
  }

  absl::StatusOr<AbstractPtr> EvalAtom(const FuncAtom& atom, const std::vector<AbstractPtr>& args,
                                       const CNode* c) {
    switch (atom.kind) {
      case FuncAtom::Kind::kGraph:
        return EvalGraph(atom.graph, args, c);
      case FuncAtom::Kind::kPartial: {
        std::vector<AbstractPtr> all = atom.bound;
        all.insert(all.end(), args.begin(), args.end());
        return EvalAtom(*atom.fn, all, c);
      }
      case FuncAtom::Kind::kPrimitive:
        return EvalPrimitive(*atom.primitive, args, c);
    }
    return AbstractPtr(nullptr);
  }

  absl::StatusOr<AbstractPtr> EvalPrimitive(const Primitive& p,
                                            const std::vector<AbstractPtr>& args,
                                            const CNode* c) {
    const PrimitiveDef& def = p.def();
    int n = static_cast<int>(args.size());
    if (n < def.min_inputs || (def.max_inputs >= 0 && n > def.max_inputs)) {
      std::string want = def.max_inputs < 0
                             ? absl::StrCat("at least ", def.min_inputs)
                             : def.min_inputs == def.max_inputs
                                   ? absl::StrCat(def.min_inputs)
                                   : absl::StrCat(def.min_inputs, " to ", def.max_inputs);
      return AtNode(absl::InvalidArgumentError(absl::StrCat(
                        p.name(), " takes ", want, " inputs, got ", n)),
                    c);
    }
    // switch is not strict: while a recursive branch is still unknown, the other
    // branch alone decides (this is how a loop's fixpoint starts).
    if (def.id == PrimId::kSwitch) return EvalSwitch(args, c);
    for (const AbstractPtr& a : args) {
      if (a == nullptr) return AbstractPtr(nullptr);
    }
    if (def.infer == nullptr) {
      return AtNode(absl::UnimplementedError(
                        absl::StrCat("primitive '", p.name(), "' has no inference")),
                    c);
    }
    absl::StatusOr<AbstractPtr> r = def.infer(InferCall{p, args});
    if (!r.ok()) return AtNode(absl::Status(r.status().code(),
                                            absl::StrCat(p.name(), ": ", r.status().message())),
                               c);
    return r;
  }

  absl::StatusOr<AbstractPtr> EvalSwitch(const std::vector<AbstractPtr>& args, const CNode* c) {
    const AbstractPtr& cond = args[0];
    if (cond != nullptr) {
      const AbstractScalar* s = AsScalar(cond);
      const AbstractTensor* t = AsTensor(cond);
      bool ok = (s != nullptr && (s->dtype() == DType::kBool || IsInteger(s->dtype()))) ||
                (t != nullptr && t->dtype() == DType::kBool && t->rank() == 0);
      if (!ok) {
        return AtNode(absl::InvalidArgumentError(absl::StrCat(
                          "switch condition must be a bool scalar or a bool[] tensor, got ",
                          cond->ToString())),
                      c);
      }
      if (s != nullptr && s->value().has_value()) {
        return s->value()->AsBool() ? args[1] : args[2];
      }
    }
    absl::StatusOr<AbstractPtr> j = Join(args[1], args[2]);
    if (!j.ok()) {
      return AtNode(absl::InvalidArgumentError(absl::StrCat(
                        "switch branches have incompatible types: ", j.status().message())),
                    c);
    }
    return *j;
  }

  Module* module_;
  Manager& manager_;
  InferOptions options_;
  bool changed_ = false;
  int depth_ = 0;
  absl::flat_hash_map<ContextKey, AbstractPtr> results_;
  absl::flat_hash_set<ContextKey> in_progress_;
  absl::flat_hash_set<ContextKey> evaluated_;
  absl::flat_hash_map<FuncGraph*, std::vector<ContextKey>> signatures_;
  absl::flat_hash_map<AnfNode*, AbstractPtr> node_abs_;
};

}  // namespace

absl::StatusOr<AbstractPtr> InferGraph(FuncGraph* entry, const std::vector<AbstractPtr>& args,
                                       const InferOptions& options) {
  Inferrer inferrer(entry->module(), options);
  return inferrer.Run(entry, args);
}

absl::StatusOr<AbstractPtr> InferGraph(FuncGraph* entry, const InferOptions& options) {
  std::vector<AbstractPtr> args;
  for (Parameter* p : entry->parameters()) {
    if (p->declared() == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter '", p->DebugName(), "' of graph '", entry->name(),
          "' has no declared type; give argument types to infer the graph"));
    }
    args.push_back(p->declared());
  }
  return InferGraph(entry, args, options);
}

absl::StatusOr<AbstractPtr> InferPrimitiveCall(const Primitive& prim,
                                               const std::vector<AbstractPtr>& args) {
  for (const AbstractPtr& a : args) {
    if (a == nullptr) return AbstractPtr(nullptr);
  }
  if (prim.def().infer == nullptr) return AbstractPtr(nullptr);
  return prim.def().infer(InferCall{prim, args});
}

}  // namespace kgrad
