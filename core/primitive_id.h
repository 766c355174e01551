// The primitive ids, without dependencies: the CUDA device code and the
// elementwise table (ops/elementwise_table.h) name primitives by PrimId too.
#ifndef KGRAD_CORE_PRIMITIVE_ID_H_
#define KGRAD_CORE_PRIMITIVE_ID_H_

#include <cstdint>

namespace kgrad {

enum class PrimId : uint16_t {
#define KGRAD_PRIM(id, name) id,
#include "core/primitive_ids.inc"
#undef KGRAD_PRIM
  kNumPrims
};
inline constexpr int kNumPrimIds = static_cast<int>(PrimId::kNumPrims);

}  // namespace kgrad

#endif  // KGRAD_CORE_PRIMITIVE_ID_H_
