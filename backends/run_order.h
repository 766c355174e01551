// The order in which the executor runs a graph's applications.
//
// The manager's order (a depth-first walk from the output, inputs in position
// order) is valid but can be costly in memory for a gradient graph: its output
// tuple lists the weight gradients first layer first, so the walk computes the
// whole backward chain to reach dW_1 while every later layer's dW_k is still to
// come, and each of those keeps its inputs (saved or recomputed activations)
// alive until the walk returns to it. Visiting the shallower input first (the
// one with the shorter longest path from the graph's inputs) computes dW_L as
// soon as its layer's dout exists, then dW_{L-1}, ..., releasing each layer's
// activations on the way down, the order a hand-written backward pass uses.
// This is what lets rematerialisation (ad/remat.h) lower the peak of a training
// step, not only of an input-gradient.
#ifndef KGRAD_BACKENDS_RUN_ORDER_H_
#define KGRAD_BACKENDS_RUN_ORDER_H_

#include <vector>

#include "core/func_graph.h"
#include "core/manager.h"

namespace kgrad {

// `info.order` rearranged as above. Graphs that create closures over their own
// nodes keep `info.order`, which also orders what closures capture.
std::vector<CNode*> RunOrder(FuncGraph* g, const GraphInfo& info);

// Whether some application of g uses a graph nested in it (a closure over its
// nodes): the free variables such a closure captures are not input edges, so an
// order may not move applications past them.
bool MakesClosures(const FuncGraph* g, const GraphInfo& info);

// `order` re-sorted so that collectives (ops/collective.h) start as early and
// their results are read as late as dependencies allow: a topological sort that
// prefers collectives and what only feeds them (a gradient and its bucket), then
// the rest in `order`'s order, and leaves what reads a collective's result for
// when nothing else is ready. `order` itself when it has no collective. Not for
// graphs that make closures (their captures are not edges).
std::vector<CNode*> CollectivesEarly(const std::vector<CNode*>& order);

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_RUN_ORDER_H_
