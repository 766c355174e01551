// Readable text dump of the IR (one line per node, nested graphs inside their
// enclosing graph, like MindSpore's IR dump) and Graphviz DOT export.
//
//   $w : f32[3,2]                                  a weight
//   @f(%x: f32[4,3]) {                             a graph and its parameters
//     @f_then() {  # free: %h                      a nested graph
//       return %h
//     }
//     %h = matmul(%x, $w) : f32[4,2]               an application
//     %2 = switch(%c, @f_then, @f_else) : fn{@f_then, @f_else}
//     %3 = %2() : f32[4,2]                         a call of a closure
//     return %3
//   }
#ifndef KGRAD_CORE_PRINTER_H_
#define KGRAD_CORE_PRINTER_H_

#include <string>

#include "core/module.h"

namespace kgrad {

struct PrintOptions {
  bool show_types = true;       // ": f32[2,3]" after each node with an abstract
  bool show_weight_values = false;
  int max_tensor_elements = 8;  // constants longer than this are elided
  // Names by position (%p0 for parameters, %0, %1, ... for applications, @g0, @g1
  // for graphs) so that two structurally equal graphs print the same text (the
  // structural tests of passes compare Before/Expected this way).
  bool canonical = false;
};

std::string PrintModule(Module& module, const PrintOptions& options = {});
// One graph with its nested graphs.
std::string PrintGraph(FuncGraph* graph, const PrintOptions& options = {});
// One application as its line in a graph's dump: "%y = callee(args) : type"
// (`canonical` is ignored: positions are a whole graph's).
std::string PrintApplication(const CNode* node, const PrintOptions& options = {});
// Graphviz DOT of every graph of the module, one cluster per graph.
std::string ToDot(Module& module);

}  // namespace kgrad

#endif  // KGRAD_CORE_PRINTER_H_
