// Value: what a ValueNode holds and what the executor passes around. Constants in
// the IR are None, Tensor, Scalar, String, Tuple, List, Primitive, Graph and the
// empty Env; at run time Closures, Partials and non-empty Envs appear too. A
// tuple's length and element types are static; a list's length is known only at
// run time and its elements share one type (ONNX's sequences and optionals, a
// loop that appends: ops/list_ops.h). Copying is
// cheap (reference-counted, immutable payloads). Closures hold the values of their
// free variables and a non-owning graph pointer, never frames, so no cycles form.
//
// Aggregates (tuple, list, closure, partial, env) may nest as deep as a user's loop makes
// them (a million-deep chain of closures is ordinary in reverse mode). Nothing that
// walks them recurses on the C++ stack: their payloads carry an intrusive count, so
// the last owner knows it owns the payload and releases its children through a
// worklist (ReleaseAggregate), and equality, printing and conversion are iterative.
#ifndef KGRAD_CORE_VALUE_H_
#define KGRAD_CORE_VALUE_H_

#include <atomic>
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

// The payload of an aggregate value, shared by reference count. Immutable once
// published; only its last owner moves the children out (to release them).
struct AggregateRep {
  AggregateRep() = default;
  AggregateRep(const AggregateRep&) : refs(1) {}  // a copy is a new payload
  AggregateRep& operator=(const AggregateRep&) = delete;
  virtual ~AggregateRep() = default;
  // Moves every child value to `out` (called once, by the last owner).
  virtual void MoveChildrenTo(std::vector<Value>* out) = 0;
  std::atomic<int64_t> refs{1};
};

// Drops one reference to `rep`; when it was the last, releases `rep` and every
// aggregate only it kept alive, iteratively (any depth, constant C++ stack).
void ReleaseAggregate(AggregateRep* rep);

