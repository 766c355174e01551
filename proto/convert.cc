#include "proto/convert.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/func_graph.h"
#include "core/status_macros.h"
#include "core/value_walk.h"

namespace kgrad {

proto::DataType DTypeToProto(DType t) {
  switch (t) {
    case DType::kFloat32: return proto::DT_FLOAT32;
    case DType::kFloat64: return proto::DT_FLOAT64;
    case DType::kInt32: return proto::DT_INT32;
    case DType::kInt64: return proto::DT_INT64;
    case DType::kBool: return proto::DT_BOOL;
    case DType::kUInt8: return proto::DT_UINT8;
    case DType::kInt8: return proto::DT_INT8;
    case DType::kInt16: return proto::DT_INT16;
    case DType::kUInt16: return proto::DT_UINT16;
    case DType::kUInt32: return proto::DT_UINT32;
    case DType::kUInt64: return proto::DT_UINT64;
    case DType::kFloat16: return proto::DT_FLOAT16;
    case DType::kBFloat16: return proto::DT_BFLOAT16;
  }
  return proto::DT_INVALID;
}

absl::StatusOr<DType> DTypeFromProto(int t) {
  switch (t) {
    case proto::DT_FLOAT32: return DType::kFloat32;
    case proto::DT_FLOAT64: return DType::kFloat64;
    case proto::DT_INT32: return DType::kInt32;
    case proto::DT_INT64: return DType::kInt64;
    case proto::DT_BOOL: return DType::kBool;
    case proto::DT_UINT8: return DType::kUInt8;
    case proto::DT_INT8: return DType::kInt8;
    case proto::DT_INT16: return DType::kInt16;
    case proto::DT_UINT16: return DType::kUInt16;
    case proto::DT_UINT32: return DType::kUInt32;
    case proto::DT_UINT64: return DType::kUInt64;
    case proto::DT_FLOAT16: return DType::kFloat16;
    case proto::DT_BFLOAT16: return DType::kBFloat16;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "bad dtype ", t, " (expected one of DT_FLOAT32 ... DT_BFLOAT16 of graph.proto's DataType)"));
  }
}

void TensorToProto(const Tensor& t, proto::TensorProto* out) {
  out->set_dtype(DTypeToProto(t.dtype()));
  for (int64_t d : t.shape()) out->add_dims(d);
  out->set_raw_data(std::string(static_cast<const char*>(t.raw_data()), t.nbytes()));
}

namespace {

// Values written as numbers (hand-written files).
absl::StatusOr<Tensor> TensorFromLists(const proto::TensorProto& p, DType dtype, const Shape& shape,
                                       int64_t n) {
  bool floating = IsFloating(dtype) || IsHalf(dtype);
  int given = floating ? p.double_data_size() : p.int_data_size();
  if (!p.raw_data().empty() || (p.double_data_size() > 0 && p.int_data_size() > 0)) {
    return absl::InvalidArgumentError("tensor values must come in only one of raw_data, double_data, int_data");
  }
  if ((floating && p.int_data_size() > 0) || (!floating && p.double_data_size() > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("a ", DTypeName(dtype), " tensor takes its values in ",
                                                   floating ? "double_data" : "int_data"));
  }
  if (given != n) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", DTypeName(dtype), ShapeToString(shape),
                                                   " needs ", n, " values, the file has ", given));
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(dtype, shape));
  int64_t bad = -1;
  DispatchDType(dtype, [&](auto zero) {
    using V = decltype(zero);
    V* out = t.mutable_data<V>();
    for (int64_t i = 0; i < n; ++i) {
      if (floating) {
        out[i] = static_cast<V>(p.double_data(i));
        continue;
      }
      out[i] = static_cast<V>(p.int_data(i));
      // A value the dtype cannot hold is an error, not a silent wrap.
      if (bad < 0 && dtype != DType::kBool && static_cast<int64_t>(out[i]) != p.int_data(i)) bad = i;
    }
  });
  if (bad >= 0) {
    return absl::InvalidArgumentError(absl::StrCat("int_data[", bad, "] = ", p.int_data(bad),
                                                   " does not fit ", DTypeName(dtype)));
  }
  return t;
}

}  // namespace

