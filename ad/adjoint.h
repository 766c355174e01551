// Adjoint: the sensitivity of one primal node, accumulated lazily. Whole
// contributions are kept apart from per-element contributions of tuples, so that
// `x = (a, b); y = x[0]` gives `a` the sensitivity of `y` and `b` nothing, with no
// zero tensor built (JAX-style symbolic zeros). Empty means zero.
#ifndef KGRAD_AD_ADJOINT_H_
#define KGRAD_AD_ADJOINT_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "core/node.h"

namespace kgrad {

struct Adjoint {
  // Most nodes get one contribution: stored in place, not one allocation each.
  absl::InlinedVector<AnfNode*, 2> whole;
  std::map<int64_t, std::vector<AnfNode*>> items;

  bool empty() const { return whole.empty() && items.empty(); }
  void Add(AnfNode* d) {
    if (d != nullptr) whole.push_back(d);
  }
  void AddItem(int64_t i, AnfNode* d) {
    if (d != nullptr) items[i].push_back(d);
  }
};

}  // namespace kgrad

#endif  // KGRAD_AD_ADJOINT_H_
