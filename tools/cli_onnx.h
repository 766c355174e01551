// The CLI's ONNX commands: import-onnx, export-onnx and onnx-ops.
#ifndef KGRAD_TOOLS_CLI_ONNX_H_
#define KGRAD_TOOLS_CLI_ONNX_H_

#include <ostream>
#include <string>
#include <vector>

namespace kgrad {
namespace cli {

int ImportOnnxCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int ExportOnnxCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int OnnxOpsCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace cli
}  // namespace kgrad

#endif  // KGRAD_TOOLS_CLI_ONNX_H_
