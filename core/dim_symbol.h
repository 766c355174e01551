// Dim symbols: named sizes in abstract shapes.
#ifndef KGRAD_CORE_DIM_SYMBOL_H_
#define KGRAD_CORE_DIM_SYMBOL_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kgrad {

// A dim inference knows nothing about.
inline constexpr int64_t kUnknownDim = -1;

// Dim symbols: a named size (ONNX's dim_param, e.g. "batch") that every dim
// carrying the same name shares. The name is encoded in the int64 itself, in
// [kSymbolBase, kSymbolBase / 2), so shapes stay plain vectors, equal names give
// equal dims in every module, and no table is needed to print them. Names of up
// to 10 characters from [A-Za-z0-9_] are stored exactly; longer or other names
// keep their first 4 such characters plus a 36-bit hash and print as
// "name~hash" (which parses back to the same symbol). A symbol is negative, so
// every `d < 0` test treats it as not statically known.
inline constexpr int64_t kSymbolBase = -(int64_t{1} << 62);
// In shape *values* (AbstractTensor::value), where -1 is an ordinary number (a
// reshape target's "infer this dim"), an element nothing is known about.
inline constexpr int64_t kUnknownValue = kSymbolBase;

bool IsSymbolDim(int64_t d);
// d >= 0: a number of elements.
inline bool IsKnownDim(int64_t d) { return d >= 0; }
// The symbol for `name` (non-empty; "?" and all-digit names are not symbols).
int64_t DimSymbol(absl::string_view name);
// "batch" for a symbol, "?" for kUnknownDim or kUnknownValue, the number otherwise.
std::string DimToString(int64_t d);
// Two dims that must be equal: the more precise one (a number over a symbol over
// ?); nullopt when both are numbers and differ.
std::optional<int64_t> UnifyDims(int64_t a, int64_t b);
// Elements of shape values (AbstractTensor::value, and the shape operands that
// kernels read): a number, a dim symbol, or kUnknownValue. -1 is a number there.
inline bool IsValueNumber(int64_t v) { return v != kUnknownValue && !IsSymbolDim(v); }
// An element as a dim: numbers and symbols as they are, kUnknownValue as ?.
inline int64_t ValueAsDim(int64_t v) { return v == kUnknownValue ? kUnknownDim : v; }
std::string ValueElementToString(int64_t v);           // "-1", "batch", "?"
std::string ValueToString(const int64_t* v, size_t n);  // "[2,-1,batch,?]"

// Inverse of DimToString for dims: "3", "?" (kUnknownDim) or a symbol name.
absl::StatusOr<int64_t> ParseDim(absl::string_view text);

}  // namespace kgrad

#endif  // KGRAD_CORE_DIM_SYMBOL_H_
