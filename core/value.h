// Value: what a ValueNode holds and what the executor passes around. Constants in
// the IR are None, Tensor, Scalar, String, Tuple, Primitive, Graph and the empty
// Env; at run time Closures, Partials and non-empty Envs appear too. Copying is
// cheap (reference-counted, immutable payloads). Closures hold the values of their
// free variables and a non-owning graph pointer, never frames, so no cycles form.
#ifndef KGRAD_CORE_VALUE_H_
#define KGRAD_CORE_VALUE_H_

#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/primitive.h"
#include "core/scalar.h"
#include "core/tensor.h"

namespace kgrad {

class FuncGraph;
class Value;

struct ClosureRep {
  FuncGraph* graph;             // owned by its Module
  std::vector<Value> captured;  // values of the graph's free variables, in order
};

struct PartialRep;

// Free-variable sensitivities by key (see ad/). Keys are strings.
struct EnvRep;

class Value {
 public:
  enum class Kind {
    kNone, kTensor, kScalar, kString, kTuple, kPrimitive, kGraph, kClosure, kPartial, kEnv
  };

  Value() = default;  // None
  Value(Tensor t) : rep_(std::move(t)) {}  // NOLINT: implicit by design
  Value(Scalar s) : rep_(s) {}             // NOLINT
  static Value None() { return Value(); }
  static Value String(std::string s);
  static Value Tuple(std::vector<Value> elements);
  static Value Prim(PrimitivePtr p);
  static Value Graph(FuncGraph* g);
  static Value Closure(FuncGraph* g, std::vector<Value> captured);
  static Value Partial(Value fn, std::vector<Value> args);
  static Value EmptyEnv();
  // `env` with `key` set to `v` (envs are persistent: the original is unchanged).
  static Value EnvWith(const Value& env, const std::string& key, Value v);

  Kind kind() const { return static_cast<Kind>(rep_.index()); }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_tensor() const { return kind() == Kind::kTensor; }
  bool is_scalar() const { return kind() == Kind::kScalar; }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_tuple() const { return kind() == Kind::kTuple; }
  bool is_primitive() const { return kind() == Kind::kPrimitive; }
  bool is_graph() const { return kind() == Kind::kGraph; }
  bool is_closure() const { return kind() == Kind::kClosure; }
  bool is_partial() const { return kind() == Kind::kPartial; }
  bool is_env() const { return kind() == Kind::kEnv; }
  // Graph, closure, partial or primitive.
  bool is_callable() const;

  const Tensor& tensor() const { return std::get<Tensor>(rep_); }
  const Scalar& scalar() const { return std::get<Scalar>(rep_); }
  const std::string& str() const { return *std::get<StringPtr>(rep_); }
  const std::vector<Value>& tuple() const { return *std::get<TuplePtr>(rep_); }
  const PrimitivePtr& primitive() const { return std::get<PrimitivePtr>(rep_); }
  FuncGraph* graph() const { return std::get<GraphRef>(rep_).graph; }
  const ClosureRep& closure() const { return *std::get<ClosurePtr>(rep_); }
  const PartialRep& partial() const { return *std::get<PartialPtr>(rep_); }
  const absl::flat_hash_map<std::string, Value>& env() const;

  // Moves the tensor out (leaving None), so that the last user of a buffer can
  // own it alone and a kernel may reuse it in place.
  Tensor TakeTensor();

  // Short description for errors: "f32[2,3]", "tuple(2)", "closure @g".
  std::string TypeString() const;
  // Constants as the printer writes them.
  std::string ToString() const;

 private:
  struct GraphRef {
    FuncGraph* graph;
  };
  using StringPtr = std::shared_ptr<const std::string>;
  using TuplePtr = std::shared_ptr<const std::vector<Value>>;
  using ClosurePtr = std::shared_ptr<const ClosureRep>;
  using PartialPtr = std::shared_ptr<const PartialRep>;
  using EnvPtr = std::shared_ptr<const EnvRep>;
  // The order matches Kind.
  std::variant<std::monostate, Tensor, Scalar, StringPtr, TuplePtr, PrimitivePtr, GraphRef,
               ClosurePtr, PartialPtr, EnvPtr>
      rep_;
};

struct PartialRep {
  Value fn;
  std::vector<Value> args;
};

struct EnvRep {
  absl::flat_hash_map<std::string, Value> items;
};

// Deep structural equality: tensors bytewise, primitives by definition and
// attributes, graphs and closures by identity (closures also by captured values).
bool ValuesEqual(const Value& a, const Value& b);

// The abstract value of a constant (tensor dtype and shape, scalar constant, ...).
AbstractPtr AbstractOfValue(const Value& v);

}  // namespace kgrad

#endif  // KGRAD_CORE_VALUE_H_
