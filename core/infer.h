// Type and shape inference over a whole program: through calls, closures, switch
// and recursion, to a fixpoint. Graphs are analysed per argument signature
// (scalar constants broadened at call boundaries, at most
// `max_contexts_per_graph` signatures before they are joined); free variables are
// read from the join over all contexts. Results are stored on the nodes
// (AnfNode::abstract) as the join over every context that evaluated them.
#ifndef KGRAD_CORE_INFER_H_
#define KGRAD_CORE_INFER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/abstract.h"
#include "core/func_graph.h"

namespace kgrad {

struct InferOptions {
  int max_contexts_per_graph = 8;
  int max_rounds = 64;
  // Static nesting of graph calls the analysis follows (hostile files).
  int max_call_depth = 1000;
};

// Infers `entry` called with `args`; returns the abstract of its output.
absl::StatusOr<AbstractPtr> InferGraph(FuncGraph* entry, const std::vector<AbstractPtr>& args,
                                       const InferOptions& options = {});
// Same, with the parameters' declared types; error naming the parameter if one
// has none.
absl::StatusOr<AbstractPtr> InferGraph(FuncGraph* entry, const InferOptions& options = {});

// The abstract of calling a function abstract with `args`, for one atom at a
// time; primitives only (used by passes that fold calls). Null when unknown.
absl::StatusOr<AbstractPtr> InferPrimitiveCall(const Primitive& prim,
                                               const std::vector<AbstractPtr>& args);

}  // namespace kgrad

#endif  // KGRAD_CORE_INFER_H_
