// One-node graphs of every row of ops/elementwise_table.inc, for the export tests
// (onnx_elementwise_export_test.cc in kgrad, ort_export_test.sh in ONNX Runtime):
// each dtype the row takes among float32 and float64 (a row that takes neither:
// its own, bool or uint8 and uint32; a row without an ONNX name also int32 and bool
// where it takes them, for the integer forms of its formula), and each mode of its
// attributes.
#ifndef KGRAD_TESTS_ONNX_ONNX_ELEMENTWISE_CASES_H_
#define KGRAD_TESTS_ONNX_ONNX_ELEMENTWISE_CASES_H_

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/module.h"
#include "core/primitive.h"

namespace kgrad {
namespace onnx_test {

// A row of the table.
struct ElementwiseRow {
  PrimId id;
  const char* wire;
  int arity;
  bool onnx_twin;  // the row names an ONNX op (exported one-to-one)
};
std::vector<ElementwiseRow> ElementwiseRows();

// The attribute modes a row is exported in ({"", {}} for a row without attributes):
// gelu approximate false/true, mod fmod false/true, bit_shift left/right,
// thresholded_relu alpha 0.5 and -1 (names: letters, digits, _).
std::vector<std::pair<std::string, AttrMap>> AttrModes(PrimId id);

struct ElementwiseCase {
  std::string name;  // "mod_f32_python"
  ElementwiseRow row;
  DType dtype;       // of the value operands
  AttrMap attrs;
  std::vector<Tensor> inputs;
};

// Every row's cases on seeded random inputs. `specials`: with NaN, +-0, halves and
// exact multiples among the float inputs (and shifts by the width or more among
// the unsigned ones), in [-3, 3]; without, finite values inside every op's domain
// (ONNX Runtime's comparison cannot judge NaN).
std::vector<ElementwiseCase> ElementwiseCases(bool specials);

// gtest prints a case by its name.
void PrintTo(const ElementwiseCase& c, std::ostream* os);

// The case's graph in m: f(x0, x1, ...) = prim{attrs}(x0, x1, ...).
absl::StatusOr<FuncGraph*> BuildCase(Module& m, const ElementwiseCase& c);

}  // namespace onnx_test
}  // namespace kgrad

#endif  // KGRAD_TESTS_ONNX_ONNX_ELEMENTWISE_CASES_H_
