#include "core/printer.h"

#include "core/builder.h"
#include "core/infer.h"
#include "gtest/gtest.h"
#include "ops/registry.h"

namespace kgrad {
namespace {

TEST(PrinterTest, NestedGraphsTypesAndFreeVariables) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  AnfNode* x = b.Param("x", DType::kFloat32, {2});
  AnfNode* w = b.Weight("w", Tensor::FromVector<float>({2}, {1.f, 2.f}));
  CNode* s = b.Op(PrimId::kMul, {x, w});
  s->set_name("s");
  ValueNode* c = b.Closure("c", 0, [&](GraphBuilder& cb, auto) {
    CNode* e = cb.Op(PrimId::kExp, {s});
    e->set_name("e");
    return e;
  });
  CNode* y = b.Call(c, {});
  y->set_name("y");
  FuncGraph* f = b.Return(y).value();
  ASSERT_TRUE(InferGraph(f).ok());
  EXPECT_EQ(PrintModule(m),
            "$w : f32[2]\n"
            "@f(%x : f32[2]) {\n"
            "  @c() {  # free: %s\n"
            "    %e = exp(%s) : f32[2]\n"
            "    return %e\n"
            "  }\n"
            "  %s = mul(%x, $w) : f32[2]\n"
            "  %y = @c() : f32[2]\n"
            "  return %y\n"
            "}\n");
  PrintOptions o;
  o.canonical = true;
  o.show_types = false;
  EXPECT_EQ(PrintGraph(f, o),
            "@g0(%p0) {\n"
            "  @g1() {  # free: %1\n"
            "    %3 = exp(%1)\n"
            "    return %3\n"
            "  }\n"
            "  %1 = mul(%p0, $w)\n"
            "  %2 = @g1()\n"
            "  return %2\n"
            "}\n");
  std::string dot = ToDot(m);
  EXPECT_EQ(dot.rfind("digraph kgrad {", 0), 0u);
  EXPECT_NE(dot.find("cluster"), std::string::npos);
}

}  // namespace
}  // namespace kgrad
