#include "core/verifier.h"

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/manager.h"
#include "core/status_macros.h"

namespace kgrad {
namespace {

absl::Status Bad(const AnfNode* n, const std::string& what) {
  return absl::FailedPreconditionError(absl::StrCat(n->Location(), ": ", what));
}

absl::Status CheckNesting(FuncGraph* g, const VerifyOptions& o) {
  int depth = 0;
  absl::flat_hash_set<FuncGraph*> seen;
  for (FuncGraph* p = g; p != nullptr; p = p->parent()) {
    if (!seen.insert(p).second) {
      return absl::FailedPreconditionError(
          absl::StrCat("graph '", g->name(), "': its chain of enclosing graphs is a cycle"));
    }
    if (++depth > o.max_nesting_depth) {
      return absl::FailedPreconditionError(absl::StrCat(
          "graph '", g->name(), "' is nested deeper than ", o.max_nesting_depth, " levels"));
    }
  }
  return absl::OkStatus();
}

// An input of a node in `g` must be local, constant, a weight, or owned by an
// enclosing graph.
absl::Status CheckEdge(FuncGraph* g, const CNode* user, const AnfNode* in, Manager& m) {
  if (in->is_value()) {
    if (FuncGraph* h = GraphOf(in)) {
      if (h->parent() != nullptr && !g->IsSelfOrAncestor(h->parent())) {
        return Bad(user, absl::StrCat("uses graph '", h->name(), "', nested in '",
                                      h->parent()->name(), "', outside its scope"));
      }
      for (AnfNode* v : m.Info(h).fvs) {
        if (v->graph() != nullptr && !g->IsSelfOrAncestor(v->graph())) {
          return Bad(user, absl::StrCat("uses graph '", h->name(), "' whose free variable '",
                                        v->DebugName(), "' (of graph '", v->graph()->name(),
                                        "') is not in scope here"));
        }
      }
    }
    return absl::OkStatus();
  }
  if (in->graph() == nullptr) {
    if (in->is_parameter() && in->AsParameter()->is_weight()) return absl::OkStatus();
    return Bad(user, absl::StrCat("input '", in->DebugName(), "' belongs to no graph"));
  }
  if (!g->IsSelfOrAncestor(in->graph())) {
    return Bad(user, absl::StrCat("free variable '", in->DebugName(), "' belongs to graph '",
                                  in->graph()->name(), "', which does not enclose graph '",
                                  g->name(), "'"));
  }
  return absl::OkStatus();
}

absl::Status CheckArity(const CNode* c) {
  const Primitive* p = c->primitive();
  if (p == nullptr) return absl::OkStatus();
  absl::Status s = kgrad::CheckArity(p->def(), c->num_args());
  return s.ok() ? s : Bad(c, std::string(s.message()));
}

// Cycle check among the graph's own applications (iterative DFS).
absl::Status CheckAcyclic(FuncGraph* g) {
  absl::flat_hash_map<const AnfNode*, int> state;
  for (const auto& owned : g->owned_nodes()) {
    const CNode* root = owned->AsCNode();
    if (root == nullptr || state[root] != 0) continue;
    std::vector<std::pair<const CNode*, size_t>> stack{{root, 0}};
    state[root] = 1;
    while (!stack.empty()) {
      auto& [c, next] = stack.back();
      if (next < c->size()) {
        const CNode* in = c->input(next++)->AsCNode();
        if (in == nullptr || in->graph() != g) continue;
        int& s = state[in];
        if (s == 1) {
          return Bad(in, "is part of a cycle (a node depends on itself)");
        }
        if (s == 0) {
          s = 1;
          stack.emplace_back(in, 0);
        }
        continue;
      }
      state[c] = 2;
      stack.pop_back();
    }
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// Everything but the parent chains, which the callers check first for every graph
// (the checks below walk them).
absl::Status VerifyGraphBody(FuncGraph* g, const VerifyOptions& options) {
  if (g->output() == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("graph '", g->name(), "' has no output"));
  }
  for (Parameter* p : g->parameters()) {
    if (p->graph() != g) {
      return Bad(p, absl::StrCat("is listed as a parameter of graph '", g->name(),
                                 "' but belongs elsewhere"));
    }
  }
  KGRAD_RETURN_IF_ERROR(CheckAcyclic(g));
  Manager& m = g->module()->manager();
  for (const auto& owned : g->owned_nodes()) {
    const CNode* c = owned->AsCNode();
    if (c == nullptr) continue;
    if (c->size() == 0) return Bad(c, "application has no callee");
    for (const AnfNode* in : c->inputs()) KGRAD_RETURN_IF_ERROR(CheckEdge(g, c, in, m));
    KGRAD_RETURN_IF_ERROR(CheckArity(c));
  }
  const AnfNode* out = g->output();
  if (!out->is_value() && out->graph() != nullptr && !g->IsSelfOrAncestor(out->graph())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "graph '", g->name(), "' returns '", out->DebugName(), "' of graph '",
        out->graph()->name(), "', which does not enclose it"));
  }
  if (FuncGraph* b = g->custom_bprop()) {
    if (b->parameters().size() != g->parameters().size() + 2) {
      return absl::FailedPreconditionError(absl::StrCat(
          "graph '", g->name(), "': custom bprop '", b->name(), "' must take ",
          g->parameters().size() + 2, " parameters (inputs, out, dout), has ",
          b->parameters().size()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status VerifyGraph(FuncGraph* g, const VerifyOptions& options) {
  // Parent chains of every graph first: g's checks walk those of the graphs it uses.
  for (const auto& other : g->module()->graphs()) {
    KGRAD_RETURN_IF_ERROR(CheckNesting(other.get(), options));
  }
  return VerifyGraphBody(g, options);
}

absl::Status VerifyModule(Module& module, const VerifyOptions& options) {
  // Linear in the module: each parent chain once (bounded by max_nesting_depth),
  // then each graph's body once.
  for (const auto& g : module.graphs()) {
    KGRAD_RETURN_IF_ERROR(CheckNesting(g.get(), options));
  }
  for (const auto& g : module.graphs()) {
    KGRAD_RETURN_IF_ERROR(VerifyGraphBody(g.get(), options));
  }
  return absl::OkStatus();
}

}  // namespace kgrad
