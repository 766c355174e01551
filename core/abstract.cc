#include "core/abstract.h"

#include <algorithm>

#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/func_graph.h"
#include "core/primitive.h"
#include "core/status_macros.h"

namespace kgrad {

std::string AbstractTensor::ToString() const {
  std::string s = absl::StrCat(DTypeName(dtype_), ShapeToString(shape_));
  if (!value_.has_value()) return s;
  if (shape_.empty()) return absl::StrCat(s, "=", ValueElementToString((*value_)[0]));
  return absl::StrCat(s, "=", ValueToString(value_->data(), value_->size()));
}

std::string AbstractScalar::ToString() const {
  if (value_.has_value()) return absl::StrCat(DTypeName(dtype_), "=", value_->ToString());
  return DTypeName(dtype_);
}

std::string AbstractString::ToString() const {
  return value_.has_value() ? absl::StrCat("str=\"", *value_, "\"") : "str";
}

int AbstractTuple::DepthOf(const std::vector<AbstractPtr>& elements) {
  int d = 0;
  for (const AbstractPtr& e : elements) {
    if (e != nullptr) d = std::max(d, e->depth());
  }
  return d + 1;
}

int FuncAtom::Depth() const {
  int d = 0;
  int level = 0;
  for (const FuncAtom* a = this; a != nullptr && (a->kind == Kind::kPartial || a->kind == Kind::kDerived ||
                                                  a->kind == Kind::kResult);
       a = a->fn.get()) {
    ++level;
    for (const AbstractPtr& b : a->bound) {
      if (b != nullptr) d = std::max(d, b->depth() + level);
    }
  }
  return std::max(d, level);
}

int AbstractFunction::DepthOf(const std::vector<FuncAtom>& atoms) {
  int d = 0;
  for (const FuncAtom& a : atoms) d = std::max(d, a.Depth());
  return d;
}

std::string AbstractTuple::ToString() const {
  std::vector<std::string> parts;
  for (const AbstractPtr& e : elements_) parts.push_back(AbstractToString(e));
  return absl::StrCat("(", absl::StrJoin(parts, ", "), elements_.size() == 1 ? ",)" : ")");
}

std::string AbstractList::ToString() const {
  return absl::StrCat("list<", element_ == nullptr ? "?" : element_->ToString(), ">");
}

std::string FuncAtom::ToString() const {
  switch (kind) {
    case Kind::kGraph: return absl::StrCat("@", graph->name());
    case Kind::kPrimitive: return primitive->ToString();
    case Kind::kPartial: return absl::StrCat("partial(", fn->ToString(), ", ", bound.size(), ")");
    case Kind::kDerived: return absl::StrCat(primitive->ToString(), "(", fn->ToString(), ")");
    case Kind::kResult: return absl::StrCat("fn -> ", AbstractToString(bound.at(0)));
  }
  return "?";
}

std::string AbstractFunction::ToString() const {
  std::vector<std::string> parts;
  for (const FuncAtom& a : atoms_) parts.push_back(a.ToString());
  return absl::StrCat("fn{", absl::StrJoin(parts, ", "), "}");
}

AbstractPtr MakeAbstractTensor(DType dtype, Shape shape) {
  return std::make_shared<const AbstractTensor>(dtype, std::move(shape));
}

AbstractPtr MakeAbstractShapeValue(DType dtype, Shape shape, Shape value) {
  const size_t n = shape.empty() ? 1 : shape.size() == 1 && shape[0] >= 0 ? shape[0] : 0;
  const bool any_known = std::any_of(value.begin(), value.end(),
                                     [](int64_t v) { return v != kUnknownValue; });
  if (!IsInteger(dtype) || n == 0 || n > kMaxShapeValue || value.size() != n || !any_known) {
    return MakeAbstractTensor(dtype, std::move(shape));
  }
  return std::make_shared<const AbstractTensor>(dtype, std::move(shape), std::move(value));
}
AbstractPtr MakeAbstractScalar(DType dtype) {
  return std::make_shared<const AbstractScalar>(dtype);
}
AbstractPtr MakeAbstractScalarValue(Scalar value) {
  return std::make_shared<const AbstractScalar>(value);
}
AbstractPtr MakeAbstractTuple(std::vector<AbstractPtr> elements) {
  return std::make_shared<const AbstractTuple>(std::move(elements));
}
AbstractPtr MakeAbstractList(AbstractPtr element) {
  return std::make_shared<const AbstractList>(std::move(element));
}
AbstractPtr MakeAbstractNone() { return std::make_shared<const AbstractNone>(); }
AbstractPtr MakeAbstractEnv() { return std::make_shared<const AbstractEnv>(); }
AbstractPtr MakeAbstractString(std::optional<std::string> value) {
  return std::make_shared<const AbstractString>(std::move(value));
}
AbstractPtr MakeAbstractGraphFunction(FuncGraph* graph) {
  FuncAtom a;
  a.kind = FuncAtom::Kind::kGraph;
  a.graph = graph;
  return std::make_shared<const AbstractFunction>(std::vector<FuncAtom>{std::move(a)});
}
AbstractPtr MakeAbstractPrimFunction(PrimitivePtr prim) {
  FuncAtom a;
  a.kind = FuncAtom::Kind::kPrimitive;
  a.primitive = std::move(prim);
  return std::make_shared<const AbstractFunction>(std::vector<FuncAtom>{std::move(a)});
}

namespace {
// `a` as a T when it is of kind `kind`, else null.
template <typename T, AbstractKind kind>
const T* As(const AbstractPtr& a) {
  return a != nullptr && a->kind() == kind ? static_cast<const T*>(a.get()) : nullptr;
}
}  // namespace

const AbstractTensor* AsTensor(const AbstractPtr& a) {
  return As<AbstractTensor, AbstractKind::kTensor>(a);
}
const AbstractScalar* AsScalar(const AbstractPtr& a) {
  return As<AbstractScalar, AbstractKind::kScalar>(a);
}
const AbstractTuple* AsTuple(const AbstractPtr& a) { return As<AbstractTuple, AbstractKind::kTuple>(a); }
const AbstractList* AsList(const AbstractPtr& a) { return As<AbstractList, AbstractKind::kList>(a); }
const AbstractFunction* AsFunction(const AbstractPtr& a) {
  return As<AbstractFunction, AbstractKind::kFunction>(a);
}
const AbstractString* AsString(const AbstractPtr& a) {
  return As<AbstractString, AbstractKind::kString>(a);
}

bool FuncAtomEquals(const FuncAtom& a, const FuncAtom& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case FuncAtom::Kind::kGraph: return a.graph == b.graph;
    case FuncAtom::Kind::kPrimitive: return PrimitivesEqual(*a.primitive, *b.primitive);
    case FuncAtom::Kind::kDerived:
      return PrimitivesEqual(*a.primitive, *b.primitive) && FuncAtomEquals(*a.fn, *b.fn);
    case FuncAtom::Kind::kResult:
    case FuncAtom::Kind::kPartial: {
      if ((a.fn != nullptr) != (b.fn != nullptr)) return false;
      if (a.fn != nullptr && !FuncAtomEquals(*a.fn, *b.fn)) return false;
      if (a.bound.size() != b.bound.size()) return false;
      for (size_t i = 0; i < a.bound.size(); ++i) {
        if (!AbstractEquals(a.bound[i], b.bound[i])) return false;
      }
      return true;
    }
  }
  return false;
}

