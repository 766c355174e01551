// Bounds and modes of type inference (core/infer.h). A Module carries the options
// its analyses use (Module::infer_options); an embedding service tightens or
// widens them there, once, for every path that infers: AD, the optimiser, the
// executor's type check, the ONNX exporter.
#ifndef KGRAD_CORE_INFER_OPTIONS_H_
#define KGRAD_CORE_INFER_OPTIONS_H_

#include "core/abstract.h"

namespace kgrad {

struct InferOptions {
  // Argument signatures analysed per graph before they are joined into one.
  int max_contexts_per_graph = 8;
  // Passes over the program before the fixpoint must have converged.
  int max_rounds = 64;
  // Graph calls nested inside each other that the analysis follows (a chain of
  // 5,000 graphs each calling the next nests 5,000 deep). The analysis keeps its
  // own stack on the heap; this only bounds the work a hostile file can ask for.
  int max_call_depth = 100'000;
  // Tuple and partial-application nesting of any inferred type. Walks over types
  // recurse, so deeper types are refused (a loop that wraps its state in one more
  // tuple every iteration has no fixed type anyway).
  int max_abstract_depth = kDefaultMaxAbstractDepth;
  // Store the results on the nodes (AnfNode::abstract); off: only check.
  bool record = true;
};

}  // namespace kgrad

#endif  // KGRAD_CORE_INFER_OPTIONS_H_
