#include "backends/fused_elementwise.h"

#include <array>
#include <iterator>
#include <utility>

#include "ops/elementwise_table.h"

namespace kgrad {

namespace {

// The primitive of each fused code, in the codes' order (the rows marked Fused).
#define KGRAD_FUSED_PRIM_Fused(Name) PrimId::k##Name,
#define KGRAD_FUSED_PRIM_Unfused(Name)
constexpr PrimId kFusedPrims[] = {
#define KGRAD_ELEMENTWISE(Name, wire, arity, dtypes, result, fusion, onnx) \
  KGRAD_FUSED_PRIM_##fusion(Name)
#include "ops/elementwise_table.inc"
#undef KGRAD_ELEMENTWISE
};
#undef KGRAD_FUSED_PRIM_Fused
#undef KGRAD_FUSED_PRIM_Unfused
static_assert(std::size(kFusedPrims) == static_cast<size_t>(FusedCode::kMulAdd));

}  // namespace

std::optional<FusedCode> FusedCodeOf(PrimId id) {
  for (size_t c = 0; c < std::size(kFusedPrims); ++c) {
    if (kFusedPrims[c] == id) return static_cast<FusedCode>(c);
  }
  return std::nullopt;
}

PrimId PrimIdOf(FusedCode code) {
  return code == FusedCode::kMulAdd ? PrimId::kAdd : kFusedPrims[static_cast<size_t>(code)];
}

bool IsBinary(FusedCode code) {
  return code != FusedCode::kMulAdd && ops::ElementwiseArity(PrimIdOf(code)) == 2;
}

int NumOperands(FusedCode code) {
  if (code == FusedCode::kMulAdd) return 4;
  return IsBinary(code) ? 2 : 1;
}

void AssignRows(FusedProgram* p) {
  const int32_t n_values = p->num_inputs + static_cast<int32_t>(p->instrs.size());
  p->output_of.assign(n_values, -1);
  p->row_of.assign(n_values, -1);
  p->rows = 0;
  for (size_t k = 0; k < p->outputs.size(); ++k) p->output_of[p->outputs[k]] = static_cast<int32_t>(k);
  auto operands = [](const FusedInstr& in) {
    std::array<int32_t, 4> ops{in.a, in.b, in.c, in.d};
    return std::make_pair(ops, NumOperands(in.code));
  };
  std::vector<int32_t> last(n_values, -1);
  for (size_t i = 0; i < p->instrs.size(); ++i) {
    auto [ops, n] = operands(p->instrs[i]);
    for (int j = 0; j < n; ++j) last[ops[j]] = static_cast<int32_t>(i);
  }
  p->last_read = last;
  std::vector<int32_t> free_rows;
  std::vector<bool> released(n_values, false);
  for (size_t i = 0; i < p->instrs.size(); ++i) {
    auto [ops, n] = operands(p->instrs[i]);
    for (int j = 0; j < n; ++j) {
      const int32_t v = ops[j];
      if (last[v] == static_cast<int32_t>(i) && p->row_of[v] >= 0 && !released[v]) {
        free_rows.push_back(p->row_of[v]);
        released[v] = true;
      }
    }
    const int32_t v = p->num_inputs + static_cast<int32_t>(i);
    if (p->output_of[v] >= 0) continue;
    if (free_rows.empty()) {
      p->row_of[v] = p->rows++;
    } else {
      p->row_of[v] = free_rows.back();
      free_rows.pop_back();
    }
  }
}

}  // namespace kgrad
