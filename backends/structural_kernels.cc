#include "backends/structural_kernels.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/device.h"
#include "core/scalar_arith.h"
#include "core/status_macros.h"
#include "core/value_walk.h"
#include "ops/registry.h"

namespace kgrad {
namespace {

absl::Status Expect(bool ok, size_t i, const Value& v, const char* what) {
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("input ", i, " must be ", what, ", got ", v.TypeString()));
}

absl::StatusOr<int64_t> IndexInput(const KernelContext& ctx, size_t i, size_t size) {
  const Value& v = ctx.input(i);
  KGRAD_RETURN_IF_ERROR(Expect(v.is_scalar() && v.scalar().is_int(), i, v, "an integer"));
  int64_t k = v.scalar().AsInt();
  int64_t n = static_cast<int64_t>(size);
  if (k < -n || k >= n) {
    return absl::OutOfRangeError(
        absl::StrCat("tuple index ", k, " is out of range for a tuple of ", n));
  }
  return k < 0 ? k + n : k;
}

absl::StatusOr<Value> MakeTuple(KernelContext& ctx) {
  std::vector<Value> elems;
  elems.reserve(ctx.num_inputs());
  for (size_t i = 0; i < ctx.num_inputs(); ++i) elems.push_back(std::move(ctx.mutable_input(i)));
  return Value::Tuple(std::move(elems));
}

absl::StatusOr<Value> TupleGetItem(KernelContext& ctx) {
  const Value& t = ctx.input(0);
  KGRAD_RETURN_IF_ERROR(Expect(t.is_tuple(), 0, t, "a tuple"));
  KGRAD_ASSIGN_OR_RETURN(int64_t k, IndexInput(ctx, 1, t.tuple().size()));
  return t.tuple()[k];
}

absl::StatusOr<Value> TupleSetItem(KernelContext& ctx) {
  const Value& t = ctx.input(0);
  KGRAD_RETURN_IF_ERROR(Expect(t.is_tuple(), 0, t, "a tuple"));
  KGRAD_ASSIGN_OR_RETURN(int64_t k, IndexInput(ctx, 1, t.tuple().size()));
  std::vector<Value> elems = t.tuple();
  elems[k] = ctx.input(2);
  return Value::Tuple(std::move(elems));
}

absl::StatusOr<Value> Switch(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(bool c, ConditionValue(ctx.input(0), ctx.device()));
  return std::move(ctx.mutable_input(c ? 1 : 2));
}

absl::StatusOr<Value> Partial(KernelContext& ctx) {
  const Value& fn = ctx.input(0);
  KGRAD_RETURN_IF_ERROR(Expect(fn.is_callable(), 0, fn, "a function"));
  std::vector<Value> args;
  for (size_t i = 1; i < ctx.num_inputs(); ++i) args.push_back(std::move(ctx.mutable_input(i)));
  return Value::Partial(fn, std::move(args));
}

absl::StatusOr<Value> First(KernelContext& ctx) { return std::move(ctx.mutable_input(0)); }

absl::StatusOr<std::string> KeyInput(const KernelContext& ctx, size_t i) {
  const Value& k = ctx.input(i);
  KGRAD_RETURN_IF_ERROR(Expect(k.is_string(), i, k, "a string key"));
  return k.str();
}

absl::StatusOr<Value> EnvSetItem(KernelContext& ctx) {
  const Value& env = ctx.input(0);
  KGRAD_RETURN_IF_ERROR(Expect(env.is_env(), 0, env, "an env"));
  KGRAD_ASSIGN_OR_RETURN(std::string key, KeyInput(ctx, 1));
  return Value::EnvWith(env, key, ctx.input(2));
}

absl::StatusOr<Value> EnvGetItem(KernelContext& ctx) {
  const Value& env = ctx.input(0);
  KGRAD_RETURN_IF_ERROR(Expect(env.is_env(), 0, env, "an env"));
  KGRAD_ASSIGN_OR_RETURN(std::string key, KeyInput(ctx, 1));
  auto it = env.env().find(key);
  if (it == env.env().end()) return std::move(ctx.mutable_input(2));
  return it->second;
}

absl::StatusOr<Value> EnvAddKernel(KernelContext& ctx) {
  KGRAD_RETURN_IF_ERROR(Expect(ctx.input(0).is_env(), 0, ctx.input(0), "an env"));
  KGRAD_RETURN_IF_ERROR(Expect(ctx.input(1).is_env(), 1, ctx.input(1), "an env"));
  return HyperAdd(ctx.input(0), ctx.input(1), ctx.device());
}

absl::StatusOr<Value> HyperAddKernel(KernelContext& ctx) {
  return HyperAdd(ctx.input(0), ctx.input(1), ctx.device());
}

absl::StatusOr<Value> ZerosLikeKernel(KernelContext& ctx) {
  return FilledLike(ctx.input(0), 0.0, ctx.device());
}

absl::StatusOr<Value> OnesLikeKernel(KernelContext& ctx) {
  const Value& v = ctx.input(0);
  KGRAD_RETURN_IF_ERROR(Expect(v.is_tensor() || v.is_scalar() || v.is_sequence(), 0, v,
                               "a tensor, scalar, tuple or list"));
  return FilledLike(v, 1.0, ctx.device());
}

// ----- Scalars ---------------------------------------------------------------------
// One semantics for scalar arithmetic everywhere (core/scalar_arith.h).
template <PrimId kId>
absl::StatusOr<Value> ScalarBinary(KernelContext& ctx) {
  const Value& a = ctx.input(0);
  const Value& b = ctx.input(1);
  KGRAD_RETURN_IF_ERROR(Expect(a.is_scalar(), 0, a, "a scalar"));
  KGRAD_RETURN_IF_ERROR(Expect(b.is_scalar(), 1, b, "a scalar"));
  KGRAD_ASSIGN_OR_RETURN(Scalar r, ApplyScalarOp(kId, a.scalar(), b.scalar()));
  return Value(r);
}

// Registers ScalarBinary<id> for each id.
template <PrimId... kIds>
void SetScalarBinary(KernelTable* t) {
  (t->Set(kIds, ScalarBinary<kIds>), ...);
}

absl::StatusOr<Value> ScalarToTensor(KernelContext& ctx) {
  const Value& s = ctx.input(0);
  KGRAD_RETURN_IF_ERROR(Expect(s.is_scalar(), 0, s, "a scalar"));
  KGRAD_ASSIGN_OR_RETURN(Tensor t, ctx.device()->Fill(ctx.prim().GetDType("dtype"), {},
                                                      s.scalar().AsDouble()));
  return Value(std::move(t));
}

absl::StatusOr<Value> TensorToScalar(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(const Tensor* t, ctx.TensorAt(0));
  if (t->NumElements() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("input 0 must have one element, got ", t->TypeString()));
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor host, ctx.device()->CopyToHost(*t));
  // Integers are read exactly (through double, an i64 above 2^53 would change).
  switch (host.dtype()) {
    case DType::kInt64: return Value(Scalar::Int(host.data<int64_t>()[0], DType::kInt64));
    case DType::kInt32: return Value(Scalar::Int(host.data<int32_t>()[0], DType::kInt32));
    case DType::kBool: return Value(Scalar::Bool(host.data<bool>()[0]));
    default: return Value(Scalar::FromDouble(host.dtype(), host.ElementAsDouble(0)));
  }
}

}  // namespace