bool AbstractEquals(const AbstractPtr& a, const AbstractPtr& b) {
  if (a == b) return true;
  if (a == nullptr || b == nullptr || a->kind() != b->kind()) return false;
  switch (a->kind()) {
    case AbstractKind::kTensor: {
      auto* x = AsTensor(a);
      auto* y = AsTensor(b);
      return x->dtype() == y->dtype() && x->shape() == y->shape() && x->value() == y->value();
    }
    case AbstractKind::kScalar: {
      auto* x = AsScalar(a);
      auto* y = AsScalar(b);
      return x->dtype() == y->dtype() && x->value() == y->value();
    }
    case AbstractKind::kString: return AsString(a)->value() == AsString(b)->value();
    case AbstractKind::kNone:
    case AbstractKind::kEnv: return true;
    case AbstractKind::kTuple: {
      auto* x = AsTuple(a);
      auto* y = AsTuple(b);
      if (x->size() != y->size()) return false;
      for (size_t i = 0; i < x->size(); ++i) {
        if (!AbstractEquals(x->elements()[i], y->elements()[i])) return false;
      }
      return true;
    }
    case AbstractKind::kList: return AbstractEquals(AsList(a)->element(), AsList(b)->element());
    case AbstractKind::kFunction: {
      const auto& xa = AsFunction(a)->atoms();
      const auto& ya = AsFunction(b)->atoms();
      if (xa.size() != ya.size()) return false;
      // Sets: every atom of one is in the other.
      for (const FuncAtom& f : xa) {
        if (std::none_of(ya.begin(), ya.end(),
                         [&](const FuncAtom& g) { return FuncAtomEquals(f, g); })) {
          return false;
        }
      }
      return true;
    }
  }
  return false;
}

