#include "tools/cli_common.h"

#include <algorithm>
#include <cmath>
#include <sys/stat.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ad/expand_differentiation.h"
#include "ad/remat.h"
#include "backends/cpu/constant_evaluator.h"
#include "core/manager.h"
#include "core/passes/outline_residual_blocks.h"
#include "core/status_macros.h"
#include "core/value_walk.h"
#include "ops/registry.h"
#include "proto/model_io.h"
#include "proto/onnx/onnx_import.h"
#include "tools/npy.h"

namespace kgrad {
namespace cli {
namespace {

absl::StatusOr<std::pair<std::string, std::string>> SplitAssignment(const std::string& s,
                                                                   const char* flag) {
  size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " wants NAME=VALUE, got '", s, "'"));
  }
  return std::make_pair(s.substr(0, eq), s.substr(eq + 1));
}

absl::StatusOr<Value> ParseLiteral(const std::string& text, const AbstractScalar* want,
                                   const std::string& param) {
  DType t = want->dtype();
  if (t == DType::kBool) {
    if (text == "true" || text == "1") return Value(Scalar::Bool(true));
    if (text == "false" || text == "0") return Value(Scalar::Bool(false));
  } else if (IsFloating(t)) {
    double d;
    if (absl::SimpleAtod(text, &d)) return Value(Scalar::Float(d, t));
  } else {
    int64_t i;
    if (absl::SimpleAtoi(text, &i)) return Value(Scalar::Int(i, t));
  }
  return absl::InvalidArgumentError(absl::StrCat("input '", param, "' is a ", DTypeName(t),
                                                 " scalar; '", text, "' is not one"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Module>> LoadModule(const std::string& path, bool expand) {
  // ONNX import folds with the CPU kernels and leaves them on the module; a graph
  // file's module gets them here, once, for every later Optimize.
  if (absl::EndsWith(path, ".onnx")) return ImportOnnxFile(path, DefaultRegistry(), {});
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, LoadModelFile(path, DefaultRegistry()));
  m->set_constant_evaluator(&CpuConstantEvaluator::Get());
  if (expand) KGRAD_RETURN_IF_ERROR(ExpandDifferentiation(*m).status());
  return m;
}

absl::StatusOr<FuncGraph*> SelectGraph(Module& m, const ParsedArgs& args) {
  if (args.Has("graph")) {
    FuncGraph* g = m.FindGraph(args.Get("graph"));
    if (g == nullptr) return absl::NotFoundError(absl::StrCat("no graph named '", args.Get("graph"), "'"));
    return g;
  }
  if (m.entry() == nullptr) return absl::NotFoundError("the model names no entry graph");
  return m.entry();
}

absl::StatusOr<Value> ReadOneInput(const Parameter* p, const std::string& text) {
  const AbstractScalar* scalar = AsScalar(p->declared());
  if (scalar != nullptr && !absl::EndsWith(text, ".npy")) return ParseLiteral(text, scalar, p->name());
  KGRAD_ASSIGN_OR_RETURN(Tensor t, ReadNpyFile(text));
  return Value(std::move(t));
}

absl::StatusOr<std::vector<Value>> ReadInputs(FuncGraph* g, const ParsedArgs& args) {
  absl::flat_hash_map<std::string, std::string> given;
  auto it = args.options.find("input");
  if (it != args.options.end()) {
    for (const std::string& s : it->second) {
      KGRAD_ASSIGN_OR_RETURN(auto kv, SplitAssignment(s, "input"));
      given[kv.first] = kv.second;
    }
  }
  std::vector<Value> values;
  for (Parameter* p : g->parameters()) {
    auto v = given.find(p->name());
    if (v == given.end()) {
      return absl::InvalidArgumentError(absl::StrCat("graph '", g->name(), "' needs input '", p->name(),
                                                     "': pass --input ", p->name(), "=FILE.npy"));
    }
    KGRAD_ASSIGN_OR_RETURN(Value x, ReadOneInput(p, v->second));
    values.push_back(std::move(x));
    given.erase(v);
  }
  if (!given.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("graph '", g->name(), "' has no parameter named '",
                                                   given.begin()->first, "'"));
  }
  return values;
}

absl::StatusOr<absl::flat_hash_map<std::string, Tensor>> ReadWeightOverrides(const ParsedArgs& args) {
  absl::flat_hash_map<std::string, Tensor> out;
  auto it = args.options.find("weight");
  if (it == args.options.end()) return out;
  for (const std::string& s : it->second) {
    KGRAD_ASSIGN_OR_RETURN(auto kv, SplitAssignment(s, "weight"));
    KGRAD_ASSIGN_OR_RETURN(Tensor t, ReadNpyFile(kv.second));
    out[kv.first] = std::move(t);
  }
  return out;
}

std::string LeafName(const std::string& name, absl::Span<const size_t> path, int64_t ordinal) {
  if (path.size() > kMaxNamedDepth) return absl::StrCat(name, "_leaf", ordinal);
  std::string s = name;
  for (size_t i : path) absl::StrAppend(&s, "_", i);
  return s;
}

namespace {

// " min=.. max=.. mean=.." over the values that are not NaN, and how many are.
std::string Statistics(const Tensor& t) {
  int64_t n = t.NumElements();
  if (n == 0 || t.dtype() == DType::kBool) return "";
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  int64_t nans = 0;
  for (int64_t i = 0; i < n; ++i) {
    double x = t.ElementAsDouble(i);
    if (std::isnan(x)) {
      ++nans;
      continue;
    }
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
  }
  if (nans == n) return n == 1 ? " NaN" : absl::StrCat(" all ", n, " values NaN");
  std::string s = absl::StrCat(" min=", lo, " max=", hi, " mean=", sum / (n - nans));
  if (nans > 0) absl::StrAppend(&s, " (", nans, " of ", n, " NaN, left out)");
  return s;
}

// A rank-0 tensor holding `s` exactly (integers not through double).
Tensor ScalarTensor(const Scalar& s) {
  switch (s.dtype()) {
    case DType::kInt64: return Tensor::FromScalar<int64_t>(s.AsInt());
    case DType::kInt32: return Tensor::FromScalar<int32_t>(static_cast<int32_t>(s.AsInt()));
    case DType::kBool: return Tensor::FromScalar<bool>(s.AsBool());
    case DType::kFloat32: return Tensor::FromScalar<float>(static_cast<float>(s.AsDouble()));
    default: return Tensor::FromScalar<double>(s.AsDouble());
  }
}

}  // namespace

void PrintSummary(const Value& v, const std::string& name, std::ostream& out) {
  int64_t ordinal = 0;
  (void)ForEachLeaf(v, [&](const Value& leaf, absl::Span<const size_t> path) {
    std::string leaf_name = LeafName(name, path, ordinal++);
    if (!leaf.is_tensor()) {
      out << leaf_name << ": " << leaf.ToString() << "\n";
      return absl::OkStatus();
    }
    const Tensor& t = leaf.tensor();
    std::string values = t.DebugString(6);
    out << leaf_name << ": " << t.TypeString() << Statistics(t) << " "
        << values.substr(values.find('{')) << "\n";
    return absl::OkStatus();
  });
}

absl::Status WriteOutputs(const Value& v, const std::string& dir, const std::string& name) {
  mkdir(dir.c_str(), 0755);  // exists already: fine; cannot create: the write fails below
  int64_t ordinal = 0;
  return ForEachLeaf(v, [&](const Value& leaf, absl::Span<const size_t> path) -> absl::Status {
    std::string leaf_name = LeafName(name, path, ordinal++);
    if (leaf.is_scalar()) {
      return WriteNpyFile(ScalarTensor(leaf.scalar()), absl::StrCat(dir, "/", leaf_name, ".npy"));
    }
    if (!leaf.is_tensor()) {
      return absl::InvalidArgumentError(
          absl::StrCat(leaf_name, " is a ", leaf.TypeString(), ", not a tensor"));
    }
    return WriteNpyFile(leaf.tensor(), absl::StrCat(dir, "/", leaf_name, ".npy"));
  });
}

int Fail(const absl::Status& s, std::ostream& err) {
  err << "error: " << s.message() << "\n";
  return 1;
}

int CommandMain(const std::vector<std::string>& argv, const std::set<std::string>& with_value,
                const std::set<std::string>& switches, const CommandBody& body, std::ostream& out,
                std::ostream& err) {
  absl::StatusOr<ParsedArgs> args = ParseArgs(argv, with_value, switches);
  if (!args.ok()) return Fail(args.status(), err);
  absl::Status s = body(*args, out);
  return s.ok() ? 0 : Fail(s, err);
}

absl::StatusOr<std::unique_ptr<Module>> LoadFileArgument(const ParsedArgs& args, absl::string_view command,
                                                         absl::string_view output) {
  if (args.positional.size() != 1) return absl::InvalidArgumentError(absl::StrCat(command, " takes one FILE"));
  if (!output.empty() && !args.Has("output")) {
    return absl::InvalidArgumentError(absl::StrCat(command, " needs -o ", output));
  }
  return LoadModule(args.positional[0]);
}

// --remat POLICY: every graph that `g` reaches (not g itself) becomes a
// checkpointed segment whose bprop recomputes what the policy does not save
// (ad/remat.h). Applied before differentiating.
absl::Status ApplyRematOption(const ParsedArgs& args, Module& m, FuncGraph* g) {
  if (!args.Has("remat")) return absl::OkStatus();
  if (args.Get("remat") == "auto") {
    return absl::InvalidArgumentError(
        "--remat auto plans a training step under a memory budget, measured as it runs: "
        "kgrad bench FILE --grad --remat auto --memory-budget B");
  }
  absl::StatusOr<RematPolicy> policy = ParseRematPolicy(args.Get("remat"));
  if (!policy.ok()) return absl::InvalidArgumentError(absl::StrCat("--remat: ", policy.status().message()));
  // A flat graph (an imported model) has no called graphs to mark: its residual
  // blocks are outlined into called graphs first.
  if (m.manager().Reachable({g}).size() == 1) {
    KGRAD_RETURN_IF_ERROR(OutlineResidualBlocks(m, g, *policy).status());
  }
  return SetRematPolicy(m, g, *policy);
}

}  // namespace cli
}  // namespace kgrad