absl::StatusOr<bool> ConditionValue(const Value& c, Device* device) {
  if (c.is_scalar()) return c.scalar().AsBool();
  if (c.is_tensor() && c.tensor().NumElements() == 1 && c.tensor().dtype() == DType::kBool) {
    KGRAD_ASSIGN_OR_RETURN(Tensor host, device->CopyToHost(c.tensor()));
    return host.data<bool>()[0];
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "condition must be a bool scalar or a one-element bool tensor, got ", c.TypeString()));
}

absl::StatusOr<Value> FilledLike(const Value& v, double value, Device* device) {
  return MapLeaves(v, [&](const Value& leaf) -> absl::StatusOr<Value> {
    switch (leaf.kind()) {
      case Value::Kind::kTensor: {
        KGRAD_ASSIGN_OR_RETURN(Tensor t,
                               device->Fill(leaf.tensor().dtype(), leaf.tensor().shape(), value));
        return Value(std::move(t));
      }
      case Value::Kind::kScalar: return Value(Scalar::FromDouble(leaf.scalar().dtype(), value));
      case Value::Kind::kNone: return Value::None();
      default:
        // Functions and envs: their sensitivity is an env; zero is the empty env.
        return Value::EmptyEnv();
    }
  });
}

namespace {

// One pair of HyperAdd's walk whose parts are added first: two tuples or two
// lists of one length (element-wise) or two envs (the keys both hold; the others are copied).
struct AddFrame {
  const Value* a;
  const Value* b;
  std::vector<std::pair<const Value*, const Value*>> parts;
  std::vector<std::string> keys;  // envs: the key of each part
  std::vector<Value> sums;
};

// a + b when neither needs a walk, or nullopt after pushing the frame that will
// add their parts.
absl::StatusOr<std::optional<Value>> OpenAdd(const Value& a, const Value& b, Device* device,
                                             std::vector<AddFrame>* stack) {
  // A zero sensitivity of a function is an empty env; anything plus it is itself.
  if (a.is_env() && a.env().empty()) return b;
  if (b.is_env() && b.env().empty()) return a;
  if (a.is_none()) return b;
  if (b.is_none()) return a;
  if (a.is_tensor() && b.is_tensor()) {
    // Bool values carry no gradient, but a higher-order transform may still build
    // their (all false) sensitivities, e.g. of a loop's condition state: in bool,
    // addition is `or`, which keeps false + false = false.
    const bool logical = a.tensor().dtype() == DType::kBool && b.tensor().dtype() == DType::kBool;
    static const PrimitivePtr add = DefaultRegistry().Make(PrimId::kAdd).value();
    static const PrimitivePtr logical_or = DefaultRegistry().Make(PrimId::kLogicalOr).value();
    const Primitive& op = logical ? *logical_or : *add;
    KernelFn fn = device->kernel(op.id());
    if (fn == nullptr) return absl::UnimplementedError(absl::StrCat("no ", op.name(), " kernel on this device"));
    Value in[2] = {a, b};
    KernelContext ctx(op, absl::MakeSpan(in, 2), device);
    KGRAD_ASSIGN_OR_RETURN(Value sum, fn(ctx));
    return sum;
  }
  if (a.is_scalar() && b.is_scalar()) {
    KGRAD_ASSIGN_OR_RETURN(Scalar sum, ApplyScalarOp(PrimId::kScalarAdd, a.scalar(), b.scalar()));
    return Value(sum);
  }
  AddFrame f{&a, &b, {}, {}, {}};
  if (a.is_sequence() && a.kind() == b.kind() && a.elements().size() == b.elements().size()) {
    for (size_t i = 0; i < a.elements().size(); ++i) f.parts.emplace_back(&a.elements()[i], &b.elements()[i]);
  } else if (a.is_env() && b.is_env()) {
    for (const auto& [key, item] : b.env()) {
      auto it = a.env().find(key);
      if (it == a.env().end()) continue;
      f.parts.emplace_back(&it->second, &item);
      f.keys.push_back(key);
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat("cannot add ", a.TypeString(), " and ",
                                                   b.TypeString(), " (different structure)"));
  }
  stack->push_back(std::move(f));
  return std::optional<Value>();
}

// The sum of a frame whose parts are all added.
Value CloseAdd(AddFrame& f) {
  if (f.a->is_tuple()) return Value::Tuple(std::move(f.sums));
  if (f.a->is_list()) return Value::List(std::move(f.sums));
  Value out = *f.a;
  for (const auto& [key, item] : f.b->env()) {
    if (!f.a->env().contains(key)) out = Value::EnvWith(out, key, item);
  }
  for (size_t i = 0; i < f.keys.size(); ++i) out = Value::EnvWith(out, f.keys[i], std::move(f.sums[i]));
  return out;
}

}  // namespace

