#include "ops/tc_ops.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "ops/bprop_context.h"
#include "ops/op_def.h"
#include "ops/tc_adjoint.h"

namespace kgrad {
namespace ops {

absl::StatusOr<TcCall> ParseTcCall(const Primitive& p, absl::Span<const TensorType> operands) {
  TcCall call;
  KGRAD_ASSIGN_OR_RETURN(call.block, tc::ParseBlock(p.GetString("def")));
  KGRAD_ASSIGN_OR_RETURN(call.analysis, tc::Analyze(call.block, operands));
  return call;
}

namespace {

// tc{def}(x...): the block's outputs, shaped by its ranges (unknown dims stay
// unknown).
absl::StatusOr<AbstractPtr> InferTc(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<TensorType> operands, TensorArgs(c));
  KGRAD_ASSIGN_OR_RETURN(TcCall call, ParseTcCall(c.prim, operands));
  std::vector<AbstractPtr> outs;
  for (int t = call.block.num_inputs; t < static_cast<int>(call.block.tensors.size()); ++t) {
    outs.push_back(MakeAbstractTensor(call.analysis.dtype, call.analysis.shapes[t]));
  }
  if (outs.size() == 1) return outs[0];
  return MakeAbstractTuple(std::move(outs));
}

// Forward: (O_1, ..., O_m) = tc{def}(X_1, ..., X_n).
// Backward: (dX_i for the inputs read differentiably, temporaries...) =
// tc{def'}(the X and O it reads, dO...), def' the adjoint block of
// ops/tc_adjoint.h: dX(f(i)) += dO(l) * dE/dX(f(i)) per read, by index algebra.
absl::Status BpropTc(BpropContext& c) {
  std::vector<TensorType> operands;
  std::vector<Shape> shapes(c.num_inputs());
  for (int i = 0; i < c.num_inputs(); ++i) {
    const AbstractTensor* t = AsTensor(c.IAbs(i));
    if (t == nullptr) return c.Error(absl::StrCat("input ", i, " has no inferred tensor type"));
    operands.emplace_back(*t);
  }
  absl::StatusOr<TcCall> call = ParseTcCall(c.prim(), operands);
  if (!call.ok()) return c.Error(std::string(call.status().message()));
  absl::StatusOr<tc::AdjointBlock> adj = tc::DeriveAdjoint(call->block, call->analysis);
  if (!adj.ok()) return c.Error(std::string(adj.status().message()));
  const bool tuple = call->block.num_outputs() > 1;
  std::vector<AnfNode*> args;
  for (const tc::AdjointSource& s : adj->sources) {
    switch (s.kind) {
      case tc::AdjointSource::kInput:
        args.push_back(c.I(s.index));
        break;
      case tc::AdjointSource::kOutput:
        args.push_back(tuple ? c.GetItem(c.Out(), s.index) : c.Out());
        break;
      case tc::AdjointSource::kCotangent:
        args.push_back(tuple ? c.GetItem(c.Dout(), s.index) : c.Dout());
        break;
    }
  }
  AnfNode* g = c.Op(PrimId::kTc, std::move(args), {{"def", tc::PrintBlock(adj->block)}});
  const bool grads_tuple = adj->block.num_outputs() > 1;
  for (int i = 0; i < c.num_inputs(); ++i) {
    int at = adj->input_adjoint[i];
    if (at >= 0) c.SetGrad(i, grads_tuple ? c.GetItem(g, at) : g);
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterTcOps(std::vector<PrimitiveDef>* defs) {
  // A contraction in general (the dots_saveable policy keeps its output).
  defs->push_back(OpDef(PrimId::kTc, 1, -1, InferTc, {RequiredAttr("def", AttrType::kString)})
                      .Bprop(BpropTc)
                      .Dot());
}

}  // namespace ops
}  // namespace kgrad
