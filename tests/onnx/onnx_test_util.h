// Shared by the ONNX tests: fixture files under tests/onnx/data (written by
// make_fixtures.py), import with the CPU evaluator, and tensor comparison.
#ifndef KGRAD_TESTS_ONNX_ONNX_TEST_UTIL_H_
#define KGRAD_TESTS_ONNX_ONNX_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/constant_evaluator.h"
#include "core/module.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "proto/onnx/onnx_import.h"
#include "tools/npy.h"

namespace kgrad {
namespace onnx_test {

inline std::string DataPath(const std::string& file) { return "tests/onnx/data/" + file; }

inline bool Exists(const std::string& path) { return std::ifstream(path).good(); }

inline absl::StatusOr<std::unique_ptr<Module>> ImportFixture(const std::string& name) {
  OnnxImportOptions o;
  return ImportOnnxFile(DataPath(name + ".onnx"), DefaultRegistry(), o);
}

inline Tensor Npy(const std::string& file) {
  absl::StatusOr<Tensor> t = ReadNpyFile(DataPath(file));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : Tensor();
}

// max |got - want| / max(max |want|, 1e-6): a norm-wise relative error, so that
// entries near zero (a softmax gradient sums to zero) are judged against the scale
// of the whole tensor, as float32 round-off is.
inline double RelError(const Tensor& got, const Tensor& want) {
  double err = 0, scale = 1e-6;
  for (int64_t i = 0; i < want.NumElements(); ++i) {
    err = std::max(err, std::abs(got.ElementAsDouble(i) - want.ElementAsDouble(i)));
    scale = std::max(scale, std::abs(want.ElementAsDouble(i)));
  }
  return err / scale;
}

inline void ExpectClose(const Value& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_TRUE(got.is_tensor()) << what << ": got " << got.TypeString();
  ASSERT_EQ(got.tensor().TypeString(), want.TypeString()) << what;
  double e = RelError(got.tensor(), want);
  EXPECT_LE(e, tol) << what << ": relative error " << e << "\n got  " << got.tensor().DebugString(12)
                    << "\n want " << want.DebugString(12);
}

}  // namespace onnx_test
}  // namespace kgrad

#endif  // KGRAD_TESTS_ONNX_ONNX_TEST_UTIL_H_
