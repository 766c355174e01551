// CPU kernel of `tc{def}(inputs...)`: a tensor comprehension block
// (ops/tc_block.h), parsed and checked against the inputs by inference's
// ParseTcCall (ops/tc_ops.h), then run statement by statement:
// contractions as GEMMs (tc_contraction.h), everything else by the chunked
// interpreter (tc_interpreter.h). The result is the block's one output, or a
// tuple of its outputs in declaration order. On CUDA it runs through the CPU
// fallback.
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/tc_contraction.h"
#include "backends/cpu/tc_interpreter.h"
#include "backends/view_kernels.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "ops/op_util.h"
#include "ops/tc_analysis.h"
#include "ops/tc_block.h"
#include "ops/tc_ops.h"

namespace kgrad {
namespace cpu {
namespace {

template <typename T>
absl::Status RunBlock(const KernelContext& ctx, const tc::Block& b, const tc::Analysis& a,
                      const std::vector<Tensor>& tensors) {
  std::vector<TcTensor<T>> table;
  std::vector<Shape> strides;
  for (const Tensor& t : tensors) {
    strides.push_back(RowMajorStrides(t.shape()));
    table.push_back(TcTensor<T>{t.mutable_data<T>(), strides.back(), t.NumElements()});
  }
  for (size_t i = 0; i < b.statements.size(); ++i) {
    const TcStatement s = MakeTcStatement(b, a, static_cast<int>(i));
    if (std::optional<TcContractionPlan> plan = PlanTcContraction(s, strides)) {
      KGRAD_RETURN_IF_ERROR(RunTcContraction<T>(ctx, s, *plan, table));
    } else {
      RunTcStatement<T>(s, table);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> Tc(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<ops::TensorType> in, InputTypes<ops::TensorType>(ctx));
  KGRAD_ASSIGN_OR_RETURN(ops::TcCall call, ops::ParseTcCall(ctx.prim(), in));
  const tc::Block& b = call.block;
  const tc::Analysis& a = call.analysis;
  std::vector<Tensor> tensors;
  for (int i = 0; i < b.num_inputs; ++i) tensors.push_back(ctx.input(i).tensor());
  for (size_t t = b.num_inputs; t < b.tensors.size(); ++t) {
    KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(a.dtype, a.shapes[t]));
    tensors.push_back(std::move(out));
  }
  KGRAD_RETURN_IF_ERROR(a.dtype == DType::kFloat32 ? RunBlock<float>(ctx, b, a, tensors)
                                                   : RunBlock<double>(ctx, b, a, tensors));
  if (b.num_outputs() == 1) return Value(tensors.back());
  std::vector<Value> outputs;
  for (size_t t = b.num_inputs; t < tensors.size(); ++t) outputs.push_back(Value(tensors[t]));
  return Value::Tuple(std::move(outputs));
}

}  // namespace

void RegisterTcKernels(KernelTable* table) { table->Set(PrimId::kTc, Tc); }

}  // namespace cpu
}  // namespace kgrad
