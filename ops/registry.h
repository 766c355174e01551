// The default primitive registry: every op family, built once on first use and
// immutable afterwards (safe to read from many threads).
#ifndef KGRAD_OPS_REGISTRY_H_
#define KGRAD_OPS_REGISTRY_H_

#include "core/primitive.h"

namespace kgrad {

const PrimitiveRegistry& DefaultRegistry();

}  // namespace kgrad

#endif  // KGRAD_OPS_REGISTRY_H_
