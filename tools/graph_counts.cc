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

// tuple_getitem of a kernel's own tuple of results (split, batch_norm_grad):
// reading an output, not plumbing.
bool ReadsAKernelResult(const CNode* c) {
  if (!c->IsPrim(PrimId::kTupleGetItem) || c->num_args() < 1) return false;
  const CNode* t = c->arg(0)->AsCNode();
  return t != nullptr && t->primitive() != nullptr && !t->IsPrim(PrimId::kMakeTuple) &&
         !t->IsPrim(PrimId::kTupleGetItem) && !t->IsPrim(PrimId::kSwitch);
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
      if (result.contains(c) || ReadsAKernelResult(c)) continue;
      for (PrimId id : {PrimId::kMakeTuple, PrimId::kTupleGetItem, PrimId::kPartial, PrimId::kEnvSetItem,
                        PrimId::kEnvGetItem, PrimId::kEnvAdd, PrimId::kSwitch}) {
        n += c->IsPrim(id) ? 1 : 0;
      }
    }
  }
  return n;
}

}  // namespace kgrad
