#include "ad/grad_operation.h"
#include "ad/jvp.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "core/passes/optimize.h"
#include "core/printer.h"
#include "core/verifier.h"
#include "gtest/gtest.h"
#include "ops/registry.h"

namespace kgrad {
namespace {

TEST(Scratch, OptimizeScalarGrad) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "cube");
  AnfNode* x = b.Param("x", MakeAbstractScalar(DType::kFloat64));
  AnfNode* y = b.Param("y", MakeAbstractScalar(DType::kFloat64));
  ValueNode* c = b.Closure("c", 0, [&](GraphBuilder& cb, auto) { return cb.Op(PrimId::kScalarMul, {x, y}); });
  FuncGraph* f = b.Return(b.Op(PrimId::kScalarMul, {b.Op(PrimId::kScalarMul, {x, b.Call(c, {})}), x})).value();
  FuncGraph* g = GradOperation(true)(m, f).value();
  std::cout << PrintModule(m);
  auto log = Optimize(m, g);
  ASSERT_TRUE(log.ok()) << log.status();
  std::cout << *log << "\n" << PrintGraph(g);
  ASSERT_TRUE(VerifyModule(m).ok());
  auto r = RunGraph(g, {Value(Scalar::Float(2.0)), Value(Scalar::Float(3.0))});
  ASSERT_TRUE(r.ok()) << r.status();
  std::cout << r->ToString() << "\n";
}

TEST(Scratch, JvpScalar) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "cube");
  AnfNode* x = b.Param("x", MakeAbstractScalar(DType::kFloat64));
  AnfNode* y = b.Param("y", MakeAbstractScalar(DType::kFloat64));
  ValueNode* c = b.Closure("c", 0, [&](GraphBuilder& cb, auto) { return cb.Op(PrimId::kScalarMul, {x, y}); });
  FuncGraph* f = b.Return(b.Op(PrimId::kScalarMul, {b.Op(PrimId::kScalarMul, {x, b.Call(c, {})}), x})).value();
  auto j = Jvp(m, f);
  ASSERT_TRUE(j.ok()) << j.status();
  std::cout << PrintGraph(*j);
  ASSERT_TRUE(VerifyModule(m).ok());
  auto r = RunGraph(*j, {Value(Scalar::Float(2.0)), Value(Scalar::Float(3.0)), Value(Scalar::Float(1.0)), Value(Scalar::Float(10.0))});
  ASSERT_TRUE(r.ok()) << r.status();
  std::cout << r->ToString() << "\n";  // (24, 36*1 + 8*10 = 116)
}

}  // namespace
}  // namespace kgrad