absl::StatusOr<Tensor> TensorFromProto(const proto::TensorProto& p, const LoadLimits& limits) {
  KGRAD_ASSIGN_OR_RETURN(DType dtype, DTypeFromProto(p.dtype()));
  Shape shape(p.dims().begin(), p.dims().end());
  KGRAD_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(shape));
  int64_t bytes = n * static_cast<int64_t>(DTypeSize(dtype));
  if (bytes > limits.max_tensor_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("tensor of ", bytes, " bytes exceeds the limit LoadLimits::max_tensor_bytes = ",
                                                     limits.max_tensor_bytes));
  }
  if (p.double_data_size() > 0 || p.int_data_size() > 0) return TensorFromLists(p, dtype, shape, n);
  if (static_cast<int64_t>(p.raw_data().size()) != bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor ", DTypeName(dtype), ShapeToString(shape), " needs ", bytes,
        " bytes of data, the file has ", p.raw_data().size()));
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(dtype, shape));
  if (bytes > 0) std::memcpy(t.raw_data(), p.raw_data().data(), bytes);
  if (dtype == DType::kBool) {
    // Only 0 and 1 are valid bool bytes in C++.
    bool* b = t.mutable_data<bool>();
    const unsigned char* raw = reinterpret_cast<const unsigned char*>(p.raw_data().data());
    for (int64_t i = 0; i < n; ++i) b[i] = raw[i] != 0;
  }
  return t;
}

void AttrToProto(const AttrValue& v, proto::AttrProto* out) {
  switch (AttrValueType(v)) {
    case AttrType::kInt: out->set_i(std::get<int64_t>(v)); break;
    case AttrType::kFloat: out->set_f(std::get<double>(v)); break;
    case AttrType::kBool: out->set_b(std::get<bool>(v)); break;
    case AttrType::kString: out->set_s(std::get<std::string>(v)); break;
    case AttrType::kInts:
      for (int64_t x : std::get<std::vector<int64_t>>(v)) out->mutable_ints()->add_values(x);
      out->mutable_ints();
      break;
    case AttrType::kFloats:
      for (double x : std::get<std::vector<double>>(v)) out->mutable_floats()->add_values(x);
      out->mutable_floats();
      break;
    case AttrType::kDType: out->set_dtype(DTypeToProto(std::get<DType>(v))); break;
  }
}

absl::StatusOr<AttrValue> AttrFromProto(const proto::AttrProto& p) {
  switch (p.value_case()) {
    case proto::AttrProto::kI: return AttrValue(p.i());
    case proto::AttrProto::kF: return AttrValue(p.f());
    case proto::AttrProto::kB: return AttrValue(p.b());
    case proto::AttrProto::kS: return AttrValue(p.s());
    case proto::AttrProto::kInts:
      return AttrValue(std::vector<int64_t>(p.ints().values().begin(), p.ints().values().end()));
    case proto::AttrProto::kFloats:
      return AttrValue(std::vector<double>(p.floats().values().begin(), p.floats().values().end()));
    case proto::AttrProto::kDtype: {
      KGRAD_ASSIGN_OR_RETURN(DType t, DTypeFromProto(p.dtype()));
      return AttrValue(t);
    }
    case proto::AttrProto::VALUE_NOT_SET: break;
  }
  return absl::InvalidArgumentError("attribute has no value");
}

namespace {
// ValueToProto once the depth is known to be within the limit.
absl::Status ValueToProtoShallow(const Value& v, proto::ValueProto* out);
}  // namespace

absl::Status ValueToProto(const Value& v, proto::ValueProto* out) {
  // A file the loader would refuse is not written (and the walk below stays shallow).
  const int limit = LoadLimits().max_value_depth;
  if (ValueDepth(v, limit) > limit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "constant nests deeper than ", limit,
        " tuples (LoadLimits::max_value_depth); a file cannot hold it"));
  }
  return ValueToProtoShallow(v, out);
}

namespace {
absl::Status ValueToProtoShallow(const Value& v, proto::ValueProto* out) {
  switch (v.kind()) {
    case Value::Kind::kNone: out->mutable_none(); return absl::OkStatus();
    case Value::Kind::kTensor: TensorToProto(v.tensor(), out->mutable_tensor()); return absl::OkStatus();
    case Value::Kind::kScalar: {
      proto::ScalarProto* s = out->mutable_scalar();
      const Scalar& x = v.scalar();
      s->set_dtype(DTypeToProto(x.dtype()));
      if (x.is_float()) s->set_f(x.AsDouble());
      else if (x.is_bool()) s->set_b(x.AsBool());
      else s->set_i(x.AsInt());
      return absl::OkStatus();
    }
    case Value::Kind::kString: out->set_str(v.str()); return absl::OkStatus();
    case Value::Kind::kTuple: {
      proto::TupleProto* t = out->mutable_tuple();
      for (const Value& e : v.tuple()) KGRAD_RETURN_IF_ERROR(ValueToProtoShallow(e, t->add_elements()));
      return absl::OkStatus();
    }
    case Value::Kind::kList: {
      proto::ListProto* l = out->mutable_list();
      for (const Value& e : v.list()) KGRAD_RETURN_IF_ERROR(ValueToProtoShallow(e, l->add_elements()));
      return absl::OkStatus();
    }
    case Value::Kind::kPrimitive: {
      proto::PrimitiveProto* p = out->mutable_primitive();
      p->set_name(v.primitive()->name());
      for (const auto& [k, a] : v.primitive()->attrs()) AttrToProto(a, &(*p->mutable_attrs())[k]);
      return absl::OkStatus();
    }
    case Value::Kind::kGraph: out->set_graph(v.graph()->name()); return absl::OkStatus();
    case Value::Kind::kEnv:
      if (v.env().empty()) {
        out->mutable_env();
        return absl::OkStatus();
      }
      break;
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("a ", v.TypeString(), " is a run-time value and cannot be saved"));
}
}  // namespace