// Tuples and envs nest as deep as the program makes them: the walk keeps its own
// stack.
absl::StatusOr<Value> HyperAdd(const Value& a, const Value& b, Device* device) {
  std::vector<AddFrame> stack;
  KGRAD_ASSIGN_OR_RETURN(std::optional<Value> ready, OpenAdd(a, b, device, &stack));
  while (true) {
    if (ready.has_value()) {
      if (stack.empty()) return *std::move(ready);
      stack.back().sums.push_back(*std::move(ready));
      ready.reset();
    }
    AddFrame& f = stack.back();
    if (f.sums.size() < f.parts.size()) {
      auto [x, y] = f.parts[f.sums.size()];
      KGRAD_ASSIGN_OR_RETURN(ready, OpenAdd(*x, *y, device, &stack));
      continue;
    }
    ready = CloseAdd(f);
    stack.pop_back();
  }
}

void RegisterStructuralKernels(KernelTable* t) {
  t->Set(PrimId::kMakeTuple, MakeTuple);
  t->Set(PrimId::kTupleGetItem, TupleGetItem);
  t->Set(PrimId::kTupleSetItem, TupleSetItem);
  t->Set(PrimId::kSwitch, Switch);
  t->Set(PrimId::kPartial, Partial);
  t->Set(PrimId::kStopGradient, First);
  t->Set(PrimId::kDepend, First);
  t->Set(PrimId::kRematBarrier, First);
  t->Set(PrimId::kEnvSetItem, EnvSetItem);
  t->Set(PrimId::kEnvGetItem, EnvGetItem);
  t->Set(PrimId::kEnvAdd, EnvAddKernel);
  t->Set(PrimId::kHyperAdd, HyperAddKernel);
  t->Set(PrimId::kZerosLike, ZerosLikeKernel);
  t->Set(PrimId::kOnesLike, OnesLikeKernel);
  SetScalarBinary<PrimId::kScalarAdd, PrimId::kScalarSub, PrimId::kScalarMul, PrimId::kScalarDiv,
                  PrimId::kScalarLt, PrimId::kScalarLe, PrimId::kScalarGt, PrimId::kScalarGe,
                  PrimId::kScalarEq, PrimId::kScalarNe>(t);
  t->Set(PrimId::kScalarToTensor, ScalarToTensor);
  t->Set(PrimId::kTensorToScalar, TensorToScalar);
}

}  // namespace kgrad
