// Writes the elementwise table's one-node graphs (onnx_elementwise_cases.h) for
// ort_export_test.sh to run in ONNX Runtime: for each float32 and bool case,
//   DIR/NAME/model.onnx      the graph exported by kgrad
//   DIR/NAME/in<i>.npy       its inputs, inside every op's domain (no NaN: the
//                            comparison of tools/ort/ort_run.js cannot judge it)
//   DIR/NAME/kgrad/out.npy   the primitive's CPU kernel on them
// and prints the names. Usage: write_elementwise_cases DIR
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/executor.h"
#include "ops/registry.h"
#include "proto/onnx/onnx_export.h"
#include "tests/onnx/onnx_elementwise_cases.h"
#include "tools/npy.h"

namespace kgrad {
namespace onnx_test {
namespace {

absl::Status WriteCase(const ElementwiseCase& c, const std::string& dir) {
  Module m(DefaultRegistry());
  absl::StatusOr<FuncGraph*> g = BuildCase(m, c);
  if (!g.ok()) return g.status();
  std::vector<Value> args(c.inputs.begin(), c.inputs.end());
  absl::StatusOr<Value> want = RunGraph(*g, args);
  if (!want.ok()) return want.status();
  std::error_code ec;
  std::filesystem::create_directories(dir + "/kgrad", ec);
  if (ec) return absl::InternalError(absl::StrCat(dir, ": ", ec.message()));
  absl::Status s = ExportOnnxFile(m, *g, dir + "/model.onnx");
  for (size_t i = 0; s.ok() && i < c.inputs.size(); ++i) {
    s = WriteNpyFile(c.inputs[i], absl::StrCat(dir, "/in", i, ".npy"));
  }
  if (s.ok()) s = WriteNpyFile(want->tensor(), dir + "/kgrad/out.npy");
  return s;
}

int Main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: write_elementwise_cases DIR\n";
    return 2;
  }
  for (const ElementwiseCase& c : ElementwiseCases(/*specials=*/false)) {
    if (c.dtype != DType::kFloat32 && c.dtype != DType::kBool) continue;
    absl::Status s = WriteCase(c, absl::StrCat(argv[1], "/", c.name));
    if (!s.ok()) {
      std::cerr << c.name << ": " << s << "\n";
      return 1;
    }
    std::cout << c.name << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace onnx_test
}  // namespace kgrad

int main(int argc, char** argv) { return kgrad::onnx_test::Main(argc, argv); }
