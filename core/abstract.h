// Abstract values: what inference knows about a node's value (dtype and shape of
// tensors, constant scalars, tuple structure, the set of functions a node may
// call). Immutable and shared.
//
// Every abstract knows its nesting depth (tuples and partial applications add a
// level). Walks over abstracts (join, equality, hash, printing) recurse, so
// inference refuses anything deeper than InferOptions::max_abstract_depth: deep
// data is a run-time matter (values release and print iteratively), not a type.
#ifndef KGRAD_CORE_ABSTRACT_H_
#define KGRAD_CORE_ABSTRACT_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/dtype.h"
#include "core/scalar.h"
#include "core/shape.h"

namespace kgrad {

class FuncGraph;
class Primitive;
class Abstract;
using AbstractPtr = std::shared_ptr<const Abstract>;
using PrimitivePtr = std::shared_ptr<const Primitive>;

// The default of InferOptions::max_abstract_depth (and of AbstractOfValue).
inline constexpr int kDefaultMaxAbstractDepth = 1000;

enum class AbstractKind { kTensor, kScalar, kString, kNone, kTuple, kFunction, kEnv, kList };

class Abstract {
 public:
  virtual ~Abstract() = default;
  AbstractKind kind() const { return kind_; }
  // Levels of tuple or partial-application nesting (0 for leaves).
  int depth() const { return depth_; }
  virtual std::string ToString() const = 0;

 protected:
  explicit Abstract(AbstractKind k, int depth = 0) : kind_(k), depth_(depth) {}

 private:
  AbstractKind kind_;
  int depth_;
};

// Shape values: what inference knows of the elements of a small integer tensor
// (a shape, a size, axes or indices computed at run time, e.g. ONNX's
// Shape -> Gather -> Concat -> Reshape chains): rank 0 or 1, at most
// kMaxShapeValue elements, each a number, a dim symbol (the size it is known to
// equal) or kUnknownValue. It lets a run-time shape keep the static and symbolic
// dims it carries; it is never needed to run.
inline constexpr int kMaxShapeValue = 64;

class AbstractTensor final : public Abstract {
 public:
  AbstractTensor(DType dtype, Shape shape, std::optional<Shape> value = std::nullopt)
      : Abstract(AbstractKind::kTensor),
        dtype_(dtype),
        shape_(std::move(shape)),
        value_(std::move(value)) {}
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  bool shape_known() const { return IsFullyKnown(shape_); }
  // The shape value (above), or nullopt.
  const std::optional<Shape>& value() const { return value_; }
  std::string ToString() const override;

 private:
  DType dtype_;
  Shape shape_;
  std::optional<Shape> value_;
};

class AbstractScalar final : public Abstract {
 public:
  explicit AbstractScalar(DType dtype) : Abstract(AbstractKind::kScalar), dtype_(dtype) {}
  explicit AbstractScalar(Scalar value)
      : Abstract(AbstractKind::kScalar), dtype_(value.dtype()), value_(value) {}
  DType dtype() const { return dtype_; }
  const std::optional<Scalar>& value() const { return value_; }
  std::string ToString() const override;

 private:
  DType dtype_;
  std::optional<Scalar> value_;
};

class AbstractString final : public Abstract {
 public:
  explicit AbstractString(std::optional<std::string> value = std::nullopt)
      : Abstract(AbstractKind::kString), value_(std::move(value)) {}
  const std::optional<std::string>& value() const { return value_; }
  std::string ToString() const override;

 private:
  std::optional<std::string> value_;
};

class AbstractNone final : public Abstract {
 public:
  AbstractNone() : Abstract(AbstractKind::kNone) {}
  std::string ToString() const override { return "none"; }
};

class AbstractEnv final : public Abstract {
 public:
  AbstractEnv() : Abstract(AbstractKind::kEnv) {}
  std::string ToString() const override { return "env"; }
};

class AbstractTuple final : public Abstract {
 public:
  explicit AbstractTuple(std::vector<AbstractPtr> elements)
      : Abstract(AbstractKind::kTuple, DepthOf(elements)), elements_(std::move(elements)) {}
  const std::vector<AbstractPtr>& elements() const { return elements_; }
  size_t size() const { return elements_.size(); }
  std::string ToString() const override;

