// Structural comparison of graphs for Before/Expected pass tests.
#ifndef KGRAD_TESTS_TESTING_GRAPH_TEST_UTIL_H_
#define KGRAD_TESTS_TESTING_GRAPH_TEST_UTIL_H_

#include <string>

#include "core/func_graph.h"
#include "gtest/gtest.h"

namespace kgrad {
namespace testing {

// The graph (and its nested graphs) with canonical names and without types.
std::string Canonical(FuncGraph* g);

// Passes when `actual` and `expected` print the same canonically.
::testing::AssertionResult SameGraph(FuncGraph* actual, FuncGraph* expected);

// Number of applications of primitive `id` in `root` and the graphs it calls or
// nests (not its enclosing graphs).
int CountPrim(FuncGraph* root, PrimId id);
// Number of applications in the graphs `root` reaches.
int CountApplications(FuncGraph* root);

}  // namespace testing
}  // namespace kgrad

#endif  // KGRAD_TESTS_TESTING_GRAPH_TEST_UTIL_H_
