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

// The number of values the typed field for `t` holds: ONNX keeps the 8- and 16-bit
// types (float16 and bfloat16 as their bits) in int32_data, UINT32 and UINT64 in
// uint64_data.
int64_t TypedFieldSize(const TensorProto& p, DType t) {
  switch (t) {
    case DType::kFloat32: return p.float_data_size();
    case DType::kFloat64: return p.double_data_size();
    case DType::kInt64: return p.int64_data_size();
    case DType::kUInt32:
    case DType::kUInt64: return p.uint64_data_size();
    default: return p.int32_data_size();
  }
}

// int32_data element i as the bits of a 16-bit float.
template <typename H>
void CopyHalfBits(const TensorProto& p, Tensor& t) {
  H* dst = t.mutable_data<H>();
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    dst[i] = H::FromBits(static_cast<uint16_t>(p.int32_data(static_cast<int>(i))));
  }
}

// Copies the typed field of `p` into `t` (sizes already checked).
void CopyTypedField(const TensorProto& p, Tensor& t) {
  switch (t.dtype()) {
    case DType::kFloat32: CopyField<float>(p.float_data(), t); break;
    case DType::kFloat64: CopyField<double>(p.double_data(), t); break;
    case DType::kInt64: CopyField<int64_t>(p.int64_data(), t); break;
    case DType::kInt32: CopyField<int32_t>(p.int32_data(), t); break;
    case DType::kUInt8: CopyField<uint8_t>(p.int32_data(), t); break;
    case DType::kInt8: CopyField<int8_t>(p.int32_data(), t); break;
    case DType::kInt16: CopyField<int16_t>(p.int32_data(), t); break;
    case DType::kUInt16: CopyField<uint16_t>(p.int32_data(), t); break;
    case DType::kUInt32: CopyField<uint32_t>(p.uint64_data(), t); break;
    case DType::kUInt64: CopyField<uint64_t>(p.uint64_data(), t); break;
    case DType::kFloat16: CopyHalfBits<Float16>(p, t); break;
    case DType::kBFloat16: CopyHalfBits<BFloat16>(p, t); break;
    case DType::kBool: {
      bool* dst = t.mutable_data<bool>();
      for (int64_t i = 0; i < t.NumElements(); ++i) dst[i] = p.int32_data(static_cast<int>(i)) != 0;
      break;
    }
  }
}

}  // namespace

absl::StatusOr<DType> DTypeFromOnnx(int32_t elem_type) {
  switch (elem_type) {
    case TensorProto::FLOAT: return DType::kFloat32;
    case TensorProto::DOUBLE: return DType::kFloat64;
    case TensorProto::INT32: return DType::kInt32;
    case TensorProto::INT64: return DType::kInt64;
    case TensorProto::BOOL: return DType::kBool;
    case TensorProto::UINT8: return DType::kUInt8;
    case TensorProto::INT8: return DType::kInt8;
    case TensorProto::INT16: return DType::kInt16;
    case TensorProto::UINT16: return DType::kUInt16;
    case TensorProto::UINT32: return DType::kUInt32;
    case TensorProto::UINT64: return DType::kUInt64;
    case TensorProto::FLOAT16: return DType::kFloat16;
    case TensorProto::BFLOAT16: return DType::kBFloat16;
    default: break;
  }
  std::string name = TensorProto::DataType_IsValid(elem_type)
                         ? TensorProto::DataType_Name(static_cast<TensorProto::DataType>(elem_type))
                         : absl::StrCat("unknown (", elem_type, ")");
  return absl::UnimplementedError(
      absl::StrCat("element type ", name, " is not supported (the numeric types and BOOL are; STRING, COMPLEX64 and COMPLEX128 are not)"));
}

int32_t DTypeToOnnx(DType t) {
  switch (t) {
    case DType::kFloat32: return TensorProto::FLOAT;
    case DType::kFloat64: return TensorProto::DOUBLE;
    case DType::kInt32: return TensorProto::INT32;
    case DType::kInt64: return TensorProto::INT64;
    case DType::kBool: return TensorProto::BOOL;
    case DType::kUInt8: return TensorProto::UINT8;
    case DType::kInt8: return TensorProto::INT8;
    case DType::kInt16: return TensorProto::INT16;
    case DType::kUInt16: return TensorProto::UINT16;
    case DType::kUInt32: return TensorProto::UINT32;
    case DType::kUInt64: return TensorProto::UINT64;
    case DType::kFloat16: return TensorProto::FLOAT16;
    case DType::kBFloat16: return TensorProto::BFLOAT16;
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
  CopyTypedField(p, t);
  return t;
}

void TensorToOnnx(const Tensor& t, const std::string& name, TensorProto* out) {
  out->set_name(name);
  out->set_data_type(DTypeToOnnx(t.dtype()));
  for (int64_t d : t.shape()) out->add_dims(d);
  out->set_raw_data(std::string(static_cast<const char*>(t.raw_data()), t.nbytes()));
}

absl::StatusOr<AbstractPtr> TypeFromOnnx(const onnx::TypeProto& t, int depth) {
  if (t.has_sequence_type() || t.has_optional_type()) {
    // A list (an optional is one of at most one element) of the element type.
    if (depth >= kMaxOnnxTypeDepth) {
      return absl::InvalidArgumentError(absl::StrCat("a type nests deeper than ", kMaxOnnxTypeDepth));
    }
    const onnx::TypeProto& e = t.has_sequence_type() ? t.sequence_type().elem_type() : t.optional_type().elem_type();
    absl::StatusOr<AbstractPtr> element = TypeFromOnnx(e, depth + 1);
    if (!element.ok() && depth == 0) {  // named once, at the outermost list
      return absl::Status(element.status().code(), absl::StrCat(t.has_sequence_type() ? "sequence" : "optional",
                                                                " element: ", element.status().message()));
    }
    KGRAD_RETURN_IF_ERROR(element.status());
    return MakeAbstractList(*std::move(element));
  }
  if (!t.has_tensor_type()) return absl::UnimplementedError("only tensor, sequence and optional types are supported");
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
