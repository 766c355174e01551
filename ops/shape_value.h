// Shape values through the ops that compute shapes at run time (ONNX's
// Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains): what inference knows
// of an integer result's elements (core/abstract.h, AbstractTensor::value), from
// what it knows of the inputs'. Each function is called by its op's inference
// after the op's own checks passed, and returns the elements of the output (each a
// number, a dim symbol or kUnknownValue), or nullopt when nothing is known;
// WithShapeValue attaches them where an output may carry a value (an integer
// tensor of rank <= 1 with at most kMaxShapeValue elements).
//
// The arithmetic is the kernels': integers wrap (i32 at 32 bits), division
// truncates toward zero. On symbols only identities are kept (s * 1, s + 0,
// s - 0, s / 1, max(s, s), min(s, s)) and s * 0 = 0; anything else is unknown.
#ifndef KGRAD_OPS_SHAPE_VALUE_H_
#define KGRAD_OPS_SHAPE_VALUE_H_

#include <optional>

#include "core/abstract.h"
#include "core/primitive.h"
#include "core/shape.h"

namespace kgrad {
namespace ops {

// `out` (a tensor abstract) with `value` attached when admitted, else `out`.
AbstractPtr WithShapeValue(AbstractPtr out, const std::optional<Shape>& value);

// gather(params, indices){axis} of a rank-1 params with a value and indices with a
// known value (negative indices wrap).
std::optional<Shape> GatherValue(const InferCall& c);
// concat(x0, x1, ...){axis 0} of rank-1 inputs (an input without a value counts
// as unknown elements of its static length).
std::optional<Shape> ConcatValue(const InferCall& c);
// Input 0's elements unchanged (reshape, expand_dims, squeeze between rank 0 and
// rank 1; dynamic_reshape): the value of input 0 when the output has as many
// elements.
std::optional<Shape> SameElementsValue(const InferCall& c);
// slice of a rank-1 input with a value: `count` elements from `begin` by `stride`
// (as ParseSlice gives them).
std::optional<Shape> SliceValue(const InferCall& c, int64_t begin, int64_t stride, int64_t count);
// cast{dtype} between integer dtypes (to i32 numbers wrap).
std::optional<Shape> CastValue(const InferCall& c);
// add, sub, mul, div, maximum, minimum (broadcast) and neg of integer inputs with
// values; nullopt for other primitives.
std::optional<Shape> ArithValue(const InferCall& c);

}  // namespace ops
}  // namespace kgrad

#endif  // KGRAD_OPS_SHAPE_VALUE_H_
