#include "tests/conformance/onnx_sequence_data.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "onnx_proto/onnx.pb.h"
#include "proto/convert.h"
#include "proto/onnx/onnx_tensor.h"

namespace kgrad {
namespace conformance {
namespace {

using ::google::protobuf::internal::WireFormatLite;

constexpr int kMaxListDepth = 8;
// The fields both messages give their values in (repeated in a sequence, at most
// one in an optional).
constexpr int kTensorField = 3;
constexpr int kSparseField = 4;
constexpr int kSequenceField = 5;
constexpr int kMapField = 6;
constexpr int kOptionalField = 7;

absl::StatusOr<Value> ListAt(const std::string& bytes, int depth);

// One value field's payload as a kgrad value.
absl::StatusOr<Value> Element(int field, const std::string& payload, int depth) {
  if (field == kTensorField) {
    onnx::TensorProto t;
    if (!t.ParseFromString(payload)) return absl::InvalidArgumentError("a tensor element does not parse");
    KGRAD_ASSIGN_OR_RETURN(Tensor v, TensorFromOnnx(t, LoadLimits{}));
    return Value(std::move(v));
  }
  return ListAt(payload, depth + 1);  // a sequence or an optional
}

absl::StatusOr<Value> ListAt(const std::string& bytes, int depth) {
  if (depth > kMaxListDepth) return absl::InvalidArgumentError(absl::StrCat("lists nest deeper than ", kMaxListDepth));
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  std::vector<Value> elems;
  while (uint32_t tag = in.ReadTag()) {
    const int field = static_cast<int>(WireFormatLite::GetTagFieldNumber(tag));
    const bool payload = WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    if (payload && (field == kSparseField || field == kMapField)) {
      return absl::UnimplementedError("sparse tensors and maps have no kgrad value");
    }
    if (!payload || (field != kTensorField && field != kSequenceField && field != kOptionalField)) {
      if (!WireFormatLite::SkipField(&in, tag)) return absl::InvalidArgumentError("a field does not parse");
      continue;
    }
    std::string value;
    if (!WireFormatLite::ReadBytes(&in, &value)) return absl::InvalidArgumentError("a value does not parse");
    KGRAD_ASSIGN_OR_RETURN(Value v, Element(field, value, depth));
    elems.push_back(std::move(v));
  }
  if (!in.ConsumedEntireMessage()) return absl::InvalidArgumentError("the message does not parse");
  return Value::List(std::move(elems));
}

}  // namespace

absl::StatusOr<Value> ListFromOnnxData(const std::string& bytes) { return ListAt(bytes, 0); }

}  // namespace conformance
}  // namespace kgrad
