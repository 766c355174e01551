// Shared by the ONNX tests: fixture files under tests/onnx/data (written by
// make_fixtures.py), import with the CPU evaluator, and tensor comparison.
#ifndef KGRAD_TESTS_ONNX_ONNX_TEST_UTIL_H_
#define KGRAD_TESTS_ONNX_ONNX_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ad/grad_operation.h"
#include "backends/executor.h"
#include "core/passes/optimize.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/constant_evaluator.h"
#include "core/manager.h"
#include "core/module.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "proto/onnx/onnx_export.h"
#include "proto/onnx/onnx_import.h"
#include "tests/testing/op_test_util.h"
#include "tools/npy.h"

namespace kgrad {
namespace onnx_test {

// The dtype shorthands and tensor helpers of tests/testing/op_test_util.h, and
// the matchers, as every ONNX test names them.
using ::kgrad::testing::kF32;
using ::kgrad::testing::kF64;
using ::kgrad::testing::kI64;
using ::kgrad::testing::MakeTensor;
using ::kgrad::testing::ToDoubles;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

inline std::string DataPath(const std::string& file) { return "tests/onnx/data/" + file; }

inline bool Exists(const std::string& path) { return std::ifstream(path).good(); }

inline absl::StatusOr<std::unique_ptr<Module>> ImportFixture(const std::string& name,
                                                            const OnnxImportOptions& o = {}) {
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
inline double RelError(const Tensor& got, const Tensor& want, double min_scale = 1e-6) {
  double err = 0, scale = min_scale;
  for (int64_t i = 0; i < want.NumElements(); ++i) {
    err = std::max(err, std::abs(got.ElementAsDouble(i) - want.ElementAsDouble(i)));
    scale = std::max(scale, std::abs(want.ElementAsDouble(i)));
  }
  return err / scale;
}

inline void ExpectClose(const Value& got, const Tensor& want, double tol, const std::string& what,
                        double min_scale = 1e-6) {
  ASSERT_TRUE(got.is_tensor()) << what << ": got " << got.TypeString();
  ASSERT_EQ(got.tensor().TypeString(), want.TypeString()) << what;
  double e = RelError(got.tensor(), want, min_scale);
  EXPECT_LE(e, tol) << what << ": relative error " << e << "\n got  " << got.tensor().DebugString(12)
                    << "\n want " << want.DebugString(12);
}

// The primitives g applies, in order (after the module's garbage collection).
inline std::vector<PrimId> AppliedPrims(Module& m, FuncGraph* g) {
  std::vector<PrimId> ids;
  for (CNode* c : m.manager().Info(g).order) {
    if (c->primitive() != nullptr) ids.push_back(c->primitive()->id());
  }
  return ids;
}

// f's outputs at `args`, and those of f exported to ONNX and imported back, each
// flattened to its tensors (a tensor, or a tuple's elements); and the model.
struct ExportRoundTrip {
  std::vector<Tensor> want, got;
  onnx::ModelProto model;
};

inline std::vector<Tensor> Flatten(const Value& v) {
  if (v.is_tensor()) return {v.tensor()};
  std::vector<Tensor> out;
  for (size_t i = 0; v.is_tuple() && i < v.tuple().size(); ++i) out.push_back(v.tuple()[i].tensor());
  return out;
}

// Runs `f` (a graph of `m`) at `args`, exports it, imports the model back and
// runs that at `args`; the two have as many outputs.
inline void RunExportRoundTrip(Module& m, FuncGraph* f, const std::vector<Value>& args, ExportRoundTrip* r) {
  absl::StatusOr<Value> want = RunGraph(f, args);
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<onnx::ModelProto> model = ExportOnnx(m, f);
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::unique_ptr<Module>> back = ImportOnnx(*model, DefaultRegistry(), OnnxImportOptions());
  ASSERT_TRUE(back.ok()) << back.status();
  absl::StatusOr<Value> got = RunGraph((*back)->entry(), args);
  ASSERT_TRUE(got.ok()) << got.status();
  r->want = Flatten(*want);
  r->got = Flatten(*got);
  r->model = *std::move(model);
  ASSERT_EQ(r->got.size(), r->want.size()) << got->TypeString();
}

// The round trip gives, output by output, the same shapes and exactly the same
// values.
inline void ExpectExactExportRoundTrip(Module& m, FuncGraph* f, const std::vector<Value>& args,
                                       ExportRoundTrip* r) {
  ASSERT_NO_FATAL_FAILURE(RunExportRoundTrip(m, f, args, r));
  for (size_t i = 0; i < r->want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(r->got[i].shape(), r->want[i].shape());
    EXPECT_THAT(ToDoubles(r->got[i]), ElementsAreArray(ToDoubles(r->want[i])));
  }
}

// NAME_in<i>.npy for i < n.
inline std::vector<Value> FixtureInputs(const std::string& name, int n) {
  std::vector<Value> in;
  for (int i = 0; i < n; ++i) in.push_back(Npy(absl::StrCat(name, "_in", i, ".npy")));
  return in;
}

// Imports fixture `name` (n inputs), runs it and compares with torch's output.
inline void CheckFixtureOutput(const std::string& name, int n, double tol) {
  absl::StatusOr<std::unique_ptr<Module>> m = ImportFixture(name);
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<Value> out = RunGraph((*m)->entry(), FixtureInputs(name, n));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectClose(*out, Npy(absl::StrCat(name, "_out.npy")), tol, "output");
}

// The gradient graph of m's entry for `o` with the output sensitivity as a last
// input, optimised (constants folded on the CPU) as `kgrad grad --optimize` does
// when `optimize`.
inline absl::StatusOr<FuncGraph*> SensGradient(Module& m, GradOptions o, bool optimize) {
  o.sens_param = true;
  absl::StatusOr<FuncGraph*> g = Grad(m, m.entry(), o);
  if (!g.ok() || !optimize) return g;
  OptimizeOptions oo;
  oo.evaluator = &CpuConstantEvaluator::Get();
  absl::StatusOr<std::string> log = Optimize(m, *g, oo);
  if (!log.ok()) return log.status();
  return g;
}

// d<ct, f>/d(inputs, weights) of fixture `name` against torch.autograd, with the
// gradient graph optimised or not. The inputs and weights differentiated are those
// torch's gradients were saved for (NAME_din<i>.npy, NAME_dw_<weight>.npy): float
// inputs, and parameters rather than BatchNorm's running statistics.
inline void CheckFixtureGradients(const std::string& name, int n, bool optimize, double tol,
                                  const OnnxImportOptions& import = {}) {
  absl::StatusOr<std::unique_ptr<Module>> m = ImportFixture(name, import);
  ASSERT_TRUE(m.ok()) << m.status();
  GradOptions o;
  o.argnums.clear();
  for (int i = 0; i < n; ++i) {
    if (Exists(DataPath(absl::StrCat(name, "_din", i, ".npy")))) o.argnums.push_back(i);
  }
  std::vector<std::string> names;
  for (const auto& w : (*m)->weights()) {
    if (!Exists(DataPath(absl::StrCat(name, "_dw_", w->name(), ".npy")))) continue;
    o.weights.push_back(w.get());
    names.push_back(w->name());
  }
  ASSERT_FALSE(names.empty() && o.argnums.empty()) << name << ": nothing to differentiate";
  absl::StatusOr<FuncGraph*> g = SensGradient(**m, o, optimize);
  ASSERT_TRUE(g.ok()) << g.status();
  // Gradients that are zero in exact arithmetic (a bias feeding a training-mode
  // BatchNorm, directly or through a linear layer) come out as float32 round-off
  // of the sums around them: a tensor whose entries all lie below 1e-4 of the
  // largest gradient entry is judged relative to that entry instead of its own.
  std::vector<Tensor> want;
  for (int i : o.argnums) want.push_back(Npy(absl::StrCat(name, "_din", i, ".npy")));
  for (const std::string& w : names) want.push_back(Npy(absl::StrCat(name, "_dw_", w, ".npy")));
  auto max_abs = [](const Tensor& t) {
    double m = 0;
    for (int64_t i = 0; i < t.NumElements(); ++i) m = std::max(m, std::abs(t.ElementAsDouble(i)));
    return m;
  };
  double largest = 0;
  for (const Tensor& t : want) largest = std::max(largest, max_abs(t));
  auto floor = [&](const Tensor& t) { return max_abs(t) < 1e-4 * largest ? largest : 1e-6; };
  std::vector<Value> inputs = FixtureInputs(name, n);
  inputs.push_back(Npy(absl::StrCat(name, "_ct.npy")));
  absl::StatusOr<Value> r = RunGraph(*g, std::move(inputs));
  ASSERT_TRUE(r.ok()) << r.status();
  // Grad's result: dx (one argnum) or their tuple; with weights, (dx, dw), or dw
  // alone when no input is differentiated.
  const bool both = !names.empty() && !o.argnums.empty();
  if (both) {
    ASSERT_TRUE(r->is_tuple() && r->tuple().size() == 2) << r->TypeString();
  }
  if (!o.argnums.empty()) {
    const Value& dx = both ? r->tuple()[0] : *r;
    for (size_t k = 0; k < o.argnums.size(); ++k) {
      const Value& d = o.argnums.size() == 1 ? dx : dx.tuple()[k];
      ExpectClose(d, want[k], tol, absl::StrCat("d input ", o.argnums[k]), floor(want[k]));
    }
  }
  if (names.empty()) return;
  const Value& dw = both ? r->tuple()[1] : *r;
  ASSERT_TRUE(dw.is_tuple() && dw.tuple().size() == names.size()) << dw.TypeString();
  for (size_t k = 0; k < names.size(); ++k) {
    const Tensor& w = want[o.argnums.size() + k];
    ExpectClose(dw.tuple()[k], w, tol, absl::StrCat("d ", names[k]), floor(w));
  }
}

// Fixture `name` exported with dynamic axes (make_dynamic_fixtures.py): imported
// once, differentiated once (d<ct, out>/d input 0) and compiled once, then run at
// every size in `sizes` (NAME_<size>_in0.npy ...) against torch. Neither the
// module nor the executors gain a graph while the sizes change.
inline void CheckDynamicFixture(const std::string& name, const std::vector<std::string>& sizes,
                                double tol) {
  absl::StatusOr<std::unique_ptr<Module>> m = ImportFixture(name);
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<FuncGraph*> g = SensGradient(**m, GradOptions(), /*optimize=*/false);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<std::unique_ptr<Executor>> fwd = Executor::Create((*m)->entry());
  ASSERT_TRUE(fwd.ok()) << fwd.status();
  absl::StatusOr<std::unique_ptr<Executor>> bwd = Executor::Create(*g);
  ASSERT_TRUE(bwd.ok()) << bwd.status();
  const size_t graphs = (*m)->graphs().size();
  const int fwd_plans = (*fwd)->stats().graphs, bwd_plans = (*bwd)->stats().graphs;
  for (const std::string& size : sizes) {
    SCOPED_TRACE(size);
    const std::string prefix = absl::StrCat(name, "_", size, "_");
    Tensor x = Npy(prefix + "in0.npy");
    absl::StatusOr<Value> out = (*fwd)->Run({x});
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectClose(*out, Npy(prefix + "out.npy"), tol, "output");
    absl::StatusOr<Value> dx = (*bwd)->Run({x, Npy(prefix + "ct.npy")});
    ASSERT_TRUE(dx.ok()) << dx.status();
    ExpectClose(*dx, Npy(prefix + "din0.npy"), tol, "d input 0");
  }
  EXPECT_EQ((*m)->graphs().size(), graphs) << "a graph was added while running";
  EXPECT_EQ((*fwd)->stats().graphs, fwd_plans);
  EXPECT_EQ((*bwd)->stats().graphs, bwd_plans);
}

}  // namespace onnx_test
}  // namespace kgrad

#endif  // KGRAD_TESTS_ONNX_ONNX_TEST_UTIL_H_
