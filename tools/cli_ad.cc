#include "tools/cli_ad.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ad/expand_differentiation.h"
#include "ad/grad_operation.h"
#include "ad/jvp.h"
#include "ad/remat.h"
#include "ad/split.h"
#include "backends/executor.h"
#include "core/passes/optimize.h"
#include "core/passes/outline_residual_blocks.h"
#include "core/printer.h"
#include "core/manager.h"
#include "core/status_macros.h"
#include "proto/model_io.h"
#include "tools/cli_common.h"
#include "tools/float64.h"
#include "tools/grad_check.h"
#include "tools/graph_counts.h"
#include "tools/precision_report.h"

namespace kgrad {
namespace cli {
namespace {

// --wrt all | weights | 0,2 (input positions).
absl::StatusOr<GradOptions> ParseWrt(const std::string& wrt, Module& m, FuncGraph* g) {
  GradOptions o;
  o.argnums.clear();
  if (wrt == "all") {
    // Every input that can have a gradient (declared integer and bool inputs cannot).
    for (size_t i = 0; i < g->parameters().size(); ++i) {
      const AbstractPtr& t = g->parameters()[i]->declared();
      bool integral = (AsTensor(t) != nullptr && !IsFloating(AsTensor(t)->dtype())) ||
                      (AsScalar(t) != nullptr && !IsFloating(AsScalar(t)->dtype()));
      if (!integral) o.argnums.push_back(static_cast<int>(i));
    }
    if (o.argnums.empty()) return absl::InvalidArgumentError("--wrt all: the graph has no floating-point input");
  } else if (wrt == "weights") {
    for (const auto& w : m.weights()) o.weights.push_back(w.get());
    if (o.weights.empty()) return absl::InvalidArgumentError("--wrt weights: the model has no weights");
  } else {
    for (absl::string_view part : absl::StrSplit(wrt, ',')) {
      int i;
      if (!absl::SimpleAtoi(part, &i)) {
        return absl::InvalidArgumentError(absl::StrCat("--wrt wants all, weights or input positions like 0,2; got '", wrt, "'"));
      }
      o.argnums.push_back(i);
    }
  }
  return o;
}


// --value and --has-aux, JAX's value_and_grad and has_aux: the graph written
// returns (value, grads), ((value, aux), grads) or (grads, aux), where plain grad
// returns grads; `out` gets a line saying which output is which, named as
// `kgrad run` prints them.
absl::StatusOr<FuncGraph*> GradientGraph(const ParsedArgs& args, Module& m, FuncGraph* g, GradOptions o,
                                         std::ostream& out) {
  o.has_aux = args.Has("has-aux");
  o.residuals = args.Get("residuals", "");
  if (!args.Has("value")) {
    KGRAD_ASSIGN_OR_RETURN(FuncGraph* grad, kgrad::Grad(m, g, o));
    if (o.has_aux) {
      out << "outputs: out_0 the gradients, out_1 the aux (as '" << g->name() << "' returns it)\n";
    }
    return grad;
  }
  if (o.sens_param) {
    return absl::InvalidArgumentError("--value differentiates with a sensitivity of ones; drop --sens or --value");
  }
  ValueAndGradOptions v;
  v.argnums = o.argnums;
  v.weights = o.weights;
  v.has_aux = o.has_aux;
  v.residuals = o.residuals;
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* grad, kgrad::ValueAndGrad(m, g, v));
  out << "outputs: " << (o.has_aux ? "out_0_0 the value, out_0_1 the aux" : "out_0 the value")
      << " (of '" << g->name() << "'), out_1 the gradients\n";
  return grad;
}

// Random arguments, with --input overrides (a .npy file or a scalar literal):
// float64 (`widen`), or floats in their declared dtype and the files' own.
absl::StatusOr<std::vector<Value>> CheckArguments(FuncGraph* g, const ParsedArgs& args, uint64_t seed,
                                                  bool widen) {
  std::vector<std::pair<int, std::string>> given;  // parameter index, value text
  std::vector<bool> is_given(g->parameters().size(), false);
  auto it = args.options.find("input");
  for (const std::string& s : it == args.options.end() ? std::vector<std::string>{} : it->second) {
    size_t eq = s.find('=');
    std::string name = s.substr(0, eq);
    int index = -1;
    for (size_t i = 0; i < g->parameters().size(); ++i) {
      if (g->parameters()[i]->name() == name) index = static_cast<int>(i);
    }
    if (eq == std::string::npos || index < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--input '", s, "': graph '", g->name(),
                                                     "' has no input named '", name, "'"));
    }
    given.push_back({index, s.substr(eq + 1)});
    is_given[index] = true;
  }
  KGRAD_ASSIGN_OR_RETURN(std::vector<Value> values, RandomArguments(g, seed, !widen, is_given));
  for (const auto& [index, text] : given) {
    KGRAD_ASSIGN_OR_RETURN(Value v, ReadOneInput(g->parameters()[index], text));
    values[index] = widen ? WidenToFloat64(v) : v;
  }
  return values;
}

