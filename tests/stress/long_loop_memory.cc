// Memory of reverse mode through a long while loop (a measurement, not a test):
//   long_loop_memory N [K]
// differentiates sum(h_N), h <- h * a + b over N iterations (N an input, so the
// loop is not unrolled), x of K doubles, and prints the gradient's first element,
// the call depth needed (the backward pass nests calls per iteration) and the
// allocator's peak. Run under /usr/bin/time -v for the process's peak RSS:
//   for n in 25000 50000 100000 200000; do /usr/bin/time -v long_loop_memory $n; done
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "ad/grad_operation.h"
#include "backends/cpu/constant_evaluator.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "core/passes/optimize.h"
#include "ops/registry.h"

namespace kgrad {
namespace {

int Main(int argc, char** argv) {
  int64_t n = argc > 1 ? std::atoll(argv[1]) : 100000;
  int64_t k = argc > 2 ? std::atoll(argv[2]) : 3;
  const double a = 1.0 - 1e-5;
  Module m(DefaultRegistry());
  GraphBuilder b(&m, "loop");
  AnfNode* x = b.Param("x", DType::kFloat64, {k});
  AnfNode* iters = b.Param("n", MakeAbstractScalar(DType::kInt64));
  AnfNode* ca = b.Const(Value(Tensor::FromScalar<double>(a)));
  AnfNode* cb = b.Const(Value(Tensor::FromScalar<double>(0.001)));
  std::vector<AnfNode*> out = b.While(
      {b.Int(0), x},
      [&](GraphBuilder& g, absl::Span<AnfNode* const> s) { return g.Op(PrimId::kScalarLt, {s[0], iters}); },
      [&](GraphBuilder& g, absl::Span<AnfNode* const> s) {
        return std::vector<AnfNode*>{g.Op(PrimId::kScalarAdd, {s[0], g.Int(1)}),
                                     g.Op(PrimId::kAdd, {g.Op(PrimId::kMul, {s[1], ca}), cb})};
      });
  FuncGraph* f = b.Return(b.Op(PrimId::kReduceSum, {out[1]})).value();
  absl::StatusOr<FuncGraph*> grad = GradOperation()(m, f);
  if (!grad.ok()) return std::fprintf(stderr, "%s\n", grad.status().ToString().c_str()), 1;
  CpuConstantEvaluator evaluator;
  OptimizeOptions oo;
  oo.evaluator = &evaluator;
  if (!Optimize(m, *grad, oo).ok()) return 1;
  Value xv(Tensor::Full(DType::kFloat64, {k}, 0.5).value());
  // The smallest depth limit (in calls per iteration) that the backward pass fits.
  for (int per = 1; per <= 8; ++per) {
    ExecutorOptions o;
    o.max_call_depth = static_cast<int>(per * n + 16);
    auto e = Executor::Create(*grad, o);
    if (!e.ok()) return 1;
    ResetCpuAllocatorPeak();
    absl::StatusOr<Value> r = (*e)->Run({xv, Value(Scalar::Int(n))});
    if (r.ok()) {
      std::printf("n=%lld k=%lld dx[0]=%.12g (want %.12g) call depth <= %d per iteration, allocator peak %.1f MB\n",
                  static_cast<long long>(n), static_cast<long long>(k), r->tensor().ElementAsDouble(0),
                  std::pow(a, static_cast<double>(n)), per, CpuAllocatorStats().peak_bytes_in_use / 1e6);
      return 0;
    }
    if (r.status().code() != absl::StatusCode::kResourceExhausted) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      return 1;
    }
  }
  return 1;
}

}  // namespace
}  // namespace kgrad

int main(int argc, char** argv) { return kgrad::Main(argc, argv); }
