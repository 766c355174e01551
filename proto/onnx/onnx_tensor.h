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

// A TensorProto's value (raw_data or the typed repeated fields), in its own
// element type: the narrow types (float16, bfloat16, 8/16-bit and unsigned
// integers) are kgrad storage dtypes, not widened, so that ONNX's typing holds.
absl::StatusOr<Tensor> TensorFromOnnx(const onnx::TensorProto& p, const LoadLimits& limits);
// raw_data, little-endian (the host order on every supported machine).
void TensorToOnnx(const Tensor& t, const std::string& name, onnx::TensorProto* out);

// Lists nest at most this deep in an ONNX type (sequences of optionals of ...).
inline constexpr int kMaxOnnxTypeDepth = 16;
// A value_info's type: a tensor's (a dim_param becomes the dim symbol of that
// name, a dim with neither value nor name kUnknownDim), or a list of the element
// type for a sequence or an optional (onnx_sequence_ops.cc).
absl::StatusOr<AbstractPtr> TypeFromOnnx(const onnx::TypeProto& t, int depth = 0);
void TypeToOnnx(const AbstractTensor& t, onnx::TypeProto* out);

}  // namespace kgrad

#endif  // KGRAD_PROTO_ONNX_ONNX_TENSOR_H_
