#include "tests/testing/graph_test_util.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "core/builder.h"
#include "core/manager.h"
#include "core/module.h"
#include "core/printer.h"
#include "core/status_macros.h"
#include "ops/registry.h"

namespace kgrad {
namespace testing {

double MaxRelDiff(const Value& a, const Value& b) {
  if (a.is_tuple()) {
    double m = 0;
    for (size_t i = 0; i < a.tuple().size() && i < b.tuple().size(); ++i) {
      m = std::max(m, MaxRelDiff(a.tuple()[i], b.tuple()[i]));
    }
    return m;
  }
  if (a.is_scalar()) return std::abs(a.scalar().AsDouble() - b.scalar().AsDouble());
  double m = 0;
  for (int64_t i = 0; i < a.tensor().NumElements(); ++i) {
    double x = a.tensor().ElementAsDouble(i), y = b.tensor().ElementAsDouble(i);
    m = std::max(m, std::abs(x - y) / std::max(1.0, std::abs(x)));
  }
  return m;
}

std::string Canonical(FuncGraph* g) {
  PrintOptions o;
  o.canonical = true;
  o.show_types = false;
  return PrintGraph(g, o);
}

::testing::AssertionResult SameGraph(FuncGraph* actual, FuncGraph* expected) {
  std::string a = Canonical(actual);
  std::string e = Canonical(expected);
  if (a == e) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "actual:\n" << a << "expected:\n" << e;
}

BeforeExpected::BeforeExpected(const std::vector<AbstractPtr>& params) : m(DefaultRegistry()) {
  for (size_t i = 0; i < params.size(); ++i) {
    bx.push_back(before.Param("x" + std::to_string(i), params[i]));
    ex.push_back(expected.Param("x" + std::to_string(i), params[i]));
  }
}

namespace {

// Graphs `root` calls or nests, but not its enclosing graphs.
std::vector<FuncGraph*> Below(FuncGraph* root) {
  std::vector<FuncGraph*> out;
  for (FuncGraph* g : root->module()->manager().Reachable({root})) {
    if (g == root || !root->IsSelfOrAncestor(g)) out.push_back(g);
  }
  return out;
}

}  // namespace

int CountPrim(FuncGraph* root, PrimId id) {
  Manager& m = root->module()->manager();
  int n = 0;
  for (FuncGraph* g : Below(root)) {
    for (CNode* c : m.Info(g).order) n += c->IsPrim(id) ? 1 : 0;
  }
  return n;
}

int CountApplications(FuncGraph* root) {
  Manager& m = root->module()->manager();
  int n = 0;
  for (FuncGraph* g : Below(root)) n += static_cast<int>(m.Info(g).order.size());
  return n;
}

namespace {

AnfNode* RepeatWhile(GraphBuilder& b, const std::function<AnfNode*(GraphBuilder&)>& bound,
                     AnfNode* init, const LoopStep& step) {
  std::vector<AnfNode*> out = b.While(
      {b.Int(0), init},
      [&](GraphBuilder& c, absl::Span<AnfNode* const> s) {
        return c.Op(PrimId::kScalarLt, {s[0], bound(c)});
      },
      [&](GraphBuilder& c, absl::Span<AnfNode* const> s) {
        AnfNode* h = step(c, s[0], s[1]);
        return std::vector<AnfNode*>{c.Op(PrimId::kScalarAdd, {s[0], c.Int(1)}), h};
      });
  return out[1];
}

}  // namespace

AnfNode* Repeat(GraphBuilder& b, int64_t n, AnfNode* init, const LoopStep& step) {
  return RepeatWhile(
      b, [n](GraphBuilder& c) { return c.Int(n); }, init, step);
}

AnfNode* Repeat(GraphBuilder& b, AnfNode* n, AnfNode* init, const LoopStep& step) {
  return RepeatWhile(
      b, [n](GraphBuilder&) { return n; }, init, step);
}

FuncGraph* CountDown(Module* m, const std::string& name, AbstractPtr x_type, const BaseFn& base,
                     const MoreFn& more) {
  GraphBuilder b(m, name);
  AnfNode* x = b.Param("x", std::move(x_type));
  AnfNode* n = b.Param("n", MakeAbstractScalar(DType::kInt64));
  CNode* r = b.If(
      b.Op(PrimId::kScalarEq, {n, b.Int(0)}), [&](GraphBuilder& t) { return base(t, x); },
      [&](GraphBuilder& e) {
        return more(e, x, e.Op(PrimId::kScalarSub, {n, e.Int(1)}), b.graph());
      });
  return b.Return(r).value();
}

FuncGraph* TanhOfProduct(Module* m, const std::string& name) {
  GraphBuilder b(m, name);
  AnfNode* x = b.Param("x", DType::kFloat64, {3});
  AnfNode* w = b.Param("w", DType::kFloat64, {3});
  return b.Return(b.Op(PrimId::kTanh, {b.Op(PrimId::kMul, {x, w})})).value();
}

FuncGraph* TanhLoop(Module* m, int64_t n, bool add_x, bool sum) {
  GraphBuilder b(m, "f");
  AnfNode* x = b.Param("x", DType::kFloat64, {3});
  AnfNode* w = b.Param("w", DType::kFloat64, {3});
  AnfNode* h = Repeat(b, n, x, [&](GraphBuilder& c, AnfNode*, AnfNode* h) {
    AnfNode* z = c.Op(PrimId::kMul, {h, w});
    return c.Op(PrimId::kTanh, {add_x ? c.Op(PrimId::kAdd, {z, x}) : z});
  });
  return b.Return(sum ? b.Op(PrimId::kReduceSum, {h}) : h).value();
}

FuncGraph* BuildFactorial(Module* m) {
  GraphBuilder b(m, "fact");
  AnfNode* n = b.Param("n");
  CNode* r = b.If(
      b.Op(PrimId::kScalarLe, {n, b.Int(1)}), [](GraphBuilder& t) { return t.Int(1); },
      [&](GraphBuilder& e) {
        AnfNode* rec = e.Call(b.graph(), {e.Op(PrimId::kScalarSub, {n, e.Int(1)})});
        return e.Op(PrimId::kScalarMul, {n, rec});
      });
  return b.Return(r).value();
}

absl::StatusOr<Value> RunOneOp(PrimId id, AttrMap attrs, Value x, const ExecutorOptions& options) {
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "f");
  const Tensor& t = x.tensor();
  AnfNode* p = b.Param("x", t.dtype(), t.shape());
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* f, b.Return(b.Op(id, {p}, std::move(attrs))));
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> e, Executor::Create(f, options));
  return e->Run({std::move(x)});
}

}  // namespace testing
}  // namespace kgrad
