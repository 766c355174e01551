// ONNX control flow in kgrad's functional form:
//   If(cond){then_branch, else_branch} -> switch(cond, @then, @else)() with the
//     branches as nested graphs reading outer values as free variables (a constant
//     condition imports only the branch taken);
//   Loop(M, cond, v...){body} -> GraphBuilder::While over the state
//     (i, cond, v...): continue while i < M and cond; the body graph is imported
//     into the loop's body graph. Scan outputs are not supported.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_context.h"

namespace kgrad {
namespace onnx_import {
namespace {

// A one-element bool/int tensor as a rank-0 one.
absl::StatusOr<ImportedValue> ToRank0(NodeContext& c, const ImportedValue& v, DType want,
                                      const char* what) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(v));
  if (t->dtype() != want || !t->shape_known() || NumElementsOf(t->shape()) != 1) {
    return c.Error(absl::StrCat(what, " must be a one-element ", DTypeName(want), " tensor, got ",
                                t->ToString()));
  }
  if (t->rank() == 0) return v;
  return c.Emit(PrimId::kReshape, {v}, {{"shape", std::vector<int64_t>{}}});
}

// The branch's outputs as one node (a tuple for several), recording their types;
// the first error is kept in `err`.
GraphBuilder::BranchFn Branch(NodeContext& c, const onnx::GraphProto& g,
                              std::vector<AbstractPtr>* types, absl::Status* err) {
  return [&c, &g, types, err](GraphBuilder& gb) -> AnfNode* {
    Scope s(&gb, &c.scope());
    absl::StatusOr<std::vector<ImportedValue>> outs =
        c.importer().ImportNodes(g, s, c.importer().depth() + 1);
    if (!outs.ok()) {
      if (err->ok()) *err = outs.status();
      return gb.Const(Value::None());
    }
    NodeContext bc(c.importer(), s, c.node());
    std::vector<AnfNode*> nodes;
    for (const ImportedValue& o : *outs) {
      nodes.push_back(bc.NodeOf(o));
      types->push_back(o.type);
    }
    return nodes.size() == 1 ? nodes[0] : gb.Tuple(nodes);
  };
}

Outputs If(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue cond, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(cond, ToRank0(c, cond, DType::kBool, "the condition"));
  KGRAD_ASSIGN_OR_RETURN(const onnx::GraphProto* then_g, c.Graph("then_branch"));
  KGRAD_ASSIGN_OR_RETURN(const onnx::GraphProto* else_g, c.Graph("else_branch"));
  if (then_g->input_size() != 0 || else_g->input_size() != 0) return c.Error("branches take no inputs");
  if (cond.constant.has_value()) {
    Scope s(&c.b(), &c.scope());
    return c.importer().ImportNodes(cond.constant->ElementAsDouble(0) != 0 ? *then_g : *else_g, s,
                                    c.importer().depth() + 1);
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue flag, c.Emit(PrimId::kTensorToScalar, {cond}));
  std::vector<AbstractPtr> then_types, else_types;
  absl::Status err;
  CNode* call = c.b().If(c.NodeOf(flag), Branch(c, *then_g, &then_types, &err),
                         Branch(c, *else_g, &else_types, &err));
  KGRAD_RETURN_IF_ERROR(err);
  KGRAD_RETURN_IF_ERROR(c.b().status());
  if (then_types.size() != else_types.size()) {
    return c.Error(absl::StrCat("then_branch has ", then_types.size(), " outputs, else_branch ",
                                else_types.size()));
  }
  std::vector<AbstractPtr> types;
  for (size_t i = 0; i < then_types.size(); ++i) {
    absl::StatusOr<AbstractPtr> t = Join(then_types[i], else_types[i]);
    if (!t.ok()) return c.Error(absl::StrCat("branch output ", i, ": ", t.status().message()));
    types.push_back(*t);
  }
  ImportedValue result{call, types.size() == 1 ? types[0] : MakeAbstractTuple(types), std::nullopt};
  if (types.size() == 1) return std::vector<ImportedValue>{result};
  std::vector<ImportedValue> outs;
  for (size_t i = 0; i < types.size(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue o, c.Item(result, static_cast<int64_t>(i)));
    outs.push_back(o);
  }
  return outs;
}

struct LoopSpec {
  const onnx::GraphProto* body;
  std::optional<ImportedValue> trip_count;  // int64 []
  std::optional<ImportedValue> cond;        // bool []
  std::vector<AbstractPtr> types;           // of the state (i, cond, v...)
};

// The loop condition: i < M and cond (either may be absent, not both).
AnfNode* LoopCondition(NodeContext& c, const LoopSpec& spec, GraphBuilder& lb,
                       absl::Span<AnfNode* const> s, absl::Status* err) {
  Scope scope(&lb, &c.scope());
  NodeContext lc(c.importer(), scope, c.node());
  absl::StatusOr<ImportedValue> keep;
  if (spec.trip_count.has_value()) {
    keep = lc.Emit(PrimId::kLess, {ImportedValue{s[0], spec.types[0], std::nullopt}, *spec.trip_count});
  }
  if (spec.cond.has_value() && keep.ok()) {
    ImportedValue cv{s[1], spec.types[1], std::nullopt};
    keep = spec.trip_count.has_value() ? lc.Emit(PrimId::kLogicalAnd, {*keep, cv}) : cv;
  }
  if (keep.ok()) keep = lc.Emit(PrimId::kTensorToScalar, {*keep});
  if (!keep.ok()) {
    if (err->ok()) *err = keep.status();
    return lb.Bool(false);
  }
  return lc.NodeOf(*keep);
}

// One iteration: the body graph's nodes, then (i + 1, cond_out, v_out...).
std::vector<AnfNode*> LoopBody(NodeContext& c, const LoopSpec& spec, GraphBuilder& bb,
                               absl::Span<AnfNode* const> s, absl::Status* err) {
  Scope scope(&bb, &c.scope());
  NodeContext bc(c.importer(), scope, c.node());
  auto fail = [&](const absl::Status& st) {
    if (err->ok()) *err = st;
    return std::vector<AnfNode*>(s.begin(), s.end());
  };
  for (size_t k = 0; k < s.size(); ++k) {
    absl::Status d = scope.Define(spec.body->input(static_cast<int>(k)).name(),
                                  ImportedValue{s[k], spec.types[k], std::nullopt});
    if (!d.ok()) return fail(c.Error(absl::StrCat("body: ", d.message())));
  }
  absl::StatusOr<std::vector<ImportedValue>> outs =
      c.importer().ImportNodes(*spec.body, scope, c.importer().depth() + 1);
  if (!outs.ok()) return fail(outs.status());
  ImportedValue i{s[0], spec.types[0], std::nullopt};
  absl::StatusOr<ImportedValue> next_i = bc.Emit(PrimId::kAdd, {i, bc.Const(Tensor::FromScalar<int64_t>(1))});
  if (!next_i.ok()) return fail(next_i.status());
  std::vector<AnfNode*> next = {bc.NodeOf(*next_i), s[1]};
  if (spec.cond.has_value()) {
    absl::StatusOr<ImportedValue> cond_out = ToRank0(bc, (*outs)[0], DType::kBool, "the body's condition");
    if (!cond_out.ok()) return fail(cond_out.status());
    next[1] = bc.NodeOf(*cond_out);
  }
  for (size_t k = 1; k < outs->size(); ++k) {
    const AbstractTensor* want = AsTensor(spec.types[k + 1]);
    const AbstractTensor* got = AsTensor((*outs)[k].type);
    if (want == nullptr || got == nullptr || want->dtype() != got->dtype() || want->shape() != got->shape()) {
      return fail(c.Error(absl::StrCat("loop-carried value ", k - 1, " changes type from ",
                                       spec.types[k + 1]->ToString(), " to ", (*outs)[k].type->ToString())));
    }
    next.push_back(bc.NodeOf((*outs)[k]));
  }
  return next;
}

Outputs Loop(NodeContext& c) {
  if (c.num_inputs() < 2) return c.Error("needs inputs M and cond (either may be empty)");
  LoopSpec spec;
  KGRAD_ASSIGN_OR_RETURN(spec.body, c.Graph("body"));
  int n = c.num_inputs() - 2;
  if (spec.body->input_size() != n + 2) {
    return c.Error(absl::StrCat("body takes ", spec.body->input_size(), " inputs, expected ", n + 2));
  }
  if (spec.body->output_size() != n + 1) {
    return c.Error(absl::StrCat("body has ", spec.body->output_size(), " outputs for ", n,
                                " loop-carried values (scan outputs are not supported)"));
  }
  if (c.HasInput(0)) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue m, c.Input(0));
    KGRAD_ASSIGN_OR_RETURN(spec.trip_count, ToRank0(c, m, DType::kInt64, "M"));
  }
  ImportedValue cond0 = c.Const(Tensor::FromScalar<bool>(true));
  if (c.HasInput(1)) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue cv, c.Input(1));
    KGRAD_ASSIGN_OR_RETURN(cond0, ToRank0(c, cv, DType::kBool, "cond"));
    spec.cond = cond0;
  }
  if (!spec.trip_count.has_value() && !spec.cond.has_value()) {
    return c.Error("a loop without M and cond never ends");
  }
  ImportedValue i0 = c.Const(Tensor::FromScalar<int64_t>(0));
  std::vector<AnfNode*> init = {c.NodeOf(i0), c.NodeOf(cond0)};
  // Broadened: a state's initial value (a constant counter) is not its value in
  // the body or after the loop.
  spec.types = {Broaden(i0.type), Broaden(cond0.type)};
  for (int k = 0; k < n; ++k) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue v, c.Input(2 + k));
    init.push_back(c.NodeOf(v));
    spec.types.push_back(Broaden(v.type));
  }
  absl::Status err;
  std::vector<AnfNode*> final_state = c.b().While(
      init,
      [&](GraphBuilder& lb, absl::Span<AnfNode* const> s) { return LoopCondition(c, spec, lb, s, &err); },
      [&](GraphBuilder& bb, absl::Span<AnfNode* const> s) { return LoopBody(c, spec, bb, s, &err); },
      "loop");
  KGRAD_RETURN_IF_ERROR(err);
  KGRAD_RETURN_IF_ERROR(c.b().status());
  std::vector<ImportedValue> outs;
  for (int k = 0; k < n; ++k) outs.push_back(ImportedValue{final_state[2 + k], spec.types[2 + k], std::nullopt});
  return outs;
}

}  // namespace

void AddControlFlowOps(OpTable* t) {
  (*t)["If"] = If;
  (*t)["Loop"] = Loop;
}

}  // namespace onnx_import
}  // namespace kgrad
