// CPU kernel of `tc{def}(inputs...)`: a tensor comprehension block
// (ops/tc_block.h), parsed and checked against the inputs by inference's
// ParseTcCall (ops/tc_ops.h) and compiled once per signature (kept in the
// step's memo, backends/kernel_cache.h), then run statement by statement:
// contractions as GEMMs (tc_contraction.h), everything else by the chunked
// interpreter (tc_interpreter.h). The result is the block's one output, or a
// tuple of its outputs in declaration order. On CUDA it runs through the CPU
// fallback.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/tc_contraction.h"
#include "backends/cpu/tc_interpreter.h"
#include "backends/cpu/tc_program.h"
#include "backends/kernel_cache.h"
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

// A block compiled for one signature (the inputs' dtype and shapes): the parsed
// call, each statement as the interpreter or the contraction path runs it, and
// the interpreter's programs. Built in place and never moved: the statements
// point into `call`.
struct TcPlan {
  ops::TcCall call;
  std::vector<Shape> strides;  // every tensor's, by tensor id
  std::vector<TcStatement> statements;
  std::vector<std::optional<TcContractionPlan>> contractions;
  std::vector<TcProgram> programs;  // per statement; empty for a contraction
};

absl::StatusOr<std::shared_ptr<const TcPlan>> CompileTcPlan(
    const Primitive& prim, absl::Span<const ops::TensorType> in) {
  auto plan = std::make_shared<TcPlan>();
  KGRAD_ASSIGN_OR_RETURN(plan->call, ops::ParseTcCall(prim, in));
  const tc::Block& b = plan->call.block;
  const tc::Analysis& a = plan->call.analysis;
  for (size_t t = 0; t < b.tensors.size(); ++t) {
    plan->strides.push_back(RowMajorStrides(a.shapes[t]));
  }
  for (size_t i = 0; i < b.statements.size(); ++i) {
    plan->statements.push_back(MakeTcStatement(b, a, static_cast<int>(i)));
    const TcStatement& s = plan->statements.back();
    plan->contractions.push_back(PlanTcContraction(s, plan->strides));
    plan->programs.push_back(plan->contractions.back() ? TcProgram{}
                                                       : CompileTcStatement(s, plan->strides));
  }
  return std::shared_ptr<const TcPlan>(std::move(plan));
}

// The step's plan for these inputs: compiled once per signature and kept in the
// step's memo (backends/kernel_cache.h) where there is one.
absl::StatusOr<std::shared_ptr<const TcPlan>> PlanFor(const KernelContext& ctx,
                                                      absl::Span<const ops::TensorType> in) {
  KernelCache* cache = ctx.cache();
  std::string key;
  if (cache != nullptr) {
    key = "tc";
    for (const ops::TensorType& t : in) absl::StrAppend(&key, " ", t.ToString());
    if (std::shared_ptr<const TcPlan> hit = cache->FindPlanAs<TcPlan>(key)) return hit;
  }
  KGRAD_ASSIGN_OR_RETURN(std::shared_ptr<const TcPlan> plan, CompileTcPlan(ctx.prim(), in));
  if (cache != nullptr) cache->StorePlan(std::move(key), plan);
  return plan;
}

template <typename T>
absl::Status RunBlock(const KernelContext& ctx, const TcPlan& plan,
                      const std::vector<Tensor>& tensors) {
  std::vector<TcTensor<T>> table;
  for (size_t t = 0; t < tensors.size(); ++t) {
    table.push_back(TcTensor<T>{tensors[t].mutable_data<T>(), plan.strides[t],
                                tensors[t].NumElements()});
  }
  for (size_t i = 0; i < plan.statements.size(); ++i) {
    const TcStatement& s = plan.statements[i];
    if (plan.contractions[i]) {
      KGRAD_RETURN_IF_ERROR(RunTcContraction<T>(ctx, s, *plan.contractions[i], table));
    } else {
      RunTcProgram<T>(s, plan.programs[i], table);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> Tc(KernelContext& ctx) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<ops::TensorType> in, InputTypes<ops::TensorType>(ctx));
  KGRAD_ASSIGN_OR_RETURN(std::shared_ptr<const TcPlan> plan, PlanFor(ctx, in));
  const tc::Block& b = plan->call.block;
  const tc::Analysis& a = plan->call.analysis;
  std::vector<Tensor> tensors;
  for (int i = 0; i < b.num_inputs; ++i) tensors.push_back(ctx.input(i).tensor());
  for (size_t t = b.num_inputs; t < b.tensors.size(); ++t) {
    KGRAD_ASSIGN_OR_RETURN(Tensor out, ctx.Allocate(a.dtype, a.shapes[t]));
    tensors.push_back(std::move(out));
  }
  KGRAD_RETURN_IF_ERROR(a.dtype == DType::kFloat32 ? RunBlock<float>(ctx, *plan, tensors)
                                                   : RunBlock<double>(ctx, *plan, tensors));
  if (b.num_outputs() == 1) return Value(tensors.back());
  std::vector<Value> outputs;
  for (size_t t = b.num_inputs; t < tensors.size(); ++t) outputs.push_back(Value(tensors[t]));
  return Value::Tuple(std::move(outputs));
}

}  // namespace

void RegisterTcKernels(KernelTable* table) { table->Set(PrimId::kTc, Tc); }

}  // namespace cpu
}  // namespace kgrad
