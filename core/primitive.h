// Primitives: the operations a CNode can apply. A PrimitiveDef (name, attribute
// specs, arity, inference, bprop rule, the facts passes read) is registered once
// per PrimId by ops/ (ops/op_def.h);
// a Primitive is a PrimitiveDef plus concrete attribute values, held in IR as a
// ValueNode constant. core/ sees only this interface, never the op families.
#ifndef KGRAD_CORE_PRIMITIVE_H_
#define KGRAD_CORE_PRIMITIVE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/abstract.h"
#include "core/dtype.h"
#include "core/primitive_id.h"

namespace kgrad {

// The wire name of a primitive id ("add").
const char* PrimIdName(PrimId id);

// ----- Attributes -------------------------------------------------------------
enum class AttrType { kInt, kFloat, kBool, kString, kInts, kFloats, kDType };
const char* AttrTypeName(AttrType t);

using AttrValue = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>,
                               std::vector<double>, DType>;
AttrType AttrValueType(const AttrValue& v);
std::string AttrValueToString(const AttrValue& v);

// Sorted by name so that printing and equality are canonical.
using AttrMap = std::map<std::string, AttrValue>;

struct AttrSpec {
  std::string name;
  AttrType type;
  std::optional<AttrValue> default_value;  // nullopt: required
};

// ----- Definitions ------------------------------------------------------------
class Primitive;
class BpropContext;  // ops/bprop_context.h: the rule DSL (I(i), Out(), Dout(), ...)

struct InferCall {
  const Primitive& prim;
  absl::Span<const AbstractPtr> args;  // never null entries
};
using InferFn = absl::StatusOr<AbstractPtr> (*)(const InferCall& call);

// Emits the input sensitivities of one application into the context. A rule that
// is absent (nullptr) means the primitive is not differentiable: the K-transform
// fails at transform time naming the primitive and node.
using BpropFn = absl::Status (*)(BpropContext& ctx);

// Differentiation operators (J, grad, value_and_grad, jvp, vjp) return a function
// derived from their operand. Calling it with `args` calls the operand with
// DerivedArgsFn(args), and DerivedResultFn maps the operand's result `out` to the
// call's result. This is all inference needs; ad/ expands the operators into
// graphs before anything runs.
class Module;
struct DerivedCall {
  const Primitive& prim;
  absl::Span<const AbstractPtr> args;  // never null entries
  const Module* module;                // for weights named by attributes
};
using DerivedArgsFn = absl::StatusOr<std::vector<AbstractPtr>> (*)(const DerivedCall& call);
using DerivedResultFn = absl::StatusOr<AbstractPtr> (*)(const DerivedCall& call,
                                                       const AbstractPtr& out);

struct PrimitiveDef {
  PrimId id;
  std::string name;
  std::vector<AttrSpec> attrs;
  int min_inputs = 0;
  int max_inputs = 0;  // -1: variadic
  InferFn infer = nullptr;
  BpropFn bprop = nullptr;
  // Executed by the executor itself on Values (tuples, closures, envs), with no
  // device kernel.
  bool structural = false;
  // Every output is integer/bool or otherwise carries no gradient (comparisons,
  // argmax, shape-only ops): all inputs get zero sensitivity without a rule.
  bool zero_gradient = false;
  // Linear in every differentiable input: jvp(f)(x; t) = f(t), the fact forward
  // mode needs to stay lean (JAX's linear primitives).
  bool linear = false;
  // Zeros in, zero out (the optimiser folds such applications): the output is
  // zero when any input whose bit is set in `zero_if_any` is zero, or when every
  // input whose bit is set in `zero_if_all` is. Bit i: input i.
  uint32_t zero_if_any = 0;
  uint32_t zero_if_all = 0;
  // Only passes on (parts of) the values it is given, or scalars: never creates a
  // tensor. The executor's allocation metering skips it (it would otherwise walk
  // every tuple the op passes on, however deep).
  bool moves_only = false;
  // A contraction (matmul, einsum, convolution and its backprops): costly to
  // recompute, so the dots_saveable checkpoint policy keeps its output (ad/remat.h)
  // and outlined residual blocks must contain one.
  bool dot = false;
  // A differentiation operator (above): both set, or neither.
  DerivedArgsFn derived_args = nullptr;
  DerivedResultFn derived_result = nullptr;
};

// The primitive registry: one PrimitiveDef per PrimId, filled once by ops/ at
// start-up and immutable afterwards; safe to read from many threads.
class PrimitiveRegistry {
 public:
  // Builds a registry from definitions; error on duplicates or missing ids.
  static absl::StatusOr<std::unique_ptr<const PrimitiveRegistry>> Create(
      std::vector<PrimitiveDef> defs);

  const PrimitiveDef* Find(PrimId id) const { return by_id_[static_cast<int>(id)]; }
  const PrimitiveDef* Find(absl::string_view name) const;
  // Comma-separated names of every primitive (for "unknown primitive" errors).
  std::string KnownNames() const;

  // Makes a primitive with `attrs` checked against the spec and defaults filled in.
  absl::StatusOr<PrimitivePtr> Make(PrimId id, AttrMap attrs = {}) const;
  absl::StatusOr<PrimitivePtr> Make(absl::string_view name, AttrMap attrs = {}) const;

 private:
  PrimitiveRegistry() = default;
  std::vector<PrimitiveDef> defs_;
  std::vector<const PrimitiveDef*> by_id_;
  absl::flat_hash_map<std::string, const PrimitiveDef*> by_name_;
};

// A primitive with its attribute values. Immutable.
class Primitive {
 public:
  Primitive(const PrimitiveDef* def, AttrMap attrs) : def_(def), attrs_(std::move(attrs)) {}

  const PrimitiveDef& def() const { return *def_; }
  PrimId id() const { return def_->id; }
  const std::string& name() const { return def_->name; }
  const AttrMap& attrs() const { return attrs_; }

  // Typed accessors; the attribute exists and has the declared type after Make().
  int64_t GetInt(const std::string& name) const;
  double GetFloat(const std::string& name) const;
  bool GetBool(const std::string& name) const;
  const std::string& GetString(const std::string& name) const;
  const std::vector<int64_t>& GetInts(const std::string& name) const;
  const std::vector<double>& GetFloats(const std::string& name) const;
  DType GetDType(const std::string& name) const;

  // "add" or "reduce_sum{axes=[1], keepdims=false}".
  std::string ToString() const;

 private:
  const PrimitiveDef* def_;
  AttrMap attrs_;
};

bool PrimitivesEqual(const Primitive& a, const Primitive& b);
// InvalidArgument "switch takes 3 inputs, got 1" unless `num_inputs` fits the
// definition. Kernels rely on it: the verifier, inference and the executor (for
// applications and for primitives called as values) all check it.
absl::Status CheckArity(const PrimitiveDef& def, size_t num_inputs);
// A hash of attribute names and values (equal maps hash equal).
size_t AttrMapHash(const AttrMap& attrs);

}  // namespace kgrad

#endif  // KGRAD_CORE_PRIMITIVE_H_
