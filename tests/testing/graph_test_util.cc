#include "tests/testing/graph_test_util.h"

#include "core/manager.h"
#include "core/module.h"
#include "core/printer.h"

namespace kgrad {
namespace testing {

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

}  // namespace testing
}  // namespace kgrad
