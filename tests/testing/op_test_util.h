// Helpers for op tests: inference of one primitive, one CPU kernel call, random
// tensors, comparisons against naive references, and the expectations the op,
// kernel and gradient tests share (a result's type, an error's code and text).
//
// Test files put their tests in `namespace kgrad { namespace testing { namespace {`
// so that these names need no using-declarations.
#ifndef KGRAD_TESTS_TESTING_OP_TEST_UTIL_H_
#define KGRAD_TESTS_TESTING_OP_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/abstract.h"
#include "core/primitive.h"
#include "core/tensor.h"
#include "core/value.h"
#include "gtest/gtest.h"

namespace kgrad {
namespace testing {

// Shorthands.
inline constexpr DType kF32 = DType::kFloat32;
inline constexpr DType kF64 = DType::kFloat64;
inline constexpr DType kI32 = DType::kInt32;
inline constexpr DType kI64 = DType::kInt64;
inline constexpr DType kBool = DType::kBool;
inline constexpr int64_t kU = kUnknownDim;
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
using Ints = std::vector<int64_t>;

// The attributes of a reduction over `axes` (empty: all).
AttrMap Axes(Ints axes, bool keepdims = false);

// ----- Inference ----------------------------------------------------------------------
// Inference of `id` with `attrs` on `args`.
absl::StatusOr<AbstractPtr> InferOp(PrimId id, const std::vector<AbstractPtr>& args,
                                    AttrMap attrs = {});
AbstractPtr T(DType dtype, Shape shape);  // shorthand for MakeAbstractTensor

// The inferred type as "f32[2,3]", or "error: <message>" (which never matches a type).
std::string Inferred(PrimId id, const std::vector<AbstractPtr>& args, AttrMap attrs = {});
// The tensor type as Inferred prints it.
std::string TypeOf(DType dtype, Shape shape);
// The status of the inference (OK when it succeeds).
absl::Status InferError(PrimId id, const std::vector<AbstractPtr>& args, AttrMap attrs = {});

// Asserts that `r` is a tensor of `dtype` and `shape`.
void ExpectTensor(const absl::StatusOr<AbstractPtr>& r, DType dtype, const Shape& shape);

// Asserts an error of `code` whose message contains `text` (the StatusOr forms
// first assert that there is an error).
void ExpectError(const absl::Status& s, const std::string& text,
                 absl::StatusCode code = absl::StatusCode::kInvalidArgument);
void ExpectError(const absl::StatusOr<AbstractPtr>& r, const std::string& text,
                 absl::StatusCode code = absl::StatusCode::kInvalidArgument);
void ExpectError(const absl::StatusOr<Value>& r, const std::string& text,
                 absl::StatusCode code = absl::StatusCode::kInvalidArgument);
template <typename T>
void ExpectError(const absl::StatusOr<T>& r, const std::string& text,
                 absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
  ASSERT_FALSE(r.ok()) << "expected an error mentioning '" << text << "'";
  ExpectError(r.status(), text, code);
}

// Asserts an error whose message contains each of `texts`, of `code` when given
// (the StatusOr form first asserts that there is an error).
void ExpectFailure(const absl::Status& s, const std::vector<std::string>& texts,
                   std::optional<absl::StatusCode> code = std::nullopt);
template <typename T>
void ExpectFailure(const absl::StatusOr<T>& r, const std::vector<std::string>& texts,
                   std::optional<absl::StatusCode> code = std::nullopt) {
  ASSERT_FALSE(r.ok()) << "expected an error";
  ExpectFailure(r.status(), texts, code);
}

// ----- CPU kernels ----------------------------------------------------------------------
// Runs the CPU kernel of `id` with `attrs` on `inputs`.
absl::StatusOr<Value> RunCpuKernel(PrimId id, std::vector<Value> inputs, AttrMap attrs = {});

// Runs one kernel that must succeed with a tensor (a failure names `what`, or the
// primitive); on failure an undefined Tensor().
Tensor RunOk(PrimId id, std::vector<Value> inputs, AttrMap attrs = {},
             const std::string& what = "");

// Asserts that the kernel fails with `code` and a message containing `text`.
void ExpectRunError(PrimId id, std::vector<Value> inputs, AttrMap attrs, const std::string& text,
                    absl::StatusCode code = absl::StatusCode::kInvalidArgument);

// Relative tolerance of a kernel's result against a float64 reference: 1e-5 in
// f32 (which accumulates in f32), 1e-12 otherwise.
double KernelTolerance(DType dtype);

// Asserts that `got` is a tensor of `dtype` and `shape` with as many elements as
// `want`, element i within tol(i) of want[i] (tol 0: equal).
void ExpectTensorNear(const absl::StatusOr<Value>& got, DType dtype, const Shape& shape,
                      const std::vector<double>& want, const std::function<double(size_t)>& tol);

// ----- Tensors ----------------------------------------------------------------------------
// Random tensors from a seeded generator: uniform in [lo, hi).
Tensor RandomTensor(DType dtype, Shape shape, std::mt19937_64& rng, double lo = -1.0,
                    double hi = 1.0);
// Row-major contents as doubles.
std::vector<double> ToDoubles(const Tensor& t);

// Row-major coordinates of element `flat` of `shape`, and back (for reference
// implementations of indexing ops).
Shape Unravel(const Shape& shape, int64_t flat);
int64_t Ravel(const Shape& shape, const Shape& coords);
// A host tensor of `dtype` with `values` (converted).
Tensor MakeTensor(DType dtype, Shape shape, const std::vector<double>& values);
// An int64 scalar, and a float64 vector.
Value I(int64_t v);
Value Vec(std::vector<double> v);
// MakeTensor as a Value, in float64 and int64.
Value F64(Shape shape, const std::vector<double>& values);
Value I64(Shape shape, const std::vector<double>& values);

// Max |a - b| over elements; shapes must match (else +inf).
double MaxAbsDiff(const Tensor& a, const std::vector<double>& expected);
// Max |v| (0 for none).
double MaxAbs(const std::vector<double>& v);

// Runs the CPU kernel of `id` on 1, 2, 3 and 5 OpenMP threads and expects the
// same bits every time (a caller's share of the cores changes with the runs
// beside it, and results must not); the caller's thread count is restored.
void ExpectSameOnAnyThreadCount(PrimId id, const std::vector<Value>& inputs, const AttrMap& attrs = {});

}  // namespace testing
}  // namespace kgrad

#endif  // KGRAD_TESTS_TESTING_OP_TEST_UTIL_H_
