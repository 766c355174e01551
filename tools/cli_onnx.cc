#include "tools/cli_onnx.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/passes/outline_residual_blocks.h"
#include "core/status_macros.h"
#include "proto/model_io.h"
#include "proto/onnx/onnx_export.h"
#include "proto/onnx/onnx_import.h"
#include "tools/cli_args.h"
#include "tools/cli_common.h"

namespace kgrad {
namespace cli {
namespace {

// import-onnx MODEL.onnx -o OUT.pb: the imported module as a kgrad graph file.
absl::Status Import(const ParsedArgs& args, std::ostream& out) {
  if (args.positional.size() != 1) return absl::InvalidArgumentError("import-onnx takes one MODEL.onnx");
  if (!args.Has("output")) return absl::InvalidArgumentError("import-onnx needs -o OUT (.pb or .pbtxt)");
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, LoadModule(args.positional[0]));
  std::string blocks;
  if (args.Has("remat")) {
    // --remat POLICY: every residual block becomes a called graph with the policy.
    KGRAD_ASSIGN_OR_RETURN(RematPolicy policy, ParseRematPolicy(args.Get("remat")));
    KGRAD_ASSIGN_OR_RETURN(std::vector<FuncGraph*> outlined,
                           OutlineResidualBlocks(*m, m->entry(), policy));
    blocks = absl::StrCat(", ", outlined.size(), " residual blocks marked ", args.Get("remat"));
  }
  KGRAD_RETURN_IF_ERROR(SaveModelFile(*m, args.Get("output")));
  out << "wrote " << args.Get("output") << ": graph '" << m->entry()->name() << "' ("
      << m->entry()->parameters().size() << " inputs, " << m->weights().size() << " weights"
      << blocks << ")\n";
  return absl::OkStatus();
}

// export-onnx FILE -o OUT.onnx [--graph G]: a first-order graph as ONNX opset 17.
absl::Status Export(const ParsedArgs& args, std::ostream& out) {
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, LoadFileArgument(args, "export-onnx", "OUT.onnx"));
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* g, SelectGraph(*m, args));
  KGRAD_RETURN_IF_ERROR(ExportOnnxFile(*m, g, args.Get("output")));
  out << "wrote " << args.Get("output") << ": graph '" << g->name() << "' as ONNX opset "
      << kOnnxExportOpset << "\n";
  return absl::OkStatus();
}

}  // namespace

int ImportOnnxCommand(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  return CommandMain(argv, {"output", "remat"}, {}, Import, out, err);
}

int ExportOnnxCommand(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  return CommandMain(argv, {"output", "graph"}, {}, Export, out, err);
}

// onnx-ops: README's table of supported ONNX ops.
int OnnxOpsCommand(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  absl::StatusOr<ParsedArgs> args = ParseArgs(argv, {}, {});
  if (!args.ok()) return Fail(args.status(), err);
  if (!args->positional.empty()) return Fail(absl::InvalidArgumentError("onnx-ops takes no arguments"), err);
  out << SupportedOnnxOpsMarkdown();
  return 0;
}

}  // namespace cli
}  // namespace kgrad
