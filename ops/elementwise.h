// Elementwise primitives: definitions (attributes, inference, bprop rules), and
// the checks and output shapes that inference and the CPU and CUDA kernels share.
#ifndef KGRAD_OPS_ELEMENTWISE_H_
#define KGRAD_OPS_ELEMENTWISE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/dtype.h"
#include "core/primitive.h"
#include "core/shape.h"
#include "ops/op_util.h"

namespace kgrad {
namespace ops {

void RegisterElementwiseOps(std::vector<PrimitiveDef>* defs);

// The dtypes elementwise primitive `id` accepts: its input's for a unary map,
// the one dtype of both inputs for a binary map, that of a and b for
// select(cond, a, b) (cond is bool). No promotion: outputs keep the input dtype,
// except the bool of comparisons and logical ops (ElementwiseBoolOutput).
// constexpr, so that a kernel instantiates its loops for these dtypes only.
constexpr DTypeSet ElementwiseDTypes(PrimId id) {
  switch (id) {
    case PrimId::kNeg:
    case PrimId::kAbs:
    case PrimId::kSign:
    case PrimId::kSquare:
      return kNumericTypes | kNarrowIntegerTypes;
    // Binary arithmetic and comparisons also take the 16-bit floats (computed in
    // float, rounded once): ONNX's Add, Max, Mod, Less, ... take every numeric type.
    case PrimId::kAdd:
    case PrimId::kSub:
    case PrimId::kMul:
    case PrimId::kDiv:
    case PrimId::kMaximum:
    case PrimId::kMinimum:
    case PrimId::kMod:
    case PrimId::kLess:
    case PrimId::kLessEqual:
    case PrimId::kGreater:
    case PrimId::kGreaterEqual:
      return kWideNumericTypes;
    case PrimId::kEqual:
    case PrimId::kNotEqual:
    case PrimId::kSelect:
      return kEveryType;
    case PrimId::kBitShift:  // ONNX's BitShift: unsigned integers only
      return kUnsignedTypes;
    case PrimId::kLogicalNot:
    case PrimId::kLogicalAnd:
    case PrimId::kLogicalOr:
      return kBoolType;
    case PrimId::kExp:
    case PrimId::kLog:
    case PrimId::kLog1p:
    case PrimId::kExpm1:
    case PrimId::kSin:
    case PrimId::kCos:
    case PrimId::kTanh:
    case PrimId::kSigmoid:
    case PrimId::kRelu:
    case PrimId::kGelu:
    case PrimId::kSoftplus:
    case PrimId::kSqrt:
    case PrimId::kRsqrt:
    case PrimId::kReciprocal:
    case PrimId::kErf:
    case PrimId::kPow:
    case PrimId::kFloor:
    case PrimId::kCeil:
    case PrimId::kRound:
    case PrimId::kAsin:
    case PrimId::kAcos:
    case PrimId::kAtan:
    case PrimId::kSinh:
    case PrimId::kCosh:
    case PrimId::kAsinh:
    case PrimId::kAcosh:
    case PrimId::kAtanh:
    case PrimId::kTanhGrad:
    case PrimId::kSigmoidGrad:
    case PrimId::kSinGrad:
    case PrimId::kCosGrad:
    case PrimId::kReluGrad:
      return kFloatTypes;
    default:  // not an elementwise primitive
      return 0;
  }
}

// Comparisons and logical ops give bool.
constexpr bool ElementwiseBoolOutput(PrimId id) {
  switch (id) {
    case PrimId::kEqual:
    case PrimId::kNotEqual:
    case PrimId::kLess:
    case PrimId::kLessEqual:
    case PrimId::kGreater:
    case PrimId::kGreaterEqual:
    case PrimId::kLogicalNot:
    case PrimId::kLogicalAnd:
    case PrimId::kLogicalOr:
      return true;
    default:
      return false;
  }
}

// A unary map `id` on x: x's dtype must be one `id` accepts. The output has x's
// type (bool for logical_not, whose input is bool).
absl::Status CheckUnary(PrimId id, TensorType x);

// A binary map `id` on (x, y): one dtype, accepted by `id`; the output shape
// (NumPy broadcasting). The output dtype is x's, or bool (ElementwiseBoolOutput).
absl::StatusOr<Shape> BinaryShape(PrimId id, TensorType x, TensorType y, CheckedBy by);

// select(cond, a, b): cond bool, a and b one dtype; the shape all three
// broadcast to. The output dtype is a's.
absl::StatusOr<Shape> SelectShape(TensorType cond, TensorType a, TensorType b, CheckedBy by);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_ELEMENTWISE_H_
