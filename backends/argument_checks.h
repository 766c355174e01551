// The executor's checks of a run's arguments against the entry graph's declared
// input types, before anything runs.
#ifndef KGRAD_BACKENDS_ARGUMENT_CHECKS_H_
#define KGRAD_BACKENDS_ARGUMENT_CHECKS_H_

#include <vector>

#include "absl/status/status.h"
#include "core/func_graph.h"
#include "core/value.h"

namespace kgrad {

// `v` has the declared type of input `p` of `g` (unknown and symbolic dims match
// any size); nothing to check when `p` declares no tensor type.
absl::Status CheckArgument(const Parameter* p, const Value& v, const FuncGraph* g);

// Every dim symbol of the declared input types takes one size per run: the first
// input that carries it fixes it, and an input that disagrees is refused, named
// with the input that fixed the symbol.
absl::Status CheckSymbols(const std::vector<Parameter*>& params, const std::vector<Value>& args,
                          const FuncGraph* g);

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_ARGUMENT_CHECKS_H_
