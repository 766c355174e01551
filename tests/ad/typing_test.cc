// The gradient graphs GradOperation types from their inputs carry exactly the
// types whole-program inference records, and programs that need more than one
// context per graph are left to inference.
#include "ad/typing.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "ad/grad_operation.h"
#include "core/builder.h"
#include "core/infer.h"
#include "core/manager.h"
#include "examples/programs.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "proto/model_io.h"

namespace kgrad {
namespace {

// Every reachable application's type, by node.
absl::flat_hash_map<const AnfNode*, std::string> Types(FuncGraph* root) {
  absl::flat_hash_map<const AnfNode*, std::string> out;
  Manager& m = root->module()->manager();
  for (FuncGraph* g : m.Reachable({root})) {
    for (const CNode* c : m.Info(g).order) out[c] = AbstractToString(c->abstract());
  }
  return out;
}

GradOptions AllWeightsAndInput0(Module& m) {
  GradOptions go;
  go.argnums = {0};
  for (const auto& w : m.weights()) go.weights.push_back(w.get());
  return go;
}

// Typed by GradOperation, then inferred: nothing changes.
void ExpectSameAsInference(Module& m, FuncGraph* f, const std::string& what) {
  FuncGraph* grad = Grad(m, f, AllWeightsAndInput0(m)).value();
  ASSERT_TRUE(grad->types_current()) << what;
  absl::flat_hash_map<const AnfNode*, std::string> typed = Types(grad);
  ASSERT_TRUE(InferGraph(grad).ok()) << what;
  absl::flat_hash_map<const AnfNode*, std::string> inferred = Types(grad);
  ASSERT_EQ(typed.size(), inferred.size()) << what;
  for (const auto& [node, type] : inferred) {
    EXPECT_EQ(typed.at(node), type) << what << ": " << node->Location();
  }
}

TEST(TypingTest, FirstOrderGradientsAreTypedAsInferenceTypesThem) {
  {
    Module m(DefaultRegistry());
    ExpectSameAsInference(m, programs::Mlp(&m, 4, {6, 8, 3}, DType::kFloat32), "mlp");
  }
  {
    Module m(DefaultRegistry());
    ExpectSameAsInference(m, programs::ConvNet(&m, 2, 8, 3, 4, 3, DType::kFloat32, true), "convnet");
  }
  for (const char* file : {"examples/mlp.pbtxt", "examples/closure.pbtxt"}) {
    std::unique_ptr<Module> m = LoadModelFile(file, DefaultRegistry()).value();
    ExpectSameAsInference(*m, m->entry(), file);
  }
}

// sq called on f32[2] and on f32[3]: K(sq) would need two contexts, so the
// gradient is left to inference (and still optimises and types correctly).
TEST(TypingTest, AGraphCalledWithTwoTypesIsLeftToInference) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x2 = b.Param("x2", DType::kFloat32, {2});
  AnfNode* x3 = b.Param("x3", DType::kFloat32, {3});
  ValueNode* sq = b.Closure("sq", 1, [&](GraphBuilder& sb, absl::Span<AnfNode* const> p) {
    return sb.Op(PrimId::kReduceSum, {sb.Op(PrimId::kMul, {p[0], p[0]})});
  });
  FuncGraph* f = b.Return(b.Op(PrimId::kAdd, {b.Call(sq, {x2}), b.Call(sq, {x3})})).value();
  GradOptions go;
  go.argnums = {0, 1};
  FuncGraph* grad = Grad(m, f, go).value();
  EXPECT_FALSE(grad->types_current());
  absl::StatusOr<AbstractPtr> t = InferGraph(grad);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_NE(AsTuple(*t), nullptr);
  EXPECT_EQ(AsTuple(*t)->size(), 2u);
  EXPECT_TRUE(grad->types_current());
}

// Loops (recursion) are the inferrer's too; so is anything once the module changes.
TEST(TypingTest, LoopsAndEditedModulesAreLeftToInference) {
  Module m(DefaultRegistry());
  FuncGraph* f = programs::HornerLoop(&m, 3, DType::kFloat64);
  FuncGraph* grad = Grad(m, f, GradOptions{}).value();
  EXPECT_FALSE(grad->types_current());
  Module m2(DefaultRegistry());
  FuncGraph* mlp = programs::Mlp(&m2, 4, {6, 3}, DType::kFloat32);
  FuncGraph* g2 = Grad(m2, mlp, AllWeightsAndInput0(m2)).value();
  ASSERT_TRUE(g2->types_current());
  GraphBuilder other(&m2, "other");
  ASSERT_TRUE(other.Return(other.Param("z")).ok());
  EXPECT_FALSE(g2->types_current());
}

}  // namespace
}  // namespace kgrad
