// ONNX's sequences and optionals as kgrad lists (ops/list_ops.h):
//   SequenceConstruct(x...)          = make_list(x...)
//   SequenceEmpty                    = make_list()
//   SequenceAt(s, p)                 = list_getitem(s, p)
//   SequenceInsert(s, x[, p])        = list_insert(s, p, x) (p: list_len(s), appended)
//   SequenceErase(s[, p])            = list_erase(s, p) (p: -1, the last)
//   SequenceLength(s)                = list_len(s) as an i64 tensor
//   SplitToSequence(x[, split])      = split_to_list(x[, split]){axis, keepdims}
//   ConcatFromSequence(s)            = list_concat(s){axis, new_axis}
// An optional is a list of at most one element:
//   Optional(x) = make_list(x), Optional{type} = make_list(),
//   OptionalHasElement(o) = list_len(o) > 0, OptionalGetElement(o) = o[0].
// Positions (i32/i64 tensors of one element) become the integer scalars list
// indices are. From opset 18 OptionalHasElement and OptionalGetElement also take a
// tensor or a sequence (present, itself); a list then must be known to be an
// optional (ImportedValue::optional), since an optional tensor and a sequence of
// tensors are both lists of tensors.
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_context.h"

namespace kgrad {
namespace onnx_import {
namespace {

absl::StatusOr<ImportedValue> ListInput(NodeContext& c, int i) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue v, c.Input(i));
  if (AsList(v.type) == nullptr) {
    return c.Error(absl::StrCat("input ", i, " must be a sequence, got ", v.type->ToString()));
  }
  return v;
}

// Input i, a one-element integer tensor, as an integer scalar.
absl::StatusOr<ImportedValue> PositionInput(NodeContext& c, int i) {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue p, c.Input(i));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(p));
  if (!IsInteger(t->dtype()) || t->rank() > 1 || (t->rank() == 1 && t->shape()[0] == 0)) {
    return c.Error(absl::StrCat("input ", i, " (position) must be an i32 or i64 scalar, got ", t->ToString()));
  }
  return c.Emit(PrimId::kTensorToScalar, {p});
}

ImportedValue IntScalar(NodeContext& c, int64_t v) {
  ImportedValue out;
  out.node = c.b().Const(Value(Scalar::Int(v, DType::kInt64)));
  out.type = out.node->abstract();
  return out;
}

Outputs SequenceConstruct(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1 << 16));
  std::vector<ImportedValue> xs;
  for (int i = 0; i < c.num_inputs(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(i));
    xs.push_back(x);
  }
  return OneOutput(c.Emit(PrimId::kMakeList, xs));
}

Outputs SequenceEmpty(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(0, 0));
  return OneOutput(c.Emit(PrimId::kMakeList, {}));
}

Outputs SequenceAt(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue s, ListInput(c, 0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue p, PositionInput(c, 1));
  return OneOutput(c.Emit(PrimId::kListGetItem, {s, p}));
}

Outputs SequenceInsert(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 3));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue s, ListInput(c, 0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(1));
  absl::StatusOr<ImportedValue> p = c.HasInput(2) ? PositionInput(c, 2) : c.Emit(PrimId::kListLen, {s});
  KGRAD_RETURN_IF_ERROR(p.status());
  return OneOutput(c.Emit(PrimId::kListInsert, {s, *p, x}));
}

Outputs SequenceErase(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 2));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue s, ListInput(c, 0));
  ImportedValue p = IntScalar(c, -1);
  if (c.HasInput(1)) {
    KGRAD_ASSIGN_OR_RETURN(p, PositionInput(c, 1));
  }
  return OneOutput(c.Emit(PrimId::kListErase, {s, p}));
}

Outputs SequenceLength(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue s, ListInput(c, 0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue n, c.Emit(PrimId::kListLen, {s}));
  return OneOutput(c.Emit(PrimId::kScalarToTensor, {n}, {{"dtype", DType::kInt64}}));
}

Outputs SplitToSequence(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 2));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(int64_t axis, c.Int("axis", 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t keepdims, c.Int("keepdims", 1));
  std::vector<ImportedValue> args = {x};
  if (c.HasInput(1)) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue split, c.Input(1));
    args.push_back(split);
  }
  return OneOutput(c.Emit(PrimId::kSplitToList, args, {{"axis", axis}, {"keepdims", keepdims != 0}}));
}

Outputs ConcatFromSequence(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue s, ListInput(c, 0));
  if (!c.HasAttr("axis")) return c.Error("the attribute 'axis' is required");
  KGRAD_ASSIGN_OR_RETURN(int64_t axis, c.Int("axis", 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t new_axis, c.Int("new_axis", 0));
  return OneOutput(c.Emit(PrimId::kListConcat, {s}, {{"axis", axis}, {"new_axis", new_axis != 0}}));
}

// ----- Optionals ---------------------------------------------------------------------------
Outputs Optional(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(0, 1));
  std::vector<ImportedValue> xs;
  if (c.HasInput(0)) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
    xs.push_back(x);
  } else if (!c.HasAttr("type")) {
    return c.Error("an empty optional needs the attribute 'type'");
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue o, c.Emit(PrimId::kMakeList, xs));
  o.optional = true;
  return std::vector<ImportedValue>{o};
}

// Whether input 0 is an optional (a list of at most one element) rather than a
// value that is present (a tensor or sequence, accepted from opset 18).
absl::StatusOr<bool> IsOptional(NodeContext& c, const ImportedValue& v) {
  if (c.opset() < 18) {
    if (AsList(v.type) == nullptr) return c.Error(absl::StrCat("input 0 must be an optional, got ", v.type->ToString()));
    return true;
  }
  if (v.optional) return true;
  if (AsList(v.type) == nullptr) return false;
  return c.Error(absl::StrCat("cannot tell whether input 0 (", v.type->ToString(),
                              ") is an optional or a sequence: it does not come from an Optional node or an "
                              "optional graph input"));
}

Outputs OptionalHasElement(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(0, 1));
  if (!c.HasInput(0)) return OneOutput(c.Const(Tensor::FromScalar<bool>(false)));  // opset 18: none
  KGRAD_ASSIGN_OR_RETURN(ImportedValue o, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(bool optional, IsOptional(c, o));
  if (!optional) return OneOutput(c.Const(Tensor::FromScalar<bool>(true)));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue n, c.Emit(PrimId::kListLen, {o}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue has, c.Emit(PrimId::kScalarGt, {n, IntScalar(c, 0)}));
  return OneOutput(c.Emit(PrimId::kScalarToTensor, {has}, {{"dtype", DType::kBool}}));
}

Outputs OptionalGetElement(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue o, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(bool optional, IsOptional(c, o));
  if (!optional) return std::vector<ImportedValue>{o};
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Emit(PrimId::kListGetItem, {o, IntScalar(c, 0)}));
  return std::vector<ImportedValue>{x};
}

}  // namespace

void AddSequenceOps(OpTable* t) {
  AddMappings(t, {{"SequenceConstruct", SequenceConstruct},
                  {"SequenceEmpty", SequenceEmpty},
                  {"SequenceAt", SequenceAt},
                  {"SequenceInsert", SequenceInsert},
                  {"SequenceErase", SequenceErase},
                  {"SequenceLength", SequenceLength},
                  {"SplitToSequence", SplitToSequence},
                  {"ConcatFromSequence", ConcatFromSequence},
                  {"Optional", Optional},
                  {"OptionalHasElement", OptionalHasElement},
                  {"OptionalGetElement", OptionalGetElement}});
}

}  // namespace onnx_import
}  // namespace kgrad
