// One ONNX node test (model.onnx and test_data_set_*/{input,output}_*.pb), run
// in the calling process: imported, run on the CPU, compared as ONNX's backend
// runner compares, and gradient-checked as `kgrad check` checks. The runner calls
// these in a forked child, so that a crash or a hang costs one test, not the run.
#ifndef KGRAD_TESTS_CONFORMANCE_CONFORMANCE_CASE_H_
#define KGRAD_TESTS_CONFORMANCE_CONFORMANCE_CASE_H_

#include <memory>
#include <string>
#include <vector>

#include "core/module.h"
#include "core/value.h"
#include "onnx_proto/onnx.pb.h"

namespace kgrad {
namespace conformance {

// kPass: ran and matched. kWrong: ran, but a dtype, shape or value differs.
// kRefused: a Status from import, loading the data or running. kCrash: the child
// died (a signal, an abort, a timeout); only the parent sees that.
enum class Outcome { kPass, kWrong, kRefused, kCrash };
// The gradient check of a passing test whose inputs are all floating point;
// kNotRun for the others.
enum class CheckOutcome { kNotRun, kPass, kFail, kRefused, kCrash };

const char* OutcomeName(Outcome o);
const char* CheckOutcomeName(CheckOutcome o);

struct Verdict {
  Outcome outcome = Outcome::kPass;
  std::string detail;  // what differed, or the first line of the Status
};

// ONNX backend test tolerances (onnx/backend/test/runner: rtol=1e-3, atol=1e-7).
struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-7;
};

// "" when `got` matches `want` (the dtype, the shape, NaN at the same positions,
// |got - want| <= atol + rtol * |want| for floats, equality for the others), else
// what differs.
std::string CompareTensor(const Value& got, const onnx::TensorProto& want, const Tolerance& tol);
// The same for two lists (sequences and optionals: onnx_sequence_data.h), element
// by element; the message names the element ("element 1.0: shape: ...").
std::string CompareLists(const Value& got, const Value& want, const Tolerance& tol);
// The same for the output file `want_file` of ONNX type `type` (a tensor, a
// sequence or an optional); for other types the result starts with "refused: ".
std::string CompareOutput(const Value& got, const std::string& want_file, const onnx::TypeProto& type,
                          const Tolerance& tol);

// The imported test after its run: what the gradient check needs.
struct CaseRun {
  Verdict verdict;
  std::unique_ptr<Module> module;
  std::vector<Value> first_inputs;  // test_data_set_0's (less the folded ones)
};

// Imports dir/model.onnx and runs every data set in it. With
// `fold_integer_inputs`, each data set's int32/int64 inputs become initializers
// (constants) before import, as PyTorch's exporter writes shapes, axes, pads and
// repeats: the node tests feed them as graph inputs, which the importer refuses
// where it needs them at import time.
CaseRun RunTest(const std::string& dir, const Tolerance& tol, bool fold_integer_inputs = false);

// The check `kgrad check` runs (tools/grad_check: reverse and forward mode against
// central differences, float64), at the test's first inputs widened to float64,
// with a fixed seed. kNotRun unless the run passed and every input (at least one)
// is a floating-point tensor.
struct CheckVerdict {
  CheckOutcome outcome = CheckOutcome::kNotRun;
  std::string detail;
};
CheckVerdict CheckTest(CaseRun& run);

}  // namespace conformance
}  // namespace kgrad

#endif  // KGRAD_TESTS_CONFORMANCE_CONFORMANCE_CASE_H_
