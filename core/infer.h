// Type and shape inference over a whole program: through calls, closures, switch
// and recursion, to a fixpoint. Graphs are analysed per argument signature (scalar
// constants broadened at call boundaries, at most `max_contexts_per_graph`
// signatures before they are joined); free variables are read from the join over
// all contexts. Results are stored on the nodes (AnfNode::abstract) as the join
// over every context that evaluated them (unless InferOptions::record is off).
// The analysis keeps its call stack on the heap: a call chain of any length is
// analysed up to InferOptions::max_call_depth, without recursion in C++.
#ifndef KGRAD_CORE_INFER_H_
#define KGRAD_CORE_INFER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/abstract.h"
#include "core/func_graph.h"
#include "core/infer_options.h"

namespace kgrad {

// Infers `entry` called with `args`; returns the abstract of its output. Without
// `options`, the module's (Module::infer_options).
absl::StatusOr<AbstractPtr> InferGraph(FuncGraph* entry, const std::vector<AbstractPtr>& args,
                                       const InferOptions& options);
absl::StatusOr<AbstractPtr> InferGraph(FuncGraph* entry, const std::vector<AbstractPtr>& args);
// Same, with the parameters' declared types; error naming the parameter if one
// has none. A recorded inference leaves `entry` types_current().
absl::StatusOr<AbstractPtr> InferGraph(FuncGraph* entry, const InferOptions& options);
absl::StatusOr<AbstractPtr> InferGraph(FuncGraph* entry);
// InferGraph(entry) unless entry->types_current() (nothing to redo).
absl::Status EnsureTypes(FuncGraph* entry);
// The declared types of `entry`'s parameters; error naming the first without one.
absl::StatusOr<std::vector<AbstractPtr>> DeclaredArgs(FuncGraph* entry);

// The abstract of calling a function abstract with `args`, for one atom at a
// time; primitives only (used by passes that fold calls). Null when unknown.
absl::StatusOr<AbstractPtr> InferPrimitiveCall(const Primitive& prim,
                                               const std::vector<AbstractPtr>& args);

}  // namespace kgrad

#endif  // KGRAD_CORE_INFER_H_