// An owning, counted pointer to an aggregate payload (an intrusive shared_ptr
// whose release never recurses).
template <typename T>
class AggregatePtr {
 public:
  AggregatePtr() = default;
  explicit AggregatePtr(T* p) : p_(p) {}  // takes the initial reference
  AggregatePtr(const AggregatePtr& o) : p_(o.p_) {
    if (p_ != nullptr) p_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  AggregatePtr(AggregatePtr&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  AggregatePtr& operator=(AggregatePtr o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~AggregatePtr() {
    if (p_ != nullptr) ReleaseAggregate(p_);
  }
  const T& operator*() const { return *p_; }
  const T* operator->() const { return p_; }
  const T* get() const { return p_; }
  // Gives up ownership without dropping the reference (for the release worklist).
  T* Detach() { return std::exchange(p_, nullptr); }

 private:
  T* p_ = nullptr;
};

struct ClosureRep;
struct PartialRep;
struct TupleRep;
struct ListRep;
// Free-variable sensitivities by key (see ad/). Keys are strings.
struct EnvRep;

class Value {
 public:
  enum class Kind {
    kNone, kTensor, kScalar, kString, kTuple, kPrimitive, kGraph, kClosure, kPartial, kEnv, kList
  };

  Value() = default;  // None
  Value(Tensor t) : rep_(std::move(t)) {}  // NOLINT: implicit by design
  Value(Scalar s) : rep_(s) {}             // NOLINT
  static Value None() { return Value(); }
  static Value String(std::string s);
  static Value Tuple(std::vector<Value> elements);
  static Value List(std::vector<Value> elements);
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
  bool is_list() const { return kind() == Kind::kList; }
  // A tuple or a list: elements() holds its parts.
  bool is_sequence() const { return is_tuple() || is_list(); }
  // Graph, closure, partial or primitive.
  bool is_callable() const;

  const Tensor& tensor() const { return std::get<Tensor>(rep_); }
  const Scalar& scalar() const { return std::get<Scalar>(rep_); }
  const std::string& str() const { return *std::get<StringPtr>(rep_); }
  const std::vector<Value>& tuple() const;
  const std::vector<Value>& list() const;
  // The elements of a tuple or a list.
  const std::vector<Value>& elements() const { return is_list() ? list() : tuple(); }
  const PrimitivePtr& primitive() const { return std::get<PrimitivePtr>(rep_); }
  FuncGraph* graph() const { return std::get<GraphRef>(rep_).graph; }
  const ClosureRep& closure() const;
  const PartialRep& partial() const;
  const absl::flat_hash_map<std::string, Value>& env() const;

  // Moves the tensor out (leaving None), so that the last user of a buffer can
  // own it alone and a kernel may reuse it in place.
  Tensor TakeTensor();
  // Moves the aggregate payload out (leaving None) with its reference; null for
  // other kinds. Only the release worklist uses this.
  AggregateRep* DetachAggregate();

  // Short description for errors: "f32[2,3]", "tuple(2)", "closure @g".
  std::string TypeString() const;
  // Constants as the printer writes them.
  std::string ToString() const;

 private:
  struct GraphRef {
    FuncGraph* graph;
  };
  using StringPtr = std::shared_ptr<const std::string>;
  using TuplePtr = AggregatePtr<TupleRep>;
  using ClosurePtr = AggregatePtr<ClosureRep>;
  using PartialPtr = AggregatePtr<PartialRep>;
  using EnvPtr = AggregatePtr<EnvRep>;
  using ListPtr = AggregatePtr<ListRep>;
  // The order matches Kind.
  std::variant<std::monostate, Tensor, Scalar, StringPtr, TuplePtr, PrimitivePtr, GraphRef,
               ClosurePtr, PartialPtr, EnvPtr, ListPtr>
      rep_;
};

struct TupleRep final : AggregateRep {
  explicit TupleRep(std::vector<Value> e) : elements(std::move(e)) {}
  void MoveChildrenTo(std::vector<Value>* out) override;
  std::vector<Value> elements;
};

struct ListRep final : AggregateRep {
  explicit ListRep(std::vector<Value> e) : elements(std::move(e)) {}
  void MoveChildrenTo(std::vector<Value>* out) override;
  std::vector<Value> elements;
};

struct ClosureRep final : AggregateRep {
  ClosureRep(FuncGraph* g, std::vector<Value> c) : graph(g), captured(std::move(c)) {}
  void MoveChildrenTo(std::vector<Value>* out) override;
  FuncGraph* graph;             // owned by its Module
  std::vector<Value> captured;  // values of the graph's free variables, in order
};

struct PartialRep final : AggregateRep {
  PartialRep(Value f, std::vector<Value> a) : fn(std::move(f)), args(std::move(a)) {}
  void MoveChildrenTo(std::vector<Value>* out) override;
  Value fn;
  std::vector<Value> args;
};

struct EnvRep final : AggregateRep {
  EnvRep() = default;
  EnvRep(const EnvRep& o) : AggregateRep(o), items(o.items) {}
  void MoveChildrenTo(std::vector<Value>* out) override;
  absl::flat_hash_map<std::string, Value> items;
};

inline const std::vector<Value>& Value::tuple() const {
  return std::get<TuplePtr>(rep_)->elements;
}
inline const std::vector<Value>& Value::list() const {
  return std::get<ListPtr>(rep_)->elements;
}
inline const ClosureRep& Value::closure() const { return *std::get<ClosurePtr>(rep_); }
inline const PartialRep& Value::partial() const { return *std::get<PartialPtr>(rep_); }

// Deep structural equality: tensors bytewise, primitives by definition and
// attributes, graphs and closures by identity (closures also by captured values).
bool ValuesEqual(const Value& a, const Value& b);

// The abstract value of a constant (tensor dtype and shape, scalar constant, ...);
// null for a value nested deeper than `max_depth`, or for a list whose elements'
// types do not join (inference refuses such types).
AbstractPtr AbstractOfValue(const Value& v, int max_depth = kDefaultMaxAbstractDepth);

}  // namespace kgrad

#endif  // KGRAD_CORE_VALUE_H_
