// Gradient rules of the list primitives (ops/list_ops.cc), checked in float64
// against central finite differences in reverse mode to the second order and in
// forward mode (tools/grad_check.h): each op inside a program that squares what
// flows through it (so the second-order check runs each adjoint's own rule), and
// a loop that appends to a list whose length is the trip count.
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/builder.h"
#include "gtest/gtest.h"
#include "ops/registry.h"
#include "tests/testing/grad_test_util.h"
#include "tests/testing/graph_test_util.h"
#include "tests/testing/op_test_util.h"
#include "tools/grad_check.h"

namespace kgrad {
namespace testing {
namespace {

using Build = std::function<AnfNode*(GraphBuilder&, const std::vector<AnfNode*>&)>;

// f(x0, x1, ...) = build(x...) with float64 parameters of `shapes`, checked at
// kSeeds to `order`; every input's derivatives must not all vanish (only those of
// `input`, when given).
void Check(const std::string& name, const std::vector<Shape>& shapes, const Build& build, int order = 2,
           const std::string& input = "") {
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE(absl::StrCat(name, " seed ", seed));
    std::mt19937_64 rng(seed);
    Module m(DefaultRegistry());
    GraphBuilder b(&m, name);
    std::vector<AnfNode*> x;
    std::vector<Value> args;
    for (size_t i = 0; i < shapes.size(); ++i) {
      x.push_back(b.Param(absl::StrCat("x", i), DType::kFloat64, shapes[i]));
      args.push_back(Value(RandomTensor(DType::kFloat64, shapes[i], rng)));
    }
    absl::StatusOr<FuncGraph*> f = b.Return(build(b, x));
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_TRUE(GraphGradientOk(m, *f, args, Order(order, seed), /*nonvacuous=*/true, input));
  }
}

AnfNode* Sq(GraphBuilder& b, AnfNode* x) { return b.Op(PrimId::kMul, {x, x}); }
AnfNode* At(GraphBuilder& b, AnfNode* l, int64_t i) { return b.Op(PrimId::kListGetItem, {l, b.Int(i)}); }
AnfNode* Concat(GraphBuilder& b, AnfNode* l, int64_t axis, bool new_axis = false) {
  return b.Op(PrimId::kListConcat, {l}, {{"axis", axis}, {"new_axis", new_axis}});
}

TEST(ListGradTest, ConcatOfAList) {
  Check("concat", {{2, 3}, {1, 3}, {4, 3}}, [](GraphBuilder& b, const std::vector<AnfNode*>& x) {
    return Sq(b, Concat(b, b.Op(PrimId::kMakeList, {x[0], Sq(b, x[1]), x[2]}), 0));
  });
  Check("concat_last_axis", {{2, 1}, {2, 3}}, [](GraphBuilder& b, const std::vector<AnfNode*>& x) {
    return Sq(b, Concat(b, b.Op(PrimId::kMakeList, {x[0], x[1]}), -1));
  });
}

TEST(ListGradTest, StackOfAList) {
  Check("stack", {{2, 3}, {2, 3}}, [](GraphBuilder& b, const std::vector<AnfNode*>& x) {
    AnfNode* s = Concat(b, b.Op(PrimId::kMakeList, {x[0], Sq(b, x[1])}), 1, /*new_axis=*/true);
    return b.Op(PrimId::kMul, {s, s});
  });
}

TEST(ListGradTest, GetSetInsertErase) {
  // l = [x0, x1]; l[1] = x0 * x1; insert x2 before the last; drop the first:
  // [x2, x0 * x1]; out = l[0] * l[-1].
  Check("moves", {{3}, {3}, {3}}, [](GraphBuilder& b, const std::vector<AnfNode*>& x) {
    AnfNode* l = b.Op(PrimId::kMakeList, {x[0], x[1]});
    l = b.Op(PrimId::kListSetItem, {l, b.Int(1), b.Op(PrimId::kMul, {x[0], x[1]})});
    l = b.Op(PrimId::kListInsert, {l, b.Int(-1), x[2]});
    l = b.Op(PrimId::kListErase, {l, b.Int(0)});
    return b.Op(PrimId::kMul, {At(b, l, 0), At(b, l, -1)});
  });
  // An erased element gets no gradient (x1's is checked to be zero), a kept one
  // all of it.
  Check(
      "erase_negative", {{2}, {2}},
      [](GraphBuilder& b, const std::vector<AnfNode*>& x) {
        AnfNode* l = b.Op(PrimId::kMakeList, {Sq(b, x[0]), x[1], x[0]});
        l = b.Op(PrimId::kListErase, {l, b.Int(-2)});
        return b.Op(PrimId::kMul, {At(b, l, 0), At(b, l, 1)});
      },
      2, "x0");
}

TEST(ListGradTest, SplitToListEveryForm) {
  Check("split_chunks", {{5, 2}}, [](GraphBuilder& b, const std::vector<AnfNode*>& x) {
    AnfNode* l = b.Op(PrimId::kSplitToList, {x[0], b.Const(Value(Tensor::FromScalar<int64_t>(2)))});
    // Pieces [2,2], [2,2], [1,2]: (p0 * p1) and p2 squared, joined again.
    AnfNode* p = b.Op(PrimId::kMul, {At(b, l, 0), At(b, l, 1)});
    return Concat(b, b.Op(PrimId::kMakeList, {p, Sq(b, At(b, l, 2))}), 0);
  });
  Check("split_squeezed", {{3, 4}}, [](GraphBuilder& b, const std::vector<AnfNode*>& x) {
    AnfNode* l = b.Op(PrimId::kSplitToList, {x[0]}, {{"axis", int64_t{1}}, {"keepdims", false}});
    return b.Op(PrimId::kMul, {At(b, l, 0), At(b, l, 3)});
  });
}

// A loop of n steps appends tanh(h) to a list while h = h * x; the list is then
// stacked: the list's length is the trip count, known only at run time.
TEST(ListGradTest, LoopAppendsToAList) {
  Check("append_loop", {{2}, {2}}, [](GraphBuilder& b, const std::vector<AnfNode*>& x) {
    std::vector<AnfNode*> out = b.While(
        {b.Int(0), x[0], b.Op(PrimId::kMakeList, {})},
        [](GraphBuilder& c, absl::Span<AnfNode* const> s) { return c.Op(PrimId::kScalarLt, {s[0], c.Int(4)}); },
        [&x](GraphBuilder& c, absl::Span<AnfNode* const> s) {
          AnfNode* h = c.Op(PrimId::kMul, {s[1], x[1]});
          AnfNode* l = c.Op(PrimId::kListInsert, {s[2], c.Op(PrimId::kListLen, {s[2]}), c.Op(PrimId::kTanh, {h})});
          return std::vector<AnfNode*>{c.Op(PrimId::kScalarAdd, {s[0], c.Int(1)}), h, l};
        });
    return Concat(b, out[2], 0, /*new_axis=*/true);
  });
}

}  // namespace
}  // namespace testing
}  // namespace kgrad
