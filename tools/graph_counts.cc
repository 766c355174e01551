#include "tools/graph_counts.h"

#include <vector>

#include "absl/container/flat_hash_set.h"
#include "core/manager.h"
#include "core/module.h"

namespace kgrad {
namespace {

// The MakeTuple applications that build `g`'s output.
absl::flat_hash_set<const AnfNode*> OutputTuples(const FuncGraph* g) {
  absl::flat_hash_set<const AnfNode*> result;
  std::vector<const AnfNode*> work{g->output()};
  while (!work.empty()) {
    const CNode* t = work.back()->AsCNode();
    work.pop_back();
    if (t == nullptr || !t->IsPrim(PrimId::kMakeTuple) || !result.insert(t).second) continue;
    for (size_t i = 1; i < t->size(); ++i) work.push_back(t->input(i));
  }
  return result;
}

}  // namespace

int CountApplications(FuncGraph* root) {
  Manager& m = root->module()->manager();
  int n = 0;
  for (FuncGraph* g : m.Reachable({root})) n += static_cast<int>(m.Info(g).order.size());
  return n;
}

int CountPlumbing(FuncGraph* root) {
  Manager& m = root->module()->manager();
  const absl::flat_hash_set<const AnfNode*> result = OutputTuples(root);
  int n = 0;
  for (FuncGraph* g : m.Reachable({root})) {
    if (g != root) ++n;
    for (CNode* c : m.Info(g).order) {
      if (result.contains(c)) continue;
      for (PrimId id : {PrimId::kMakeTuple, PrimId::kTupleGetItem, PrimId::kPartial, PrimId::kEnvSetItem,
                        PrimId::kEnvGetItem, PrimId::kEnvAdd, PrimId::kSwitch}) {
        n += c->IsPrim(id) ? 1 : 0;
      }
    }
  }
  return n;
}

}  // namespace kgrad
