#include "tests/cuda/compare.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace kgrad {
namespace testing {
namespace {

bool Close(double a, double e, Tolerance tol) {
  if (std::isnan(a) || std::isnan(e)) return std::isnan(a) && std::isnan(e);
  if (std::isinf(a) || std::isinf(e)) return a == e;
  return std::abs(a - e) <= tol.atol + tol.rtol * std::abs(e);
}

}  // namespace

Tolerance DefaultTolerance(DType dtype) {
  if (dtype == DType::kFloat32) return {1e-4, 1e-5};
  return {1e-9, 1e-11};
}

::testing::AssertionResult ValuesClose(const Value& actual, const Value& expected,
                                       Tolerance tol) {
  if (actual.kind() != expected.kind()) {
    return ::testing::AssertionFailure()
           << "kinds differ: " << actual.TypeString() << " vs " << expected.TypeString();
  }
  if (actual.is_tuple()) {
    if (actual.tuple().size() != expected.tuple().size()) {
      return ::testing::AssertionFailure() << "tuple sizes differ";
    }
    for (size_t i = 0; i < actual.tuple().size(); ++i) {
      ::testing::AssertionResult r = ValuesClose(actual.tuple()[i], expected.tuple()[i], tol);
      if (!r) return ::testing::AssertionFailure() << "element " << i << ": " << r.message();
    }
    return ::testing::AssertionSuccess();
  }
  if (!actual.is_tensor()) {
    if (ValuesEqual(actual, expected)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << actual.ToString() << " != " << expected.ToString();
  }
  const Tensor& a = actual.tensor();
  const Tensor& e = expected.tensor();
  if (a.dtype() != e.dtype() || a.shape() != e.shape()) {
    return ::testing::AssertionFailure()
           << "got " << a.TypeString() << ", expected " << e.TypeString();
  }
  const bool exact = !IsFloating(a.dtype());
  int bad = 0;
  std::string first;
  for (int64_t i = 0; i < a.NumElements(); ++i) {
    const double x = a.ElementAsDouble(i), y = e.ElementAsDouble(i);
    const bool ok = exact ? x == y : Close(x, y, tol);
    if (!ok && bad++ == 0) {
      first = absl::StrCat("element ", i, ": got ", x, ", expected ", y);
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << a.NumElements() << " elements of "
                                       << a.TypeString() << " differ; first " << first;
}

}  // namespace testing
}  // namespace kgrad
