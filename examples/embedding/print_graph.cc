// Loads a kgrad graph file (.pb or .pbtxt), infers its types and prints its IR.
#include <iostream>

#include "core/infer.h"
#include "core/printer.h"
#include "ops/registry.h"
#include "proto/model_io.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: print_graph FILE\n";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<kgrad::Module>> module =
      kgrad::LoadModelFile(argv[1], kgrad::DefaultRegistry());
  if (!module.ok()) {
    std::cerr << "error: " << module.status().message() << "\n";
    return 1;
  }
  if ((*module)->entry() != nullptr) {
    absl::StatusOr<kgrad::AbstractPtr> out = kgrad::InferGraph((*module)->entry());
    if (out.ok()) std::cout << "# entry returns " << (*out)->ToString() << "\n";
  }
  std::cout << kgrad::PrintModule(**module);
  return 0;
}
