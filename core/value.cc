#include "core/value.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/func_graph.h"

namespace kgrad {

Value Value::String(std::string s) {
  Value v;
  v.rep_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

void ReleaseAggregate(AggregateRep* rep) {
  // fetch_sub is acq_rel: every other owner's reads of the payload happen before
  // the last owner moves its children out.
  if (rep->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  std::vector<Value> work;
  rep->MoveChildrenTo(&work);
  delete rep;  // childless now: its destructor does not recurse
  while (!work.empty()) {
    Value v = std::move(work.back());
    work.pop_back();
    AggregateRep* child = v.DetachAggregate();
    if (child == nullptr || child->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
    child->MoveChildrenTo(&work);
    delete child;
  }
}

void TupleRep::MoveChildrenTo(std::vector<Value>* out) {
  for (Value& v : elements) out->push_back(std::move(v));
  elements.clear();
}

void ListRep::MoveChildrenTo(std::vector<Value>* out) {
  for (Value& v : elements) out->push_back(std::move(v));
  elements.clear();
}

void ClosureRep::MoveChildrenTo(std::vector<Value>* out) {
  for (Value& v : captured) out->push_back(std::move(v));
  captured.clear();
}

void PartialRep::MoveChildrenTo(std::vector<Value>* out) {
  out->push_back(std::move(fn));
  for (Value& v : args) out->push_back(std::move(v));
  args.clear();
}

void EnvRep::MoveChildrenTo(std::vector<Value>* out) {
  for (auto& [key, v] : items) out->push_back(std::move(v));
  items.clear();
}

AggregateRep* Value::DetachAggregate() {
  AggregateRep* rep = nullptr;
  switch (kind()) {
    case Kind::kTuple: rep = std::get<TuplePtr>(rep_).Detach(); break;
    case Kind::kClosure: rep = std::get<ClosurePtr>(rep_).Detach(); break;
    case Kind::kPartial: rep = std::get<PartialPtr>(rep_).Detach(); break;
    case Kind::kEnv: rep = std::get<EnvPtr>(rep_).Detach(); break;
    case Kind::kList: rep = std::get<ListPtr>(rep_).Detach(); break;
    default: return nullptr;
  }
  rep_ = std::monostate();
  return rep;
}

Value Value::Tuple(std::vector<Value> elements) {
  Value v;
  v.rep_ = TuplePtr(new TupleRep(std::move(elements)));
  return v;
}

Value Value::List(std::vector<Value> elements) {
  Value v;
  v.rep_ = ListPtr(new ListRep(std::move(elements)));
  return v;
}

Value Value::Prim(PrimitivePtr p) {
  Value v;
  v.rep_ = std::move(p);
  return v;
}

Value Value::Graph(FuncGraph* g) {
  Value v;
  v.rep_ = GraphRef{g};
  return v;
}

Value Value::Closure(FuncGraph* g, std::vector<Value> captured) {
  Value v;
  v.rep_ = ClosurePtr(new ClosureRep(g, std::move(captured)));
  return v;
}

Value Value::Partial(Value fn, std::vector<Value> args) {
  Value v;
  v.rep_ = PartialPtr(new PartialRep(std::move(fn), std::move(args)));
  return v;
}

Value Value::EmptyEnv() {
  Value v;
  v.rep_ = EnvPtr(new EnvRep());
  return v;
}

Value Value::EnvWith(const Value& env, const std::string& key, Value item) {
  auto* rep = new EnvRep(*std::get<EnvPtr>(env.rep_));
  rep->items[key] = std::move(item);
  Value v;
  v.rep_ = EnvPtr(rep);
  return v;
}

const absl::flat_hash_map<std::string, Value>& Value::env() const {
  return std::get<EnvPtr>(rep_)->items;
}

bool Value::is_callable() const {
  return is_graph() || is_closure() || is_partial() || is_primitive();
}

Tensor Value::TakeTensor() {
  Tensor t = std::move(std::get<Tensor>(rep_));
  rep_ = std::monostate();
  return t;
}

std::string Value::TypeString() const {
  std::string prefix;
  const Value* v = this;
  for (; v->is_partial(); v = &v->partial().fn) prefix += "partial ";  // chains: no recursion
  switch (v->kind()) {
    case Kind::kNone: return prefix + "none";
    case Kind::kTensor: return prefix + v->tensor().TypeString();
    case Kind::kScalar: return absl::StrCat(prefix, DTypeName(v->scalar().dtype()), " scalar");
    case Kind::kString: return prefix + "string";
    case Kind::kTuple: return absl::StrCat(prefix, "tuple(", v->tuple().size(), ")");
    case Kind::kList: return absl::StrCat(prefix, "list(", v->list().size(), ")");
    case Kind::kPrimitive: return absl::StrCat(prefix, "primitive ", v->primitive()->name());
    case Kind::kGraph: return absl::StrCat(prefix, "graph @", v->graph()->name());
    case Kind::kClosure: return absl::StrCat(prefix, "closure @", v->closure().graph->name());
    case Kind::kEnv: return absl::StrCat(prefix, "env(", v->env().size(), ")");
    case Kind::kPartial: break;
  }
  return "?";
}

namespace {

// The printed form of a value that is not a tuple, a list or a partial.
std::string LeafString(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNone: return "none";
    case Value::Kind::kTensor: return v.tensor().DebugString();
    case Value::Kind::kScalar: {
      const Scalar& s = v.scalar();
      bool default_type = s.dtype() == DType::kInt64 || s.dtype() == DType::kFloat64 ||
                          s.dtype() == DType::kBool;
      return default_type ? s.ToString()
                          : absl::StrCat(s.ToString(), ":", DTypeName(s.dtype()));
    }
    case Value::Kind::kString: return absl::StrCat("\"", v.str(), "\"");
    case Value::Kind::kPrimitive: return v.primitive()->ToString();
    case Value::Kind::kGraph: return absl::StrCat("@", v.graph()->name());
    case Value::Kind::kClosure: return absl::StrCat("closure @", v.closure().graph->name());
    case Value::Kind::kEnv: {
      if (v.env().empty()) return "newenv";
      std::vector<std::string> keys;
      for (const auto& [k, item] : v.env()) keys.push_back(k);
      std::sort(keys.begin(), keys.end());
      return absl::StrCat("env{", absl::StrJoin(keys, ", "), "}");
    }
    case Value::Kind::kTuple:
    case Value::Kind::kList:
    case Value::Kind::kPartial: break;
  }
  return "?";
}

// The values a walk descends into: tuple and list elements; a partial's function,
// then its bound arguments. (Closures and envs are printed and typed without their
// contents.)
size_t NumParts(const Value& v) {
  if (v.is_sequence()) return v.elements().size();
  if (v.is_partial()) return 1 + v.partial().args.size();
  return 0;
}

const Value& Part(const Value& v, size_t i) {
  if (v.is_sequence()) return v.elements()[i];
  return i == 0 ? v.partial().fn : v.partial().args[i - 1];
}

}  // namespace

std::string Value::ToString() const {
  // An explicit stack of pending values and literal text, so depth costs heap only.
  std::string out;
  std::vector<std::variant<const Value*, const char*>> work{this};
  while (!work.empty()) {
    std::variant<const Value*, const char*> item = work.back();
    work.pop_back();
    if (const char* const* text = std::get_if<const char*>(&item)) {
      out += *text;
      continue;
    }
    const Value& v = *std::get<const Value*>(item);
    if (v.is_tuple()) {
      const std::vector<Value>& elems = v.tuple();
      out += "(";
      work.push_back(elems.size() == 1 ? ",)" : ")");
      for (size_t i = elems.size(); i-- > 0;) {
        work.push_back(&elems[i]);
        if (i > 0) work.push_back(", ");
      }
    } else if (v.is_list()) {
      const std::vector<Value>& elems = v.list();
      out += "list(";
      work.push_back(")");
      for (size_t i = elems.size(); i-- > 0;) {
        work.push_back(&elems[i]);
        if (i > 0) work.push_back(", ");
      }
    } else if (v.is_partial()) {
      out += "partial(";
      work.push_back(")");
      work.push_back(&v.partial().fn);
    } else {
      out += LeafString(v);
    }
  }
  return out;
}

namespace {

// Equality of everything but the parts (tuple elements, partial arguments,
// captured values, env items), which ValuesEqual compares with its own stack.
bool ShallowEqual(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kNone: return true;
    case Value::Kind::kTensor: return TensorsEqual(a.tensor(), b.tensor());
    case Value::Kind::kScalar: return a.scalar() == b.scalar();
    case Value::Kind::kString: return a.str() == b.str();
    case Value::Kind::kTuple: return a.tuple().size() == b.tuple().size();
    case Value::Kind::kList: return a.list().size() == b.list().size();
    case Value::Kind::kPrimitive: return PrimitivesEqual(*a.primitive(), *b.primitive());
    case Value::Kind::kGraph: return a.graph() == b.graph();
    case Value::Kind::kClosure:
      return a.closure().graph == b.closure().graph &&
             a.closure().captured.size() == b.closure().captured.size();
    case Value::Kind::kPartial: return a.partial().args.size() == b.partial().args.size();
    case Value::Kind::kEnv: return a.env().size() == b.env().size();
  }
  return false;
}

}  // namespace

bool ValuesEqual(const Value& a, const Value& b) {
  std::vector<std::pair<const Value*, const Value*>> work{{&a, &b}};
  while (!work.empty()) {
    auto [x, y] = work.back();
    work.pop_back();
    if (!ShallowEqual(*x, *y)) return false;
    switch (x->kind()) {
      case Value::Kind::kClosure:
        for (size_t i = 0; i < x->closure().captured.size(); ++i) {
          work.emplace_back(&x->closure().captured[i], &y->closure().captured[i]);
        }
        break;
      case Value::Kind::kEnv:
        for (const auto& [k, v] : x->env()) {
          auto it = y->env().find(k);
          if (it == y->env().end()) return false;
          work.emplace_back(&v, &it->second);
        }
        break;
      default:
        for (size_t i = 0; i < NumParts(*x); ++i) work.emplace_back(&Part(*x, i), &Part(*y, i));
    }
  }
  return true;
}

namespace {

// The abstract of `v` given the abstracts of its parts (NumParts/Part order).
// A small integer tensor on the host also carries its elements as a shape value
// (numbers in the symbol range, which no shape holds, are left unknown).
AbstractPtr AbstractOfTensor(const Tensor& t) {
  const bool small = IsInteger(t.dtype()) && t.rank() <= 1 && t.NumElements() > 0 &&
                     t.NumElements() <= kMaxShapeValue && t.device() == DeviceType::kCpu;
  if (!small) return MakeAbstractTensor(t.dtype(), t.shape());
  Shape value;
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    const int64_t v = t.dtype() == DType::kInt64 ? t.data<int64_t>()[i] : t.data<int32_t>()[i];
    value.push_back(IsSymbolDim(v) ? kUnknownValue : v);
  }
  return MakeAbstractShapeValue(t.dtype(), t.shape(), std::move(value));
}

AbstractPtr AbstractOfParts(const Value& v, std::vector<AbstractPtr> parts) {
  switch (v.kind()) {
    case Value::Kind::kNone: return MakeAbstractNone();
    case Value::Kind::kTensor: return AbstractOfTensor(v.tensor());
    case Value::Kind::kScalar: return MakeAbstractScalarValue(v.scalar());
    case Value::Kind::kString: return MakeAbstractString(v.str());
    case Value::Kind::kTuple: return MakeAbstractTuple(std::move(parts));
    case Value::Kind::kList: {
      // One element type for all (null when the elements' types do not join).
      AbstractPtr element;
      for (const AbstractPtr& p : parts) {
        absl::StatusOr<AbstractPtr> j = Join(element, Broaden(p));
        if (!j.ok()) return nullptr;
        element = *j;
      }
      return MakeAbstractList(std::move(element));
    }
    case Value::Kind::kPrimitive: return MakeAbstractPrimFunction(v.primitive());
    case Value::Kind::kGraph: return MakeAbstractGraphFunction(v.graph());
    case Value::Kind::kClosure: return MakeAbstractGraphFunction(v.closure().graph);
    case Value::Kind::kPartial: {
      std::vector<FuncAtom> atoms;
      for (const FuncAtom& f : AsFunction(parts[0])->atoms()) {
        FuncAtom p;
        p.kind = FuncAtom::Kind::kPartial;
        p.fn = std::make_shared<const FuncAtom>(f);
        p.bound.assign(parts.begin() + 1, parts.end());
        atoms.push_back(std::move(p));
      }
      return std::make_shared<const AbstractFunction>(std::move(atoms));
    }
    case Value::Kind::kEnv: return MakeAbstractEnv();
  }
  return MakeAbstractNone();
}

}  // namespace

AbstractPtr AbstractOfValue(const Value& v, int max_depth) {
  // Post-order over the parts with an explicit stack.
  struct Frame {
    const Value* v;
    size_t next = 0;
    std::vector<AbstractPtr> parts;
  };
  std::vector<Frame> stack;
  stack.push_back(Frame{&v});
  while (true) {
    Frame& f = stack.back();
    if (f.next < NumParts(*f.v)) {
      if (static_cast<int>(stack.size()) > max_depth) return nullptr;
      const Value* part = &Part(*f.v, f.next++);
      stack.push_back(Frame{part});
      continue;
    }
    AbstractPtr a = AbstractOfParts(*f.v, std::move(f.parts));
    if (a == nullptr) return nullptr;  // a list whose elements' types differ
    stack.pop_back();
    if (stack.empty()) return a;
    stack.back().parts.push_back(std::move(a));
  }
}

}  // namespace kgrad
