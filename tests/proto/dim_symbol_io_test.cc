// Symbolic dims in graph files: written as `dims: -1 dim_params: "batch"`, shown
// by the printer, kept by save/load, and checked against the inputs of each run.
#include <string>

#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/printer.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "proto/model_io.h"

namespace kgrad {
namespace {

using ::testing::HasSubstr;

// out = reduce_sum((x @ w) * u): x and u share the symbol "batch".
constexpr char kSymbolic[] = R"pb(
  format_version: 1
  entry: "f"
  weights { name: "w" value { dtype: DT_FLOAT64 dims: 2 dims: 2 double_data: [1, 2, 3, 4] } }
  graphs {
    name: "f"
    parameters {
      name: "x"
      type { tensor { dtype: DT_FLOAT64 dims: -1 dims: 2 dim_params: "batch" dim_params: "" } }
    }
    parameters {
      name: "u"
      type { tensor { dtype: DT_FLOAT64 dims: -1 dims: -1 dim_params: "batch" dim_params: "?" } }
    }
    nodes { name: "matmul" constant { primitive { name: "matmul" } } }
    nodes { name: "mul" constant { primitive { name: "mul" } } }
    nodes { name: "sum" constant { primitive { name: "reduce_sum" } } }
    nodes { name: "xw" apply { inputs: ["matmul", "x", "w"] } }
    nodes { name: "p" apply { inputs: ["mul", "xw", "u"] } }
    nodes { name: "out" apply { inputs: ["sum", "p"] } }
    output: "out"
  }
)pb";

std::unique_ptr<Module> Load(const std::string& text) {
  proto::ModelProto p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p));
  absl::StatusOr<std::unique_ptr<Module>> m = LoadModel(p, DefaultRegistry(), "sym.pbtxt");
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

Tensor Ramp(int64_t rows, int64_t cols, double start) {
  std::vector<double> v(rows * cols);
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + 0.5 * i;
  return Tensor::FromVector<double>({rows, cols}, v);
}

// sum_ij (x w)_ij u_ij by hand.
double Reference(const Tensor& x, const Tensor& u) {
  const double w[2][2] = {{1, 2}, {3, 4}};
  double s = 0;
  for (int64_t i = 0; i < x.dim(0); ++i) {
    for (int j = 0; j < 2; ++j) {
      const double xw = x.data<double>()[i * 2] * w[0][j] + x.data<double>()[i * 2 + 1] * w[1][j];
      s += xw * u.data<double>()[i * 2 + j];
    }
  }
  return s;
}

TEST(DimSymbolIoTest, PrinterShowsTheNames) {
  std::unique_ptr<Module> m = Load(kSymbolic);
  ASSERT_NE(m, nullptr);
  const std::string text = PrintModule(*m);
  EXPECT_THAT(text, HasSubstr("f64[batch,2]"));
  EXPECT_THAT(text, HasSubstr("f64[batch,?]"));
}

TEST(DimSymbolIoTest, OneExecutorRunsEveryBatchSize) {
  std::unique_ptr<Module> m = Load(kSymbolic);
  ASSERT_NE(m, nullptr);
  absl::StatusOr<std::unique_ptr<Executor>> ex = Executor::Create(m->entry());
  ASSERT_TRUE(ex.ok()) << ex.status();
  for (int64_t n : {1, 4, 9}) {
    Tensor x = Ramp(n, 2, -1.0), u = Ramp(n, 2, 0.25);
    absl::StatusOr<Value> r = (*ex)->Run({Value(x), Value(u)});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_NEAR(r->tensor().data<double>()[0], Reference(x, u), 1e-9) << "batch " << n;
  }
}

