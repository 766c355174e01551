// ONNX export: one first-order graph (primitive applications only, as the
// optimiser leaves a gradient graph: no calls, closures or switch) becomes an
// onnx.ModelProto with standard ops (opset 17). Weights become initializers,
// the graph's parameters inputs (their declared types), and the output's tensor
// leaves (a nested tuple is flattened) the graph outputs out_0, out_1, ...
// Anything else is a Status naming the node that cannot be exported and why.
#ifndef KGRAD_PROTO_ONNX_ONNX_EXPORT_H_
#define KGRAD_PROTO_ONNX_ONNX_EXPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/module.h"
#include "onnx_proto/onnx.pb.h"

namespace kgrad {

inline constexpr int64_t kOnnxExportOpset = 17;

absl::StatusOr<onnx::ModelProto> ExportOnnx(Module& module, FuncGraph* graph);
absl::Status ExportOnnxFile(Module& module, FuncGraph* graph, const std::string& path);

// How the export covers a primitive: the emitters registered for it (one when it
// exports) and the not-exportable entries naming it (one, with the reason its
// error gives, when it does not). Every PrimId has exactly one of the two
// (tests/onnx/onnx_export_coverage_test.cc).
struct OnnxExportSupport {
  int emitters = 0;
  int refusals = 0;
  const char* reason = nullptr;
};
OnnxExportSupport OnnxExportSupportOf(PrimId id);

}  // namespace kgrad

#endif  // KGRAD_PROTO_ONNX_ONNX_EXPORT_H_
