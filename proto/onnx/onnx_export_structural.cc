// ONNX export of the structural primitives a first-order graph keeps: tuples
// (make_tuple, tuple_getitem, tuple_setitem), which write no node (a tuple is its
// leaves, flattened into the graph's outputs), and the identities on values
// (depend, remat_barrier, stop_gradient). Control flow, closures and envs are not
// exportable (onnx_not_exportable.cc).
#include <cstdint>

#include "core/status_macros.h"
#include "proto/onnx/onnx_exporter.h"

namespace kgrad {
namespace onnx_export_internal {
namespace {

absl::StatusOr<Val> EmitMakeTuple(Exporter& e, CNode* c, const Primitive&) {
  Val v;
  v.is_tuple = true;
  for (size_t i = 0; i < c->num_args(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(Val elem, e.ValueOf(c->arg(i), c));
    v.elems.push_back(std::move(elem));
  }
  return v;
}

// The tuple operand 0 of c and the constant index operand 1, in range.
absl::StatusOr<int64_t> TupleIndex(Exporter& e, CNode* c, const Val& t) {
  const Value* k = ConstantOf(c->arg(1));
  if (!t.is_tuple || k == nullptr || !k->is_scalar()) {
    return e.Error(c, absl::StrCat(c->primitive()->name(), " of a non-tuple"));
  }
  int64_t i = k->scalar().AsInt();
  if (i < 0 || i >= static_cast<int64_t>(t.elems.size())) return e.Error(c, "index out of range");
  return i;
}

absl::StatusOr<Val> EmitTupleGetItem(Exporter& e, CNode* c, const Primitive&) {
  KGRAD_ASSIGN_OR_RETURN(Val t, e.ValueOf(c->arg(0), c));
  KGRAD_ASSIGN_OR_RETURN(int64_t i, TupleIndex(e, c, t));
  return t.elems[i];
}

// tuple_setitem(t, i, v): t with element i replaced by v.
absl::StatusOr<Val> EmitTupleSetItem(Exporter& e, CNode* c, const Primitive&) {
  KGRAD_ASSIGN_OR_RETURN(Val t, e.ValueOf(c->arg(0), c));
  KGRAD_ASSIGN_OR_RETURN(int64_t i, TupleIndex(e, c, t));
  KGRAD_ASSIGN_OR_RETURN(t.elems[i], e.ValueOf(c->arg(2), c));
  return t;
}

// depend(x, after), remat_barrier(x, ...), stop_gradient(x): x's value.
absl::StatusOr<Val> EmitFirstOperand(Exporter& e, CNode* c, const Primitive&) {
  return e.ValueOf(c->arg(0), c);
}

}  // namespace

void AddStructuralEmitters(EmitterTable* t) {
  t->EmitValue(PrimId::kMakeTuple, EmitMakeTuple);
  t->EmitValue(PrimId::kTupleGetItem, EmitTupleGetItem);
  t->EmitValue(PrimId::kTupleSetItem, EmitTupleSetItem);
  t->EmitValue(PrimId::kDepend, EmitFirstOperand);
  t->EmitValue(PrimId::kRematBarrier, EmitFirstOperand);
  t->EmitValue(PrimId::kStopGradient, EmitFirstOperand);
}

}  // namespace onnx_export_internal
}  // namespace kgrad