// Every element of `v` (tuples flattened), widened to double.
void FlattenFloats(const Value& v, std::vector<double>* out) {
  if (v.is_tuple()) {
    for (const Value& e : v.tuple()) FlattenFloats(e, out);
    return;
  }
  if (!v.is_tensor()) return;
  const Tensor& t = v.tensor();
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    if (t.dtype() == DType::kFloat64) out->push_back(t.data<double>()[i]);
    if (t.dtype() == DType::kFloat32) out->push_back(t.data<float>()[i]);
  }
}

// A value of `v`'s structure whose tensors are all ones (the sensitivity of a
// value that is a tensor or a tuple of them).
absl::StatusOr<Value> OnesLike(const Value& v) {
  if (v.is_tuple()) {
    std::vector<Value> elems;
    for (const Value& e : v.tuple()) {
      KGRAD_ASSIGN_OR_RETURN(Value o, OnesLike(e));
      elems.push_back(std::move(o));
    }
    return Value::Tuple(std::move(elems));
  }
  if (!v.is_tensor()) {
    return absl::InvalidArgumentError(
        "--verify: the graph's value is not a tensor or a tuple of tensors");
  }
  KGRAD_ASSIGN_OR_RETURN(Tensor ones, Tensor::Full(v.tensor().dtype(), v.tensor().shape(), 1.0));
  return Value(std::move(ones));
}

// --verify: fwd then bwd (sensitivity one) against value_and_grad of `g` run
// whole, at random inputs (--input overrides, as check takes them).
absl::Status VerifySplit(const ParsedArgs& args, Module& m, FuncGraph* g, const SplitGradient& s,
                         const ValueAndGradOptions& v, std::ostream& out) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<Value> inputs, CheckArguments(g, args, 1, /*widen=*/false));
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* whole, ValueAndGrad(m, g, v));
  KGRAD_ASSIGN_OR_RETURN(Value want, RunGraph(whole, inputs));
  KGRAD_ASSIGN_OR_RETURN(Value fwd, RunGraph(s.fwd, inputs));
  std::vector<Value> bwd_args(fwd.tuple().begin() + 1, fwd.tuple().end());
  KGRAD_ASSIGN_OR_RETURN(Value ones, OnesLike(fwd.tuple()[0]));
  bwd_args.push_back(std::move(ones));
  KGRAD_ASSIGN_OR_RETURN(Value grads, RunGraph(s.bwd, bwd_args));
  std::vector<double> got, expected;
  FlattenFloats(fwd.tuple()[0], &got);
  FlattenFloats(grads, &got);
  FlattenFloats(want, &expected);
  if (got.size() != expected.size()) {
    return absl::InternalError(absl::StrCat("--verify: the split gives ", got.size(),
                                            " values, the whole ", expected.size()));
  }
  double worst = 0;
  size_t differ = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool same = got[i] == expected[i] || (got[i] != got[i] && expected[i] != expected[i]);
    differ += same ? 0 : 1;
    if (!same) worst = std::max(worst, std::abs(got[i] - expected[i]));
  }
  out << "verified: fwd then bwd against value_and_grad run whole, " << got.size()
      << " values: " << (differ == 0 ? std::string("all equal")
                                      : absl::StrCat(differ, " differ, by up to ", worst))
      << "\n";
  return absl::OkStatus();
}

