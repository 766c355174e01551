// Verifier: structural well-formedness of a module. Checks, for every graph:
// an output exists; every application has a callee; every edge points at a node
// of this graph, a constant, a weight, or a node of an enclosing graph (a free
// variable); a referenced graph is in scope (top-level, or nested in this graph
// or an enclosing one) and its free variables resolve here; primitive arity; no
// cycle among a graph's nodes; the parent chain is acyclic and not too deep.
// Errors name the graph and node.
#ifndef KGRAD_CORE_VERIFIER_H_
#define KGRAD_CORE_VERIFIER_H_

#include "absl/status/status.h"
#include "core/module.h"

namespace kgrad {

struct VerifyOptions {
  int max_nesting_depth = 256;
};

absl::Status VerifyModule(Module& module, const VerifyOptions& options = {});
absl::Status VerifyGraph(FuncGraph* graph, const VerifyOptions& options = {});

}  // namespace kgrad

#endif  // KGRAD_CORE_VERIFIER_H_