namespace {

absl::StatusOr<Value> ScalarFromProto(const proto::ScalarProto& s) {
  KGRAD_ASSIGN_OR_RETURN(DType t, DTypeFromProto(s.dtype()));
  switch (s.value_case()) {
    case proto::ScalarProto::kI:
      if (IsFloating(t)) return Value(Scalar::Float(static_cast<double>(s.i()), t));
      if (t == DType::kBool) return Value(Scalar::Bool(s.i() != 0));
      return Value(Scalar::Int(s.i(), t));
    case proto::ScalarProto::kF: return Value(Scalar::FromDouble(t, s.f()));
    case proto::ScalarProto::kB: return Value(Scalar::FromDouble(t, s.b() ? 1.0 : 0.0));
    case proto::ScalarProto::VALUE_NOT_SET: break;
  }
  return absl::InvalidArgumentError("scalar has no value");
}

// A list constant: its elements, which must have one type (a list's elements
// share one).
absl::StatusOr<Value> ListFromProto(const proto::ListProto& p, const PrimitiveRegistry& registry,
                                    const GraphResolver& graphs, const LoadLimits& limits, int depth) {
  std::vector<Value> elems;
  for (const proto::ValueProto& e : p.elements()) {
    KGRAD_ASSIGN_OR_RETURN(Value v, ValueFromProto(e, registry, graphs, limits, depth + 1));
    elems.push_back(std::move(v));
  }
  Value list = Value::List(std::move(elems));
  if (AbstractOfValue(list, limits.max_value_depth + 1) == nullptr) {
    return absl::InvalidArgumentError("list constant: its elements have different types");
  }
  return list;
}

}  // namespace

absl::StatusOr<Value> ValueFromProto(const proto::ValueProto& p, const PrimitiveRegistry& registry,
                                     const GraphResolver& graphs, const LoadLimits& limits,
                                     int depth) {
  if (depth > limits.max_value_depth) {
    return absl::ResourceExhaustedError(absl::StrCat("constant nests deeper than the limit LoadLimits::max_value_depth = ",
                                                     limits.max_value_depth));
  }
  switch (p.value_case()) {
    case proto::ValueProto::kTensor: {
      KGRAD_ASSIGN_OR_RETURN(Tensor t, TensorFromProto(p.tensor(), limits));
      return Value(std::move(t));
    }
    case proto::ValueProto::kScalar: return ScalarFromProto(p.scalar());
    case proto::ValueProto::kStr: return Value::String(p.str());
    case proto::ValueProto::kNone: return Value::None();
    case proto::ValueProto::kTuple: {
      std::vector<Value> elems;
      for (const proto::ValueProto& e : p.tuple().elements()) {
        KGRAD_ASSIGN_OR_RETURN(Value v, ValueFromProto(e, registry, graphs, limits, depth + 1));
        elems.push_back(std::move(v));
      }
      return Value::Tuple(std::move(elems));
    }
    case proto::ValueProto::kList: return ListFromProto(p.list(), registry, graphs, limits, depth);
    case proto::ValueProto::kPrimitive: {
      AttrMap attrs;
      for (const auto& [k, a] : p.primitive().attrs()) {
        absl::StatusOr<AttrValue> v = AttrFromProto(a);
        if (!v.ok()) {
          return absl::InvalidArgumentError(absl::StrCat("attribute '", k, "' of primitive '",
                                                         p.primitive().name(), "': ",
                                                         v.status().message()));
        }
        attrs.emplace(k, *std::move(v));
      }
      KGRAD_ASSIGN_OR_RETURN(PrimitivePtr prim, registry.Make(p.primitive().name(), std::move(attrs)));
      return Value::Prim(std::move(prim));
    }
    case proto::ValueProto::kGraph: {
      KGRAD_ASSIGN_OR_RETURN(FuncGraph* g, graphs(p.graph()));
      return Value::Graph(g);
    }
    case proto::ValueProto::kEnv: return Value::EmptyEnv();
    case proto::ValueProto::VALUE_NOT_SET: break;
  }
  return absl::InvalidArgumentError("constant has no value");
}

