#include "backends/list_kernels.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/device.h"
#include "core/status_macros.h"
#include "ops/list_ops.h"
#include "ops/registry.h"

namespace kgrad {
namespace {

absl::StatusOr<const std::vector<Value>*> ListInput(const KernelContext& ctx, size_t i) {
  const Value& v = ctx.input(i);
  if (!v.is_list()) {
    return absl::InvalidArgumentError(absl::StrCat("input ", i, " must be a list, got ", v.TypeString()));
  }
  return &v.list();
}

// Input i as a position in a list of `size` elements (ops::ListPosition).
absl::StatusOr<int64_t> PositionInput(const KernelContext& ctx, size_t i, size_t size, bool insert) {
  const Value& v = ctx.input(i);
  if (!v.is_scalar() || !v.scalar().is_int()) {
    return absl::InvalidArgumentError(absl::StrCat("input ", i, " must be an integer, got ", v.TypeString()));
  }
  return ops::ListPosition(v.scalar().AsInt(), static_cast<int64_t>(size), insert);
}

absl::StatusOr<Value> MakeList(KernelContext& ctx) {
  std::vector<Value> elems;
  elems.reserve(ctx.num_inputs());
  for (size_t i = 0; i < ctx.num_inputs(); ++i) elems.push_back(std::move(ctx.mutable_input(i)));
  return Value::List(std::move(elems));
}

absl::StatusOr<Value> ListLen(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const std::vector<Value>* l, ListInput(ctx, 0));
  return Value(Scalar::Int(static_cast<int64_t>(l->size()), DType::kInt64));
}

absl::StatusOr<Value> ListGetItem(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const std::vector<Value>* l, ListInput(ctx, 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t k, PositionInput(ctx, 1, l->size(), false));
  return (*l)[k];
}

absl::StatusOr<Value> ListSetItem(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const std::vector<Value>* l, ListInput(ctx, 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t k, PositionInput(ctx, 1, l->size(), false));
  std::vector<Value> elems = *l;
  elems[k] = std::move(ctx.mutable_input(2));
  return Value::List(std::move(elems));
}

absl::StatusOr<Value> ListInsert(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const std::vector<Value>* l, ListInput(ctx, 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t k, PositionInput(ctx, 1, l->size(), true));
  std::vector<Value> elems;
  elems.reserve(l->size() + 1);
  elems.insert(elems.end(), l->begin(), l->begin() + k);
  elems.push_back(std::move(ctx.mutable_input(2)));
  elems.insert(elems.end(), l->begin() + k, l->end());
  return Value::List(std::move(elems));
}

absl::StatusOr<Value> ListErase(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const std::vector<Value>* l, ListInput(ctx, 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t k, PositionInput(ctx, 1, l->size(), false));
  std::vector<Value> elems = *l;
  elems.erase(elems.begin() + k);
  return Value::List(std::move(elems));
}

// ----- Tensor work through the device's kernels --------------------------------------
// id{attrs}(inputs...) run by the device's kernel for id.
absl::StatusOr<Value> RunOp(Device* device, PrimId id, AttrMap attrs, std::vector<Value> inputs) {
  KGRAD_ASSIGN_OR_RETURN(PrimitivePtr prim, DefaultRegistry().Make(id, std::move(attrs)));
  KernelFn fn = device->kernel(id);
  if (fn == nullptr) return absl::UnimplementedError(absl::StrCat("no ", prim->name(), " kernel on this device"));
  KernelContext ctx(*prim, absl::MakeSpan(inputs), device);
  return fn(ctx);
}

// The elements of input 0, which must be tensors of one dtype and rank.
absl::StatusOr<std::vector<const Tensor*>> TensorElements(const KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const std::vector<Value>* l, ListInput(ctx, 0));
  std::vector<const Tensor*> out;
  for (size_t k = 0; k < l->size(); ++k) {
    const Value& e = (*l)[k];
    if (!e.is_tensor()) {
      return absl::InvalidArgumentError(absl::StrCat("element ", k, " of input 0 must be a tensor, got ", e.TypeString()));
    }
    out.push_back(&e.tensor());
  }
  return out;
}

