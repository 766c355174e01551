#include "core/infer.h"

#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

using Locals = absl::flat_hash_map<const AnfNode*, AbstractPtr>;

// One graph being analysed in one context: the nodes in order, and the call at
// `order[next]` while the callee's frame (above this one) is analysed.
struct Frame {
  ContextKey key;
  const std::vector<CNode*>* order;
  Locals local;
  size_t next = 0;
  // The open call: its callee's atoms, which one is being evaluated, and the join
  // of the results so far.
  bool call_open = false;
  std::vector<AbstractPtr> args;
  AbstractPtr callee;
  size_t atom = 0;
  AbstractPtr result;
  // Derived functions entered by the open atom, outermost first: their results
  // are made from the operand's when it is ready (JoinAtomResult).
  struct Derive {
    const FuncAtom* atom;
    std::vector<AbstractPtr> args;
  };
  std::vector<Derive> derive;
};

// The whole-program analysis. Step 1 (Run): rounds from the entry until nothing
// changes. Step 2 (Analyse): one round, a loop over an explicit frame stack;
// entering a graph pushes a frame (Enter), finishing it pops and joins its result
// into the context's (Leave). Step 3 (Step): one node of the top frame.
class Inferrer {
 public:
  Inferrer(Module* module, const InferOptions& options)
      : module_(module), manager_(module->manager()), options_(options) {}

  // Step 1.
  absl::StatusOr<AbstractPtr> Run(FuncGraph* entry, const std::vector<AbstractPtr>& args) {
    entry_ = entry;
    for (const auto& w : module_->weights()) node_abs_[w.get()] = w->abstract();
    for (int round = 0; round < options_.max_rounds; ++round) {
      changed_ = false;
      stale_ = false;
      fv_reads_.clear();
      evaluated_.clear();
      KGRAD_ASSIGN_OR_RETURN(AbstractPtr result, Analyse(entry, args));
      // A round that read no value before it was final (a recursive call's result
      // while it was being computed, a free variable that grew after it was read)
      // computed the fixpoint: another round would repeat it. Without recursion
      // that is the first round.
      if (changed_ && stale_) continue;
      if (result == nullptr) return NeverReturns(entry);
      if (options_.record) {
        for (auto& [node, abs] : node_abs_) node->set_abstract(abs);
      }
      return result;
    }
    return absl::ResourceExhaustedError(absl::StrCat(
        "inference of graph '", entry->name(), "' did not converge in ", options_.max_rounds,
        " rounds (InferOptions::max_rounds)"));
  }

 private:
  // Step 2.
  absl::StatusOr<AbstractPtr> Analyse(FuncGraph* entry, const std::vector<AbstractPtr>& args) {
    stack_.clear();
    KGRAD_ASSIGN_OR_RETURN(std::optional<AbstractPtr> ready, Enter(entry, args, nullptr));
    while (true) {
      if (ready.has_value()) {
        if (stack_.empty()) return *ready;
        KGRAD_RETURN_IF_ERROR(JoinAtomResult(stack_.back(), *ready));
        ready.reset();
      }
      Frame& f = stack_.back();
      if (f.call_open || f.next < f.order->size()) {
        KGRAD_ASSIGN_OR_RETURN(ready, Step(f));
        continue;
      }
      AbstractPtr out = Lookup(f.key.graph->output(), f.local);
      ContextKey key = std::move(f.key);
      stack_.pop_back();
      KGRAD_ASSIGN_OR_RETURN(ready, Leave(key, out));
      if (stack_.empty()) return *ready;
    }
  }

  // Step 3. Advances the top frame by one atom of its open call, or opens the call
  // of its next node. Returns a value for the top frame's open call when one is
  // ready, nullopt when a callee's frame was pushed (or nothing is pending).
  absl::StatusOr<std::optional<AbstractPtr>> Step(Frame& f) {
    if (!f.call_open) {
      CNode* c = (*f.order)[f.next];
      KGRAD_ASSIGN_OR_RETURN(bool opened, OpenCall(f, c));
      if (!opened) return std::optional<AbstractPtr>();
    }
    CNode* c = (*f.order)[f.next];
    const std::vector<FuncAtom>& atoms = AsFunction(f.callee)->atoms();
    if (f.atom < atoms.size()) return StartAtom(f, atoms[f.atom], f.args, c);
    KGRAD_RETURN_IF_ERROR(FinishNode(f, c, f.result));
    return std::optional<AbstractPtr>();
  }