// --split: fwd_<g> (the entry) and bwd_<g> written side by side, their
// residuals listed.
absl::Status SplitImpl(const ParsedArgs& args, Module& m, FuncGraph* g, const GradOptions& o,
                       std::ostream& out) {
  for (const char* flag : {"sens", "value", "has-aux"}) {
    if (args.Has(flag)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--split writes fwd (value and residuals) and bwd (residuals and the output "
          "sensitivity); drop --", flag));
    }
  }
  ValueAndGradOptions v;
  v.argnums = o.argnums;
  v.weights = o.weights;
  v.residuals = args.Get("residuals", "");
  KGRAD_ASSIGN_OR_RETURN(SplitGradient s, SplitGrad(m, g, v));
  m.set_entry(s.fwd);
  KGRAD_RETURN_IF_ERROR(SaveModelFile(m, args.Get("output")));
  out << "wrote " << args.Get("output") << ": graph '" << s.fwd->name() << "' (the entry, "
      << CountApplications(s.fwd) << " applications) returns (value, residuals...); graph '"
      << s.bwd->name() << "' (" << CountApplications(s.bwd) << " applications) takes "
      << "(residuals..., dout)\n";
  out << "residuals: " << s.residuals.size();
  if (s.residual_bytes >= (1 << 20)) {
    out << absl::StrFormat(" (%.3f MiB)", static_cast<double>(s.residual_bytes) / (1 << 20));
  } else if (s.residual_bytes >= 0) {
    out << " (" << s.residual_bytes << " bytes)";
  }
  out << ": " << absl::StrJoin(s.residuals, ", ") << "\n";
  if (args.Has("verify")) return VerifySplit(args, m, g, s, v, out);
  return absl::OkStatus();
}

absl::Status GradImpl(const ParsedArgs& args, std::ostream& out) {
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, LoadFileArgument(args, "grad", "OUT (.pb or .pbtxt)"));
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* g, SelectGraph(*m, args));
  KGRAD_ASSIGN_OR_RETURN(GradOptions o, ParseWrt(args.Get("wrt", "all"), *m, g));
  KGRAD_RETURN_IF_ERROR(ApplyRematOption(args, *m, g));
  if (args.Has("split")) return SplitImpl(args, *m, g, o, out);
  for (const char* flag : {"verify", "input"}) {
    if (args.Has(flag)) return absl::InvalidArgumentError(absl::StrCat("--", flag, " goes with --split"));
  }
  o.sens_param = args.Has("sens");
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* grad, GradientGraph(args, *m, g, o, out));
  if (args.Has("optimize")) {
    KGRAD_ASSIGN_OR_RETURN(std::string log, Optimize(*m, grad));
    out << "optimised: " << log << "\n";
  }
  m->set_entry(grad);
  KGRAD_RETURN_IF_ERROR(SaveModelFile(*m, args.Get("output")));
  out << "wrote " << args.Get("output") << ": graph '" << grad->name() << "' ("
      << CountApplications(grad) << " applications)\n";
  return absl::OkStatus();
}

absl::Status DotImpl(const ParsedArgs& args, std::ostream& out) {
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, LoadFileArgument(args, "dot"));
  if (args.Has("grad")) {
    KGRAD_ASSIGN_OR_RETURN(FuncGraph* g, SelectGraph(*m, args));
    KGRAD_ASSIGN_OR_RETURN(GradOptions o, ParseWrt(args.Get("wrt", "all"), *m, g));
    KGRAD_ASSIGN_OR_RETURN(FuncGraph* grad, kgrad::Grad(*m, g, o));
    if (args.Has("optimize")) {
      KGRAD_RETURN_IF_ERROR(Optimize(*m, grad).status());
    }
    // Only what the forward and the gradient graph reach: not the K-transform's
    // intermediate graphs.
    grad->set_public(true);
    m->CollectGarbage();
  }
  out << ToDot(*m);
  return absl::OkStatus();
}

absl::Status JvpImpl(const ParsedArgs& args, std::ostream& out) {
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, LoadFileArgument(args, "jvp", "OUT (.pb or .pbtxt)"));
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* g, SelectGraph(*m, args));
  JvpOptions o;
  o.optimize = !args.Has("no-optimize");
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* jvp, Jvp(*m, g, o));
  m->set_entry(jvp);
  KGRAD_RETURN_IF_ERROR(SaveModelFile(*m, args.Get("output")));
  out << "wrote " << args.Get("output") << ": graph '" << jvp->name() << "' (inputs x..., tangents x_dot...; "
      << CountApplications(jvp) << " applications)\n";
  return absl::OkStatus();
}