 private:
  static int DepthOf(const std::vector<AbstractPtr>& elements);
  std::vector<AbstractPtr> elements_;
};

// A list: a length known at run time, elements of one type (the join of the
// elements' types; null, the bottom, while nothing is known of them, as for an
// empty list). Lists nest like tuples (a list of lists is one level deeper).
class AbstractList final : public Abstract {
 public:
  explicit AbstractList(AbstractPtr element)
      : Abstract(AbstractKind::kList, element == nullptr ? 1 : element->depth() + 1),
        element_(std::move(element)) {}
  const AbstractPtr& element() const { return element_; }
  std::string ToString() const override;

 private:
  AbstractPtr element_;
};

// One function a node may evaluate to: a graph (as a closure in its lexical
// context), a primitive, a partial application of another atom, a function a
// differentiation operator derives from another atom (`grad(@f)`), or a function
// known only by its result (the bprop a `J` function returns).
struct FuncAtom {
  enum class Kind { kGraph, kPrimitive, kPartial, kDerived, kResult } kind;
  FuncGraph* graph = nullptr;
  PrimitivePtr primitive;              // kPrimitive; kDerived: the operator
  std::shared_ptr<const FuncAtom> fn;  // kPartial: the partially applied function;
                                       // kDerived: the operand
  std::vector<AbstractPtr> bound;      // kPartial: abstracts of the bound arguments;
                                       // kResult: {the result of a call}

  std::string ToString() const;
  // Partial-application levels plus the depth of the deepest bound argument.
  int Depth() const;
};

class AbstractFunction final : public Abstract {
 public:
  explicit AbstractFunction(std::vector<FuncAtom> atoms)
      : Abstract(AbstractKind::kFunction, DepthOf(atoms)), atoms_(std::move(atoms)) {}
  const std::vector<FuncAtom>& atoms() const { return atoms_; }
  std::string ToString() const override;

 private:
  static int DepthOf(const std::vector<FuncAtom>& atoms);
  std::vector<FuncAtom> atoms_;
};

// Constructors.
AbstractPtr MakeAbstractTensor(DType dtype, Shape shape);
// An integer tensor of rank 0 or 1 with a shape value; the value is dropped when
// the dtype, rank or length does not admit one, or when nothing in it is known.
AbstractPtr MakeAbstractShapeValue(DType dtype, Shape shape, Shape value);
AbstractPtr MakeAbstractScalar(DType dtype);
AbstractPtr MakeAbstractScalarValue(Scalar value);
AbstractPtr MakeAbstractTuple(std::vector<AbstractPtr> elements);
AbstractPtr MakeAbstractNone();
AbstractPtr MakeAbstractList(AbstractPtr element);
AbstractPtr MakeAbstractEnv();
AbstractPtr MakeAbstractString(std::optional<std::string> value = std::nullopt);
AbstractPtr MakeAbstractGraphFunction(FuncGraph* graph);
AbstractPtr MakeAbstractPrimFunction(PrimitivePtr prim);

// Downcasts; nullptr when the kind differs (or `a` is null).
const AbstractTensor* AsTensor(const AbstractPtr& a);
const AbstractScalar* AsScalar(const AbstractPtr& a);
const AbstractTuple* AsTuple(const AbstractPtr& a);
const AbstractFunction* AsFunction(const AbstractPtr& a);
const AbstractString* AsString(const AbstractPtr& a);
const AbstractList* AsList(const AbstractPtr& a);

// Structural equality (null == null).
bool AbstractEquals(const AbstractPtr& a, const AbstractPtr& b);
size_t AbstractHash(const AbstractPtr& a);
bool FuncAtomEquals(const FuncAtom& a, const FuncAtom& b);

// Least upper bound: dims that differ become unknown, constants that differ are
// dropped, function sets are united. Null (not yet known) is the bottom element.
// Error when the kinds, dtypes, ranks or tuple lengths differ (lists join their
// element types).
absl::StatusOr<AbstractPtr> Join(const AbstractPtr& a, const AbstractPtr& b);

// Drops constant scalar values and shape values (recursively), so that loop
// counters do not create a new inference context per iteration.
AbstractPtr Broaden(const AbstractPtr& a);

// "null" for the bottom element.
std::string AbstractToString(const AbstractPtr& a);

}  // namespace kgrad

#endif  // KGRAD_CORE_ABSTRACT_H_
