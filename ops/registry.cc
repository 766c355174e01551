#include "ops/registry.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ops/collective.h"
#include "ops/conv.h"
#include "ops/differentiation.h"
#include "ops/dynamic_axes_ops.h"
#include "ops/dynamic_index_ops.h"
#include "ops/dynamic_shape_ops.h"
#include "ops/elementwise.h"
#include "ops/index_ops.h"
#include "ops/linalg.h"
#include "ops/list_ops.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/selection_ops.h"
#include "ops/shape_ops.h"
#include "ops/structural.h"
#include "ops/tc_ops.h"

namespace kgrad {

const PrimitiveRegistry& DefaultRegistry() {
  // Built once (thread-safe static initialisation), never modified afterwards.
  static const PrimitiveRegistry* const registry = [] {
    std::vector<PrimitiveDef> defs;
    ops::RegisterStructuralOps(&defs);
    ops::RegisterListOps(&defs);
    ops::RegisterElementwiseOps(&defs);
    ops::RegisterReduceOps(&defs);
    ops::RegisterShapeOps(&defs);
    ops::RegisterIndexOps(&defs);
    ops::RegisterDynamicShapeOps(&defs);
    ops::RegisterDynamicIndexOps(&defs);
    ops::RegisterDynamicAxesOps(&defs);
    ops::RegisterSelectionOps(&defs);
    ops::RegisterLinalgOps(&defs);
    ops::RegisterTcOps(&defs);
    ops::RegisterNnOps(&defs);
    ops::RegisterConvOps(&defs);
    ops::RegisterDifferentiationOps(&defs);
    ops::RegisterCollectiveOps(&defs);
    auto r = PrimitiveRegistry::Create(std::move(defs));
    if (!r.ok()) {
      // A broken op table is a build defect, not user input.
      std::fprintf(stderr, "kgrad: bad primitive registry: %s\n",
                   std::string(r.status().message()).c_str());
      std::abort();
    }
    return r->release();
  }();
  return *registry;
}

}  // namespace kgrad