// --precision: the graph as it is (float32), value_and_grad run in float32 and
// float64 at the same inputs, compared node by node (tools/precision_report.h).
absl::Status PrecisionCheck(const ParsedArgs& args, std::ostream& out) {
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, LoadModule(args.positional[0], /*expand=*/true));
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* g, SelectGraph(*m, args));
  PrecisionOptions o;
  if (args.Has("seed") && !absl::SimpleAtoi(args.Get("seed"), &o.seed)) {
    return absl::InvalidArgumentError("--seed must be a number");
  }
  if (args.Has("top") && (!absl::SimpleAtoi(args.Get("top"), &o.top) || o.top < 1)) {
    return absl::InvalidArgumentError("--top must be a positive number");
  }
  o.weights = !args.Has("no-weights");
  KGRAD_ASSIGN_OR_RETURN(std::vector<Value> inputs, CheckArguments(g, args, o.seed, /*widen=*/false));
  KGRAD_ASSIGN_OR_RETURN(PrecisionReport report, ReportPrecision(*m, g, inputs, o));
  out << report.ToString(o.top);
  return absl::OkStatus();
}

absl::Status Check(const ParsedArgs& args, std::ostream& out, bool* passed) {
  if (args.positional.size() != 1) return absl::InvalidArgumentError("check takes one FILE");
  if (args.Has("precision")) {
    *passed = true;
    return PrecisionCheck(args, out);
  }
  // Differentiation operators are expanded after the conversion, so that their
  // expansions are float64 from the start.
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Module> original,
                         LoadModule(args.positional[0], /*expand=*/false));
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, ToFloat64(*original));
  KGRAD_RETURN_IF_ERROR(ExpandDifferentiation(*m).status());
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* g, SelectGraph(*m, args));
  GradCheckOptions o;
  // A model's relus and max-pools have kinks wherever values tie or sit at 0: no
  // derivative to check there (the report counts those directions).
  o.skip_kinks = true;
  int order = 1;
  if (args.Has("order") && (!absl::SimpleAtoi(args.Get("order"), &order) || order < 1 || order > 3)) {
    return absl::InvalidArgumentError("--order must be 1, 2 or 3");
  }
  o.order = order;
  o.residuals = args.Get("residuals", "");
  if (args.Has("seed")) {
    if (!absl::SimpleAtoi(args.Get("seed"), &o.seed)) return absl::InvalidArgumentError("--seed must be a number");
  } else {
    o.seed = std::random_device()() % 1000000;
  }
  KGRAD_ASSIGN_OR_RETURN(std::vector<Value> inputs, CheckArguments(g, args, o.seed, /*widen=*/true));
  KGRAD_ASSIGN_OR_RETURN(GradCheckReport report, CheckGradients(*m, g, inputs, o));
  out << report.ToString();
  out << (report.passed() ? "PASSED" : "FAILED") << " (rerun with --seed " << o.seed << ")\n";
  *passed = report.passed();
  return absl::OkStatus();
}

}  // namespace

int GradCommand(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  return CommandMain(argv, {"wrt", "output", "graph", "remat", "residuals", "input"},
                     {"sens", "optimize", "value", "has-aux", "split", "verify"}, GradImpl, out, err);
}

int DotCommand(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  return CommandMain(argv, {"wrt", "graph"}, {"grad", "optimize"}, DotImpl, out, err);
}

int JvpCommand(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  return CommandMain(argv, {"output", "graph"}, {"no-optimize"}, JvpImpl, out, err);
}

int CheckCommand(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  absl::StatusOr<ParsedArgs> args =
      ParseArgs(argv, {"order", "seed", "graph", "input", "top", "residuals"}, {"precision", "no-weights"});
  if (!args.ok()) return Fail(args.status(), err);
  bool passed = false;
  absl::Status s = Check(*args, out, &passed);
  if (!s.ok()) return Fail(s, err);
  return passed ? 0 : 1;
}

}  // namespace cli
}  // namespace kgrad
