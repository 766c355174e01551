#include "proto/onnx/onnx_tensor.h"

#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status_macros.h"

namespace kgrad {
namespace {

using onnx::TensorProto;

// Copies `n` typed values from a repeated field into `t`, converting to T.
template <typename T, typename Field>
void CopyField(const Field& f, Tensor& t) {
  T* dst = t.mutable_data<T>();
  for (int64_t i = 0; i < t.NumElements(); ++i) dst[i] = static_cast<T>(f.Get(static_cast<int>(i)));
}

// The number of values the typed field for `t` holds, or -1 when none applies.
int64_t TypedFieldSize(const TensorProto& p, DType t) {
  switch (t) {
    case DType::kFloat32: return p.float_data_size();
    case DType::kFloat64: return p.double_data_size();
    case DType::kInt64: return p.int64_data_size();
    case DType::kInt32:
    case DType::kBool: return p.int32_data_size();
  }
  return -1;
}

}  // namespace

absl::StatusOr<DType> DTypeFromOnnx(int32_t elem_type) {
  switch (elem_type) {
    case TensorProto::FLOAT: return DType::kFloat32;
    case TensorProto::DOUBLE: return DType::kFloat64;
    case TensorProto::INT32: return DType::kInt32;
    case TensorProto::INT64: return DType::kInt64;
    case TensorProto::BOOL: return DType::kBool;
    default: break;
  }
  std::string name = TensorProto::DataType_IsValid(elem_type)
                         ? TensorProto::DataType_Name(static_cast<TensorProto::DataType>(elem_type))
                         : absl::StrCat("unknown (", elem_type, ")");
  return absl::UnimplementedError(
      absl::StrCat("element type ", name, " is not supported (FLOAT, DOUBLE, INT32, INT64, BOOL are)"));
}

int32_t DTypeToOnnx(DType t) {
  switch (t) {
    case DType::kFloat32: return TensorProto::FLOAT;
    case DType::kFloat64: return TensorProto::DOUBLE;
    case DType::kInt32: return TensorProto::INT32;
    case DType::kInt64: return TensorProto::INT64;
    case DType::kBool: return TensorProto::BOOL;
  }
  return TensorProto::UNDEFINED;
}

absl::StatusOr<Tensor> TensorFromOnnx(const TensorProto& p, const LoadLimits& limits) {
  std::string where = absl::StrCat("tensor '", p.name(), "'");
  if (p.has_data_location() && p.data_location() == TensorProto::EXTERNAL) {
    return absl::UnimplementedError(absl::StrCat(where, ": external data is not supported"));
  }
  absl::StatusOr<DType> dtype = DTypeFromOnnx(p.data_type());
  if (!dtype.ok()) return absl::Status(dtype.status().code(), absl::StrCat(where, ": ", dtype.status().message()));
  if (p.dims_size() > kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": rank ", p.dims_size(), " exceeds ", kMaxRank));
  }
  Shape shape(p.dims().begin(), p.dims().end());
  absl::StatusOr<int64_t> n = CheckedNumElements(shape);
  if (!n.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": bad dims: ", n.status().message()));
  int64_t bytes = *n * static_cast<int64_t>(DTypeSize(*dtype));
  if (bytes > limits.max_tensor_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(where, ": ", bytes, " bytes exceed the limit of ",
                                                     limits.max_tensor_bytes));
  }
  // Check the payload size before allocating, so that hostile dims cost nothing.
  if (p.has_raw_data()) {
    if (static_cast<int64_t>(p.raw_data().size()) != bytes) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": raw_data has ", p.raw_data().size(),
                                                     " bytes, dims ", ShapeToString(shape), " need ", bytes));
    }
  } else if (TypedFieldSize(p, *dtype) != *n) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": holds ", TypedFieldSize(p, *dtype),
                                                   " values, dims ", ShapeToString(shape), " need ", *n));
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(*dtype, shape));
  if (p.has_raw_data()) {
    if (bytes > 0) std::memcpy(t.raw_data(), p.raw_data().data(), bytes);
    if (*dtype == DType::kBool) {  // only 0 and 1 are valid bools
      for (int64_t i = 0; i < *n; ++i) t.mutable_data<bool>()[i] = p.raw_data()[i] != 0;
    }
    return t;
  }
  switch (*dtype) {
    case DType::kFloat32: CopyField<float>(p.float_data(), t); break;
    case DType::kFloat64: CopyField<double>(p.double_data(), t); break;
    case DType::kInt64: CopyField<int64_t>(p.int64_data(), t); break;
    case DType::kInt32: CopyField<int32_t>(p.int32_data(), t); break;
    case DType::kBool: {
      bool* dst = t.mutable_data<bool>();
      for (int64_t i = 0; i < *n; ++i) dst[i] = p.int32_data(static_cast<int>(i)) != 0;
      break;
    }
  }
  return t;
}

