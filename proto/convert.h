// Conversions between the IR's values/types and their protobuf messages, with
// the validation a hostile file needs (every size checked before use).
#ifndef KGRAD_PROTO_CONVERT_H_
#define KGRAD_PROTO_CONVERT_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "core/abstract.h"
#include "core/primitive.h"
#include "core/value.h"
#include "proto/graph.pb.h"

namespace kgrad {

// Bounds on what a graph file may ask for; an embedding service loading untrusted
// files tightens them. Exceeding one fails the load with ResourceExhausted naming
// the limit and its value ("LoadLimits::max_nodes = 1000").
struct LoadLimits {
  int64_t max_file_bytes = int64_t{2} << 30;
  int64_t max_tensor_bytes = int64_t{4} << 30;        // one weight or constant tensor
  int64_t max_total_tensor_bytes = int64_t{8} << 30;  // all weights and constants together
  int64_t max_nodes = 10'000'000;                     // parameters and nodes of all graphs
  int64_t max_graphs = 1'000'000;
  int max_nesting_depth = 256;  // graphs nested in graphs
  int max_value_depth = 64;     // constant tuples within tuples, and type tuples
  // Message nesting the protobuf parsers accept (a deeper file would recurse in the
  // parser before any of our checks run).
  int max_message_depth = 100;
};

proto::DataType DTypeToProto(DType t);
absl::StatusOr<DType> DTypeFromProto(int t);

void TensorToProto(const Tensor& t, proto::TensorProto* out);
absl::StatusOr<Tensor> TensorFromProto(const proto::TensorProto& p, const LoadLimits& limits);

void AttrToProto(const AttrValue& v, proto::AttrProto* out);
absl::StatusOr<AttrValue> AttrFromProto(const proto::AttrProto& p);

// Constants only (no closures, partials or non-empty envs): error otherwise.
absl::Status ValueToProto(const Value& v, proto::ValueProto* out);
using GraphResolver = std::function<absl::StatusOr<FuncGraph*>(const std::string&)>;
absl::StatusOr<Value> ValueFromProto(const proto::ValueProto& p, const PrimitiveRegistry& registry,
                                     const GraphResolver& graphs, const LoadLimits& limits,
                                     int depth = 0);

// Declared parameter types: tensors, scalars and tuples of them.
absl::Status TypeToProto(const AbstractPtr& a, proto::TypeProto* out);
absl::StatusOr<AbstractPtr> TypeFromProto(const proto::TypeProto& p, int depth = 0);

}  // namespace kgrad

#endif  // KGRAD_PROTO_CONVERT_H_
