// ONNX tensors and types <-> kgrad tensors and dtypes, with the checks a hostile
// file needs (element counts bounded, byte counts matching dims).
#ifndef KGRAD_PROTO_ONNX_ONNX_TENSOR_H_
#define KGRAD_PROTO_ONNX_ONNX_TENSOR_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/abstract.h"
#include "core/tensor.h"
#include "onnx_proto/onnx.pb.h"
#include "proto/convert.h"

namespace kgrad {

// onnx::TensorProto::DataType -> DType; error naming the type for the others.
absl::StatusOr<DType> DTypeFromOnnx(int32_t elem_type);
int32_t DTypeToOnnx(DType t);

// A TensorProto's value (raw_data or the typed repeated fields).
absl::StatusOr<Tensor> TensorFromOnnx(const onnx::TensorProto& p, const LoadLimits& limits);
// The same for a model's constants (initializers, Constant and ConstantOfShape
// values): also accepts the storage types kgrad has no dtype for, widened exactly:
// FLOAT16 and BFLOAT16 to f32, INT8, UINT8, INT16 and UINT16 to i32, UINT32 and
// UINT64 (values up to 2^63 - 1) to i64. A model that only stores weights in them
// (and casts them, as mixed-precision exports do) then imports; values of those
// types at run time (graph inputs, Cast targets) stay refused.
absl::StatusOr<Tensor> ConstantFromOnnx(const onnx::TensorProto& p, const LoadLimits& limits);
// raw_data, little-endian (the host order on every supported machine).
void TensorToOnnx(const Tensor& t, const std::string& name, onnx::TensorProto* out);

// A value_info's tensor type; a dim_param becomes the dim symbol of that name,
// a dim with neither value nor name kUnknownDim.
absl::StatusOr<AbstractPtr> TypeFromOnnx(const onnx::TypeProto& t);
void TypeToOnnx(const AbstractTensor& t, onnx::TypeProto* out);

}  // namespace kgrad

#endif  // KGRAD_PROTO_ONNX_ONNX_TENSOR_H_