size_t AbstractHash(const AbstractPtr& a) {
  if (a == nullptr) return 0;
  size_t h = absl::HashOf(static_cast<int>(a->kind()));
  switch (a->kind()) {
    case AbstractKind::kTensor: {
      auto* t = AsTensor(a);
      h = absl::HashOf(h, static_cast<int>(t->dtype()));
      for (int64_t d : t->shape()) h = absl::HashOf(h, d);
      if (t->value().has_value()) {
        for (int64_t v : *t->value()) h = absl::HashOf(h, v);
      }
      return h;
    }
    case AbstractKind::kScalar: {
      auto* s = AsScalar(a);
      h = absl::HashOf(h, static_cast<int>(s->dtype()));
      if (s->value().has_value()) h = absl::HashOf(h, s->value()->AsDouble());
      return h;
    }
    case AbstractKind::kTuple:
      for (const AbstractPtr& e : AsTuple(a)->elements()) h = absl::HashOf(h, AbstractHash(e));
      return h;
    case AbstractKind::kList: return absl::HashOf(h, AbstractHash(AsList(a)->element()));
    case AbstractKind::kFunction: {
      // Order-independent: sum of atom hashes.
      size_t sum = 0;
      for (const FuncAtom& f : AsFunction(a)->atoms()) {
        size_t fh = absl::HashOf(static_cast<int>(f.kind));
        if (f.kind == FuncAtom::Kind::kGraph) fh = absl::HashOf(fh, f.graph);
        if (f.kind == FuncAtom::Kind::kPrimitive || f.kind == FuncAtom::Kind::kDerived) {
          fh = absl::HashOf(fh, &f.primitive->def());
        }
        sum += fh;
      }
      return absl::HashOf(h, sum);
    }
    default:
      return h;
  }
}

namespace {

absl::Status JoinError(const AbstractPtr& a, const AbstractPtr& b, const char* what) {
  return absl::InvalidArgumentError(absl::StrCat("cannot join ", a->ToString(), " and ",
                                                 b->ToString(), ": ", what, " differ"));
}

}  // namespace