TEST(DimSymbolIoTest, InputsThatDisagreeOnASymbolAreRefused) {
  std::unique_ptr<Module> m = Load(kSymbolic);
  ASSERT_NE(m, nullptr);
  absl::StatusOr<std::unique_ptr<Executor>> ex = Executor::Create(m->entry());
  ASSERT_TRUE(ex.ok()) << ex.status();
  absl::StatusOr<Value> r = (*ex)->Run({Value(Ramp(3, 2, 0)), Value(Ramp(4, 2, 0))});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  for (const char* s : {"graph 'f'", "'x' (dim 0 = 3)", "'u' (dim 0 = 4)", "size 'batch'"}) {
    EXPECT_THAT(r.status().message(), HasSubstr(s));
  }
  // The unnamed dim of u is free: [3,2] with [3,5] fails only in the kernel's broadcast.
  absl::StatusOr<Value> ok = (*ex)->Run({Value(Ramp(3, 2, 0)), Value(Ramp(3, 2, 1))});
  EXPECT_TRUE(ok.ok()) << ok.status();
}

TEST(DimSymbolIoTest, OneGradientGraphForEveryBatchSize) {
  std::unique_ptr<Module> m = Load(kSymbolic);
  ASSERT_NE(m, nullptr);
  GradOperation grad(/*get_all=*/true, /*get_by_list=*/false, /*sens_param=*/false);
  absl::StatusOr<FuncGraph*> g = grad(*m, m->entry());
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<std::unique_ptr<Executor>> ex = Executor::Create(*g);
  ASSERT_TRUE(ex.ok()) << ex.status();
  for (int64_t n : {2, 5}) {
    Tensor x = Ramp(n, 2, -1.0), u = Ramp(n, 2, 0.25);
    absl::StatusOr<Value> r = (*ex)->Run({Value(x), Value(u)});
    ASSERT_TRUE(r.ok()) << r.status();
    // d/du = x w; d/dx = u w^T.
    const Tensor& dx = r->tuple()[0].tensor();
    const Tensor& du = r->tuple()[1].tensor();
    ASSERT_EQ(dx.dim(0), n);
    for (int64_t i = 0; i < n; ++i) {
      const double* xi = x.data<double>() + 2 * i;
      const double* ui = u.data<double>() + 2 * i;
      EXPECT_NEAR(du.data<double>()[2 * i], xi[0] * 1 + xi[1] * 3, 1e-9);
      EXPECT_NEAR(du.data<double>()[2 * i + 1], xi[0] * 2 + xi[1] * 4, 1e-9);
      EXPECT_NEAR(dx.data<double>()[2 * i], ui[0] * 1 + ui[1] * 2, 1e-9);
      EXPECT_NEAR(dx.data<double>()[2 * i + 1], ui[0] * 3 + ui[1] * 4, 1e-9);
    }
  }
}

TEST(DimSymbolIoTest, SaveAndLoadKeepTheNames) {
  std::unique_ptr<Module> m = Load(kSymbolic);
  ASSERT_NE(m, nullptr);
  absl::StatusOr<std::string> text = ModelToText(*m);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("dim_params: \"batch\""));
  absl::StatusOr<std::unique_ptr<Module>> m2 = ParseModel(*text, true, DefaultRegistry());
  ASSERT_TRUE(m2.ok()) << m2.status();
  EXPECT_EQ(PrintModule(*m), PrintModule(**m2));
}

TEST(DimSymbolIoTest, BadDimNamesAreRefused) {
  struct Case {
    std::string from, to, message;
  } cases[] = {
      {"dim_params: \"batch\" dim_params: \"\" }", "dim_params: \"batch\" }",
       "1 dim_params for 2 dims"},
      {"dims: -1 dims: 2 dim_params", "dims: 4 dims: 2 dim_params", "both the size 4 and the name"},
      {"dim_params: \"batch\" dim_params: \"\"", "dim_params: \"bat ch\" dim_params: \"\"",
       "bad dimension name 'bat ch'"},
  };
  for (const Case& c : cases) {
    std::string text = kSymbolic;
    const size_t at = text.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    text.replace(at, c.from.size(), c.to);
    proto::ModelProto p;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p));
    absl::Status s = LoadModel(p, DefaultRegistry(), "sym.pbtxt").status();
    ASSERT_FALSE(s.ok()) << c.to;
    EXPECT_THAT(s.message(), HasSubstr(c.message));
    EXPECT_THAT(s.message(), HasSubstr("sym.pbtxt"));
  }
}

}  // namespace
}  // namespace kgrad
