// Where float32 loses precision, node by node: a differentiated program is run
// once in float32 and once in float64 at the same inputs (the float32 values,
// widened), and every kernel application's float32 value is compared with its
// float64 one. `kgrad check FILE --precision` prints the report.
//
// The program is value_and_grad of the graph's output (a floating scalar, such
// as a loss; otherwise <u, output> with a seeded random u) with respect to its
// floating inputs and weights, optimised as `kgrad grad --optimize` writes it,
// so its applications are the forward values and the sensitivities the
// training step computes. For each application the report gives
//   value error  its float32 value against its float64 value: max|a - b| / max|b|
//                (the tensor's largest magnitude; absolute when that is 0);
//   local error  the float32 kernel against the float64 kernel applied to the
//                same float32 inputs (widened): the rounding the kernel itself
//                adds, whatever it was handed;
//   inherited    per input, the value error of the float64 kernel given that one
//                input from the float32 run and the others from the float64
//                run: how much of the error the input brought (amplified or
//                damped by the operation);
//   flipped      for boolean and integer outputs (masks, argmax indices): the
//                elements that differ between the runs, i.e. a kink (a relu at
//                0, a max over near ties) that float32 rounding crossed.
// From the worst gradient the report follows, application by application, the
// input that brought most of the error, back to where the error began: a
// crossed kink (flipped elements), a kernel that loses precision (a local error
// far above float32's rounding, about 6e-8 relative), or ordinary rounding
// amplified along the way (the trail shows by how much at each step).
//
// Applications inside loops are compared occurrence by occurrence. Every value
// of the float32 run is held to the end (memory: all intermediate values of one
// run at once).
#ifndef KGRAD_TOOLS_PRECISION_REPORT_H_
#define KGRAD_TOOLS_PRECISION_REPORT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/module.h"
#include "core/value.h"

namespace kgrad {

struct PrecisionOptions {
  uint64_t seed = 0;      // for u when the output is not a scalar
  bool weights = true;    // differentiate the floating weights too
  int top = 12;           // rows per table in ToString
};

struct ApplicationError {
  std::string graph;        // the graph that holds the application
  std::string text;         // its line: "%y = callee(args) : type"
  bool backward = false;    // in the gradient part (not on the path to the value)
  int64_t occurrence = 0;   // 0, 1, ...: the how-manyth run of the application
  int64_t step = 0;         // its position among all kernel applications of the run
  int64_t elements = 0;
  double value_error = 0;
  double local_error = -1;  // -1: not a floating tensor (or inputs not tensors)
  int64_t flipped = -1;     // >= 0 for boolean and integer tensor outputs
  // The input that brought most of the error: its step (-1: none brought any)
  // and its inherited error (see above).
  int64_t blamed = -1;
  double inherited = 0;
  // That input crossed a kink of this operation: the kernel halfway between
  // the input's two values gives none or all of the inherited error, not half
  // (a relu_grad's mask, a max-pool's argmax, a jump).
  bool kink = false;
};

struct PrecisionReport {
  std::string program;  // the differentiated graph
  // In run order, every kernel application with a tensor output.
  std::vector<ApplicationError> applications;
  // The loss ("value") and each gradient by its input or weight name, with the
  // error of max|a - b| / max(1, max|b|) (the one the float32 studies quote).
  std::vector<std::pair<std::string, double>> outputs;
  // Steps from the application that computes the worst gradient back to where
  // its error began (following `blamed`).
  std::vector<int64_t> trail;

  // The summary, the trail of the worst gradient's error with the verdict, the
  // kinks crossed and the largest local errors.
  std::string ToString(int top = 12) const;
};

// `module` holds `fg` in float32; `args` are its float32 inputs. The module is
// given the program (value_and_grad of fg) and left otherwise unchanged.
absl::StatusOr<PrecisionReport> ReportPrecision(Module& module, FuncGraph* fg,
                                                const std::vector<Value>& args,
                                                const PrecisionOptions& options = {});

// max|a - b| / max|b| over two tensors of one shape (absolute when max|b| = 0,
// infinite where only one is NaN), and with a floor of 1 on the denominator.
double NormwiseError(const Tensor& a, const Tensor& b);
double ErrorAgainstOne(const Tensor& a, const Tensor& b);

}  // namespace kgrad

#endif  // KGRAD_TOOLS_PRECISION_REPORT_H_
