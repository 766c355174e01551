#include "backends/argument_checks.h"

#include <algorithm>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "core/abstract.h"
#include "core/dim_symbol.h"

namespace kgrad {

absl::Status CheckArgument(const Parameter* p, const Value& v, const FuncGraph* g) {
  const AbstractTensor* want = AsTensor(p->declared());
  if (want == nullptr) return absl::OkStatus();
  if (!v.is_tensor()) {
    return absl::InvalidArgumentError(absl::StrCat("graph '", g->name(), "', input '",
                                                   p->DebugName(), "' must be ", want->ToString(),
                                                   ", got ", v.TypeString()));
  }
  const Tensor& t = v.tensor();
  bool ok = t.dtype() == want->dtype() && t.rank() == want->rank();
  for (int i = 0; ok && i < t.rank(); ++i) {
    ok = want->shape()[i] < 0 || want->shape()[i] == t.dim(i);
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat("graph '", g->name(), "', input '",
                                                   p->DebugName(), "' must be ", want->ToString(),
                                                   ", got ", t.TypeString()));
  }
  return absl::OkStatus();
}

absl::Status CheckSymbols(const std::vector<Parameter*>& params, const std::vector<Value>& args,
                          const FuncGraph* g) {
  struct Binding {
    int64_t symbol, size;
    size_t param;
    int dim;
  };
  absl::InlinedVector<Binding, 4> seen;
  for (size_t p = 0; p < params.size(); ++p) {
    const AbstractTensor* want = AsTensor(params[p]->declared());
    if (want == nullptr || !args[p].is_tensor()) continue;
    for (int i = 0; i < want->rank(); ++i) {
      const int64_t sym = want->shape()[i];
      if (!IsSymbolDim(sym)) continue;
      const int64_t size = args[p].tensor().dim(i);
      auto it = std::find_if(seen.begin(), seen.end(), [&](const Binding& b) { return b.symbol == sym; });
      if (it == seen.end()) {
        seen.push_back({sym, size, p, i});
      } else if (it->size != size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "graph '", g->name(), "': inputs '", params[it->param]->DebugName(), "' (dim ", it->dim,
            " = ", it->size, ") and '", params[p]->DebugName(), "' (dim ", i, " = ", size,
            ") must agree on the size '", DimToString(sym), "'"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace kgrad
