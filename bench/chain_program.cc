#include "bench/chain_program.h"

#include "core/builder.h"

namespace kgrad {
namespace bench {

FuncGraph* BuildChain(Module* m, int n, int64_t width) {
  GraphBuilder b(m, "chain");
  AnfNode* x = b.Param("x", DType::kFloat32, {width});
  AnfNode* y = x;
  AnfNode* side = x;
  for (int i = 0; i < n; ++i) {
    switch (i % 4) {
      case 0: y = b.Op(PrimId::kTanh, {y}); break;
      case 1: y = b.Op(PrimId::kMul, {y, side}); break;
      case 2: y = b.Op(PrimId::kAdd, {y, x}); break;
      default: side = y; y = b.Op(PrimId::kSin, {y}); break;
    }
  }
  return b.Return(b.Op(PrimId::kReduceSum, {y})).value();
}

}  // namespace bench
}  // namespace kgrad