absl::StatusOr<AbstractPtr> Join(const AbstractPtr& a, const AbstractPtr& b) {
  if (a == nullptr) return b;
  if (b == nullptr || a == b) return a;
  if (a->kind() != b->kind()) return JoinError(a, b, "kinds");
  switch (a->kind()) {
    case AbstractKind::kTensor: {
      auto* x = AsTensor(a);
      auto* y = AsTensor(b);
      if (x->dtype() != y->dtype()) return JoinError(a, b, "dtypes");
      if (x->rank() != y->rank()) return JoinError(a, b, "ranks");
      if (x->shape() == y->shape() && x->value() == y->value()) return a;
      Shape s = x->shape();
      for (int i = 0; i < x->rank(); ++i) {
        if (s[i] != y->shape()[i]) s[i] = kUnknownDim;
      }
      if (!x->value().has_value() || !y->value().has_value()) {
        return MakeAbstractTensor(x->dtype(), std::move(s));
      }
      Shape v = *x->value();  // same length: the shapes agree where values exist
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i] != (*y->value())[i]) v[i] = kUnknownValue;
      }
      return MakeAbstractShapeValue(x->dtype(), std::move(s), std::move(v));
    }
    case AbstractKind::kScalar: {
      auto* x = AsScalar(a);
      auto* y = AsScalar(b);
      if (x->dtype() != y->dtype()) return JoinError(a, b, "dtypes");
      if (x->value() == y->value()) return a;
      return MakeAbstractScalar(x->dtype());
    }
    case AbstractKind::kString:
      if (AsString(a)->value() == AsString(b)->value()) return a;
      return MakeAbstractString();
    case AbstractKind::kNone:
    case AbstractKind::kEnv:
      return a;
    case AbstractKind::kTuple: {
      auto* x = AsTuple(a);
      auto* y = AsTuple(b);
      if (x->size() != y->size()) return JoinError(a, b, "tuple lengths");
      std::vector<AbstractPtr> elems;
      for (size_t i = 0; i < x->size(); ++i) {
        KGRAD_ASSIGN_OR_RETURN(AbstractPtr e, Join(x->elements()[i], y->elements()[i]));
        elems.push_back(std::move(e));
      }
      return MakeAbstractTuple(std::move(elems));
    }
    case AbstractKind::kList: {
      const AbstractPtr& x = AsList(a)->element();
      const AbstractPtr& y = AsList(b)->element();
      absl::StatusOr<AbstractPtr> e = Join(x, y);
      if (!e.ok()) return JoinError(a, b, "element types");
      return AbstractEquals(*e, x) ? a : MakeAbstractList(*e);
    }
    case AbstractKind::kFunction: {
      std::vector<FuncAtom> atoms = AsFunction(a)->atoms();
      bool added = false;
      for (const FuncAtom& f : AsFunction(b)->atoms()) {
        if (std::none_of(atoms.begin(), atoms.end(),
                         [&](const FuncAtom& g) { return FuncAtomEquals(f, g); })) {
          atoms.push_back(f);
          added = true;
        }
      }
      if (!added) return a;
      return std::make_shared<const AbstractFunction>(std::move(atoms));
    }
  }
  return a;
}

AbstractPtr Broaden(const AbstractPtr& a) {
  if (a == nullptr) return a;
  if (const AbstractScalar* s = AsScalar(a)) {
    return s->value().has_value() ? MakeAbstractScalar(s->dtype()) : a;
  }
  if (const AbstractTensor* t = AsTensor(a)) {
    return t->value().has_value() ? MakeAbstractTensor(t->dtype(), t->shape()) : a;
  }
  if (const AbstractTuple* t = AsTuple(a)) {
    std::vector<AbstractPtr> elems;
    bool changed = false;
    for (const AbstractPtr& e : t->elements()) {
      elems.push_back(Broaden(e));
      changed |= elems.back() != e;
    }
    return changed ? MakeAbstractTuple(std::move(elems)) : a;
  }
  if (const AbstractList* l = AsList(a)) {
    AbstractPtr e = Broaden(l->element());
    return e == l->element() ? a : MakeAbstractList(std::move(e));
  }
  return a;
}

std::string AbstractToString(const AbstractPtr& a) {
  return a == nullptr ? "null" : a->ToString();
}

}  // namespace kgrad
