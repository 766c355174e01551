#include "ops/list_ops.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "ops/bprop_context.h"
#include "ops/op_def.h"
#include "ops/shape_checks.h"
#include "ops/structural.h"

namespace kgrad {
namespace ops {

absl::StatusOr<int64_t> ListPosition(int64_t i, int64_t size, bool insert) {
  const int64_t hi = insert ? size : size - 1;
  if (i < -size || i > hi) {
    return absl::OutOfRangeError(absl::StrCat("list index ", i, " is out of range for a list of ", size,
                                              insert ? " (an insertion takes [-n, n])" : ""));
  }
  return i < 0 ? i + size : i;
}

absl::StatusOr<ListSplitSpec> SplitToListSpec(const Primitive& p, TensorType x, int split_rank,
                                              const std::vector<int64_t>* split) {
  ListSplitSpec s;
  KGRAD_ASSIGN_OR_RETURN(s.axis, AxisAttr(p, "axis", x));
  const int64_t dim = x.shape[s.axis];
  if (split == nullptr) {
    s.squeeze = !p.GetBool("keepdims");
    if (dim >= 0) s.sizes.assign(dim, 1);
    return s;
  }
  if (split_rank == 1) {
    int64_t total = 0;
    for (int64_t n : *split) {
      if (n < 0) return PrimError(p, absl::StrCat("input 1 (split) has a negative size: ", n));
      total += n;
    }
    if (dim >= 0 && total != dim) {
      return PrimError(p, absl::StrCat("input 1 (split) sums to ", total, ", but must sum to dim ", s.axis,
                                       " of input 0, ", x.ToString()));
    }
    s.sizes = *split;
    return s;
  }
  const int64_t chunk = split->at(0);
  if (chunk <= 0) return PrimError(p, absl::StrCat("input 1 (split) must be a positive chunk size, got ", chunk));
  for (int64_t left = dim; left > 0; left -= chunk) s.sizes.push_back(std::min(left, chunk));
  return s;
}

namespace {

// ----- Inference ----------------------------------------------------------------------
absl::StatusOr<const AbstractList*> ListArg(const InferCall& c, int i) {
  const AbstractList* l = AsList(c.args[i]);
  if (l == nullptr) return ArgError(c, i, "a list");
  return l;
}

absl::Status IndexArg(const InferCall& c, int i) {
  const AbstractScalar* s = AsScalar(c.args[i]);
  if (s == nullptr || !IsInteger(s->dtype())) return ArgError(c, i, "an integer scalar (a list index)");
  return absl::OkStatus();
}

// The list's element type joined with a new element's.
absl::StatusOr<AbstractPtr> WithElement(const InferCall& c, const AbstractList& l, const AbstractPtr& v) {
  absl::StatusOr<AbstractPtr> e = Join(l.element(), Broaden(v));
  if (!e.ok()) {
    return PrimError(c.prim, absl::StrCat("a list's elements share one type: cannot store ", v->ToString(),
                                          " in a ", l.ToString()));
  }
  return MakeAbstractList(*e);
}

// The element type of a list input that must hold tensors.
absl::StatusOr<const AbstractTensor*> TensorElement(const InferCall& c, int i) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractList* l, ListArg(c, i));
  const AbstractTensor* t = AsTensor(l->element());
  if (t == nullptr) {
    return ArgError(c, i, l->element() == nullptr ? "a list whose element type is known (nothing is stored in it)"
                                                  : "a list of tensors");
  }
  return t;
}

absl::StatusOr<AbstractPtr> InferMakeList(const InferCall& c) {
  AbstractPtr element;
  for (size_t i = 0; i < c.args.size(); ++i) {
    absl::StatusOr<AbstractPtr> e = Join(element, Broaden(c.args[i]));
    if (!e.ok()) {
      return PrimError(c.prim, absl::StrCat("a list's elements share one type: input ", i, " is ",
                                            c.args[i]->ToString(), ", the ones before ", element->ToString()));
    }
    element = *e;
  }
  return MakeAbstractList(std::move(element));
}

absl::StatusOr<AbstractPtr> InferListLen(const InferCall& c) {
  KGRAD_RETURN_IF_ERROR(ListArg(c, 0).status());
  return MakeAbstractScalar(DType::kInt64);
}

absl::StatusOr<AbstractPtr> InferListGetItem(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractList* l, ListArg(c, 0));
  KGRAD_RETURN_IF_ERROR(IndexArg(c, 1));
  if (l->element() == nullptr) {
    return PrimError(c.prim, "input 0 is a list whose element type is unknown (nothing is ever stored in it)");
  }
  return l->element();
}

// list_setitem(l, i, v) and list_insert(l, i, v).
absl::StatusOr<AbstractPtr> InferListStore(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractList* l, ListArg(c, 0));
  KGRAD_RETURN_IF_ERROR(IndexArg(c, 1));
  return WithElement(c, *l, c.args[2]);
}

