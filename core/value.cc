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

Value Value::Tuple(std::vector<Value> elements) {
  Value v;
  v.rep_ = std::make_shared<const std::vector<Value>>(std::move(elements));
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
  v.rep_ = std::make_shared<const ClosureRep>(ClosureRep{g, std::move(captured)});
  return v;
}

Value Value::Partial(Value fn, std::vector<Value> args) {
  Value v;
  v.rep_ = std::make_shared<const PartialRep>(PartialRep{std::move(fn), std::move(args)});
  return v;
}

Value Value::EmptyEnv() {
  Value v;
  v.rep_ = std::make_shared<const EnvRep>();
  return v;
}

Value Value::EnvWith(const Value& env, const std::string& key, Value item) {
  auto rep = std::make_shared<EnvRep>(*std::get<EnvPtr>(env.rep_));
  rep->items[key] = std::move(item);
  Value v;
  v.rep_ = EnvPtr(std::move(rep));
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
  switch (kind()) {
    case Kind::kNone: return "none";
    case Kind::kTensor: return tensor().TypeString();
    case Kind::kScalar: return absl::StrCat(DTypeName(scalar().dtype()), " scalar");
    case Kind::kString: return "string";
    case Kind::kTuple: return absl::StrCat("tuple(", tuple().size(), ")");
    case Kind::kPrimitive: return absl::StrCat("primitive ", primitive()->name());
    case Kind::kGraph: return absl::StrCat("graph @", graph()->name());
    case Kind::kClosure: return absl::StrCat("closure @", closure().graph->name());
    case Kind::kPartial: return absl::StrCat("partial ", partial().fn.TypeString());
    case Kind::kEnv: return absl::StrCat("env(", env().size(), ")");
  }
  return "?";
}

std::string Value::ToString() const {
  switch (kind()) {
    case Kind::kNone: return "none";
    case Kind::kTensor: return tensor().DebugString();
    case Kind::kScalar: {
      const Scalar& s = scalar();
      bool default_type = s.dtype() == DType::kInt64 || s.dtype() == DType::kFloat64 ||
                          s.dtype() == DType::kBool;
      return default_type ? s.ToString()
                          : absl::StrCat(s.ToString(), ":", DTypeName(s.dtype()));
    }
    case Kind::kString: return absl::StrCat("\"", str(), "\"");
    case Kind::kTuple: {
      std::vector<std::string> parts;
      for (const Value& e : tuple()) parts.push_back(e.ToString());
      return absl::StrCat("(", absl::StrJoin(parts, ", "), tuple().size() == 1 ? ",)" : ")");
    }
    case Kind::kPrimitive: return primitive()->ToString();
    case Kind::kGraph: return absl::StrCat("@", graph()->name());
    case Kind::kClosure: return absl::StrCat("closure @", closure().graph->name());
    case Kind::kPartial: return absl::StrCat("partial(", partial().fn.ToString(), ")");
    case Kind::kEnv: {
      if (env().empty()) return "newenv";
      std::vector<std::string> keys;
      for (const auto& [k, v] : env()) keys.push_back(k);
      std::sort(keys.begin(), keys.end());
      return absl::StrCat("env{", absl::StrJoin(keys, ", "), "}");
    }
  }
  return "?";
}

bool ValuesEqual(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kNone: return true;
    case Value::Kind::kTensor: return TensorsEqual(a.tensor(), b.tensor());
    case Value::Kind::kScalar: return a.scalar() == b.scalar();
    case Value::Kind::kString: return a.str() == b.str();
    case Value::Kind::kTuple: {
      if (a.tuple().size() != b.tuple().size()) return false;
      for (size_t i = 0; i < a.tuple().size(); ++i) {
        if (!ValuesEqual(a.tuple()[i], b.tuple()[i])) return false;
      }
      return true;
    }
    case Value::Kind::kPrimitive: return PrimitivesEqual(*a.primitive(), *b.primitive());
    case Value::Kind::kGraph: return a.graph() == b.graph();
    case Value::Kind::kClosure: {
      const ClosureRep& x = a.closure();
      const ClosureRep& y = b.closure();
      if (x.graph != y.graph || x.captured.size() != y.captured.size()) return false;
      for (size_t i = 0; i < x.captured.size(); ++i) {
        if (!ValuesEqual(x.captured[i], y.captured[i])) return false;
      }
      return true;
    }
    case Value::Kind::kPartial: {
      const PartialRep& x = a.partial();
      const PartialRep& y = b.partial();
      if (!ValuesEqual(x.fn, y.fn) || x.args.size() != y.args.size()) return false;
      for (size_t i = 0; i < x.args.size(); ++i) {
        if (!ValuesEqual(x.args[i], y.args[i])) return false;
      }
      return true;
    }
    case Value::Kind::kEnv: {
      if (a.env().size() != b.env().size()) return false;
      for (const auto& [k, v] : a.env()) {
        auto it = b.env().find(k);
        if (it == b.env().end() || !ValuesEqual(v, it->second)) return false;
      }
      return true;
    }
  }
  return false;
}

AbstractPtr AbstractOfValue(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNone: return MakeAbstractNone();
    case Value::Kind::kTensor:
      return MakeAbstractTensor(v.tensor().dtype(), v.tensor().shape());
    case Value::Kind::kScalar: return MakeAbstractScalarValue(v.scalar());
    case Value::Kind::kString: return MakeAbstractString(v.str());
    case Value::Kind::kTuple: {
      std::vector<AbstractPtr> elems;
      for (const Value& e : v.tuple()) elems.push_back(AbstractOfValue(e));
      return MakeAbstractTuple(std::move(elems));
    }
    case Value::Kind::kPrimitive: return MakeAbstractPrimFunction(v.primitive());
    case Value::Kind::kGraph: return MakeAbstractGraphFunction(v.graph());
    case Value::Kind::kClosure: return MakeAbstractGraphFunction(v.closure().graph);
    case Value::Kind::kPartial: {
      AbstractPtr fn = AbstractOfValue(v.partial().fn);
      std::vector<FuncAtom> atoms;
      for (const FuncAtom& f : AsFunction(fn)->atoms()) {
        FuncAtom p;
        p.kind = FuncAtom::Kind::kPartial;
        p.fn = std::make_shared<const FuncAtom>(f);
        for (const Value& a : v.partial().args) p.bound.push_back(AbstractOfValue(a));
        atoms.push_back(std::move(p));
      }
      return std::make_shared<const AbstractFunction>(std::move(atoms));
    }
    case Value::Kind::kEnv: return MakeAbstractEnv();
  }
  return MakeAbstractNone();
}

}  // namespace kgrad