  // Reads the inputs of `c`; false when the node is finished already (unknown or
  // invalid callee).
  absl::StatusOr<bool> OpenCall(Frame& f, CNode* c) {
    if (c->size() == 0) return AtNode(absl::InvalidArgumentError("application with no callee"), c);
    std::vector<AbstractPtr> ins;
    ins.reserve(c->size());
    for (AnfNode* in : c->inputs()) {
      if (in->is_value() && in->abstract() == nullptr) {
        return AtNode(absl::ResourceExhaustedError(absl::StrCat(
                          "constant '", in->DebugName(), "' nests deeper than ",
                          options_.max_abstract_depth,
                          " tuples (InferOptions::max_abstract_depth)")),
                      c);
      }
      ins.push_back(Lookup(in, f.local));
    }
    const AbstractPtr& callee = ins[0];
    if (callee == nullptr) {
      KGRAD_RETURN_IF_ERROR(FinishNode(f, c, nullptr));
      return false;
    }
    if (AsFunction(callee) == nullptr) {
      return AtNode(absl::InvalidArgumentError(absl::StrCat(
                        "callee is not a function (it is ", callee->ToString(), ")")),
                    c);
    }
    f.call_open = true;
    f.callee = callee;
    f.args.assign(ins.begin() + 1, ins.end());
    f.atom = 0;
    f.result = nullptr;
    return true;
  }

  // The value of `c` is known: record it and move to the next node.
  absl::Status FinishNode(Frame& f, CNode* c, AbstractPtr a) {
    f.local[c] = a;
    f.call_open = false;
    f.callee = nullptr;
    f.args.clear();
    ++f.next;
    return Record(c, a);
  }

  absl::Status JoinAtomResult(Frame& f, AbstractPtr r) {
    CNode* c = (*f.order)[f.next];
    KGRAD_ASSIGN_OR_RETURN(r, FinishDerived(f, std::move(r), c));
    absl::StatusOr<AbstractPtr> j = Join(f.result, r);
    if (!j.ok()) {
      return AtNode(absl::InvalidArgumentError(absl::StrCat(
                        "the functions this node may call return incompatible values: ",
                        j.status().message())),
                    c);
    }
    f.result = *j;
    ++f.atom;
    return absl::OkStatus();
  }

  // A partial application's bound arguments come first; a derived function calls
  // its operand with the arguments its operator gives (the result is made in
  // FinishDerived); primitives are evaluated at once, graphs entered.
  absl::StatusOr<std::optional<AbstractPtr>> StartAtom(Frame& f, const FuncAtom& atom,
                                                       std::vector<AbstractPtr> all,
                                                       const CNode* c) {
    const FuncAtom* a = &atom;
    while (a->kind == FuncAtom::Kind::kPartial || a->kind == FuncAtom::Kind::kDerived) {
      if (a->kind == FuncAtom::Kind::kPartial) {
        all.insert(all.begin(), a->bound.begin(), a->bound.end());
        a = a->fn.get();
        continue;
      }
      for (const AbstractPtr& x : all) {
        if (x == nullptr) return std::optional<AbstractPtr>(AbstractPtr(nullptr));
      }
      const PrimitiveDef& def = a->primitive->def();
      absl::StatusOr<std::vector<AbstractPtr>> inner =
          def.derived_args(DerivedCall{*a->primitive, all, module_});
      if (!inner.ok()) return AtNode(PrimError(*a->primitive, inner.status()), c);
      f.derive.push_back(Frame::Derive{a, std::move(all)});
      all = std::move(*inner);
      a = a->fn.get();
    }
    if (a->kind == FuncAtom::Kind::kResult) {
      if (all.size() != 1) {
        return AtNode(absl::InvalidArgumentError(absl::StrCat(
                          "a bprop takes 1 argument (the output's sensitivity), got ", all.size())),
                      c);
      }
      return std::optional<AbstractPtr>(a->bound.at(0));
    }
    if (a->kind == FuncAtom::Kind::kGraph) return Enter(a->graph, std::move(all), c);
    KGRAD_ASSIGN_OR_RETURN(AbstractPtr r, EvalPrimitive(*a->primitive, all, c));
    return std::optional<AbstractPtr>(std::move(r));
  }

