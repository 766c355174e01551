// A float64 copy of a module: every float32 tensor constant, weight, declared
// type and dtype attribute becomes float64 (gradient checks and the precision
// report run in float64).
#ifndef KGRAD_TOOLS_FLOAT64_H_
#define KGRAD_TOOLS_FLOAT64_H_

#include <memory>

#include "absl/status/statusor.h"
#include "core/module.h"
#include "core/value.h"
#include "proto/graph.pb.h"

namespace kgrad {

absl::StatusOr<std::unique_ptr<Module>> ToFloat64(Module& module);
// The same on a saved module; its node and graph names are kept, so a module
// loaded from `model` and one loaded from the result match node for node.
proto::ModelProto ToFloat64(proto::ModelProto model);

// float32 tensors and scalars as float64 (other values unchanged).
Value WidenToFloat64(const Value& v);

}  // namespace kgrad

#endif  // KGRAD_TOOLS_FLOAT64_H_
