// The tests every PyTorch-exported fixture gets (a value-parameterised abstract
// suite, defined in onnx_fixture_suite.cc): import it, run it and compare with
// torch's output; differentiate it with kgrad (inputs and weights, torch's
// cotangent), the gradient graph optimised or not, and compare with
// torch.autograd's gradients. A test file instantiates it with its fixtures:
//
//   INSTANTIATE_TEST_SUITE_P(Torch, OnnxFixtureTest, ::testing::Values(...), FixtureName);
#ifndef KGRAD_TESTS_ONNX_ONNX_FIXTURE_SUITE_H_
#define KGRAD_TESTS_ONNX_ONNX_FIXTURE_SUITE_H_

#include <ostream>
#include <string>

#include "gtest/gtest.h"

namespace kgrad {
namespace onnx_test {

struct Fixture {
  const char* name;
  int num_inputs;
  double tol;  // for ExpectClose, relative to the tensor's scale
};

inline std::ostream& operator<<(std::ostream& os, const Fixture& f) { return os << f.name; }

// The fixture's name as the test's name.
inline std::string FixtureName(const ::testing::TestParamInfo<Fixture>& i) { return i.param.name; }

class OnnxFixtureTest : public ::testing::TestWithParam<Fixture> {};

}  // namespace onnx_test
}  // namespace kgrad

#endif  // KGRAD_TESTS_ONNX_ONNX_FIXTURE_SUITE_H_