namespace {

// IEEE half -> float, exactly (subnormals, infinities and NaN included).
float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000 | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do {
      man <<= 1;
      ++e;
    } while ((man & 0x400) == 0);
    bits = sign | ((112 - e) << 23) | ((man & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

struct NarrowType {
  int32_t onnx;
  int bytes;       // stored width
  DType widened;
};

constexpr NarrowType kNarrow[] = {
    {TensorProto::FLOAT16, 2, DType::kFloat32}, {TensorProto::BFLOAT16, 2, DType::kFloat32},
    {TensorProto::INT8, 1, DType::kInt32},      {TensorProto::UINT8, 1, DType::kInt32},
    {TensorProto::INT16, 2, DType::kInt32},     {TensorProto::UINT16, 2, DType::kInt32},
    {TensorProto::UINT32, 4, DType::kInt64},    {TensorProto::UINT64, 8, DType::kInt64},
};

// Stored element i (its bits, zero-extended) from raw_data or the typed field
// (int32_data for the narrow types, uint64_data for UINT32/UINT64).
uint64_t StoredBits(const TensorProto& p, const NarrowType& t, int64_t i) {
  if (p.has_raw_data()) {
    uint64_t v = 0;
    std::memcpy(&v, p.raw_data().data() + i * t.bytes, t.bytes);
    return v;
  }
  if (t.bytes >= 4) return p.uint64_data(static_cast<int>(i));
  return static_cast<uint32_t>(p.int32_data(static_cast<int>(i))) & ((1u << (8 * t.bytes)) - 1);
}

absl::StatusOr<Tensor> WidenNarrow(const TensorProto& p, const NarrowType& t, const LoadLimits& limits) {
  std::string where = absl::StrCat("tensor '", p.name(), "'");
  if (p.dims_size() > kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": rank ", p.dims_size(), " exceeds ", kMaxRank));
  }
  Shape shape(p.dims().begin(), p.dims().end());
  absl::StatusOr<int64_t> n = CheckedNumElements(shape);
  if (!n.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": bad dims: ", n.status().message()));
  if (*n * static_cast<int64_t>(DTypeSize(t.widened)) > limits.max_tensor_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(where, ": too large"));
  }
  int64_t have = p.has_raw_data() ? static_cast<int64_t>(p.raw_data().size()) / t.bytes
                 : t.bytes >= 4   ? p.uint64_data_size()
                                  : p.int32_data_size();
  if ((p.has_raw_data() && static_cast<int64_t>(p.raw_data().size()) != *n * t.bytes) || have != *n) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": holds ", have, " values, dims ",
                                                   ShapeToString(shape), " need ", *n));
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(t.widened, shape));
  for (int64_t i = 0; i < *n; ++i) {
    uint64_t b = StoredBits(p, t, i);
    switch (t.onnx) {
      case TensorProto::FLOAT16: out.mutable_data<float>()[i] = HalfToFloat(static_cast<uint16_t>(b)); break;
      case TensorProto::BFLOAT16: {
        uint32_t bits = static_cast<uint32_t>(b) << 16;
        std::memcpy(out.mutable_data<float>() + i, &bits, sizeof(float));
        break;
      }
      case TensorProto::INT8: out.mutable_data<int32_t>()[i] = static_cast<int8_t>(b); break;
      case TensorProto::INT16: out.mutable_data<int32_t>()[i] = static_cast<int16_t>(b); break;
      case TensorProto::UINT8:
      case TensorProto::UINT16: out.mutable_data<int32_t>()[i] = static_cast<int32_t>(b); break;
      default:
        if (b > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return absl::OutOfRangeError(absl::StrCat(where, ": value ", b, " does not fit i64"));
        }
        out.mutable_data<int64_t>()[i] = static_cast<int64_t>(b);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<Tensor> ConstantFromOnnx(const TensorProto& p, const LoadLimits& limits) {
  for (const NarrowType& t : kNarrow) {
    if (p.data_type() == t.onnx && !(p.has_data_location() && p.data_location() == TensorProto::EXTERNAL)) {
      return WidenNarrow(p, t, limits);
    }
  }
  return TensorFromOnnx(p, limits);
}

void TensorToOnnx(const Tensor& t, const std::string& name, TensorProto* out) {
  out->set_name(name);
  out->set_data_type(DTypeToOnnx(t.dtype()));
  for (int64_t d : t.shape()) out->add_dims(d);
  out->set_raw_data(std::string(static_cast<const char*>(t.raw_data()), t.nbytes()));
}

absl::StatusOr<AbstractPtr> TypeFromOnnx(const onnx::TypeProto& t) {
  if (!t.has_tensor_type()) return absl::UnimplementedError("only tensor types are supported");
  const onnx::TypeProto::Tensor& tt = t.tensor_type();
  KGRAD_ASSIGN_OR_RETURN(DType dtype, DTypeFromOnnx(tt.elem_type()));
  if (!tt.has_shape()) return absl::UnimplementedError("tensors of unknown rank are not supported");
  if (tt.shape().dim_size() > kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", tt.shape().dim_size(), " exceeds ", kMaxRank));
  }
  Shape shape;
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value()) {
      if (d.dim_value() < 0) return absl::InvalidArgumentError(absl::StrCat("negative dim ", d.dim_value()));
      shape.push_back(d.dim_value());
    } else {
      shape.push_back(d.dim_param().empty() ? kUnknownDim : DimSymbol(d.dim_param()));
    }
  }
  absl::StatusOr<int64_t> n = CheckedNumElements(shape);
  if (IsFullyKnown(shape) && !n.ok()) return n.status();
  return MakeAbstractTensor(dtype, std::move(shape));
}

void TypeToOnnx(const AbstractTensor& t, onnx::TypeProto* out) {
  onnx::TypeProto::Tensor* tt = out->mutable_tensor_type();
  tt->set_elem_type(DTypeToOnnx(t.dtype()));
  onnx::TensorShapeProto* s = tt->mutable_shape();
  for (int64_t d : t.shape()) {
    if (d == kUnknownDim) {
      s->add_dim();  // neither a value nor a name: unknown
    } else if (IsSymbolDim(d)) {
      s->add_dim()->set_dim_param(DimToString(d));
    } else {
      s->add_dim()->set_dim_value(d);
    }
  }
}

}  // namespace kgrad
