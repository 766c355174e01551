// ONNX control flow in kgrad's functional form:
//   If(cond){then_branch, else_branch} -> switch(cond, @then, @else)() with the
//     branches as nested graphs reading outer values as free variables (a constant
//     condition imports only the branch taken);
//   Loop(M, cond, v...){body} -> GraphBuilder::While over the state
//     (i, cond, v..., acc...): continue while i < M and cond; the body graph is
//     imported into the loop's body graph (again, with the wider state type,
//     when the body returns a loop-carried value with dims it does not know
//     statically). Each scan output s (a body output after the condition and
//     the N loop-carried values) is an accumulator acc that starts as an empty
//     [0, ...] tensor and grows by
//       acc = concat(acc, expand_dims(s, 0)){axis 0}
//     so its final value is [iterations, ...] for any trip count, 0 included.
//     The element type is the body output's, known once the body is imported;
//     its dims that import does not know are 0 in the empty start, and the body
//     first reshapes acc to [i, shape_of(s)...] (i rows so far) so that concat
//     sees matching dims. Differentiable like any loop (concat's adjoint splits
//     at run time where the sizes are not static).
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
  std::vector<AbstractPtr> types;           // of the state (i, cond, v...), without acc...
  int num_scans = 0;
  // Set by LoopBody: the types the body returns for v..., and of one element of
  // each scan output.
  std::vector<AbstractPtr> carried_out, scan_types;
};

// The loop condition: i < M and cond (either may be absent, not both).
AnfNode* LoopCondition(NodeContext& c, const LoopSpec& spec, GraphBuilder& lb,
                       absl::Span<AnfNode* const> s, absl::Status* err) {
  Scope scope(&lb, &c.scope());
  NodeContext lc(c.importer(), scope, c.node());
  const ImportedValue cv{s[1], spec.types[1], std::nullopt};
  absl::StatusOr<ImportedValue> keep = cv;  // cond alone when there is no M
  if (spec.trip_count.has_value()) {
    keep = lc.Emit(PrimId::kLess, {ImportedValue{s[0], spec.types[0], std::nullopt}, *spec.trip_count});
    if (spec.cond.has_value() && keep.ok()) keep = lc.Emit(PrimId::kLogicalAnd, {*keep, cv});
  }
  if (keep.ok()) keep = lc.Emit(PrimId::kTensorToScalar, {*keep});
  if (!keep.ok()) {
    if (err->ok()) *err = keep.status();
    return lb.Bool(false);
  }
  return lc.NodeOf(*keep);
}

// The type of a scan output's accumulator: [?, element dims...].
AbstractPtr AccumulatorType(const AbstractTensor& elem) {
  Shape shape = {kUnknownDim};
  shape.insert(shape.end(), elem.shape().begin(), elem.shape().end());
  return MakeAbstractTensor(elem.dtype(), std::move(shape));
}

// concat(acc, expand_dims(v, 0)) for the scan output v at iteration i. When v's
// dims are not all static, the empty start (those dims 0) does not match v, so
// acc is first reshaped to [i, shape_of(v)...]: the same elements (i rows of v's
// shape), now with v's dims.
absl::StatusOr<ImportedValue> Accumulate(NodeContext& bc, const ImportedValue& i, const ImportedValue& acc,
                                         const ImportedValue& v) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tv, bc.TensorType(v));
  ImportedValue rows = acc;
  if (!tv->shape_known()) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue n,
                           bc.Emit(PrimId::kReshape, {i}, {{"shape", std::vector<int64_t>{1}}}));
    KGRAD_ASSIGN_OR_RETURN(ImportedValue dims, bc.Emit(PrimId::kShapeOf, {v}));
    KGRAD_ASSIGN_OR_RETURN(ImportedValue shape, bc.Emit(PrimId::kConcat, {n, dims}, {{"axis", int64_t{0}}}));
    KGRAD_ASSIGN_OR_RETURN(rows, bc.Emit(PrimId::kDynamicReshape, {acc, shape}));
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue row, bc.Emit(PrimId::kExpandDims, {v}, {{"axis", int64_t{0}}}));
  return bc.Emit(PrimId::kConcat, {rows, row}, {{"axis", int64_t{0}}});
}

// The scan outputs' next accumulators, appended to `next`; records their element
// types in spec.scan_types.
absl::Status AccumulateScans(NodeContext& bc, LoopSpec& spec, absl::Span<AnfNode* const> s,
                             const std::vector<ImportedValue>& outs, std::vector<AnfNode*>* next) {
  const int n = static_cast<int>(spec.types.size()) - 2;
  for (int j = 0; j < spec.num_scans; ++j) {
    const ImportedValue& v = outs[1 + n + j];
    const AbstractTensor* elem = AsTensor(v.type);
    if (elem == nullptr) {
      return bc.Error(absl::StrCat("scan output ", j, " must be a tensor, got ", v.type->ToString()));
    }
    spec.scan_types.push_back(v.type);
    ImportedValue acc{s[2 + n + j], AccumulatorType(*elem), std::nullopt};
    KGRAD_ASSIGN_OR_RETURN(ImportedValue grown,
                           Accumulate(bc, ImportedValue{s[0], spec.types[0], std::nullopt}, acc, v));
    next->push_back(bc.NodeOf(grown));
  }
  return absl::OkStatus();
}

