#include "tools/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kgrad {
namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<double> Values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.NumElements(); ++i) v.push_back(t.ElementAsDouble(i));
  return v;
}

struct Fixture {
  const char* file;
  DType dtype;
  // A vector, not a Shape: GCC 12 warns falsely (-Wmaybe-uninitialized) on
  // copying an InlinedVector member of a test parameter.
  std::vector<int64_t> shape;
  std::vector<double> values;
};

class NpyFixtureTest : public ::testing::TestWithParam<Fixture> {};

// The fixtures were written by NumPy (tests/tools/make_npy_fixtures.py).
TEST_P(NpyFixtureTest, ReadsNumpyFilesAndWritesTheSameBytes) {
  const Fixture& f = GetParam();
  std::string bytes = ReadFile(std::string("tests/tools/testdata/") + f.file);
  ASSERT_FALSE(bytes.empty());
  absl::StatusOr<Tensor> t = ParseNpy(bytes, f.file);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), f.dtype);
  EXPECT_EQ(t->shape(), Shape(f.shape.begin(), f.shape.end()));
  EXPECT_EQ(Values(*t), f.values);
  EXPECT_EQ(SerializeNpy(*t), bytes);
}

INSTANTIATE_TEST_SUITE_P(
    NumpyWritten, NpyFixtureTest,
    ::testing::Values(
        Fixture{"f32_2x3.npy", DType::kFloat32, {2, 3}, {-1, -0.5, 0, 0.5, 1, 1.5}},
        Fixture{"f64_4.npy", DType::kFloat64, {4}, {1.0, -2.5, 3.25, 1e-300}},
        Fixture{"i32_scalar.npy", DType::kInt32, {}, {-7}},
        Fixture{"i64_2x1x2.npy", DType::kInt64, {2, 1, 2}, {1, 2, 3, -4}},
        Fixture{"bool_3.npy", DType::kBool, {3}, {1, 0, 1}},
        Fixture{"f32_0x3.npy", DType::kFloat32, {0, 3}, {}}));

TEST(NpyTest, RejectsBadFilesWithAStatus) {
  std::string good = ReadFile("tests/tools/testdata/f32_2x3.npy");
  EXPECT_THAT(ParseNpy("hello", "x.npy").status().message(), HasSubstr("bad magic"));
  EXPECT_THAT(ParseNpy(good.substr(0, good.size() - 1), "x.npy").status().message(),
              HasSubstr("data is 23 bytes"));
  // The good file with one edit to its header: the error says what is wrong.
  struct Edit {
    const char* from;
    const char* to;
    const char* error;  // "": any error
  };
  const Edit edits[] = {
      {"<f4", "<f2", "data is 24 bytes, f16[2,3] needs 12"},  // a known dtype: the size no longer matches
      {"<f4", "<c8", "unsupported dtype '<c8'"},
      {"<f4", ">f4", "big-endian"},
      {"False", "True ", "Fortran"},
      {"(2, 3)", "(99999999999, 99999999999)", ""},
  };
  for (const Edit& e : edits) {
    std::string bad = good;
    bad.replace(bad.find(e.from), std::strlen(e.from), e.to);
    absl::StatusOr<Tensor> t = ParseNpy(bad, "x.npy");
    EXPECT_FALSE(t.ok()) << e.to;
    EXPECT_THAT(t.status().message(), HasSubstr(e.error));
  }
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(ParseNpy(good.substr(0, n), "cut.npy").ok()) << n;
  }
}

}  // namespace
}  // namespace kgrad