absl::StatusOr<Value> ListConcat(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<const Tensor*> elems, TensorElements(ctx));
  if (elems.empty()) {
    return absl::InvalidArgumentError("input 0 is an empty list: there is nothing to concatenate");
  }
  const int64_t axis = ctx.prim().GetInt("axis");
  std::vector<Value> parts;
  for (const Tensor* e : elems) {
    if (!ctx.prim().GetBool("new_axis")) {
      parts.push_back(Value(*e));
      continue;
    }
    // The new axis counts against the stacked rank (-1: after the last dim).
    const int64_t at = axis < 0 ? axis + e->rank() + 1 : axis;
    KGRAD_ASSIGN_OR_RETURN(Value row, RunOp(ctx.device(), PrimId::kExpandDims, {{"axis", at}}, {Value(*e)}));
    parts.push_back(std::move(row));
  }
  absl::StatusOr<Value> out = RunOp(ctx.device(), PrimId::kConcat, {{"axis", axis}}, std::move(parts));
  if (!out.ok()) {
    // concat numbers its inputs as the list numbers its elements.
    return absl::Status(out.status().code(), absl::StrCat("the elements, as concat's inputs: ", out.status().message()));
  }
  return out;
}

// `x` cut along `axis` into pieces of `sizes` (each squeezed at axis when
// `squeeze`), as a list.
absl::StatusOr<Value> SplitInto(Device* device, const Tensor& x, int axis, const std::vector<int64_t>& sizes,
                                bool squeeze) {
  if (sizes.empty()) return Value::List({});
  KGRAD_ASSIGN_OR_RETURN(Value pieces, RunOp(device, PrimId::kSplit, {{"axis", int64_t{axis}}, {"sizes", sizes}},
                                             {Value(x)}));
  // One piece comes back as itself, several as a tuple.
  std::vector<Value> elems = pieces.is_tuple() ? pieces.tuple() : std::vector<Value>{pieces};
  if (squeeze) {
    for (Value& e : elems) {
      KGRAD_ASSIGN_OR_RETURN(e, RunOp(device, PrimId::kSqueeze, {{"axes", std::vector<int64_t>{axis}}}, {e}));
    }
  }
  return Value::List(std::move(elems));
}

absl::StatusOr<Value> ListConcatGrad(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<const Tensor*> elems, TensorElements(ctx));
  KGRAD_ASSIGN_OR_RETURN(const Tensor* dy, ctx.TensorAt(1));
  const bool new_axis = ctx.prim().GetBool("new_axis");
  KGRAD_ASSIGN_OR_RETURN(int axis, NormalizeAxis(ctx.prim().GetInt("axis"), dy->rank()));
  std::vector<int64_t> sizes;
  for (const Tensor* e : elems) {
    if (e->rank() != dy->rank() - (new_axis ? 1 : 0)) {
      return absl::InvalidArgumentError(absl::StrCat("input 1, ", dy->TypeString(), ", is not the concatenation of ",
                                                     e->TypeString(), " elements"));
    }
    sizes.push_back(new_axis ? 1 : e->shape()[axis]);
  }
  return SplitInto(ctx.device(), *dy, axis, sizes, new_axis);
}

absl::StatusOr<Value> SplitToList(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* x, ctx.TensorAt(0));
  std::vector<int64_t> split;
  int split_rank = 0;
  if (ctx.num_inputs() > 1) {
    KGRAD_ASSIGN_OR_RETURN(const Tensor* s, ctx.IndexTensorAt(1));
    if (s->rank() > 1) {
      return absl::InvalidArgumentError(absl::StrCat("input 1 (split) must have rank 0 or 1, got ", s->TypeString()));
    }
    KGRAD_ASSIGN_OR_RETURN(Tensor host, ctx.device()->CopyToHost(*s));
    for (int64_t k = 0; k < host.NumElements(); ++k) split.push_back(static_cast<int64_t>(host.ElementAsDouble(k)));
    split_rank = s->rank();
  }
  KGRAD_ASSIGN_OR_RETURN(ops::ListSplitSpec spec,
                         ops::SplitToListSpec(ctx.prim(), *x, split_rank, ctx.num_inputs() > 1 ? &split : nullptr));
  return SplitInto(ctx.device(), *x, spec.axis, spec.sizes, spec.squeeze);
}

}  // namespace

void RegisterListKernels(KernelTable* t) {
  t->Set(PrimId::kMakeList, MakeList);
  t->Set(PrimId::kListLen, ListLen);
  t->Set(PrimId::kListGetItem, ListGetItem);
  t->Set(PrimId::kListSetItem, ListSetItem);
  t->Set(PrimId::kListInsert, ListInsert);
  t->Set(PrimId::kListErase, ListErase);
  t->Set(PrimId::kListConcat, ListConcat);
  t->Set(PrimId::kListConcatGrad, ListConcatGrad);
  t->Set(PrimId::kSplitToList, SplitToList);
}

}  // namespace kgrad