absl::StatusOr<AbstractPtr> InferListErase(const InferCall& c) {
  KGRAD_RETURN_IF_ERROR(ListArg(c, 0).status());
  KGRAD_RETURN_IF_ERROR(IndexArg(c, 1));
  return c.args[0];
}

// The shape list_concat gives elements of shape `e`: the axis dim unknown (the
// length is a run-time fact), or a new unknown dim at axis.
absl::StatusOr<Shape> ListConcatShape(const Primitive& p, const AbstractTensor& e) {
  Shape out = e.shape();
  const bool new_axis = p.GetBool("new_axis");
  KGRAD_ASSIGN_OR_RETURN(int axis, NormalizeAxis(p.GetInt("axis"), e.rank() + (new_axis ? 1 : 0)));
  if (new_axis) {
    out.insert(out.begin() + axis, kUnknownDim);
  } else {
    out[axis] = kUnknownDim;
  }
  return out;
}

absl::StatusOr<AbstractPtr> InferListConcat(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* e, TensorElement(c, 0));
  absl::StatusOr<Shape> out = ListConcatShape(c.prim, *e);
  if (!out.ok()) return PrimError(c.prim, out.status().message());
  return MakeAbstractTensor(e->dtype(), *std::move(out));
}

absl::StatusOr<AbstractPtr> InferListConcatGrad(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* e, TensorElement(c, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* dy, TensorArg(c, 1));
  if (dy->dtype() != e->dtype()) return ArgError(c, 1, absl::StrCat("a ", DTypeName(e->dtype()), " tensor"));
  return SensitivityOf(c.args[0]);
}

// The split operand's elements as inference knows them (null when unknown).
std::optional<std::vector<int64_t>> KnownSplit(const AbstractTensor& t) {
  if (!t.value().has_value()) return std::nullopt;
  std::vector<int64_t> out;
  for (int64_t v : *t.value()) {
    if (!IsValueNumber(v)) return std::nullopt;
    out.push_back(v);
  }
  return out;
}

absl::StatusOr<AbstractPtr> InferSplitToList(const InferCall& c) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* x, TensorArg(c, 0));
  std::optional<std::vector<int64_t>> split;
  int split_rank = 0;
  bool split_known = true;
  if (c.args.size() > 1) {
    KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* s, TensorArg(c, 1));
    if (!IsInteger(s->dtype()) || s->rank() > 1) return ArgError(c, 1, "an i32 or i64 tensor of rank 0 or 1 (split)");
    split_rank = s->rank();
    split = KnownSplit(*s);
    split_known = split.has_value();
  }
  Shape piece = x->shape();
  int axis = 0;
  if (split_known) {
    KGRAD_ASSIGN_OR_RETURN(ListSplitSpec spec,
                           SplitToListSpec(c.prim, *x, split_rank, split ? &*split : nullptr));
    axis = spec.axis;
    // One dim for every piece when they agree (the last chunk may be smaller).
    int64_t d = spec.sizes.empty() ? kUnknownDim : spec.sizes[0];
    for (int64_t n : spec.sizes) d = n == d ? d : kUnknownDim;
    piece[axis] = d;
    if (spec.squeeze) piece.erase(piece.begin() + axis);
  } else {
    KGRAD_ASSIGN_OR_RETURN(axis, AxisAttr(c.prim, "axis", *x));
    piece[axis] = kUnknownDim;
  }
  return MakeAbstractList(MakeAbstractTensor(x->dtype(), std::move(piece)));
}

// ----- Gradient rules ---------------------------------------------------------------------
// A list index as a position in [0, len(l)]: i, or i + len(l) when negative (the
// adjoints index lists of other lengths, where a negative index would move).
AnfNode* Position(BpropContext& c, AnfNode* i, AnfNode* l) {
  AnfNode* negative = c.Op(PrimId::kScalarLt, {i, c.Const(Value(Scalar::Int(0, DType::kInt64)))});
  AnfNode* wrapped = c.Op(PrimId::kScalarAdd, {i, c.Op(PrimId::kListLen, {l})});
  return c.Op(PrimId::kSwitch, {negative, wrapped, i});
}

// Forward: l = [x_0, ..., x_n].  Backward: dx_i = dl[i].
absl::Status BpropMakeList(BpropContext& c) {
  for (int i = 0; i < c.num_inputs(); ++i) c.SetGrad(i, c.Op(PrimId::kListGetItem, {c.Dout(), c.Int(i)}));
  return absl::OkStatus();
}

// Forward: y = l[i].  Backward: dl = zeros_like(l) with element i set to dy.
absl::Status BpropListGetItem(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kListSetItem, {c.ZerosLike(c.I(0)), c.I(1), c.Dout()}));
  return absl::OkStatus();
}

