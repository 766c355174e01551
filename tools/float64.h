// A float64 copy of a module: every float32 tensor constant, weight, declared
// type and dtype attribute becomes float64 (gradient checks run in float64).
#ifndef KGRAD_TOOLS_FLOAT64_H_
#define KGRAD_TOOLS_FLOAT64_H_

#include <memory>

#include "absl/status/statusor.h"
#include "core/module.h"

namespace kgrad {

absl::StatusOr<std::unique_ptr<Module>> ToFloat64(Module& module);

}  // namespace kgrad

#endif  // KGRAD_TOOLS_FLOAT64_H_
