// Counts over a graph and the graphs it reaches, for reports and tests: how many
// applications run, and how much plumbing (closures, partials, envs, tuples,
// switches) an optimised gradient still carries.
#ifndef KGRAD_TOOLS_GRAPH_COUNTS_H_
#define KGRAD_TOOLS_GRAPH_COUNTS_H_

#include "core/func_graph.h"

namespace kgrad {

// The applications (CNodes) of `root` and of every graph it reaches.
int CountApplications(FuncGraph* root);

// Graphs other than `root` that it reaches (each a closure or call left over),
// plus the tuples, partials, envs and switches applied in them; the tuples that
// build root's result (e.g. (input grads, weight grads)) and the reads of a
// kernel's own tuple of results (split, batch_norm_grad) do not count. 0 for a
// plain kernel graph.
int CountPlumbing(FuncGraph* root);

}  // namespace kgrad

#endif  // KGRAD_TOOLS_GRAPH_COUNTS_H_
