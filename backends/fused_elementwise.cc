#include "backends/fused_elementwise.h"

#include <array>
#include <utility>

namespace kgrad {

std::optional<FusedCode> FusedCodeOf(PrimId id) {
  switch (id) {
    case PrimId::kNeg: return FusedCode::kNeg;
    case PrimId::kTanh: return FusedCode::kTanh;
    case PrimId::kSin: return FusedCode::kSin;
    case PrimId::kCos: return FusedCode::kCos;
    case PrimId::kExp: return FusedCode::kExp;
    case PrimId::kSigmoid: return FusedCode::kSigmoid;
    case PrimId::kRelu: return FusedCode::kRelu;
    case PrimId::kAdd: return FusedCode::kAdd;
    case PrimId::kSub: return FusedCode::kSub;
    case PrimId::kMul: return FusedCode::kMul;
    case PrimId::kDiv: return FusedCode::kDiv;
    case PrimId::kTanhGrad: return FusedCode::kTanhGrad;
    case PrimId::kSigmoidGrad: return FusedCode::kSigmoidGrad;
    case PrimId::kSinGrad: return FusedCode::kSinGrad;
    case PrimId::kCosGrad: return FusedCode::kCosGrad;
    case PrimId::kReluGrad: return FusedCode::kReluGrad;
    case PrimId::kMaximum: return FusedCode::kMaximum;
    case PrimId::kMinimum: return FusedCode::kMinimum;
    default: return std::nullopt;
  }
}

bool IsBinary(FusedCode code) { return code >= FusedCode::kAdd && code != FusedCode::kMulAdd; }

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