absl::Status TypeToProto(const AbstractPtr& a, proto::TypeProto* out) {
  if (const AbstractTensor* t = AsTensor(a)) {
    proto::TypeProto::Tensor* tp = out->mutable_tensor();
    tp->set_dtype(DTypeToProto(t->dtype()));
    const bool named = std::any_of(t->shape().begin(), t->shape().end(), IsSymbolDim);
    for (int64_t d : t->shape()) {
      tp->add_dims(d >= 0 ? d : kUnknownDim);
      if (named) tp->add_dim_params(IsSymbolDim(d) ? DimToString(d) : "");
    }
    return absl::OkStatus();
  }
  if (const AbstractScalar* s = AsScalar(a)) {
    out->mutable_scalar()->set_dtype(DTypeToProto(s->dtype()));
    return absl::OkStatus();
  }
  if (const AbstractTuple* t = AsTuple(a)) {
    proto::TypeProto::Tuple* tp = out->mutable_tuple();
    for (const AbstractPtr& e : t->elements()) KGRAD_RETURN_IF_ERROR(TypeToProto(e, tp->add_elements()));
    return absl::OkStatus();
  }
  if (const AbstractList* l = AsList(a)) {
    proto::TypeProto::List* lp = out->mutable_list();
    if (l->element() != nullptr) KGRAD_RETURN_IF_ERROR(TypeToProto(l->element(), lp->mutable_element()));
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("type ", AbstractToString(a), " cannot be declared in a graph file"));
}

absl::StatusOr<AbstractPtr> TypeFromProto(const proto::TypeProto& p, int depth) {
  if (depth > 64) return absl::InvalidArgumentError("type nests deeper than 64");
  switch (p.kind_case()) {
    case proto::TypeProto::kTensor: {
      KGRAD_ASSIGN_OR_RETURN(DType t, DTypeFromProto(p.tensor().dtype()));
      if (p.tensor().dims_size() > kMaxRank) {
        return absl::InvalidArgumentError(absl::StrCat("rank ", p.tensor().dims_size(),
                                                       " exceeds the limit ", kMaxRank));
      }
      const auto& names = p.tensor().dim_params();
      if (!names.empty() && names.size() != p.tensor().dims_size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            names.size(), " dim_params for ", p.tensor().dims_size(), " dims (one per dim, or none)"));
      }
      Shape s;
      for (int i = 0; i < p.tensor().dims_size(); ++i) {
        const int64_t d = p.tensor().dims(i);
        if (d < -1) return absl::InvalidArgumentError(absl::StrCat("bad dimension ", d, " (use -1 for unknown)"));
        if (names.empty() || names[i].empty()) {
          s.push_back(d);
          continue;
        }
        if (d != -1) {
          return absl::InvalidArgumentError(absl::StrCat(
              "dim ", i, " has both the size ", d, " and the name '", names[i], "' (use -1 with a name)"));
        }
        KGRAD_ASSIGN_OR_RETURN(int64_t sym, ParseDim(names[i]));
        s.push_back(sym);
      }
      Shape known;
      for (int64_t d : s) known.push_back(d < 0 ? 1 : d);
      KGRAD_RETURN_IF_ERROR(CheckedNumElements(known).status());
      return MakeAbstractTensor(t, std::move(s));
    }
    case proto::TypeProto::kScalar: {
      KGRAD_ASSIGN_OR_RETURN(DType t, DTypeFromProto(p.scalar().dtype()));
      return MakeAbstractScalar(t);
    }
    case proto::TypeProto::kTuple: {
      std::vector<AbstractPtr> elems;
      for (const proto::TypeProto& e : p.tuple().elements()) {
        KGRAD_ASSIGN_OR_RETURN(AbstractPtr a, TypeFromProto(e, depth + 1));
        elems.push_back(std::move(a));
      }
      return MakeAbstractTuple(std::move(elems));
    }
    case proto::TypeProto::kList: {
      if (!p.list().has_element()) return MakeAbstractList(nullptr);
      KGRAD_ASSIGN_OR_RETURN(AbstractPtr e, TypeFromProto(p.list().element(), depth + 1));
      return MakeAbstractList(std::move(e));
    }
    case proto::TypeProto::KIND_NOT_SET: break;
  }
  return absl::InvalidArgumentError("type has no kind");
}

}  // namespace kgrad