// Forward: y = l with y[i] = v.  Backward: dl = dy with element i zeroed, dv = dy[i].
absl::Status BpropListSetItem(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kListSetItem, {c.Dout(), c.I(1), c.ZerosLike(c.I(2))}));
  c.SetGrad(2, c.Op(PrimId::kListGetItem, {c.Dout(), c.I(1)}));
  return absl::OkStatus();
}

// Forward: y = l[:p] + [v] + l[p:] (p = i, wrapped when negative).
// Backward: dl = dy without element p, dv = dy[p].
absl::Status BpropListInsert(BpropContext& c) {
  AnfNode* p = Position(c, c.I(1), c.I(0));
  c.SetGrad(0, c.Op(PrimId::kListErase, {c.Dout(), p}));
  c.SetGrad(2, c.Op(PrimId::kListGetItem, {c.Dout(), p}));
  return absl::OkStatus();
}

// Forward: y = l[:p] + l[p+1:].  Backward: dl = dy with a zero inserted at p
// (shaped like l[p]).
absl::Status BpropListErase(BpropContext& c) {
  AnfNode* p = Position(c, c.I(1), c.I(0));
  AnfNode* zero = c.ZerosLike(c.Op(PrimId::kListGetItem, {c.I(0), p}));
  c.SetGrad(0, c.Op(PrimId::kListInsert, {c.Dout(), p, zero}));
  return absl::OkStatus();
}

AttrMap ConcatAttrs(const Primitive& p) {
  return {{"axis", p.GetInt("axis")}, {"new_axis", p.GetBool("new_axis")}};
}

// Forward: y = concat(l_0, ..., l_n){axis} (or stack).  Backward: dl_k = the piece
// of dy that l_k filled.
absl::Status BpropListConcat(BpropContext& c) {
  c.SetGrad(0, c.Op(PrimId::kListConcatGrad, {c.I(0), c.Dout()}, ConcatAttrs(c.prim())));
  return absl::OkStatus();
}

// Forward: y = pieces of g shaped like l's elements (linear in g; l gives shapes
// only).  Backward: dg = list_concat(dy), the pieces joined again.
absl::Status BpropListConcatGrad(BpropContext& c) {
  c.SetGrad(1, c.Op(PrimId::kListConcat, {c.Dout()}, ConcatAttrs(c.prim())));
  return absl::OkStatus();
}

// Forward: y = x cut along axis.  Backward: dx = the pieces of dy joined along
// axis (stacked when the axis was dropped); split gets nothing.
absl::Status BpropSplitToList(BpropContext& c) {
  const bool squeezed = c.num_inputs() == 1 && !c.prim().GetBool("keepdims");
  c.SetGrad(0, c.Op(PrimId::kListConcat, {c.Dout()},
                    {{"axis", c.prim().GetInt("axis")}, {"new_axis", squeezed}}));
  return absl::OkStatus();
}

// A list op the executor runs on Values, passing on what it is given.
OpDef ListMover(PrimId id, int min_inputs, int max_inputs, InferFn infer) {
  return OpDef(id, min_inputs, max_inputs, infer).Structural().MovesOnly();
}

}  // namespace

void RegisterListOps(std::vector<PrimitiveDef>* defs) {
  const std::vector<AttrSpec> concat = {IntAttr("axis", 0), BoolAttr("new_axis", false)};
  defs->push_back(ListMover(PrimId::kMakeList, 0, -1, InferMakeList).Bprop(BpropMakeList).Linear());
  defs->push_back(ListMover(PrimId::kListLen, 1, 1, InferListLen).ZeroGradient());
  defs->push_back(ListMover(PrimId::kListGetItem, 2, 2, InferListGetItem).Bprop(BpropListGetItem).Linear());
  defs->push_back(ListMover(PrimId::kListSetItem, 3, 3, InferListStore).Bprop(BpropListSetItem).Linear());
  defs->push_back(ListMover(PrimId::kListInsert, 3, 3, InferListStore).Bprop(BpropListInsert).Linear());
  defs->push_back(ListMover(PrimId::kListErase, 2, 2, InferListErase).Bprop(BpropListErase).Linear());
  defs->push_back(OpDef(PrimId::kListConcat, 1, 1, InferListConcat, concat).Bprop(BpropListConcat).Linear());
  // Not Linear: l (differentiable in type) only gives the pieces' shapes.
  defs->push_back(OpDef(PrimId::kListConcatGrad, 2, 2, InferListConcatGrad, concat).Bprop(BpropListConcatGrad));
  defs->push_back(OpDef(PrimId::kSplitToList, 1, 2, InferSplitToList, {IntAttr("axis", 0), BoolAttr("keepdims", true)})
                      .Bprop(BpropSplitToList)
                      .Linear());
}

}  // namespace ops
}  // namespace kgrad
