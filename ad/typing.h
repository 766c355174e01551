// Types for the graphs a gradient is made of, without a whole-program inference.
//
// The K-transform copies the primal's inferred types onto the forward nodes it
// makes; everything else (the rules' nodes, tuples, calls of K-images and bprops)
// gets the type its inputs give, graph after graph until nothing is left. That is
// what InferGraph records when every graph runs in one context: each call passes
// exactly its callee's parameter types (broadened, as inference does at calls).
// When the program needs more than that (a graph called with other types,
// recursion, a callee that is not one known graph, switch, differentiation
// operators), some nodes stay untyped and the caller infers as usual.
#ifndef KGRAD_AD_TYPING_H_
#define KGRAD_AD_TYPING_H_

#include "core/func_graph.h"

namespace kgrad {

// Types the untyped applications of the graphs `root` reaches (nodes made by the
// K-transform and the gradient's assembly: the types already there are taken as
// current). True when every application and parameter is typed and the root's
// parameters have their declared types: `root` is then types_current().
bool TypeFromInputs(FuncGraph* root);

}  // namespace kgrad

#endif  // KGRAD_AD_TYPING_H_