// One iteration: the body graph's nodes, then (i + 1, cond_out, v_out..., acc...).
std::vector<AnfNode*> LoopBody(NodeContext& c, LoopSpec& spec, GraphBuilder& bb,
                               absl::Span<AnfNode* const> s, absl::Status* err) {
  Scope scope(&bb, &c.scope());
  NodeContext bc(c.importer(), scope, c.node());
  auto fail = [&](const absl::Status& st) {
    if (err->ok()) *err = st;
    return std::vector<AnfNode*>(s.begin(), s.end());
  };
  for (size_t k = 0; k < spec.types.size(); ++k) {
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
  for (size_t k = 1; k + 1 < spec.types.size(); ++k) {  // the loop-carried values
    spec.carried_out.push_back((*outs)[k].type);
    next.push_back(bc.NodeOf((*outs)[k]));
  }
  absl::Status scans = AccumulateScans(bc, spec, s, *outs, &next);
  if (!scans.ok()) return fail(scans);
  return next;
}

// The scan outputs' empty starts, [0, element dims...] (dims import does not
// know as 0: see Accumulate), placed in the loop's enclosing graph.
std::vector<AnfNode*> ScanStarts(NodeContext& c, const LoopSpec& spec, absl::Status* err) {
  std::vector<AnfNode*> starts;
  for (const AbstractPtr& t : spec.scan_types) {
    const AbstractTensor* elem = AsTensor(t);
    Shape shape = {0};
    for (int64_t d : elem->shape()) shape.push_back(d >= 0 ? d : 0);
    absl::StatusOr<Tensor> empty = Tensor::Create(elem->dtype(), shape);
    if (!empty.ok()) {
      if (err->ok()) *err = c.Error(empty.status().message());
      return {};
    }
    starts.push_back(c.NodeOf(c.Const(*std::move(empty))));
  }
  return starts;
}

// The loop's graphs and its final state (i, cond, v..., acc...) for the
// current spec.types; `init` holds the initial (i, cond, v...).
absl::StatusOr<std::vector<AnfNode*>> BuildLoop(NodeContext& c, LoopSpec& spec, std::vector<AnfNode*> init) {
  spec.carried_out.clear();
  spec.scan_types.clear();
  absl::Status err;
  auto start = [&](GraphBuilder&) {
    std::vector<AnfNode*> scans = ScanStarts(c, spec, &err);
    if (scans.size() != static_cast<size_t>(spec.num_scans)) return std::vector<AnfNode*>{};
    init.insert(init.end(), scans.begin(), scans.end());
    return init;
  };
  std::vector<AnfNode*> final_state = c.b().While(
      init.size() + spec.num_scans, start,
      [&](GraphBuilder& lb, absl::Span<AnfNode* const> s) { return LoopCondition(c, spec, lb, s, &err); },
      [&](GraphBuilder& bb, absl::Span<AnfNode* const> s) { return LoopBody(c, spec, bb, s, &err); },
      "loop");
  KGRAD_RETURN_IF_ERROR(err);
  KGRAD_RETURN_IF_ERROR(c.b().status());
  return final_state;
}

// Joins the types the body returns for the loop-carried values into their state
// types: true when one widened (a dim the body does not know statically, as
// after a Slice by the counter, or the element type of a sequence that starts
// empty), so that the body must be imported again with them; an error when a
// dtype or rank changes.
absl::StatusOr<bool> WidenCarried(NodeContext& c, LoopSpec& spec) {
  bool widened = false;
  for (size_t k = 0; k < spec.carried_out.size(); ++k) {
    AbstractPtr& state = spec.types[2 + k];
    absl::StatusOr<AbstractPtr> joined = Join(state, Broaden(spec.carried_out[k]));
    if (!joined.ok() || (AsTensor(*joined) == nullptr && AsList(*joined) == nullptr)) {
      return c.Error(absl::StrCat("loop-carried value ", k, " changes type from ", state->ToString(), " to ",
                                  spec.carried_out[k]->ToString()));
    }
    if (!AbstractEquals(*joined, state)) {
      state = *joined;
      widened = true;
    }
  }
  return widened;
}

Outputs Loop(NodeContext& c) {
  if (c.num_inputs() < 2) return c.Error("needs inputs M and cond (either may be empty)");
  LoopSpec spec;
  KGRAD_ASSIGN_OR_RETURN(spec.body, c.Graph("body"));
  int n = c.num_inputs() - 2;
  if (spec.body->input_size() != n + 2) {
    return c.Error(absl::StrCat("body takes ", spec.body->input_size(), " inputs, expected ", n + 2));
  }
  if (spec.body->output_size() < n + 1) {
    return c.Error(absl::StrCat("body has ", spec.body->output_size(), " outputs for ", n,
                                " loop-carried values (expected the condition, then them)"));
  }
  spec.num_scans = spec.body->output_size() - (n + 1);
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
  // Each further round makes at least one dim unknown, so this ends; the
  // earlier rounds' graphs are left unused.
  std::vector<AnfNode*> final_state;
  for (bool widened = true; widened;) {
    KGRAD_ASSIGN_OR_RETURN(final_state, BuildLoop(c, spec, init));
    KGRAD_ASSIGN_OR_RETURN(widened, WidenCarried(c, spec));
  }
  std::vector<ImportedValue> outs;
  for (int k = 0; k < n; ++k) outs.push_back(ImportedValue{final_state[2 + k], spec.types[2 + k], std::nullopt});
  for (int j = 0; j < spec.num_scans; ++j) {
    outs.push_back(ImportedValue{final_state[2 + n + j], AccumulatorType(*AsTensor(spec.scan_types[j])),
                                 std::nullopt});
  }
  return outs;
}

}  // namespace

void AddControlFlowOps(OpTable* t) {
  AddMappings(t, {{"If", If}, {"Loop", Loop}});
}

}  // namespace onnx_import
}  // namespace kgrad
