#include "backends/cpu/constant_evaluator.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/cpu_device.h"

namespace kgrad {

const CpuConstantEvaluator& CpuConstantEvaluator::Get() {
  static const CpuConstantEvaluator* const instance = new CpuConstantEvaluator;
  return *instance;
}

absl::StatusOr<Value> CpuConstantEvaluator::Evaluate(const Primitive& prim,
                                                     std::vector<Value> inputs) const {
  KernelFn fn = CpuKernels().Get(prim.id());
  if (fn == nullptr) return absl::UnimplementedError(absl::StrCat("no cpu kernel for ", prim.name()));
  KernelContext ctx(prim, absl::MakeSpan(inputs), CpuDevice());
  return fn(ctx);
}

}  // namespace kgrad