  // The result of the open atom's derived functions, innermost first, from the
  // operand's result `r` (unknown stays unknown).
  absl::StatusOr<AbstractPtr> FinishDerived(Frame& f, AbstractPtr r, const CNode* c) {
    while (!f.derive.empty()) {
      Frame::Derive d = std::move(f.derive.back());
      f.derive.pop_back();
      if (r == nullptr) continue;
      const Primitive& prim = *d.atom->primitive;
      absl::StatusOr<AbstractPtr> out =
          prim.def().derived_result(DerivedCall{prim, d.args, module_}, r);
      if (!out.ok()) {
        f.derive.clear();
        return AtNode(PrimError(prim, out.status()), c);
      }
      r = *out;
    }
    return r;
  }

  static absl::Status PrimError(const Primitive& p, const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(p.name(), ": ", s.message()));
  }

  // The result of `g` in this context when it is known or being computed (a
  // recursive call sees what the fixpoint has so far); else pushes its frame.
  absl::StatusOr<std::optional<AbstractPtr>> Enter(FuncGraph* g, std::vector<AbstractPtr> args,
                                                   const AnfNode* call_site) {
    if (args.size() != g->parameters().size()) {
      absl::Status s = absl::InvalidArgumentError(absl::StrCat(
          "graph '", g->name(), "' takes ", g->parameters().size(), " arguments, got ",
          args.size()));
      return call_site != nullptr ? AtNode(s, call_site) : s;
    }
    for (AbstractPtr& a : args) a = Broaden(a);
    ContextKey key = WidenIfNeeded(ContextKey{g, std::move(args)});
    if (in_progress_.contains(key) || evaluated_.contains(key)) {
      if (in_progress_.contains(key)) stale_ = true;  // the result so far, not the final one
      auto it = results_.find(key);
      if (it != results_.end()) return std::optional<AbstractPtr>(it->second);
      if (in_progress_.contains(key)) recursing_.insert(g);
      return std::optional<AbstractPtr>(AbstractPtr(nullptr));
    }
    if (static_cast<int>(stack_.size()) >= options_.max_call_depth) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "graph calls nest deeper than ", options_.max_call_depth, " at graph '", g->name(),
          "' (the limit InferOptions::max_call_depth, settable with Module::set_infer_options)"));
    }
    in_progress_.insert(key);
    Frame f;
    f.order = &manager_.Info(g).order;
    for (size_t i = 0; i < key.args.size(); ++i) {
      f.local[g->parameters()[i]] = key.args[i];
      KGRAD_RETURN_IF_ERROR(Record(g->parameters()[i], key.args[i]));
    }
    f.key = std::move(key);
    stack_.push_back(std::move(f));
    return std::optional<AbstractPtr>();
  }

  // Joins a finished frame's output into its context's result.
  absl::StatusOr<std::optional<AbstractPtr>> Leave(const ContextKey& key, const AbstractPtr& out) {
    in_progress_.erase(key);
    evaluated_.insert(key);
    AbstractPtr& slot = results_[key];
    KGRAD_ASSIGN_OR_RETURN(AbstractPtr joined, Join(slot, out));
    if (!AbstractEquals(joined, slot)) {
      slot = joined;
      changed_ = true;
    }
    return std::optional<AbstractPtr>(slot);
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

  AbstractPtr Lookup(const AnfNode* n, const Locals& local) {
    if (n->is_value()) return n->abstract();
    auto it = local.find(n);
    if (it != local.end()) return it->second;
    auto jt = node_abs_.find(n);
    if (jt != node_abs_.end()) {
      // A free variable: the join over its graph's contexts so far (Record marks
      // the round stale when it grows later).
      if (!n->is_parameter() || n->graph() != nullptr) fv_reads_.insert(n);
      return jt->second;
    }
    // A free variable of the entry itself (when a nested graph is analysed on its
    // own): this analysis cannot compute it; the enclosing graph's recorded type
    // stands for it.
    if (n->graph() != nullptr && n->graph() != entry_ && entry_->IsSelfOrAncestor(n->graph())) {
      return n->abstract();
    }
    return nullptr;
  }

  absl::Status Record(AnfNode* n, const AbstractPtr& a) {
    if (a == nullptr) return absl::OkStatus();
    if (a->depth() > options_.max_abstract_depth) {
      return AtNode(absl::ResourceExhaustedError(absl::StrCat(
                        "the type of this value nests deeper than ", options_.max_abstract_depth,
                        " tuples or partial applications (InferOptions::max_abstract_depth); a "
                        "loop that wraps its state in one more tuple each iteration has no fixed "
                        "type")),
                    n);
    }
    AbstractPtr& slot = node_abs_[n];
    absl::StatusOr<AbstractPtr> j = Join(slot, a);
    if (!j.ok()) return AtNode(j.status(), n);
    if (!AbstractEquals(*j, slot)) {
      slot = *j;
      changed_ = true;
      if (fv_reads_.contains(n)) stale_ = true;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<AbstractPtr> EvalPrimitive(const Primitive& p,
                                            const std::vector<AbstractPtr>& args,
                                            const CNode* c) {
    const PrimitiveDef& def = p.def();
    if (absl::Status s = CheckArity(def, args.size()); !s.ok()) return AtNode(s, c);
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

  // The entry has no result: name the graphs whose every path calls themselves
  // (they never got a result of their own), not just the entry.
  absl::Status NeverReturns(FuncGraph* entry) {
    std::vector<std::string> names;
    for (FuncGraph* g : manager_.Reachable({entry})) {
      if (!recursing_.contains(g)) continue;
      bool has_result = false;
      for (const auto& [key, result] : results_) has_result |= key.graph == g && result != nullptr;
      if (!has_result) names.push_back(absl::StrCat("'", g->name(), "'"));
    }
    if (names.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "graph '", entry->name(), "' never returns (recursion without a base case)"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "graph ", absl::StrJoin(names, ", "),
        " never returns: every path through it calls itself again (recursion without a base "
        "case), so graph '", entry->name(), "', which calls it, has no result"));
  }

  Module* module_;
  Manager& manager_;
  InferOptions options_;
  FuncGraph* entry_ = nullptr;
  bool changed_ = false;
  bool stale_ = false;  // this round read a value that changed afterwards
  absl::flat_hash_set<const AnfNode*> fv_reads_;  // nodes read outside their frame this round
  std::vector<Frame> stack_;
  absl::flat_hash_map<ContextKey, AbstractPtr> results_;
  absl::flat_hash_set<ContextKey> in_progress_;
  absl::flat_hash_set<ContextKey> evaluated_;
  absl::flat_hash_map<FuncGraph*, std::vector<ContextKey>> signatures_;
  absl::flat_hash_map<AnfNode*, AbstractPtr> node_abs_;
  absl::flat_hash_set<FuncGraph*> recursing_;  // reached again while being analysed
};

}  // namespace

absl::StatusOr<AbstractPtr> InferGraph(FuncGraph* entry, const std::vector<AbstractPtr>& args,
                                       const InferOptions& options) {
  Inferrer inferrer(entry->module(), options);
  return inferrer.Run(entry, args);
}

absl::StatusOr<AbstractPtr> InferGraph(FuncGraph* entry, const std::vector<AbstractPtr>& args) {
  return InferGraph(entry, args, entry->module()->infer_options());
}

absl::StatusOr<std::vector<AbstractPtr>> DeclaredArgs(FuncGraph* entry) {
  std::vector<AbstractPtr> args;
  for (Parameter* p : entry->parameters()) {
    if (p->declared() == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter '", p->DebugName(), "' of graph '", entry->name(),
          "' has no declared type; give argument types to infer the graph"));
    }
    args.push_back(p->declared());
  }
  return args;
}

absl::StatusOr<AbstractPtr> InferGraph(FuncGraph* entry, const InferOptions& options) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<AbstractPtr> args, DeclaredArgs(entry));
  KGRAD_ASSIGN_OR_RETURN(AbstractPtr out, InferGraph(entry, args, options));
  if (options.record) entry->set_types_current();
  return out;
}

absl::StatusOr<AbstractPtr> InferGraph(FuncGraph* entry) {
  return InferGraph(entry, entry->module()->infer_options());
}

absl::Status EnsureTypes(FuncGraph* entry) {
  if (entry->types_current()) return absl::OkStatus();
  return InferGraph(entry).status();
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
