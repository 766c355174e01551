// ONNX import: an onnx.ModelProto (opset 13-17 as PyTorch's exporter writes it)
// becomes a kgrad Module whose public entry graph takes the graph inputs that are
// not initializers and returns the graph outputs (a tuple when there are several).
// Floating-point initializers become module weights (differentiable with
// GradOperation's get_by_list); integer and bool initializers are constants.
// Shape computations on static shapes are folded at import time, so the result
// holds only the arithmetic. If becomes switch over two nested graphs, Loop a
// tail-recursive graph (GraphBuilder::While).
//
// Every problem is a Status naming the node: unsupported ops (all of them listed
// at once), missing inputs, bad attributes, undefined names, wrong types, hostile
// sizes. The importer never crashes or aborts on bad input.
#ifndef KGRAD_PROTO_ONNX_ONNX_IMPORT_H_
#define KGRAD_PROTO_ONNX_ONNX_IMPORT_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/module.h"
#include "core/constant_evaluator.h"
#include "onnx_proto/onnx.pb.h"
#include "proto/convert.h"

namespace kgrad {

struct OnnxImportOptions {
  // Evaluates applications whose inputs are known at import time (shape chains);
  // nullptr: the CPU kernels' (CpuConstantEvaluator::Get()). The module made
  // keeps it (Module::constant_evaluator), so Optimize and AD on it fold too.
  const ConstantEvaluator* evaluator = nullptr;
  LoadLimits limits;
  // Largest constant (in elements) computed at import time.
  int64_t max_folded_elements = int64_t{1} << 20;
  // With a policy, every residual block of the imported graph is outlined into a
  // called graph carrying it (core/passes/outline_residual_blocks.h), so that
  // reverse mode rematerialises per block (ad/remat.h).
  std::optional<RematPolicy> remat_residual_blocks;
  // Types of graph inputs, by name, in place of the declared ones: for a caller
  // that knows its inputs where the declaration is partial (ONNX may leave a
  // sequence's element shape out; kgrad types a list's elements).
  absl::flat_hash_map<std::string, AbstractPtr> input_types;
};

absl::StatusOr<std::unique_ptr<Module>> ImportOnnx(const onnx::ModelProto& model,
                                                   const PrimitiveRegistry& registry,
                                                   const OnnxImportOptions& options,
                                                   absl::string_view source = "<onnx>");
absl::StatusOr<std::unique_ptr<Module>> ParseOnnx(absl::string_view bytes,
                                                  const PrimitiveRegistry& registry,
                                                  const OnnxImportOptions& options,
                                                  absl::string_view source = "<bytes>");
absl::StatusOr<std::unique_ptr<Module>> ImportOnnxFile(const std::string& path,
                                                       const PrimitiveRegistry& registry,
                                                       const OnnxImportOptions& options);

// The ONNX op types (default domain) the importer maps, sorted; those README's
// table documents, in its order; and that table in Markdown (`kgrad onnx-ops`).
std::vector<std::string> SupportedOnnxOps();
std::vector<std::string> DocumentedOnnxOps();
std::string SupportedOnnxOpsMarkdown();

}  // namespace kgrad

#endif  // KGRAD_PROTO_ONNX_ONNX_IMPORT_H_
