// Inference tests of the reduce primitives: output dtypes and shapes for axes,
// negative axes, keepdims and unknown dims, flags, and the error cases.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/abstract.h"
#include "core/primitive.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/op_test_util.h"

namespace kgrad {
namespace testing {
namespace {

using ::testing::HasSubstr;

struct ReduceCase {
  PrimId id;
  std::vector<DType> accepted;
  bool needs_elements;  // max/min: an empty reduction is an error
};

const std::vector<ReduceCase>& Cases() {
  static const auto* cases = new std::vector<ReduceCase>{
      {PrimId::kReduceSum, {kF32, kF64, kI32, kI64}, false},
      {PrimId::kReduceProd, {kF32, kF64, kI32, kI64}, false},
      {PrimId::kReduceMean, {kF32, kF64}, false},
      {PrimId::kReduceMax, {kF32, kF64, kI32, kI64}, true},
      {PrimId::kReduceMin, {kF32, kF64, kI32, kI64}, true},
      {PrimId::kLogsumexp, {kF32, kF64}, false},
  };
  return *cases;
}

AttrMap Axis(int64_t axis, bool keepdims = false) {
  return {{"axis", axis}, {"keepdims", keepdims}};
}

TEST(ReduceInferTest, DefaultsReduceEverything) {
  for (const ReduceCase& c : Cases()) {
    SCOPED_TRACE(PrimIdName(c.id));
    for (DType t : c.accepted) {
      ExpectTensor(InferOp(c.id, {T(t, {2, 3, 4})}), t, {});
      ExpectTensor(InferOp(c.id, {T(t, {2, 3, 4})}, {{"keepdims", true}}), t, {1, 1, 1});
      ExpectTensor(InferOp(c.id, {T(t, {})}), t, {});
    }
  }
}

TEST(ReduceInferTest, AxesKeepdimsAndNegativeAxes) {
  for (const ReduceCase& c : Cases()) {
    SCOPED_TRACE(PrimIdName(c.id));
    ExpectTensor(InferOp(c.id, {T(kF32, {2, 3, 4})}, Axes({1})), kF32, {2, 4});
    ExpectTensor(InferOp(c.id, {T(kF32, {2, 3, 4})}, Axes({-1})), kF32, {2, 3});
    ExpectTensor(InferOp(c.id, {T(kF32, {2, 3, 4})}, Axes({2, 0})), kF32, {3});
    ExpectTensor(InferOp(c.id, {T(kF32, {2, 3, 4})}, Axes({0, -1}, true)), kF32, {1, 3, 1});
    ExpectTensor(InferOp(c.id, {T(kF64, {2, 3, 4})}, Axes({0, 1, 2})), kF64, {});
  }
}

TEST(ReduceInferTest, UnknownDimsPassThrough) {
  for (const ReduceCase& c : Cases()) {
    SCOPED_TRACE(PrimIdName(c.id));
    ExpectTensor(InferOp(c.id, {T(kF32, {kU, 3, kU})}, Axes({1})), kF32, {kU, kU});
    ExpectTensor(InferOp(c.id, {T(kF32, {kU, 3, kU})}, Axes({0}, true)), kF32, {1, 3, kU});
  }
}

TEST(ReduceInferTest, EmptyAxes) {
  for (const ReduceCase& c : Cases()) {
    SCOPED_TRACE(PrimIdName(c.id));
    absl::StatusOr<AbstractPtr> r = InferOp(c.id, {T(kF32, {0, 3})}, Axes({0}));
    absl::StatusOr<AbstractPtr> all = InferOp(c.id, {T(kF32, {2, 0})});
    if (c.needs_elements) {
      ExpectError(r, "empty axis");
      ExpectError(r, "axis 0 of f32[0,3]");
      ExpectError(all, "axis 1 of f32[2,0]");
    } else {
      ExpectTensor(r, kF32, {3});
      ExpectTensor(all, kF32, {});
    }
    // Reducing a non-empty axis of an empty tensor is fine for every reduction.
    ExpectTensor(InferOp(c.id, {T(kF32, {0, 3})}, Axes({1})), kF32, {0});
  }
}

TEST(ReduceInferTest, Errors) {
  for (const ReduceCase& c : Cases()) {
    SCOPED_TRACE(PrimIdName(c.id));
    ExpectError(InferOp(c.id, {T(kF32, {2, 3})}, Axes({2})), "out of range");
    ExpectError(InferOp(c.id, {T(kF32, {2, 3})}, Axes({-3})), "out of range");
    ExpectError(InferOp(c.id, {T(kF32, {2, 3})}, Axes({1, -1})), "repeated");
    ExpectError(InferOp(c.id, {T(kF32, {})}, Axes({0})), "out of range");
    ExpectError(InferOp(c.id, {MakeAbstractScalar(kF32)}), "input 0 must be a tensor");
    for (DType t : {kF32, kF64, kI32, kI64, kBool}) {
      if (std::find(c.accepted.begin(), c.accepted.end(), t) != c.accepted.end()) continue;
      ExpectError(InferOp(c.id, {T(t, {2})}),
                  std::string("tensor, got ") + DTypeName(t) + "[2]");
    }
    absl::StatusOr<AbstractPtr> bad_attr =
        InferOp(c.id, {T(kF32, {2})}, {{"axes", int64_t{0}}});
    ASSERT_FALSE(bad_attr.ok());
    EXPECT_THAT(std::string(bad_attr.status().message()), HasSubstr("axes"));
  }
}

TEST(ArgReduceInferTest, ShapesAndDType) {
  for (PrimId id : {PrimId::kArgmax, PrimId::kArgmin}) {
    SCOPED_TRACE(PrimIdName(id));
    for (DType t : {kF32, kF64, kI32, kI64}) {
      ExpectTensor(InferOp(id, {T(t, {2, 3, 4})}), kI64, {2, 3});
    }
    ExpectTensor(InferOp(id, {T(kF32, {2, 3, 4})}, Axis(0)), kI64, {3, 4});
    ExpectTensor(InferOp(id, {T(kF32, {2, 3, 4})}, Axis(-2, true)), kI64, {2, 1, 4});
    ExpectTensor(InferOp(id, {T(kF32, {kU, 5})}, Axis(1)), kI64, {kU});
    ExpectTensor(InferOp(id, {T(kF32, {kU, 5})}, Axis(0)), kI64, {5});
    ExpectTensor(InferOp(id, {T(kF32, {7})}), kI64, {});
    ExpectTensor(InferOp(id, {T(kF32, {0, 7})}, Axis(1)), kI64, {0});
  }
}

TEST(ArgReduceInferTest, Errors) {
  for (PrimId id : {PrimId::kArgmax, PrimId::kArgmin}) {
    SCOPED_TRACE(PrimIdName(id));
    ExpectError(InferOp(id, {T(kF32, {2, 3})}, Axis(2)), "out of range");
    ExpectError(InferOp(id, {T(kF32, {2, 3})}, Axis(-3)), "out of range");
    ExpectError(InferOp(id, {T(kF32, {})}), "out of range for rank 0");
    ExpectError(InferOp(id, {T(kF32, {2, 0})}), "empty axis");
    ExpectError(InferOp(id, {T(kBool, {2})}), "got bool[2]");
    ExpectError(InferOp(id, {MakeAbstractScalar(kF32)}), "input 0 must be a tensor");
  }
}

TEST(ReduceInferTest, FlagsAndCoverage) {
  for (int i = static_cast<int>(PrimId::kReduceSum); i <= static_cast<int>(PrimId::kLogsumexp);
       ++i) {
    PrimId id = static_cast<PrimId>(i);
    const PrimitiveDef* def = DefaultRegistry().Find(id);
    ASSERT_NE(def, nullptr) << PrimIdName(id);
    EXPECT_TRUE(def->zero_gradient || def->bprop != nullptr) << PrimIdName(id);  // rules: tests/ad/
    EXPECT_EQ(def->linear, id == PrimId::kReduceSum || id == PrimId::kReduceMean)
        << PrimIdName(id);
    EXPECT_EQ(def->zero_gradient, id == PrimId::kArgmax || id == PrimId::kArgmin)
        << PrimIdName(id);
    bool covered = id == PrimId::kArgmax || id == PrimId::kArgmin;
    for (const ReduceCase& c : Cases()) covered = covered || c.id == id;
    EXPECT_TRUE(covered) << PrimIdName(id);
  }
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
