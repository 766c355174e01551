#include "ad/functor_worklist.h"

#include "absl/strings/str_cat.h"

namespace kgrad {

absl::Status CheckMappableConstant(const FuncGraph* primal, const Value& value, bool graph_in_scope) {
  if (value.is_graph() && !graph_in_scope) {
    return absl::FailedPreconditionError(absl::StrCat(
        primal->name(), ": graph '", value.graph()->name(),
        "' encloses the graph being differentiated and cannot be called from it"));
  }
  if (value.is_primitive()) {
    return absl::InternalError(absl::StrCat("graph '", primal->name(), "': primitive ",
                                            value.primitive()->name(),
                                            " used as a value was not lowered before AD"));
  }
  return absl::OkStatus();
}

}  // namespace kgrad
