// Structural comparison of graphs for Before/Expected pass tests, and small
// programs several tests run.
#ifndef KGRAD_TESTS_TESTING_GRAPH_TEST_UTIL_H_
#define KGRAD_TESTS_TESTING_GRAPH_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "core/func_graph.h"
#include "core/module.h"
#include "gtest/gtest.h"

namespace kgrad {
namespace testing {

// The graph (and its nested graphs) with canonical names and without types.
std::string Canonical(FuncGraph* g);

// Passes when `actual` and `expected` print the same canonically.
::testing::AssertionResult SameGraph(FuncGraph* actual, FuncGraph* expected);

// The "before" and "expected" graphs of a Before/Expected pass test, with the
// same parameters x0, x1, ... of the types `params` (bx in before, ex in
// expected). A test builds both bodies, runs the pass on before and compares.
struct BeforeExpected {
  explicit BeforeExpected(const std::vector<AbstractPtr>& params);

  Module m;
  GraphBuilder before{&m, "before"};
  GraphBuilder expected{&m, "expected"};
  std::vector<AnfNode*> bx, ex;
};

// Number of applications of primitive `id` in `root` and the graphs it calls or
// nests (not its enclosing graphs).
int CountPrim(FuncGraph* root, PrimId id);
// Number of applications in the graphs `root` reaches.
int CountApplications(FuncGraph* root);

// The largest |a - b| / max(1, |a|) over the elements of two values of one
// structure (tuples element by element, scalars and tensors).
double MaxRelDiff(const Value& a, const Value& b);

// A counted loop in `b` (a while loop, tail recursion): h = init, then
// h = step(c, i, h) for i = 0, 1, ... while i < n, with c the builder of the loop
// body; returns the final h. `n` is a constant or a node `b` can read.
using LoopStep = std::function<AnfNode*(GraphBuilder& c, AnfNode* i, AnfNode* h)>;
AnfNode* Repeat(GraphBuilder& b, int64_t n, AnfNode* init, const LoopStep& step);
AnfNode* Repeat(GraphBuilder& b, AnfNode* n, AnfNode* init, const LoopStep& step);

// name(x, n) = n == 0 ? base(x) : more(x, n - 1, name): a graph recursive through
// `more` (built in the else branch, where it may call the graph itself), x
// declared as `x_type`, n an int64 scalar.
using BaseFn = std::function<AnfNode*(GraphBuilder& t, AnfNode* x)>;
using MoreFn =
    std::function<AnfNode*(GraphBuilder& e, AnfNode* x, AnfNode* n_minus_1, FuncGraph* self)>;
FuncGraph* CountDown(Module* m, const std::string& name, AbstractPtr x_type, const BaseFn& base,
                     const MoreFn& more);

// name(x, w) = tanh(x * w), both f64[3].
FuncGraph* TanhOfProduct(Module* m, const std::string& name);

// f(x, w), both f64[3]: h = x, then `n` times h = tanh(h * w), or tanh(h * w + x)
// with `add_x` (a while loop); returns h, or sum(h) with `sum`.
FuncGraph* TanhLoop(Module* m, int64_t n, bool add_x, bool sum);

// fact(n) = n <= 1 ? 1 : n * fact(n - 1), n an untyped parameter (not a tail
// call: the multiply waits).
FuncGraph* BuildFactorial(Module* m);

// y = P(x): a graph of one application of primitive `id` to a parameter of x's
// type, compiled with `options` (a device, a communicator) and run on x.
absl::StatusOr<Value> RunOneOp(PrimId id, AttrMap attrs, Value x, const ExecutorOptions& options);

}  // namespace testing
}  // namespace kgrad

#endif  // KGRAD_TESTS_TESTING_GRAPH_TEST_UTIL_H_
