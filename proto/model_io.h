// Graph files: load (with full validation) and save. A load never crashes or
// aborts, whatever the bytes: every problem is a Status naming the file, graph and
// node and what was expected. Saving then loading gives an identical module.
#ifndef KGRAD_PROTO_MODEL_IO_H_
#define KGRAD_PROTO_MODEL_IO_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/module.h"
#include "proto/convert.h"
#include "proto/graph.pb.h"

namespace kgrad {

inline constexpr int64_t kFormatVersion = 1;

// Builds a module from a parsed ModelProto. `source` names the input in errors.
absl::StatusOr<std::unique_ptr<Module>> LoadModel(const proto::ModelProto& model,
                                                  const PrimitiveRegistry& registry,
                                                  absl::string_view source = "<model>",
                                                  const LoadLimits& limits = {});
// Parses bytes (binary protobuf, or text format when `text`) and loads them.
absl::StatusOr<std::unique_ptr<Module>> ParseModel(absl::string_view bytes, bool text,
                                                   const PrimitiveRegistry& registry,
                                                   absl::string_view source = "<bytes>",
                                                   const LoadLimits& limits = {});
// Reads a .pb (binary) or .pbtxt (text) file.
absl::StatusOr<std::unique_ptr<Module>> LoadModelFile(const std::string& path,
                                                      const PrimitiveRegistry& registry,
                                                      const LoadLimits& limits = {});

// The module as a ModelProto: weights, every graph that a public graph reaches
// (enclosing graphs first), nodes in evaluation order. Unnamed nodes get names.
absl::StatusOr<proto::ModelProto> SaveModel(Module& module);
// Binary, or text when the path ends in .pbtxt.
absl::Status SaveModelFile(Module& module, const std::string& path);
absl::StatusOr<std::string> ModelToText(Module& module);

}  // namespace kgrad

#endif  // KGRAD_PROTO_MODEL_IO_H_
