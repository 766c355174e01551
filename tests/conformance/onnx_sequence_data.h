// ONNX's test data for sequences and optionals (onnx-data.proto's SequenceProto
// and OptionalProto) as kgrad lists: the importer types a sequence as a list of
// its element type and an optional as a list of at most one element
// (proto/onnx/onnx_sequence_ops.cc). Debian ships only onnx.proto's schema, so
// the two messages are read here field by field with protobuf's wire format:
// SequenceProto { 3: tensor_values, 5: sequence_values, 7: optional_values },
// OptionalProto { 3: tensor_value, 5: sequence_value, 7: optional_value }; the
// name, elem_type and the kinds kgrad has no value for (sparse tensors, maps)
// are skipped or refused.
#ifndef KGRAD_TESTS_CONFORMANCE_ONNX_SEQUENCE_DATA_H_
#define KGRAD_TESTS_CONFORMANCE_ONNX_SEQUENCE_DATA_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/value.h"

namespace kgrad {
namespace conformance {

// A serialized SequenceProto or OptionalProto (both are lists here) as a list of
// tensors, lists of tensors, ... at most 8 levels deep.
absl::StatusOr<Value> ListFromOnnxData(const std::string& bytes);

}  // namespace conformance
}  // namespace kgrad

#endif  // KGRAD_TESTS_CONFORMANCE_ONNX_SEQUENCE_DATA_H_
