// Pieces the CLI commands share: loading a model, reading inputs, summarising and
// writing outputs.
#ifndef KGRAD_TOOLS_CLI_COMMON_H_
#define KGRAD_TOOLS_CLI_COMMON_H_

#include <functional>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/module.h"
#include "tools/cli_args.h"

namespace kgrad {
namespace cli {

// A graph file or an ONNX model. With `expand`, the file's differentiation
// operators (grad(@f), J(@f), ...) are expanded into graphs
// (ad/expand_differentiation.h); without, they stay as written (printing).
absl::StatusOr<std::unique_ptr<Module>> LoadModule(const std::string& path, bool expand = true);
// The graph named by --graph, or the module's entry.
absl::StatusOr<FuncGraph*> SelectGraph(Module& m, const ParsedArgs& args);

// --remat POLICY (kgrad grad, kgrad bench --grad): every graph that `g` reaches
// (not g itself) becomes a checkpointed segment whose bprop recomputes what the
// policy does not save (ad/remat.h); a flat graph's residual blocks are outlined
// into called graphs first. Applied before differentiating; nothing without
// the option.
absl::Status ApplyRematOption(const ParsedArgs& args, Module& m, FuncGraph* g);

// Arguments for `g` from --input name=VALUE, where VALUE is a .npy path or, for a
// parameter declared scalar, a literal ("5", "2.5", "true").
absl::StatusOr<std::vector<Value>> ReadInputs(FuncGraph* g, const ParsedArgs& args);
// One input value: a .npy path, or a literal for a parameter declared scalar.
absl::StatusOr<Value> ReadOneInput(const Parameter* p, const std::string& text);
// --weight name=path.npy overrides.
absl::StatusOr<absl::flat_hash_map<std::string, Tensor>> ReadWeightOverrides(const ParsedArgs& args);

// The name of a leaf of an output: `name` and its tuple indices ("out_1_0"), or,
// for a leaf nested deeper than kMaxNamedDepth tuples, `name` and its position
// among all leaves ("out_leaf7"), so that names stay short at any depth.
inline constexpr size_t kMaxNamedDepth = 8;
std::string LeafName(const std::string& name, absl::Span<const size_t> path, int64_t ordinal);
// One line per leaf: "out_1: f32[2,3] min=.. max=.. mean=.. [v0, v1, ...]" (NaNs
// counted and left out of the statistics).
void PrintSummary(const Value& v, const std::string& name, std::ostream& out);
// Writes each tensor or scalar leaf of `v` as DIR/<leaf name>.npy.
absl::Status WriteOutputs(const Value& v, const std::string& dir, const std::string& name);

// "error: <message>" and exit status 1.
int Fail(const absl::Status& s, std::ostream& err);

// A command's body: its parsed arguments in, its report to `out`.
using CommandBody = std::function<absl::Status(const ParsedArgs& args, std::ostream& out)>;
// Parses `argv` (`with_value`: the options that take a value; `switches`: the
// flags) and runs `body`: 0, or 1 after printing the error (Fail).
int CommandMain(const std::vector<std::string>& argv, const std::set<std::string>& with_value,
                const std::set<std::string>& switches, const CommandBody& body, std::ostream& out,
                std::ostream& err);

// The module in the one FILE `command` takes. With `output` (what -o writes, as
// the usage says: "OUT (.pb or .pbtxt)"), -o must be given too.
absl::StatusOr<std::unique_ptr<Module>> LoadFileArgument(const ParsedArgs& args, absl::string_view command,
                                                         absl::string_view output = "");

}  // namespace cli
}  // namespace kgrad

#endif  // KGRAD_TOOLS_CLI_COMMON_H_
